# Tables and figures from the evaluation files; `snakemake --report results/report.html` collects them
# (CSV tables and PNG figures, each with its caption; Markdown, LaTeX and PDF copies sit beside them).
from grpo_lambda import aggregate, figures

snakemake_report = report

TABLES = aggregate.table_names(config)
FIGURES = [name.rsplit(".", 1)[0] for name in figures.output_files(config) if name.endswith(".png")]


def reported(folder, names, ext, caption, category):
    """Files for the report, one per name; Snakemake's parser takes a line starting with report( as a directive."""
    return [
        snakemake_report(f"{RESULTS}/{folder}/{name}.{ext}", caption=caption, category=category, labels={"name": name})
        for name in names
    ]


rule aggregate:
    input:
        rl=rl_eval_files("jsonl"),
        sft=sft_eval_files("jsonl"),
        logs=train_logs(),
    output:
        reported("tables", [t for t in TABLES if not t.endswith("_published")], "csv", "../report/tables.rst", "Tables"),
        reported("tables", [t for t in TABLES if t.endswith("_published")], "csv", "../report/published.rst", "Published"),
        expand(f"{RESULTS}/tables/{{name}}.{{ext}}", name=TABLES, ext=["md", "tex"]),
    params:
        settings=lambda w: json.dumps(config, sort_keys=True),
    log:
        f"{RESULTS}/logs/aggregate.log",
    benchmark:
        f"{RESULTS}/logs/aggregate.benchmark.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    shell:
        "grpo-lambda aggregate --settings {params.settings:q} --results {RESULTS} --out {RESULTS}/tables > {log} 2>&1"


rule figures:
    input:
        rl=rl_eval_files("jsonl"),
        sft=sft_eval_files("jsonl"),
        logs=train_logs(),
    output:
        reported("figures", FIGURES, "png", "../report/figures.rst", "Figures"),
        expand(f"{RESULTS}/figures/{{name}}.pdf", name=FIGURES),
    params:
        settings=lambda w: json.dumps(config, sort_keys=True),
    log:
        f"{RESULTS}/logs/figures.log",
    benchmark:
        f"{RESULTS}/logs/figures.benchmark.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    shell:
        "grpo-lambda figures --settings {params.settings:q} --results {RESULTS} --out {RESULTS}/figures > {log} 2>&1"
