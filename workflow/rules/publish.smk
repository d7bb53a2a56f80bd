# Opt-in: `snakemake publish_all` (or one cell's published.json) pushes each RL cell's final model, with a
# model card, to its own hub repo (config publish:, grpo_lambda/publish.py). A local rule, run online on
# the submitting machine, where every other job runs offline; a missing token stops the plan.
rule publish:
    input:
        cell=f"{RESULTS}/{layout.done('{model}', '{dataset}', '{variant}', '{seed}')}",
        token=hub_token,
    output:
        f"{RESULTS}/{layout.published('{model}', '{dataset}', '{variant}', '{seed}')}",
    params:
        settings=lambda w: settings("publish", model=w.model, dataset=w.dataset, variant=w.variant),
        cell=cell_dir,
    log:
        f"{RESULTS}/logs/publish/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/logs/publish/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}.benchmark.tsv"
    resources:
        mem_mb=2000,
        runtime=120,
    localrule: True
    shell:
        "env -u HF_HUB_OFFLINE -u HF_DATASETS_OFFLINE grpo-lambda publish --settings {params.settings:q}"
        " --cell {params.cell:q} --seed {wildcards.seed:q} --out {output:q} > {log:q} 2>&1"


rule publish_all:
    input:
        [f"{RESULTS}/{layout.published(c['model'], c['dataset'], c['variant'], c['seed'])}" for c in CELLS],
    localrule: True
