# One job evaluates one checkpoint on every benchmark: the model (or vLLM engine) loads once.
# Asking for one benchmark's file runs the job of its checkpoint and nothing else. With the hf backend the
# final model is evaluated by its train job (rl.smk), and this rule evaluates the checkpoints.
rule evaluate:
    wildcard_constraints:
        step=EVALUATE_RULE_STEPS,
    input:
        model=f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/model",
        bench=expand(f"{RESULTS}/bench/{{benchmark}}.jsonl", benchmark=BENCHMARKS),
    output:
        expand(
            f"{RESULTS}/{{{{model}}}}/{{{{dataset}}}}/{{{{variant}}}}/seed{{{{seed}}}}/eval/{{{{step}}}}/{{benchmark}}.{{ext}}",
            benchmark=BENCHMARKS,
            ext=["jsonl", "json"],
        ),
    params:
        settings=lambda w: settings("evaluate", model=w.model, dataset=w.dataset, variant=w.variant),
        checkpoint=evaluated_checkpoint,
        out_dir=lambda w: f"{cell_dir(w)}/eval/{w.step}",
    log:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/{{step}}.log",
    benchmark:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/{{step}}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    shell:
        "grpo-lambda evaluate --settings {params.settings:q} --checkpoint {params.checkpoint:q}"
        " --bench {input.bench:q} --out-dir {params.out_dir:q}"
        " --seed {wildcards.seed:q} --step {wildcards.step:q} --threads {threads:q} > {log:q} 2>&1"


# The SFT model is the baseline every RL cell is compared with. A model's shared SFT model (sft.data
# open_r1) is evaluated under each training set's folder, so that every cell's baseline is where tables read it.
rule evaluate_sft:
    input:
        model=sft_model,
        bench=expand(f"{RESULTS}/bench/{{benchmark}}.jsonl", benchmark=BENCHMARKS),
    output:
        expand(
            f"{RESULTS}/{layout.sft_evaluation('{{model}}', '{{dataset}}', '{benchmark}', '{ext}')}",
            benchmark=BENCHMARKS,
            ext=["jsonl", "json"],
        ),
    params:
        settings=lambda w: settings("evaluate", model=w.model, dataset=w.dataset, variant="sft"),
        out_dir=lambda w: f"{RESULTS}/{layout.sft(w.model, w.dataset)}/eval/final",
    log:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/sft.log",
    benchmark:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/sft.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    shell:
        "grpo-lambda evaluate --settings {params.settings:q} --checkpoint {input.model:q}"
        " --bench {input.bench:q} --out-dir {params.out_dir:q} --threads {threads:q} > {log:q} 2>&1"


# sft.seeds: each SFT model of a condition is evaluated in its own folder.
use rule evaluate_sft as evaluate_sft_seeded with:
    input:
        model=sft_model,
        bench=expand(f"{RESULTS}/bench/{{benchmark}}.jsonl", benchmark=BENCHMARKS),
    output:
        expand(
            f"{RESULTS}/{layout.sft_evaluation('{{model}}', '{{dataset}}', '{benchmark}', '{ext}', '{{sft_seed}}')}",
            benchmark=BENCHMARKS,
            ext=["jsonl", "json"],
        ),
    params:
        settings=lambda w: settings("evaluate", model=w.model, dataset=w.dataset, variant="sft"),
        out_dir=lambda w: f"{RESULTS}/{layout.sft(w.model, w.dataset, w.sft_seed)}/eval/final",
    log:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/sft-seed{{sft_seed}}.log",
    benchmark:
        f"{RESULTS}/logs/evaluate/{{model}}/{{dataset}}/sft-seed{{sft_seed}}.benchmark.tsv"
