# Rejection-sampled self-distillation (sft.data: self_distill): the base model's correct samples on
# the training problems become the SFT set; data.json beside it holds the counts.
rule prepare_sft:
    input:
        data=f"{RESULTS}/data/{{dataset}}.jsonl",
        base=sft_base_input,
    output:
        data=f"{RESULTS}/{layout.sft('{model}', '{dataset}')}/data.jsonl",
        counts=f"{RESULTS}/{layout.sft('{model}', '{dataset}')}/data.json",
    params:
        settings=lambda w: settings("prepare_sft", model=w.model, dataset=w.dataset),
        base=base_model,
    log:
        f"{RESULTS}/logs/prepare_sft/{{model}}/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/logs/prepare_sft/{{model}}/{{dataset}}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=0,
    shell:
        "grpo-lambda prepare-sft --settings {params.settings:q} --base {params.base:q} --data {input.data:q}"
        " --out {output.data:q} --counts {output.counts:q} --threads {threads:q} > {log:q} 2>&1"


rule sft:
    input:
        data=sft_data,
        base=sft_base_input,
    output:
        directory(f"{RESULTS}/{layout.sft('{model}', '{dataset}')}/model"),
    params:
        launch=launcher,
        settings=lambda w: settings("sft", model=w.model, dataset=w.dataset),
        base=base_model,
    log:
        f"{RESULTS}/logs/sft/{{model}}/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/logs/sft/{{model}}/{{dataset}}.benchmark.tsv"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=0,
        # Several nodes (models.X.nodes): one task per node; tasks_per_gpu 0 keeps the SLURM plugin
        # from reading tasks as tasks per GPU.
        nodes=model_nodes,
        tasks=model_nodes,
        tasks_per_gpu=0,
    shell:
        "{params.launch:q} sft --settings {params.settings:q} --base {params.base:q} --data {input.data:q}"
        " --out {output:q} --threads {threads:q} > {log:q} 2>&1"


# sft.seeds: several SFT models per model and training set, one per SFT seed, each in its own folder.
use rule sft as sft_seeded with:
    output:
        directory(f"{RESULTS}/{layout.sft('{model}', '{dataset}', '{sft_seed}')}/model"),
    params:
        launch=launcher,
        settings=lambda w: settings("sft", model=w.model, dataset=w.dataset, sft_seed=int(w.sft_seed)),
        base=base_model,
    log:
        f"{RESULTS}/logs/sft/{{model}}/{{dataset}}/seed{{sft_seed}}.log",
    benchmark:
        f"{RESULTS}/logs/sft/{{model}}/{{dataset}}/seed{{sft_seed}}.benchmark.tsv"


# sft.data open_r1: one SFT model per base model on the chat SFT set, shared by its training sets.
rule sft_shared:
    input:
        data=sft_set_file,
        base=sft_base_input,
    output:
        directory(f"{RESULTS}/{layout.sft('{model}', None)}/model"),
    params:
        launch=launcher,
        settings=lambda w: settings("sft", model=w.model),
        base=base_model,
    log:
        f"{RESULTS}/logs/sft/{{model}}.log",
    benchmark:
        f"{RESULTS}/logs/sft/{{model}}.benchmark.tsv"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=0,
        nodes=model_nodes,
        tasks=model_nodes,
        tasks_per_gpu=0,
    shell:
        "{params.launch:q} sft --settings {params.settings:q} --base {params.base:q} --data {input.data:q}"
        " --out {output:q} --threads {threads:q} > {log:q} 2>&1"


use rule sft_shared as sft_shared_seeded with:
    output:
        directory(f"{RESULTS}/{layout.sft('{model}', None, '{sft_seed}')}/model"),
    params:
        launch=launcher,
        settings=lambda w: settings("sft", model=w.model, sft_seed=int(w.sft_seed)),
        base=base_model,
    log:
        f"{RESULTS}/logs/sft/{{model}}/seed{{sft_seed}}.log",
    benchmark:
        f"{RESULTS}/logs/sft/{{model}}/seed{{sft_seed}}.benchmark.tsv"
