"""The figures and the §4.3 table as the paper publishes them: Figure 3 on its caption's cells (the 1.5B models
on ORZMath57K) with Appendix D holding the rest, Appendix E.3's pooled GRPO-λ length bar, and §4.3's
per-training-set gain (the published MathRL-16K 0.0552 recomputed from the published Appendix E)."""

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml

from conftest import ROOT
from grpo_lambda import figures
from grpo_lambda.tables.collect import load_published
from grpo_lambda.tables.dataset_gain import dataset_gain_table
from grpo_lambda.tables.keys import AVERAGE, SFT
from grpo_lambda.config.report import report_options

VARIANTS = {
    "grpo": {"objective": "grpo"},
    "rt98": {"objective": "grpo_lambda", "lam": 0.98, "style": "recent", "update": "trace"},
    "rt99": {"objective": "grpo_lambda", "lam": 0.99, "style": "recent", "update": "trace"},
    "bw99": {"objective": "grpo_lambda", "lam": 0.99, "style": "both", "update": "weight"},
}


def paper_like_config(**report) -> dict:
    """Three models (two of the paper's 1.5B ones and its 7B one) on two training sets, one of them ORZ by its
    registry name."""
    return {
        "models": {"qwen": {"paper_name": "Qwen2.5-Math-1.5B-Instruct"},
                   "r1": {"paper_name": "DeepSeek-R1-Distill-Qwen-1.5B"},
                   "big": {"paper_name": "DeepSeek-R1-Distill-Qwen-7B", "variants": ["grpo", "rt99"]}},
        "datasets": {"orz": {"source": "registry", "name": "orz57k"}, "rl16": {"source": "registry", "name": "mathrl16k"}},
        "benchmarks": {"aime24": {"source": "registry"}, "amc": {"source": "registry"}},
        "variants": VARIANTS,
        "seeds": [0],
        "report": report,
    }


def reward(model, dataset, variant):
    return {"qwen": 0.5, "r1": 0.3, "big": 0.6}[model] + {"orz": 0.0, "rl16": 0.1}[dataset] + \
        {"grpo": 0.0, "rt98": 0.01, "rt99": 0.02, "bw99": 0.05}[variant]


def final_table(config) -> pd.DataFrame:
    return pd.DataFrame([{"model": m, "dataset": d, "variant": v, "seed": 0, "reward": reward(m, d, v)}
                         for m in config["models"] for d in config["datasets"]
                         for v in config["models"][m].get("variants", VARIANTS)])


def drawn(fig) -> dict:
    data = figures.figure_data(fig)
    plt.close(fig)
    return data


def test_figure3_draws_the_captions_cells_and_appendix_d_the_rest():
    config = paper_like_config(figure3_paper_cells=True)
    options = report_options(config)
    final = final_table(config)
    figure3 = drawn(figures.figure3(config, final, options))
    assert [p["title"] for p in figure3["panels"]] == ["Qwen2.5-Math-1.5B-Instruct", "DeepSeek-R1-Distill-Qwen-1.5B"]
    for panel, model in zip(figure3["panels"], ("qwen", "r1")):
        assert panel["xticklabels"] == ["orz"] and panel["ylabel"] == "train reward (last 20 steps)"
        bars = {s["label"]: s["y"] for s in panel["series"] if s["kind"] == "bar"}
        assert bars["GRPO"] == pytest.approx([reward(model, "orz", "grpo")])
        assert bars["both/weight/0.99"] == pytest.approx([reward(model, "orz", "bw99")])
    appendix_d = drawn(figures.figure3(config, final, options, appendix_d=True))
    assert [p["xticklabels"] for p in appendix_d["panels"]] == [["rl16"], ["rl16"]]
    # option off: every model and training set in Figure 3, Appendix D empty with a note
    off = paper_like_config()
    assert len(drawn(figures.figure3(off, final, report_options(off)))["panels"]) == 3
    assert "figure3_paper_cells is off" in drawn(figures.figure3(off, final, report_options(off), appendix_d=True))[
        "panels"][0]["notes"][0]


def test_paper_yaml_turns_the_papers_figure_options_on():
    from grpo_lambda.config import validate

    options = report_options(validate(yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())))
    assert (options["figure3_window"], options["figure3_paper_cells"], options["eval_length_pooled"]) == (20, True, True)
    assert options["final_window"] == 100
    assert options["figure4_variant"] == {"lam": 0.99, "style": "recent", "update": "trace"}


@pytest.mark.parametrize("report, culprit", [({"figure3_window": 0}, "figure3_window"),
                                             ({"figure3_paper_cells": "yes"}, "figure3_paper_cells"),
                                             ({"figure4_variant": {"colour": 1}}, "figure4_variant"),
                                             ({"dataset_gain_variant": "best"}, "dataset_gain_variant")])
def test_bad_figure_options_name_the_key(report, culprit):
    with pytest.raises(ValueError, match=culprit):
        report_options(paper_like_config(**report))


def by_variant_rows(config, value) -> pd.DataFrame:
    rows = []
    for m in config["models"]:
        for d in config["datasets"]:
            for v in [SFT, *config["models"][m].get("variants", VARIANTS)]:
                for b in [*config["benchmarks"], AVERAGE]:
                    rows.append({"model": m, "dataset": d, "variant": v, "benchmark": b, **value(m, d, v, b)})
    return pd.DataFrame(rows)


def test_eval_length_pools_grpo_lambda_into_one_bar():
    config = paper_like_config(eval_length_pooled=True)
    lengths = {SFT: 100.0, "grpo": 200.0, "rt98": 300.0, "rt99": 330.0, "bw99": 390.0}
    table = by_variant_rows(config, lambda m, d, v, b: {"mean_length": lengths[v] + (10 if b == "amc" else 0)})
    data = drawn(figures.eval_length_figure(config, table, report_options(config)))
    qwen = data["panels"][0]
    bars = {s["label"]: s["y"] for s in qwen["series"] if s["kind"] == "bar"}
    assert set(bars) == {"SFT", "GRPO", "GRPO-λ"}
    assert bars["GRPO-λ"] == pytest.approx([340.0, 350.0])  # (300 + 330 + 390) / 3, amc +10
    big = {s["label"]: s["y"] for s in data["panels"][2]["series"] if s["kind"] == "bar"}
    assert big["recent/trace/0.99"] == pytest.approx([330.0, 340.0])  # one GRPO-λ variant: its own label
    unpooled = drawn(figures.eval_length_figure(config, table, report_options(paper_like_config())))
    assert len([s for s in unpooled["panels"][0]["series"] if s["kind"] == "bar"]) == 5


def test_dataset_gain_is_the_mean_over_models_of_the_chosen_variants_gain():
    config = paper_like_config()
    options = report_options(config)
    accuracy = {"grpo": 0.30, "rt98": 0.31, "rt99": 0.34, "bw99": 0.50, SFT: 0.2}
    model_shift = {"qwen": 0.0, "r1": 0.05, "big": 0.1}
    table = by_variant_rows(config, lambda m, d, v, b: {
        "accuracy": accuracy[v] + model_shift[m] + (0.02 * (m == "big") * (v == "rt99"))})
    _, published = load_published()
    gain = dataset_gain_table(table, published, config, options).set_index("dataset")
    assert list(gain.index) == ["orz", "rl16"] and (gain["models"] == 3).all()
    assert gain.loc["rl16", "gain"] == pytest.approx((0.04 + 0.04 + 0.06) / 3)  # rt99, not the best (bw99)
    assert gain.loc["rl16", "grpo"] == pytest.approx(0.30 + 0.05)
    # the published counterpart: Appendix E's recent ε-trace λ 0.99 minus GRPO, mean over the 3 models here
    paper = published[published["benchmark"] == "average"]

    def cell(model, dataset, style, lam=None):
        rows = paper[(paper["model"] == model) & (paper["train_dataset"] == dataset) & (paper["trace_style"] == style)]
        if lam is not None:
            rows = rows[(rows["update_style"] == "trace") & (rows["lam"] == lam)]
        return float(rows["accuracy"].iloc[0])

    names = [config["models"][m]["paper_name"] for m in config["models"]]
    expected = sum(cell(n, "mathrl16k", "recent", 0.99) - cell(n, "mathrl16k", "grpo") for n in names) / 3
    assert gain.loc["rl16", "published_models"] == 3
    assert gain.loc["rl16", "published_gain"] == pytest.approx(expected)


def test_section_4_3s_0_0552_is_the_published_gain_over_the_four_models():
    config = paper_like_config()
    config["models"]["llama"] = {"paper_name": "DeepSeek-R1-Distill-Llama-3B", "variants": ["grpo", "rt99"]}
    table = by_variant_rows(config, lambda m, d, v, b: {"accuracy": 0.3})
    _, published = load_published()
    gain = dataset_gain_table(table, published, config, report_options(config)).set_index("dataset")
    assert gain.loc["rl16", "published_gain"] == pytest.approx(0.0552, abs=1e-4)  # 0.05525
    assert gain.loc["rl16", "published_models"] == 4 and gain.loc["rl16", "gain"] == 0


# -- on the synthetic results tree (tests/results_tree.py): the tables the aggregate stage writes ----------


def test_dataset_gain_and_figure3_reward_on_the_synthetic_tree(tree):
    """dataset_gain: per training set, the mean over the models that train on it of (rt99 − grpo) average
    accuracy, the average being the mean over the five benchmarks of the mean over seeds; figure3_reward: each
    run's mean reward over its last report.figure3_window steps, final_reward over final_window."""
    import numpy as np
    from results_tree import BENCHMARKS, DATASETS, EFFECT, MAX_STEPS, mean_over_seeds

    from grpo_lambda.tables.build import build_tables

    root, config = tree
    config = {**config, "report": {**config["report"], "figure3_window": 4, "final_window": 9}}
    tables = build_tables(config, root)
    gain = tables["dataset_gain"].set_index("dataset")

    def average(model, dataset, variant):
        return np.mean([mean_over_seeds(model, dataset, variant, b) for b in BENCHMARKS])

    for dataset in DATASETS:
        models = [m for m in config["models"] if dataset in config["models"][m].get("datasets", DATASETS)]
        expected = np.mean([average(m, dataset, "rt99") - average(m, dataset, "grpo") for m in models])
        assert gain.loc[dataset, "models"] == len(models)
        assert gain.loc[dataset, "gain"] == pytest.approx(expected, abs=1e-12)
    assert gain.loc["math12k", "models"] == 2 and gain.loc["gsm8k", "models"] == 1

    def last(window, variant, seed):
        steps = np.arange(MAX_STEPS - window + 1, MAX_STEPS + 1)
        return float(np.mean(0.2 + EFFECT[variant] + 0.01 * seed + 0.3 * (1 - np.exp(-steps / 10))))

    for name, window in (("figure3_reward", 4), ("final_reward", 9)):
        table = tables[name]
        row = table[(table["model"] == "qwen15") & (table["dataset"] == "math12k") & (table["variant"] == "grpo")
                    & (table["seed"] == 1)]
        assert row["reward"].item() == pytest.approx(last(window, "grpo", 1)), name
