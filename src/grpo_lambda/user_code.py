"""A user's own code named in a config as ``module:function`` (a reward of ``rl.rewards``, a variant's
``advantage_estimator``): imported as Python would from the folder the run starts in (the Snakemake working
directory) or PYTHONPATH, each failure one line naming the entry, and the digest of the file that defines it,
so that a cell trained with one version of it never resumes with another (the resume fingerprint)."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import inspect
import re
import sys
from pathlib import Path

# module.sub:function, as a config names a user's function.
PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def is_user_path(name) -> bool:
    """Whether ``name`` is written ``module:function``."""
    return isinstance(name, str) and bool(PATTERN.match(name))


def load(path: str, *, example: str):
    """The object ``module:function`` names; ValueError naming `path` (and `example` of the form) when it is not
    written so, its module does not import, or the module has no such name."""
    if not is_user_path(path):
        raise ValueError(f"{path!r} is not written module:function (e.g. {example})")
    module_name, name = path.split(":")
    if "" not in sys.path:
        sys.path.insert(0, "")  # the working directory, as `python -m` has it
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise ValueError(f"{path!r}: module {module_name!r} cannot be imported "
                         f"({type(error).__name__}: {error}); it must lie in the folder the run starts in or "
                         "on PYTHONPATH") from None
    found = getattr(module, name, None)
    if found is None:
        near = difflib.get_close_matches(name, [own for own, value in vars(module).items()
                                                if callable(value) and not own.startswith("_")], n=1)
        hint = f"; did you mean {module_name}:{near[0]}?" if near else ""
        raise ValueError(f"{path!r}: module {module_name!r} ({module.__file__}) has no {name!r}{hint}")
    return found


def source_file(function) -> Path | None:
    """The file that defines ``function`` (None when it has none: a builtin)."""
    try:
        source = inspect.getsourcefile(function)
    except TypeError:
        return None
    return Path(source) if source else None


def module_file(path: str) -> Path | None:
    """The file of the module ``module:function`` names (imported already by `load`)."""
    source = getattr(sys.modules.get(path.split(":")[0]), "__file__", None)
    return Path(source) if source else None


def _digest(source: Path | None) -> str | None:
    return hashlib.sha256(source.read_bytes()).hexdigest() if source else None


def source_digest(function) -> str | None:
    """The sha256 of the file that defines ``function`` (None when it has none: a builtin)."""
    return _digest(source_file(function))


def module_digest(path: str) -> str | None:
    """The sha256 of the file of the module ``module:function`` names (imported already by `load`)."""
    return _digest(module_file(path))
