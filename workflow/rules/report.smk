# Tables and figures from the evaluation files; `snakemake --report results/report.html` collects them
# (CSV tables and PNG figures, each with its caption; Markdown, LaTeX and PDF copies sit beside them), and
# opens on the headline: Table 1, the primary verdicts and Figure 1 (workflow/report/workflow.rst).
# Their params hold the study's digest, not its settings: a changed study reruns them, and the report's panel
# of each file (which lists its job's params) shows a short digest instead of the whole config as escaped JSON;
# the command reads the settings themselves from STUDY_SETTINGS (common.smk).
rule aggregate:
    input:
        rl=rl_eval_files("jsonl"),
        sft=sft_eval_files("jsonl"),
        logs=train_logs(),
    output:
        reported("tables", [t for t in SHOWN_TABLES if not t.endswith("_published")], "csv",
                 "../report/tables.rst", "Tables"),
        reported("tables", [t for t in SHOWN_TABLES if t.endswith("_published")], "csv",
                 "../report/published.rst", "Published"),
        expand(f"{RESULTS}/tables/{{name}}.csv", name=DATA_TABLES),
        expand(f"{RESULTS}/tables/{{name}}.{{ext}}", name=SHOWN_TABLES, ext=["md", "tex"]),
    params:
        study=STUDY_DIGEST,
        out=lambda w, output: os.path.dirname(output[0]),
        results=lambda w, output: os.path.dirname(os.path.dirname(output[0])),
    log:
        f"{RESULTS}/logs/aggregate.log",
    benchmark:
        f"{RESULTS}/logs/aggregate.benchmark.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    shell:
        "grpo-lambda aggregate --settings {STUDY_SETTINGS:q} --results {params.results:q} --out {params.out:q} > {log:q} 2>&1"


# Drawn from the tables' CSV files: the figures show the tables' numbers and compute none of their own.
rule figures:
    input:
        tables=expand(f"{RESULTS}/tables/{{name}}.csv", name=TABLES),
    output:
        reported("figures", FIGURES, "png", figure_caption, "Figures"),
        expand(f"{RESULTS}/figures/{{name}}.pdf", name=FIGURES),
    params:
        study=STUDY_DIGEST,
        counts=caption_counts(config),  # what the figures' captions say they are computed over
        out=lambda w, output: os.path.dirname(output[0]),
        tables=lambda w, input: os.path.dirname(input.tables[0]),
    log:
        f"{RESULTS}/logs/figures.log",
    benchmark:
        f"{RESULTS}/logs/figures.benchmark.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    shell:
        "grpo-lambda figures --settings {STUDY_SETTINGS:q} --tables {params.tables:q} --out {params.out:q}"
        " > {log:q} 2>&1"


# The report's first screen: Table 1, the declared primary verdicts and Figure 1 with its counts, one HTML
# fragment that the report's front page (workflow/report/workflow.rst) includes.
rule headline:
    input:
        tables=expand(f"{RESULTS}/tables/{{name}}.csv", name=TABLES),
        figure=f"{RESULTS}/figures/figure1.png",
    output:
        html=reported("report", ["headline"], "html", "../report/headline.rst", "Summary"),
        text=HEADLINE_TEXT,  # the same as text, printed at the end of the run that made it (onsuccess)
    params:
        study=STUDY_DIGEST,
        tables=lambda w, input: os.path.dirname(input.tables[0]),
        figures=lambda w, input: os.path.dirname(input.figure),
    log:
        f"{RESULTS}/logs/headline.log",
    benchmark:
        f"{RESULTS}/logs/headline.benchmark.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "grpo-lambda headline --settings {STUDY_SETTINGS:q} --tables {params.tables:q} --figures {params.figures:q}"
        " --out {output.html:q} > {log:q} 2>&1"
