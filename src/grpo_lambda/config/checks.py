"""The cross-checks of a config that passed its schema: what a schema cannot say (names that refer to each
other, checkpoints within the run, a generation batch TRL would split unevenly, a data file without the
fields mapped to it), refused with one line naming the key before any job, where it would fail inside one.

Each check is a function ``(config, source)`` that raises ConfigError; ``CHECKS``, at the end of this file,
lists them in the order ``validation.validate`` runs them. To add a check: write its function here (a check
of the datasets' and benchmarks' sources in ``data_checks.py``) and put it in ``CHECKS`` (a check of one
model's settings, ``(config, model, source)``, in ``_each_model(...)``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from grpo_lambda.config.data_checks import _check_data_names, _check_data_sources
from grpo_lambda.config.families import check_families
from grpo_lambda.config.report import REPORT_DEFAULTS, report_options
from grpo_lambda.config.schema import ConfigError, _non_finite_numbers, load_schema
from grpo_lambda.config.settings import (TRL_MAX_COMPLETION_LENGTH, _cell_value, _rl_key, looks_local,
                                         model_checkpoints, model_variants, rl_settings, sft_is_shared, sft_set)
from grpo_lambda.config.trl_fields import PIPELINE_TRL_KEYS, trl_config_fields, trl_type_error
from grpo_lambda.data.prompts import TEMPLATES, template_problem
from grpo_lambda.variants import (OAR_PARAMETER_KEYS, OBJECTIVE_KEYS, check_objective, check_trace_length,
                                  variant_config_kwargs)


def _check_values(config: dict, source: str) -> None:
    """What the schema lets through but no run can mean."""
    bad = list(_non_finite_numbers(config, ""))
    if bad:
        raise ConfigError(f"{source}: {bad[0]} is not a finite number")
    for index, seed in enumerate(config["seeds"]):
        if not isinstance(seed, int) or isinstance(seed, bool):  # JSON Schema counts 1.0 as an integer
            raise ConfigError(f"{source}: seeds[{index}] must be a whole number written without a point, got {seed!r}")
    results = Path(config["results"])
    if results.resolve() == Path(results.resolve().anchor):
        raise ConfigError(f"{source}: results {config['results']!r} is the filesystem root; name a folder")
    unknown = sorted(set(config.get("report") or {}) - set(REPORT_DEFAULTS))
    if unknown:
        raise ConfigError(f"{source}: report: unknown option(s) {unknown}; known: {sorted(REPORT_DEFAULTS)}")
    metric = (config.get("report") or {}).get("metric", REPORT_DEFAULTS["metric"])
    evaluation = config.get("evaluation") or {}
    if metric == "avg" and not evaluation.get("samples"):
        raise ConfigError(f"{source}: report.metric avg needs sampled completions: set evaluation.samples")
    if metric == "greedy" and evaluation.get("greedy") is False:
        raise ConfigError(f"{source}: report.metric greedy needs the greedy pass that evaluation.greedy: false "
                          "leaves out; set report.metric: avg")


def _check_references(config: dict, source: str) -> None:
    for model, spec in config["models"].items():
        for key, known in (("variants", config["variants"]), ("datasets", config["datasets"])):
            missing = [name for name in spec.get(key, []) if name not in known]
            if missing:
                raise ConfigError(
                    f"{source}: models.{model}.{key} names {missing}, which are not defined under "
                    f"'{key}' (defined: {sorted(known)})")
        if spec.get("lora") and importlib.util.find_spec("peft") is None:
            raise ConfigError(f"{source}: models.{model}.lora needs the peft package, which is not installed "
                              "(pip install -c envs/constraints-cpu.txt peft, or envs/requirements-*.txt)")
        if spec["source"] == "tiny" and spec.get("prompt", "plain") in TEMPLATES and spec.get("prompt") != "plain":
            raise ConfigError(f"{source}: models.{model}.prompt must be 'plain' or a template string for the tiny "
                              "model")
        steps = rl_settings(config, model)["max_steps"]
        late = [step for step in model_checkpoints(config, model) if step >= steps]
        if late:
            where = f"models.{model}.checkpoints" if "checkpoints" in spec else "evaluation.checkpoints"
            raise ConfigError(
                f"{source}: {where} {late} must be below the run's {steps} steps "
                f"(rl.max_steps for models.{model}); the final model is always evaluated")
    for kind in ("datasets", "benchmarks"):
        for name, spec in config[kind].items():
            if spec["source"] == "synthetic":
                level_key = "columns" if "columns" in spec else "level"
                for required in ("n", "seed", level_key) if kind == "benchmarks" else ("n", "seed"):
                    if required not in spec:
                        raise ConfigError(f"{source}: {kind}.{name}.{required} is required for a synthetic source")
                horizon = "columns" in spec or "carry_free_share" in spec
                if horizon and ("columns" not in spec or {"level", "levels"} & set(spec)):
                    raise ConfigError(f"{source}: {kind}.{name}: give level/levels, or columns (and carry_free_share)")
    for name, variant in config["variants"].items():
        if variant["objective"] == "grpo_lambda" and "lam" not in variant:
            raise ConfigError(f"{source}: variants.{name}.lam is required for objective grpo_lambda")


def _check_local_paths(config: dict, source: str) -> None:
    made_here = str(config.get("results", "results")).rstrip("/") + "/"
    for model, spec in config["models"].items():
        local = spec["source"] == "tiny" or spec["source"].startswith(made_here) or looks_local(spec["source"])
        if "revision" in spec and local:
            raise ConfigError(f"{source}: models.{model}.revision applies to a hub model only, not to "
                              f"{spec['source']!r}")
        if spec["source"].startswith(made_here):
            continue  # another job's output (e.g. a fine-tuned model to self-distil from): built first
        if spec["source"] != "tiny" and looks_local(spec["source"]):
            folder = Path(spec["source"]).expanduser()
            if not (folder / "config.json").is_file():
                what = "holds no config.json" if folder.is_dir() else "does not exist"
                raise ConfigError(f"{source}: models.{model}.source: the local model folder {spec['source']!r} {what}")
    chat = sft_set(config)
    shared = any(sft_is_shared(config, model) for model in config["models"])
    if chat.get("path") and "revision" in chat:
        raise ConfigError(f"{source}: sft.open_r1.revision: a local path has no hub revision")
    if shared and chat.get("path") and not Path(chat["path"]).expanduser().exists():
        raise ConfigError(f"{source}: sft.open_r1.path: {chat['path']!r} does not exist")


def _check_variants(config: dict, source: str) -> None:
    """What the schema cannot say of a variant: keys of another objective, OAR parameters without a method;
    then whatever else the trainer's config would refuse (`variant_config_kwargs`)."""
    for name, variant in config["variants"].items():
        objective = variant["objective"]
        try:
            check_objective(f"variants.{name}.objective", objective)
        except ValueError as error:
            raise ConfigError(f"{source}: {error}") from None
        for key in variant:
            objectives = OBJECTIVE_KEYS[key][1] if key in OBJECTIVE_KEYS else None
            if objectives is not None and objective not in objectives:
                raise ConfigError(f"{source}: variants.{name}.{key} applies to objective {' / '.join(objectives)} "
                                  f"only, not {objective!r}")
        stray = [key for key in OAR_PARAMETER_KEYS if key in variant]
        if stray and variant.get("oar_method") is None:
            raise ConfigError(f"{source}: variants.{name}.{stray[0]} needs variants.{name}.oar_method "
                              "('gradient' or 'perturbation')")
        try:
            variant_config_kwargs(variant)
        except ValueError as error:
            raise ConfigError(f"{source}: variants.{name}: {error}") from None


def _check_rl(config: dict, model: str, source: str) -> None:
    rl = rl_settings(config, model)
    trl = rl["trl"]
    fields = trl_config_fields()
    for key in trl:
        if key in PIPELINE_TRL_KEYS:
            instead = f"; set {PIPELINE_TRL_KEYS[key]} instead" if PIPELINE_TRL_KEYS[key] else ""
            raise ConfigError(f"{source}: {_rl_key(config, model, key, True)} is set by the pipeline itself{instead}")
        _refuse_rl_key_in_trl(config, model, key, source)
        if key not in fields:
            raise ConfigError(f"{source}: {_rl_key(config, model, key, True)} is not a field of TRL's GRPOConfig "
                              "(nor of GRPOLambdaConfig)")
        wrong = trl_type_error(key, trl[key])
        if wrong:
            raise ConfigError(f"{source}: {_rl_key(config, model, key, True)} {wrong}")
    try:
        check_trace_length(trl.get("trace_length"))
    except ValueError as error:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'trace_length', True)}: {error}") from None

    if rl.get("use_vllm") and rl.get("vllm_mode") == "server" and int(config["models"][model].get("nodes", 1)) > 1:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'vllm_mode', False)}: server mode starts the server "
                          f"inside a one-node job; models.{model}.nodes is {config['models'][model]['nodes']}: use "
                          "vllm_mode colocate across nodes, or one node")
    for variant in model_variants(config, model):
        _check_batch(config, model, variant, rl, fields, source)
        _check_trace_length(config, model, variant, rl, fields, source)


def _refuse_rl_key_in_trl(config: dict, model: str, key: str, source: str) -> None:
    """An rl.trl key that the rl block has a key of its own for (rl.learning_rate, rl.beta, ...) would silently
    win over it: refused, as the keys the pipeline sets are. TRL's log_completions is not rl.log_completions (the
    pipeline's own completions record), so it stays TRL's to set."""
    if key != "log_completions" and key in load_schema()["$defs"]["rl"]["properties"]:
        where = _rl_key(config, model, key, True)
        raise ConfigError(f"{source}: {where} would override {where.replace('rl.trl.', 'rl.')} silently; "
                          f"set {where.replace('rl.trl.', 'rl.')} instead")


def _check_trace_length(config: dict, model: str, variant: str, rl: dict, fields: dict, source: str) -> None:
    """A fixed n of the absolute form holds every completion the variant's cells can write (the trace
    operator refuses a batch wider than n, which would fail mid-run)."""
    trace_length, own = rl["trl"].get("trace_length"), config["variants"][variant]
    if not isinstance(trace_length, int) or isinstance(trace_length, bool):
        return  # None or "batch_max": the batch's own width; a wrong value was named above
    longest = _cell_value(own, rl, fields, "max_completion_length")
    multiple = _cell_value(own, rl, fields, "pad_to_multiple_of")
    if isinstance(multiple, int) and multiple > 0:
        longest = -(-longest // multiple) * multiple
    if trace_length < longest:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'trace_length', True)} ({trace_length}) is shorter than "
                          f"the completions variant {variant!r} can write ({longest} tokens, max_completion_length "
                          "rounded up to pad_to_multiple_of): the trace operator would refuse the first wider batch")


def _check_batch(config: dict, model: str, variant: str, rl: dict, fields: dict, source: str) -> None:
    """The group size divides the generation batch, with the settings the variant's cells train with."""
    trl, own = rl["trl"], config["variants"][variant]

    def value(key):
        return _cell_value(own, rl, fields, key)

    def name(key):
        return f"variants.{variant}.{key}" if key in own else _rl_key(config, model, key, key in trl)

    per_device, generations = value("per_device_train_batch_size"), value("num_generations")
    steps, batch = value("steps_per_generation"), value("generation_batch_size")
    accumulation = value("gradient_accumulation_steps") or 1
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
               for v in (per_device, generations, accumulation, steps or 1, batch or 1)):
        return  # a value of the wrong type: TRL names it
    if steps is not None and batch is not None:
        raise ConfigError(f"{source}: {name('steps_per_generation')} and {name('generation_batch_size')}: "
                          "set steps_per_generation or generation_batch_size, not both")
    if batch is not None and batch % per_device:
        raise ConfigError(f"{source}: {name('generation_batch_size')} ({batch}) must be a multiple of "
                          f"per_device_train_batch_size ({per_device})")
    if batch is None:
        batch = per_device * (steps or accumulation)
        how = (f"per_device_train_batch_size {per_device} x "
               + (f"steps_per_generation {steps}" if steps else f"gradient_accumulation_steps {accumulation}"))
    else:
        how = "generation_batch_size"
    if batch % generations:
        raise ConfigError(f"{source}: {name('num_generations')} ({generations}) must divide the generation batch "
                          f"({how} = {batch} completions per process), so that every prompt's group is whole")


def _check_rewards(config: dict, model: str, source: str) -> None:
    """rl.rewards (or rl.reward) names functions that exist and TRL can call, under distinct names, one trained."""
    from grpo_lambda.grading import reward

    rl = rl_settings(config, model)
    if "reward" in rl and "rewards" in rl:
        raise ConfigError(f"{source}: {_rl_key(config, model, 'reward', False)} and "
                          f"{_rl_key(config, model, 'rewards', False)}: give rl.rewards or its shorthand rl.reward, "
                          "not both")
    where = _rl_key(config, model, "rewards", False)
    # The completion lengths the model's cells train with: a length reward's default limit (variants may differ).
    lengths = {config["variants"][variant].get("max_completion_length", rl["trl"].get(
        "max_completion_length", rl.get("max_completion_length", TRL_MAX_COMPLETION_LENGTH)))
        for variant in model_variants(config, model)}
    names = {}
    for index, spec in enumerate(reward.reward_specs(rl)):
        try:
            function = [reward.reward_function(spec, max_completion_length=length) for length in sorted(lengths)][0]
        except ValueError as error:
            raise ConfigError(f"{source}: {where}[{index}].name: {error}") from None
        if function.__name__ in names:
            raise ConfigError(f"{source}: {where}[{index}]: {spec['name']!r} is logged as {function.__name__!r}, "
                              f"like {where}[{names[function.__name__]}]; TRL would mix their logs")
        names[function.__name__] = index
    if not any(spec.get("weight", 1.0) != 0 for spec in reward.reward_specs(rl)):
        raise ConfigError(f"{source}: {where}: every weight is 0, so nothing trains; give one reward a weight")


def _check_prompt(config: dict, model: str, source: str) -> None:
    spec = config["models"][model]
    problem = template_problem(spec.get("prompt", "qwen_math"), spec.get("system_prompt"))
    if problem:
        raise ConfigError(f"{source}: models.{model}.prompt: {problem}")


def _check_report(config: dict, source: str) -> None:
    """The report: options that name models, training sets and variants, checked before any job runs
    (the tables and figures read them only at the end of a study)."""
    try:
        report_options(config)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None


def _check_sft_seeds(config: dict, source: str) -> None:
    """sft.seeds: the study's, nesting the RL seeds in equal blocks, one block per SFT model."""
    for model, spec in config["models"].items():
        if "seeds" in spec.get("sft", {}):
            raise ConfigError(f"{source}: models.{model}.sft.seeds: several SFT models are the study's choice; "
                              "set sft.seeds at the top level")
    drawn = config.get("sft", {}).get("seeds")
    if drawn is None:
        return
    if "seed" in config["sft"]:
        raise ConfigError(f"{source}: sft.seed and sft.seeds: give one SFT seed (sft.seed) or several (sft.seeds)")
    if len(config["seeds"]) % len(drawn):
        raise ConfigError(f"{source}: seeds: {len(config['seeds'])} RL seeds cannot be split equally among the "
                          f"{len(drawn)} SFT models of sft.seeds {drawn}; give a multiple of {len(drawn)}")


def check_design(config: dict, source: str = "config") -> None:
    """Every family the tables will declare can reject at the study's seeds, or is declared descriptive
    (grpo_lambda.config.families). Run, on a validated config, where jobs are about to run (``grpo-lambda
    validate``, Snakemake's start), not at every read of a config: a dry run, a small test study or a
    published run's rebuild is no claim the seeds must support."""
    try:
        check_families(config, report_options(config))
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None


def _each_model(*checks):
    """Checks of one model's settings, ``(config, model, source)``, run model by model: all of one model's
    checks before the next model's."""

    def check_models(config: dict, source: str) -> None:
        for model in config["models"]:
            for check in checks:
                check(config, model, source)

    return check_models


# The cross-checks in the order they run (the first to fail names its key): a new check is a function above
# and its place in this list.
CHECKS = [
    _check_values,
    _check_sft_seeds,
    _check_references,
    _check_data_names,
    _check_data_sources,
    _check_local_paths,
    _check_variants,
    _each_model(_check_rl, _check_rewards, _check_prompt),
    _check_report,
]
