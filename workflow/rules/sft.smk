rule sft:
    input:
        data=f"{RESULTS}/data/{{dataset}}.jsonl",
        base=base_model_input,
    output:
        directory(f"{RESULTS}/{{model}}/{{dataset}}/sft/model"),
    params:
        launch=launcher,
        settings=lambda w: settings("sft", model=w.model, dataset=w.dataset),
        base=base_model,
    conda:
        "../../envs/conda-gpu.yaml"
    log:
        f"{RESULTS}/logs/sft/{{model}}/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/logs/sft/{{model}}/{{dataset}}.benchmark.tsv"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=0,
    shell:
        "{params.launch:q} sft --settings {params.settings:q} --base {params.base:q} --data {input.data:q}"
        " --out {output:q} --threads {threads:q} > {log:q} 2>&1"
