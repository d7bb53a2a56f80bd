# Helpers shared by the rules: config validation, the grid of cells, paths and per-cell settings.
import hashlib
import json
import os
import shlex
import sys
import time
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger as snakemake_logger
from snakemake_interface_logger_plugins.common import LogEvent

from grpo_lambda import fingerprint, job_log, launch, layout, prefetch, report_files
from grpo_lambda import config as study
from grpo_lambda.captions import caption_counts
from grpo_lambda.config.report import report_options
from grpo_lambda.tables import names

# The study as the CLI reads it (grpo_lambda.config.load): the config files read again by the project's
# YAML reader (Snakemake's keeps the last of two equal keys, and reads 3e-5 as text), merged by
# Snakemake's own rule, then --config with each value given its schema type (Snakemake passes
# `rl={max_steps: 5}` as the text '5'). Validated (and completed with the schema's defaults) before any
# job is planned: a bad key or value stops here with one line that names it and where it came from (the
# file, or --config), and no traceback (Snakemake prints one for any exception but SystemExit).
try:
    _study = study.load_naming_source(workflow.overwrite_configfiles or workflow.configfiles,
                                      [workflow.config_settings.config] if workflow.config_settings.config else [],
                                      given_as="--config")
except study.ConfigError as error:
    print(f"error: {error}", file=sys.stderr)
    raise SystemExit(1) from None
config.clear()
config.update(_study)


def unset_profile_variables():
    """Resources a profile takes from environment variables that are not set: Snakemake leaves the
    text `$NAME` in place, and sbatch would be asked for a partition called `$NAME`."""
    settings = workflow.resource_settings
    texts = list(settings.default_resources.args or []) if settings.default_resources else []
    for rule_name, resources in (settings.overwrite_resources or {}).items():
        texts += [f"{rule_name}:{name}={getattr(value, 'value', value)}" for name, value in resources.items()]
    return sorted({(text, variable) for text in texts for variable in re.findall(r"\$\{?(\w+)", str(text))
                   if variable not in os.environ})


if unset_profile_variables():
    raise WorkflowError("; ".join(f"environment variable {variable} is not set (profile resource {resource!r})"
                                  for resource, variable in unset_profile_variables())
                        + ". Export it (docs/cluster.md, 'Then, on the cluster').")


RESULTS = config["results"]
# The whole study, what the tables, figures and headline are made from (report.smk), and its digest, their
# param: a changed study reruns them, and the report lists a short digest where it lists their job's params.
STUDY_SETTINGS = json.dumps(config, sort_keys=True)
STUDY_DIGEST = hashlib.sha256(STUDY_SETTINGS.encode("utf-8")).hexdigest()[:16]
REPOSITORY = Path(workflow.main_snakefile).parent
MODELS = list(config["models"])
DATASETS = list(config["datasets"])
BENCHMARKS = list(config["benchmarks"])
VARIANTS = list(config["variants"])
CELLS = study.rl_cells(config)
SFT_SEEDS = study.sft_seeds(config) or [None]  # with sft.seeds, several SFT models per condition
HUB_SOURCES = prefetch.hub_sources(config)

# When jobs are about to run (not in a dry run, which plans the paper grid on a machine without vLLM): the
# software they need must be where they run (grpo_lambda.environment), and every comparison family the
# tables will declare must be able to reject at the study's seeds (grpo_lambda.config.families).
onstart:
    try:
        study.check_environment(config, source="config", jobs=True)
        study.check_design(config, source="config")
    except study.ConfigError as error:
        raise WorkflowError(str(error)) from None


# Jobs read the hub cache that the prefetch rule filled; they never download (compute nodes are
# often offline, and each process would fill its own cache). GRPO_LAMBDA_JOB_PID names the job's shell:
# the stage's processes exit when it is killed (grpo_lambda.lifetime).
shell.prefix("set -euo pipefail; export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 GRPO_LAMBDA_JOB_PID=$$"
             " GRPO_LAMBDA_JOB_HOST=$(hostname); ")

# CPU-only rules run on the submitting machine, not as cluster jobs: downloads (prefetch, prepare_*),
# the tiny model's build, the horizon band check, tables, figures and the report's headline.
localrules:
    prefetch,
    prepare_dataset,
    prepare_benchmark,
    prepare_sft_set,
    build_tiny,
    check_band,
    aggregate,
    figures,
    headline,
    all,


def alternatives(names):
    return "|".join(re.escape(name) for name in names)


wildcard_constraints:
    model=alternatives(MODELS),
    dataset=alternatives(DATASETS),
    variant=alternatives(VARIANTS),
    benchmark=alternatives(BENCHMARKS),
    sft_set=alternatives([study.sft_set(config)["name"]]),
    seed=r"\d+",
    sft_seed=r"\d+",
    step=r"final|\d+",


def settings(stage, **cell):
    """The cell's settings as JSON: the rule's params, so a change reruns only the cells it touches."""
    return json.dumps(study.stage_settings(config, stage, **cell), sort_keys=True)


def model_nodes(w):
    """The nodes of the model's sft and train jobs (models.X.nodes, default 1)."""
    return int(config["models"][w.model].get("nodes", 1))


def launcher(w, resources):
    """The CLI, or the CLI under ``accelerate launch`` when the job runs several processes, as a list
    of words (each quoted by ``{params.launch:q}``).

    The process count is the job's ``processes`` resource, else its GPU count: a cluster gives one
    process per GPU; a CPU rehearsal asks for processes without GPUs. Port 0 lets each launch pick a
    free port, so two jobs on one node never collide on accelerate's default 29500. A model on several
    nodes gets grpo_lambda.launch (srun, then accelerate launch on each node); its ``gpu`` resource is
    the job's total (SLURM's --gpus), shared equally by the nodes, and ``processes`` counts per node.
    """
    gpus = int(resources.get("gpu", 0) or 0)
    nodes = model_nodes(w)
    plan = config["models"][w.model]["distributed"]
    accelerate_config = f"{REPOSITORY}/envs/accelerate/{plan}.yaml"
    if nodes > 1:
        if gpus % nodes:
            raise ValueError(f"models.{w.model}: {gpus} GPUs cannot be shared equally by {nodes} nodes")
        per_node = int(resources.get("processes", 0) or gpus // nodes or 1)
        return launch.launcher_words(nodes=nodes, processes_per_node=per_node, accelerate_config=accelerate_config,
                                     cpu=gpus == 0)
    # A train job with rl.vllm_mode server first starts TRL's vLLM server on its last GPUs (grpo_lambda.launch).
    server = launch.server_words(config, w.model) if "variant" in w.keys() else []
    processes = int(resources.get("processes", 0) or gpus - launch.server_gpus(server))
    if processes <= 1:
        return [*server, "grpo-lambda"]
    # With no GPU, torch.distributed runs on gloo and bf16 is off.
    on_cpu = ["--mixed_precision", "no"] if gpus == 0 else []
    return [*server, "accelerate", "launch", "--config_file", accelerate_config,
            "--num_processes", str(processes), "--main_process_port", "0", *on_cpu, "-m", "grpo_lambda.cli"]


# A horizon study with a declared difficulty band (report.horizon.band) checks each horizon's SFT model
# against it before that horizon's RL (rule check_band).
HORIZON = report_options(config)["horizon"]
BANDED = HORIZON["chains"] if HORIZON and HORIZON["band"] else {}


def band_check(w):
    """The band check this cell's RL waits for (its own SFT model's), or nothing outside a banded horizon study."""
    if w.dataset not in BANDED:
        return []
    return f"{RESULTS}/{layout.sft(w.model, w.dataset, study.sft_seed_of(config, int(w.seed)))}/band.json"


def user_code_inputs(w):
    """The files of the user's own code the cell trains with (`grpo_lambda.fingerprint.user_code_files`): the
    modules the config imported when it was read."""
    return fingerprint.user_code_files(study.stage_settings(config, "train", model=w.model, dataset=w.dataset,
                                                            variant=w.variant))


def cell_dir(w):
    return f"{RESULTS}/{layout.cell(w.model, w.dataset, w.variant, w.seed)}"


def base_model_input(w):
    """The tiny model is built by a rule; a hub model is read from the cache the prefetch rule
    fills; a local path is read where it is."""
    source = config["models"][w.model]["source"]
    if source == "tiny":
        return f"{RESULTS}/models/{w.model}"
    if prefetch.is_hub_model(source):
        return f"{RESULTS}/{prefetch.RECORD}"
    return []


def hub_dataset_input(w):
    """The prefetch record, when this dataset, benchmark or SFT set is read from the hub."""
    if "dataset" in w.keys():
        source = study.stage_settings(config, "prepare", dataset=w.dataset)
    elif "benchmark" in w.keys():
        source = study.stage_settings(config, "prepare", benchmark=w.benchmark)
    else:
        source = study.stage_settings(config, "prepare_sft_set")
    return f"{RESULTS}/{prefetch.RECORD}" if source["source"] == "hub" else []


def base_model(w):
    source = config["models"][w.model]["source"]
    return f"{RESULTS}/models/{w.model}" if source == "tiny" else source


def sft_model(w):
    """The SFT model an RL cell starts from (the model's own for this training set, or the one it shares; with
    sft.seeds, the one of the cell's block of seeds), or the SFT model an evaluation job evaluates."""
    seed = int(w.seed) if "seed" in w.keys() else None
    sft_seed = int(w.sft_seed) if "sft_seed" in w.keys() else None
    return f"{RESULTS}/{study.sft_folder(config, w.model, w.dataset, seed, sft_seed)}/model"


def sft_data(w):
    """What SFT trains on: the training set's worked solutions, or the self-distilled set."""
    if study.sft_uses_self_distillation(config, w.model):
        return f"{RESULTS}/{layout.sft(w.model, w.dataset)}/data.jsonl"
    return f"{RESULTS}/data/{w.dataset}.jsonl"


def sft_set_file(w):
    """The chat SFT set of sft.data open_r1, prepared once for every model that uses it."""
    return f"{RESULTS}/data/sft/{study.sft_set(config)['name']}.jsonl"


def sft_base_input(w):
    """The base model when a job makes it: the tiny model's build, or another job's output under results/."""
    source = config["models"][w.model]["source"]
    if source != "tiny" and source.startswith(f"{RESULTS}/"):
        return source  # e.g. self-distillation from a model this pipeline fine-tuned
    return base_model_input(w)


def evaluated_checkpoint(w):
    if w.step == "final":
        return f"{cell_dir(w)}/model"
    return f"{cell_dir(w)}/checkpoints/step-{w.step}"


# With the hf backend a cell's train job evaluates its final model too, from the saved folder, as an
# evaluate job would (one process start and one import of torch and transformers instead of two). Its
# evaluation files are then the train rule's outputs and the evaluation settings its params, so a change to
# them reruns the train job, which finds the cell trained (its fingerprint leaves evaluation out) and only
# evaluates. A vLLM engine needs the GPU memory the trainer holds: with it, evaluate jobs do every step.
FINAL_EVALUATED_IN_TRAIN = config["evaluation"]["backend"] == "hf"
EVALUATE_RULE_STEPS = r"\d+" if FINAL_EVALUATED_IN_TRAIN else r"final|\d+"


def final_evaluation_outputs():
    if not FINAL_EVALUATED_IN_TRAIN:
        return []
    # the wildcards doubled, so that expand fills only {benchmark} and {ext}
    pattern = layout.evaluation("{{model}}", "{{dataset}}", "{{variant}}", "{{seed}}", "final", "{benchmark}", "{ext}")
    return expand(f"{RESULTS}/{pattern}", benchmark=BENCHMARKS, ext=["jsonl", "json"])


def final_evaluation_inputs(w):
    return expand(f"{RESULTS}/bench/{{benchmark}}.jsonl", benchmark=BENCHMARKS) if FINAL_EVALUATED_IN_TRAIN else []


def final_evaluation_options(w):
    """The train command's options that evaluate the final model (nothing when the evaluate rule does).
    Built from the wildcards, not from the job's input: Snakemake leaves a param derived from input out of
    its params-changed check, and a change to the evaluation settings must rerun the train job."""
    if not FINAL_EVALUATED_IN_TRAIN:
        return ""
    evaluation = settings("evaluate", model=w.model, dataset=w.dataset, variant=w.variant)
    bench = " ".join(shlex.quote(path) for path in final_evaluation_inputs(w))
    return (f" --evaluation {shlex.quote(evaluation)} --bench {bench}"
            f" --eval-dir {shlex.quote(f'{cell_dir(w)}/eval/final')}")


def sft_eval_files(ext="json"):
    return [
        f"{RESULTS}/{layout.sft_evaluation(model, dataset, benchmark, ext, sft_seed)}"
        for model in MODELS
        for dataset in study.model_datasets(config, model)
        for sft_seed in SFT_SEEDS
        for benchmark in BENCHMARKS
    ]


def rl_eval_files(ext="json"):
    return [
        f"{RESULTS}/{layout.evaluation(c['model'], c['dataset'], c['variant'], c['seed'], step, benchmark, ext)}"
        for c in CELLS
        for step in study.model_checkpoints(config, c["model"]) + ["final"]
        for benchmark in BENCHMARKS
    ]


def cell_eval_files(w):
    """Every evaluation summary of one cell: each checkpoint it keeps and its final model, on every benchmark."""
    return [
        f"{RESULTS}/{layout.evaluation(w.model, w.dataset, w.variant, w.seed, step, benchmark, 'json')}"
        for step in study.model_checkpoints(config, w.model) + ["final"]
        for benchmark in BENCHMARKS
    ]


def hub_token(w):
    """No input: publishing stops the plan, before any job, when no Hugging Face token is set."""
    from huggingface_hub import get_token

    if get_token() is None:
        raise WorkflowError("publishing needs a Hugging Face token with write access: `hf auth login`, or set HF_TOKEN")
    return []


def train_logs():
    return [
        f"{RESULTS}/{layout.train_log(c['model'], c['dataset'], c['variant'], c['seed'])}"
        for c in CELLS
    ]


def final_targets():
    """The tables and figures, and the files they are made from. Snakemake reruns a missing file only
    when a target needs it: with the SFT models, training logs and evaluations among the targets, a
    stage whose forced job failed (Snakemake deletes its outputs before the job) is run again by the
    next run, with what depends on it, instead of "Nothing to be done" over tables of a deleted model."""
    sft_models = sorted({f"{RESULTS}/{study.sft_folder(config, model, dataset, seed)}/model" for model in MODELS
                         for dataset in study.model_datasets(config, model) for seed in config["seeds"]})
    return (rules.aggregate.output + rules.figures.output + rules.headline.output + sft_models + train_logs()
            + evaluated_so_far(rl_eval_files() + sft_eval_files()))


def evaluated_so_far(summaries):
    """The evaluation summaries, those that exist marked for the report while the study has no headline: the
    report of a partial run lists each model evaluated so far with its accuracy (category Cells, labels from
    grpo_lambda.report_files). Marked as inputs of `all`, where the workflow is read: Snakemake stops at a
    marked file that does not exist, and a rule's output pattern stands for every cell, made or not."""
    if os.path.exists(HEADLINE):
        return summaries
    # the caption relative to the Snakefile, where rule all is
    return [snakemake_report(path, caption="workflow/report/cells.rst", category="Cells",
                             subcategory=" / ".join(Path(path).relative_to(RESULTS).parts[:2]),
                             labels=lambda wildcards, path=path: report_files.evaluation_labels(path))
            if os.path.exists(path) else path for path in summaries]


# The files the report shows. Snakemake's parser reads a line that starts with `report(` as the
# report directive, hence the alias.
snakemake_report = report
TABLES = names.table_names(config)
# The figures' data (names.CSV_ONLY): CSV only, and left out of the report.
DATA_TABLES = [name for name in TABLES if name in names.CSV_ONLY]
SHOWN_TABLES = [name for name in TABLES if name not in names.CSV_ONLY]
FIGURES = names.figure_names(config)
HEADLINE = f"{RESULTS}/report/headline.html"
HEADLINE_TEXT = f"{RESULTS}/report/headline.txt"
RUN_STARTED = time.time()


def study_options() -> str:
    """The options that name this study on a command line: the config files it was given (none for the embedded
    default), and a reminder of --config when it had overrides."""
    configfiles = [str(path) for path in workflow.overwrite_configfiles or []]
    named = f" {shlex.join(['--configfile', *configfiles])}" if configfiles else ""
    return f"{named} (with the same --config)" if workflow.config_settings.config else named


def report_command() -> str:
    """The command that writes this study's report, into its results folder."""
    return f"snakemake --report {shlex.quote(f'{RESULTS}/report.html')}{study_options()}"


def print_headline():
    """At the end of a run that wrote the headline: its text (Table 1's averages, the primary verdicts) and where
    the tables and the report are. A run that did not remake the tables says nothing more than Snakemake."""
    if not os.path.exists(HEADLINE_TEXT) or os.path.getmtime(HEADLINE_TEXT) < RUN_STARTED:
        return
    with open(HEADLINE_TEXT, encoding="utf-8") as handle:
        print(f"\n{handle.read().rstrip()}\nTables: {RESULTS}/tables/table1.md (every table: {RESULTS}/tables/). "
              f"Report: {report_command()}", flush=True)


def reported(folder, names, ext, caption, category):
    """The files ``names`` under ``folder``, each marked for the report (``caption``: a caption file, or a
    function of the name that gives one) when it exists as the workflow is read. A report is always a later
    call than the run that made its files, so `snakemake --report` after a partial run shows what exists
    instead of stopping at the first missing file, and its front page says what is not made yet. A table
    without rows and a figure that draws nothing (grpo_lambda.report_files) are left out of the report."""
    files = []
    for name in names:
        path = f"{RESULTS}/{folder}/{name}.{ext}"
        if os.path.exists(path) and report_files.shows_something(path):
            path = snakemake_report(path, caption=caption(name) if callable(caption) else caption,
                                    category=category, labels={"name": name})
        files.append(path)
    return files


def figure_caption(name):
    """A figure's caption file: one per figure, one for each per-model figure (``appendix_c_{model}``)."""
    template = {name: template for name, template, _ in names.expand(names.FIGURES, config)}[name]
    return f"../report/figures/{template.replace('_{model}', '')}.rst"


def _not_made_yet(record):
    """Snakemake's report warns "Missing metadata for file ..." once per output of every job not run yet,
    tens of lines after a partial run: those of files that do not exist are replaced by one line that says
    what the report leaves out (a file that exists without metadata still warns)."""
    message = record.getMessage()
    if not message.startswith("Missing metadata for file "):
        return True
    if os.path.exists(message[len("Missing metadata for file "):].split(". Maybe metadata")[0]):
        return True
    if not _not_made_yet.said:
        missing = [what for what, path in (("tables (rule aggregate, once every cell is evaluated; "
                                            "`grpo-lambda status` lists the cells)", f"{RESULTS}/tables/table1.csv"),
                                           ("figures (rule figures)", f"{RESULTS}/figures/figure1.png"),
                                           ("headline (rule headline)", HEADLINE)) if not os.path.exists(path)]
        print(f"The study is not finished; the report shows what exists. Not made yet: "
              f"{'; '.join(missing) or 'the outputs of jobs not run yet (`snakemake -n` lists them)'}. "
              f"Finish it with `snakemake --cores N{study_options()}`, then `{report_command()}`.", file=sys.stderr)
        _not_made_yet.said = True
    return False


_not_made_yet.said = False
snakemake_logger.addFilter(_not_made_yet)


def _short_job_blocks(record):
    """During a run, each job's block lists a few of its files and counts the rest (grpo_lambda.job_log); a dry
    run lists them all, for `grpo-lambda plan` and for reading the plan."""
    if getattr(record, "event", None) == LogEvent.JOB_INFO and not workflow.dryrun:
        job_log.shorten_job_info(record)
    return True


snakemake_logger.addFilter(_short_job_blocks)
