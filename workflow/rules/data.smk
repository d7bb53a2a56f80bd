rule build_tiny:
    output:
        directory(f"{RESULTS}/models/{{model}}"),
    params:
        settings=lambda w: settings("build_tiny", model=w.model),
    log:
        f"{RESULTS}/logs/build_tiny/{{model}}.log",
    benchmark:
        f"{RESULTS}/logs/build_tiny/{{model}}.benchmark.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "grpo-lambda build-tiny --settings {params.settings:q} --out {output:q} > {log:q} 2>&1"


rule prepare_dataset:
    input:
        hub=hub_dataset_input,
    output:
        f"{RESULTS}/data/{{dataset}}.jsonl",
    params:
        settings=lambda w: settings("prepare", dataset=w.dataset),
    log:
        f"{RESULTS}/logs/prepare/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/logs/prepare/{{dataset}}.benchmark.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    shell:
        "grpo-lambda prepare --settings {params.settings:q} --out {output:q} > {log:q} 2>&1"


rule prepare_benchmark:
    input:
        hub=hub_dataset_input,
    output:
        f"{RESULTS}/bench/{{benchmark}}.jsonl",
    params:
        settings=lambda w: settings("prepare", benchmark=w.benchmark),
    log:
        f"{RESULTS}/logs/prepare_benchmark/{{benchmark}}.log",
    benchmark:
        f"{RESULTS}/logs/prepare_benchmark/{{benchmark}}.benchmark.tsv"
    resources:
        mem_mb=4000,
        runtime=30,
    shell:
        "grpo-lambda prepare --settings {params.settings:q} --out {output:q} > {log:q} 2>&1"


# The chat SFT set of sft.data open_r1 (rows id, messages), from the hub or its local copy.
rule prepare_sft_set:
    input:
        hub=hub_dataset_input,
    output:
        f"{RESULTS}/data/sft/{{sft_set}}.jsonl",
    params:
        settings=lambda w: settings("prepare_sft_set"),
    log:
        f"{RESULTS}/logs/prepare/sft/{{sft_set}}.log",
    benchmark:
        f"{RESULTS}/logs/prepare/sft/{{sft_set}}.benchmark.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    shell:
        "grpo-lambda prepare --settings {params.settings:q} --out {output:q} > {log:q} 2>&1"
