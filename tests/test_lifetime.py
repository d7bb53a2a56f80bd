"""grpo_lambda.lifetime: a stage's process ends when its job's shell is killed, before it writes more."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from grpo_lambda import lifetime

STAGE = """
import sys, time
from grpo_lambda import lifetime
lifetime.end_with_job_shell(interval=0.1)
print("started", flush=True)
time.sleep(float(sys.argv[2]))
open(sys.argv[1], "w").write("published")
"""


def _job(tmp_path, sleep):
    """A job as Snakemake runs it: a shell that names itself in GRPO_LAMBDA_JOB_PID, then the stage."""
    script = tmp_path / "stage.py"
    script.write_text(STAGE)
    out = tmp_path / "model"
    shell = subprocess.Popen(["bash", "-c", f'GRPO_LAMBDA_JOB_PID=$$ {sys.executable} {script} {out} {sleep}; true'],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert shell.stdout.readline().strip() == "started"
    stage = int(subprocess.run(["pgrep", "-P", str(shell.pid)], capture_output=True, text=True).stdout.split()[0])
    return shell, stage, out


def _wait_gone(pid, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not lifetime.alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_killing_the_jobs_shell_ends_the_stage_before_it_publishes(tmp_path):
    shell, stage, out = _job(tmp_path, sleep=3)
    os.kill(shell.pid, signal.SIGKILL)  # left unreaped for a moment: a zombie counts as gone
    time.sleep(0.5)
    assert not lifetime.alive(shell.pid)
    shell.wait()
    assert _wait_gone(stage, 2.0), "the stage outlived its job's shell"
    assert not out.exists()  # gone before its sleep ended, so it never publishes (no need to wait that sleep out)


def test_a_live_shell_lets_the_stage_finish(tmp_path):
    shell, stage, out = _job(tmp_path, sleep=0.5)
    assert shell.wait(timeout=30) == 0
    assert out.read_text() == "published"


def test_unset_means_run_by_hand_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.delenv(lifetime.ENV, raising=False)
    assert lifetime.end_with_job_shell() is None
    monkeypatch.setenv(lifetime.ENV, "12x")
    with pytest.raises(ValueError, match="GRPO_LAMBDA_JOB_PID='12x'"):
        lifetime.end_with_job_shell()


def test_a_pipeline_job_follows_its_shell(tmp_path):
    """Snakemake's shell prefix hands every job its shell's pid; the stage's log says it follows it."""
    from conftest import ROOT

    target = "results/data/arith.jsonl"
    done = subprocess.run([sys.executable, "-m", "snakemake", target, "--cores", "1", "--snakefile",
                           str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
                           str(ROOT / "config" / "config.yaml")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [log] = (tmp_path / "results" / "logs").rglob("*.log")
    assert re.search(r"this process ends with its job's shell \(pid \d+\)", log.read_text()), log.read_text()


def test_a_shell_on_another_host_is_not_followed(monkeypatch):
    """On a multi-node job's other nodes (srun) the shell's pid names nothing there: SLURM ends those steps."""
    monkeypatch.setenv(lifetime.ENV, "1")  # pid 1 is alive here, so following it would start a watcher
    monkeypatch.setenv(lifetime.HOST_ENV, "another-node")
    assert lifetime.end_with_job_shell() is None
