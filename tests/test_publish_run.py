"""Published runs re-derive from main: scripts/publish_run.py on a finished (synthetic) run, and every
published run under docs/*-run/ rebuilt from its committed raw files with this checkout's code."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from conftest import ROOT
from grpo_lambda import config as study
from grpo_lambda.publish_run import check_published, publish
from grpo_lambda.tables.blocks import find_blocks
from grpo_lambda.tables.build import build_tables, rebuild
from grpo_lambda.tables.names import table_names
from grpo_lambda.tables.raw import RAW_FILES, read_results, write_raw
from results_tree import STUDY_SEEDS, build_study_tree, make_study_config

RUN = "study-run"
BLOCK_NAMES = ("headline", "primary", "summary", "comparison", "factorial", "diagnostics", "spread", "provenance",
               "horizon", "horizon_errors", "horizon_finding", "control", "control_finding", "factorial_finding",
               "history")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """(repo, results, config): a finished study published by the script into repo/docs/study-run, the
    repository's README holding the run's summary block, the run's page every block."""
    base = tmp_path_factory.mktemp("publish")
    results = base / "results"
    (base / "study.yaml").write_text(yaml.safe_dump(make_study_config(str(results)), sort_keys=False))
    config = study.load(base / "study.yaml")
    build_study_tree(results, config)
    repo = base / "repo"
    (repo / "docs" / RUN).mkdir(parents=True)
    (repo / "README.md").write_text(f"# a project\n\n<!-- generated: {RUN}/summary -->\nwritten by hand\n"
                                    "<!-- end generated -->\n\n<!-- generated: other-run/summary -->\nnot this run's\n"
                                    "<!-- end generated -->\n")
    (repo / "docs" / RUN / "README.md").write_text(
        "# the run\n\n" + "".join(f"<!-- generated: {RUN}/{name} -->\n<!-- end generated -->\n\n"
                                   for name in BLOCK_NAMES))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "publish_run.py"), str(base / "study.yaml"),
                           str(repo / "docs" / RUN)], capture_output=True, text=True, cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    return repo, results, config


def test_the_raw_files_are_small_compressed_and_byte_reproducible(published, tmp_path):
    repo, results, config = published
    raw = repo / "docs" / RUN / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(RAW_FILES)
    assert sum(p.stat().st_size for p in raw.iterdir()) < 300_000
    samples = pd.read_csv(raw / "samples.csv.gz")
    # every evaluated completion: 8 variants × 4 seeds + SFT, 100 problems, greedy + 4 samples each
    assert len(samples) == (8 * len(STUDY_SEEDS) + 1) * 100 * 5
    assert gzip.open(raw / "samples.csv.gz").read()  # a plain gzip file
    write_raw(config, read_results(config, results), tmp_path)  # the same data, written again
    for name in RAW_FILES:
        assert (tmp_path / name).read_bytes() == (raw / name).read_bytes(), name


def test_the_tables_rebuilt_from_raw_are_the_aggregate_stages(published):
    """One code path: the tables of the raw files equal the tables of the results folder, every one."""
    repo, results, config = published
    raw_config, rebuilt = rebuild(repo / "docs" / RUN / "raw")
    assert raw_config == config
    direct = build_tables(config, results)
    assert list(rebuilt) == list(direct) == table_names(config)
    for name in direct:
        pd.testing.assert_frame_equal(rebuilt[name].reset_index(drop=True), direct[name].reset_index(drop=True),
                                      check_dtype=False, check_categorical=False, obj=name)


def test_the_published_run_checks_clean_and_every_block_is_written(published):
    repo, _, _ = published
    docs = repo / "docs" / RUN
    assert check_published(docs) == []
    page = dict(find_blocks((docs / "README.md").read_text()))
    assert set(page) == {f"{RUN}/{name}" for name in BLOCK_NAMES}
    readme = (repo / "README.md").read_text()
    assert "written by hand" not in readme and "not this run's" in readme  # another run's block is left alone
    assert {p.name for p in (docs / "figures").iterdir()} >= {"figure1.png", "reward_curves.png", "learning_speed.png"}
    assert {p.name for p in (docs / "tables").iterdir()} >= {"paired.csv", "paired.md", "factorial.csv",
                                                               "diagnostics.csv", "training_curves.csv"}


def test_a_hand_edit_of_a_verdict_or_a_table_is_caught(published):
    repo, _, _ = published
    docs = repo / "docs" / RUN
    page = docs / "README.md"
    text = page.read_text()
    try:
        page.write_text(text.replace("**ahead**", "**behind**", 1) if "**ahead**" in text else text + "x")
        assert any("differs from what the tables give" in problem for problem in check_published(docs))
    finally:
        page.write_text(text)
    table = docs / "tables" / "paired.csv"
    original = table.read_text()
    try:
        frame = pd.read_csv(table)
        frame.loc[0, "diff"] += 0.01
        frame.to_csv(table, index=False)
        assert any("paired.csv" in problem for problem in check_published(docs))
    finally:
        table.write_text(original)
    assert check_published(docs) == []


def test_the_check_line_is_exactly_zero_and_the_verdicts_follow_one_rule(published):
    repo, _, _ = published
    tables = repo / "docs" / RUN / "tables"
    paired = pd.read_csv(tables / "paired.csv").set_index(["dataset", "method", "benchmark"])
    check = paired.loc[("arith", "trace-0", "average")]
    assert (check["diff"], check["diff_low"], check["diff_high"], check["mde"]) == (0.0, 0.0, 0.0, 0.0)
    assert check["p"] == 1.0 and check["verdict"] == "equivalent"  # report.equivalence_margin.accuracy 0.2
    # the study's strongest line: a real gap of about +0.1, resolved
    assert paired.loc[("arith", "trace", "average"), "verdict"] == "ahead"
    run = (repo / "docs" / RUN / "run.json").read_text()
    assert '"wall_seconds": 1234.0' in run and '"commits": [\n      "0123456789abcdef' in run


def test_an_unfinished_run_is_refused_naming_what_is_missing(published, tmp_path):
    _, results, config = published
    partial = tmp_path / "results"
    shutil.copytree(results, partial)
    (partial / "tiny" / "arith" / "dapo" / "seed2" / "eval" / "final" / "arith-1.jsonl").unlink()
    config_file = tmp_path / "study.yaml"
    config_file.write_text(yaml.safe_dump({**make_study_config(str(partial))}, sort_keys=False))
    with pytest.raises(ValueError, match=r"1 evaluation file\(s\) missing \(the first: tiny, arith, dapo, 2"):
        publish(config_file, tmp_path / "docs" / "x-run")


# --------------------------------------------------------------------------------------------------
# The runs published in this repository
# --------------------------------------------------------------------------------------------------

PUBLISHED = sorted(path for path in (ROOT / "docs").glob("*-run") if path.is_dir())


@pytest.mark.parametrize("docs", PUBLISHED, ids=[path.name for path in PUBLISHED])
def test_a_published_run_rebuilds_from_its_raw_files(docs):
    """Every table of the run, rebuilt from raw/ with this code, equals the committed one, and every
    generated block of README.md and docs/**/*.md naming the run is what the code writes from them."""
    if not (docs / "raw").is_dir():
        pytest.skip(f"{docs.name} has no raw/ yet: it predates scripts/publish_run.py, which writes raw/, the "
                    "tables and the README blocks (docs/<run>/README.md says which command)")
    assert check_published(docs) == []


def test_every_generated_block_names_a_run_folder():
    names = [name for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
             for name, _ in find_blocks(path.read_text(encoding="utf-8"))]
    assert names, "no generated block in README.md or docs/"
    for name in names:
        run, block = name.split("/")
        assert (ROOT / "docs" / run).is_dir() and block in BLOCK_NAMES, name


DESIGN_CHECK = re.compile(r"```text\n\$ grpo-lambda design-check --configfile (?P<config>\S+) --pilot (?P<pilot>\S+)\n"
                          r"(?P<printed>.*?)```", re.S)
DESIGN_CHECKED = sorted(path for path in (ROOT / "docs").rglob("*.md") if DESIGN_CHECK.search(path.read_text()))


def test_the_study_pages_quote_a_design_check():
    names = {path.parent.name for path in DESIGN_CHECKED}
    assert {"clamp-trace-sft-run", "dose-lambda-run"} <= names


@pytest.mark.parametrize("page", DESIGN_CHECKED, ids=lambda path: path.parent.name)
def test_a_page_s_design_check_is_what_the_design_check_prints_today(page):
    """A study page that quotes `grpo-lambda design-check --pilot` quotes what it prints for that config and pilot
    with this checkout's code: the design's reach beside its verdicts never goes stale."""
    from grpo_lambda import design

    for match in DESIGN_CHECK.finditer(page.read_text()):
        config = study.load(ROOT / match["config"])
        pilot = design.pilot_tables(str(ROOT / match["pilot"]), config)
        assert match["printed"] == design.render(design.design_table(config, pilot), config, match["pilot"])
