"""The report: its headline (Table 1, the primary verdicts, Figure 1 with its counts) from a published run's
tables, what its captions say the numbers are over, the report after a partial run, and its first screen in
headless Chromium (a 1400 × 900 viewport) holding the headline's numbers."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import ROOT
from grpo_lambda import headline, report_screen
from grpo_lambda.captions import caption_counts
from grpo_lambda.tables.build import rebuild
from grpo_lambda.tables.names import table_formats
from grpo_lambda.tables.write import write_table

DEFAULT_RUN = ROOT / "docs" / "default-run" / "raw"
CLAMP_TRACE_RUN = ROOT / "docs" / "clamp-trace-run" / "raw"
PNG = b"\x89PNG\r\n\x1a\n a stand-in for Figure 1"
needs_chromium = pytest.mark.skipif(report_screen.chromium() is None,
                                    reason="no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")


def _level(value: float) -> str:
    return f"{value:.3f}"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else _level(value)


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "−")


def tables_of(raw: Path, folder: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    """A published run's config and the tables the headline reads, written as the aggregate stage writes
    them and read back from their CSV files."""
    config, tables = rebuild(raw)
    for name in headline.TABLES:
        write_table(tables[name], folder, name, table_formats(name))
    return config, headline.read_tables(folder)


def text_of(fragment: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", fragment,
                                                                              flags=re.S))))


@pytest.fixture(scope="module")
def default_tables(tmp_path_factory):
    return tables_of(DEFAULT_RUN, tmp_path_factory.mktemp("tables"))


@pytest.fixture
def default_run(default_tables):
    """The default run's config, tables and headline, the headline made in each test (mutmut credits a module
    fixture's calls to the first test that uses it)."""
    config, tables = default_tables
    return config, tables, headline.headline_html(config, tables, PNG)


def test_the_headline_holds_table1_with_its_intervals(default_run):
    config, tables, fragment = default_run
    shown = text_of(fragment)
    t1 = tables["table1"]
    assert list(t1["label"]) == ["SFT", "GRPO", "recent/trace/0.99"]
    for row in t1.to_dict("records"):
        for target in ["average", *config["benchmarks"]]:
            cell = f"{_level(row[target])} [{_level(row[target + '_low'])}, {_level(row[target + '_high'])}]"
            assert cell in shown, (row["label"], target, cell)
    # each row in the order of Table 1, its average first
    order = [shown.index(f"{row['label']} {_level(row['average'])}") for row in t1.to_dict("records")]
    assert order == sorted(order)


def test_the_headline_states_the_primary_verdicts(default_run):
    config, tables, fragment = default_run
    shown = text_of(fragment)
    paired = tables["paired"]
    primary = paired[paired["family"] == "primary"]
    assert len(primary) == 1  # config/config.yaml: report.primary paired, one line against GRPO
    row = primary.iloc[0]
    expected = (f"recent/trace/0.99 − GRPO: {_signed(row['diff'])} [{_signed(row['diff_low'])}, "
                f"{_signed(row['diff_high'])}], Holm p {_p(row['p_holm'])} (of 1), TOST (±0.05) Holm p "
                f"{_p(row['p_equivalence_holm'])}: {row['verdict']}")
    assert expected in shown
    # the per-suite rows are exploratory: not in the headline
    assert all(f"{_signed(diff)} [" not in shown for diff in paired[paired["family"] != "primary"]["diff"])


def test_the_headline_shows_figure1_with_what_it_is_over(default_run):
    config, tables, fragment = default_run
    encoded = re.search(r'<img alt="Figure 1" src="data:image/png;base64,([^"]+)"', fragment).group(1)
    assert base64.b64decode(encoded) == PNG
    caption = text_of(re.search(r"<figcaption>(.*?)</figcaption>", fragment, re.S).group(1))
    seeds, sizes = len(config["seeds"]), {spec["n"] for spec in config["benchmarks"].values()}
    assert seeds == 4 and sizes == {100}
    assert (f"Bars: the mean over {seeds} RL seeds (SFT: one model), on {len(config['benchmarks'])} benchmarks of "
            f"{sizes.pop()} problems each; error bars: the 95% interval over seeds and problems") in caption


def test_the_counts_are_the_tables_not_the_configs(default_run, tmp_path):
    """A study that asks for 4 seeds of which 3 were evaluated says 3."""
    config, tables, _ = default_run
    fewer = {**tables, "results_by_variant": tables["results_by_variant"].assign(n_seeds=3)}
    assert "the mean over 3 RL seeds" in text_of(headline.headline_html(config, fewer, PNG))


def test_variants_with_different_seed_counts_are_described_by_their_range(default_run):
    """GRPO evaluated on 4 RL seeds, the trace variant on 3: the summary and Figure 1's caption say "3 to 4 RL
    seeds", not the larger count alone."""
    config, tables, _ = default_run
    by_variant = tables["results_by_variant"]
    unequal = {**tables, "results_by_variant": by_variant.assign(
        n_seeds=by_variant["n_seeds"].where(by_variant["variant"] != "recent-trace-0.99", 3))}
    shown = text_of(headline.headline_html(config, unequal, PNG))
    assert "2 RL variants, 3 to 4 RL seeds each" in shown and "the mean over 3 to 4 RL seeds" in shown
    assert not re.search(r"(?<!to )4 RL seeds", shown)


def test_each_primary_verdict_gives_the_size_of_its_own_holm_family(default_run):
    """Three primary families, of one, one and two comparisons (Holm runs within a model and training set):
    each verdict says "(of 1)" or "(of 2)", not the study's four primary rows nor a model's three."""
    config, tables, _ = default_run
    paired = tables["paired"]
    row = paired[paired["family"] == "primary"]
    others = pd.concat([row.assign(dataset="sums"), row.assign(model="other", label="first"),
                        row.assign(model="other", label="second")])
    shown = text_of(headline.headline_html(config, {**tables, "paired": pd.concat([row, others])}, PNG))
    assert shown.count("(of 1)") == 2 and shown.count("(of 2)") == 2 and not re.search(r"\(of [34]\)", shown)
    assert re.search(r"tiny / arith : recent/trace/0\.99 − GRPO: \S+ \[[^]]+\], Holm p \S+ \(of 1\)", shown)
    assert re.search(r"other / arith : second − GRPO: \S+ \[[^]]+\], Holm p \S+ \(of 2\)", shown)


def test_the_verdicts_numbers_and_missing_intervals_are_each_written_as_what_they_are(default_run):
    """Primary rows written by hand: each verdict's class (ahead, behind, equivalent, else unresolved), a p at
    0.001 shown as 0.001 and one below it as <0.001, a missing number as –, an infinite bound as too few seeds;
    Table 1's cell without an interval shows its value alone. One model and training set: no prefix per row."""
    config, tables, _ = default_run
    row = tables["paired"][tables["paired"]["family"] == "primary"]
    verdicts = ["ahead", "behind", "equivalent", "not distinguishable", None]
    rows = pd.concat([row.assign(label=f"line{i}", verdict=v) for i, v in enumerate(verdicts)], ignore_index=True)
    rows.loc[0, ["p_holm", "diff_low"]] = [0.001, -float("inf")]
    rows.loc[1, ["p_holm", "diff", "diff_low", "diff_high"]] = [0.0009, float("nan"), float("nan"), float("nan")]
    rows.loc[2, "p_holm"] = float("nan")
    t1 = tables["table1"].copy()
    t1.loc[0, ["average_low", "arith-1"]] = [float("nan"), float("nan")]
    fragment = headline.headline_html(config, {**tables, "paired": rows, "table1": t1}, PNG)
    for i, (verdict, kind) in enumerate(zip(verdicts, ["ahead", "behind", "equivalent", "unresolved", "unresolved"])):
        assert f'<span class="verdict {kind}">{verdict or "–"}</span></li>' in fragment, verdict
        assert f"<li>line{i} − GRPO: " in fragment
    shown = text_of(fragment)
    assert f"line0 − GRPO: {_signed(row['diff'].iloc[0])} [no interval: too few seeds], Holm p 0.001 (of 5)" in shown
    assert "line1 − GRPO: – , Holm p <0.001 (of 5)" in shown and "line2 − GRPO: " in shown
    assert re.search(r"line2 − GRPO: \S+ \[[^]]+\], Holm p – \(of 5\)", shown)
    sft = re.search(r"<tr><td>SFT</td>(.*?)</tr>", fragment).group(1)
    assert sft.startswith(f'<td class="average">{_level(t1.loc[0, "average"])}</td><td class="benchmark">–<br>')
    assert fragment.count('<td class="average">') == len(t1) and fragment.count('<td class="benchmark">') == 5 * len(t1)
    assert "<th>model</th>" not in fragment and "</li><li>line1 − GRPO" in fragment and "</tr><tr><td>GRPO" in fragment
    assert "<h2>Primary comparisons (every line − GRPO; Holm within the family)</h2>" in fragment
    assert "Greedy accuracy per benchmark and their unweighted average, the SFT model and every variant of tiny " \
           "trained on arith. Bars" in fragment
    assert fragment.endswith("(the provenance table, under Tables).</p></section>\n")
    assert headline.headline_html(config, {**tables, "provenance": tables["provenance"].iloc[:0]}, PNG).endswith(
        "</figcaption></figure></section>\n")
    empty = headline.headline_html(config, {**tables, "paired": rows.iloc[:0]}, None)
    assert "</h2><p>No comparison in the primary family (report.primary) yet.</p><p class=\"provenance\">" in empty


def test_a_headline_before_any_result_says_so(default_run):
    config, tables, _ = default_run
    by_variant = tables["results_by_variant"]
    nothing = {**tables, "results": tables["results"].iloc[:0], "table1": tables["table1"].iloc[:0],
               "results_by_variant": by_variant[by_variant["variant"] == "sft"], "paired": tables["paired"].iloc[:0]}
    assert headline.tally(config, nothing) == {"seeds": "no RL seed", "problems": "no benchmark", "models": [],
                                               "datasets": [], "variants": []}
    assert ("Results no model trained on nothing: 0 RL variants, no RL seed each, evaluated on no benchmark. "
            in text_of(headline.headline_html(config, nothing, PNG)))


def test_a_headline_of_several_models_and_training_sets_names_them_in_order(default_run):
    """A second model ("7b") and a training set without a TOST margin: Table 1 gets a model column, each primary
    row its model / training set in the order of the table, the summary every model and set; Figure 1 over the
    mean of training sets says so; without a margin no TOST is quoted."""
    config, tables, _ = default_run
    config = {**config, "report": {**config["report"], "equivalence_margin": {}, "figure1_dataset": "mean"}}
    t1 = pd.concat([tables["table1"], tables["table1"].assign(model="7b")], ignore_index=True)
    row = tables["paired"][tables["paired"]["family"] == "primary"]
    paired = pd.concat([row, row.assign(model="7b", dataset="sums")], ignore_index=True)  # not in sorted order
    results = pd.concat([tables["results"], tables["results"].assign(model="7b", dataset="sums")], ignore_index=True)
    results.loc[results["benchmark"] == "arith-1", "n"] = 50
    results = results[results["benchmark"] != "arith-5"]  # a benchmark not evaluated yet is not counted
    fragment = headline.headline_html(config, {**tables, "table1": t1, "paired": paired, "results": results}, PNG)
    shown = text_of(fragment)
    assert "<th>model</th><th></th><th>average</th>" in fragment
    assert "<tr><td>7b</td><td>SFT</td>" in fragment and "<tr><td>tiny</td><td>GRPO</td>" in fragment
    first, second = shown.index("tiny / arith : recent/trace/0.99 − GRPO"), shown.index("7b / sums : recent/trace/0.99")
    assert first < second and "TOST" not in shown and fragment.count("(of 1): <span class=\"verdict") == 2
    assert shown.startswith(" Results tiny, 7b trained on arith, sums: 2 RL variants, 4 RL seeds each, evaluated on "
                            "arith-1: 50 problems; arith-2: 100 problems; arith-3: 100 problems; arith-4: 100 problems. ")
    caption = text_of(re.search(r"<figcaption>(.*?)</figcaption>", fragment, re.S).group(1))
    assert caption.startswith("Figure 1. Greedy accuracy per benchmark and their unweighted average, Table 1's rows: "
                              "SFT and each method, mean over training sets. Bars: the mean over 4 RL seeds")


def test_the_headline_file_is_written_from_the_tables_and_figure_with_what_made_the_run(default_run, tmp_path):
    """grpo-lambda headline's main: the fragment of the tables' CSV files and Figure 1's PNG, with the commits
    (12 characters, +changes kept) and library versions of the provenance table; a missing figure or table is
    named."""
    config, tables, _ = default_run
    provenance = pd.DataFrame({"commit": ["abcdef1234567890+changes", "0000000000001234", "0000000000001234", None],
                               "torch": ["2.13.0", "2.13.0", None, "2.13.0"], "transformers": ["5.17.0"] * 4,
                               "trl": ["1.16.0", "1.15.0", None, None]})
    folder, figures, out = tmp_path / "tables", tmp_path / "figures", tmp_path / "report" / "headline.html"
    for name, frame in {**tables, "provenance": provenance}.items():  # a model named "7" is a name, not a number
        write_table(frame.assign(model="7") if "model" in frame else frame, folder, name, table_formats(name))
    with pytest.raises(FileNotFoundError, match=r"figure1\.png is missing: .*`grpo-lambda figures`"):
        headline.main(config, folder, figures, out)
    figures.mkdir()
    (figures / "figure1.png").write_bytes(PNG)
    assert headline.main(config, folder, figures, out) == str(out)
    written = out.read_text()
    assert written == headline.headline_html(config, headline.read_tables(folder), PNG)
    assert "Results 7 trained on arith: " in text_of(written)
    assert f'<img alt="Figure 1" src="data:image/png;base64,{base64.b64encode(PNG).decode()}">' in written
    assert ('<p class="provenance">Made by commit 000000000000, abcdef123456+changes; torch 2.13.0; transformers '
            '5.17.0; trl 1.15.0, 1.16.0 (the provenance table, under Tables).</p>') in written
    unknown = headline.headline_html(config, {**tables, "provenance": provenance.assign(commit=None)}, PNG)
    assert "Made by commit unknown; torch 2.13.0" in unknown
    assert '<p class="provenance">' not in headline.headline_html(config, {**tables, "provenance": provenance.iloc[:0]},
                                                                  PNG)
    (folder / "table1.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"table1\.csv is missing: .*`grpo-lambda aggregate`"):
        headline.read_tables(folder)


def test_the_headline_of_a_factorial_study_gives_its_simple_effects(tmp_path):
    config, tables = tables_of(CLAMP_TRACE_RUN, tmp_path)
    assert config["report"]["primary"] == "factorial"
    shown = text_of(headline.headline_html(config, tables, PNG))
    factorial = tables["factorial"]
    primary = factorial[factorial["family"] == "primary"]
    assert sorted(primary["kind"]) == ["simple"] * 4
    for row in primary.to_dict("records"):
        assert (f"{row['effect']}: {_signed(row['estimate'])} [{_signed(row['estimate_low'])}, "
                f"{_signed(row['estimate_high'])}], Holm p") in shown
        assert f"(of 4), TOST (±0.05) Holm p {_p(row['p_equivalence_holm'])}: {row['verdict']}" in shown
    assert "Primary comparisons (the 2 × 2's simple effects" in shown


def test_table1s_heading_says_what_its_rows_are_over(default_run):
    """One training set: its name, not "mean over training sets"; several: how many, and which."""
    config, tables, fragment = default_run
    assert set(tables["table1"]["datasets"]) == {"arith"}
    headings = re.findall(r"<h2>(Table 1[^<]*)</h2>", fragment)
    assert headings == ["Table 1: accuracy, trained on arith"]
    pooled = {**tables, "table1": tables["table1"].assign(datasets="arith gsm8k")}
    assert "<h2>Table 1: accuracy, mean over the 2 training sets (arith, gsm8k)</h2>" in \
        headline.headline_html(config, pooled, PNG)


def test_the_docs_show_what_the_default_run_prints_at_its_end(default_run):
    """docs/running.md's example of a run's last lines is the default run's headline as text, as a run prints it."""
    config, tables, _ = default_run
    docs = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    example = re.search(r"## What a run prints.*?```text\n(.*?)```", docs, re.S).group(1)
    assert example == (headline.headline_text(config, tables) + "Tables: results/tables/table1.md (every table: "
                       "results/tables/). Report: snakemake --report results/report.html\n")


def test_caption_counts_say_what_the_config_fixes():
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    counts = caption_counts(config)
    assert counts["seeds"] == "4 RL seeds (0, 1, 2, 3)"
    assert counts["problems"] == "5 benchmarks of 100 problems each"
    assert counts["level"] == "95%" and "w = 1 − 1/(1 + n/50)" in counts["smoothing"]
    mixed = {**config, "seeds": [7], "report": {"level": 0.9, "smoothing": 0.6},
             "benchmarks": {"a": {"source": "file", "limit": 30}, "b": {"source": "synthetic", "n": 40}}}
    counts = caption_counts(mixed)
    assert counts["seeds"] == "1 RL seed (7)" and counts["level"] == "90%" and "weight 0.6" in counts["smoothing"]
    assert counts["problems"] == "a: at most 30 problems; b: 40 problems"
    hub = {**mixed, "benchmarks": {"aime24": {"source": "hub"}, "b": {"source": "synthetic", "n": 40}}}
    assert caption_counts(hub)["problems"].startswith("every problem of each of the 2 benchmarks")


def test_a_report_after_a_partial_run_says_what_is_missing(tmp_path):
    """Nothing made yet: `snakemake --report` writes a report of what exists; its front page and one line of its
    output name what is not made yet, the rule that makes it and the commands that finish the study and remake
    the report; Snakemake's warning per missing file is gone."""
    (tmp_path / "results").mkdir()
    configfile = ROOT / "config" / "config.yaml"
    done = report_screen.write_report(ROOT / "Snakefile", tmp_path, configfile)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Missing metadata" not in done.stderr
    said = [line for line in done.stderr.splitlines() if "Not made yet" in line]
    assert said == ["The study is not finished; the report shows what exists. Not made yet: tables (rule aggregate, "
                    "once every cell is evaluated; `grpo-lambda status` lists the cells); figures (rule figures); "
                    f"headline (rule headline). Finish it with `snakemake --cores N --configfile {configfile}`, then "
                    f"`snakemake --report results/report.html --configfile {configfile}`."]
    page = (tmp_path / "results" / "report.html").read_text(encoding="utf-8")
    description = text_of(json.loads(re.search(r"var workflow_desc = (.*);$", page, re.M).group(1)))
    assert "This study is not finished: the report shows what exists. Not made yet: the tables (rule aggregate" \
        in description
    assert "the figures (rule figures" in description and "the headline (rule headline" in description
    assert "Left, under Results" not in description and report_results(page) == {}  # no menu, and none named


def description_of(page: str) -> str:
    """The report's front page as text, without the spaces its code spans leave before punctuation."""
    text = text_of(json.loads(re.search(r"var workflow_desc = (.*);$", page, re.M).group(1)))
    return re.sub(r"\s+([:.,;)])", r"\1", text)


def one_cell_evaluated(results: Path, config: dict) -> dict[str, dict[str, float]]:
    """The evaluation summaries (as `grpo-lambda evaluate` writes them) of the first RL cell's final model and of
    its SFT model, with known accuracies; returns them by model folder and benchmark."""
    model, dataset, variant = next(iter(config["models"])), next(iter(config["datasets"])), "grpo"
    folders = {f"{model}/{dataset}/{variant}/seed0": (variant, 0, 0.6), f"{model}/{dataset}/sft": ("sft", None, 0.2)}
    accuracies = {}
    for folder, (name, seed, base) in folders.items():
        out = results / folder / "eval" / "final"
        out.mkdir(parents=True)
        for i, benchmark in enumerate(config["benchmarks"]):
            accuracy = base + 0.011 * i
            accuracies.setdefault(folder, {})[benchmark] = accuracy
            (out / f"{benchmark}.jsonl").write_text("")
            (out / f"{benchmark}.json").write_text(json.dumps(
                {"model": model, "dataset": dataset, "variant": name, "seed": seed, "step": "final",
                 "benchmark": benchmark, "n": 100, "accuracy": accuracy}))
    return accuracies


@pytest.fixture(scope="module")
def nested_partial_report(tmp_path_factory):
    """A nested study (its results under results/ct-nested, set by its config file) after one cell: its report."""
    root = tmp_path_factory.mktemp("nested")
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["results"] = "results/ct-nested"
    configfile = root / "ct-nested.yaml"
    configfile.write_text(yaml.safe_dump(config, allow_unicode=True))
    accuracies = one_cell_evaluated(root / "results" / "ct-nested", config)
    done = report_screen.write_report(ROOT / "Snakefile", root, configfile, report="results/ct-nested/report.html")
    assert done.returncode == 0, done.stderr[-3000:]
    return root, configfile, accuracies, done.stderr


def test_a_partial_report_shows_each_evaluated_models_accuracy(nested_partial_report):
    """The front page lists each model evaluated so far with its accuracy per benchmark; each summary is a file of
    the report (category Cells, under Results) labelled with its accuracy; the text names only the menus there."""
    root, _, accuracies, _ = nested_partial_report
    page = (root / "results" / "ct-nested" / "report.html").read_text(encoding="utf-8")
    description = description_of(page)
    for folder, by_benchmark in accuracies.items():
        line = ", ".join(f"{benchmark} {accuracy:.3f}" for benchmark, accuracy in sorted(by_benchmark.items()))
        assert f"{folder}: {line}" in description, (folder, description[:1500])
    shown = report_results(page)
    labels = {(entry["labels"]["cell"], entry["labels"]["benchmark"]): entry["labels"]["accuracy"]
              for entry in shown.values()}
    assert labels == {(folder, benchmark): f"{accuracy:.3f}" for folder, by_benchmark in accuracies.items()
                      for benchmark, accuracy in by_benchmark.items()}
    categories = json.loads(re.search(r'<script id="categories">\s*var categories = (.*);$', page, re.M).group(1))
    assert set(categories) == {"Cells"}
    assert "Left, under Results: each model evaluated so far (Cells), each with its caption." in description
    assert not re.search(r"\((Tables|Published|Figures|Summary)\)", description)


def test_a_nested_studys_partial_report_names_its_own_commands(nested_partial_report):
    root, configfile, _, stderr = nested_partial_report
    description = description_of((root / "results" / "ct-nested" / "report.html").read_text(encoding="utf-8"))
    report = f"snakemake --report results/ct-nested/report.html --configfile {configfile}"
    assert f"then make this report again with {report}." in description
    assert f"Finish the study with snakemake --cores N --configfile {configfile} (it runs" in description
    assert "snakemake --report results/report.html" not in description
    assert f"Finish it with `snakemake --cores N --configfile {configfile}`, then `{report}`." in stderr


@needs_chromium
def test_a_partial_reports_message_is_on_the_first_screen(nested_partial_report, tmp_path):
    """In Chromium at 1400 × 900 and in a tall window: the message and the evaluated models' accuracies, at the
    top, not centred beside the job graph."""
    root, _, accuracies, _ = nested_partial_report
    for height in (900, 2000):
        seen = report_screen.first_screen(root / "results" / "ct-nested" / "report.html", height=height)
        texts = [text.strip() for text in seen["texts"]]
        assert "This study is not finished: the report shows what exists." in texts, texts[:40]
        assert all(any(text.startswith(f"{folder}") for text in texts) or f"{folder}" in texts for folder in accuracies)


def report_results(page: str) -> dict:
    """The files a Snakemake report shows, by path: name, labels, caption and its job's properties."""
    return json.loads(re.search(r'<script id="results">\s*var results = (.*);$', page, re.M).group(1))


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    """The report of the default run's published raw files with every table and figure (no training)."""
    root = tmp_path_factory.mktemp("report")
    config = report_screen.published_tree(DEFAULT_RUN, root / "results", every_figure=True)
    made = report_screen.write_report(ROOT / "Snakefile", root, DEFAULT_RUN / "config.yaml")
    assert made.returncode == 0, made.stderr[-3000:]
    return config, root, report_results((root / "results" / "report.html").read_text(encoding="utf-8"))


def test_the_report_leaves_out_what_shows_nothing(full_report):
    """A header-only table and a figure that is only its note stay on disk and out of the report."""
    config, root, shown = full_report
    names = {entry["name"] for entry in shown.values()}
    assert config["rl"]["beta"] == 0 and not config["report"].get("figure3_paper_cells")
    empty = ["factorial.csv", "missing.csv", "table1_published.csv", "appendix_e_published.csv"]
    for name in empty:
        assert pd.read_csv(root / "results" / "tables" / name).empty, name
    for name in ["kl", "appendix_d"]:  # β = 0: no KL logged; Appendix D: report.figure3_paper_cells is off
        drawn = json.loads((root / "results" / "figures" / f"{name}.json").read_text(encoding="utf-8"))
        assert not any(panel["series"] for panel in drawn["panels"]), name
        assert (root / "results" / "figures" / f"{name}.png").is_file()
    assert not names & {*empty, "kl.png", "appendix_d.png"}, sorted(names)
    # what has rows or draws something is all there
    assert {"table1.csv", "paired.csv", "results.csv", "figure1.png", "figure4.png", "reward_curves.png",
            "headline.html"} <= names


def test_the_reports_file_panels_list_no_settings(full_report):
    """Each file's panel lists its job's parameters: a digest of the study, not the whole config as escaped
    JSON (the figures' also list the counts their captions are rendered with)."""
    _, _, shown = full_report
    for path, entry in shown.items():
        params = entry["job_properties"]["params"]
        assert len(params) < 800 and "models" not in params and "variants" not in params, (path, params[:300])
    rules = {entry["job_properties"]["rule"] for entry in shown.values()}
    assert rules == {"aggregate", "figures", "headline"}
    digests = {re.search(r"study=(\w+)", entry["job_properties"]["params"]).group(1) for entry in shown.values()}
    assert len(digests) == 1 and len(digests.pop()) == 16


def run_headline(root: Path) -> subprocess.CompletedProcess:
    """`snakemake` making the headline again from the tables in ``root``/results (no other rule may run)."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(root),
               "--configfile", str(DEFAULT_RUN / "config.yaml"), "--cores", "1", "--allowed-rules", "headline",
               "--forcerun", "headline", "--", "headline"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_a_run_that_made_the_tables_ends_with_their_headline(full_report, tmp_path):
    """The end of the run: Table 1's averages with their intervals, the primary verdict with its numbers, and
    where the tables and the report are; the job's block names a few of its 20 input files, not all; a failed
    job's block still names its log."""
    config, made, _ = full_report
    shutil.copytree(made / "results", tmp_path / "results")
    done = run_headline(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # Snakemake's log is on stderr; the headline, after the last job, alone on stdout
    assert done.stdout.startswith("\nResults: tiny trained on arith: 2 RL variants, 4 RL seeds each")
    end = done.stdout.splitlines()[2:]
    t1 = pd.read_csv(tmp_path / "results" / "tables" / "table1.csv")
    assert end[0] == "Table 1: accuracy, trained on arith (the average over benchmarks [interval]):"
    for line, row in zip(end[1:], t1.to_dict("records")):
        assert line.split() == [*row["label"].split(), _level(row["average"]),
                                f"[{_level(row['average_low'])},", f"{_level(row['average_high'])}]"]
    gap = pd.read_csv(tmp_path / "results" / "tables" / "paired.csv").query("family == 'primary'").iloc[0]
    assert end[5] == (f"  recent/trace/0.99 − GRPO: {_signed(gap['diff'])} [{_signed(gap['diff_low'])}, "
                      f"{_signed(gap['diff_high'])}], Holm p {_p(gap['p_holm'])} (of 1), TOST (±0.05) Holm p "
                      f"{_p(gap['p_equivalence_holm'])}: {gap['verdict']}")
    assert end[6] == (f"Tables: results/tables/table1.md (every table: results/tables/). Report: snakemake --report "
                      f"results/report.html --configfile {DEFAULT_RUN / 'config.yaml'}")
    assert len(end) == 7
    [inputs] = [line for line in done.stderr.splitlines() if line.startswith("    input: ")]
    assert inputs.endswith(", … 17 more") and len(inputs) < 300
    # a failed job: Snakemake's error block, whole, with the job's log; no headline
    (tmp_path / "results" / "tables" / "paired.csv").write_text("not,the,table\n")
    done = run_headline(tmp_path)
    assert done.returncode != 0 and "Results: " not in done.stdout
    assert "Error in rule headline:" in done.stderr and "log: results/logs/headline.log" in done.stderr


def test_the_default_runs_script_ends_with_the_headline_and_where_things_are(tmp_path):
    """scripts/run_default.sh, with the setup and Snakemake stood in for (the stand-in writes the headline's text
    as the headline rule does): its last lines are the headline, then where the tables and the report are."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "run_default.sh", tmp_path / "scripts")
    (tmp_path / "scripts" / "setup.sh").write_text("PATH=\"$PWD/bin:$PATH\"\n")
    (tmp_path / "bin").mkdir()
    headline_text = "Results: a study.\nTable 1: accuracy, trained on arith:\n  GRPO  0.712 [0.660, 0.759]\n"
    stand_in = tmp_path / "bin" / "snakemake"
    stand_in.write_text("#!/usr/bin/env bash\necho \"snakemake $*\"\nmkdir -p results/report\n"
                        f"printf '{headline_text}' > results/report/headline.txt\n")
    stand_in.chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "run_default.sh")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["snakemake --cores 2", "snakemake --report results/report.html"]
    assert lines[-5:-2] == headline_text.splitlines()[:3]
    assert lines[-2] == "Tables: results/tables/table1.md (every table: results/tables/). Report: results/report.html."
    assert lines[-1].startswith("The pipeline took ")


@needs_chromium
def test_the_probe_counts_only_what_is_on_the_screen_and_uncovered(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html><body style='margin:0'><p>on screen</p><p style='margin-top:1200px'>below the screen</p>"
                    "<p style='position:absolute;top:300px'>covered</p>"
                    "<div style='position:fixed;top:280px;left:0;width:100%;height:60px;background:white'></div>"
                    "</body></html>")
    seen = report_screen.first_screen(page)
    assert (seen["width"], seen["height"]) == (1400, 900)
    assert [text.strip() for text in seen["texts"]] == ["on screen"]


@pytest.mark.slow
@needs_chromium
def test_the_reports_first_screen_shows_the_headline(tmp_path):
    """The report of the default run's published raw files (tables rebuilt, Figure 1 drawn, no training), as
    Snakemake writes it, in Chromium at 1400 × 900: Table 1 with its intervals, the primary verdict and Figure 1
    with its caption, whole and uncovered, before any scroll; the workflow's description below them."""
    config = report_screen.published_tree(DEFAULT_RUN, tmp_path / "results")
    made = report_screen.write_report(ROOT / "Snakefile", tmp_path, DEFAULT_RUN / "config.yaml")
    assert made.returncode == 0, made.stderr[-3000:]
    seen = report_screen.first_screen(tmp_path / "results" / "report.html")
    texts = [text.strip() for text in seen["texts"]]
    t1 = pd.read_csv(tmp_path / "results" / "tables" / "table1.csv")
    for row in t1.to_dict("records"):
        assert row["label"] in texts
        for target in ["average", *config["benchmarks"]]:
            assert _level(row[target]) in texts, (row["label"], target)
            assert f"[{_level(row[target + '_low'])}, {_level(row[target + '_high'])}]" in texts
    paired = pd.read_csv(tmp_path / "results" / "tables" / "paired.csv")
    gap = paired[paired["family"] == "primary"].iloc[0]
    assert any(text.startswith(f"recent/trace/0.99 − GRPO: {_signed(gap['diff'])}") for text in texts), texts
    assert gap["verdict"] in texts
    [figure] = [image for image in seen["images"] if image["alt"] == "Figure 1"]
    assert figure["loaded"] and figure["shown"] and figure["right"] - figure["left"] > 600
    assert any(text.startswith("Figure 1.") and "4 RL seeds" in text for text in texts)
    assert not any(text.startswith("Every number can be traced") for text in texts)  # the description: below
    # Figure 1's own caption in the report, as Snakemake renders it with the figures rule's counts
    page = (tmp_path / "results" / "report.html").read_text(encoding="utf-8")
    assert "the mean over 4 RL seeds (0, 1, 2, 3) of each variant" in page
    assert "on 5 benchmarks of 100 problems each." in page
    assert any(text.startswith("tiny trained on arith: 2 RL variants, 4 RL seeds each") for text in texts)
    # Without the headline's style, Snakemake's layout centres the description in a 32rem column: its top is
    # cut off above the screen (out of scroll's reach) and Figure 1 is drawn at a third of the width.
    fragment = tmp_path / "results" / "report" / "headline.html"
    fragment.write_text(re.sub(r"<style>.*?</style>", "", fragment.read_text(encoding="utf-8"), flags=re.S))
    shutil.move(tmp_path / "results" / "report.html", tmp_path / "styled.html")
    assert report_screen.write_report(ROOT / "Snakefile", tmp_path, DEFAULT_RUN / "config.yaml").returncode == 0
    unstyled = report_screen.first_screen(tmp_path / "results" / "report.html")
    assert not any(text.strip().startswith("tiny trained on arith") for text in unstyled["texts"])
    [small] = [image for image in unstyled["images"] if image["alt"] == "Figure 1"]
    assert small["right"] - small["left"] < 600
