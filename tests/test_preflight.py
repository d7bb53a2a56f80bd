"""grpo-lambda preflight: the checks that apply on a CPU run and say so, the rest are skipped with their reason."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_main
from grpo_lambda import config as study
from grpo_lambda.preflight import node, step_ratio, verdict
from grpo_lambda.preflight import study as study_check
from grpo_lambda.preflight.context import DEFAULT_STUDY, Context, Fail


def run_cli(cli, tmp_path, *options, env=None):
    """grpo-lambda preflight as a process of its own (the tests of its time and processor use)."""
    work = tmp_path / "work"
    result = subprocess.run([cli, "preflight", "--work", str(work), *options], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=600)
    return result, status_lines(result.stdout), json.loads((work / "preflight.json").read_text())


def run_preflight(tmp_path, *options):
    """grpo-lambda preflight's logic, run in this process (conftest.run_main)."""
    work = tmp_path / "work"
    result = run_main("preflight", "--work", work, *options, cwd=ROOT)
    return result, status_lines(result.stdout), json.loads((work / "preflight.json").read_text())


def status_lines(stdout: str) -> dict:
    return {line.split()[1]: line.split()[0] for line in stdout.splitlines()
            if line.split() and line.split()[0] in ("ok", "fail", "skip")}


def test_quick_preflight_on_a_cpu_runs_what_applies_and_names_what_it_skips(tmp_path):
    result, lines, record = run_preflight(tmp_path, "--cpu", "--quick")
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines == {"versions": "ok", "cuda": "skip", "bf16": "skip", "all-reduce": "ok", "hub": "ok", "disk": "ok",
                     "step-ratio": "skip", "study": "skip", "vllm-colocate": "skip"}
    assert "preflight: go (4 ok, 0 failed, 5 skipped: cuda, bf16, step-ratio, study, vllm-colocate)" in result.stdout
    checks = {check["name"]: check for check in record["checks"]}
    assert record["verdict"] == "go" and [check["name"] for check in record["checks"]] == list(verdict.CHECKS)
    # the all-reduce really summed across 2 processes (gloo, the CPU jobs' backend)
    assert checks["all-reduce"]["details"]["correct"] and "gloo, 2 processes" in checks["all-reduce"]["reason"]
    assert checks["versions"]["details"]["trl"] and checks["study"]["reason"] == "--quick"
    assert "no GPU" in checks["cuda"]["reason"]


def test_without_cpu_a_machine_without_a_gpu_is_a_no_go(tmp_path):
    result, lines, record = run_preflight(tmp_path, "--quick", "--skip", "all-reduce")
    assert result.returncode == 1
    assert lines["cuda"] == "fail" and record["verdict"] == "no-go"
    assert "pass --cpu" in next(check["reason"] for check in record["checks"] if check["name"] == "cuda")


def test_an_unknown_check_is_named():
    result = run_main("preflight", "--skip", "cudaa", cwd=ROOT)
    assert result.returncode == 2 and "--skip cudaa: no such check" in result.stderr


def test_hub_models_neither_cached_nor_reachable_fail_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    config = study.load(ROOT / "config" / "paper.yaml")
    context = Context(config, cpu=True, work=tmp_path, study_config="")
    with pytest.raises(Fail, match="Qwen/Qwen2.5-Math-1.5B-Instruct.*run the prefetch rule"):
        node.check_hub(context)
    # once a model is in the cache, it is no longer missing
    cached = tmp_path / "hf" / "hub" / "models--Qwen--Qwen2.5-Math-1.5B-Instruct" / "snapshots" / "abc"
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")
    (tmp_path / "hf" / "hub" / "models--Qwen--Qwen2.5-Math-1.5B-Instruct" / "refs").mkdir()
    (tmp_path / "hf" / "hub" / "models--Qwen--Qwen2.5-Math-1.5B-Instruct" / "refs" / "main").write_text("abc")
    with pytest.raises(Fail) as failure:
        node.check_hub(context)
    assert "model Qwen/Qwen2.5-Math-1.5B-Instruct" not in str(failure.value)
    assert "model deepseek-ai/DeepSeek-R1-Distill-Qwen-7B" in str(failure.value)


def test_disk_estimate_counts_snapshots_resume_states_and_sft_models():
    config = study.load(ROOT / "config" / "config.yaml")
    parameters, width = node.model_parameters(config, "tiny")
    from grpo_lambda import tiny

    built = tiny.build_model(tiny.build_tokenizer(), **tiny.DEFAULT_ARCHITECTURE)
    assert (parameters, width) == (sum(p.numel() for p in built.parameters()), 4)
    total, parts = node.grid_disk_estimate(config)
    cells = len(study.rl_cells(config))  # 2 variants × 4 seeds; final model only (no checkpoints)
    expected = cells * (4 * parameters + 2 * (4 * parameters + 8 * parameters)) + 4 * parameters
    assert total == pytest.approx(expected) and parts["tiny"] == pytest.approx(expected / 1e9)
    # a hub model that is not cached is sized by its name; a LoRA model's resume state holds no Adam moments
    paper = study.load(ROOT / "config" / "paper.yaml")
    lora = next(model for model, spec in paper["models"].items() if spec.get("lora"))
    assert node.model_parameters(paper, lora) == (7_000_000_000, 2)


def test_the_study_stages_follow_the_rules_order_and_paths():
    config = study.load(ROOT / "config" / "config.yaml")
    config.update(seeds=[0], results="R")
    labels = [label for label, _ in study_check.study_commands(config)]
    assert labels == ["build_tiny/tiny", "prepare/arith", *[f"prepare/arith-{level}" for level in range(1, 6)],
                      "sft/tiny/arith", "evaluate/tiny/arith/sft", "train/tiny/arith/grpo/seed0",
                      "evaluate/tiny/arith/grpo/seed0", "train/tiny/arith/recent-trace-0.99/seed0",
                      "evaluate/tiny/arith/recent-trace-0.99/seed0", "aggregate", "figures"]
    commands = dict(study_check.study_commands(config))
    train = commands["train/tiny/arith/recent-trace-0.99/seed0"]
    assert train[train.index("--base") + 1] == "R/tiny/arith/sft/model"
    assert train[train.index("--cell") + 1] == "R/tiny/arith/recent-trace-0.99/seed0"
    assert json.loads(train[train.index("--settings") + 1]) == study.stage_settings(
        config, "train", model="tiny", dataset="arith", variant="recent-trace-0.99")
    assert "--threads" not in train
    # the small study's stages that train or evaluate run one torch thread each (the others take none)
    threaded = {label: command[-2:] == ["--threads", "1"] for label, command in study_check.study_commands(config, threads=1)}
    assert threaded == {label: label.startswith(("sft/", "train/", "evaluate/")) for label in labels}


def test_the_step_ratio_lines_are_printed_under_column_headers(tmp_path, monkeypatch):
    """bench_step.py's rows as the check prints them: a header naming each column, then one line per variant with
    its numbers under it (the benchmark itself is not run: its JSON record is written as it writes it)."""
    rows = [{"variant": "trl-grpo", "ms": 40.0, "ratio": 1.0, "loss_only_ms": 1.5, "ratio_from_loss_only": 1.0},
            {"variant": "grpo-lambda-recent", "ms": 40.8, "ratio": 1.02, "loss_only_ms": 1.9,
             "ratio_from_loss_only": 1.01},
            {"variant": "grpo-lambda-absolute", "ms": 41.2, "ratio": 1.03, "loss_only_ms": 2.3,
             "ratio_from_loss_only": 1.02}]

    def bench(command, log, **kwargs):
        Path(command[command.index("--json") + 1]).write_text(json.dumps({"rows": rows}))

    monkeypatch.setattr(step_ratio, "run_logged", bench)
    printed = []
    context = Context({}, cpu=True, work=tmp_path, study_config=None, out=printed.append)
    context.check = "step-ratio"
    reason, details = step_ratio.check_step_ratio(context)
    table = [line.removeprefix("  .. step-ratio     ") for line in printed if "bench_step.py" not in line]
    assert table[0].split() == ["variant", "ms/call", "÷", "GRPO", "per", "call", "÷", "GRPO", "from", "the", "loss",
                                "alone"]
    assert [line.split() for line in table[1:]] == [["trl-grpo", "40.00", "1.000", "1.0000"],
                                                    ["grpo-lambda-recent", "40.80", "1.020", "1.0100"],
                                                    ["grpo-lambda-absolute", "41.20", "1.030", "1.0200"]]
    # each number ends where its header ends
    for header in ("ms/call", "÷ GRPO per call", "÷ GRPO from the loss alone"):
        end = table[0].index(header) + len(header)
        assert all(line[end - 1] != " " and (len(line) == end or line[end] == " ") for line in table[1:]), header
    assert "1.0200 from the loss alone (goal ≤ 1.03)" in reason and set(details) == {row["variant"] for row in rows}


def fake_study_results(config: dict, *, accuracy: dict, flat: dict) -> None:
    """A results tree as the study's stages leave it, written by hand: each arm's evaluation summaries at the
    accuracy given, and each RL cell's train_log.csv with its steps at the share of groups with equal rewards
    given for its variant (TRL's frac_reward_zero_std; a list: one share per step)."""
    from grpo_lambda import files, layout

    results = Path(config["results"])
    for model in config["models"]:
        for dataset in study.model_datasets(config, model):
            for benchmark in config["benchmarks"]:
                files.write_json(results / layout.sft_evaluation(model, dataset, benchmark, "json"),
                                 {"accuracy": accuracy["sft"]})
    for cell in study.rl_cells(config):
        variant = cell["variant"]
        for benchmark in config["benchmarks"]:
            files.write_json(results / layout.evaluation(cell["model"], cell["dataset"], variant, cell["seed"], "final",
                                                         benchmark, "json"), {"accuracy": accuracy[variant]})
        shares = flat[variant] if isinstance(flat[variant], list) else [flat[variant]] * config["rl"]["max_steps"]
        rows = "".join(f"{step},0.0,{share},0.0\n" for step, share in enumerate(shares, 1))
        files.write_text(results / layout.train_log(cell["model"], cell["dataset"], variant, cell["seed"]),
                         "step,loss,frac_reward_zero_std,reward\n" + rows)


@pytest.mark.parametrize(("accuracy", "flat", "verdict"), [
    ({"sft": 0.0, "grpo": 0.0, "recent-trace-0.99": 0.0}, {"grpo": 1.0, "recent-trace-0.99": 1.0}, "no-go"),
    ({"sft": 0.05, "grpo": 0.0, "recent-trace-0.99": 0.0}, {"grpo": 1.0, "recent-trace-0.99": 1.0}, "go"),
    ({"sft": 0.0, "grpo": 0.0, "recent-trace-0.99": 0.0}, {"grpo": 1.0, "recent-trace-0.99": 0.5}, "go"),
    # signal at the first step and none at the last: the cell's mean share over its steps is 0.5, not the last 1.0
    ({"sft": 0.0, "grpo": 0.0, "recent-trace-0.99": 0.0}, {"grpo": [0.0, 1.0], "recent-trace-0.99": [0.0, 1.0]}, "go"),
    # none at the first step, signal at the last: learned too
    ({"sft": 0.0, "grpo": 0.0, "recent-trace-0.99": 0.0}, {"grpo": [1.0, 1.0], "recent-trace-0.99": [1.0, 0.5]}, "go"),
], ids=["nothing", "sft-above-0", "one-cell-with-signal", "signal-early-only", "signal-late-only"])
def test_the_small_study_says_no_go_when_it_learned_nothing_naming_why(tmp_path, monkeypatch, accuracy, flat, verdict):
    """As found: 'go' on a study whose own line read accuracy sft 0.000, grpo 0.000, recent-trace-0.99 0.000 and
    100% of groups with equal rewards. Now that is a failed study check, naming why; an arm above 0, or one RL step
    with a group whose rewards differ, is something learned. The stages are not run: their results are written."""
    monkeypatch.setattr(study_check, "run_logged", lambda *args, **kwargs: None)
    context = Context(study.load(ROOT / "config" / "config.yaml"), cpu=True, work=tmp_path, study_config=None)
    config = study_check.small_study(study.load(ROOT / DEFAULT_STUDY))
    config.update(seeds=[0], results=str(tmp_path / "study"))
    fake_study_results(config, accuracy=accuracy, flat=flat)
    if verdict == "go":
        reason, details = study_check.check_study(context)
        assert details["accuracy"] == accuracy and "every RL cell logged its 2 steps" in reason
        shares = [sum(f) / len(f) if isinstance(f, list) else f for f in flat.values()]
        assert f"(groups with equal rewards: {sum(shares) / len(shares):.0%})" in reason
        return
    with pytest.raises(Fail) as failure:
        study_check.check_study(context)
    assert "accuracy sft 0.000, grpo 0.000, recent-trace-0.99 0.000; nothing was learned: accuracy 0 for every arm " \
           "(sft, grpo, recent-trace-0.99) and every group of every RL step got equal rewards (2 cell(s), " \
           "frac_reward_zero_std 1 throughout)" in str(failure.value)


def run_study_check(tmp_path, monkeypatch, *, study_config, accuracy, flat, logs=None):
    """check_study over a results tree written by hand (fake_study_results; ``logs``: cell -> train_log.csv text
    written over its own), its stages recorded instead of run. Returns (outcome, the stages' calls, the progress
    lines, the context); the outcome is check_study's (reason, details) or the Fail it raised."""
    from grpo_lambda import files

    calls, lines = [], []
    monkeypatch.setattr(study_check, "run_logged", lambda command, log, **kwargs: calls.append((command, log, kwargs)))
    context = Context(study.load(ROOT / "config" / "config.yaml"), cpu=True, work=tmp_path,
                                study_config=study_config, out=lines.append)
    config = study.load(ROOT / DEFAULT_STUDY if study_config is None else study_config)
    config = study_check.small_study(config) if study_config is None else config
    config.update(seeds=[0], results=str(tmp_path / "study"))
    fake_study_results(config, accuracy=accuracy, flat=flat)
    for cell, text in (logs or {}).items():
        files.write_text(tmp_path / "study" / cell / "train_log.csv", text)
    try:
        outcome = study_check.check_study(context)
    except Fail as failure:
        outcome = failure
    return outcome, calls, lines, context


def test_a_full_study_is_a_no_go_naming_each_arm_that_did_not_beat_sft(tmp_path, monkeypatch):
    """--study-config: every stage runs at its full settings (no --threads), logged to study/logs/<label>.log with
    a progress line each; an arm at or below SFT's accuracy is named, arms above it pass, each arm read from its
    own cells."""
    from grpo_lambda import layout

    study_config = str(ROOT / "config" / "config.yaml")
    flat = {"grpo": 0.5, "recent-trace-0.99": 0.5}
    (reason, details), calls, lines, context = run_study_check(
        tmp_path, monkeypatch, study_config=study_config, accuracy={"sft": 0.3, "grpo": 0.5, "recent-trace-0.99": 0.6},
        flat=flat)
    labels = [label for label, _ in study_check.study_commands({**study.load(study_config), "seeds": [0]})]
    assert reason == f"{len(labels)} stages in 0 s; accuracy sft 0.300, grpo 0.500, recent-trace-0.99 0.600"
    logs = [tmp_path / "study" / "logs" / f"{label.replace('/', '_')}.log" for label in labels]
    assert [log for _, log, _ in calls] == logs
    assert all(kwargs == {"timeout": 1800, "progress": context.progress} for _, _, kwargs in calls)
    assert not any("--threads" in command for command, _, _ in calls)
    assert lines[0] == f"  .. {'':14} stage 1/{len(labels)} {labels[0]} (log: {logs[0]})" and len(lines) == len(labels)
    assert context.study_results == tmp_path / "study"
    cells = {layout.cell("tiny", "arith", variant, 0) for variant in flat}
    assert details == {"seconds": dict.fromkeys(labels, 0.0), "accuracy": {"sft": 0.3, "grpo": 0.5,
                                                                           "recent-trace-0.99": 0.6},
                       "results": str(tmp_path / "study"), "small": False,
                       "train_logs": dict.fromkeys(cells, (25, True, 0.5))}
    failure, *_ = run_study_check(tmp_path, monkeypatch, study_config=study_config, flat=flat,
                                  accuracy={"sft": 0.3, "grpo": 0.3, "recent-trace-0.99": 0.6})
    assert str(failure).endswith("; RL did not beat SFT: grpo")  # equal to SFT is not beating it
    failure, *_ = run_study_check(tmp_path, monkeypatch, study_config=study_config, flat=flat,
                                  accuracy={"sft": 0.3, "grpo": 0.2, "recent-trace-0.99": 0.1})
    assert str(failure).endswith("; RL did not beat SFT: grpo, recent-trace-0.99")


def test_the_small_study_names_a_cell_without_its_steps_or_with_a_loss_not_finite(tmp_path, monkeypatch):
    """--cpu: its settings log every step, so a cell with fewer rows than steps, or a NaN loss, fails naming the
    cell; its stages that train or evaluate run one torch thread. A log without frac_reward_zero_std has no share."""
    from grpo_lambda import layout

    accuracy, flat = {"sft": 0.0, "grpo": 0.0, "recent-trace-0.99": 0.0}, {"grpo": 0.5, "recent-trace-0.99": 0.5}
    grpo, trace = layout.cell("tiny", "arith", "grpo", 0), layout.cell("tiny", "arith", "recent-trace-0.99", 0)
    header = "step,loss,frac_reward_zero_std,reward\n"
    failure, calls, _, _ = run_study_check(
        tmp_path, monkeypatch, study_config=None, accuracy=accuracy, flat=flat,
        logs={grpo: header + "1,0.0,0.5,0.0\n", trace: header + "1,0.0,0.5,0.0\n2,nan,0.5,0.0\n"})
    assert str(failure).startswith("the small built-in study (--cpu): ")
    assert str(failure).endswith(f"; RL cells without their steps: {grpo} (1 of 2 steps), "
                                 f"{trace} (2 of 2 steps, a loss not finite)")
    assert [command[-2:] == ["--threads", "1"] for command, _, _ in calls] == [
        command[3] in ("sft", "train", "evaluate") for command, _, _ in calls]
    unshared = {cell: "step,loss,reward\n1,0.0,0.0\n2,0.0,0.0\n" for cell in (grpo, trace)}
    (reason, details), *_ = run_study_check(tmp_path, monkeypatch, study_config=None, accuracy=accuracy, flat=flat,
                                            logs=unshared)
    assert details["train_logs"] == {grpo: (2, True, None), trace: (2, True, None)}
    assert reason.endswith("; every RL cell logged its 2 steps with finite losses; whether RL beats SFT is a full "
                           "study's question (--study-config)")


def test_nothing_learned_needs_both_zero_accuracy_and_no_signal():
    cells = {"a": (2, True, 1.0), "b": (2, True, 1.0)}
    assert study_check.nothing_learned({"sft": 0.0, "grpo": 0.0}, cells) == (
        "nothing was learned: accuracy 0 for every arm (sft, grpo) and every group of every RL step got equal rewards "
        "(2 cell(s), frac_reward_zero_std 1 throughout), so every advantage was 0: the SFT model never reaches a "
        "rewarded answer (check the model's prompt.txt, the answers and the reward)")
    assert study_check.nothing_learned({"sft": 0.0, "grpo": 0.01}, cells) is None
    assert study_check.nothing_learned({"sft": 0.0, "grpo": 0.0}, {**cells, "b": (2, True, 0.75)}) is None
    assert study_check.nothing_learned({"sft": 0.0, "grpo": 0.0}, {"a": (0, True, None)}) is None  # no steps: not told


def _fake_checks(monkeypatch, behaviour: dict):
    """Every check replaced: ``behaviour`` maps a check to an exception to raise; the others pass. Returns the
    list of the checks that ran, in order."""
    ran = []

    def check(name):
        def run_check(context):
            ran.append(name)
            if name in behaviour:
                raise behaviour[name]
            return f"{name} fine", {}
        return run_check

    for name in verdict.CHECKS:
        monkeypatch.setitem(verdict.RUNS, name, check(name))
    return ran


def test_once_a_check_fails_the_slow_checks_are_skipped_saying_why(tmp_path, monkeypatch):
    """As found: on a CPU machine the cuda check failed, then the study check ran the default's 940-step SFT for
    17 minutes with nothing shown. A no-go is decided: the slow checks are left out, and the record says so."""
    ran = _fake_checks(monkeypatch, {"cuda": Fail("no CUDA device is visible")})
    saved = []
    record = verdict.run(study.load(ROOT / "config" / "config.yaml"), work=str(tmp_path), out=lambda line: None,
                           save=lambda partial: saved.append(partial))
    assert ran == ["versions", "cuda", "bf16", "all-reduce", "hub", "disk"]
    checks = {check["name"]: check for check in record["checks"]}
    for name in verdict.SLOW:
        assert checks[name]["status"] == "skip"
        assert checks[name]["reason"] == "cuda failed: no-go already, the slow checks are left out"
    assert record["verdict"] == "no-go" and record["complete"]
    # a record after every check, the last one the whole
    assert [len(partial["checks"]) for partial in saved] == [*range(1, len(verdict.CHECKS) + 1), len(verdict.CHECKS)]
    assert not saved[0]["complete"] and saved[0]["verdict"] == "unfinished"


@pytest.mark.parametrize("failing", ["step-ratio", "study"])
def test_a_slow_check_that_fails_stops_the_slow_checks_after_it(tmp_path, monkeypatch, failing):
    """The step-ratio check failing is a no-go like any other: the study (the default's SFT and RL, minutes to
    hours) and the vLLM check after it are skipped, naming the failed check."""
    ran = _fake_checks(monkeypatch, {failing: Fail(f"{failing} missed its goal")})
    record = verdict.run(study.load(ROOT / "config" / "config.yaml"), cpu=True, work=str(tmp_path),
                           out=lambda line: None)
    after = verdict.SLOW[verdict.SLOW.index(failing) + 1:]
    assert ran == list(verdict.CHECKS[:verdict.CHECKS.index(failing) + 1])
    checks = {check["name"]: check for check in record["checks"]}
    assert checks[failing]["status"] == "fail"
    for name in after:
        assert (checks[name]["status"], checks[name]["reason"]) == (
            "skip", f"{failing} failed: no-go already, the slow checks are left out")
    assert record["verdict"] == "no-go" and record["complete"]


def test_ctrl_c_in_a_check_ends_it_failed_the_rest_skipped_and_the_record_kept(tmp_path, monkeypatch):
    ran = _fake_checks(monkeypatch, {"study": KeyboardInterrupt()})
    saved = []
    record = verdict.run(study.load(ROOT / "config" / "config.yaml"), cpu=True, work=str(tmp_path),
                           out=lambda line: None, save=lambda partial: saved.append(partial))
    assert ran == ["versions", "cuda", "bf16", "all-reduce", "hub", "disk", "step-ratio", "study"]
    checks = {check["name"]: check for check in record["checks"]}
    assert (checks["study"]["status"], checks["study"]["reason"]) == ("fail", "interrupted (Ctrl-C)")
    assert (checks["vllm-colocate"]["status"], checks["vllm-colocate"]["reason"]) == ("skip", "interrupted")
    assert record["interrupted"] and record["verdict"] == "no-go" and saved[-1] == record


def test_plain_preflight_on_a_machine_without_a_gpu_is_a_no_go_within_a_minute_naming_cpu(tmp_path):
    import time

    start = time.monotonic()
    result, lines, record = run_preflight(tmp_path)
    seconds = time.monotonic() - start
    assert result.returncode == 1, result.stdout + result.stderr
    assert seconds < 60, seconds
    assert lines["cuda"] == "fail" and all(lines[name] == "skip" for name in verdict.SLOW)
    assert "preflight: this machine has no GPU: pass --cpu" in result.stdout
    assert record["verdict"] == "no-go" and record["complete"]


def test_ctrl_c_during_a_slow_check_leaves_a_partial_record_and_no_traceback(cli, tmp_path):
    """As found: Ctrl-C printed a raw KeyboardInterrupt traceback and left no preflight.json."""
    import signal
    import time

    work = tmp_path / "work"
    # Ctrl-C's default for the child: a suite started in the background (`cmd &` in a script) inherits SIGINT
    # ignored, and a Python started so never raises KeyboardInterrupt.
    process = subprocess.Popen([cli, "preflight", "--cpu", "--skip", "all-reduce", "step-ratio", "--work", str(work)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in process.stdout:  # wait until the study check has started its first stage
        seen.append(line)
        if line.startswith("  .. study"):
            break
    time.sleep(2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    text = "".join(seen) + out
    assert process.returncode == 130, text + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "fail study          interrupted (Ctrl-C)" in text
    record = json.loads((work / "preflight.json").read_text())
    assert record["interrupted"] and record["verdict"] == "no-go"
    assert {check["name"]: check["status"] for check in record["checks"]}["vllm-colocate"] == "skip"
    assert not list((work / "study" / "logs").glob("*.log")) or "stage 1/" in text


@pytest.mark.slow
def test_cpu_preflight_answers_within_five_minutes_on_the_small_built_in_study(cli, tmp_path):
    """--cpu on a machine without a GPU: a verdict in ≤ 5 minutes on 2 cores (the small built-in study, not the
    default's 940-step SFT), with every stage run and every RL step logged."""
    import os
    import resource
    import time

    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    result, lines, record = run_cli(cli, tmp_path, "--cpu")
    seconds, after = time.monotonic() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stdout + result.stderr
    # The processor time of the preflight and every stage it ran bounds its time on 2 free cores (the stages run
    # one after another); the wall clock says the same only on a machine nothing else loads.
    processor = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert processor <= 300, processor
    if os.getloadavg()[0] <= 2:
        assert seconds <= 300, seconds
    checked = next(check for check in record["checks"] if check["name"] == "study")
    assert checked["status"] == "ok" and checked["details"]["small"]
    assert "every RL cell logged its 2 steps with finite losses" in checked["reason"]
    assert all(logged == 2 and finite for logged, finite, _ in checked["details"]["train_logs"].values())
    assert "  .. study          stage 1/" in result.stdout  # progress while the slow checks run
    # Every stage ran for real: the accuracies the verdict quotes are the evaluation summaries', and the tables
    # were made. (A user's --study-config runs the same commands, without --threads: the tests on written results
    # above check its stages, its logs and its verdict; one real run of the stages is enough.)
    results = Path(checked["details"]["results"])
    config = {**study_check.small_study(study.load(ROOT / DEFAULT_STUDY)), "seeds": [0], "results": str(results)}
    assert checked["details"]["accuracy"] == pytest.approx(study_check.study_accuracies(config))
    assert set(checked["details"]["accuracy"]) == {"sft", "grpo", "recent-trace-0.99"}
    assert (results / "tables" / "table1.csv").is_file()
