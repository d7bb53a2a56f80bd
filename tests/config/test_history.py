"""report.history: a confirmatory run's seeds are fresh for its study, and the changes made after data was
seen are kept with the config."""

import copy

import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda.config.report import report_options

DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def with_history(history: dict, **changes) -> dict:
    config = copy.deepcopy(DEFAULT)
    config.update(changes)
    config["report"] = {**config.get("report", {}), "history": history}
    return config


def test_a_reused_rl_seed_is_refused_naming_it_and_the_earlier_seeds():
    config = with_history({"seeds_run_before": {"rl": [3, 4, 5]}})
    with pytest.raises(study.ConfigError, match=r"seeds: \[3\] were run before in this study .*outside \[3, 4, 5\]"):
        study.validate(config)


def test_a_reused_sft_seed_is_refused_whether_one_or_several():
    with pytest.raises(study.ConfigError, match=r"sft\.seed: \[0\] were run before"):
        study.validate(with_history({"seeds_run_before": {"sft": [0]}}, seeds=[10, 11]))
    config = with_history({"seeds_run_before": {"sft": [0, 2]}}, seeds=[10, 11])
    config["sft"] = {**{k: v for k, v in config["sft"].items() if k != "seed"}, "seeds": [1, 2]}
    with pytest.raises(study.ConfigError, match=r"sft\.seeds: \[2\] were run before"):
        study.validate(config)


def test_fresh_seeds_pass_and_the_changes_are_kept_in_order():
    changes = [{"change": "horizons 2, 3, 4, 6", "commit": "abc1234", "seen": "the first run"},
               {"change": "a margin"}]
    config = study.validate(with_history({"seeds_run_before": {"rl": [0, 1, 2, 3], "sft": [5]},
                                          "changed_after_data": changes}, seeds=[4, 5, 6, 7]))
    options = report_options(config)["history"]
    assert options["seeds_run_before"] == {"rl": [0, 1, 2, 3], "sft": [5]}
    assert options["changed_after_data"] == changes


def test_the_shipped_replication_configs_use_seeds_their_study_never_ran():
    for name in ("horizon-ii", "compare"):
        config = study.load(ROOT / "config" / f"{name}.yaml")
        before = report_options(config)["history"]["seeds_run_before"]
        assert before["rl"] and not set(config["seeds"]) & set(before["rl"]), name
        assert not set(config["sft"].get("seeds") or [config["sft"]["seed"]]) & set(before["sft"]), name


def test_margins_set_after_the_data_print_no_equivalent_verdict():
    import pandas as pd

    from grpo_lambda.tables.verdicts import POST_HOC, post_hoc_margins

    tables = {"paired": pd.DataFrame({"verdict": ["equivalent", "ahead", "not distinguishable"],
                                      "auc_verdict": ["equivalent", "equivalent", "behind"],
                                      "p_equivalence_holm": [0.001, 0.9, 0.5]}),
              "results": pd.DataFrame({"accuracy": [0.5]})}
    read = post_hoc_margins(tables)
    assert list(read["paired"]["verdict"]) == [POST_HOC, "ahead", "not distinguishable"]
    assert list(read["paired"]["auc_verdict"]) == [POST_HOC, POST_HOC, "behind"]
    assert list(read["paired"]["p_equivalence_holm"]) == [0.001, 0.9, 0.5]  # the TOST stays, read for what it is
    assert "equivalent" not in set(read["paired"]["verdict"]) and read["results"].equals(tables["results"])
    assert report_options(study.load(ROOT / "config" / "clamp-trace.yaml"))["history"]["margins_set_after_data"]


def test_the_pages_history_names_every_change_made_after_data_and_post_hoc_margins_among_them():
    """The history block a run page prints: the seeds against the earlier runs', each change with its commit,
    and margins set after the data as one of the changes (never "nothing was changed")."""
    from grpo_lambda.tables.study_blocks import history

    changes = [{"change": "horizons 2, 3, 4, 6", "commit": "abc1234", "seen": "the first run"}]
    config = study.validate(with_history({"seeds_run_before": {"rl": [0, 1, 2, 3], "sft": [5]},
                                          "changed_after_data": changes}, seeds=[4, 5, 6, 7]))
    text = history(config, report_options(config))
    assert "RL seeds 4–7" in text and "earlier runs used RL seeds 0–3 and SFT seeds 5" in text
    assert "horizons 2, 3, 4, 6 (`abc1234`); seen: the first run" in text and "Nothing" not in text
    post_hoc = study.validate(with_history({"margins_set_after_data": True}))
    text = history(post_hoc, report_options(post_hoc))
    assert "the equivalence margins" in text and "Nothing" not in text
    fresh = study.validate(with_history({}))
    assert "Nothing in the design was changed after data was seen" in history(fresh, report_options(fresh))


def test_a_config_without_history_is_said_to_record_nothing_and_a_models_own_sft_seed_counts():
    from grpo_lambda.tables.study_blocks import history

    bare = copy.deepcopy(DEFAULT)
    bare["report"] = {k: v for k, v in bare["report"].items() if k != "history"}
    bare = study.validate(bare)
    text = history(bare, report_options(bare))
    assert "No report.history declared" in text and "Nothing in the design was changed" not in text
    config = with_history({"seeds_run_before": {"rl": [], "sft": [7]}})
    model = next(iter(config["models"]))
    config["models"][model] = {**config["models"][model], "sft": {"seed": 7}}
    with pytest.raises(ValueError, match=r"models\.X\.sft: \[7\] were run before"):
        report_options(config)


def test_a_bad_change_entry_is_named_by_its_place():
    with pytest.raises(ValueError, match=r"changed_after_data\[1\]"):
        report_options(with_history({"changed_after_data": [{"change": "a"}, {"commit": "abc"}]}))


def test_a_study_that_sets_no_sft_seed_trains_seed_0_and_its_reuse_is_refused():
    """Neither sft.seed nor sft.seeds: the study trains SFT seed 0, and an earlier run's SFT seed 0 is a reuse."""
    config = with_history({"seeds_run_before": {"rl": [], "sft": [0]}}, seeds=[10, 11])
    config["sft"] = {k: v for k, v in config["sft"].items() if k not in ("seed", "seeds")}
    with pytest.raises(study.ConfigError, match=r"sft\.seed: \[0\] were run before .*outside \[0\]"):
        study.validate(config)
    config["report"]["history"]["seeds_run_before"]["sft"] = [1]
    assert report_options(study.validate(config))["history"]["seeds_run_before"]["sft"] == [1]
