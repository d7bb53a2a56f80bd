"""Every "the paper says" of docs/paper-vs-code.md, config/paper.yaml and the dataset registry is found where it
cites it in the paper's text (../shared/paper/grpo-lambda-2510.00194.txt): each quote verbatim (modulo whitespace)
inside the text of the place cited beside it (§, Eq., Table, Figure, Appendix, Algorithm, Theorem, abstract), each
place a label the text has. Those checks skip, with one reason, where the text is absent (a clone without
../shared; GRPO_LAMBDA_PAPER_DIR names another folder). Every clone runs the rest: the numbers the doc derives from
the paper's published tables (Table 1's 3B GRPO row, §4.3's MathRL-16K gain), from the project's own copy of
them (grpo_lambda/published, transcribed from Table 1 and Tables 3-6, and checked against the text where it is
here), and beyond.yaml's on-policy claim about P-trace."""

import os
import re
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from grpo_lambda.tables.collect import load_published
from test_paper_vs_code import main_table

PAPER_DIR = Path(os.environ.get("GRPO_LAMBDA_PAPER_DIR") or ROOT.parent / "shared" / "paper")
PAPER = PAPER_DIR / "grpo-lambda-2510.00194.txt"

QUOTE = re.compile(r"\"([^\"]{3,}?)\"|“([^”]{3,}?)”")
PLACE = re.compile(r"§(\d(?:\.\d)?)|\bEq\. ?(\d+)(?:[–-](\d+))?|\bTables? (\d+)(?:[–-](\d+))?|\bFigures? (\d+)(?:[–-](\d+))?"
                   r"|\bAppendix ([A-F](?:\.\d)?)|\bAlgorithms? (\d)(?:[–-](\d))?|\bTheorem (\d)|\b(abstract)\b")
HEADING = re.compile(r"^(\d(?:\.\d)?) [A-Z]")


def squeeze(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def plain(text: str) -> str:
    """The extracted text without its LaTeX twins: "γ\\gamma" -> "γ", "λ\\lambda" -> "λ"."""
    return squeeze(re.sub(r"\\[A-Za-z]+", "", text))


def found_in(quote: str, text: str) -> bool:
    return quote in squeeze(text) or quote in plain(text)


@pytest.fixture(scope="module")
def paper() -> str:
    if not PAPER.is_file():
        pytest.skip(f"the paper's text is not here ({PAPER}): quotes and places not checked")
    return PAPER.read_text()


def labels_in(paper: str) -> set[str]:
    """The places the paper's text has: section headings, numbered equations, table/figure captions,
    algorithm and theorem names, the abstract."""
    found = {"abstract"} if re.search(r"^Abstract\s*$", paper, flags=re.M) else set()
    for line in paper.splitlines():
        heading = HEADING.match(line)
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


def section(paper: str, label: str) -> str:
    """The text of one place of the paper ("" where it has none): a section from its heading to the next heading
    of its level or above (its subsections included), an appendix likewise, a table's caption and rows, a
    figure's caption, an equation's line, an algorithm from its "Input:" line to its name (which follows it in
    the extracted text), a theorem's statement, the abstract."""
    lines = paper.splitlines()

    def span(starts, stops) -> str:
        first = next((i for i, line in enumerate(lines) if starts(line)), None)
        if first is None:
            return ""
        end = next((j for j in range(first + 1, len(lines)) if stops(lines[j])), len(lines))
        return "\n".join(lines[first:end])

    kind, _, name = label.partition(" ")
    if label == "abstract":
        return span(lambda line: line.strip() == "Abstract", HEADING.match)
    if label.startswith("§"):
        level = r"\d(?:\.\d)?" if "." in label else r"\d"
        return span(lambda line: line.startswith(label[1:] + " ") and bool(HEADING.match(line)),
                    lambda line: re.match(rf"^{level} [A-Z]", line) or line.startswith(("References", "Appendix ")))
    if kind == "Appendix" and "." in name:
        return span(lambda line: line.startswith(name + " "),
                    lambda line: re.match(r"^[A-F]\.\d ", line) or line.startswith("Appendix "))
    if kind == "Appendix":
        return span(lambda line: line.startswith(f"Appendix {name} "), lambda line: line.startswith("Appendix "))
    if kind in ("Table", "Figure"):
        return span(lambda line: line.startswith(f"{kind} {name}:"),
                    lambda line: kind == "Figure" or not line.strip() or re.match(r"^(Table|Figure) \d+:", line))
    if kind == "Eq.":
        return "\n".join(line for line in lines if re.search(rf"\({name}\)\s*$", line))
    if kind == "Theorem":
        return span(lambda line: line.startswith(f"Theorem {name}."),
                    lambda line: line.startswith("Intuitively") or HEADING.match(line))
    if kind == "Algorithm":
        named = next((i for i, line in enumerate(lines) if re.match(rf"^Algorithm\s{name}\b", line)), None)
        inputs = [i for i in range(named or 0) if lines[i].startswith("Input:")]
        return "\n".join(lines[inputs[-1]:named + 1]) if named is not None and inputs else ""
    return ""


def places(cell: str) -> list[str]:
    """The labels a cell cites, ranges expanded (Eq. 17–18 -> Eq. 17, Eq. 18)."""
    out = []
    for m in PLACE.finditer(cell):
        sec, eq, eq2, tab, tab2, fig, fig2, app, alg, alg2, thm, abstract = m.groups()
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
        if abstract:
            out.append("abstract")
    return out


def quotes(text: str) -> list[str]:
    return [squeeze(a or b) for a, b in QUOTE.findall(text)]


def cited_quotes(text: str) -> list[tuple[str, list[str]]]:
    """Each quote with the places it is cited from: in its clause (text between semicolons), the place named
    last before it, else the first after it ("'verifiable reward' (abstract)"); [] where the clause names none.
    A range ("Figures 12–15") is one citation: the quote must be in one of its places."""
    cited = []
    for clause in text.split(";"):
        blanked = QUOTE.sub(lambda m: " " * len(m.group(0)), clause)  # a place inside a quote is not a citation
        named = [(m.start(), places(m.group(0))) for m in PLACE.finditer(blanked)]
        for m in QUOTE.finditer(clause):
            before = [labels for at, labels in named if at < m.start()]
            after = [labels for at, labels in named if at > m.start()]
            cited.append((squeeze(m.group(1) or m.group(2)), before[-1] if before else after[0] if after else []))
    return cited


def misquoted(text: str, paper: str, *, exempt=()) -> list[tuple[str, list[str]]]:
    """The quotes of ``text`` not found in the text of the place cited beside them (or cited from no place)."""
    return [(quote, labels) for quote, labels in cited_quotes(text)
            if quote not in exempt and not any(found_in(quote, section(paper, label)) for label in labels)]


# -- the label and section finders find what they should, and refuse what the paper does not have ---------------


def test_the_label_finder_knows_the_papers_places_and_refuses_others(paper):
    labels = labels_in(paper)
    for label in ("§3.2", "§4.1", "§4.2", "§4.3", "Eq. 1", "Eq. 2", "Eq. 17", "Eq. 18", "Table 1", "Table 2",
                  "Table 6", "Figure 3", "Figure 4", "Figure 12", "Appendix A.3", "Appendix B", "Appendix E",
                  "Algorithm 1", "Algorithm 2", "Theorem 1", "abstract"):
        assert label in labels, label
        assert section(paper, label), label
    for label in ("§4.4", "Eq. 19", "Table 7", "Figure 16", "Appendix G", "Algorithm 3"):
        assert label not in labels and section(paper, label) == "", label
    assert places("Eq. 17–18; Tables 3–6; §3.2") == ["Eq. 17", "Eq. 18", "Table 3", "Table 4", "Table 5",
                                                     "Table 6", "§3.2"]


def test_a_section_holds_its_own_text_and_not_its_neighbours(paper):
    """A quote is looked for in the place cited, not anywhere: each of these is in the paper, but not there."""
    assert found_in("Assuming γ=1", section(paper, "§3.2")) and not found_in("Assuming γ=1", section(paper, "§3.1"))
    assert found_in("Assuming γ=1", section(paper, "§3"))  # a section holds its subsections
    assert found_in("Advantage clamping", section(paper, "Table 2"))
    assert not found_in("Advantage clamping", section(paper, "Table 1"))
    assert found_in("Our implementation does not use this upper bound", section(paper, "Appendix A.3"))
    assert not found_in("Our implementation does not use this upper bound", section(paper, "Appendix A.2"))
    assert "1+σ" in section(paper, "Algorithm 2") and "1+σ" not in section(paper, "Algorithm 1")
    assert found_in("verifiable reward", section(paper, "abstract"))
    assert not found_in("verifiable reward", section(paper, "§4.2"))
    assert misquoted('§4.2: "Assuming γ=1"; Table 2, "Advantage clamping"', paper) == [("Assuming γ=1", ["§4.2"])]
    assert misquoted('"Assuming γ=1", cited nowhere', paper) == [("Assuming γ=1", [])]
    assert cited_quotes('"recent" and "both" (Eq. 1–2; Tables 3–6)') == [("recent", ["Eq. 1", "Eq. 2"]),
                                                                          ("both", ["Eq. 1", "Eq. 2"])]


# -- docs/paper-vs-code.md -----------------------------------------------------------------------------


def test_every_quote_in_the_papers_column_is_in_the_place_it_cites(paper):
    cited = [(row["topic"], quote) for row in main_table() for quote, _ in cited_quotes(row["paper"])]
    assert len(cited) >= 30
    assert [(row["topic"], miss) for row in main_table() for miss in misquoted(row["paper"], paper)] == []


def test_every_place_in_the_papers_column_is_a_place_the_paper_has(paper):
    labels = labels_in(paper)
    cited = [(row["topic"], place) for row in main_table() for place in places(row["paper"])]
    assert len(cited) >= 30
    assert [(topic, place) for topic, place in cited if place not in labels] == []


@pytest.mark.parametrize("topic, needle", [
    ("n of the absolute form", "Appendix A.3"), ("discount γ", "§3.2"), ("λ", "§4.1"),
    ("training sets", "https://huggingface.co/datasets/hiyouga/math12k"), ("benchmark sources", "Liu et al. (2025)"),
    ("figures", "smoothened over the last 20 training iterations"), ("advantage", "§2"),
    ("batch per step", '"Per device batch-size" 16')])
def test_the_rows_cite_where_the_paper_says_it(topic, needle):
    rows = {row["topic"]: row for row in main_table()}
    assert needle in rows[topic]["paper"]


def test_the_doc_quotes_a3_for_the_default_n(paper):
    doc = (ROOT / "docs" / "paper-vs-code.md").read_text()
    section_text = doc.split("## Trace form and n", 1)[1].split("## SFT", 1)[0]
    quote = section_text.split("Appendix A.3 (\"Trace weights\")\nsays: \"", 1)[1].split("\"", 1)[0]
    pieces = [squeeze(part) for part in quote.split("[...]")]
    assert len(pieces) == 2 and all(found_in(piece, section(paper, "Appendix A.3")) for piece in pieces), pieces
    assert "Default: n = the run's maximum completion length" in section_text


# -- config/paper.yaml and the registry --------------------------------------------------------------------


def comment_text(path) -> str:
    return " ".join(line.split("#", 1)[1].strip() for line in path.read_text().splitlines() if "#" in line)


def test_paper_yamls_quotes_are_in_the_places_they_cite_or_name_a_doc_section(paper):
    doc_names = {squeeze(t) for t in re.findall(r"^#+ (.+)$", "\n".join(
        p.read_text() for p in (ROOT / "docs").glob("*.md")), flags=re.M)}
    doc_names |= {row["topic"] for row in main_table()}
    for name in ("paper.yaml", "trace/completion-length.yaml", "trace/position-weight.yaml"):
        text = comment_text(ROOT / "config" / name)
        # quotes of words (not "= TRL" markers nor option values such as "bnpo"), other than a doc's section names
        # and the system prompt of open-r1 that paper.yaml quotes
        found = [q for q in quotes(text) if " " in q and len(re.findall(r"[A-Za-z]{2,}", q)) >= 2]
        assert found, name
        exempt = [q for q in found if q in doc_names or q.startswith("You are")] + [q for q in quotes(text)
                                                                                     if q not in found]
        assert misquoted(text, paper, exempt=exempt) == [], name


@pytest.mark.parametrize("path", ["config/paper.yaml", "src/grpo_lambda/data/registry.yaml",
                                  "config/trace/completion-length.yaml", "config/trace/position-weight.yaml"])
def test_the_places_the_configs_cite_are_the_papers(paper, path):
    labels = labels_in(paper)
    cited = places(comment_text(ROOT / path))
    assert cited and [place for place in cited if place not in labels] == []


def test_the_registry_cites_the_hub_ids_section_4_gives(paper):
    registry = (ROOT / "src" / "grpo_lambda" / "data" / "registry.yaml").read_text()
    for hub_id in ("hiyouga/math12k", "riddickz/math-rl-16k"):
        assert f"https://huggingface.co/datasets/{hub_id}" in section(paper, "§4")
        assert f"hub_id: {hub_id}" in registry
    assert "Table 2" not in registry.split("datasets:", 1)[0]  # Table 2 names no dataset


# -- the published numbers: the project's copy (grpo_lambda/published), checked against the text where it is here --

MODELS = {"Qwen-1.5B": "Qwen2.5-Math-1.5B-Instruct", "R1-Distill-Qwen-1.5B": "DeepSeek-R1-Distill-Qwen-1.5B",
          "R1-Distill-LLaMA-3B": "DeepSeek-R1-Distill-Llama-3B", "R1-Distill-Qwen-7B": "DeepSeek-R1-Distill-Qwen-7B"}
APPENDIX_E_MODELS = {3: "Qwen2.5-Math-1.5B-Instruct", 4: "DeepSeek-R1-Distill-Qwen-1.5B", 5: "DeepSeek-R1-Distill-Llama-3B",
                     6: "DeepSeek-R1-Distill-Qwen-7B"}
ROWS = {"AIME": "aime24", "MATH": "math500", "AMC": "amc", "OLBen": "olympiadbench", "MIN": "minerva", "AVG": "average"}
DATASETS = {"math12k": "math12k", "math-rl-16k": "mathrl16k", "gsm8k": "gsm8k", "orzmath57k": "orz57k"}


def table1_in(paper: str) -> dict:
    """(model, method) -> [average, aime24, amc, math500, minerva, olympiadbench], as Table 1 prints them."""
    rows, model = {}, None
    for line in section(paper, "Table 1").splitlines()[3:]:
        label, numbers = line.rsplit(" ", 6)[0], [float(x) for x in line.split()[-6:]]
        if label.endswith("GRPO") and label != "GRPO":
            model = MODELS[label[: -len(" GRPO")]]
        rows[model, "grpo" if label.endswith("GRPO") else "grpo_lambda"] = numbers
    return rows


def appendix_e_in(paper: str) -> dict:
    """(model, train_dataset, trace_style, update_style, lam, benchmark) -> the value Tables 3-6 print there. A
    table's column groups: each trace style spans the update styles under it, each update style its λ values."""
    cells = {}
    for number, model in APPENDIX_E_MODELS.items():
        lines = section(paper, f"Table {number}").splitlines()
        styles, updates, lams = (re.sub(r"\\\w+", "", line).split()[skip:] for line, skip in zip(lines[1:4], (2, 2, 1)))
        groups = []  # the update-style groups: runs of λ values, GRPO alone
        for lam in lams:
            if lam == "GRPO" or not groups or groups[-1][-1] == "GRPO" or float(lam) <= float(groups[-1][-1]):
                groups.append([lam])
            else:
                groups[-1].append(lam)
        update_of = [u for u, group in zip(updates, groups) for _ in group]
        traced = [s for s in styles if s != "GRPO"]
        per_style = sum(g != ["GRPO"] for g in groups) // max(len(traced), 1)
        style_of, k = [], 0
        for group in groups:
            if group == ["GRPO"]:
                style_of.append("grpo")
            else:
                style_of += [traced[k // per_style]] * len(group)
                k += 1
        columns = [(style, "grpo" if u == "GRPO" else u.split("-")[-1], None if lam == "GRPO" else float(lam))
                   for style, u, lam in zip(style_of, update_of, lams)]
        for line in lines[4:]:
            words = line.split()
            if words[:2] == ["Trained", "on"]:
                datasets = [DATASETS[name] for name in words[2:]]
            elif words and words[0] in ROWS:
                width = len(columns) // len(datasets)
                for i, value in enumerate(words[1:]):
                    key = (model, datasets[i // width], *columns[i], ROWS[words[0]])
                    assert key not in cells, key
                    cells[key] = float(value)
    return cells


def test_the_projects_table_1_is_the_papers(paper):
    table1, _ = load_published()
    printed = table1_in(paper)
    assert len(printed) == len(table1) == 8
    for row in table1.itertuples():
        assert printed[row.model, row.method] == [row.average, row.aime24, row.amc, row.math500, row.minerva,
                                                 row.olympiadbench], (row.model, row.method)


def test_the_projects_appendix_e_is_the_papers_tables_3_to_6(paper):
    _, appendix = load_published()
    printed = appendix_e_in(paper)
    assert len(printed) == len(appendix) == 552
    ours = {(row.model, row.train_dataset, row.trace_style, row.update_style,
             None if row.trace_style == "grpo" else row.lam, row.benchmark): row.accuracy for row in appendix.itertuples()}
    assert ours == printed


# -- numbers derived from the published tables: on every clone ----------------------------------------------


def test_the_published_numbers_are_the_projects_data_with_their_source():
    table1, appendix = load_published()
    assert len(table1) == 8 and len(appendix) == 552
    readme = (ROOT / "src" / "grpo_lambda" / "published" / "README.md").read_text()
    assert "arXiv 2510.00194" in readme and "Table 1" in readme and "Tables 3–6 (Appendix E)" in readme


def test_table1s_3b_grpo_row_mixes_three_and_four_training_sets():
    """The doc's note: 3B GRPO's AMC and Math500 in Table 1 are means over three training sets (no Math-12K),
    its other cells means over all four."""
    table1, appendix = load_published()
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


def test_section_4_3s_mathrl16k_gain_is_the_recent_trace_099_mean_over_models():
    _, appendix = load_published()
    average = appendix[appendix["benchmark"] == "average"].set_index(["model", "train_dataset"])
    grpo = average[average["trace_style"] == "grpo"]["accuracy"]
    chosen = average[(average["trace_style"] == "recent") & (average["update_style"] == "trace")
                     & (average["lam"] == 0.99)]["accuracy"]
    gain = (chosen - grpo).groupby("train_dataset").mean()
    assert round(gain["mathrl16k"], 4) == pytest.approx(0.0552, abs=2e-4)


def test_section_4_3_states_the_gain(paper):
    assert "0.0552" in section(paper, "§4.3")


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


# -- what the run pages and the other papers' configs say of their sources ------------------------------------

STRACE_SUMMARY = PAPER_DIR / "strace-2605.05965-summary.txt"


@pytest.fixture(scope="module")
def strace_page() -> tuple[str, str]:
    """The S-trace paper's public summary page: (its abstract, the rest: the page's generated summary)."""
    if not STRACE_SUMMARY.is_file():
        pytest.skip(f"the S-trace summary page is not here ({STRACE_SUMMARY})")
    text = STRACE_SUMMARY.read_text()
    before, _, after = text.partition("\nAbstract\n")
    abstract, _, rest = after.partition("AI Key Findings")
    assert abstract.strip() and rest.strip()
    return squeeze(abstract), squeeze(before + " " + rest)


def test_strace_paper_yaml_says_which_baseline_the_abstract_names_and_which_only_the_summary(strace_page):
    """The abstract compares S-trace with GRPO; GRPO(λ) appears only in the page's generated summary. The
    config quotes each from where it is and says the second rests on the summary."""
    abstract, summary = strace_page
    text = comment_text(ROOT / "config" / "strace-paper.yaml")
    assert '"S-trace not only outperforms GRPO")' in text and '("S-trace outperforms GRPO(λ)", its Key Results)' in text
    assert "S-trace not only outperforms GRPO" in abstract and "GRPO(λ)" not in abstract
    assert "S-trace outperforms GRPO(λ)" in summary
    assert "rests on the page's generated summary, not on the abstract" in text


def test_strace_paper_yaml_takes_four_optimizer_steps_per_generation_batch_as_it_says():
    """Four optimizer steps per generation batch (GSPO's practice), not DAPO's 16: TRL's steps_per_generation
    counts micro-batches, so it is four times the gradient accumulation, for every model."""
    import yaml

    config = yaml.safe_load((ROOT / "config" / "strace-paper.yaml").read_text())
    text = comment_text(ROOT / "config" / "strace-paper.yaml")
    assert "Four optimizer steps per generation batch (GSPO's practice" in text
    assert "16 gradient updates for each rollout step" in text and "DAPO's practice" not in text
    settings = [config["rl"]] + [{**config["rl"], **spec.get("rl", {}), "trl": {**config["rl"]["trl"],
                                                                                 **spec.get("rl", {}).get("trl", {})}}
                                 for spec in config["models"].values()]
    assert {rl["trl"]["steps_per_generation"] / rl["gradient_accumulation_steps"] for rl in settings} == {4}


def table_2_row(paper: str, name: str) -> list[int]:
    """A row of Table 2 as numbers: the extracted text writes each cell twice ("256256" for 256)."""
    line = next(line for line in section(paper, "Table 2").splitlines() if line.startswith(name + " "))
    cells = line.removeprefix(name + " ").split()
    return [int(cell[:len(cell) // 2]) if cell[:len(cell) // 2] * 2 == cell else int(cell) for cell in cells]


def test_the_horizon_page_gives_table_2s_completion_lengths_and_the_evaluations_budget(paper):
    """docs/horizon-run: the paper's RL completions are Table 2's lengths (256 tokens, 768 for the 7B model);
    3,000 new tokens is its evaluation's budget (config/paper.yaml's evaluation), not a chain's length."""
    import yaml

    assert table_2_row(paper, "Maximum completion length") == [256, 256, 768]
    page = squeeze((ROOT / "docs" / "horizon-run" / "README.md").read_text())
    assert ("RL completions of at most 256 tokens (768 for the 7B model; Table 2's \"Maximum completion length\"), "
            "and up to 3,000 new tokens only at evaluation") in page
    assert "thousands of tokens" not in page
    assert yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["evaluation"]["max_new_tokens"] == 3000


def test_position_weight_yaml_labels_its_weight_for_style_both_an_inference(paper):
    """§3.2's ε-weight paragraph weighs with the recent trace, Σ (γλ)^l, and writes no weight for style both;
    Eq. 2's max((γλ)^l, (γλ)^(t−l)) is the ε-trace's. The config says its weight for both is an inference."""
    weighting = section(paper, "§3.2").split("Traces as per-token weighting", 1)[1].split("In the RL literature", 1)[0]
    assert "we propose to directly weight" in weighting and "max(" not in weighting and "both" not in weighting
    assert "max(" in section(paper, "Eq. 2") or "tr(t,l)" in section(paper, "Eq. 2")
    text = comment_text(ROOT / "config" / "trace" / "position-weight.yaml")
    assert "The style both's weight is an inference, not the paper's formula" in text
