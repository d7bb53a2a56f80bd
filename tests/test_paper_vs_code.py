"""docs/paper-vs-code.md: the paper column says only what the paper says (a quote or the place it says it), the
credit profiles are the script's output, and the benchmark-gold comparison finds a changed gold."""

import importlib.util
import re

import pytest

from conftest import ROOT

DOC = ROOT / "docs" / "paper-vs-code.md"
# A place in the paper: a section, equation, table, appendix, algorithm, theorem, figure or the abstract.
PLACE = re.compile(r"§\d|\bEq\. ?\d|\bTables? \d|\bAppendix [A-Z]|\bAlgorithm \d|\bTheorem \d|\bFigure \d|\babstract\b")
QUOTE = re.compile(r"\"[^\"]{3,}\"|“[^”]{3,}”")


def script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main_table() -> list[dict]:
    """The rows of the doc's first table, as {column header: cell}."""
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| topic | paper |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(header), line
        rows.append(dict(zip(header, cells)))
    return rows


def test_every_paper_cell_quotes_the_paper_or_names_where_it_says_it():
    rows = main_table()
    assert len(rows) >= 20
    unsourced = [row["topic"] for row in rows if not (QUOTE.search(row["paper"]) or PLACE.search(row["paper"]))]
    assert unsourced == []
    # what the paper does not say stays out of its column (the evaluation code's protocol, TRL's estimator, ...)
    for row in rows:
        assert not re.search(r"\bgreedy\b|\bk3\b|open-r1", row["paper"]), row["topic"]


@pytest.mark.parametrize("needle", ["γ = 1", "one number per cell", "evaluation_suite", "rlvr_orz_math_57k",
                                    "§3.2", "early", "both at λ = 0"])
def test_the_rows_the_paper_grid_depends_on_are_there(needle):
    assert needle in DOC.read_text()


def test_the_credit_profile_table_is_the_scripts_output():
    text = DOC.read_text()
    table = text.split("<!-- trace-credit -->\n", 1)[1].split("\n<!-- /trace-credit -->", 1)[0]
    assert table == script("trace_credit").table()


def test_every_trace_overlay_is_in_the_docs():
    text = DOC.read_text()
    for overlay in sorted((ROOT / "config" / "trace").glob("*.yaml")):
        assert f"config/trace/{overlay.name}" in text


def test_the_gold_comparison_finds_a_changed_gold_and_a_missing_problem():
    compare = script("compare_golds").compare
    suite = [{"problem": "1+1?", "answer": "2"}, {"problem": "a  b", "answer": ["x", "y"]},
             {"problem": "c", "answer": "3"}]
    same = compare(suite, [{"problem": "1+1?", "answer": "2"}, {"problem": "a b", "answer": ["y", "x"]},
                           {"problem": "c", "answer": "3"}])
    assert (same["suite"], same["copy"], same["matched"], same["golds_equal"], same["differing"]) == (3, 3, 3, 3, [])
    changed = compare(suite, [{"problem": "1+1?", "answer": "3"}, {"problem": "a b", "answer": ["x", "y"]}])
    assert (changed["copy"], changed["matched"], changed["golds_equal"]) == (2, 2, 1)
    assert changed["differing"] == [("1+1?", "2", "3")]
    assert same["repeated"] == changed["repeated"] == 0
    twice = compare(suite, [*suite, {"problem": "c ", "answer": "4"}])  # "c" twice in the copy
    assert twice["repeated"] == 1
