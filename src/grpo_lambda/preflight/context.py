"""What every preflight check is handed (``Context``), the two ways a check ends other than ok (``Skip``,
``Fail``), and a stage's command run with its output in a log file and its progress reported."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

# A slow check's running stage is reported this often (seconds), so that a long stage never looks hung.
PROGRESS_SECONDS = 30
DEFAULT_STUDY = "config/config.yaml"


class Skip(Exception):
    """The check does not apply here; its message says why."""


class Fail(Exception):
    """The check failed; its message says what to do."""


class Context:
    """A check's inputs: the config, --cpu, the work folder, the study's config; the visible GPUs; where its
    progress lines go."""

    def __init__(self, config: dict, *, cpu: bool, work: Path, study_config: str | None, out=print):
        import torch

        # --cpu without --study-config: the small built-in study (SMALL_STUDY)
        self.small_study = cpu and study_config is None
        self.config, self.cpu, self.work, self.study_config = config, cpu, work, study_config or DEFAULT_STUDY
        self.gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        self.study_results: Path | None = None  # the study's results folder, once it ran
        self.out, self.check = out, ""  # where progress lines go, and the check that prints them

    def progress(self, text: str) -> None:
        self.out(f"  .. {self.check:14} {text}")


def run_logged(command: list[str], log: Path, *, timeout: float, progress=None) -> None:
    """Run a command with its output in `log`; Fail with the log's last line when it exits non-zero.
    ``progress`` (a callable taking a line) hears every PROGRESS_SECONDS how long it has run and the log's last
    line. Ctrl-C ends the command before it reaches the caller."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
           "HF_DATASETS_OFFLINE": os.environ.get("HF_DATASETS_OFFLINE", "1")}
    start = time.monotonic()
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                try:
                    code = process.wait(timeout=PROGRESS_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if elapsed > timeout:
                        raise Fail(f"{' '.join(command[1:3])} ran past {timeout:.0f} s (log: {log})") from None
                    if progress is not None:
                        last = last_line(log)[:120]
                        progress(f"{elapsed:.0f} s" + (f": {last}" if last else ", nothing logged yet"))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    if code:
        raise Fail(f"{' '.join(command[1:4])} exited {code}: {last_line(log)} (log: {log})")


def last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""
