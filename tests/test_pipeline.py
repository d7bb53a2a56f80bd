"""The whole DAG, end to end, on a smaller copy of the embedded default (tests/data/config-e2e.yaml), under a
results folder whose name holds a space and a quote: every shell parameter of the rules must be quoted."""

import base64
import io
import json
import re
import shutil

import pandas as pd
import pytest
import yaml

from conftest import E2E_CONFIG, ROOT, rl_learning_problems
from conftest import snakemake as study_snakemake
from grpo_lambda import files
from grpo_lambda.grading import grade

pytestmark = pytest.mark.slow


RESULTS = "res dir 'x'"  # the results folder: a space and a quote, which an unquoted shell parameter would split


def snakemake(workdir, *args, targets=(), check=True):
    return study_snakemake(*args, workdir=workdir, configfiles=[workdir / "config.yaml"], targets=targets, check=check)


@pytest.fixture(scope="module")
def run(tmp_path_factory, cli):
    workdir = tmp_path_factory.mktemp("pipeline")
    shutil.copytree(ROOT / "tests/data/sft-chat", workdir / "tests/data/sft-chat")  # sft.open_r1.path, relative
    config = yaml.safe_load(E2E_CONFIG.read_text())
    config["results"] = RESULTS
    # A model made by the pipeline is named under the results folder, wherever that is.
    config["models"]["tiny-distill"]["source"] = f"{RESULTS}/tiny/arith/sft/model"
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(workdir, "--cores", "2")
    snakemake(workdir, "--report", f"{RESULTS}/report.html")
    return workdir


def test_nothing_escaped_the_results_folder_under_a_piece_of_its_name(run):
    assert sorted(p.name for p in run.iterdir()) == sorted([".snakemake", "config.yaml", "tests", RESULTS])
    assert (run / RESULTS / "logs" / "train" / "tiny" / "arith" / "recent-trace" / "seed0.log").stat().st_size > 0


def test_the_results_table_matches_the_per_sample_files(run):
    config = yaml.safe_load(E2E_CONFIG.read_text())
    table = pd.read_csv(run / RESULTS / "tables" / "results.csv")
    per_suite = table[table["benchmark"].isin(config["benchmarks"]) & (table["model"] == "tiny")]
    # SFT baseline once per suite, and every variant x seed x suite.
    expected = len(config["benchmarks"]) * (1 + len(config["variants"]) * len(config["seeds"]))
    assert len(per_suite) == expected
    assert set(per_suite["variant"]) == {"sft", *config["variants"]}
    for row in per_suite.itertuples():
        cell = "sft" if row.variant == "sft" else f"{row.variant}/seed{int(row.seed)}"
        samples = files.read_jsonl(run / RESULTS / "tiny" / "arith" / cell / "eval" / "final" / f"{row.benchmark}.jsonl")
        greedy = [s for s in samples if s["mode"] == "greedy"]
        assert row.n == len(greedy) == config["benchmarks"][row.benchmark]["n"]
        assert row.accuracy == pytest.approx(sum(s["correct"] for s in greedy) / len(greedy))
        assert row.accuracy_low <= row.accuracy <= row.accuracy_high
        summary = json.loads((run / RESULTS / "tiny" / "arith" / cell / "eval" / "final" / f"{row.benchmark}.json").read_text())
        assert summary["accuracy"] == pytest.approx(row.accuracy)
        if row.variant != "sft":
            assert row.gain == pytest.approx(row.accuracy - row.sft_accuracy)


def test_the_self_distilled_sft_set_holds_correct_samples_and_its_counts(run):
    config = yaml.safe_load(E2E_CONFIG.read_text())
    folder = run / RESULTS / "tiny-distill" / "arith" / "sft"
    counts = json.loads((folder / "data.json").read_text())
    rows = files.read_jsonl(folder / "data.jsonl")
    samples = config["models"]["tiny-distill"]["sft"]["self_distill"]["samples"]
    assert counts["problems"] == config["datasets"]["arith"]["n"] and counts["samples"] == samples * counts["problems"]
    assert 0 < counts["kept"] == len(rows) <= counts["correct"] <= counts["samples"]
    assert counts["problems_kept"] == len({row["problem"] for row in rows})
    assert all(grade(row["solution"], row["answer"]) for row in rows)
    # No kept solution is longer than RL's completions may be (its tokens and the end-of-sequence token).
    from grpo_lambda.models import load_tokenizer

    limit = config["rl"]["max_completion_length"]
    assert counts["max_tokens"] == limit and counts["too_long"] >= 0
    tokenizer = load_tokenizer(str(run / RESULTS / "tiny" / "arith" / "sft" / "model"))
    assert max(len(tokenizer(row["solution"], add_special_tokens=False)["input_ids"]) + 1 for row in rows) <= limit
    assert (run / RESULTS / "tiny-distill" / "arith" / "grpo" / "seed0" / "eval" / "final" / "arith-1.json").exists()


def test_every_cell_logged_every_step_and_kept_its_checkpoints(run):
    config = yaml.safe_load(E2E_CONFIG.read_text())
    for variant in config["variants"]:
        cell = run / RESULTS / "tiny" / "arith" / variant / "seed0"
        log = pd.read_csv(cell / "train_log.csv")
        assert list(log["step"]) == list(range(1, config["rl"]["max_steps"] + 1))
        assert log["reward"].between(0, 1).all() and log["step_time"].gt(0).all()
        # The share of boxed answers is logged at weight 0: a correct answer is a boxed one, so it is never
        # below the reward (the share of correct ones), and the reward is accuracy alone.
        assert log["boxed_reward"].between(0, 1).all() and (log["boxed_reward"] >= log["reward"] - 1e-9).all()
        for step in config["evaluation"]["checkpoints"]:
            assert (cell / "checkpoints" / f"step-{step}" / "model.safetensors").exists()
            assert (cell / "eval" / str(step) / "arith-1.jsonl").exists()
    trace_log = pd.read_csv(run / RESULTS / "tiny" / "arith" / "recent-trace" / "seed0" / "train_log.csv")
    assert trace_log["trace_weight"].notna().all()


def test_rl_changed_every_model(run):
    """Every cell's rewards disagreed within groups, its loss was nonzero, its weights left the SFT model's,
    and the variants trained different weights."""
    from grpo_lambda import config as study

    config = study.validate(yaml.safe_load(E2E_CONFIG.read_text()))
    assert rl_learning_problems(run / RESULTS, config) == []


def test_a_shared_sft_model_is_trained_once_and_both_training_sets_start_from_it(run):
    """tiny-shared (sft.data open_r1): one SFT model on the chat set, the start of its RL cells on both sets."""
    from conftest import largest_weight_change
    from grpo_lambda import fingerprint

    results = run / RESULTS
    shared = results / "tiny-shared" / "sft" / "model"
    assert largest_weight_change(results / "models" / "tiny-shared", shared) > 0
    for dataset in ("arith", "arith-b"):
        assert not (results / "tiny-shared" / dataset / "sft" / "model").exists()
        [record] = (results / "tiny-shared" / dataset / "grpo" / "seed0").rglob(fingerprint.FILE_NAME)
        assert json.loads(record.read_text())["base"] == fingerprint.path_digest(shared), dataset
        assert (results / "tiny-shared" / dataset / "sft" / "eval" / "final" / "arith-1.json").exists()


def embedded_files(html: str) -> dict[str, bytes]:
    """The files a Snakemake report embeds as base64 data URIs, by file name."""
    html = html.replace("\\/", "/")  # data URIs inside JSON strings may escape the slash
    found = re.finditer(r"data:[\w/.+-]+;charset=[\w-]+;filename=([^;\"']+);base64,([A-Za-z0-9+/=]+)", html)
    return {match.group(1): base64.b64decode(match.group(2)) for match in found}


def test_the_report_holds_the_tables_and_figures(run):
    html = (run / RESULTS / "report.html").read_text(errors="replace")
    embedded = embedded_files(html)
    assert {"results.csv", "table1.csv", "figure4.png"} <= set(embedded), sorted(embedded)
    assert embedded["figure4.png"].startswith(b"\x89PNG")
    # Table 1 as the report shows it is the table the pipeline wrote, value for value
    written = pd.read_csv(run / RESULTS / "tables" / "table1.csv")
    shown = pd.read_csv(io.BytesIO(embedded["table1.csv"]))
    pd.testing.assert_frame_equal(shown, written)
    is_tiny_grpo = (written["model"] == "tiny") & (written["method"] == "grpo")
    grpo = written[is_tiny_grpo].iloc[0]
    assert 0.0 <= grpo["average"] <= 1.0
    assert shown.loc[is_tiny_grpo, "average"].item() == grpo["average"]
    assert not list((run / RESULTS).rglob(".*.tmp-*")), "temporary files must be renamed away"


def test_the_provenance_table_names_one_environment_per_stage_for_every_file(run):
    from grpo_lambda import config as study
    from grpo_lambda import provenance

    config = study.load(str(E2E_CONFIG))
    table = pd.read_csv(run / RESULTS / "tables" / "provenance.csv")
    # One environment made the whole run (the commit may move if a developer commits meanwhile).
    versions = [column for column in provenance.FIELDS if column != "commit"]
    assert sorted(table.drop(columns="commit").drop_duplicates(subset=["stage", *versions])["stage"]) == [
        "evaluate", "sft", "train"]
    files_by_stage = table.groupby("stage")["files"].sum().to_dict()
    cells = study.rl_cells(config)
    baselines = [(model, dataset) for model in config["models"] for dataset in study.model_datasets(config, model)]
    sft_models = {study.sft_folder(config, model, dataset) for model, dataset in baselines}  # tiny-shared's: one
    assert files_by_stage["train"] == len(cells) and files_by_stage["sft"] == len(sft_models) == len(baselines) - 1
    steps = {model: 1 + len(study.model_checkpoints(config, model)) for model in config["models"]}
    evaluations = len(baselines) + sum(steps[cell["model"]] for cell in cells)
    assert files_by_stage["evaluate"] == len(config["benchmarks"]) * evaluations
    assert set(table["torch"]) == {provenance.record()["torch"]}


def test_every_cell_logged_its_completions_each_with_its_own_reward_and_advantage(run):
    """Rows that kept their own reward and advantage obey TRL's group normalisation: advantage =
    (reward - group mean) / (group std + 1e-4); completions shifted against their rewards would not."""
    import numpy as np

    from grpo_lambda import config as study
    from grpo_lambda.completions import read_cell

    config = study.load(str(E2E_CONFIG))
    every = config["rl"]["log_completions"]["every"]
    expected_steps = list(range(every, config["rl"]["max_steps"] + 1, every))
    for cell in study.rl_cells(config):
        folder = run / RESULTS / cell["model"] / cell["dataset"] / cell["variant"] / f"seed{cell['seed']}"
        logged = read_cell(folder)
        assert sorted(logged["step"].unique()) == expected_steps, folder
        for (step, prompt), group in logged.groupby(["step", "prompt"]):
            assert len(group) == config["rl"]["num_generations"]
            rewards = group["reward"].to_numpy(dtype=float)
            for completion, reward in zip(group["completion"], rewards):
                assert reward == float(grade(completion, _gold(run, cell["dataset"], prompt)))
            normalised = (rewards - rewards.mean()) / (rewards.std(ddof=1) + 1e-4)
            assert np.allclose(group["advantage"].to_numpy(dtype=float), normalised, atol=1e-5), (step, group)
    table = pd.read_csv(run / RESULTS / "tables" / "completions.csv")
    assert set(table["phase"]) == {"early", "late"} and len(table) == 2 * 2 * len(study.rl_cells(config))


def _gold(run, dataset, prompt):
    rows = files.read_jsonl(run / RESULTS / "data" / f"{dataset}.jsonl")
    return max((row for row in rows if row["problem"] in prompt), key=lambda row: len(row["problem"]))["answer"]


def test_the_train_job_evaluates_its_final_model_as_the_evaluate_stage_does(run, tmp_path, monkeypatch):
    """With the hf backend a cell's final evaluation is written by its train job: the same files, sample for
    sample, as the evaluate stage writes from the saved model in a process of its own."""
    cell = run / RESULTS / "tiny" / "arith" / "recent-trace" / "seed0"
    log = (run / RESULTS / "logs" / "train" / "tiny" / "arith" / "recent-trace" / "seed0.log").read_text()
    assert "grpo_lambda.evaluate INFO" in log and not (run / RESULTS / "logs" / "evaluate" / "tiny" / "arith" /
                                                        "recent-trace" / "seed0" / "final.log").exists()
    from grpo_lambda import config as study
    from grpo_lambda import evaluate

    config = study.load(str(E2E_CONFIG))
    settings = study.stage_settings(config, "evaluate", model="tiny", dataset="arith", variant="recent-trace")
    # from the run's folder and by the path the rules pass, so that the summaries' checkpoint fields agree too
    monkeypatch.chdir(run)
    benchmarks = [f"{RESULTS}/bench/{name}.jsonl" for name in config["benchmarks"]]
    evaluate.run(settings, model_path=str(cell.relative_to(run) / "model"), benchmark_paths=benchmarks,
                 out_dir=str(tmp_path), seed=0)
    for name in config["benchmarks"]:
        in_job = files.read_jsonl(cell / "eval" / "final" / f"{name}.jsonl")
        assert files.read_jsonl(tmp_path / f"{name}.jsonl") == in_job
        apart, in_job = (json.loads(path.read_text()) for path in (tmp_path / f"{name}.json",
                                                                     cell / "eval" / "final" / f"{name}.json"))
        assert {key: value for key, value in apart.items() if key != "provenance"} == {
            key: value for key, value in in_job.items() if key != "provenance"}


def _plan(run, *args, targets=()):
    plan = snakemake(run, "-n", "--quiet", "rules", *args, targets=targets).stdout
    return {line.split()[0]: int(line.split()[1]) for line in plan.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}


def test_one_cell_is_rebuilt_alone(run):
    """A deleted final evaluation is rebuilt by its cell's train job alone, which finds the cell trained (its
    resume state) and evaluates: the model and its training log stay what they were."""
    from conftest import largest_weight_change

    cell = run / RESULTS / "tiny" / "arith" / "grpo" / "seed0"
    target = f"{RESULTS}/tiny/arith/grpo/seed0/eval/final/arith-2.json"
    before = run / "model-before"
    shutil.copytree(cell / "model", before)
    train_log = (cell / "train_log.csv").read_text()
    (run / target).unlink()
    assert _plan(run, targets=[target]) == {"train": 1, "total": 1}
    snakemake(run, "--cores", "1", targets=[target])
    assert json.loads((run / target).read_text())["benchmark"] == "arith-2"
    assert largest_weight_change(before, cell / "model") == 0 and (cell / "train_log.csv").read_text() == train_log
    shutil.rmtree(before)


def test_a_forced_train_that_fails_leaves_the_cell_to_be_rebuilt_not_nothing_to_be_done(run):
    """--forcerun train deletes model/ and train_log.csv before the job runs; when the job then fails, the
    next run trains and evaluates the cell again (the default target names the training logs) instead of
    saying "Nothing to be done" over tables of a model that no longer exists."""
    import os

    cell = run / RESULTS / "tiny" / "arith" / "grpo" / "seed0"
    tokenizer = run / RESULTS / "tiny" / "arith" / "sft" / "model" / "tokenizer.json"
    text, stat = tokenizer.read_text(), tokenizer.stat()
    tokenizer.write_text("{")  # in place: the SFT model folder keeps its time, so Snakemake reruns nothing upstream
    try:
        failed = snakemake(run, "--cores", "1", "--forcerun", "train", targets=[str((cell / "model").relative_to(run))],
                           check=False)
    finally:
        tokenizer.write_text(text)
        os.utime(tokenizer, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert failed.returncode != 0
    assert not (cell / "model").exists(), failed.stdout[-3000:] + failed.stderr[-3000:]
    plan = snakemake(run, "-n", "--quiet", "rules").stdout
    jobs = {line.split()[0]: int(line.split()[1]) for line in plan.splitlines()
            if len(line.split()) == 2 and line.split()[1].isdigit()}
    # the train job evaluates the final model; the evaluate rule, the checkpoint at step 2
    assert jobs.get("train") == 1 and jobs.get("evaluate") == 1 and jobs.get("aggregate") == 1, plan
    snakemake(run, "--cores", "2")
    assert (cell / "model").is_dir() and list((cell / "eval" / "final").glob("*.json"))


def test_changed_evaluation_settings_evaluate_again_without_training_again(run):
    """The evaluation's settings are the train rule's params: a change reruns every cell's train job (and the
    other evaluations), each of which finds its cell trained and evaluates with the new settings."""
    from grpo_lambda import config as study

    config = study.load(str(E2E_CONFIG))
    override = ("--config", "evaluation={max_new_tokens: 40}")
    jobs = _plan(run, *override)
    cells = study.rl_cells(config)
    checkpoints = sum(len(study.model_checkpoints(config, cell["model"])) for cell in cells)
    baselines = sum(len(study.model_datasets(config, model)) for model in config["models"])
    assert (jobs["train"], jobs["evaluate"], jobs["evaluate_sft"]) == (len(cells), checkpoints, baselines), jobs
    assert "sft" not in jobs and "sft_shared" not in jobs, jobs
    cell = run / RESULTS / "tiny" / "arith" / "recent-trace" / "seed0"
    train_log = (cell / "train_log.csv").read_text()
    snakemake(run, "--cores", "1", *override, targets=[str(cell.relative_to(run) / "eval" / "final" / "arith-1.json")])
    summary = json.loads((cell / "eval" / "final" / "arith-1.json").read_text())
    assert summary["generation"]["max_new_tokens"] == 40
    assert (cell / "train_log.csv").read_text() == train_log
    log = (run / RESULTS / "logs" / "train" / "tiny" / "arith" / "recent-trace" / "seed0.log").read_text()
    assert "already trained to step" in log
