"""The spread of a study's headline numbers across whole runs, and the t quantile behind it."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import E2E_CONFIG, ROOT
from grpo_lambda import spread
from grpo_lambda.stats import student_t_quantile
from grpo_lambda.tables import write
from grpo_lambda.tables import blocks


# Student's t quantiles from published tables (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
T_TABLE = [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 3, 3.182), (0.975, 4, 2.776), (0.975, 10, 2.228),
           (0.95, 5, 2.015), (0.995, 3, 5.841), (0.975, 100, 1.984)]


@pytest.mark.parametrize("probability, df, expected", T_TABLE)
def test_t_quantile_matches_the_published_table(probability, df, expected):
    """scipy's t.ppf behind stats.student_t_quantile, its arguments the right way round."""
    assert student_t_quantile(probability, df) == pytest.approx(expected, abs=6e-4)
    assert student_t_quantile(1 - probability, df) == pytest.approx(-expected, abs=6e-4)


def test_prediction_interval_by_hand():
    mean, low, high = spread.prediction_interval([1.0, 2.0, 3.0, 4.0])
    half = 3.182446 * math.sqrt(5 / 3) * math.sqrt(1 + 1 / 4)  # t(3, 0.975) · s · √(1 + 1/K)
    assert mean == 2.5
    assert (low, high) == pytest.approx((2.5 - half, 2.5 + half), abs=1e-5)
    mean, low, high = spread.mean_interval([1.0, 2.0, 3.0, 4.0])
    half = 3.182446 * math.sqrt(5 / 3) / 2  # t(3, 0.975) · s / √K
    assert (mean, low, high) == pytest.approx((2.5, 2.5 - half, 2.5 + half), abs=1e-5)
    with pytest.raises(ValueError, match="at least 2 runs"):
        spread.prediction_interval([0.5])


def test_one_more_normal_draw_falls_inside_about_as_often_as_the_level_says():
    rng = np.random.default_rng(0)
    for runs in (3, 5):
        draws = rng.normal(0.6, 0.05, (4000, runs + 1))
        inside = [low <= row[-1] <= high for row in draws
                  for _, low, high in [spread.prediction_interval(row[:-1], 0.90)]]
        assert np.mean(inside) == pytest.approx(0.90, abs=0.015)


@pytest.fixture(scope="module")
def run_tables(tree, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    """The tables the real aggregate writes for the test tree, as one finished run's results folder."""
    root, config = tree
    run = tmp_path_factory.mktemp("run")
    write.main(config, root, run / "tables")
    return run


def test_headline_numbers_are_the_tables_values(run_tables):
    headline = spread.headline_numbers(run_tables).set_index(["model", "quantity"])
    table1 = pd.read_csv(run_tables / "tables" / "table1.csv")
    for row in table1.itertuples():
        assert headline.loc[(row.model, f"accuracy: {row.label}"), "value"] == row.average
    paired = pd.read_csv(run_tables / "tables" / "paired.csv")
    per_variant = paired[(paired["benchmark"] == "average") & (paired["dataset"] != "all")]
    assert headline.index.get_level_values("quantity").str.startswith("paired accuracy").sum() == len(per_variant)
    speed = pd.read_csv(run_tables / "tables" / "learning_speed.csv")
    assert headline.index.get_level_values("quantity").str.startswith("reward AUC").sum() == len(speed)
    assert headline["value"].notna().all()


def _shifted_run(source, folder, offset, drop_label=None):
    """A copy of a run whose headline numbers are all ``offset`` higher (less one Table 1 row if asked)."""
    shutil.copytree(source, folder)
    for name, columns in (("table1", ["average"]), ("paired", ["diff"]),
                          ("learning_speed", ["auc", "auc_vs_baseline"])):
        frame = pd.read_csv(folder / "tables" / f"{name}.csv")
        frame[columns] += offset
        if name == "table1" and drop_label:
            frame = frame[frame["label"] != drop_label]
        frame.to_csv(folder / "tables" / f"{name}.csv", index=False)
    return folder


def test_the_spread_of_runs_and_a_checked_run_against_it(run_tables, tmp_path):
    offsets = [0.0, 0.02, 0.05, 0.01]
    runs = {f"run{i}": _shifted_run(run_tables, tmp_path / f"run{i}", offset, drop_label="GRPO" if i == 3 else None)
            for i, offset in enumerate(offsets)}
    base = spread.headline_numbers(run_tables).set_index(["model", "dataset", "quantity"])["value"]
    far = _shifted_run(run_tables, tmp_path / "far", 0.5)
    table = spread.spread_table(runs, check=("far", far)).set_index(["model", "dataset", "quantity"])
    half = student_t_quantile(0.975, 3) * np.std(offsets, ddof=1) * math.sqrt(1 + 1 / 4)
    assert not table.index.get_level_values("quantity").isin(["accuracy: GRPO"]).any()  # run3 lacks it
    assert len(table) == len(base) - base.index.get_level_values("quantity").isin(["accuracy: GRPO"]).sum()
    for key, row in table.iterrows():
        assert row["run2"] == pytest.approx(base[key] + 0.05)
        assert row["prediction"] == row["mean"] == pytest.approx(base[key] + np.mean(offsets))
        assert row["mean_high"] - row["mean"] == pytest.approx(half / math.sqrt(1 + 1 / 4) / 2)
        assert (row["prediction_low"], row["prediction_high"]) == pytest.approx(
            (base[key] + np.mean(offsets) - half, base[key] + np.mean(offsets) + half))
        assert row["far"] == pytest.approx(base[key] + 0.5) and not row["inside"]
    near = _shifted_run(run_tables, tmp_path / "near", 0.03)
    assert spread.spread_table(runs, check=("near", near))["inside"].all()



def test_the_spread_block_shows_each_run_and_says_where_the_held_out_run_falls(run_tables, tmp_path):
    runs = {f"run{i}": _shifted_run(run_tables, tmp_path / f"run{i}", offset) for i, offset in enumerate([0.0, 0.02, 0.05])}
    table = spread.spread_table(runs, check=("far", _shifted_run(run_tables, tmp_path / "far", 0.5)))
    block = blocks._spread(table)
    header, _, *rows = block.strip().splitlines()
    assert header.split(" | ")[1:4] == ["run0", "run1", "run2"] and "far (held out)" in header
    assert len(rows) == len(table)
    for line, (_, row) in zip(rows, table.iterrows()):
        cells = [cell.strip() for cell in line.strip("| ").split(" | ")]
        assert cells[0] == row["quantity"] and cells[-1].endswith(", outside")  # 0.5 away: outside
        assert float(cells[1].replace("−", "-")) == pytest.approx(row["run0"], abs=5e-4)
    assert blocks._spread(None).startswith("No spread")

def test_each_run_is_set_against_the_interval_of_the_others(run_tables, tmp_path):
    # Three runs within 0.002 of each other and one 0.3 away: the far one falls outside the narrow
    # interval of the three; each of the three falls inside the wide interval the far one opens.
    runs = {f"run{i}": _shifted_run(run_tables, tmp_path / f"run{i}", offset)
            for i, offset in enumerate([0.0, 0.001, 0.002, 0.3])}
    assert set(spread.spread_table(runs)["left_out_inside"]) == {"3/4"}
    two = {name: runs[name] for name in ("run0", "run1")}
    assert "left_out_inside" not in spread.spread_table(two)  # one run left cannot make an interval


def test_a_spread_needs_two_runs_of_one_study(run_tables, tmp_path):
    with pytest.raises(ValueError, match="at least 2 runs"):
        spread.spread_table({"one": run_tables})
    with pytest.raises(ValueError, match="also one of the runs"):
        spread.spread_table({"a": run_tables, "b": run_tables}, check=("a", run_tables))
    (tmp_path / "empty" / "tables").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="table1.csv is missing"):
        spread.spread_table({"a": run_tables, "b": tmp_path / "empty"})


def test_the_cli_writes_the_spread_and_names_a_missing_folder(run_tables, tmp_path):
    other = _shifted_run(run_tables, tmp_path / "other", 0.01)
    command = [sys.executable, "-m", "grpo_lambda.cli", "spread"]
    done = subprocess.run(command + [str(run_tables), str(other), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    written = pd.read_csv(tmp_path / "out" / "spread.csv")
    assert list(written.columns[3:5]) == [str(run_tables), str(other)]
    assert "prediction" in (tmp_path / "out" / "spread.md").read_text()
    failed = subprocess.run(command + [str(run_tables), str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")],
                            capture_output=True, text=True)
    assert failed.returncode == 2
    assert failed.stderr.strip().endswith(f"no results folder {tmp_path / 'nowhere'}")


@pytest.mark.slow
def test_the_script_runs_one_study_per_sft_seed_and_writes_their_spread(tmp_path):
    config = yaml.safe_load(E2E_CONFIG.read_text())
    # One model, one suite, a short SFT and two RL steps: enough for every headline number.
    del config["models"]["tiny-distill"], config["models"]["tiny-shared"]
    del config["benchmarks"]["arith-2"]
    config["evaluation"]["checkpoints"] = []
    config["sft"]["num_train_epochs"] = 10
    config["rl"].update(max_steps=2, save_steps=2)
    config["results"] = str(tmp_path / "results")
    config["sft"]["seed"] = 0
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run(["bash", str(ROOT / "scripts" / "sft_seeds.sh"), "--configfile", str(tmp_path / "study.yaml"),
                           "0", "1"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    first, second = tmp_path / "results", tmp_path / "results-sft1"
    derived = yaml.safe_load((second / "config.yaml").read_text())
    assert derived["sft"]["seed"] == 1 and derived["results"] == str(second)
    weights = [(run / "tiny" / "arith" / "sft" / "model" / "model.safetensors").read_bytes() for run in (first, second)]
    assert weights[0] != weights[1]  # the seed reached SFT: two SFT models
    table = pd.read_csv(tmp_path / "results-spread" / "spread.csv").set_index("quantity")
    for run in (first, second):
        table1 = pd.read_csv(run / "tables" / "table1.csv")
        for row in table1.itertuples():
            assert table.loc[f"accuracy: {row.label}", str(run)] == pytest.approx(row.average)
    assert (table["prediction_low"] <= table["prediction_high"]).all()


def test_leave_one_out_judges_a_run_by_the_prediction_interval_not_the_mean_one():
    """Others 0, 1, 2: mean 1, s 1, t(2, 0.975) 4.303. One more run should fall in 1 ± 4.303·√(4/3) =
    [−3.97, 5.97]; the mean's interval is only 1 ± 4.303/√3 = [−1.48, 3.48]. A run at 4 is inside the one
    and outside the other: leave-one-out asks where one more run falls."""
    from grpo_lambda.spread import _inside, mean_interval, prediction_interval

    assert prediction_interval([0.0, 1.0, 2.0]) == pytest.approx((1.0, -3.9689, 5.9689), abs=1e-3)
    assert mean_interval([0.0, 1.0, 2.0])[2] == pytest.approx(3.4843, abs=1e-3)
    assert _inside(4.0, pd.Series([0.0, 1.0, 2.0]), 0.95) and not _inside(6.0, pd.Series([0.0, 1.0, 2.0]), 0.95)
