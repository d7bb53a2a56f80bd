"""The checks in their order, run one after another with a line each, and the verdict: go, or no-go naming what
failed; the JSON record of every number, written after every check."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from grpo_lambda.preflight import node, step_ratio, study, vllm_colocate
from grpo_lambda.preflight.context import Context, Fail, Skip

# Each check: a function of the Context returning (reason, details), or raising Skip or Fail. Their order is the
# order they run in: the fast ones first, then the slow ones (SLOW).
RUNS = {"versions": node.check_versions, "cuda": node.check_cuda, "bf16": node.check_bf16,
        "all-reduce": node.check_all_reduce, "hub": node.check_hub, "disk": node.check_disk,
        "step-ratio": step_ratio.check_step_ratio, "study": study.check_study,
        "vllm-colocate": vllm_colocate.check_vllm_colocate}
CHECKS = tuple(RUNS)
SLOW = ("step-ratio", "study", "vllm-colocate")


def run(config: dict, *, cpu: bool = False, quick: bool = False, skip=(), work: str = "results/preflight",
        study_config: str | None = None, out=print, save=None) -> dict:
    """Run the checks in order, printing one line each; the record (verdict, checks) is returned, and given to
    ``save`` after every check. Once a check fails the slow ones are skipped (the verdict is no-go already).
    Ctrl-C ends the check under way as failed and the rest as skipped: the record says ``interrupted``."""
    context = Context(config, cpu=cpu, work=Path(work), study_config=study_config, out=out)
    context.work.mkdir(parents=True, exist_ok=True)
    checks = []
    interrupted = False
    for name in CHECKS:
        start = time.perf_counter()
        details = {}
        failed = next((check["name"] for check in checks if check["status"] == "fail"), None)
        if interrupted:
            status, reason = "skip", "interrupted"
        elif name in skip:
            status, reason = "skip", "--skip"
        elif quick and name in SLOW:
            status, reason = "skip", "--quick"
        elif failed and name in SLOW:
            status, reason = "skip", f"{failed} failed: no-go already, the slow checks are left out"
        else:
            context.check = name
            try:
                reason, details = RUNS[name](context)
                status = "ok"
            except Skip as why:
                status, reason = "skip", str(why)
            except Fail as why:
                status, reason = "fail", str(why)
            except KeyboardInterrupt:
                status, reason, interrupted = "fail", "interrupted (Ctrl-C)", True
            except Exception as error:  # a check that breaks is a failed check, not a broken preflight
                status, reason = "fail", f"{type(error).__name__}: {error}"
        seconds = time.perf_counter() - start
        checks.append({"name": name, "status": status, "reason": reason, "seconds": round(seconds, 1),
                       "details": details})
        out(f"{status:4} {name:14} {reason} ({seconds:.0f} s)")
        if save is not None:
            save(_record(checks, cpu=cpu, quick=quick, interrupted=interrupted, complete=False))
    record = _record(checks, cpu=cpu, quick=quick, interrupted=interrupted, complete=True)
    counts = record["counts"]
    skipped = ", ".join(check["name"] for check in checks if check["status"] == "skip")
    out(f"preflight: {record['verdict']} ({counts['ok']} ok, {counts['fail']} failed, {counts['skip']} skipped"
        + (f": {skipped})" if skipped else ")") + (", interrupted" if interrupted else ""))
    if not cpu and not context.gpus and not interrupted:
        out("preflight: this machine has no GPU: pass --cpu to check it as a CPU node "
            "(grpo-lambda preflight --cpu answers in minutes)")
    if save is not None:
        save(record)
    return record


def _record(checks: list[dict], *, cpu: bool, quick: bool, interrupted: bool, complete: bool) -> dict:
    """The JSON record of the checks so far; ``complete`` False while checks remain (a partial record)."""
    counts = {status: sum(check["status"] == status for check in checks) for status in ("ok", "fail", "skip")}
    verdict = "no-go" if counts["fail"] or interrupted else ("go" if complete else "unfinished")
    return {"verdict": verdict, "host": socket.gethostname(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cpu": cpu, "quick": quick, "interrupted": interrupted, "complete": complete, "counts": counts,
            "checks": list(checks)}


def write(record: dict, path: Path) -> None:
    from grpo_lambda import files

    files.write_json(path, record)
