# Helpers shared by the rules: config validation, the grid of cells, paths and per-cell settings.
import json
import os
from pathlib import Path

from grpo_lambda import aggregate, figures
from grpo_lambda import config as study

# Validated (and completed with the schema's defaults) before any job is planned: a bad key or value
# stops here with a message that names it.
config.update(study.validate(config, source="config"))

RESULTS = config["results"]
REPOSITORY = Path(workflow.main_snakefile).parent
MODELS = list(config["models"])
DATASETS = list(config["datasets"])
BENCHMARKS = list(config["benchmarks"])
VARIANTS = list(config["variants"])
CELLS = study.rl_cells(config)


def alternatives(names):
    return "|".join(re.escape(name) for name in names)


wildcard_constraints:
    model=alternatives(MODELS),
    dataset=alternatives(DATASETS),
    variant=alternatives(VARIANTS),
    benchmark=alternatives(BENCHMARKS),
    seed=r"\d+",
    step=r"final|\d+",


def settings(stage, **cell):
    """The cell's settings as JSON: the rule's params, so a change reruns only the cells it touches."""
    return json.dumps(study.stage_settings(config, stage, **cell), sort_keys=True)


def launcher(w, resources):
    """The CLI, or the CLI under ``accelerate launch`` across the GPUs a job was given, as a list of
    words (each quoted by ``{params.launch:q}``)."""
    gpus = int(resources.get("gpu", 0) or 0)
    if gpus <= 1:
        return ["grpo-lambda"]
    plan = config["models"][w.model]["distributed"]
    return ["accelerate", "launch", "--config_file", f"{REPOSITORY}/envs/accelerate/{plan}.yaml",
            "--num_processes", str(gpus), "-m", "grpo_lambda.cli"]


def cell_dir(w):
    return f"{RESULTS}/{w.model}/{w.dataset}/{w.variant}/seed{w.seed}"


def base_model_input(w):
    """The tiny model is built by a rule; a hub model or local path is read where it is."""
    if config["models"][w.model]["source"] == "tiny":
        return f"{RESULTS}/models/{w.model}"
    return []


def base_model(w):
    source = config["models"][w.model]["source"]
    return f"{RESULTS}/models/{w.model}" if source == "tiny" else source


def evaluated_checkpoint(w):
    if w.step == "final":
        return f"{cell_dir(w)}/model"
    return f"{cell_dir(w)}/checkpoints/step-{w.step}"


def sft_eval_files(ext="json"):
    return [
        f"{RESULTS}/{model}/{dataset}/sft/eval/final/{benchmark}.{ext}"
        for model in MODELS
        for dataset in study.model_datasets(config, model)
        for benchmark in BENCHMARKS
    ]


def rl_eval_files(ext="json"):
    return [
        f"{RESULTS}/{c['model']}/{c['dataset']}/{c['variant']}/seed{c['seed']}/eval/{step}/{benchmark}.{ext}"
        for c in CELLS
        for step in study.model_checkpoints(config, c["model"]) + ["final"]
        for benchmark in BENCHMARKS
    ]


def train_logs():
    return [
        f"{RESULTS}/{c['model']}/{c['dataset']}/{c['variant']}/seed{c['seed']}/train_log.csv"
        for c in CELLS
    ]


def final_targets():
    return rules.aggregate.output + rules.figures.output


# The files the report shows. Snakemake's parser reads a line that starts with `report(` as the
# report directive, hence the alias.
snakemake_report = report
TABLES = aggregate.table_names(config)
FIGURES = [name.rsplit(".", 1)[0] for name in figures.output_files(config) if name.endswith(".png")]


def reported(folder, names, ext, caption, category):
    return [
        snakemake_report(f"{RESULTS}/{folder}/{name}.{ext}", caption=caption, category=category, labels={"name": name})
        for name in names
    ]
