"""Where a grid stands: one line per RL cell (done / running / failed / stalled / missing) and totals.

Reads only what the pipeline writes, so it works on a results tree that a running grid, local or on a
cluster's shared disk, is writing:

    <results>/<model>/<dataset>/<variant>/seed<seed>/model/          the final model: done
    <results>/<model>/<dataset>/<variant>/seed<seed>/train_log.csv   one row per logged step, rewritten
                                                                    atomically while the cell trains
    <results>/logs/train/<model>/<dataset>/<variant>/seed<seed>.log  the job's log: why it failed

    <results>/<model>/<dataset>/<variant>/seed<seed>/.lock           the trainer's pid and host
    <results>/logs/evaluate/<model>/<dataset>/<variant>/seed<seed>/<step>.log  an evaluation job's log

A trained cell is done, or failed when one of its evaluation jobs failed (its log ends in an error and
a benchmark's summary is missing). With the hf backend the train job evaluates the final model itself: a
failure there fails the train job, whose log names it. A cell that is not trained is failed when its job log ends in an
error; stalled when its trainer ran on this host and its process is gone (a killed job: a rerun
resumes it), or when nothing has been written for ``stale_minutes`` (a trainer on another host);
running when its log or train_log.csv was written within ``stale_minutes``; missing when nothing of it
exists.

A cell the results tree holds (a folder or a job log) that the config given does not name, as when the
grid ran with an overlay left out here, is listed too, after the config's, as ``not in this config``: a
failed or stalled cell is never hidden by the config status reads.
"""

from __future__ import annotations

import csv
import math
import re
import socket
import statistics
import time
from pathlib import Path

from grpo_lambda import config as config_module
from grpo_lambda import layout
from grpo_lambda.lifetime import alive

STATES = ("done", "running", "failed", "stalled", "missing")
# The states that need someone: a failed cell, and a stalled one (its trainer gone, or silent), which only a rerun
# resumes; `grpo-lambda status` exits 1 when a cell is in one.
NEEDS_ATTENTION = ("failed", "stalled")
# A log line that names why a job ended: an exception, the OOM killer, a scheduler's cancel.
_FAILURE = re.compile(r"^\w+(\.\w+)*(Error|Exception|Interrupt)\b|\bKilled\b|out of memory|CANCELLED")
# Steps whose time makes the speed and the time left (the newest ones).
_SPEED_WINDOW = 10


def cell_name(cell: dict) -> str:
    """The cell's folder in the results folder, which names it in the job logs too."""
    return layout.cell(cell["model"], cell["dataset"], cell["variant"], cell["seed"])


def read_train_log(path: Path) -> list[dict]:
    """The rows of a train_log.csv ({} values parsed as floats where they are numbers); [] if absent."""
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return []
    return [{key: _number(value) for key, value in row.items()} for row in rows]


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def failure_line(log_path: Path) -> str | None:
    """The last line of a job log that says why the job failed, or None if the log shows no failure."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines()]
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    for line in reversed(lines):
        if _FAILURE.search(line):
            return line
    if "Traceback (most recent call last):" in lines:
        return "a traceback without its exception line: see the log"
    return None


def trainer_gone(folder: Path) -> int | None:
    """The pid of the cell's trainer when its lock (``files.exclusive``) names a process on this host that
    no longer exists; None when it is alive, on another host, or unrecorded."""
    try:
        match = re.fullmatch(r"pid (\d+) on (\S+)", (folder / ".lock").read_text().strip())
    except OSError:
        return None
    if match is None or match[2] != socket.gethostname():
        return None
    pid = int(match[1])
    return None if alive(pid) else pid


def evaluation_failure(results: Path, cell: dict, benchmarks: list[str]) -> str | None:
    """Why an evaluation of the cell failed: the failure line of a step's job log whose benchmark
    summaries are not all written; None when none failed."""
    folder = results / cell_name(cell)
    logs = results / "logs" / "evaluate" / cell_name(cell)
    for log_path in sorted(logs.glob("*.log")) if logs.is_dir() else []:
        step = log_path.stem
        written = all((folder / "eval" / step / f"{name}.json").is_file() for name in benchmarks)
        reason = None if written else failure_line(log_path)
        if reason:
            return f"evaluation of {step} failed: {reason}  ({log_path})"
    return None


def cell_status(results: Path, cell: dict, max_steps: int | None, *, now: float, stale_minutes: float,
                benchmarks: list[str] = ()) -> dict:
    """One cell's state and what a watcher wants to know about it."""
    name = cell_name(cell)
    folder = results / name
    log_path = results / "logs" / "train" / f"{name}.log"
    train_log = folder / layout.TRAIN_LOG
    rows = read_train_log(train_log)
    status = {"cell": name, "folder": str(folder), "max_steps": max_steps, "step": None, "reward": None,
              "steps_per_minute": None, "eta_minutes": None, "reason": None, "log": None}
    blocking = next((path for path in (folder, *folder.parents) if path.is_file()), None)
    if blocking is not None:  # no job can write this cell until the file is moved
        status["state"], status["reason"] = "failed", f"{blocking} is a file where a folder should be"
        return status
    if rows:
        last = rows[-1]
        status["step"] = int(last["step"]) if last.get("step") is not None else None
        status["reward"] = last.get("reward")
        times = [row["step_time"] for row in rows[-_SPEED_WINDOW:] if _finite(row.get("step_time"))]
        if times and statistics.fmean(times) > 0:
            seconds_per_step = statistics.fmean(times)
            status["steps_per_minute"] = 60.0 / seconds_per_step
            if status["step"] is not None and max_steps is not None:
                status["eta_minutes"] = max(0, max_steps - status["step"]) * seconds_per_step / 60.0
    if (folder / "model").is_dir() and train_log.is_file():
        status["state"] = "done"
        status["eta_minutes"] = 0.0
        evaluation = evaluation_failure(results, cell, list(benchmarks))
        if evaluation:
            status["state"], status["reason"] = "failed", evaluation
        return status
    reason = failure_line(log_path)
    written = [path.stat().st_mtime for path in (log_path, train_log) if path.exists()]
    started = written or (folder / "resume").is_dir()
    if log_path.exists():
        status["log"] = str(log_path)
    gone = trainer_gone(folder)
    if reason:
        status["state"], status["reason"] = "failed", reason
    elif gone is not None:
        status["state"], status["reason"] = "stalled", f"its trainer (pid {gone}) is gone"
    elif written and now - max(written) <= stale_minutes * 60:
        status["state"] = "running"
    elif started:
        status["state"] = "stalled"
        status["reason"] = (f"nothing written for {(now - max(written)) / 60:.0f} min" if written
                            else "a resume/ folder but no log")
    else:
        status["state"] = "missing"
    return status


def _finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def tree_cells(results: Path) -> list[dict]:
    """The RL cells the results tree holds: a ``<model>/<dataset>/<variant>/seed<N>`` folder or a training job's
    log ``logs/train/<model>/<dataset>/<variant>/seed<N>.log``. An SFT model of ``sft.seeds``
    (``<model>/<dataset>/sft/seed<N>``) is not one."""
    found = set()
    for path in results.glob("*/*/*/seed*"):
        if (path.parts[-4] != "logs" and path.parts[-2] != layout.SFT_FOLDER and path.is_dir()
                and re.fullmatch(r"seed\d+", path.name)):
            found.add((*path.parts[-4:-1], int(path.name[4:])))
    for path in (results / "logs" / "train").glob("*/*/*/seed*.log"):
        if re.fullmatch(r"seed\d+", path.stem):
            found.add((*path.parts[-4:-1], int(path.stem[4:])))
    return [{"model": model, "dataset": dataset, "variant": variant, "seed": seed}
            for model, dataset, variant, seed in sorted(found)]


def grid_status(config: dict, *, results: str | None = None, stale_minutes: float = 30.0,
                now: float | None = None) -> dict:
    """Every RL cell of the config with its state, and the count of cells in each state; ``others``: the cells
    of the results tree that the config does not name (their step count unknown)."""
    results_dir = Path(results or config["results"])
    now = time.time() if now is None else now
    benchmarks = list(config["benchmarks"])
    configured = config_module.rl_cells(config)
    cells = [cell_status(results_dir, cell, config_module.rl_settings(config, cell["model"])["max_steps"],
                         now=now, stale_minutes=stale_minutes, benchmarks=benchmarks)
             for cell in configured]
    named = {cell_name(cell) for cell in configured}
    others = [cell_status(results_dir, cell, None, now=now, stale_minutes=stale_minutes, benchmarks=benchmarks)
              for cell in tree_cells(results_dir) if cell_name(cell) not in named]
    totals = {state: sum(cell["state"] == state for cell in cells) for state in STATES}
    report = {"results": str(results_dir), "cells": cells, "totals": {"cells": len(cells), **totals}}
    if others:
        report["others"] = others
    # A mistyped --results looks like a grid that has not started: say which it is.
    if not results_dir.is_dir():
        report["warning"] = f"{results_dir} does not exist: is --results the config's results folder?"
    elif not any((results_dir / model).is_dir() for model in config["models"]):
        report["warning"] = (f"{results_dir} holds no folder of this config's models ({', '.join(config['models'])}): "
                             "is --results the config's results folder?")
    return report


def needing_attention(report: dict) -> dict[str, list[str]]:
    """The failed and the stalled cells, the config's and the others, by state (empty states left out)."""
    every = [*report["cells"], *report.get("others", [])]
    found = {state: [cell["cell"] for cell in every if cell["state"] == state] for state in NEEDS_ATTENTION}
    return {state: names for state, names in found.items() if names}


def format_status(report: dict) -> list[str]:
    """The report as text: one line per cell, then the totals."""
    others = report.get("others", [])
    width = max((len(cell["cell"]) for cell in (*report["cells"], *others)), default=0)
    lines = []
    for cell in report["cells"]:
        lines.append(f"{cell['cell']:{width}}  {cell['state']:8} {_details(cell)}".rstrip())
    for cell in others:
        lines.append(f"{cell['cell']:{width}}  {cell['state']:8} {_details(cell)}".rstrip() + "  (not in this config)")
    totals = report["totals"]
    lines.append(f"{totals['cells']} cells in {report['results']}: "
                 + ", ".join(f"{totals[state]} {state}" for state in STATES))
    if others:
        counts = {state: sum(cell["state"] == state for cell in others) for state in STATES}
        lines.append(f"and {len(others)} cells the config does not name (an overlay left out?): "
                     + ", ".join(f"{count} {state}" for state, count in counts.items() if count))
    if report.get("warning"):
        lines.append(f"warning: {report['warning']}")
    return lines


def _details(cell: dict) -> str:
    parts = []
    if cell["step"] is not None:
        parts.append(f"step {cell['step']}" + (f"/{cell['max_steps']}" if cell["max_steps"] is not None else ""))
    if _finite(cell["reward"]):
        parts.append(f"reward {cell['reward']:.3f}")
    if cell["state"] == "running" and cell["steps_per_minute"]:
        parts.append(f"{cell['steps_per_minute']:.2f} steps/min")
        if cell["eta_minutes"] is not None:
            parts.append(f"ETA {_duration(cell['eta_minutes'])}")
    if cell["reason"]:
        named = cell["state"] == "failed" and cell["log"] and cell["log"] not in cell["reason"]
        parts.append(cell["reason"] + (f"  ({cell['log']})" if named else ""))
    return ", ".join(parts)


def _duration(minutes: float) -> str:
    if minutes < 60:
        return f"{minutes:.0f} min"
    if minutes < 48 * 60:
        return f"{minutes / 60:.1f} h"
    return f"{minutes / 1440:.1f} d"
