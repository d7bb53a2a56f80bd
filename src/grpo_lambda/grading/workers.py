"""The worker processes that run the symbolic comparisons with a hard time limit: a worker that overruns
is killed and replaced, so the limit holds in threads and in subprocesses alike (math-verify's own
timeouts use SIGALRM, which works only in a main thread).

A worker loads this package's folder by path (see ``_WORKER_BOOT``), so it imports neither
``grpo_lambda`` nor its dependencies; every import here and in the modules it uses is relative.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

from .symbolic import _math_verify_equal, _sympy_or_math_verify_equal

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 1.0
"""Wall-clock seconds one symbolic comparison (sympy, then math-verify) may take before it counts as
wrong: the worker gives up at 90% of it and is killed at 100%."""
WORKER_START_TIMEOUT = 120.0
"""Seconds a new worker may take to import sympy and math-verify."""


class _SoftTimeout(BaseException):
    """Raised in a worker when a comparison runs out of time (BaseException: library code that
    catches Exception must not swallow it)."""


def _raise_soft_timeout(signum, frame):
    raise _SoftTimeout


def _serve(request_fd: int, reply_fd: int) -> None:
    """Worker main loop: answer (answer, gold, seconds) requests with a bool until the parent goes."""
    import resource

    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    # A runaway expansion raises MemoryError here instead of exhausting the machine.
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(4 << 30, hard) if hard > 0 else 4 << 30, hard))
    signal.signal(signal.SIGALRM, _raise_soft_timeout)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; EOF ends the loop
    requests, replies = Connection(request_fd, writable=False), Connection(reply_fd, readable=False)
    _math_verify_equal("1", "1")  # import and warm up before declaring readiness
    replies.send("ready")
    while True:
        try:
            answer, gold, seconds = requests.recv()
        except (EOFError, OSError):
            return
        verdict = False
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, seconds)
                verdict = _sympy_or_math_verify_equal(answer, gold)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except (_SoftTimeout, Exception):
            verdict = False
        replies.send(bool(verdict))


# Loads this package's folder by path, as a package of another name whose ``__init__`` is not run, so a
# worker imports neither grpo_lambda nor its dependencies (the relative imports resolve inside it).
_WORKER_BOOT = (
    "import importlib, sys, types\n"
    "package = types.ModuleType('_grpo_lambda_grader_worker')\n"
    "package.__path__ = [sys.argv[1]]\n"
    "sys.modules[package.__name__] = package\n"
    "module = importlib.import_module(package.__name__ + '.workers')\n"
    "module._serve(int(sys.argv[2]), int(sys.argv[3]))\n"
)


class _Worker:
    """One grader process. A plain subprocess rather than multiprocessing: it can be started from a
    daemonic process and never re-imports the caller's ``__main__``."""

    def __init__(self):
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT, os.path.dirname(os.path.abspath(__file__)),
                 str(request_read), str(reply_write)],
                pass_fds=(request_read, reply_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            for fd in (request_read, request_write, reply_read, reply_write):
                os.close(fd)
            raise
        os.close(request_read)
        os.close(reply_write)
        self.requests = Connection(request_write, readable=False)
        self.replies = Connection(reply_read, writable=False)
        self.ready = False
        self.alive = True

    def _wait_until_ready(self) -> None:
        try:
            if self.replies.poll(WORKER_START_TIMEOUT) and self.replies.recv() == "ready":
                self.ready = True
                return
        except (EOFError, OSError):
            pass
        self.kill()
        raise RuntimeError("the grader worker process failed to start (its error, if any, is on stderr)")

    def compare(self, answer: str, gold: str, timeout: float) -> bool:
        """The worker's verdict, or False when it takes over ``timeout`` seconds (it is then killed)."""
        if not self.ready:
            self._wait_until_ready()
        try:
            # The worker stops itself a little early, which saves restarting it; the kill is the guarantee.
            self.requests.send((answer, gold, 0.9 * timeout))
            if self.replies.poll(timeout):
                return bool(self.replies.recv())
        except (EOFError, OSError):
            pass
        log.debug("grader worker overran %.2f s or died; replacing it", timeout)
        self.kill()
        return False

    def kill(self) -> None:
        self.alive = False
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.requests.close()
        self.replies.close()


class _WorkerPool:
    """Idle workers shared by all threads; a killed worker is replaced at once so that its successor
    imports sympy while the caller goes on."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._owned: list[_Worker] = []
        self._pid = os.getpid()

    def _forget_after_fork(self) -> None:
        # A forked child must not talk to its parent's workers; it starts its own.
        if os.getpid() != self._pid:
            self._idle, self._owned, self._pid = [], [], os.getpid()

    def _new_worker(self) -> _Worker:
        worker = _Worker()
        self._owned.append(worker)
        return worker

    def acquire(self) -> _Worker:
        with self._lock:
            self._forget_after_fork()
            return self._idle.pop() if self._idle else self._new_worker()

    def release(self, worker: _Worker) -> None:
        with self._lock:
            self._forget_after_fork()
            if worker not in self._owned:
                return
            if not worker.alive:
                self._owned.remove(worker)
                worker = self._new_worker()
            self._idle.append(worker)

    def close(self) -> None:
        """Stop every worker (they restart on demand)."""
        with self._lock:
            self._forget_after_fork()
            for worker in self._owned:
                worker.kill()
            self._idle, self._owned = [], []


_POOL = _WorkerPool()
atexit.register(_POOL.close)


def allocated_cpus() -> int:
    """The CPUs this job was given: SLURM's per-task count, else the process's CPU affinity. On a
    cluster node ``os.cpu_count()`` counts the whole node, which other jobs share."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def close_workers() -> None:
    """Stop the grader's worker processes now (they are also stopped at exit)."""
    _POOL.close()


@functools.lru_cache(maxsize=8192)
def _symbolic_equal(answer: str, gold: str, timeout: float) -> bool:
    # Cached: the completions of one RL group often repeat the same wrong answer.
    worker = _POOL.acquire()
    try:
        return worker.compare(answer, gold, timeout)
    finally:
        _POOL.release(worker)


def _symbolic_match(answer: str, golds: list[str], timeout: float) -> bool:
    return any(_symbolic_equal(answer, gold, timeout) for gold in golds)
