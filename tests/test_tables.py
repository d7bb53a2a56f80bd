"""Tables from a synthetic results tree in the paper's layout, whose accuracies are known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_lambda.tables import write
from grpo_lambda.tables.build import build_tables
from grpo_lambda.tables.collect import collect, collect_samples, expected_cells, load_published, summarise
from grpo_lambda.tables.labels import _published_variant, variant_label
from grpo_lambda.tables.names import table_files
from grpo_lambda.config.report import report_options
from results_tree import (BENCHMARKS, CHECKPOINT, DATASETS, MAX_STEPS, SEEDS, accuracy, build_tree, make_config,
                          mean_over_seeds)


@pytest.fixture(scope="module")
def tables(tree):
    root, config = tree
    return build_tables(config, root)


def _average(fn, *args):
    return np.mean([fn(*args, b) for b in BENCHMARKS])


def test_collect_reads_each_cell_exactly(tree):
    root, config = tree
    frame = collect(root, config)
    expected_rows = len(expected_cells(config))
    assert len(frame) == expected_rows
    for row in frame.sample(25, random_state=0).itertuples():
        seed = None if pd.isna(row.seed) else int(row.seed)
        truth = accuracy(row.model, row.dataset, row.variant, seed, row.step, row.benchmark)
        assert row.accuracy == pytest.approx(truth)
        assert row.n == BENCHMARKS[row.benchmark]
        n = BENCHMARKS[row.benchmark]
        assert row.formatted == pytest.approx(sum(pid % 4 != 0 for pid in range(n)) / n)
        assert row.mean_length == pytest.approx(10 + (n - 1) / 2)


def test_results_table_per_seed_with_gain_over_sft(tables):
    results = tables["results"]
    row = results[(results.model == "qwen15") & (results.dataset == "gsm8k") & (results.variant == "rt99")
                  & (results.seed == 1) & (results.benchmark == "amc")].iloc[0]
    truth = accuracy("qwen15", "gsm8k", "rt99", 1, "final", "amc")
    sft = accuracy("qwen15", "gsm8k", "sft", None, "final", "amc")
    assert row.accuracy == pytest.approx(truth)
    assert row.sft_accuracy == pytest.approx(sft)
    assert row.gain == pytest.approx(truth - sft)
    assert row.accuracy_low <= truth <= row.accuracy_high
    average = results[(results.model == "qwen15") & (results.dataset == "gsm8k") & (results.variant == "rt99")
                      & (results.seed == 1) & (results.benchmark == "average")].iloc[0]
    assert average.accuracy == pytest.approx(np.mean([accuracy("qwen15", "gsm8k", "rt99", 1, "final", b)
                                                      for b in BENCHMARKS]))
    sft_rows = results[results.variant == "sft"]
    assert sft_rows.seed.isna().all() and sft_rows.gain.isna().all()


def test_results_by_variant_is_themean_over_seeds(tables):
    by_variant = tables["results_by_variant"]
    row = by_variant[(by_variant.model == "qwen15") & (by_variant.dataset == "math12k")
                     & (by_variant.variant == "bw99") & (by_variant.benchmark == "minerva")].iloc[0]
    truth = mean_over_seeds("qwen15", "math12k", "bw99", "minerva")
    assert row.accuracy == pytest.approx(truth)
    assert row.n_seeds == 2
    assert row.gain == pytest.approx(truth - accuracy("qwen15", "math12k", "sft", None, "final", "minerva"))
    assert row.gain_low > 0 and bool(row.gain_distinguishable)  # +0.30 over SFT on 30 problems


def test_table1_default_is_the_mean_of_recent_trace_variants(tables):
    t1 = tables["table1"].set_index(["model", "method"])
    lam = t1.loc[("qwen15", "grpo_lambda")]
    assert lam["variants"] == "rt98 rt99"
    for benchmark in BENCHMARKS:
        truth = np.mean([mean_over_seeds("qwen15", d, v, benchmark) for d in DATASETS for v in ("rt98", "rt99")])
        assert lam[benchmark] == pytest.approx(truth)
        assert lam[f"{benchmark}_low"] <= lam[benchmark] <= lam[f"{benchmark}_high"]
    assert lam["average"] == pytest.approx(np.mean([lam[b] for b in BENCHMARKS]))
    grpo = t1.loc[("qwen15", "grpo")]
    assert grpo["amc"] == pytest.approx(np.mean([mean_over_seeds("qwen15", d, "grpo", "amc") for d in DATASETS]))
    # "small" was trained on one dataset and has only rt99 among the GRPO-λ variants.
    assert t1.loc[("small", "grpo_lambda"), "variants"] == "rt99"
    assert t1.loc[("small", "grpo_lambda"), "datasets"] == "math12k"


def test_table1_choice_from_the_config(tree):
    root, config = tree
    config = {**config, "report": {"grpo_lambda_variant": {"qwen15": "bw99", "small": "mean"}}}
    t1 = build_tables(config, root)["table1"].set_index(["model", "method"])
    assert t1.loc[("qwen15", "grpo_lambda"), "variants"] == "bw99"
    assert t1.loc[("qwen15", "grpo_lambda"), "label"] == "both/weight/0.99"  # one variant: its own label
    assert t1.loc[("qwen15", "grpo_lambda"), "math500"] == pytest.approx(
        np.mean([mean_over_seeds("qwen15", d, "bw99", "math500") for d in DATASETS]))


def test_published_difference(tables):
    published_t1, published_e = load_published()
    cmp = tables["table1_published"]
    assert set(cmp.model) == {"qwen15"}  # "small" has no paper_name
    row = cmp[(cmp.method == "grpo_lambda") & (cmp.benchmark == "math500")].iloc[0]
    paper = published_t1.set_index(["model", "method"]).loc[("Qwen2.5-Math-1.5B-Instruct", "grpo_lambda"), "math500"]
    assert row.published == pytest.approx(paper)
    assert row.difference == pytest.approx(row.ours - paper)

    appendix = tables["appendix_e_published"]
    cell = appendix[(appendix.variant == "grpo") & (appendix.dataset == "gsm8k")
                    & (appendix.benchmark == "aime24")].iloc[0]
    paper = published_e[(published_e.model == "Qwen2.5-Math-1.5B-Instruct") & (published_e.train_dataset == "gsm8k")
                        & (published_e.trace_style == "grpo") & (published_e.benchmark == "aime24")].accuracy.item()
    assert cell.published == pytest.approx(paper)
    assert cell.difference == pytest.approx(mean_over_seeds("qwen15", "gsm8k", "grpo", "aime24") - paper)
    lam_cell = appendix[(appendix.variant == "bw99") & (appendix.dataset == "math12k")
                        & (appendix.benchmark == "amc")]
    paper = published_e[(published_e.model == "Qwen2.5-Math-1.5B-Instruct") & (published_e.train_dataset == "math12k")
                        & (published_e.trace_style == "both") & (published_e.update_style == "weight")
                        & (published_e.lam == 0.99) & (published_e.benchmark == "amc")].accuracy.item()
    assert lam_cell.published.item() == pytest.approx(paper)
    assert "same" not in set(appendix.variant)  # only the baseline stands for the paper's GRPO
    assert set(appendix.model) == {"qwen15"}


def test_appendix_e_layout(tables):
    table = tables["appendix_e_qwen15"]
    assert list(table.columns) == ["benchmark", "dataset", "GRPO", "both/weight/0.99",
                                   "recent/trace/0.98", "recent/trace/0.99", "GRPO again"]
    assert list(table.benchmark[::2]) == list(BENCHMARKS) + ["average"]
    row = table[(table.benchmark == "olympiadbench") & (table.dataset == "gsm8k")].iloc[0]
    assert row["recent/trace/0.98"] == pytest.approx(mean_over_seeds("qwen15", "gsm8k", "rt98", "olympiadbench"))


def test_paired_comparison_detects_a_real_gap_and_not_a_null_one(tables):
    paired = tables["paired"]
    strong = paired[(paired.model == "qwen15") & (paired.dataset == "math12k") & (paired.method == "bw99")
                    & (paired.benchmark == "average")].iloc[0]
    truth = (_average(mean_over_seeds, "qwen15", "math12k", "bw99")
             - _average(mean_over_seeds, "qwen15", "math12k", "grpo"))
    assert strong["diff"] == pytest.approx(truth)
    assert strong.diff_low > 0 and bool(strong.distinguishable)
    null = paired[(paired.model == "qwen15") & (paired.method == "same") & (paired.benchmark == "math500")]
    assert set(null.dataset) == {"math12k", "gsm8k", "all"}
    assert (null["diff"].abs() < 1e-12).all()
    assert not null.distinguishable.any()
    assert ((null.diff_low < 0) & (null.diff_high > 0)).all()
    # Table 1's GRPO-λ against GRPO over all training sets
    overall = paired[(paired.model == "qwen15") & (paired.dataset == "all") & (paired.method == "grpo_lambda")
                     & (paired.benchmark == "amc")].iloc[0]
    lam = np.mean([mean_over_seeds("qwen15", d, v, "amc") for d in DATASETS for v in ("rt98", "rt99")])
    base = np.mean([mean_over_seeds("qwen15", d, "grpo", "amc") for d in DATASETS])
    assert overall["diff"] == pytest.approx(lam - base)


def test_checkpoints_table_places_sft_at_zero_and_final_at_max_steps(tables):
    table = tables["checkpoints"]
    rows = table[(table.model == "small") & (table.dataset == "math12k") & (table.benchmark == "amc")]
    steps = dict(zip(zip(rows.variant, rows.step), rows.step_num))
    assert steps[("sft", "final")] == 0
    assert steps[("rt99", str(CHECKPOINT))] == CHECKPOINT
    assert steps[("rt99", "final")] == MAX_STEPS
    mid = rows[(rows.variant == "rt99") & (rows.step == str(CHECKPOINT))].iloc[0]
    truth = np.mean([accuracy("small", "math12k", "rt99", s, CHECKPOINT, "amc") for s in SEEDS])
    assert mid.accuracy == pytest.approx(truth)


def test_main_writes_every_table_in_three_formats(tree, tmp_path):
    root, config = tree
    paths = write.main(config, root, tmp_path / "tables")
    assert [Path(p).name for p in paths] == table_files(config)
    for path in paths:
        assert Path(path).stat().st_size > 0
    tex = (tmp_path / "tables" / "table1.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and "qwen15" in tex
    md = (tmp_path / "tables" / "results_by_variant.md").read_text()
    assert md.startswith("| model") and "[" in md  # intervals shown as [low, high]
    csv = pd.read_csv(tmp_path / "tables" / "table1.csv")
    assert {"average", "average_low", "average_high"} <= set(csv.columns)
    assert not list((tmp_path / "tables").glob(".*tmp*"))


def test_partial_run_reports_what_exists(tree, tmp_path):
    root, config = tree
    partial = tmp_path / "partial"
    import shutil
    shutil.copytree(root, partial)
    shutil.rmtree(partial / "qwen15" / "gsm8k" / "bw99")  # a whole variant not run yet
    (partial / "qwen15" / "math12k" / "rt98" / "seed1" / "eval" / "final" / "amc.jsonl").unlink()
    tables = build_tables(config, partial)
    missing = tables["missing"]
    assert len(missing[(missing.variant == "bw99") & (missing.dataset == "gsm8k")]) == 2 * 2 * len(BENCHMARKS)
    assert len(missing) == 2 * 2 * len(BENCHMARKS) + 1
    by_variant = tables["results_by_variant"]
    rt98 = by_variant[(by_variant.model == "qwen15") & (by_variant.dataset == "math12k")
                      & (by_variant.variant == "rt98")]
    amc = rt98[rt98.benchmark == "amc"].iloc[0]
    assert amc.n_seeds == 2 and amc.accuracy == pytest.approx(  # seed 0 only on amc
        accuracy("qwen15", "math12k", "rt98", 0, "final", "amc"))
    assert "bw99" not in set(by_variant[by_variant.dataset == "gsm8k"].variant)
    t1 = tables["table1"].set_index(["model", "method"])
    assert t1.loc[("qwen15", "grpo_lambda"), "math500"] == pytest.approx(
        np.mean([mean_over_seeds("qwen15", d, v, "math500") for d in DATASETS for v in ("rt98", "rt99")]))


def test_empty_results_folder_still_writes_tables(tmp_path):
    config = make_config()
    paths = write.main(config, tmp_path / "nothing", tmp_path / "out")
    assert len(paths) == len(table_files(config))
    missing = pd.read_csv(tmp_path / "out" / "missing.csv")
    assert len(missing) == len(expected_cells(config))


def test_bad_report_options_name_the_key():
    config = make_config()
    for report, key in [({"level": 1.5}, "report.level"), ({"baseline": "nope"}, "report.baseline"),
                        ({"equivalence_margin": {"accuracy": -0.01}}, "report.equivalence_margin.accuracy"),
                        ({"equivalence_margin": {"loss": 0.01}}, "report.equivalence_margin.loss"),
                        ({"metric": "pass_at_k"}, "report.metric pass_at_k needs sampled completions"),
                        ({"grpo_lambda_variant": "nope"}, "report.grpo_lambda_variant"),
                        ({"grpo_lambda_variant": {"colour": "red"}}, "report.grpo_lambda_variant"),
                        ({"smoothing": 1.5}, "report.smoothing"), ({"typo": 1}, "unknown option")]:
        with pytest.raises(ValueError, match=key):
            report_options({**config, "report": report})


def test_variant_labels_distinguish_trace_forms():
    config = make_config()
    config["variants"]["rt99abs"] = {**config["variants"]["rt99"], "form": "absolute"}
    assert variant_label(config, "rt99") == "recent/trace/0.99/relative"
    assert variant_label(config, "rt99abs") == "recent/trace/0.99/absolute"
    assert variant_label(config, "same") == "GRPO again"
    assert _published_variant(config, "rt99abs", "grpo") == ("recent", "trace", "0.99")
    assert _published_variant(config, "grpo", "grpo") == ("grpo", "grpo", "")
    assert _published_variant(config, "same", "grpo") is None


@pytest.mark.parametrize("name", ["config", "compare", "beyond", "paper", "rehearsal"])
def test_every_variant_of_a_shipped_config_has_its_own_label(name):
    """Labels are table columns (Appendix E): two lines of one objective (ptrace and gspo-as-trace in
    compare.yaml) once shared the label "ptrace", and writing the tables failed."""
    from grpo_lambda import config as study

    config = study.load(str(Path(__file__).parents[1] / "config" / f"{name}.yaml"))
    labels = [variant_label(config, variant) for variant in config["variants"]]
    assert len(set(labels)) == len(labels), labels


def test_sampled_completions_give_pass_at_k(tmp_path):
    config = make_config()
    config["models"] = {"small": {"source": "y", "variants": ["grpo"], "datasets": ["math12k"]}}
    folder = tmp_path / "small" / "math12k" / "grpo" / "seed0" / "eval" / "final"
    folder.mkdir(parents=True)
    rows = [{"id": pid, "mode": "greedy", "sample": 0, "correct": pid == 0, "formatted": True, "length": 5}
            for pid in range(4)]
    # problem 0: 1 of 2 samples right, problem 1: 2 of 2, problems 2-3: none
    rows += [{"id": pid, "mode": "sampled", "sample": s, "correct": (pid == 0 and s == 1) or pid == 1,
              "formatted": True, "length": 5} for pid in range(4) for s in range(2)]
    (folder / "amc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    frame = collect(tmp_path, config)
    row = frame[frame.benchmark == "amc"].iloc[0]
    assert row.accuracy == pytest.approx(0.25) and row.n == 4
    assert row.k == 2 and row.sampled_accuracy == pytest.approx(3 / 8) and row.pass_at_k == pytest.approx(0.5)


def test_a_malformed_evaluation_line_is_skipped_and_named(tmp_path, caplog):
    config = make_config()
    config["models"] = {"small": {"source": "y", "variants": ["grpo"], "datasets": ["math12k"]}}
    folder = tmp_path / "small" / "math12k" / "sft" / "eval" / "final"
    folder.mkdir(parents=True)
    (folder / "amc.jsonl").write_bytes(b'{"id": 0, "correct": true}\n{"correct": tru\n{"id": 1, "correct": null}\n'
                                       b'{"id": "\xff"}\n{"id": 2, "correct": false, "length": "7"}\n'
                                       b'{"id": 3, "correct": false}\n{"id": 0, "correct": true}\n')
    samples = collect_samples(tmp_path, config)
    assert list(samples["id"]) == ["0", "3"] and list(samples["correct"]) == [1.0, 0.0]
    for line in (2, 3, 4, 5):
        assert f"amc.jsonl:{line}:" in caplog.text
    assert "dropped 5 of 7 rows" in caplog.text
    (folder / "amc.jsonl").write_text('{"id": 0, "correct": true}\n{"id": 0, "correct": false}\n')
    with pytest.raises(ValueError, match=r"amc\.jsonl:1 and .*amc\.jsonl:2"):
        collect_samples(tmp_path, config)


def test_a_config_without_grpo_compares_with_its_first_variant_and_shows_no_grpo(tmp_path):
    config = make_config()
    config["variants"] = {v: spec for v, spec in config["variants"].items() if spec["objective"] != "grpo"}
    config["models"]["small"]["variants"] = ["rt99"]
    build_tree(tmp_path / "results", config)
    paths = write.main(config, tmp_path / "results", tmp_path / "tables")
    assert [Path(p).name for p in paths] == table_files(config)
    tables = build_tables(config, tmp_path / "results")
    assert report_options(config)["baseline"] == "rt98"

    # Appendix E: each variant once, the baseline first; values are the variant's own
    e = tables["appendix_e_qwen15"].set_index(["benchmark", "dataset"])
    assert list(e.columns) == ["recent/trace/0.98", "both/weight/0.99", "recent/trace/0.99"]
    for variant, label in [("rt98", "recent/trace/0.98"), ("bw99", "both/weight/0.99")]:
        assert e.loc[("amc", "gsm8k"), label] == pytest.approx(mean_over_seeds("qwen15", "gsm8k", variant, "amc"))

    # Table 1: no row labelled GRPO, since no variant is GRPO; GRPO-λ is the recent/trace mean
    t1 = tables["table1"].set_index(["model", "method"])
    assert set(t1.index) == {("qwen15", "sft"), ("qwen15", "grpo_lambda"), ("small", "sft"), ("small", "grpo_lambda")}
    assert t1.loc[("qwen15", "grpo_lambda"), "variants"] == "rt98 rt99"
    assert "grpo" not in set(tables["table1_published"]["method"])

    # the published comparison pairs the baseline with its own twin, never with the paper's GRPO
    _, published_e = load_published()
    twin = published_e[(published_e.model == "Qwen2.5-Math-1.5B-Instruct") & (published_e.trace_style == "recent")
                       & (published_e.update_style == "trace") & (published_e.lam == 0.98)]
    twin = twin.set_index(["train_dataset", "benchmark"])["accuracy"]
    ours = tables["appendix_e_published"]
    ours = ours[ours.variant == "rt98"].set_index(["dataset", "benchmark"])["published"]
    assert len(ours) == len(DATASETS) * (len(BENCHMARKS) + 1)
    assert set(ours.index) <= set(twin.index)
    assert all(ours[key] == pytest.approx(twin[key]) for key in ours.index)

    # paired: every difference is against the baseline
    assert set(tables["paired"]["baseline"]) == {"rt98"}
    assert set(tables["paired"]["method"]) == {"bw99", "rt99", "grpo_lambda"}


# --------------------------------------------------------------------------------------------------
# Table 1's GRPO-λ row never averages in GRPO; greedy answers only; pass@k is "any of k"
# --------------------------------------------------------------------------------------------------


def _table1(config: dict, root) -> pd.DataFrame:
    from grpo_lambda.tables.cells import Cells
    from grpo_lambda.tables.table1 import table1

    options = report_options(config)
    cells = Cells(collect_samples(root, config), config, options)
    return table1(cells, config, options).set_index(["model", "method"])


@pytest.mark.parametrize("choice", ["mean", {"style": "both", "update": "trace"}],
                         ids=["mean", "selector-matching-nothing"])
def test_table1_grpo_lambda_row_averages_grpo_lambda_variants_only(tree, choice):
    """"mean", and a selector that matches no variant (which falls back to "mean"), average the
    model's GRPO-λ variants: neither the baseline GRPO nor the other GRPO ("same") comes in."""
    root, config = tree
    config = {**config, "report": {"grpo_lambda_variant": choice}}
    t1 = _table1(config, root)
    lam = t1.loc[("qwen15", "grpo_lambda")]
    assert lam["variants"] == "rt98 rt99 bw99"
    for benchmark in BENCHMARKS:
        truth = np.mean([mean_over_seeds("qwen15", d, v, benchmark) for d in DATASETS
                         for v in ("rt98", "rt99", "bw99")])
        assert lam[benchmark] == pytest.approx(truth)
    # "small" has one GRPO-λ variant beside two GRPO ones: the row is rt99's alone
    small = t1.loc[("small", "grpo_lambda")]
    assert small["variants"] == "rt99"
    assert small["amc"] == pytest.approx(mean_over_seeds("small", "math12k", "rt99", "amc"))
    assert small["amc"] != pytest.approx(np.mean([mean_over_seeds("small", "math12k", v, "amc")
                                                  for v in ("grpo", "rt99", "same")]))
    # and GRPO stays the baseline's own row
    assert t1.loc[("qwen15", "grpo"), "variants"] == "grpo"


def test_table1_counts_greedy_answers_only(tmp_path):
    """Sampled completions (for pass@k) sit in the same files; every one of them has the verdict its
    problem's greedy answer does not, so any of them counted would move the accuracy."""
    config = make_config()
    config["models"] = {"small": {"source": "y", "variants": ["grpo", "rt99"], "datasets": ["math12k"]}}
    config["benchmarks"] = {"amc": {"source": "registry"}, "aime24": {"source": "registry"}}
    config["report"] = {}
    greedy_right = {  # (variant, seed, benchmark): the problems the greedy answer gets right
        ("grpo", 0, "amc"): {0}, ("grpo", 1, "amc"): {0, 1},
        ("rt99", 0, "amc"): {0, 1, 2}, ("rt99", 1, "amc"): {1, 2, 3},
        ("grpo", 0, "aime24"): {0}, ("grpo", 1, "aime24"): set(),
        ("rt99", 0, "aime24"): {0, 1}, ("rt99", 1, "aime24"): {0},
    }
    problems = {"amc": 4, "aime24": 2}
    for (variant, seed, benchmark), right in greedy_right.items():
        folder = tmp_path / "small" / "math12k" / variant / f"seed{seed}" / "eval" / "final"
        folder.mkdir(parents=True, exist_ok=True)
        rows = [{"id": pid, "mode": "greedy", "sample": 0, "correct": pid in right}
                for pid in range(problems[benchmark])]
        rows += [{"id": pid, "mode": "sampled", "sample": s, "correct": pid not in right}
                 for pid in range(problems[benchmark]) for s in range(3)]
        (folder / f"{benchmark}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    t1 = _table1(config, tmp_path)
    # grpo: amc (1 + 2) / 8, aime24 (1 + 0) / 4; rt99: amc (3 + 3) / 8, aime24 (2 + 1) / 4
    assert t1.loc[("small", "grpo"), "amc"] == pytest.approx(3 / 8)
    assert t1.loc[("small", "grpo"), "aime24"] == pytest.approx(1 / 4)
    assert t1.loc[("small", "grpo"), "average"] == pytest.approx((3 / 8 + 1 / 4) / 2)
    assert t1.loc[("small", "grpo_lambda"), "amc"] == pytest.approx(6 / 8)
    assert t1.loc[("small", "grpo_lambda"), "aime24"] == pytest.approx(3 / 4)
    assert t1.loc[("small", "grpo_lambda"), "average"] == pytest.approx(3 / 4)


# Sampled completions of four problems, k = 3, in the order evaluate writes them (problem by problem):
# p0 1 of 3 right, p1 3 of 3, p2 none, p3 1 of 3. Any right: p0, p1, p3 -> pass@3 = 3/4 (all three
# right: p1 alone, 1/4); 5 of the 12 completions right.
PASS_AT_K_SAMPLED = {"p0": [True, False, False], "p1": [True, True, True], "p2": [False, False, False],
                     "p3": [False, True, False]}


def test_pass_at_k_is_any_of_k_right_in_the_evaluation_summary():
    from grpo_lambda.evaluate import _summary

    greedy = [{"id": pid, "mode": "greedy", "sample": 0, "correct": pid == "p0", "formatted": True, "length": 4}
              for pid in PASS_AT_K_SAMPLED]
    answers = {"p0": ["4", "5", "5"], "p1": ["7", "7", "7"], "p2": [None, "1", "2"], "p3": ["1", "2", "3"]}
    sampled = [{"id": pid, "mode": "sampled", "sample": j, "correct": right, "formatted": True, "length": 6,
                "extracted": answers[pid][j]}
               for pid, verdicts in PASS_AT_K_SAMPLED.items() for j, right in enumerate(verdicts)]
    summary = _summary(greedy, sampled, 3, 4)
    assert summary["accuracy"] == pytest.approx(1 / 4) and summary["n"] == 4
    # pass@2 per problem: 1 - C(3-c, 2)/C(3, 2) = 2/3, 1, 0, 2/3; maj@3: "5" wrong, "7" right, "1" (the first of
    # a tie) wrong, p2 "1" of a tie wrong.
    assert summary["sampled"] == {"k": 3, "mean_accuracy": pytest.approx(5 / 12), "pass_at_k": pytest.approx(3 / 4),
                                  "pass_at": {"1": pytest.approx(5 / 12), "2": pytest.approx(7 / 12),
                                              "3": pytest.approx(3 / 4)},
                                  "maj_at_k": pytest.approx(1 / 4)}
    sampled_only = _summary([], sampled, 3, 4)
    assert "accuracy" not in sampled_only and sampled_only["n"] == 4


def test_pass_at_k_is_any_of_k_right_in_the_tables():
    keys = {"model": "small", "dataset": "math12k", "variant": "grpo", "seed": 0, "step": "final", "benchmark": "amc"}
    rows = [{**keys, "id": pid, "mode": "greedy", "sample": 0, "correct": float(pid == "p0"), "formatted": 1.0,
             "length": 4.0} for pid in PASS_AT_K_SAMPLED]
    rows += [{**keys, "id": pid, "mode": "sampled", "sample": j, "correct": float(right), "formatted": 1.0,
              "length": 6.0} for pid, verdicts in PASS_AT_K_SAMPLED.items() for j, right in enumerate(verdicts)]
    row = summarise(pd.DataFrame(rows)).iloc[0]
    assert row.accuracy == pytest.approx(1 / 4) and row.n == 4
    assert row.k == 3 and row.sampled_accuracy == pytest.approx(5 / 12) and row.pass_at_k == pytest.approx(3 / 4)


def test_sampled_metrics_in_the_results_rows_by_hand():
    """Four samples per problem: avg@4, the unbiased pass@1 and pass@2, pass@4 and maj@4, worked by hand."""
    keys = {"model": "small", "dataset": "math12k", "variant": "grpo", "seed": 0, "step": "final", "benchmark": "amc"}
    sampled = {"p0": [("7", 1), ("8", 0), ("7", 1), ("9", 0)],   # c=2: pass@2 = 1 - C(2,2)/C(4,2) = 5/6; maj 7: 1
               "p1": [("3", 0), ("3", 0), ("2", 1), (None, 0)],  # c=1: pass@2 = 1 - C(3,2)/C(4,2) = 1/2; maj 3: 0
               "p2": [("5", 0), (None, 0), ("6", 0), ("5", 0)]}  # c=0: 0; maj 0
    rows = [{**keys, "id": pid, "mode": "sampled", "sample": j, "correct": float(right), "formatted": 1.0,
             "length": 5.0, "extracted": answer}
            for pid, draws in sampled.items() for j, (answer, right) in enumerate(draws)]
    rows += [{**keys, "id": pid, "mode": "greedy", "sample": 0, "correct": 1.0, "formatted": 1.0, "length": 5.0,
              "extracted": "x"} for pid in sampled]
    row = summarise(pd.DataFrame(rows)).iloc[0]
    assert row.k == 4 and row.sampled_accuracy == pytest.approx(3 / 12) and row.pass_at_1 == pytest.approx(3 / 12)
    assert row.pass_at_2 == pytest.approx((5 / 6 + 1 / 2 + 0) / 3)
    assert row.pass_at_k == pytest.approx(2 / 3) and row.maj_at_k == pytest.approx(1 / 3)
    assert "pass_at_4" not in row.index  # k itself is pass_at_k


# Sampled completions of every problem: sample j of problem p is right when (p + j) % 4 < Q[variant], so
# each problem's avg@4 is Q/4 exactly, and every greedy verdict stays as the tree writes it.
Q = {"sft": 0, "grpo": 1, "rt98": 2, "rt99": 3, "bw99": 4, "same": 1}


def test_report_metric_avg_puts_avg_at_k_in_table1_and_the_paired_table(tmp_path):
    config = make_config()
    config["evaluation"]["samples"] = 4
    build_tree(tmp_path, config)
    for path in tmp_path.rglob("*.jsonl"):
        variant = path.parts[len(tmp_path.parts) + 2]
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        rows += [{"id": row["id"], "mode": "sampled", "sample": j, "correct": (row["id"] + j) % 4 < Q[variant],
                  "extracted": "1", "formatted": True, "length": 5} for row in rows for j in range(4)]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    greedy = build_tables(config, tmp_path)
    averaged = build_tables({**config, "report": {**config["report"], "metric": "avg"}}, tmp_path)
    t1 = averaged["table1"].set_index(["model", "method"])
    assert t1.loc[("qwen15", "grpo"), "average"] == pytest.approx(1 / 4)
    assert t1.loc[("qwen15", "grpo_lambda"), "average"] == pytest.approx((2 / 4 + 3 / 4) / 2)  # rt98, rt99
    assert t1.loc[("small", "grpo_lambda"), "amc"] == pytest.approx(3 / 4)
    assert t1.loc[("qwen15", "sft"), "average"] == 0.0
    assert greedy["table1"].set_index(["model", "method"]).loc[("qwen15", "grpo"), "average"] == pytest.approx(
        _average(_mean_over_dataset_and_seeds, "qwen15", "grpo"))
    paired = averaged["paired"]
    row = paired[(paired["model"] == "qwen15") & (paired["method"] == "rt99") & (paired["dataset"] == "gsm8k")
                 & (paired["benchmark"] == "average")].iloc[0]
    # The same gap on every problem: the paired interval has no width.
    assert row["diff"] == pytest.approx(2 / 4) and row["diff_low"] == pytest.approx(2 / 4) == row["diff_high"]
    results = averaged["results"].set_index(["model", "dataset", "variant", "seed", "benchmark"])
    cell = results.loc[("qwen15", "gsm8k", "rt99", 0, "amc")]
    assert cell["accuracy"] == pytest.approx(3 / 4) and cell["sampled_accuracy"] == pytest.approx(3 / 4)
    assert cell["k"] == 4 and cell["pass_at_k"] == 1.0 and cell["pass_at_1"] == pytest.approx(3 / 4)
    assert cell["pass_at_2"] == pytest.approx(1 - 0 / 6)  # one wrong of four: 1 - C(1, 2)/C(4, 2) = 1
    assert cell["maj_at_k"] == pytest.approx(3 / 4)  # every sample answers "1": the first sample's verdict


def _mean_over_dataset_and_seeds(model, variant, benchmark):
    return np.mean([mean_over_seeds(model, dataset, variant, benchmark) for dataset in DATASETS])


# --- Table 1 on a partial results tree -------------------------------------------------------------


def test_table1_averages_over_the_variants_present(tree, tmp_path):
    """A variant missing on one training set leaves that set's GRPO-λ mean to the variants present."""
    import shutil

    root, config = tree
    partial = tmp_path / "partial"
    shutil.copytree(root, partial)
    shutil.rmtree(partial / "qwen15" / "gsm8k" / "rt98")  # rt99 alone on gsm8k
    shutil.rmtree(partial / "qwen15" / "gsm8k" / "grpo")  # GRPO on math12k only
    config = {**config, "report": {}}
    t1 = build_tables(config, partial)["table1"].set_index(["model", "method"])
    lam, grpo = t1.loc[("qwen15", "grpo_lambda")], t1.loc[("qwen15", "grpo")]
    assert lam["variants"] == "rt98 rt99" and lam["datasets"] == "math12k gsm8k"
    for benchmark in BENCHMARKS:
        math12k = np.mean([mean_over_seeds("qwen15", "math12k", v, benchmark) for v in ("rt98", "rt99")])
        gsm8k = mean_over_seeds("qwen15", "gsm8k", "rt99", benchmark)
        assert lam[benchmark] == pytest.approx((math12k + gsm8k) / 2)
        assert grpo[benchmark] == pytest.approx(mean_over_seeds("qwen15", "math12k", "grpo", benchmark))
    assert grpo["datasets"] == "math12k"
    assert lam["average"] == pytest.approx(np.mean([lam[b] for b in BENCHMARKS]))
    assert set(DATASETS) == {"math12k", "gsm8k"}


def test_the_majority_vote_of_all_problems_at_once_is_the_per_problem_rule():
    """collect.sampled_per_problem counts the votes of every problem in one pass; each problem's verdict must
    be sampling.majority_correct's (most frequent answer, ties to the first seen, blanks not voting)."""
    from grpo_lambda.sampling import majority_correct
    from grpo_lambda.tables.collect import sampled_per_problem

    rng = np.random.default_rng(0)
    keys = {"model": "m", "dataset": "d", "variant": "v", "seed": 0, "step": "final", "benchmark": "b"}
    rows = []
    for pid in range(300):
        for sample in range(int(rng.integers(1, 7))):
            answer = [None, "", "1", "2", "3"][int(rng.integers(0, 5))]
            rows.append({**keys, "id": str(pid), "mode": "sampled", "sample": sample, "extracted": answer,
                         "correct": float(rng.random() < 0.5)})
    frame = pd.DataFrame(rows)
    per_problem = sampled_per_problem(frame).set_index("id")
    for pid, group in frame.groupby("id"):
        assert per_problem.loc[pid, "maj"] == majority_correct(list(group["extracted"]), list(group["correct"])), pid
        assert per_problem.loc[pid, "samples"] == len(group) and per_problem.loc[pid, "right"] == group["correct"].sum()
