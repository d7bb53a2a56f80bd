"""The history block (grpo_lambda.tables.study_blocks.history): an item is printed as declared before the run
only where git shows its commit an ancestor of every commit that made the run, else as declared during or
after it; draws shared with earlier runs are named. On every published run the pages say "declared before"
only where their history block backs it with git."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import ROOT
from grpo_lambda.provenance import is_ancestor
from grpo_lambda.tables.blocks import find_blocks
from grpo_lambda.tables.study_blocks import UNCHECKED, history

PUBLISHED = sorted(path.parent for path in (ROOT / "docs").glob("*-run/run.json"))


def git(folder, *args) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A history A -> run -> C, and the commits' hashes."""
    git(tmp_path, "init", "-q")
    commits = []
    for name in ("declared", "run", "later"):
        (tmp_path / name).write_text(name)
        git(tmp_path, "add", name)
        git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", name)
        commits.append(git(tmp_path, "rev-parse", "HEAD"))
    return tmp_path, commits


def options(declared, shared=()) -> dict:
    return {"history": {"seeds_run_before": {"rl": [], "sft": []}, "changed_after_data": [],
                        "margins_set_after_data": False, "declared": declared,
                        "shared_with_earlier_runs": list(shared), "given": True}}


def test_an_item_is_declared_before_the_run_only_where_git_shows_its_commit_an_ancestor(repo):
    folder, (first, run, later) = repo
    config = {"seeds": [0, 1], "models": {"tiny": {}}}
    text = history(config, options([{"item": "the primary family", "commit": first},
                                    {"item": "the margins", "commit": later}]),
                   {"made_by": {"commits": [run]}}, lambda c, of: is_ancestor(c, of, folder))
    before, after = text.split("- Declared during or after the run")
    assert "Declared before the run" in before and "the primary family" in before and "the margins" not in before
    assert "the margins" in after and f"`{run[:7]}`" in after
    # the run's own commit declares what it holds; a run made over two commits needs the item before both
    both = history(config, options([{"item": "x", "commit": run}]), {"made_by": {"commits": [first, run]}},
                   lambda c, of: is_ancestor(c, of, folder))
    assert "Declared during or after the run" in both


def test_a_commit_git_cannot_find_is_said_to_be_unchecked_not_declared_before(repo):
    folder, (_, run, _) = repo
    text = history({"seeds": [0], "models": {"tiny": {}}}, options([{"item": "x", "commit": "abcdef1"}]),
                   {"made_by": {"commits": [run]}}, lambda c, of: is_ancestor(c, of, folder))
    assert UNCHECKED in text and "Declared before the run" not in text


def test_draws_shared_with_earlier_runs_are_named():
    text = history({"seeds": [8], "models": {"tiny": {}}},
                   options([], [{"what": "SFT seed 1", "run": "the default run's spread"}]), {})
    assert "- Shared with an earlier run (not a fresh draw): SFT seed 1 (the default run's spread)." in text


def outside_history(text: str) -> str:
    for name, body in find_blocks(text):
        if name.endswith("/history"):
            text = text.replace(body, "")
    return text


@pytest.mark.parametrize("docs", PUBLISHED, ids=[p.name for p in PUBLISHED])
def test_a_published_page_says_declared_before_only_where_git_backs_it(docs):
    """Every item the history block lists as declared before the run has a commit that git shows an ancestor
    of the run's; a page that says "declared before" elsewhere has such a block."""
    page = (docs / "README.md").read_text()
    blocks = dict(find_blocks(page))
    block = blocks.get(f"{docs.name}/history", "")
    run_commits = json.loads((docs / "run.json").read_text())["made_by"]["commits"]
    listed = re.search(r"- Declared before the run[^\n]*\n((?:  - [^\n]*\n)+)", block)
    for commit in re.findall(r"\(`([0-9a-f]{7,40})`\)\n", listed[1] if listed else ""):
        for run in run_commits:
            known = is_ancestor(commit, run, ROOT)
            if known is None:
                pytest.skip("this checkout's history lacks the run's commits (a shallow clone)")
            assert known, f"{docs.name}: {commit} is listed as declared before the run but is not an ancestor of {run}"
    if re.search(r"declared before", outside_history(page), re.I):
        assert listed, f"{docs.name}: the page says 'declared before' but its history block lists nothing git checked"


def test_the_compare_page_names_its_sft_models_earlier_use():
    page = (ROOT / "docs" / "compare-run" / "README.md").read_text()
    assert "Shared with an earlier run (not a fresh draw): SFT seed 1" in page
    # the comparison's SFT model (seed 1) was trained before: neither page calls it fresh
    assert "on a fresh SFT model" not in page and "on a fresh SFT model" not in (ROOT / "README.md").read_text()
    assert "trained before in the default run's spread" in (ROOT / "README.md").read_text()


# ---- factorial_finding: a 2 x 2's primary family as a sentence a factor ------------------------------------

def factorial_rows(verdicts: dict, sft_models: float = 8.0):
    """A factorial table's four primary simple effects (trace × clamp) with the verdicts given, every estimate
    +0.05 [+0.01, +0.09], Holm p 0.02, TOST Holm p 0.03."""
    import pandas as pd

    return pd.DataFrame([{"metric": "accuracy", "benchmark": "average", "effect": effect, "kind": "simple",
                          "family": "primary", "estimate": 0.05, "estimate_low": 0.01, "estimate_high": 0.09,
                          "p_holm": 0.02, "p_equivalence_holm": 0.03, "procedure": "holm", "verdict": verdict,
                          "sft_models": sft_models, "seeds": 16} for effect, verdict in verdicts.items()])


FACTORIAL_OPTIONS = {"primary": "factorial", "equivalence_margin": {"accuracy": 0.03},
                     "factorial": {"factors": ["trace", "clamp"]}}


def test_the_factorial_finding_leads_with_the_factor_that_resolved_and_says_each_verdict():
    from grpo_lambda.tables.study_blocks import factorial_finding

    text = factorial_finding({}, factorial_rows({
        "trace with clamp off": "behind", "trace with clamp on": "not distinguishable",
        "clamp with trace off": "equivalent", "clamp with trace on": "not distinguishable"}), FACTORIAL_OPTIONS)
    assert text.startswith("**Over 8 SFT models (16 RL seeds), the trace is behind with the clamp off")
    assert "the trace is behind with the clamp off (+0.050 [+0.010, +0.090], Holm p 0.020) and not resolved with " \
           "the clamp on" in text
    assert "; the clamp is within ±0.03 of no clamp with the trace off (+0.050 [+0.010, +0.090], TOST Holm p " \
           "0.030) and not resolved with the trace on" in text


def test_the_factorial_finding_says_one_sft_model_and_refuses_a_primary_that_is_not_the_2x2():
    from grpo_lambda.tables.study_blocks import factorial_finding

    rows = factorial_rows({"trace with clamp off": "ahead", "trace with clamp on": "ahead",
                           "clamp with trace off": "ahead", "clamp with trace on": "ahead"}, sft_models=float("nan"))
    assert factorial_finding({}, rows, FACTORIAL_OPTIONS).startswith("**On one SFT model (16 RL seeds), the trace is")
    assert factorial_finding({}, rows, {**FACTORIAL_OPTIONS, "primary": "paired"}).startswith(
        "No factorial primary family")
