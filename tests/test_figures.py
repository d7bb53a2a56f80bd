"""Figures from a synthetic results tree, the smoothing and colours they use, and the report captions."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from grpo_lambda import figures, smoothing
from grpo_lambda.config import model_variants
from grpo_lambda.figures.trace_weights import FIGURE2_TOKENS
from grpo_lambda.tables import names, training, write
from grpo_lambda.tables.collect import collect_train_logs
from grpo_lambda.tables.labels import method_label, variant_label
from grpo_lambda.config.report import report_options
from grpo_lambda.traces import STYLES, trace_matrix
from results_tree import (CHECKPOINT, DATASETS, EFFECT, MAX_STEPS, SEEDS, mean_over_seeds, accuracy,
                          make_config)

REPO = Path(__file__).resolve().parents[1]


WINDOW = 7  # the figures' final window here: not the default (20) nor the whole run (MAX_STEPS)
FIGURE3_WINDOW = 5  # Figure 3's own window (the paper's caption: 20), not final_window


def small_config() -> dict:
    """The synthetic tree's config with two benchmarks, to keep the drawing fast, a final window of
    WINDOW steps and Figure 4 on math12k only (as the paper's leaves GSM8K out)."""
    config = make_config()
    config["benchmarks"] = {b: config["benchmarks"][b] for b in ("aime24", "amc")}
    config["report"].update(final_window=WINDOW, figure3_window=FIGURE3_WINDOW, figure4_datasets=["math12k"])
    return config


@pytest.fixture(scope="module")
def tree_config():
    """conftest's synthetic tree, drawn from two benchmarks."""
    return small_config()


@pytest.fixture(scope="module")
def tables_dir(tree, tmp_path_factory):
    """The tables the aggregate stage writes from the tree: what the figures are drawn from."""
    root, config = tree
    folder = tmp_path_factory.mktemp("tables")
    write.main(config, root, folder)
    return folder


def _kind(path: Path) -> str:
    head = path.read_bytes()[:8]
    return "png" if head.startswith(b"\x89PNG") else "pdf" if head.startswith(b"%PDF") else "?"


def _series(panel: dict, kind: str, label: str | None = None) -> dict:
    found = [s for s in panel["series"] if s["kind"] == kind and (label is None or s.get("label") == label)]
    assert len(found) == 1, (kind, label, [s.get("label") for s in panel["series"]])
    return found[0]


def _final_train_reward(variant: str, seed: int, window: int) -> float:
    """The synthetic tree's mean reward over the last `window` of its steps (results_tree's formula)."""
    steps = np.arange(MAX_STEPS - window + 1, MAX_STEPS + 1)
    return float(np.mean(0.2 + EFFECT[variant] + 0.01 * seed + 0.3 * (1 - np.exp(-steps / 10))))


def test_every_figure_draws_the_known_values(tree, tables_dir, tmp_path):
    """Each figure is written as PNG and PDF with its data beside it; the drawn values are the tree's."""
    root, config = tree
    out = tmp_path / "figures"
    paths = figures.main(config, tables_dir, out)
    assert [Path(p).name for p in paths] == names.figure_files(config)
    assert len(paths) == 2 * (9 + 2 * len(config["models"]))  # nine grid-wide figures, two per model
    for path in map(Path, paths):
        assert path.stat().st_size > 1000
        assert _kind(path) == path.suffix[1:]
    assert not list(out.glob(".*tmp*"))
    drawn = {name: json.loads((out / f"{name}.json").read_text()) for name in names.figure_names(config)}
    benchmarks = list(config["benchmarks"])

    # figure 1: two training sets and no MathRL-16K, so Table 1's rows of qwen15 (SFT and every method),
    # per benchmark and on average
    (panel,) = drawn["figure1"]["panels"]
    assert panel["xticklabels"] == benchmarks + ["average"] and not panel["notes"]
    assert panel["title"] == "Qwen2.5-Math-1.5B-Instruct: mean over training sets"
    assert drawn["figure1"]["legend"] == ["SFT", "GRPO", "GRPO-λ", "GRPO again"]
    for label, variants in (("SFT", ["sft"]), ("GRPO", ["grpo"]), ("GRPO-λ", ["rt98", "rt99"])):
        per_benchmark = [np.mean([mean_over_seeds("qwen15", d, v, b) if v != "sft" else
                                  accuracy("qwen15", d, "sft", None, "final", b) for d in DATASETS for v in variants])
                         for b in benchmarks]
        assert _series(panel, "bar", label)["y"] == pytest.approx(per_benchmark + [np.mean(per_benchmark)])

    # figure 3: final training reward over its own last FIGURE3_WINDOW steps (not final_window), a bar per
    # variant and training set, a dot per seed; every cell, since figure3_paper_cells is off
    assert (report_options(config)["final_window"], report_options(config)["figure3_window"]) == (WINDOW, FIGURE3_WINDOW)
    qwen = drawn["figure3"]["panels"][0]
    assert qwen["ylabel"] == f"train reward (last {FIGURE3_WINDOW} steps)"
    grpo = _series(qwen, "bar", "GRPO")
    assert grpo["y"] == pytest.approx([np.mean([_final_train_reward("grpo", s, FIGURE3_WINDOW) for s in SEEDS])] * 2)
    assert grpo["y"] != pytest.approx([np.mean([_final_train_reward("grpo", s, WINDOW) for s in SEEDS])] * 2)
    dots = sorted(y for points in qwen["series"] if points["kind"] == "points" for y in points["y"])
    expected = sorted(_final_train_reward(v, s, FIGURE3_WINDOW) for v in config["variants"] for s in SEEDS
                      for _ in DATASETS)
    assert dots == pytest.approx(expected)

    # figure 4: report.figure4_datasets (math12k) only: no GSM8K panel
    assert [p["title"] for p in drawn["figure4"]["panels"] if p["series"]] == ["qwen15 / math12k", "small / math12k"]

    # reward curves: every variant, ending near its last logged reward (a smoothed mean over seeds)
    curves = drawn["reward_curves"]["panels"][0]
    assert {s["label"] for s in curves["series"] if s["kind"] == "line"} == {
        variant_label(config, v) for v in config["variants"]}
    line = _series(curves, "line", "GRPO")
    assert line["x"][-1] == MAX_STEPS
    assert line["y"][-1] == pytest.approx(np.mean([_final_train_reward("grpo", s, 1) for s in SEEDS]), abs=0.02)

    # checkpoints of qwen15, math12k / amc: SFT at step 0, the checkpoint, the final model at max_steps
    panel = next(p for p in drawn["checkpoints_qwen15"]["panels"] if p["title"] == "math12k / amc")
    line = _series(panel, "line", variant_label(config, "rt99"))
    assert line["x"] == [0, CHECKPOINT, MAX_STEPS]
    assert line["y"] == pytest.approx([accuracy("qwen15", "math12k", "sft", None, "final", "amc"),
                                       mean_over_seeds_at("qwen15", "math12k", "rt99", CHECKPOINT, "amc"),
                                       mean_over_seeds("qwen15", "math12k", "rt99", "amc")])

    # one legend per figure, outside the panels, naming each line once, by the tables' names
    shown = {variant_label(config, v) for v in ["sft", *config["variants"]]} | {
        method_label(config, m) for m in ("grpo", "grpo_lambda")}
    for name, data in drawn.items():
        assert len(data["legend"]) == len(set(data["legend"])), (name, data["legend"])
        assert set(data["legend"]) <= shown, name
        if name != "figure2":  # its panels name forms, not variants
            assert not any(panel["legend"] for panel in data["panels"]), name
def mean_over_seeds_at(model, dataset, variant, step, benchmark):
    return np.mean([accuracy(model, dataset, variant, s, step, benchmark) for s in SEEDS])


def test_figures_of_an_empty_results_folder_say_so(tmp_path):
    config = small_config()
    config["models"] = {"qwen15": config["models"]["qwen15"]}
    out = tmp_path / "figures"
    write.main(config, tmp_path / "nothing", tmp_path / "tables")
    paths = figures.main(config, tmp_path / "tables", out)
    assert [Path(p).name for p in paths] == names.figure_files(config)
    for name in names.figure_names(config):
        if name in ("figure2", "appendix_d"):  # the trace weights need no run; Appendix D is off here
            continue
        panels = json.loads((out / f"{name}.json").read_text())["panels"]
        shown = [panel for panel in panels if panel["title"] or panel["notes"]]
        assert shown, name
        for panel in shown:
            assert not panel["series"], name
            # the config trains at β = 0: no KL will ever be logged, and its panels say so
            expected = "β = 0: no KL" if name == "kl" or "KL" in panel["title"] else "yet"
            assert len(panel["notes"]) == 1 and expected in panel["notes"][0], (name, panel)
    notes = {json.loads((out / f"{name}.json").read_text())["panels"][0]["notes"][0] for name in ("figure1", "figure3")}
    assert notes == {"no results for qwen15 yet", "qwen15: no training logs yet"}


def test_a_kl_panel_says_why_it_is_empty():
    """At β = 0 TRL logs no KL, ever: the panel says so, not "not logged yet"; a variant with a β of its own
    (or rl.beta) is waited for."""
    config = small_config()
    config["models"] = {"qwen15": config["models"]["qwen15"]}
    config["datasets"] = {"math12k": config["datasets"]["math12k"]}
    options = report_options(config)
    no_curves = pd.DataFrame(columns=["model", "dataset", "variant", "metric", "step", "mean", "low", "high"])

    def notes(config):
        fig = figures.kl_figure(config, no_curves, options)
        drawn = figures.figure_data(fig)["panels"]
        plt.close(fig)
        return [note for panel in drawn for note in panel["notes"]]

    assert notes(config) == ["β = 0: no KL to the reference model\nis computed or logged (rl.beta)"]
    config["variants"]["rt99"]["beta"] = 0.04
    assert notes(config) == ["no kl logged yet"]
    del config["variants"]["rt99"]["beta"]
    config["rl"]["beta"] = 0.04
    assert notes(config) == ["no kl logged yet"]


def test_each_variant_keeps_one_distinct_colour():
    config = make_config()
    colours = {v: figures.variant_colour(config, v) for v in ["sft", *config["variants"]]}
    assert colours["grpo"] == figures.GRPO_COLOUR and colours["sft"] == figures.SFT_COLOUR
    assert len({mcolors.to_hex(c) for c in colours.values()}) == len(colours)
    assert figures.GRPO_LAMBDA_METHOD_COLOUR not in {mcolors.to_hex(c) for c in colours.values()}
    # adding a variant at the end leaves the others as they were
    config["variants"]["extra"] = {"objective": "grpo_lambda", "lam": 0.5}
    assert all(figures.variant_colour(config, v) == c for v, c in colours.items())
    with pytest.raises(ValueError, match="nope"):
        figures.variant_colour(config, "nope")


def test_curves_are_drawn_in_their_variant_colour(tree):
    root, config = tree
    options = report_options(config)
    logs = collect_train_logs(root, config)
    fig = figures.kl_figure(config, training.training_curves_table(config, logs, options), options)
    ax = fig.axes[0]  # qwen15 / math12k: every variant
    labels = {variant_label(config, v): v for v in config["variants"]}
    drawn = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert set(drawn) == set(labels)
    for label, colour in drawn.items():
        assert mcolors.same_color(colour, figures.variant_colour(config, labels[label]))
    plt.close(fig)


def test_figure4_shows_grpo_and_the_lambda_099_trace_not_the_best(tree):
    """Figure 4's GRPO-λ is fixed before the outcome (λ 0.99, recent ε-trace: rt99), although bw99 has the
    highest synthetic reward; report.figure4_variant "best" restores the choice by the plotted reward."""
    root, config = tree
    options = report_options(config)
    logs = collect_train_logs(root, config)
    curves = training.training_curves_table(config, logs, options)
    final = training.final_reward_table(config, logs, options["final_window"])
    fig = figures.figure4(config, curves, final, options)
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["GRPO", "recent/trace/0.99"]
    plt.close(fig)
    fig = figures.figure4(config, curves, final, {**options, "figure4_variant": "best"})
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["GRPO", "both/weight/0.99"]
    plt.close(fig)


def test_reward_curves_compare_every_variant_of_the_model(tree):
    root, config = tree
    options = report_options(config)
    fig = figures.reward_curves_figure(config, training.training_curves_table(config, collect_train_logs(root, config),
                                                                               options), options)
    labels = {line.get_label() for line in fig.axes[0].get_lines()}
    model = next(iter(config["models"]))
    assert labels == {variant_label(config, v) for v in model_variants(config, model)} - {"SFT"}
    plt.close(fig)


def test_final_reward_averages_the_last_window_of_steps(tree):
    root, config = tree
    logs = collect_train_logs(root, config)
    final = training.final_reward_table(config, logs, 5)
    run = logs[(logs.model == "qwen15") & (logs.dataset == "gsm8k") & (logs.variant == "rt98") & (logs.seed == 1)]
    row = final[(final.model == "qwen15") & (final.dataset == "gsm8k") & (final.variant == "rt98")
                & (final.seed == 1)]
    assert row.reward.item() == pytest.approx(run.sort_values("step").reward.iloc[-5:].mean())


def test_smoothing_is_a_debiased_ema():
    assert np.allclose(smoothing.smooth([3.0] * 5, 0.9), 3.0)  # debiasing: no pull towards 0
    w = 0.5
    out = smoothing.smooth([1.0, 0.0, np.nan, 1.0], w)
    s1 = (1 - w) * 1.0
    s2 = w * s1
    s3 = w * s2 + (1 - w)
    assert out[0] == pytest.approx(1.0)
    assert out[1] == pytest.approx(s2 / (1 - w ** 2))
    assert out[2] == pytest.approx(out[1])  # NaN carries the average over
    assert out[3] == pytest.approx(s3 / (1 - w ** 3))
    assert np.array_equal(smoothing.smooth([1.0, 2.0], 0.0), [1.0, 2.0])
    with pytest.raises(ValueError, match="weight"):
        smoothing.smooth([1.0], 1.0)


def test_seed_band_spans_the_seeds():
    log = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "step": [1, 2, 3, 4] * 2,
                        "reward": [0.1, 0.2, 0.3, 0.4, 0.3, 0.4, 0.5, 0.6]})
    curve = training.seed_curves(log, "reward", 0.0)
    assert np.allclose(curve["low"], [0.1, 0.2, 0.3, 0.4])
    assert np.allclose(curve["high"], [0.3, 0.4, 0.5, 0.6])
    assert np.allclose(curve["mean"], [0.2, 0.3, 0.4, 0.5])


CAPTIONS = sorted(path.relative_to(REPO / "workflow" / "report").as_posix()
                  for path in (REPO / "workflow" / "report").rglob("*.rst"))


def test_every_figure_has_its_caption():
    """One caption per figure (a per-model figure's for all models): the file the figures rule names."""
    templates = {template.replace("_{model}", "") for template in names.FIGURES}
    assert {f"figures/{template}.rst" for template in templates} == {c for c in CAPTIONS if c.startswith("figures/")}


@pytest.mark.parametrize("caption", CAPTIONS)
@pytest.mark.parametrize("config_kind", ["synthetic", "embedded"])
def test_captions_render_as_clean_restructuredtext(caption, config_kind):
    """Snakemake renders a caption with Jinja2 (trim_blocks, lstrip_blocks), then docutils; a figure's
    caption says what its bars or bands are over, with the counts the figures rule passes (params.counts)."""
    jinja2 = pytest.importorskip("jinja2")
    docutils_core = pytest.importorskip("docutils.core")
    yaml = pytest.importorskip("yaml")
    from grpo_lambda import config as study
    from grpo_lambda.captions import caption_counts

    if config_kind == "synthetic":
        config = make_config()
    else:
        config = study.validate(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))

    class Snakemake:  # the part of Snakemake's caption context the captions use
        pass
    snakemake = Snakemake()
    snakemake.config = config
    snakemake.params = {"counts": caption_counts(config)}
    template = (REPO / "workflow" / "report" / caption).read_text()
    text = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(template).render(
        snakemake=snakemake, files=[], categories={})
    warnings = io.StringIO()
    html = docutils_core.publish_parts(text, writer="html",
                                       settings_overrides={"warning_stream": warnings, "report_level": 2})["body"]
    assert warnings.getvalue() == ""
    # docutils splits literals at hyphens into <span>s: compare the text of the list items.
    items = [re.sub(r"<[^>]+>", "", item) for item in re.findall(r"<li>(.*?)</li>", html, flags=re.S)]
    if caption == "tables.rst":
        for variant in config["variants"]:
            assert any(item.strip().startswith(f"{variant}:") for item in items), variant
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    if caption.startswith("figures/") and caption != "figures/figure2.rst":  # Figure 2 needs no run
        assert f"{len(config['seeds'])} RL seeds ({', '.join(map(str, config['seeds']))})" in plain, plain
    if caption in ("figures/figure1.rst", "figures/checkpoints.rst", "figures/eval_length.rst"):
        assert snakemake.params["counts"]["problems"] in plain and "problem" in plain, plain


def test_auto_smoothing_widens_with_the_run():
    assert smoothing.smoothing_weight(0.7, 10) == 0.7
    short, long = smoothing.smoothing_weight("auto", 40), smoothing.smoothing_weight("auto", 10000)
    assert 0 < short < long < 1
    assert 1 / (1 - long) == pytest.approx(1 + 10000 / 50)  # effective window in steps


def _embedded_tree(root: Path) -> dict:
    """The embedded default's layout: model tiny, dataset arith, suites arith-1..5, GRPO and four
    GRPO-λ variants, two seeds, random verdicts."""
    lam = {f"{style}_{update}": {"objective": "grpo_lambda", "lam": 0.99, "style": style, "update": update}
           for style in ("both", "recent") for update in ("trace", "weight")}
    config = {"models": {"tiny": {"source": "tiny"}}, "datasets": {"arith": {"source": "synthetic"}},
              "benchmarks": {f"arith-{level}": {"source": "synthetic"} for level in range(1, 6)},
              "variants": {"grpo": {"objective": "grpo"}, **lam}, "seeds": [0, 1],
              "rl": {"max_steps": 40}, "evaluation": {"checkpoints": [20]}, "report": {"bootstrap": 100}}
    rng = np.random.default_rng(0)
    runs = [("sft", None, "final")] + [(variant, seed, step) for variant in config["variants"]
                                       for seed in (0, 1) for step in (20, "final")]
    for variant, seed, step in runs:
        base = root / "tiny" / "arith" / variant
        folder = (base if seed is None else base / f"seed{seed}") / "eval" / str(step)
        folder.mkdir(parents=True, exist_ok=True)
        for benchmark in config["benchmarks"]:
            lines = [json.dumps({"id": f"{benchmark}-{i}", "mode": "greedy", "sample": 0,
                                 "correct": bool(rng.random() < 0.5), "formatted": True, "length": 40})
                     for i in range(20)]
            (folder / f"{benchmark}.jsonl").write_text("\n".join(lines) + "\n")
        if seed is not None and step == "final":
            log = pd.DataFrame({"step": range(1, 41), "reward": rng.random(40), "kl": 0.0})
            log.to_csv(base / f"seed{seed}" / "train_log.csv", index=False)
    return config


def test_embedded_layout_end_to_end(tmp_path):
    config = _embedded_tree(tmp_path / "results")
    tables = write.main(config, tmp_path / "results", tmp_path / "tables")
    drawn = figures.main(config, tmp_path / "tables", tmp_path / "figures")
    assert all(Path(p).stat().st_size > 0 for p in tables + drawn)
    t1 = pd.read_csv(tmp_path / "tables" / "table1.csv")
    assert list(t1.method) == ["sft", "grpo", "grpo_lambda"]
    assert t1.set_index("method").loc["grpo_lambda", "variants"] == "recent_trace"
    results = pd.read_csv(tmp_path / "tables" / "results.csv")
    assert len(results) == (1 + 5 * 2) * 6  # SFT + 5 variants × 2 seeds, 5 suites and the average
    assert pd.read_csv(tmp_path / "tables" / "missing.csv").empty


# ---- the paper's cells and the per-λ curves ------------------------------------------------------

def _draw(fig) -> dict:
    data = figures.figure_data(fig)
    plt.close(fig)
    return data


def test_figure1_draws_one_cell_with_sft_and_every_variant(tree, tables_dir):
    """report.figure1_dataset picks the cell: the model's SFT bar and every variant's, that training
    set's numbers (not the mean over sets); six lines make one panel per benchmark."""
    root, config = tree
    config = {**config, "report": {**config["report"], "figure1_model": "qwen15", "figure1_dataset": "gsm8k"}}
    options = report_options(config)
    drawn = _draw(figures.figure1(config, figures.read_table(tables_dir, "table1"),
                                  figures.read_table(tables_dir, "results_by_variant"), options))
    assert drawn["suptitle"] == "Qwen2.5-Math-1.5B-Instruct trained on gsm8k"
    targets = list(config["benchmarks"]) + ["average"]
    assert [panel["title"] for panel in drawn["panels"]] == targets
    lines = ["sft", *config["variants"]]
    assert len(lines) > figures.GROUPED_BARS_MAX
    for index, panel in enumerate(drawn["panels"]):
        assert [s["label"] for s in panel["series"]] == [variant_label(config, v) for v in lines]
        assert all(s["orientation"] == "horizontal" for s in panel["series"])
        for variant in lines:
            def value(benchmark, dataset="gsm8k"):
                return (accuracy("qwen15", dataset, "sft", None, "final", benchmark) if variant == "sft"
                        else mean_over_seeds("qwen15", dataset, variant, benchmark))
            expected = (value(targets[index]) if targets[index] != "average"
                        else np.mean([value(b) for b in config["benchmarks"]]))
            assert _series(panel, "bar", variant_label(config, variant))["y"] == pytest.approx([expected])
            if variant != "sft" and targets[index] != "average":
                assert expected != pytest.approx(value(targets[index], "math12k"))  # the cell, not another set
    assert drawn["panels"][0]["yticklabels"] == [variant_label(config, v) for v in lines]


def _paper_like(datasets: dict, model_datasets=None) -> dict:
    config = make_config()
    config["datasets"] = datasets
    config["models"]["r1-7b"] = {"source": "z", "paper_name": "DeepSeek-R1-Distill-Qwen-7B", "variants": ["grpo"],
                                 **({"datasets": model_datasets} if model_datasets else {})}
    return config


def test_figure1_defaults_to_the_papers_cell_and_checks_the_choice():
    config = _paper_like({"gsm8k": {}, "math12k": {}, "mathrl16k": {}})
    options = report_options(config)
    assert (options["figure1_model"], options["figure1_dataset"]) == ("r1-7b", "mathrl16k")
    renamed = _paper_like({"gsm8k": {}, "rl16": {"source": "registry", "name": "mathrl16k"}})
    assert report_options(renamed)["figure1_dataset"] == "rl16"  # found by its registry name
    assert report_options(_paper_like({"gsm8k": {}, "math12k": {}}))["figure1_dataset"] == "mean"
    assert report_options(_paper_like({"gsm8k": {}, "math12k": {}}, ["math12k"]))["figure1_dataset"] == "math12k"
    assert report_options(_paper_like({"gsm8k": {}, "mathrl16k": {}}, ["gsm8k"]))["figure1_dataset"] == "gsm8k"
    config["report"]["figure1_dataset"] = "orz57k"
    known = re.escape("['gsm8k', 'math12k', 'mathrl16k']")
    with pytest.raises(ValueError, match=f"figure1_dataset 'orz57k'.*training sets: {known}"):
        report_options(config)
    config["report"] = {"figure4_datasets": ["math12k", "nope"]}
    with pytest.raises(ValueError, match="figure4_datasets"):
        report_options(config)


def test_the_paper_config_draws_the_papers_cells():
    yaml = pytest.importorskip("yaml")
    from grpo_lambda.config import validate

    config = validate(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))
    options = report_options(config)
    assert (options["figure1_model"], options["figure1_dataset"]) == ("r1-qwen-7b", "mathrl16k")
    assert config["models"]["r1-qwen-7b"]["paper_name"] == "DeepSeek-R1-Distill-Qwen-7B"
    assert options["final_window"] == 100
    assert set(options["figure4_datasets"]) == set(config["datasets"]) - {"gsm8k"}


def test_figure2_draws_trace_matrix_for_every_style_and_form():
    config = small_config()
    config["rl"]["max_completion_length"] = 40
    options = report_options(config)
    lam, n, tokens = figures.trace_settings(config, options)
    assert (lam, n, tokens) == (0.99, 40, 40)  # the largest λ of the model's GRPO-λ variants; n the run's
    for unfixed in ("batch_max", "per_sequence"):  # no fixed n: the figure draws its bound
        config["rl"]["trl"] = {"trace_length": unfixed}
        assert figures.trace_settings(config, options)[1:] == (40, 40)
    config["rl"]["trl"] = {"trace_length": 300}
    lam, n, tokens = figures.trace_settings(config, options)
    assert (n, tokens) == (300, FIGURE2_TOKENS)
    drawn = _draw(figures.figure2(config, options))
    panels = {panel["title"]: panel for panel in drawn["panels"]}
    for style in STYLES:
        for form, length, name in (("relative", None, "relative (Eq. 1–2)"), ("absolute", n, f"absolute, n = {n}")):
            weights = trace_matrix(tokens, lam, style=style, form=form, length=length).numpy()
            (image,) = [s for s in panels[f"{style}, {name}"]["series"] if s["kind"] == "image"]
            values = np.array(image["values"], dtype=float)
            lower = np.tril(np.ones_like(weights, dtype=bool))
            assert np.allclose(values[lower], weights[lower], rtol=1e-5)
            assert np.isnan(values[~lower]).all()
            label = f"{name}: Σ {weights[-1, :-1].sum():.1f}"
            profile = _series(panels[f"{style}: the last token's weights"], "line", label)
            assert profile["y"] == pytest.approx(weights[-1, :-1], rel=1e-9)
    # and they are the formulas: the last token's recent-style weights are κ^(t−c) (relative) and
    # κ^(n−1−c) (absolute), which at n = 300 leave a 64-token completion a tenth of the credit
    c = np.arange(tokens - 1)
    recent = {s["label"].split(":")[0]: s["y"] for s in panels["recent: the last token's weights"]["series"]}
    assert recent["relative (Eq. 1–2)"] == pytest.approx(lam ** (tokens - 1 - c))
    assert recent[f"absolute, n = {n}"] == pytest.approx(lam ** (n - 1 - c))
    assert sum(recent[f"absolute, n = {n}"]) < 0.1 * sum(recent["relative (Eq. 1–2)"])
    assert drawn["suptitle"].startswith(f"Trace weights of a {tokens}-token completion, λ = 0.99")


def test_appendix_c_splits_the_reward_and_kl_curves_by_lambda(tree, tables_dir):
    root, config = tree
    options = report_options(config)
    curves = figures.read_table(tables_dir, "training_curves")
    drawn = _draw(figures.appendix_c_figure(config, curves, options, "qwen15"))
    titles = [panel["title"] for panel in drawn["panels"]]
    assert titles == [f"{d}: {m}, λ = {lam}" for d in DATASETS for m in ("train reward", "KL to reference")
                      for lam in ("0.98", "0.99")]
    by_lambda = {"0.98": ["grpo", "rt98"], "0.99": ["grpo", "rt99", "bw99"]}
    for panel in drawn["panels"]:
        dataset, rest = panel["title"].split(": ")
        lam = rest.rsplit(" = ", 1)[1]
        metric = "reward" if rest.startswith("train reward") else "kl"
        assert [s["label"] for s in panel["series"]] == [variant_label(config, v) for v in by_lambda[lam]]
        for variant in by_lambda[lam]:
            rows = curves[(curves.model == "qwen15") & (curves.dataset == dataset) & (curves.variant == variant)
                          & (curves.metric == metric)]
            assert _series(panel, "line", variant_label(config, variant))["y"] == pytest.approx(list(rows["mean"]))
    assert drawn["legend"] == [variant_label(config, v) for v in ("grpo", "rt98", "rt99", "bw99")]
    # a model without a GRPO-λ variant says so
    config = {**config, "models": {**config["models"], "small": {**config["models"]["small"], "variants": ["grpo"]}}}
    drawn = _draw(figures.appendix_c_figure(config, curves, options, "small"))
    assert drawn["panels"][0]["notes"] == ["small has no GRPO-λ variant"]


def test_many_variants_make_small_multiples_with_one_legend(tree, tables_dir, monkeypatch):
    root, config = tree
    options = report_options(config)
    monkeypatch.setattr("grpo_lambda.figures.curves.CURVES_PER_PANEL", 2)
    drawn = _draw(figures.reward_curves_figure(config, figures.read_table(tables_dir, "training_curves"), options))
    row = [panel for panel in drawn["panels"] if panel["title"].startswith("qwen15 / math12k")]
    assert [panel["title"] for panel in row] == ["qwen15 / math12k (1/2)", "qwen15 / math12k (2/2)"]
    assert [[s["label"] for s in panel["series"]] for panel in row] == [
        ["GRPO", "recent/trace/0.98", "recent/trace/0.99"], ["GRPO", "both/weight/0.99", "GRPO again"]]
    assert row[0]["ylim"] == row[1]["ylim"]  # small multiples share their scale
    assert drawn["legend"] == [variant_label(config, v) for v in config["variants"]]  # each once


def test_figures_name_each_variant_as_the_tables_do(tree, tables_dir):
    """A variant's label (here set in the config) is the name every figure and table shows."""
    root, config = tree
    labelled = {**config["variants"]["rt99"], "label": "DAPO-like"}
    config = {**config, "variants": {**config["variants"], "rt99": labelled}}
    options = report_options(config)
    curves = figures.read_table(tables_dir, "training_curves")
    final = figures.read_table(tables_dir, "final_reward")
    shown = {
        "reward_curves": _draw(figures.reward_curves_figure(config, curves, options))["legend"],
        "figure3": _draw(figures.figure3(config, final, options))["legend"],
        "appendix_c": _draw(figures.appendix_c_figure(config, curves, options, "qwen15"))["legend"],
        "learning_speed": _draw(figures.learning_speed_figure(config, figures.read_table(tables_dir, "learning_speed"))
                                )["panels"][0]["yticklabels"],
    }
    for name, labels in shown.items():
        assert "DAPO-like" in labels and "recent/trace/0.99" not in labels, name


# ---- the paper's "30–40% improved training performance" ------------------------------------------

def test_training_gain_is_the_ratio_of_final_rewards_paired_by_seed(tree):
    root, config = tree
    options = report_options(config)
    gain = training.training_gain_table(config, collect_train_logs(root, config), options)
    window = options["final_window"]
    row = gain[(gain.model == "qwen15") & (gain.dataset == "math12k") & (gain.variant == "rt99")].iloc[0]
    final = [_final_train_reward("rt99", s, window) for s in SEEDS]
    base = [_final_train_reward("grpo", s, window) for s in SEEDS]
    assert row.final_gain == pytest.approx(np.mean(final) / np.mean(base) - 1)
    assert row.final_gain_low < row.final_gain < row.final_gain_high
    assert (row.seeds, row.window, row.label) == (len(SEEDS), window, "recent/trace/0.99")
    whole = {v: np.mean([_final_train_reward(v, s, MAX_STEPS) for s in SEEDS]) for v in ("rt99", "grpo")}
    assert row.auc_gain == pytest.approx(whole["rt99"] / whole["grpo"] - 1)
    # the same training curves as GRPO: exactly 0, a zero-width interval (the seeds are paired)
    same = gain[(gain.model == "qwen15") & (gain.variant == "same")]
    assert (same[["final_gain", "final_gain_low", "final_gain_high"]].to_numpy() == 0).all()
    # "all": each seed's rewards averaged over the training sets
    assert set(gain[gain.model == "qwen15"].dataset) == {"math12k", "gsm8k", "all"}
    assert set(gain[gain.model == "small"].dataset) == {"math12k"}  # one training set: no "all" row


def test_the_gain_interval_covers_at_four_seeds():
    """The paired t interval of a ratio of mean rewards, simulated at n = 4 seeds with a seed effect
    shared by both arms (the same SFT model and prompts): coverage near the nominal 95%."""
    rng = np.random.default_rng(0)
    true_gain, trials, hits = 0.3, 4000, 0
    for _ in range(trials):
        seed_effect = rng.normal(0, 0.04, 4)
        base = 0.40 + seed_effect + rng.normal(0, 0.03, 4)
        values = 0.40 * (1 + true_gain) + seed_effect + rng.normal(0, 0.03, 4)
        _, low, high = training.ratio_gain(values, base, 0.95)
        hits += low <= true_gain <= high
    assert 0.93 <= hits / trials <= 0.97
    assert np.isnan(training.ratio_gain([0.5], [0.4], 0.95)[1])  # one seed: no interval
    assert np.isnan(training.ratio_gain([0.5, 0.4], [0.0, 0.0], 0.95)[0])  # no positive baseline: no ratio


def test_a_figure_option_naming_no_training_set_stops_before_any_job():
    from grpo_lambda.config import ConfigError, validate

    config = make_config()
    config["results"] = "results"
    config["report"] = {"figure1_model": "small", "figure1_dataset": "gsm8k"}  # small trains on math12k only
    with pytest.raises(ConfigError, match="figure1_dataset 'gsm8k'.*'small'"):
        validate(config)
