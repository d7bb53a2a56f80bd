"""The RL stage of one cell: GRPO or a GRPO-λ variant from the SFT model, with resume and a step log.

Folder of a cell (``docs/results-format.md``)::

    resume/checkpoint-N/   TRL's full state every ``rl.save_steps`` steps; a restarted job resumes from
                           the newest (Snakemake does not know this folder, so it never deletes it)
    checkpoints/step-N/    model-only snapshots at the evaluation steps
    model/                 the final model          train_log.csv   one row per step, written as it trains
    prompt_filter.json     how many training prompts ``rl.max_prompt_length`` left out
    provenance.json        the versions and commit that trained it (grpo_lambda.provenance)
    completions/step-N.jsonl  a few groups of completions every rl.log_completions.every steps
    tensorboard/           TensorBoard event files (when rl.report_to includes tensorboard; by default when
                           tensorboard or tensorboardX is installed)
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
from pathlib import Path

from transformers import TrainerCallback, TrainerState

from grpo_lambda import files, fingerprint, provenance
from grpo_lambda import completions, environment, layout
from grpo_lambda.data.prompts import prompt_text
from grpo_lambda.models import load_tokenizer, lora_config, trainer_hardware_kwargs
from grpo_lambda.saving import log_world_size, save_trained_model

log = logging.getLogger(__name__)

# train_log.csv column <- key in TRL's logs; reward_columns adds the reward functions' own.
LOG_COLUMNS = {
    "step": "step",
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "kl": "kl",
    "loss": "loss",
    "entropy": "entropy",
    "completion_length": "completions/mean_length",
    "completion_length_min": "completions/min_length",
    "completion_length_max": "completions/max_length",
    "clip_ratio_low": "clip_ratio/low_mean",
    "clip_ratio_high": "clip_ratio/high_mean",
    "clip_ratio_region": "clip_ratio/region_mean",
    "boxed_reward": "rewards/boxed_reward/mean",  # the share of boxed answers (named format_reward before)
    "trace_weight": "trace_weight",
    "trace_token_fraction": "trace_token_fraction",
    "dropped_groups": "dynamic_sampling/dropped_groups",
    "oar_max_weight": "oar/max_weight",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "step_time": "step_time",
}
# The vLLM server a train job started for itself (grpo_lambda.launch --vllm-server, its SERVER_VARIABLE;
# not imported from there, so that the launcher stays out of the training code's fingerprint).
VLLM_SERVER_VARIABLE = "GRPO_LAMBDA_VLLM_SERVER"
VLLM_GROUP_VARIABLE = "GRPO_LAMBDA_VLLM_GROUP_PORT"  # its weight-sync port, one per job
# Passed to TRL as they are when present in the rl settings.
TRL_KEYS = (
    "learning_rate", "lr_scheduler_type", "warmup_steps", "num_generations", "per_device_train_batch_size",
    "gradient_accumulation_steps", "max_completion_length", "temperature", "top_p", "beta", "epsilon",
    "epsilon_high", "max_grad_norm", "weight_decay", "loss_type", "scale_rewards", "use_vllm", "vllm_mode",
    "vllm_gpu_memory_utilization",
)


class StopOnNonFiniteLoss(TrainerCallback):
    """Stop at the first step whose loss or gradient norm is NaN or infinite, before it is saved."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        for key in ("loss", "grad_norm"):
            value = (logs or {}).get(key)
            if value is not None and not math.isfinite(value):
                kept = newest_loadable_checkpoint(Path(args.output_dir))  # name only one that exists
                where = (f"a rerun resumes from {kept}, the newest checkpoint before it" if kept else
                         f"no checkpoint was saved before it (every {args.save_steps} steps): a rerun starts at step 1")
                raise FloatingPointError(f"step {state.global_step}: {key} is {value}; training stopped; {where}. "
                                         "Lower rl.learning_rate or check the rewards.")


class SaveSnapshots(TrainerCallback):
    """Save the model alone (no optimizer state) at the evaluation steps, for the evaluate stage.

    Every process takes part (ZeRO-3 gathers its shards); the main process writes. A LoRA model is
    saved merged into ``lora_base``, a full model that loads with the Auto classes.
    """

    def __init__(self, steps: list[int], folder: Path, *, lora_base: str | None = None):
        self.steps, self.folder, self.lora_base = set(steps), folder, lora_base
        self.trainer = None  # set once the trainer that calls back exists

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step in self.steps:
            save_trained_model(self.trainer, self.folder / f"step-{state.global_step}", lora_base=self.lora_base)


class WriteCompletions(TrainerCallback):
    """Every ``every`` steps, the first ``prompts`` groups of the step's generation batch, written by the
    main process (TRL gathers every process's completions there)."""

    def __init__(self, folder: Path, *, every: int, prompts: int):
        self.folder, self.every, self.prompts = Path(folder), every, prompts
        self.trainer = None  # set once the trainer that calls back exists

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or "loss" not in (logs or {}) or state.global_step % self.every:
            return
        weights = dict(zip(self.trainer.reward_func_names, self.trainer.reward_weights.tolist()))
        rows = completions.group_rows(self.trainer._logs, step=state.global_step, prompts=self.prompts,
                                      weights=weights)
        if rows:
            files.write_jsonl(self.folder / completions.file_name(state.global_step), rows)


def reward_columns(names: list[str], weights: list[float]) -> dict[str, str]:
    """LOG_COLUMNS with a column for the mean of each reward function (TRL's ``rewards/<name>/mean``), named after
    the function (``rewards/<name>`` where that name is taken), after ``boxed_reward``. A lone trained function
    at weight 1 gets none: its mean is the ``reward`` column (so the default's columns are LOG_COLUMNS).
    """
    trained = [name for name, weight in zip(names, weights) if weight != 0]
    lone = trained[0] if len(trained) == 1 and weights[names.index(trained[0])] == 1 else None
    own = {}
    for name in names:
        key = f"rewards/{name}/mean"
        if name != lone and key not in LOG_COLUMNS.values():
            own[name if name not in LOG_COLUMNS else f"rewards/{name}"] = key
    columns = {}
    for column, key in LOG_COLUMNS.items():
        columns[column] = key
        if column == "boxed_reward":
            columns.update(own)
    return columns


class WriteTrainLog(TrainerCallback):
    """Keep train_log.csv current: rewritten atomically from the trainer's log history at every logged step.

    The whole file is rewritten rather than appended to because the log history is what a resumed
    trainer restores from its checkpoint: after a resume the file holds exactly the checkpoint's rows
    followed by the new ones (the rows of steps after the checkpoint, logged before the interruption,
    are dropped), and a reader never sees a half-written row. Main process only.
    """

    def __init__(self, path: Path, columns: dict[str, str] = LOG_COLUMNS):
        self.path, self.columns = path, columns

    def _write(self, state) -> None:
        if state.is_world_process_zero:
            write_train_log(str(self.path), train_log_rows(state.log_history, self.columns), self.columns)

    def on_train_begin(self, args, state, control, **kwargs):
        self._write(state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._write(state)

    def on_train_end(self, args, state, control, **kwargs):
        self._write(state)


def train_log_rows(log_history: list[dict], columns: dict[str, str] = LOG_COLUMNS) -> list[dict]:
    """One row per optimizer step from the trainer's log history (which survives a resume)."""
    rows = {}
    for entry in log_history:
        if "step" in entry and ("loss" in entry or "reward" in entry):
            rows[entry["step"]] = {column: entry.get(key) for column, key in columns.items()}
    return [rows[step] for step in sorted(rows)]


def write_train_log(path: str, rows: list[dict], columns: dict[str, str] = LOG_COLUMNS) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns))
    writer.writeheader()
    writer.writerows(rows)
    files.write_text(path, buffer.getvalue())


def trainer_state_step(checkpoint: str) -> int:
    return TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json")).global_step


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "adapter_model.safetensors")


def newest_loadable_checkpoint(resume_dir: Path) -> str | None:
    """The newest ``checkpoint-N`` that holds weights and a readable trainer state; damaged newer ones
    (a kill mid-save, a deleted file) are named in the log and passed over, so a cell resumes from the
    good one before instead of failing on "Can't find a valid checkpoint"."""
    if not resume_dir.is_dir():
        return None
    candidates = sorted((path for path in resume_dir.glob("checkpoint-*") if path.name.split("-")[-1].isdigit()),
                        key=lambda path: int(path.name.split("-")[-1]), reverse=True)
    for checkpoint in candidates:
        problem = None
        # DeepSpeed keeps a ZeRO checkpoint's shards in global_step*/ instead of a weights file.
        weights = any((checkpoint / name).is_file() for name in WEIGHT_FILES) or any(checkpoint.glob("global_step*"))
        if not weights:
            problem = "no model weights"
        else:
            try:
                trainer_state_step(str(checkpoint))
            except (OSError, ValueError) as error:
                problem = f"no readable trainer_state.json ({type(error).__name__})"
        if problem is None:
            return str(checkpoint)
        log.warning("%s is damaged (%s): passed over for an earlier checkpoint", checkpoint, problem)
    return None


def rl_dataset(rows: list[dict], tokenizer, template: str, *, system_prompt: str | None = None):
    """The RL set TRL reads: each problem's rendered prompt and its gold answer (the reward functions' ``answer``)."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": prompt_text(tokenizer, template, row["problem"], system_prompt=system_prompt),
                               "answer": row["answer"]} for row in rows])


def default_report_to() -> str:
    """TensorBoard when it (or tensorboardX) is installed, else no tracker."""
    from transformers.integrations import is_tensorboard_available

    return "tensorboard" if is_tensorboard_available() else "none"


def run_name(settings: dict, seed: int) -> str:
    """The cell's name in a tracker: its folder, <model>/<dataset>/<variant>/seed<seed>."""
    return layout.cell(settings["model"]["name"], settings["dataset"], settings.get("variant_name", "variant"), seed)


def prompt_token_count(tokenizer, prompt) -> int:
    """The number of tokens TRL's GRPOTrainer feeds the model for this dataset prompt (text or messages)."""
    if isinstance(prompt, str):
        return len(tokenizer(text=prompt)["input_ids"])  # as TRL 1.16 tokenises a text prompt
    ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)
    return len(ids["input_ids"])


def drop_long_prompts(dataset, tokenizer, max_prompt_length: int | None):
    """(the rows whose prompt has at most max_prompt_length tokens, a count of what was kept and left out).

    Paper Table 2's max prompt length, applied by filtering: its TRL cut longer prompts from the left, which
    removes the instruction and the start of the problem while the gold answer stays; TRL 1.16 has no such
    option. None keeps every row.
    """
    counts = {"max_prompt_length": max_prompt_length, "prompts": len(dataset), "dropped": 0}
    if max_prompt_length is None:
        return dataset, counts
    kept = dataset.filter(lambda row: prompt_token_count(tokenizer, row["prompt"]) <= max_prompt_length)
    counts["dropped"] = len(dataset) - len(kept)
    if len(kept) == 0:
        raise ValueError(f"rl.max_prompt_length {max_prompt_length}: every one of the {len(dataset)} prompts is longer")
    return kept, counts


def build_config(settings: dict, *, output_dir: str, seed: int):
    """GRPOConfig of a cell. Every default here yields to rl: keys and then to rl.trl."""
    from grpo_lambda import progress
    from grpo_lambda.grading.reward import reward_specs
    from grpo_lambda.trainer_config import GRPOLambdaConfig
    from grpo_lambda.variants import variant_config_kwargs

    rl = settings["rl"]
    kwargs = {
        "logging_steps": 1,
        "logging_nan_inf_filter": False,  # a NaN loss must reach StopOnNonFiniteLoss, not be averaged away
        "save_strategy": "steps",
        "save_steps": rl.get("save_steps", 100),
        "save_total_limit": 2,
        "report_to": rl.get("report_to") or default_report_to(),
        "run_name": run_name(settings, seed),
        "disable_tqdm": not progress.interactive(),  # a job log gets ProgressLines instead
    }
    # One weight per reward function of _run, in its order; weight 0: logged, never trained on.
    kwargs["reward_weights"] = [float(spec.get("weight", 1.0)) for spec in reward_specs(rl)]
    kwargs.update({key: rl[key] for key in TRL_KEYS if key in rl})
    kwargs.update(rl.get("trl", {}))
    if rl.get("vllm_mode") == "server" and os.environ.get(VLLM_SERVER_VARIABLE):
        kwargs["vllm_server_base_url"] = os.environ[VLLM_SERVER_VARIABLE]  # the server the job started
        if os.environ.get(VLLM_GROUP_VARIABLE):
            kwargs["vllm_group_port"] = int(os.environ[VLLM_GROUP_VARIABLE])
    kwargs.update(variant_config_kwargs(settings["variant"]))
    kwargs.update(trainer_hardware_kwargs(rl))
    return GRPOLambdaConfig(output_dir=output_dir, max_steps=rl["max_steps"], seed=seed, **kwargs)


def training_recipe(settings: dict, user_code: dict | None) -> dict:
    """What a cell's provenance.json and job log say it trained with: its advantage estimators in the order they
    run (OAR's reshaping first when the variant sets oar_method), its rewards by weight, and the digests of the
    user's own code among them (`fingerprint.user_code_sources`)."""
    from grpo_lambda.advantages import estimator_chain
    from grpo_lambda.grading.reward import reward_specs

    variant = settings.get("variant") or {}
    chain = estimator_chain(variant.get("advantage_estimator", "grpo"), oar_method=variant.get("oar_method"))
    rewards = {spec["name"]: float(spec.get("weight", 1.0)) for spec in reward_specs(settings.get("rl") or {})}
    return {"advantage_estimators": chain, "rewards": rewards, **({"user_code": user_code} if user_code else {})}


def use_cell_tensorboard_folder(trainer, folder: Path) -> None:
    """Point TensorBoard at <cell>/tensorboard (one folder across resumes) unless TENSORBOARD_LOGGING_DIR says."""
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and not os.getenv("TENSORBOARD_LOGGING_DIR"):
            callback.logging_dir = str(folder)


def run(settings: dict, *, base: str, data_path: str, cell_dir: str, seed: int) -> bool:
    """Train the cell to ``rl.max_steps``, resuming from the newest checkpoint if there is one; one
    trainer per cell at a time (``files.exclusive``). Whether this is the main process (the one that
    writes, and evaluates the final model when the job does: ``grpo_lambda.cli``)."""
    with files.exclusive(cell_dir):
        return _run(settings, base=base, data_path=data_path, cell_dir=cell_dir, seed=seed)


def _run(settings: dict, *, base: str, data_path: str, cell_dir: str, seed: int) -> bool:
    """Train (or publish what a finished earlier run trained); whether this is the main process."""
    from grpo_lambda import progress
    from grpo_lambda.grading import reward
    from grpo_lambda.trainer import GRPOLambdaTrainer

    cell = Path(cell_dir)
    resume_dir = cell / "resume"
    # State made with other settings, base model, data or user code (rewards, estimator) is moved aside, never resumed.
    made_with = fingerprint.compute(settings, seed=seed, base=base, data_path=data_path,
                                    user_code=fingerprint.user_code_sources(settings))
    fingerprint.claim(cell, made_with)
    tokenizer = load_tokenizer(base, padding_side="left")
    dataset = rl_dataset(files.read_jsonl(data_path), tokenizer, settings["model"]["prompt"],
                         system_prompt=settings["model"].get("system_prompt"))
    dataset, prompt_counts = drop_long_prompts(dataset, tokenizer, settings["rl"].get("max_prompt_length"))
    args = build_config(settings, output_dir=str(resume_dir), seed=seed)
    reward_funcs, weights = reward.reward_functions(reward.reward_specs(settings["rl"]),
                                                    max_completion_length=args.max_completion_length)
    log_columns = reward_columns([function.__name__ for function in reward_funcs], weights)
    if "wandb" in args.report_to:  # one W&B project per study, one group per variant (unless set already)
        for name, value in environment.wandb_names(settings, cell_dir).items():
            os.environ.setdefault(name, value)
    peft_config = lora_config(settings["model"].get("lora"))
    lora_base = base if peft_config else None
    snapshots = SaveSnapshots(settings["checkpoints"], cell / "checkpoints", lora_base=lora_base)
    callbacks = [StopOnNonFiniteLoss(), progress.NoLearningSignal(), snapshots, WriteTrainLog(cell / layout.TRAIN_LOG, log_columns)]
    logged = settings["rl"].get("log_completions")
    if logged:
        callbacks.append(WriteCompletions(cell / completions.FOLDER, every=logged["every"],
                                          prompts=logged.get("prompts", 2)))
    trainer = GRPOLambdaTrainer(
        model=base, reward_funcs=reward_funcs, args=args, train_dataset=dataset,
        processing_class=tokenizer, peft_config=peft_config, callbacks=callbacks,
    )
    for callback in callbacks:
        if hasattr(callback, "trainer"):
            callback.trainer = trainer
    if trainer.is_world_process_zero():
        files.write_json(cell / "prompt_filter.json", prompt_counts)
        if len(dataset):  # what the model reads, template and system prompt filled in, whatever log_completions says
            files.write_text(cell / "prompt.txt", dataset[0]["prompt"])
        trained_with = training_recipe(settings, made_with.get("user_code"))
        files.write_json(cell / "provenance.json", {**provenance.record(revisions=made_with.get("revisions")),
                                                    **trained_with})
        log.info("advantages: %s; rewards: %s", " then ".join(trained_with["advantage_estimators"]),
                 ", ".join(f"{name} (weight {weight:g})" for name, weight in trained_with["rewards"].items()))
        log.info("RL prompts: %(prompts)d, %(dropped)d left out as longer than %(max_prompt_length)s tokens",
                 prompt_counts)
    log_world_size(trainer.accelerator, "train")
    use_cell_tensorboard_folder(trainer, cell / "tensorboard")
    progress.quiet_trainer_output(trainer, f"train {args.run_name}")
    last = newest_loadable_checkpoint(resume_dir)
    if last and trainer_state_step(last) >= args.max_steps:
        # Resuming a finished run would train one more step (at learning rate 0): publish it as it is.
        log.info("already trained to step %d with these settings: publishing %s", args.max_steps, last)
        trainer._load_from_checkpoint(last)
        trainer.state = TrainerState.load_from_json(str(Path(last) / "trainer_state.json"))
        if trainer.is_world_process_zero():
            # No training, so no WriteTrainLog call, and Snakemake may have removed the old file.
            write_train_log(str(cell / layout.TRAIN_LOG), train_log_rows(trainer.state.log_history, log_columns),
                            log_columns)
    else:
        if last:
            tied = getattr(getattr(trainer.model, "config", None), "tie_word_embeddings", False)
            log.info("resuming from %s%s", last, " (a warning that lm_head.weight is missing from it is expected: "
                     "the model ties it to the input embeddings, restored with them)" if tied else "")
        trainer.train(resume_from_checkpoint=last)  # WriteTrainLog keeps train_log.csv current
    save_trained_model(trainer, cell / "model", lora_base=lora_base)
    if trainer.is_world_process_zero():
        log.info("cell %s trained to step %d", cell_dir, trainer.state.global_step)
    return trainer.is_world_process_zero()
