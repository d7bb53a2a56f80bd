# Tables and figures from the evaluation files; `snakemake --report results/report.html` collects them
# (CSV tables and PNG figures, each with its caption; Markdown, LaTeX and PDF copies sit beside them).
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
        settings=lambda w: json.dumps(config, sort_keys=True),
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
        "grpo-lambda aggregate --settings {params.settings:q} --results {params.results:q} --out {params.out:q} > {log:q} 2>&1"


# Drawn from the tables' CSV files: the figures show the tables' numbers and compute none of their own.
rule figures:
    input:
        tables=expand(f"{RESULTS}/tables/{{name}}.csv", name=TABLES),
    output:
        reported("figures", FIGURES, "png", "../report/figures.rst", "Figures"),
        expand(f"{RESULTS}/figures/{{name}}.pdf", name=FIGURES),
    params:
        settings=lambda w: json.dumps(config, sort_keys=True),
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
        "grpo-lambda figures --settings {params.settings:q} --tables {params.tables:q} --out {params.out:q}"
        " > {log:q} 2>&1"
