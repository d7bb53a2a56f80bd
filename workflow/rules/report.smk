# Tables and figures from the evaluation files; `snakemake --report results/report.html` collects them.
rule aggregate:
    input:
        rl=rl_eval_files("jsonl"),
        sft=sft_eval_files("jsonl"),
        logs=train_logs(),
    output:
        report(
            directory(f"{RESULTS}/tables"),
            patterns=["{name}.csv"],
            caption="../report/tables.rst",
            category="Tables",
        ),
    params:
        settings=lambda w: json.dumps(config, sort_keys=True),
    log:
        f"{RESULTS}/logs/aggregate.log",
    benchmark:
        f"{RESULTS}/logs/aggregate.benchmark.tsv"
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "grpo-lambda aggregate --settings {params.settings:q} --results {RESULTS} --out {output} > {log} 2>&1"


rule figures:
    input:
        rl=rl_eval_files("jsonl"),
        sft=sft_eval_files("jsonl"),
        logs=train_logs(),
    output:
        report(
            directory(f"{RESULTS}/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
    params:
        settings=lambda w: json.dumps(config, sort_keys=True),
    log:
        f"{RESULTS}/logs/figures.log",
    benchmark:
        f"{RESULTS}/logs/figures.benchmark.tsv"
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "grpo-lambda figures --settings {params.settings:q} --results {RESULTS} --out {output} > {log} 2>&1"
