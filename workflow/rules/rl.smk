# RL training of one cell, and with the hf backend the final model's evaluation (FINAL_EVALUATED_IN_TRAIN).
# Its resume/ and checkpoints/ folders are not declared outputs, so Snakemake never deletes them: a
# restarted job resumes from the newest checkpoint in resume/. The benchmark files are its inputs then, so a
# changed or added benchmark reruns every train job: each finds its cell trained in resume/ (same settings)
# and only evaluates, on the training resources its rule asks for. The files of the user's own code the cell
# trains with (a reward or advantage estimator written module:function) are its inputs too: an edit reruns
# exactly the cells that use them, and their fingerprint starts them afresh.
rule train:
    input:
        sft=sft_model,
        data=f"{RESULTS}/data/{{dataset}}.jsonl",
        band=band_check,
        bench=final_evaluation_inputs,
        code=user_code_inputs,
    output:
        model=directory(f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/model"),
        train_log=f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/train_log.csv",
        evaluation=final_evaluation_outputs(),
    params:
        launch=launcher,
        settings=lambda w: settings("train", model=w.model, dataset=w.dataset, variant=w.variant),
        cell=cell_dir,
        evaluation=final_evaluation_options,
    log:
        f"{RESULTS}/logs/train/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}.log",
    benchmark:
        f"{RESULTS}/logs/train/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}.benchmark.tsv"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=240,
        gpu=0,
        # Several nodes (models.X.nodes): one task per node; tasks_per_gpu 0 keeps the SLURM plugin
        # from reading tasks as tasks per GPU.
        nodes=model_nodes,
        tasks=model_nodes,
        tasks_per_gpu=0,
    shell:
        "{params.launch:q} train --settings {params.settings:q} --base {input.sft:q} --data {input.data:q}"
        " --cell {params.cell:q} --seed {wildcards.seed:q} --threads {threads:q}{params.evaluation} > {log:q} 2>&1"


# A horizon's RL starts only once its SFT model's greedy accuracy on the horizon's own suite lies in the
# declared band: outside it the horizon's effect would be measured at a floor or a ceiling.
rule check_band:
    input:
        lambda w: f"{RESULTS}/{layout.sft_evaluation(w.model, w.dataset, BANDED[w.dataset], 'json')}",
    output:
        f"{RESULTS}/{layout.sft('{model}', '{dataset}')}/band.json",
    params:
        band=lambda w: " ".join(str(x) for x in HORIZON["band"]),
    log:
        f"{RESULTS}/logs/check_band/{{model}}/{{dataset}}.log",
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
        gpu=0,
    shell:
        "grpo-lambda check-band --eval {input:q} --band {params.band} --out {output:q} > {log:q} 2>&1"


use rule check_band as check_band_seeded with:
    input:
        lambda w: f"{RESULTS}/{layout.sft_evaluation(w.model, w.dataset, BANDED[w.dataset], 'json', w.sft_seed)}",
    output:
        f"{RESULTS}/{layout.sft('{model}', '{dataset}', '{sft_seed}')}/band.json",
    log:
        f"{RESULTS}/logs/check_band/{{model}}/{{dataset}}/seed{{sft_seed}}.log",
