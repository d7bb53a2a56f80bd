# One RL cell as a target: `snakemake results/tiny/arith/grpo/seed0/done` trains the cell and evaluates
# every checkpoint it keeps, and nothing else. The folder itself cannot be a target: Snakemake refuses an
# output that holds other rules' outputs (ChildIOException), so this file stands for it.
rule cell:
    input:
        model=f"{RESULTS}/{{model}}/{{dataset}}/{{variant}}/seed{{seed}}/model",
        train_log=f"{RESULTS}/{layout.train_log('{model}', '{dataset}', '{variant}', '{seed}')}",
        evaluations=cell_eval_files,
    output:
        touch(f"{RESULTS}/{layout.done('{model}', '{dataset}', '{variant}', '{seed}')}"),
    localrule: True
