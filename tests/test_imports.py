"""The package's own imports: no module imports itself through others (an import circle), no module is
only a second name for other modules, and planning the workflow imports no plotting library."""

from __future__ import annotations

import ast
import graphlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "grpo_lambda"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The package's modules that ``path`` (module ``name``) imports, at module level or inside a
    function: ``from grpo_lambda.x import y`` names module ``grpo_lambda.x.y`` when there is one, else
    ``grpo_lambda.x``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for candidate in candidates:
            # `import grpo_lambda.a.b` (or a name inside a module): the longest known module it names
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate.startswith("grpo_lambda") and candidate != name:
                targets.add(candidate)
    return targets


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imported(path, name, set(found)) for name, path in found.items()}


def test_the_import_graph_is_read_from_the_sources():
    graph = import_graph()
    # a module-level import, a function-level one and a `from package import module`
    assert "grpo_lambda.stats" in graph["grpo_lambda.tables.learning_speed"]
    assert "grpo_lambda.provenance" in graph["grpo_lambda.tables.collect"]
    assert "grpo_lambda.tables.write" in graph["grpo_lambda.cli.outputs"]


def test_no_module_imports_itself_through_others():
    sorter = graphlib.TopologicalSorter(import_graph())
    try:
        sorter.prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"import circle: {' -> '.join(error.args[1])}") from None


def _only_reexports(path: Path) -> bool:
    """The module's body is imports, a docstring and ``__all__``, with at least one import."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    names_all = [node for node in body if isinstance(node, (ast.Assign, ast.AnnAssign))
                 and all(getattr(target, "id", None) == "__all__"
                         for target in (node.targets if isinstance(node, ast.Assign) else [node.target]))]
    imports = [node for node in body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return bool(imports) and len(imports) + len(names_all) == len(body)


def test_no_module_only_reexports_others():
    # A package's __init__ may gather the package's public names: it is the package's face, not a
    # second name for a module (the grader is `grpo_lambda.grading`, the tables `grpo_lambda.tables`).
    shims = [name for name, path in modules().items() if path.name != "__init__.py" and _only_reexports(path)]
    assert not shims, f"modules that only re-export others (import from where the names are defined): {shims}"


def smk_imports() -> list[str]:
    """The top-level import statements of the Snakefile and its rule files (what planning imports)."""
    statements = []
    for path in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        lines = iter(path.read_text(encoding="utf-8").splitlines())
        for line in lines:
            if re.match(r"(import|from)\s", line):
                while line.count("(") > line.count(")"):
                    line += " " + next(lines).strip()
                statements.append(line)
    return statements


def test_planning_the_workflow_imports_no_plotting_or_training_library():
    statements = smk_imports()
    assert any("grpo_lambda.tables" in statement for statement in statements), statements
    check = "import sys\n" + "\n".join(statements) + "\nprint(sorted({'matplotlib', 'torch'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"planning imports {done.stdout.strip()}"


# The maths of the objectives and of OAR's weights: pure torch, so that they can be read, tested and reused
# without TRL, transformers or the rest of the training stack.
TORCH_ONLY = ("grpo_lambda.traces", "grpo_lambda.objectives", "grpo_lambda.oar_scores")


def test_the_maths_modules_load_nothing_beyond_torch():
    check = ("import sys\nimport torch\nbefore = set(sys.modules)\n"
             + "".join(f"import {name}\n" for name in TORCH_ONLY)
             + "loaded = {name.split('.')[0] for name in set(sys.modules) - before}\n"
             + "print(sorted(loaded - set(sys.stdlib_module_names) - {'grpo_lambda'}))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"importing {', '.join(TORCH_ONLY)} loads {done.stdout.strip()} besides torch"
