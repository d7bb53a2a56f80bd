# One checkpoint on one benchmark per job: a single cell's file can be asked for on its own.
rule evaluate:
    input:
        model=f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/model",
        bench=f"{RESULTS}/bench/{{benchmark}}.jsonl",
    output:
        jsonl=f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/eval/{{step}}/{{benchmark}}.jsonl",
        json=f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/eval/{{step}}/{{benchmark}}.json",
    params:
        settings=lambda w: settings(
            "evaluate", model=w.model, dataset=w.dataset, variant=w.variant, benchmark=w.benchmark
        ),
        checkpoint=evaluated_checkpoint,
    log:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/{{step}}/{{benchmark}}.log",
    benchmark:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/{{step}}/{{benchmark}}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    shell:
        "grpo-lambda evaluate --settings {params.settings:q} --checkpoint {params.checkpoint}"
        " --bench {input.bench} --out-jsonl {output.jsonl} --out-json {output.json}"
        " --seed {wildcards.seed} --step {wildcards.step} --threads {threads} > {log} 2>&1"


# The SFT model is the baseline every RL cell is compared with.
rule evaluate_sft:
    input:
        model=f"{RESULTS}/{{model}}/{{dataset}}/sft/model",
        bench=f"{RESULTS}/bench/{{benchmark}}.jsonl",
    output:
        jsonl=f"{RESULTS}/{{model}}/{{dataset}}/sft/eval/final/{{benchmark}}.jsonl",
        json=f"{RESULTS}/{{model}}/{{dataset}}/sft/eval/final/{{benchmark}}.json",
    params:
        settings=lambda w: settings(
            "evaluate", model=w.model, dataset=w.dataset, variant="sft", benchmark=w.benchmark
        ),
    log:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/sft/{{benchmark}}.log",
    benchmark:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/sft/{{benchmark}}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    shell:
        "grpo-lambda evaluate --settings {params.settings:q} --checkpoint {input.model}"
        " --bench {input.bench} --out-jsonl {output.jsonl} --out-json {output.json}"
        " --threads {threads} > {log} 2>&1"
