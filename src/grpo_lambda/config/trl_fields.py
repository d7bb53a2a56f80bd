"""TRL's config fields, read from the source of GRPOLambdaConfig and its bases (TRL's GRPOConfig,
transformers' TrainingArguments) without importing them: their literal defaults and their annotations,
which the ``rl.trl`` keys are checked (``checks``) and typed (``loading``) against; and the fields the
pipeline sets itself."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path


# Set by the pipeline itself (grpo_lambda.train.build_config): rl.trl may not override them.
PIPELINE_TRL_KEYS = {"output_dir": None, "max_steps": "rl.max_steps", "seed": "seeds",
                     "logging_steps": None, "logging_nan_inf_filter": None, "save_strategy": None,
                     "save_steps": "rl.save_steps", "save_total_limit": None, "report_to": None,
                     "reward_weights": "the weights of rl.rewards",
                     # the launcher reads these from rl (a server for rl.vllm_mode: server), not from rl.trl
                     "use_vllm": "rl.use_vllm", "vllm_mode": "rl.vllm_mode",
                     "vllm_server_base_url": None, "vllm_group_port": None}


# A base class imported from a package that re-exports it lazily -> the module that defines it.
_REEXPORTED = {("transformers", "TrainingArguments"): "transformers.training_args",
               ("trl", "GRPOConfig"): "trl.trainer.grpo_config"}


def _class_fields(module: str, class_name: str, seen=()) -> dict:
    """The dataclass fields of ``module.class_name`` and its bases, with their literal defaults, read
    from the source without importing it (importing TRL takes seconds)."""
    origin = _module_file(module)
    package = module if origin.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(origin.read_text(encoding="utf-8"))
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module
            for alias in node.names:
                imported[alias.asname or alias.name] = base
    fields = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for parent in node.bases:
                name = ast.unparse(parent)
                if name in imported and name not in seen:
                    parent_module = _REEXPORTED.get((imported[name], name), imported[name])
                    fields.update(_class_fields(parent_module, name, seen + (name,)))
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields[item.target.id] = (_literal_default(item.value), item.annotation)
            return fields
    raise LookupError(f"class {class_name} not found in {origin}")


def _module_file(module: str) -> Path:
    """The source file of ``module``, found without importing its packages (find_spec would)."""
    top, *rest = module.split(".")
    folder = Path(importlib.util.find_spec(top).submodule_search_locations[0]).joinpath(*rest)
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


def _literal_default(value):
    if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("field"):
        value = next((kw.value for kw in value.keywords if kw.arg == "default"), None)
    try:
        return ast.literal_eval(value) if value is not None else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def _trl_fields() -> dict:
    return _class_fields("grpo_lambda.trainer_config", "GRPOLambdaConfig")


def trl_config_fields() -> dict:
    """GRPOLambdaConfig's fields (TRL's GRPOConfig, transformers' TrainingArguments and ours) with
    their literal defaults (None where the default is not a literal)."""
    return {name: default for name, (default, _) in _trl_fields().items()}


# A name in a field's annotation -> the YAML values it takes (int for float: YAML writes 1 for 1.0).
_ANNOTATION_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,), "dict": (dict,),
                     "list": (list,), "Dict": (dict,), "List": (list,), "None": (type(None),)}


def _accepted_types(annotation: ast.expr) -> tuple | None:
    """The Python types a YAML value of a field annotated so may have; None where the annotation names
    something else (an enum, a config class), which is then left for TRL to check."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = _accepted_types(annotation.left), _accepted_types(annotation.right)
        return None if left is None or right is None else left + right
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return (type(None),)
    if isinstance(annotation, ast.Name):
        return _ANNOTATION_TYPES.get(annotation.id)
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value)
        members = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if outer in ("Optional", "Union"):
            found = [_accepted_types(member) for member in members]
            return None if None in found else sum(found, ()) + ((type(None),) if outer == "Optional" else ())
        if outer == "Literal":
            return tuple({type(member.value) for member in members if isinstance(member, ast.Constant)})
        return _ANNOTATION_TYPES.get(outer)
    return None


def trl_type_error(key: str, value) -> str | None:
    """Why ``value`` cannot be GRPOLambdaConfig's field ``key`` (by its annotation), or None."""
    annotation = _trl_fields()[key][1]
    types = _accepted_types(annotation)
    if types is None:
        return None
    is_bool = isinstance(value, bool)
    if any(isinstance(value, kind) and (kind is bool or not is_bool) for kind in types):
        return None
    return f"is {value!r} ({type(value).__name__}); TRL's field is {ast.unparse(annotation)}"
