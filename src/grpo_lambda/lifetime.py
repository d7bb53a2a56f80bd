"""A stage's processes end with the job that started them.

Snakemake runs a rule as ``bash -c "..."``; killing that shell (a cancelled job, a Ctrl-C that reaches
only the shell) leaves its children running, and a trainer left so would publish ``model/`` after
Snakemake has marked the job failed. Every rule's shell names its pid in ``GRPO_LAMBDA_JOB_PID`` (the
shell prefix in ``common.smk``); every process of the stage (each rank under ``accelerate launch`` too,
whose parent is the launcher, not the shell) watches it and exits when it is gone. Linux's parent-death
signal would cover only a direct parent, so the shell is polled instead.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

ENV = "GRPO_LAMBDA_JOB_PID"
HOST_ENV = "GRPO_LAMBDA_JOB_HOST"  # where that pid lives: on a job's other nodes (srun) it means nothing
EXIT_STATUS = 143  # as a process ended by SIGTERM
log = logging.getLogger(__name__)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (killed, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # no /proc: trust kill
        return True


def end_with_job_shell(interval: float = 2.0) -> int | None:
    """Exit this process once the shell named in GRPO_LAMBDA_JOB_PID is gone; returns that pid (None
    when the variable is unset, as when a stage is run by hand, or names a shell on another host)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise ValueError(f"{ENV}={text!r} is not a process id")
    pid = int(text)
    host = os.environ.get(HOST_ENV, "").strip()
    if host and host != socket.gethostname():
        return None  # SLURM ends this node's step with the job

    def watch():
        while alive(pid):
            time.sleep(interval)
        log.error("the job's shell (pid %d) is gone: the job was cancelled; stopping before anything more "
                  "is written", pid)
        logging.shutdown()
        os._exit(EXIT_STATUS)  # no cleanup that could publish: every output is written by rename

    threading.Thread(target=watch, name="end-with-job-shell", daemon=True).start()
    log.info("this process ends with its job's shell (pid %d)", pid)
    return pid
