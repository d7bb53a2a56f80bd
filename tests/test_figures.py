"""Figures from a synthetic results tree, the smoothing and colours they use, and the report captions."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

from grpo_lambda import figures, stats
from grpo_lambda.tables import names, training, write
from grpo_lambda.tables.collect import collect_train_logs
from grpo_lambda.tables.labels import variant_label
from grpo_lambda.tables.options import report_options
from results_tree import (CHECKPOINT, DATASETS, EFFECT, MAX_STEPS, SEEDS, mean_over_seeds, accuracy, make_config)

REPO = Path(__file__).resolve().parents[1]


def small_config() -> dict:
    """The synthetic tree's config with two benchmarks, to keep the drawing fast."""
    config = make_config()
    config["benchmarks"] = {b: config["benchmarks"][b] for b in ("aime24", "amc")}
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
    assert len(paths) == 2 * (7 + len(config["models"]))  # seven grid-wide figures, one per model
    for path in map(Path, paths):
        assert path.stat().st_size > 1000
        assert _kind(path) == path.suffix[1:]
    assert not list(out.glob(".*tmp*"))
    drawn = {name: json.loads((out / f"{name}.json").read_text()) for name in names.figure_names(config)}
    benchmarks = list(config["benchmarks"])

    # figure 1: Table 1's GRPO and GRPO-λ rows of qwen15, per benchmark and on average
    (panel,) = drawn["figure1"]["panels"]
    assert panel["xticklabels"] == benchmarks + ["average"] and not panel["notes"]
    for label, variants in (("GRPO", ["grpo"]), ("GRPO-λ (rt98 rt99)", ["rt98", "rt99"])):
        per_benchmark = [np.mean([mean_over_seeds("qwen15", d, v, b) for d in DATASETS for v in variants])
                         for b in benchmarks]
        assert _series(panel, "bar", label)["y"] == pytest.approx(per_benchmark + [np.mean(per_benchmark)])

    # figure 3: final training reward, a bar per variant and training set, a dot per seed
    window = report_options(config)["final_window"]
    qwen = drawn["figure3"]["panels"][0]
    grpo = _series(qwen, "bar", "GRPO")
    assert grpo["y"] == pytest.approx([np.mean([_final_train_reward("grpo", s, window) for s in SEEDS])] * 2)
    dots = sorted(y for points in qwen["series"] if points["kind"] == "points" for y in points["y"])
    expected = sorted(_final_train_reward(v, s, window) for v in config["variants"] for s in SEEDS for _ in DATASETS)
    assert dots == pytest.approx(expected)

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
        panels = json.loads((out / f"{name}.json").read_text())["panels"]
        shown = [panel for panel in panels if panel["title"] or panel["notes"]]
        assert shown, name
        for panel in shown:
            assert not panel["series"], name
            assert len(panel["notes"]) == 1 and "yet" in panel["notes"][0], (name, panel)
    notes = {json.loads((out / f"{name}.json").read_text())["panels"][0]["notes"][0] for name in ("figure1", "figure3")}
    assert notes == {"no GRPO / GRPO-λ results for qwen15 yet", "qwen15: no training logs yet"}


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
    fig = figures.kl_figure(config, training.training_curves_table(config, logs, options))
    ax = fig.axes[0]  # qwen15 / math12k: every variant
    labels = {variant_label(config, v): v for v in config["variants"]}
    drawn = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert set(drawn) == set(labels)
    for label, colour in drawn.items():
        assert mcolors.same_color(colour, figures.variant_colour(config, labels[label]))
    figures.plt.close(fig)


def test_figure4_shows_grpo_and_the_best_grpo_lambda(tree):
    root, config = tree
    options = report_options(config)
    logs = collect_train_logs(root, config)
    fig = figures.figure4(config, training.training_curves_table(config, logs, options),
                          training.final_reward_table(config, logs, options["final_window"]), options)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["GRPO", "both/weight/0.99"]  # bw99 has the highest synthetic reward
    figures.plt.close(fig)


def test_reward_curves_compare_every_variant_of_the_model(tree):
    root, config = tree
    options = report_options(config)
    fig = figures.reward_curves_figure(config, training.training_curves_table(config, collect_train_logs(root, config),
                                                                               options))
    labels = {line.get_label() for line in fig.axes[0].get_lines()}
    model = next(iter(config["models"]))
    assert labels == {variant_label(config, v) for v in figures.model_variants(config, model)} - {"SFT"}
    figures.plt.close(fig)


def test_final_reward_averages_the_last_window_of_steps(tree):
    root, config = tree
    logs = collect_train_logs(root, config)
    final = training.final_reward_table(config, logs, 5)
    run = logs[(logs.model == "qwen15") & (logs.dataset == "gsm8k") & (logs.variant == "rt98") & (logs.seed == 1)]
    row = final[(final.model == "qwen15") & (final.dataset == "gsm8k") & (final.variant == "rt98")
                & (final.seed == 1)]
    assert row.reward.item() == pytest.approx(run.sort_values("step").reward.iloc[-5:].mean())


def test_smoothing_is_a_debiased_ema():
    assert np.allclose(stats.smooth([3.0] * 5, 0.9), 3.0)  # debiasing: no pull towards 0
    w = 0.5
    out = stats.smooth([1.0, 0.0, np.nan, 1.0], w)
    s1 = (1 - w) * 1.0
    s2 = w * s1
    s3 = w * s2 + (1 - w)
    assert out[0] == pytest.approx(1.0)
    assert out[1] == pytest.approx(s2 / (1 - w ** 2))
    assert out[2] == pytest.approx(out[1])  # NaN carries the average over
    assert out[3] == pytest.approx(s3 / (1 - w ** 3))
    assert np.array_equal(stats.smooth([1.0, 2.0], 0.0), [1.0, 2.0])
    with pytest.raises(ValueError, match="weight"):
        stats.smooth([1.0], 1.0)


def test_seed_band_spans_the_seeds():
    log = pd.DataFrame({"seed": [0] * 4 + [1] * 4, "step": [1, 2, 3, 4] * 2,
                        "reward": [0.1, 0.2, 0.3, 0.4, 0.3, 0.4, 0.5, 0.6]})
    curve = training.seed_curves(log, "reward", 0.0)
    assert np.allclose(curve["low"], [0.1, 0.2, 0.3, 0.4])
    assert np.allclose(curve["high"], [0.3, 0.4, 0.5, 0.6])
    assert np.allclose(curve["mean"], [0.2, 0.3, 0.4, 0.5])


@pytest.mark.parametrize("caption", ["tables", "figures", "published"])
@pytest.mark.parametrize("config_kind", ["synthetic", "embedded"])
def test_captions_render_as_clean_restructuredtext(caption, config_kind):
    """Snakemake renders a caption with Jinja2 (trim_blocks, lstrip_blocks), then docutils."""
    jinja2 = pytest.importorskip("jinja2")
    docutils_core = pytest.importorskip("docutils.core")
    yaml = pytest.importorskip("yaml")
    if config_kind == "synthetic":
        config = make_config()
    else:
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

    class Snakemake:  # the part of Snakemake's caption context the captions use
        pass
    snakemake = Snakemake()
    snakemake.config = config
    template = (REPO / "workflow" / "report" / f"{caption}.rst").read_text()
    text = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(template).render(snakemake=snakemake)
    warnings = io.StringIO()
    html = docutils_core.publish_parts(text, writer="html",
                                       settings_overrides={"warning_stream": warnings, "report_level": 2})["body"]
    assert warnings.getvalue() == ""
    # docutils splits literals at hyphens into <span>s: compare the text of the list items.
    items = [re.sub(r"<[^>]+>", "", item) for item in re.findall(r"<li>(.*?)</li>", html, flags=re.S)]
    for variant in config["variants"]:
        if caption != "published":
            assert any(item.strip().startswith(f"{variant}:") for item in items), variant


def test_auto_smoothing_widens_with_the_run():
    assert stats.smoothing_weight(0.7, 10) == 0.7
    short, long = stats.smoothing_weight("auto", 40), stats.smoothing_weight("auto", 10000)
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
