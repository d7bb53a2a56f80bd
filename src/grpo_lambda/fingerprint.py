"""What a resumable stage was started with, so that a rerun with other settings never resumes it.

A cell's ``resume/fingerprint.json`` records a hash of its settings (the stage's settings JSON and
the seed), of the base model folder, of the training data, of the code that trains (``training_modules``:
every module of the package that ``train.py`` and ``sft.py`` import, transitively, found by reading their
imports, so a module added to training is hashed without being listed) and of the versions of the
libraries that compute it (``TRAINING_LIBRARIES``). Code that only reads results (tables, figures,
status) is not imported by training, so changing it never retrains a cell. A run whose fingerprint
differs moves the old state aside, kept, as ``superseded-<old hash>/`` (its ``resume/``,
``checkpoints/``, ``train_log.csv`` and ``model/``), and starts fresh; with the same fingerprint it
resumes, unless ``GRPO_LAMBDA_FRESH=1`` asks for a fresh start (``snakemake --forcerun train`` cannot
tell a training job why it runs).

The base model is hashed cheaply but honestly: every file's name and size, small files (configs,
tokenizer) in full, and for each large file (weights) its first, middle and last MiB, so a model
saved again with other weights changes the hash without reading gigabytes.

Where an input came from the hub, the commit ``prefetch`` recorded for it (``source_revisions``) is part
of the base and data parts too, and of the cell's provenance: the training set's, from its prepared
file's summary; the base model's, from a hub snapshot folder's name or from the ``provenance.json``
beside an SFT model, which records the hub model it was made from.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import logging
import os
import time
from pathlib import Path

from grpo_lambda import files

log = logging.getLogger(__name__)

FILE_NAME = "fingerprint.json"
CHUNK = 1 << 20  # files up to this size are hashed in full; larger ones by three samples of it
# Folders and files of a cell that belong to one set of settings.
CELL_STATE = ("resume", "checkpoints", "train_log.csv", "model", "provenance.json")
FRESH_ENV = "GRPO_LAMBDA_FRESH"
# Settings that change nothing a cell computes: its labels, and under rl: how often the full state is
# saved, where metrics are sent and which completions are kept. A change to them resumes the cell
# instead of restarting it (hours of GPU at paper scale). rl.logging_steps is not here: it decides which
# steps train_log.csv holds. The evaluation checkpoints are not either: a step already trained past
# could never get its snapshot.
DISPLAY_KEYS = {"variant": ("label",), "rl": ("save_steps", "report_to", "log_completions")}
# The stages that train: the code hashed is these modules and every module of the package they import.
TRAINING_ENTRY = ("train", "sft")
TRAINING_LIBRARIES = ("torch", "transformers", "trl", "accelerate", "peft", "deepspeed")
PARTS = ("settings", "base", "data", "code", "libraries")
PACKAGE = Path(__file__).resolve().parent


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= 3 * CHUNK:
            digest.update(handle.read())
        else:
            for offset in (0, size // 2, size - CHUNK):
                handle.seek(offset)
                digest.update(handle.read(CHUNK))
    return f"{size}:{digest.hexdigest()}"


def path_digest(path: str | os.PathLike) -> str:
    """A digest of a file, of every file under a folder (names, sizes, sampled contents), or of the
    text itself when ``path`` is not on disk (a hub id)."""
    path = Path(path)
    if path.is_file():
        return _file_digest(path)
    if not path.is_dir():
        return "name:" + str(path)
    digest = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(f"{child.relative_to(path).as_posix()}\0{_file_digest(child)}\n".encode())
    return digest.hexdigest()


def settings_digest(settings: dict) -> str:
    relevant = {key: ({k: v for k, v in value.items() if k not in DISPLAY_KEYS[key]}
                      if key in DISPLAY_KEYS and isinstance(value, dict) else value)
                for key, value in settings.items()}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def _source(package: Path, module: str) -> Path | None:
    """The file of ``module`` (a dotted name under the package) in ``package``, or None when it names no
    module (``from grpo_lambda.grading import REWARDS``: an attribute of grading)."""
    base = package.joinpath(*module.split(".")[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _imports(path: Path, module: str) -> set[str]:
    """Every module name an import in the file may load, those inside functions included (the stages
    import their heavy modules lazily); ``from a import b`` yields ``a`` and ``a.b``, either may be a module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level
                    else node.module)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def training_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Module name -> source file of every module of ``package`` that TRAINING_ENTRY imports, transitively,
    with the packages that hold them (importing ``a.b`` runs ``a/__init__.py``)."""
    root = package.name
    found: dict[str, Path] = {}
    pending = [f"{root}.{name}" for name in TRAINING_ENTRY]
    while pending:
        module = pending.pop()
        if module in found or module.split(".")[0] != root:
            continue
        path = _source(package, module)
        if path is None:
            continue
        found[module] = path
        parts = module.split(".")
        pending += [".".join(parts[:end]) for end in range(1, len(parts))]
        pending += sorted(_imports(path, module))
    return found


def code_digest(package: Path = PACKAGE) -> str:
    """A digest of the training modules' sources (``training_modules``), by their text."""
    digest = hashlib.sha256()
    for path in sorted(training_modules(package).values()):
        digest.update(f"{path.relative_to(package).as_posix()}\0".encode() + path.read_bytes() + b"\n")
    return digest.hexdigest()


def library_versions() -> dict:
    """The installed version of each of TRAINING_LIBRARIES (None where one is not installed)."""
    from importlib import metadata

    versions = {}
    for name in TRAINING_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def model_revision(folder: str | os.PathLike) -> dict | None:
    """The hub model and commit behind a model folder: a hub cache snapshot (``models--org--name/snapshots/
    <commit>``), or an SFT model whose ``provenance.json`` (beside it) records its base; None otherwise."""
    path = Path(folder)
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        return {"id": path.parent.parent.name[len("models--"):].replace("--", "/"), "commit": path.name}
    record = _read_json(path.parent / "provenance.json")
    base = (record.get("revisions") or {}).get("base") if isinstance(record, dict) else None
    return base if isinstance(base, dict) else None


def source_revisions(base: str | os.PathLike, data_path: str | os.PathLike) -> dict:
    """``{"base": ..., "data": ...}``: the hub revision of each input that came from the hub (none: {})."""
    revisions = {}
    summary = _read_json(Path(data_path).with_suffix(".summary.json"))  # prepare's summary beside the data
    if isinstance(summary, dict) and isinstance(summary.get("source"), dict):
        revisions["data"] = summary["source"]
    base_revision = model_revision(base)
    if base_revision:
        revisions["base"] = base_revision
    return revisions


def _with_revision(digest: str, revision: dict | None) -> str:
    if revision is None:
        return digest  # no hub input: the part as it always was, so local studies keep their fingerprints
    return hashlib.sha256(f"{digest}\0{json.dumps(revision, sort_keys=True)}".encode()).hexdigest()


def compute(settings: dict, *, seed: int, base: str, data_path: str, user_code: dict | None = None) -> dict:
    """The fingerprint of one run: its parts, their combined ``hash`` (16 hex digits) and the hub
    ``revisions`` of its inputs (when any came from the hub). ``user_code``: the digests of the user's own code
    the settings name (`user_code_sources`), hashed with the settings; recorded on their own too, with the
    digest of the settings alone (``stage_settings``), outside the hash, so that `claim` can say which changed."""
    revisions = source_revisions(base, data_path)
    user_code = user_code or {}
    parts = {"settings": settings_digest({**settings, **user_code, "seed": seed}),
             "base": _with_revision(path_digest(base), revisions.get("base")),
             "data": _with_revision(path_digest(data_path), revisions.get("data")), "code": code_digest(),
             "libraries": hashlib.sha256(json.dumps(library_versions(), sort_keys=True).encode()).hexdigest()}
    combined = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    told_apart = {"stage_settings": settings_digest({**settings, "seed": seed}),
                  **({"user_code": user_code} if user_code else {})}
    return {"hash": combined, **parts, **told_apart, **({"revisions": revisions} if revisions else {})}


def user_code_sources(settings: dict) -> dict:
    """The digests of the user's own code a train stage's settings name, so that a cell trained with one version
    of it never resumes with another: ``user_reward_sources`` (each ``module:function`` of ``rl.rewards``: the
    file that defines it) and ``user_estimator_sources`` (the variant's ``advantage_estimator`` when it is a
    ``module:function``: its module's file and the file that defines the function). Only those present: {} when
    the settings name no code of the user's."""
    from grpo_lambda import user_code
    from grpo_lambda.grading import reward

    found = {}
    if isinstance(settings.get("rl"), dict):
        rewards = reward.source_digest(reward.reward_specs(settings["rl"]))
        if rewards:
            found["user_reward_sources"] = rewards
    estimator = (settings.get("variant") or {}).get("advantage_estimator")
    if user_code.is_user_path(estimator):
        from grpo_lambda.advantages import user_estimator

        function = user_estimator(estimator).function  # imports the module
        found["user_estimator_sources"] = {estimator: [user_code.module_digest(estimator),
                                                       user_code.source_digest(function)]}
    return found


def user_code_files(settings: dict) -> list[str]:
    """The files of the user's own code a train stage's settings name (those `user_code_sources` digests), relative
    to the working folder when they lie under it: the train rule's inputs, so that editing one reruns exactly the
    cells that train with it."""
    from grpo_lambda import user_code
    from grpo_lambda.grading import reward

    found = []
    if isinstance(settings.get("rl"), dict):
        found += [user_code.source_file(reward.user_reward(spec["name"]))
                  for spec in reward.reward_specs(settings["rl"]) if user_code.is_user_path(spec["name"])]
    estimator = (settings.get("variant") or {}).get("advantage_estimator")
    if user_code.is_user_path(estimator):
        from grpo_lambda.advantages import user_estimator

        found += [user_code.module_file(estimator), user_code.source_file(user_estimator(estimator).function)]
    here = Path.cwd()
    return sorted({str(path.resolve().relative_to(here)) if path.resolve().is_relative_to(here) else str(path.resolve())
                   for path in found if path})


def _user_code_changes(old: dict, new: dict) -> list[str]:
    """The entries (``module:function``) of the user's code whose files differ between two fingerprints."""
    def flat(record):
        return {name: digest for kind in (record.get("user_code") or {}).values() for name, digest in kind.items()}

    before, after = flat(old), flat(new)
    return sorted(name for name in {*before, *after} if before.get(name) != after.get(name))


def _changed(old: dict | None, new: dict) -> list[str]:
    """What differs between the fingerprint a cell's state was made with and this run's, in words."""
    changed = [part for part in PARTS if not old or old.get(part) != new.get(part)]
    if old and "settings" in changed and "stage_settings" in old and "stage_settings" in new:
        # the settings part hashes the user's code too: say which of the two changed
        changed.remove("settings")
        code = _user_code_changes(old, new)
        changed[:0] = ((["settings"] if old["stage_settings"] != new["stage_settings"] else [])
                       + ([f"user code ({', '.join(code)})"] if code else []))
    return changed


def recorded(state_dir: str | os.PathLike) -> dict | None:
    path = Path(state_dir) / FILE_NAME
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _wait_for(state_dir: Path, expected: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while (recorded(state_dir) or {}).get("hash") != expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{state_dir}: the main process did not record fingerprint {expected} "
                               f"within {timeout:.0f} s")
        time.sleep(0.2)


def fresh_requested() -> bool:
    return os.environ.get(FRESH_ENV, "").strip() not in ("", "0")


def _move_aside(cell: Path, names: list[str], label: str) -> Path:
    aside = cell / f"superseded-{label}"
    suffix = 1
    while aside.exists():
        aside, suffix = cell / f"superseded-{label}-{suffix}", suffix + 1
    aside.mkdir(parents=True)
    for name in names:
        os.replace(cell / name, aside / name)
    return aside


def claim(cell_dir: str | os.PathLike, fingerprint: dict, *, state_dir: str = "resume",
          fresh: bool | None = None) -> None:
    """Make ``cell_dir`` hold only state made with ``fingerprint``, then record it in ``state_dir``.

    State left by other settings (or by a run that recorded none), or any state when ``fresh`` (default:
    GRPO_LAMBDA_FRESH is set), is moved to ``superseded-<its hash>/`` beside it; state with the same
    fingerprint is left to resume from.
    """
    cell = Path(cell_dir)
    if int(os.environ.get("RANK", "0")) != 0:  # under accelerate launch: the main process moves state
        _wait_for(cell / state_dir, fingerprint["hash"])
        return
    fresh = fresh_requested() if fresh is None else fresh
    old = recorded(cell / state_dir)
    same = old is not None and old.get("hash") == fingerprint["hash"]
    if same and not fresh:
        return
    present = [name for name in CELL_STATE if (cell / name).exists()]
    if present:
        label = old.get("hash", "unrecorded") if old else "unrecorded"
        aside = _move_aside(cell, present, label)
        if same:
            why = f"{FRESH_ENV} asks for a fresh start"
        else:
            changed = _changed(old, fingerprint)
            why = f"the {' and '.join(changed) or 'fingerprint'} changed since its state was made"
        log.warning("%s: %s (fingerprint %s, now %s); moved %s to %s and starting fresh", cell, why, label,
                    fingerprint["hash"], ", ".join(present), aside)
    files.write_json(cell / state_dir / FILE_NAME, fingerprint)
