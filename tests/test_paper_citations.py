"""Every "the paper says" of docs/paper-vs-code.md, config/paper.yaml and the dataset registry is found in the
paper's text (../shared/paper/grpo-lambda-2510.00194.txt): each quote verbatim (modulo whitespace), each place
(§, Eq., Table, Figure, Appendix, Algorithm, Theorem) as a label the text has. Also the numbers the doc derives
from the paper's published tables (Table 1's 3B GRPO row, §4.3's MathRL-16K gain) and beyond.yaml's on-policy
claim about P-trace."""

import re

import pytest
import torch

from conftest import ROOT
from test_paper_vs_code import main_table

PAPER_DIR = ROOT.parent / "shared" / "paper"
PAPER = PAPER_DIR / "grpo-lambda-2510.00194.txt"
pytestmark = pytest.mark.skipif(not PAPER.exists(), reason="the paper's text (../shared/paper/) is not here")

QUOTE = re.compile(r"\"([^\"]{3,}?)\"|“([^”]{3,}?)”")
PLACE = re.compile(r"§(\d(?:\.\d)?)|\bEq\. ?(\d+)(?:[–-](\d+))?|\bTables? (\d+)(?:[–-](\d+))?|\bFigures? (\d+)(?:[–-](\d+))?"
                   r"|\bAppendix ([A-F](?:\.\d)?)|\bAlgorithms? (\d)(?:[–-](\d))?|\bTheorem (\d)")


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def plain(text: str) -> str:
    """The extracted text without its LaTeX twins: "γ\\gamma" -> "γ", "λ\\lambda" -> "λ"."""
    return squeeze(re.sub(r"\\[A-Za-z]+", "", text))


def found_in(quote: str, paper: str) -> bool:
    return quote in squeeze(paper) or quote in plain(paper)


@pytest.fixture(scope="module")
def paper() -> str:
    return PAPER.read_text()


def labels_in(paper: str) -> set[str]:
    """The places the paper's text has: section headings, numbered equations, table/figure captions,
    algorithm and theorem names."""
    found = set()
    for line in paper.splitlines():
        heading = re.match(r"^(\d(?:\.\d)?) [A-Z]", line)
        if heading:
            found.add("§" + heading.group(1))
        appendix = re.match(r"^(?:Appendix ([A-F]) |([A-F]\.\d) )", line)
        if appendix:
            found.add("Appendix " + (appendix.group(1) or appendix.group(2)))
        for kind in ("Table", "Figure"):
            caption = re.match(rf"^{kind} (\d+):", line)
            if caption:
                found.add(f"{kind} {caption.group(1)}")
        algorithm = re.match(r"^Algorithm\s(\d)", line)  # a no-break space in the extracted text
        if algorithm:
            found.add("Algorithm " + algorithm.group(1))
    found |= {f"Eq. {n}" for n in re.findall(r"\((\d+)\)\s*$", paper, flags=re.M)}
    found |= {f"Theorem {n}" for n in re.findall(r"^Theorem (\d)\.", paper, flags=re.M)}
    return found


def places(cell: str) -> list[str]:
    """The labels a cell cites, ranges expanded (Eq. 17–18 -> Eq. 17, Eq. 18)."""
    out = []
    for m in PLACE.finditer(cell):
        sec, eq, eq2, tab, tab2, fig, fig2, app, alg, alg2, thm = m.groups()
        for kind, first, last in (("Eq.", eq, eq2), ("Table", tab, tab2), ("Figure", fig, fig2),
                                  ("Algorithm", alg, alg2)):
            if first:
                out += [f"{kind} {n}" for n in range(int(first), int(last or first) + 1)]
        if sec:
            out.append("§" + sec)
        if app:
            out.append("Appendix " + app)
        if thm:
            out.append("Theorem " + thm)
    return out


def quotes(text: str) -> list[str]:
    return [squeeze(a or b) for a, b in QUOTE.findall(text)]


# -- the label finder finds what it should, and refuses what the paper does not have -----------------------


def test_the_label_finder_knows_the_papers_places_and_refuses_others(paper):
    labels = labels_in(paper)
    for label in ("§3.2", "§4.1", "§4.2", "§4.3", "Eq. 1", "Eq. 2", "Eq. 17", "Eq. 18", "Table 1", "Table 2",
                  "Table 6", "Figure 3", "Figure 4", "Figure 12", "Appendix A.3", "Appendix B", "Appendix E",
                  "Algorithm 1", "Algorithm 2", "Theorem 1"):
        assert label in labels, label
    for label in ("§4.4", "Eq. 19", "Table 7", "Figure 16", "Appendix G", "Algorithm 3"):
        assert label not in labels, label
    assert places("Eq. 17–18; Tables 3–6; §3.2") == ["Eq. 17", "Eq. 18", "Table 3", "Table 4", "Table 5",
                                                     "Table 6", "§3.2"]


# -- docs/paper-vs-code.md -----------------------------------------------------------------------------


def test_every_quote_in_the_papers_column_is_the_papers_text(paper):
    missing = [(row["topic"], quote) for row in main_table() for quote in quotes(row["paper"])
               if not found_in(quote, paper)]
    assert missing == []


def test_every_place_in_the_papers_column_is_a_place_the_paper_has(paper):
    labels = labels_in(paper)
    cited = [(row["topic"], place) for row in main_table() for place in places(row["paper"])]
    assert len(cited) >= 30
    assert [(topic, place) for topic, place in cited if place not in labels] == []


@pytest.mark.parametrize("topic, needle", [
    ("n of the absolute form", "Appendix A.3"), ("discount γ", "§3.2"), ("λ", "§4.1"),
    ("training sets", "https://huggingface.co/datasets/hiyouga/math12k"), ("benchmark sources", "Liu et al. (2025)"),
    ("figures", "smoothened over the last 20 training iterations")])
def test_the_rows_cite_where_the_paper_says_it(topic, needle):
    rows = {row["topic"]: row for row in main_table()}
    assert needle in rows[topic]["paper"]


def test_the_doc_quotes_a3_for_the_default_n(paper):
    doc = (ROOT / "docs" / "paper-vs-code.md").read_text()
    section = doc.split("## Trace form and n", 1)[1].split("## SFT", 1)[0]
    quote = section.split("Appendix A.3 (\"Trace weights\")\nsays: \"", 1)[1].split("\"", 1)[0]
    pieces = [squeeze(part) for part in quote.split("[...]")]
    assert len(pieces) == 2 and all(found_in(piece, paper) for piece in pieces), pieces
    assert "Default: n = the run's maximum completion length" in section


# -- config/paper.yaml and the registry --------------------------------------------------------------------


def comment_text(path) -> str:
    return " ".join(line.split("#", 1)[1].strip() for line in path.read_text().splitlines() if "#" in line)


def test_paper_yamls_quotes_are_the_papers_or_name_a_doc_section(paper):
    doc_names = {squeeze(t) for t in re.findall(r"^#+ (.+)$", "\n".join(
        p.read_text() for p in (ROOT / "docs").glob("*.md")), flags=re.M)}
    doc_names |= {row["topic"] for row in main_table()}
    for name in ("paper.yaml", "trace/completion-length.yaml"):
        # quotes of words (not "= TRL" markers nor option values such as "bnpo")
        found = [q for q in quotes(comment_text(ROOT / "config" / name)) if " " in q and len(re.findall(r"[A-Za-z]{2,}", q)) >= 2]
        assert found
        strays = [q for q in found if not found_in(q, paper) and q not in doc_names and not q.startswith("You are")]
        assert strays == [], name


@pytest.mark.parametrize("path", ["config/paper.yaml", "src/grpo_lambda/data/registry.yaml",
                                  "config/trace/completion-length.yaml"])
def test_the_places_the_configs_cite_are_the_papers(paper, path):
    labels = labels_in(paper)
    cited = places(comment_text(ROOT / path))
    assert cited and [place for place in cited if place not in labels] == []


def test_the_registry_cites_the_hub_ids_section_4_gives(paper):
    registry = (ROOT / "src" / "grpo_lambda" / "data" / "registry.yaml").read_text()
    for hub_id in ("hiyouga/math12k", "riddickz/math-rl-16k"):
        assert f"https://huggingface.co/datasets/{hub_id}" in paper
        assert f"hub_id: {hub_id}" in registry
    assert "Table 2" not in registry.split("datasets:", 1)[0]  # Table 2 names no dataset


# -- numbers derived from the published tables ---------------------------------------------------------------


def published():
    import pandas as pd
    return pd.read_csv(PAPER_DIR / "table1.csv"), pd.read_csv(PAPER_DIR / "appendix_e_benchmarks.csv")


def test_table1s_3b_grpo_row_mixes_three_and_four_training_sets():
    """The doc's note: 3B GRPO's AMC and Math500 in Table 1 are means over three training sets (no Math-12K),
    its other cells means over all four."""
    table1, appendix = published()
    grpo = appendix[(appendix["model"] == "DeepSeek-R1-Distill-Llama-3B") & (appendix["trace_style"] == "grpo")]
    cells = grpo.pivot_table(index="train_dataset", columns="benchmark", values="accuracy")
    row = table1[(table1["model"] == "DeepSeek-R1-Distill-Llama-3B") & (table1["method"] == "grpo")].iloc[0]
    for benchmark in ("amc", "math500"):
        assert round(cells[benchmark].drop("math12k").mean(), 3) == row[benchmark]
        assert abs(cells[benchmark].mean() - row[benchmark]) > 0.02
    for benchmark in ("aime24", "minerva", "average"):
        assert abs(cells[benchmark].mean() - row[benchmark]) <= 0.0006
    doc = (ROOT / "docs" / "paper-vs-code.md").read_text()
    assert "(0.145 + 0.108 + 0.024)/3 = 0.092" in doc


def test_section_4_3s_mathrl16k_gain_is_the_recent_trace_099_mean_over_models(paper):
    _, appendix = published()
    average = appendix[appendix["benchmark"] == "average"].set_index(["model", "train_dataset"])
    grpo = average[average["trace_style"] == "grpo"]["accuracy"]
    chosen = average[(average["trace_style"] == "recent") & (average["update_style"] == "trace")
                     & (average["lam"] == 0.99)]["accuracy"]
    gain = (chosen - grpo).groupby("train_dataset").mean()
    assert "0.0552" in paper and round(gain["mathrl16k"], 4) == pytest.approx(0.0552, abs=2e-4)


# -- config/beyond.yaml's on-policy sentence ------------------------------------------------------------------


def test_ptrace_past_scope_is_not_grpo_on_policy():
    """beyond.yaml: P-trace (past scope, λ 0.99) differs from GRPO even on-policy; clip-higher does not."""
    from grpo_lambda.objectives import ObjectiveParams, policy_loss

    torch.manual_seed(0)
    logps = -torch.rand(8, 64, dtype=torch.float64) * 2
    mask = torch.ones(8, 64, dtype=torch.float64)
    for i in range(8):
        mask[i, 20 + 5 * i:] = 0
    advantages = torch.randn(8, dtype=torch.float64)

    def gradient(params):
        leaf = logps.clone().requires_grad_()
        loss, _ = policy_loss(leaf, logps.detach(), None, advantages, mask, params)
        return torch.autograd.grad(loss, leaf)[0]

    grpo = gradient(ObjectiveParams(objective="grpo", loss_type="bnpo"))
    ptrace = gradient(ObjectiveParams(objective="ptrace", lam=0.99, history_scope="past", loss_type="bnpo"))
    higher = gradient(ObjectiveParams(objective="grpo", loss_type="bnpo", epsilon_high=0.28))
    assert round(((ptrace - grpo).norm() / grpo.norm()).item(), 2) == 0.89
    torch.testing.assert_close(higher, grpo, rtol=0, atol=0)
    assert "0.89" in (ROOT / "config" / "beyond.yaml").read_text()
