"""Check the project's dependency pins: one set of versions, every import declared, locks that match.

    python scripts/check_pins.py             the checks below that need no network (a test runs them)
    python scripts/check_pins.py --resolve   also resolve the GPU set for a GPU machine and re-lock, from PyPI
    python scripts/check_pins.py --lock      rewrite envs/lock-*.txt from the requirement files (uv pip compile)

Prints one line per check and exits 1 on a failure. The files:
  envs/requirements-cpu.txt       the CPU set (tests, CI, the default run, Snakemake on a cluster)
  envs/requirements-gpu.txt       the grid's jobs on GPUs;  envs/requirements-vllm-cpu.txt  the rehearsal's jobs
  envs/requirements-verl-cpu.txt  verl with the package's GRPO-λ loss (grpo_lambda.integrations.verl)
  envs/extra-<name>.txt           optional extras scripts/setup.sh installs on request (wandb, tensorboard)
  envs/lock-cpu.txt, envs/lock-vllm-cpu.txt, envs/lock-verl-cpu.txt   every version scripts/setup.sh installs (uv's lock)
Checks without network: every requirement line is an exact `name==version` pin; the sets agree on every
package they share (vllm-cpu standing for vllm), except where a line says "differs from" and why; every
module the package imports is a dependency in pyproject.toml, each dependency pinned in the sets that need
it and inside pyproject's range; each lock holds every pin of its files at the same version (and no CUDA
build in a CPU lock); the running environment, when it is the project's .venv, has the lock's versions.
With --resolve, from PyPI (metadata only): the GPU set resolves for Linux x86_64 (glibc 2.31, Python 3.11)
as pip would there; vLLM lies inside TRL's `vllm` extra; torch is the one vLLM pins; transformers lies
inside vLLM's range; deepspeed meets TRL's `deepspeed` extra (it ships no wheel: checked by version);
torch's CUDA wheels are the CUDA the file names; and re-locking changes no lock.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
ENVS = ROOT / "envs"
CPU, GPU, VLLM_CPU = ENVS / "requirements-cpu.txt", ENVS / "requirements-gpu.txt", ENVS / "requirements-vllm-cpu.txt"
VERL_CPU = ENVS / "requirements-verl-cpu.txt"
CONSTRAINTS = ENVS / "constraints-cpu.txt"
PACKAGE = ROOT / "src" / "grpo_lambda"
# pip matches --platform tags exactly: every manylinux tag a glibc 2.31 machine (the oldest vLLM's
# dependencies accept: llguidance) accepts is listed.
GLIBC_MINOR = 31
PLATFORM = [*(option for tag in [*(f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 4, -1)),
                                 "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
              for option in ("--platform", tag)),
            "--python-version", "3.11", "--only-binary=:all:"]
SOURCE_ONLY = {"deepspeed"}  # no wheels on PyPI: resolved apart, by version
# A package's other builds: the CPU vLLM set's vllm-cpu is vLLM compiled for CPUs, compared as vllm.
BUILDS = {"vllm-cpu": "vllm"}
# Packages the code needs without importing them: the libraries that call them are told to.
USED_NOT_IMPORTED = {"tensorboardx": "transformers' TensorBoard callback (the default tracker)",
                     "tabulate": "pandas' to_markdown", "jinja2": "pandas' to_latex"}
# pyproject's optional extras -> the set that pins them.
EXTRA_SETS = {"workflow": CPU, "test": CPU, "vllm": GPU, "verl": VERL_CPU}
DIFFERS = "differs from"


@dataclass(frozen=True)
class Lock:
    """A lock file and what it is compiled from (scripts/setup.sh installs the same)."""

    path: Path
    requirements: tuple[Path, ...]
    overrides: Path | None = None
    cpu_only: bool = True


def locks() -> list[Lock]:
    return [Lock(ENVS / "lock-cpu.txt", (CPU, *sorted(ENVS.glob("extra-*.txt")))),
            Lock(ENVS / "lock-vllm-cpu.txt", (VLLM_CPU,), ENVS / "overrides-vllm-cpu.txt"),
            Lock(ENVS / "lock-verl-cpu.txt", (VERL_CPU,), ENVS / "overrides-verl-cpu.txt")]


def requirement_lines(path: Path) -> list[tuple[str, str]]:
    """(requirement, comment) of every requirement line."""
    found = []
    for line in path.read_text().splitlines():
        requirement, _, comment = line.partition("#")
        if requirement.strip() and not requirement.strip().startswith("-"):
            found.append((requirement.strip(), comment.strip()))
    return found


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line (names as pip compares them)."""
    found = {}
    for text, _ in requirement_lines(path):
        requirement = Requirement(text)
        if "==" in str(requirement.specifier):
            found[canonicalize_name(requirement.name)] = str(requirement.specifier).removeprefix("==")
    return found


def set_pins(path: Path) -> dict[str, str]:
    """pins(path) with each build under its package's name (vllm-cpu as vllm)."""
    return {BUILDS.get(name, name): version for name, version in pins(path).items()} if path.exists() else {}


def stated_differences(path: Path) -> dict[str, str]:
    """name -> the reason a line gives for differing from another set ("differs from ...: why")."""
    names = (canonicalize_name(Requirement(text).name) for text, _ in requirement_lines(path))
    return {BUILDS.get(name, name): comment for name, (_, comment) in zip(names, requirement_lines(path))
            if DIFFERS in comment}


# ---- checks without network ----------------------------------------------------------------------

def unpinned(paths: list[Path]) -> list[str]:
    """`file: line` of every requirement that is not one exact version."""
    bad = []
    for path in paths:
        for text, _ in requirement_lines(path):
            specifier = str(Requirement(text).specifier)
            if not re.fullmatch(r"==[^,*]+", specifier):
                bad.append(f"{path.name}: {text}")
    return bad


def disagreements(first: Path, second: Path) -> tuple[dict, dict]:
    """(unexplained, explained): name -> (first's version, second's) for every shared package pinned at two
    versions; explained when either line says why ("differs from ...")."""
    a, b = set_pins(first), set_pins(second)
    reasons = {**stated_differences(first), **stated_differences(second)}
    unexplained, explained = {}, {}
    for name in sorted(set(a) & set(b)):
        if a[name] != b[name]:
            (explained if name in reasons else unexplained)[name] = (a[name], b[name])
    return unexplained, explained


def imported_distributions(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Top-level module -> the files that import it, for every import in the package that is neither the
    standard library nor the package itself (imports inside functions included)."""
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != package.name:
                    found.setdefault(top, set()).add(str(path.relative_to(package.parent)))
    return found


def distribution_of(module: str) -> set[str]:
    """The distributions that provide a top-level module in this environment; its own name when none is
    installed (vllm on a CPU machine)."""
    provided = metadata.packages_distributions().get(module)
    return {canonicalize_name(name) for name in provided} if provided else {canonicalize_name(module)}


def pyproject_requirements() -> dict[str, list[Requirement]]:
    """'' -> the core dependencies, and each optional extra -> its requirements."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"": [Requirement(text) for text in project["dependencies"]],
            **{extra: [Requirement(text) for text in texts]
               for extra, texts in project.get("optional-dependencies", {}).items()}}


def undeclared_imports(declared: set[str], imports: dict[str, set[str]]) -> list[str]:
    return [f"{module} (imported by {', '.join(sorted(files))})" for module, files in sorted(imports.items())
            if not distribution_of(module) & declared]


def dependency_problems(requirements: dict[str, list[Requirement]]) -> list[str]:
    """A dependency that a set needing it does not pin, or pins outside pyproject's range."""
    problems = []
    needing = {"": [CPU, GPU, VLLM_CPU], **{extra: [path] for extra, path in EXTRA_SETS.items()}}
    for extra, listed in requirements.items():
        sets = needing.get(extra) or [ENVS / f"extra-{extra}.txt"]
        for requirement in listed:
            name = canonicalize_name(requirement.name)
            for path in sets:
                version = set_pins(path).get(name)
                where = f"pyproject {'[' + extra + ']' if extra else 'dependency'} {requirement}"
                if version is None:
                    problems.append(f"{where}: not pinned in {path.relative_to(ROOT)}")
                elif Version(version) not in requirement.specifier:
                    problems.append(f"{where}: {path.relative_to(ROOT)} pins {version}")
    return problems


def lock_pins(path: Path) -> dict[str, str]:
    return pins(path) if path.exists() else {}


def lock_problems(lock: Lock) -> list[str]:
    """Pins of the lock's requirement files the lock lacks or holds at another version; a CUDA build in it."""
    if not lock.path.exists():
        return [f"{lock.path.relative_to(ROOT)} is missing: python scripts/check_pins.py --lock"]
    locked = lock_pins(lock.path)
    problems = []
    for path in lock.requirements:
        for name, version in pins(path).items():
            if name == "torch":
                continue  # installed first, alone, under envs/constraints-cpu.txt (the local CPU build)
            if locked.get(name) != version:
                problems.append(f"{path.name} pins {name} {version}, {lock.path.name} "
                                f"{locked.get(name, 'lacks it')}")
    cuda = sorted(name for name in locked if name == "torch" or name.startswith("nvidia-") or name == "cuda-toolkit")
    if lock.cpu_only and cuda:
        problems.append(f"{lock.path.name} holds {', '.join(cuda)}: a CUDA build, or torch's local CPU build "
                        "that only this machine's wheel folder has (torch stays in envs/constraints-cpu.txt)")
    return problems


def installed_mismatches(lock: Lock) -> list[str] | None:
    """Installed packages whose version is not the lock's; None when this interpreter is not .venv."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        return None
    locked = lock_pins(lock.path)
    return [f"{name} {dist.version} (lock: {locked[name]})" for dist in metadata.distributions()
            if (name := canonicalize_name(dist.metadata["Name"])) in locked and dist.version != locked[name]]


# ---- locking and resolving (network) -------------------------------------------------------------

def pip_sources(local: bool = True) -> list[str]:
    """The package sources pip is configured with (uv does not read pip's configuration); without the local
    wheel folders when ``local`` is False (they may hold a CPU build of torch that a GPU machine would not get)."""
    keys = ("index-url", "extra-index-url", "find-links") if local else ("index-url", "extra-index-url")
    options = []
    for key in keys:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "get", f"global.{key}"], capture_output=True,
                              text=True)
        if done.returncode == 0:
            options += [item for value in done.stdout.split() for item in (f"--{key}", value)]
    return options


def compile_lock(lock: Lock, output: Path) -> None:
    """uv pip compile the lock's requirement files into ``output``; pins already in ``output`` are kept
    where they still fit (uv's preferences), so re-locking an up-to-date lock changes nothing."""
    command = [sys.executable, "-m", "uv", "pip", "compile", "--quiet", *map(str, lock.requirements),
               "-c", str(CONSTRAINTS), *(["--overrides", str(lock.overrides)] if lock.overrides else []),
               "--index-strategy", "unsafe-best-match", *pip_sources(), "--python-version", "3.11",
               "--no-emit-package", "torch", "--custom-compile-command", "python scripts/check_pins.py --lock",
               "-o", str(output)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"FAIL lock {lock.path.name}:\n{done.stderr[-3000:]}")


# What pip prints when a download, not the pins, went wrong: a wheel whose bytes do not hash to the index's
# sha256 (a corrupted transfer, seen once in CI) or a dropped connection.
TRANSIENT = ("DO NOT MATCH THE HASHES", "Connection broken", "Read timed out", "IncompleteRead",
             "ConnectionError", "Max retries exceeded")
RESOLVE_ATTEMPTS = 3


def resolve_gpu(lines: list[str], run=subprocess.run) -> dict[str, dict]:
    """name -> metadata of every package pip picks for the GPU platform. A failed download is tried again,
    past pip's cache (which may hold the bad bytes); a resolution that fails on the pins fails at once."""
    with tempfile.TemporaryDirectory() as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text("\n".join(lines) + "\n")
        for attempt in range(1, RESOLVE_ATTEMPTS + 1):
            done = run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                        "--quiet", "--report", f"{scratch}/report.json", "--target", f"{scratch}/target",
                        *(["--no-cache-dir"] if attempt > 1 else []),
                        *PLATFORM, *pip_sources(local=False), "-r", str(requirements)],
                       capture_output=True, text=True, timeout=900)
            transient = any(sign in done.stderr for sign in TRANSIENT)
            if done.returncode == 0 or not transient or attempt == RESOLVE_ATTEMPTS:
                break
            print(f"note resolve: a download failed (attempt {attempt} of {RESOLVE_ATTEMPTS}), trying again",
                  file=sys.stderr)
        if done.returncode:
            raise SystemExit(f"FAIL resolve {GPU.name} for a GPU machine"
                             f"{f' ({attempt} attempts, each a failed download)' if transient else ''}:\n"
                             f"{done.stderr[-3000:]}")
        report = json.loads((Path(scratch) / "report.json").read_text())
    return {canonicalize_name(item["metadata"]["name"]): item["metadata"] for item in report["install"]}


def requirement_of(metadata_: dict, name: str, extra: str | None = None) -> Requirement:
    for text in metadata_.get("requires_dist", []):
        requirement = Requirement(text)
        in_extra = requirement.marker is not None and f'extra == "{extra}"' in str(requirement.marker)
        if requirement.name.lower() == name and (in_extra if extra else requirement.marker is None
                                                 or "extra" not in str(requirement.marker)):
            return requirement
    raise LookupError(f"{metadata_['name']} {metadata_['version']} does not require {name}" +
                      (f" in its {extra!r} extra" if extra else ""))


# ---- the report ----------------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.failed = False

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")


def static_checks(report: Report) -> None:
    requirement_files = [CPU, GPU, VLLM_CPU, VERL_CPU, *sorted(ENVS.glob("extra-*.txt"))]
    bad = unpinned(requirement_files)
    report.check("every requirement pinned", not bad,
                 f"{len(requirement_files)} files, each line name==version" if not bad else "; ".join(bad))
    for first, second in ((CPU, GPU), (CPU, VLLM_CPU), (GPU, VLLM_CPU), (CPU, VERL_CPU)):
        unexplained, explained = disagreements(first, second)
        shared = len(set(set_pins(first)) & set(set_pins(second)))
        said = "; ".join(f"{name} {a} vs {b}, the reason stated" for name, (a, b) in explained.items())
        report.check(f"{first.name} and {second.name} agree", not unexplained,
                     f"{shared - len(explained)} of {shared} shared packages at one version" + (f"; {said}" if said else "")
                     if not unexplained else f"{unexplained} differ with no '{DIFFERS} ...: reason' on either line")
    requirements = pyproject_requirements()
    declared = {canonicalize_name(r.name) for listed in requirements.values() for r in listed}
    imports = imported_distributions()
    undeclared = undeclared_imports(declared, imports)
    missing_used = sorted(name for name in USED_NOT_IMPORTED if name not in declared)
    report.check("every import declared", not undeclared and not missing_used,
                 f"{len(imports)} third-party modules imported by the package, and "
                 f"{', '.join(USED_NOT_IMPORTED)} (used, not imported), are pyproject dependencies"
                 if not undeclared and not missing_used else
                 f"not in pyproject.toml: {'; '.join(undeclared + [f'{n} ({USED_NOT_IMPORTED[n]})' for n in missing_used])}")
    problems = dependency_problems(requirements)
    report.check("every dependency pinned in range", not problems,
                 "each pyproject dependency pinned, inside its range, in every set that needs it" if not problems
                 else "; ".join(problems))
    for lock in locks():
        problems = lock_problems(lock)
        report.check(f"{lock.path.name} matches its requirements", not problems,
                     f"{len(lock_pins(lock.path))} packages; every pin of "
                     f"{', '.join(path.name for path in lock.requirements)} at its version" if not problems
                     else "; ".join(problems))
    mismatches = installed_mismatches(locks()[0])
    if mismatches is not None:
        report.check("this environment is the lock's", not mismatches,
                     f"{sys.prefix}: every installed package the lock names at the lock's version" if not mismatches
                     else f"run scripts/setup.sh cpu: {'; '.join(mismatches)}")


def resolve_checks(report: Report) -> None:
    gpu = pins(GPU)
    lines = [text for text, _ in requirement_lines(GPU) if canonicalize_name(Requirement(text).name) not in SOURCE_ONLY]
    resolved = resolve_gpu(lines)
    report.check("resolve", True, f"{GPU.name} resolves for Linux x86_64 / Python 3.11 from PyPI ({len(resolved)} packages)")
    trl, vllm, torch = resolved["trl"], resolved["vllm"], resolved["torch"]
    extra = requirement_of(trl, "vllm", "vllm")
    report.check("vllm in TRL's range", Version(gpu["vllm"]) in extra.specifier,
                 f"vllm {gpu['vllm']}; trl {trl['version']} [vllm] asks for {extra.specifier}")
    wanted_torch = requirement_of(vllm, "torch")
    report.check("torch is vLLM's", Version(gpu["torch"]) in wanted_torch.specifier and torch["version"] == gpu["torch"],
                 f"torch {gpu['torch']} (resolved {torch['version']}); vllm {vllm['version']} asks for {wanted_torch.specifier}")
    wanted_transformers = requirement_of(vllm, "transformers")
    report.check("transformers in vLLM's range", Version(gpu["transformers"]) in wanted_transformers.specifier,
                 f"transformers {gpu['transformers']}; vllm asks for {wanted_transformers.specifier}")
    floor = requirement_of(trl, "deepspeed", "deepspeed")
    report.check("deepspeed meets TRL's floor", Version(gpu["deepspeed"]) in floor.specifier,
                 f"deepspeed {gpu['deepspeed']}; trl [deepspeed] asks for {floor.specifier}")
    # torch names its CUDA as the cuda-toolkit it depends on (CUDA 13 builds) or as nvidia-*-cuNN wheels.
    depends = [Requirement(text) for text in torch.get("requires_dist", [])]
    toolkit = [str(r.specifier).removeprefix("==") for r in depends if r.name == "cuda-toolkit"]
    majors = sorted({re.search(r"-cu(\d+)$", r.name).group(1) for r in depends if re.search(r"^nvidia-.*-cu\d+$", r.name)})
    named = re.search(r"CUDA (\d+)\.(\d+)", GPU.read_text())
    said = f"{named.group(1)}.{named.group(2)}" if named else "(nothing)"
    report.check("CUDA as the file says", bool(named) and majors == [named.group(1)]
                 and all(version.startswith(said + ".") for version in toolkit),
                 f"torch {torch['version']} depends on cuda-toolkit {toolkit or '-'} and nvidia-*-cu{'/'.join(majors)} "
                 f"wheels; the file says CUDA {said}")
    for lock in locks():
        with tempfile.TemporaryDirectory() as scratch:
            again = Path(scratch) / lock.path.name
            shutil.copy(lock.path, again)
            compile_lock(lock, again)
            changed = sorted(set(lock_pins(again).items()) ^ set(lock_pins(lock.path).items()))
        report.check(f"{lock.path.name} is current", not changed,
                     "re-locking from the requirement files changes no version" if not changed
                     else f"re-locking changes {changed}: python scripts/check_pins.py --lock")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resolve", action="store_true", help="also resolve the GPU set and re-lock (PyPI)")
    parser.add_argument("--lock", action="store_true", help="rewrite envs/lock-*.txt, then check")
    args = parser.parse_args(argv)
    if args.lock:
        for lock in locks():
            compile_lock(lock, lock.path)
            print(f"wrote {lock.path.relative_to(ROOT)}")
    report = Report()
    static_checks(report)
    if args.resolve:
        resolve_checks(report)
    if report.failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
