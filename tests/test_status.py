"""grpo_lambda.status: the state of every cell of a results tree, as a running grid leaves it."""

import json
import os
import subprocess
import sys
import time

import pytest

from grpo_lambda import config as config_module
from grpo_lambda.status import format_status, grid_status
from grpo_lambda.train import LOG_COLUMNS, write_train_log

from conftest import ROOT, run_main

CONFIG = ROOT / "config" / "config.yaml"


@pytest.fixture
def study(tmp_path):
    config = config_module.load(CONFIG)
    config["results"] = str(tmp_path / "results")
    return config


def _cell_folder(config, variant, seed):
    return os.path.join(config["results"], "tiny", "arith", variant, f"seed{seed}")


def _log(config, variant, seed, text):
    path = os.path.join(config["results"], "logs", "train", "tiny", "arith", variant, f"seed{seed}.log")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    return path


def _train_log(config, variant, seed, steps, step_time=6.0):
    rows = [{column: None for column in LOG_COLUMNS} | {"step": step, "reward": 0.1 * step, "step_time": step_time}
            for step in range(1, steps + 1)]
    path = os.path.join(_cell_folder(config, variant, seed), "train_log.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_train_log(path, rows)
    return path


def _by_name(report):
    return {cell["cell"]: cell for cell in report["cells"]}


def test_each_state_is_recognised(study):
    max_steps = study["rl"]["max_steps"]
    # done: the model folder and the full log
    _train_log(study, "grpo", 0, max_steps)
    os.makedirs(os.path.join(_cell_folder(study, "grpo", 0), "model"))
    # running: rows written just now, 10 steps/min
    _train_log(study, "grpo", 1, 5)
    _log(study, "grpo", 1, "loading\n")
    # failed: the job log ends in a traceback
    _train_log(study, "recent-trace-0.99", 0, 3)
    _log(study, "recent-trace-0.99", 0, "step 1\nTraceback (most recent call last):\n  File x\n"
         "FloatingPointError: step 3: loss is nan; training stopped.\n")
    # stalled: started an hour ago, silent since
    stale = _train_log(study, "recent-trace-0.99", 1, 2)
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))

    report = grid_status(study, stale_minutes=30)
    cells = _by_name(report)
    done, running = cells["tiny/arith/grpo/seed0"], cells["tiny/arith/grpo/seed1"]
    failed, stalled = cells["tiny/arith/recent-trace-0.99/seed0"], cells["tiny/arith/recent-trace-0.99/seed1"]
    assert done["state"] == "done" and done["step"] == max_steps
    assert running["state"] == "running" and running["step"] == 5
    assert running["reward"] == pytest.approx(0.5)
    assert running["steps_per_minute"] == pytest.approx(10.0)
    assert running["eta_minutes"] == pytest.approx((max_steps - 5) / 10.0)
    assert failed["state"] == "failed" and failed["reason"].startswith("FloatingPointError: step 3")
    assert stalled["state"] == "stalled"
    n_cells = len(config_module.rl_cells(study))
    assert report["totals"] == {"cells": n_cells, "done": 1, "running": 1, "failed": 1, "stalled": 1,
                                "missing": n_cells - 4}

    lines = format_status(report)
    assert len(lines) == n_cells + 1
    line = next(line for line in lines if line.startswith("tiny/arith/grpo/seed1 "))
    assert "running" in line and "step 5/" in line and "reward 0.500" in line and "steps/min" in line
    assert "ETA" in line
    assert "FloatingPointError" in next(line for line in lines if "recent-trace-0.99/seed0" in line)
    assert lines[-1].startswith(f"{n_cells} cells")


def test_a_killed_job_counts_as_failed_with_the_line_that_says_so(study):
    _log(study, "grpo", 0, "step 4\n/bin/bash: line 1: 1234 Killed   python train\n")
    assert _by_name(grid_status(study))["tiny/arith/grpo/seed0"]["state"] == "failed"


def test_an_empty_tree_is_all_missing(study):
    report = grid_status(study)
    assert report["totals"]["missing"] == report["totals"]["cells"] > 0


def test_cli_status_json_and_text(study, tmp_path):
    config_file = tmp_path / "config.yaml"
    import yaml

    config_file.write_text(yaml.safe_dump(study))
    _train_log(study, "grpo", 1, 5)
    command = ["status", "--configfile", config_file]
    result = run_main(*command, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert _by_name(report)["tiny/arith/grpo/seed1"]["state"] == "running"
    text = run_main(*command)
    assert text.returncode == 0, text.stderr
    assert "tiny/arith/grpo/seed1" in text.stdout and "1 running" in text.stdout
    # A failed cell: exit status 1, and standard error names it (with --json too, for scripts).
    _log(study, "recent-trace-0.99", 2, "step 3\ntorch.OutOfMemoryError: CUDA out of memory\n")
    for extra in ([], ["--json"]):
        failed = run_main(*command, *extra)
        assert failed.returncode == 1, failed.stderr
        assert failed.stderr.strip() == "grpo-lambda status: 1 failed: tiny/arith/recent-trace-0.99/seed2"
    assert "1 failed" in failed.stdout or '"failed": 1' in failed.stdout


def test_a_file_where_a_cell_folder_should_be_is_a_failed_cell_not_a_crash(study):
    os.makedirs(os.path.join(study["results"], "tiny", "arith", "grpo"))
    with open(_cell_folder(study, "grpo", 0), "w") as handle:
        handle.write("not a folder")
    with open(os.path.join(study["results"], "tiny", "arith", "recent-trace-0.99"), "w") as handle:
        handle.write("a file where the variant's folder goes")
    cells = _by_name(grid_status(study))
    assert cells["tiny/arith/grpo/seed0"]["state"] == "failed"
    assert "seed0 is a file where a folder should be" in cells["tiny/arith/grpo/seed0"]["reason"]
    assert cells["tiny/arith/recent-trace-0.99/seed2"]["state"] == "failed"
    assert cells["tiny/arith/grpo/seed1"]["state"] == "missing"


def test_status_into_a_closed_pipe_exits_quietly(study, tmp_path):
    import yaml

    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(study))
    # `head -c 1` closes the pipe after one byte, while status still has most of its lines to print.
    done = subprocess.run(f"{sys.executable} -m grpo_lambda.cli status --configfile {config_file} --json | head -c 1",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert done.stdout == "{"
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_a_results_folder_that_holds_nothing_of_the_config_is_said_to_be_so(study, tmp_path):
    (tmp_path / "results-of-another-study").mkdir()
    empty = grid_status(study, results=str(tmp_path / "results-of-another-study"))
    assert "holds no folder of this config's models (tiny)" in empty["warning"]
    assert format_status(empty)[-1].startswith("warning: ")
    assert "does not exist" in grid_status(study, results=str(tmp_path / "typo"))["warning"]
    _train_log(study, "grpo", 1, 5)
    assert "warning" not in grid_status(study)


def _hold_lock(folder):
    """A process holding the cell's lock (files.exclusive) as a trainer does, once it says so."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom grpo_lambda import files\n"
                               "with files.exclusive(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)",
                               folder], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_trainer_killed_moments_ago_is_stalled_at_once_and_a_live_one_running(study):
    """The cell's lock names its trainer's pid and host (files.exclusive): a process that holds it and
    is then killed leaves a cell that status calls stalled without waiting stale_minutes."""
    folder = _cell_folder(study, "grpo", 0)
    _train_log(study, "grpo", 0, 3)
    _log(study, "grpo", 0, "step 3\n")
    holder = _hold_lock(folder)
    try:
        cell = _by_name(grid_status(study, stale_minutes=30))["tiny/arith/grpo/seed0"]
        assert cell["state"] == "running"
    finally:
        holder.kill()
        holder.wait()
    cell = _by_name(grid_status(study, stale_minutes=30))["tiny/arith/grpo/seed0"]
    assert cell["state"] == "stalled" and cell["reason"] == f"its trainer (pid {holder.pid}) is gone"
    # A lock written on another host says nothing about this host's processes: time decides.
    with open(os.path.join(folder, ".lock"), "w") as handle:
        handle.write(f"pid {holder.pid} on another-host-of-the-cluster")
    assert _by_name(grid_status(study, stale_minutes=30))["tiny/arith/grpo/seed0"]["state"] == "running"


def _evaluation(study, step, *, benchmarks, log_text):
    folder = os.path.join(_cell_folder(study, "grpo", 0), "eval", step)
    os.makedirs(folder, exist_ok=True)
    for name in benchmarks:
        with open(os.path.join(folder, f"{name}.json"), "w") as handle:
            handle.write("{}")
    log = os.path.join(study["results"], "logs", "evaluate", "tiny", "arith", "grpo", "seed0", f"{step}.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as handle:
        handle.write(log_text)
    return log


def test_a_trained_cell_whose_evaluation_failed_is_failed_with_the_step_and_line(study):
    _train_log(study, "grpo", 0, study["rl"]["max_steps"])
    os.makedirs(os.path.join(_cell_folder(study, "grpo", 0), "model"))
    every = list(study["benchmarks"])
    _evaluation(study, "final", benchmarks=every, log_text="done\n")
    # An error earlier in a log whose summaries were all written (a retried job) is no failure.
    _evaluation(study, "4", benchmarks=every, log_text="RuntimeError: first try\nretried, done\n")
    assert _by_name(grid_status(study))["tiny/arith/grpo/seed0"]["state"] == "done"
    log = _evaluation(study, "8", benchmarks=every[1:],
                      log_text="Traceback (most recent call last):\nMemoryError: out of room\n")
    cell = _by_name(grid_status(study))["tiny/arith/grpo/seed0"]
    assert cell["state"] == "failed"
    assert cell["reason"] == f"evaluation of 8 failed: MemoryError: out of room  ({log})"


# ---- staleness in minutes, speed from the newest steps, a bare traceback -------------------------


def _age(path, now, minutes):
    os.utime(path, (now - 60 * minutes, now - 60 * minutes))


def test_stale_minutes_are_minutes_a_cell_quiet_for_five_is_running_for_thirty_one_stalled(study):
    now = time.time()
    _age(_train_log(study, "grpo", 0, 3), now, 5)  # written 5 min ago: within 30 min
    _age(_log(study, "grpo", 1, "step 2\n"), now, 20)  # only its job log, 20 min ago
    _age(_train_log(study, "grpo", 2, 3), now, 31)  # 31 min ago: past 30 min
    cells = _by_name(grid_status(study, stale_minutes=30, now=now))
    assert cells["tiny/arith/grpo/seed0"]["state"] == "running"
    assert cells["tiny/arith/grpo/seed1"]["state"] == "running"
    stalled = cells["tiny/arith/grpo/seed2"]
    assert stalled["state"] == "stalled" and stalled["reason"] == "nothing written for 31 min"
    # A tighter threshold makes the 5-minute-old cell stalled too.
    assert _by_name(grid_status(study, stale_minutes=4, now=now))["tiny/arith/grpo/seed0"]["state"] == "stalled"


def test_speed_and_eta_come_from_the_newest_ten_steps_not_the_first(study):
    """Steps 1-5 took 60 s (warm-up, compilation), steps 6-15 took 3 s: 20 steps/min now."""
    max_steps = study["rl"]["max_steps"]
    assert max_steps > 15
    rows = [{column: None for column in LOG_COLUMNS} | {"step": step, "reward": 0.0,
                                                         "step_time": 60.0 if step <= 5 else 3.0}
            for step in range(1, 16)]
    path = os.path.join(_cell_folder(study, "grpo", 1), "train_log.csv")
    os.makedirs(os.path.dirname(path))
    write_train_log(path, rows)
    cell = _by_name(grid_status(study))["tiny/arith/grpo/seed1"]
    assert cell["state"] == "running" and cell["step"] == 15
    assert cell["steps_per_minute"] == pytest.approx(20.0)  # 60 / 3
    assert cell["eta_minutes"] == pytest.approx((max_steps - 15) * 3.0 / 60.0)


def test_a_log_ending_in_a_traceback_without_its_exception_line_is_failed(study):
    """A job killed while printing its traceback (or whose last line went to another stream) still failed."""
    log = _log(study, "grpo", 0, 'step 2\nTraceback (most recent call last):\n'
                                 '  File "/x/train.py", line 3, in <module>\n    main()\n')
    _train_log(study, "grpo", 0, 2)
    report = grid_status(study, stale_minutes=30)
    cell = _by_name(report)["tiny/arith/grpo/seed0"]
    assert cell["state"] == "failed"
    assert cell["reason"] == "a traceback without its exception line: see the log"
    assert cell["log"] == log
    line = next(line for line in format_status(report) if line.startswith("tiny/arith/grpo/seed0 "))
    assert "a traceback without its exception line" in line and log in line


def _status_cli(study, tmp_path, *extra, cwd=None):
    import yaml

    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(study))
    return run_main("status", "--configfile", config_file, *extra, cwd=cwd)


def test_a_killed_cell_exits_non_zero_naming_it(study, tmp_path):
    """As found: a trainer killed mid-run was shown 'stalled: its trainer is gone' and status exited 0 while
    Snakemake had ended rc 1. A stalled cell needs a rerun, as a failed one does: exit status 1, named."""
    folder = _cell_folder(study, "grpo", 0)
    _train_log(study, "grpo", 0, 3)
    _log(study, "grpo", 0, "step 3\n")
    holder = _hold_lock(folder)
    try:
        assert _status_cli(study, tmp_path).returncode == 0  # running
    finally:
        holder.kill()
        holder.wait()
    done = _status_cli(study, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip() == "grpo-lambda status: 1 stalled: tiny/arith/grpo/seed0"
    assert f"its trainer (pid {holder.pid}) is gone" in done.stdout
    _log(study, "recent-trace-0.99", 2, "step 3\ntorch.OutOfMemoryError: CUDA out of memory\n")
    both = _status_cli(study, tmp_path, "--json")
    assert both.returncode == 1 and both.stderr.strip() == (
        "grpo-lambda status: 1 failed: tiny/arith/recent-trace-0.99/seed2; 1 stalled: tiny/arith/grpo/seed0")


def test_a_failed_cell_of_an_overlay_the_config_lacks_is_shown_and_fails_the_status(study, tmp_path):
    """As found: a grid run with an overlay (a learning-rate sweep), status given the study alone: the sweep's
    failed cell was hidden and status exited 0. The tree's cells the config does not name are listed, marked."""
    _train_log(study, "grpo", 0, 2)
    _log(study, "grpo-lr3e-5", 0, "step 1\nFloatingPointError: step 1: loss is nan; training stopped.\n")
    _train_log(study, "grpo-lr1e-5", 0, 4)
    report = grid_status(study)
    others = {cell["cell"]: cell for cell in report["others"]}
    assert set(others) == {"tiny/arith/grpo-lr1e-5/seed0", "tiny/arith/grpo-lr3e-5/seed0"}
    assert others["tiny/arith/grpo-lr3e-5/seed0"]["state"] == "failed"
    assert others["tiny/arith/grpo-lr1e-5/seed0"]["state"] == "running"
    assert others["tiny/arith/grpo-lr1e-5/seed0"]["max_steps"] is None  # the config that knows it is not here
    lines = format_status(report)
    assert any(line.startswith("tiny/arith/grpo-lr1e-5/seed0 ") and "step 4," in line
               and line.endswith("(not in this config)") for line in lines)
    assert lines[-1] == "and 2 cells the config does not name (an overlay left out?): 1 running, 1 failed"
    done = _status_cli(study, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "grpo-lambda status: 1 failed: tiny/arith/grpo-lr3e-5/seed0"


def test_status_without_a_config_warns_that_it_shows_the_default_study(tmp_path):
    done = run_main("status", "--results", tmp_path / "results", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("grpo-lambda status: no --configfile given: showing config/config.yaml's cells")
    given = run_main("status", "--configfile", "config/config.yaml", "--results", tmp_path / "results", cwd=ROOT)
    assert "no --configfile given" not in given.stderr


def test_a_nested_studys_own_sft_models_are_not_cells_of_another_config(study):
    """sft.seeds keeps each SFT model in <model>/<dataset>/sft/seed<N>, a folder as deep as a cell's: as found, status
    listed tiny/arith/sft/seed2 as a cell "not in this config", the SFT model made and all."""
    nested = {**study, "sft": {**{k: v for k, v in study["sft"].items() if k != "seed"}, "seeds": [1, 2]}}
    nested = config_module.validate(nested)
    for seed in (1, 2):
        os.makedirs(os.path.join(study["results"], "tiny", "arith", "sft", f"seed{seed}", "model"))
    _train_log(nested, "grpo", 0, 2)
    _train_log(nested, "grpo-lr1e-5", 0, 2)  # a cell of an overlay left out: still listed
    report = grid_status(nested)
    assert [cell["cell"] for cell in report["others"]] == ["tiny/arith/grpo-lr1e-5/seed0"]
    assert format_status(report)[-1] == "and 1 cells the config does not name (an overlay left out?): 1 running"
