"""The cells of the grid (``rl_cells``) and the settings each stage of one cell reads from a validated
config (``stage_settings``): a stage receives only its cell's settings, as JSON on the command line; they
are also the rule's params, so a change to a cell's settings reruns that cell and nothing else."""

from __future__ import annotations

from pathlib import Path

from grpo_lambda import layout


def model_datasets(config: dict, model: str) -> list[str]:
    return config["models"][model].get("datasets") or list(config["datasets"])


def model_variants(config: dict, model: str) -> list[str]:
    return config["models"][model].get("variants") or list(config["variants"])


def model_checkpoints(config: dict, model: str) -> list[int]:
    spec = config["models"][model]
    return sorted(spec["checkpoints"] if "checkpoints" in spec else config["evaluation"]["checkpoints"])


def rl_cells(config: dict) -> list[dict]:
    """Every RL run of the grid: model × dataset × variant × seed."""
    return [
        {"model": model, "dataset": dataset, "variant": variant, "seed": seed}
        for model in config["models"]
        for dataset in model_datasets(config, model)
        for variant in model_variants(config, model)
        for seed in config["seeds"]
    ]


# Rejection sampling of the SFT set when sft.data is self_distill: k = 8 samples per problem at the
# RL temperature, a quarter of them kept at most; the sample length is the RL completion length's
# order, not the evaluation's, so the kept solutions fit the SFT max_length.
SELF_DISTILL_DEFAULTS = {"samples": 8, "keep_per_problem": 2, "max_problems": None, "temperature": 1.0,
                         "top_p": 1.0, "max_new_tokens": 1024, "max_model_len": 4096, "batch_size": 64,
                         "backend": "hf", "dtype": "auto", "seed": 0, "grader_timeout": 1.0}


def sft_settings(config: dict, model: str) -> dict:
    top, own = config.get("sft", {}), config["models"][model].get("sft", {})
    merged = {"data": "solutions", **top, **own}
    merged["self_distill"] = {**SELF_DISTILL_DEFAULTS, **top.get("self_distill", {}), **own.get("self_distill", {})}
    return merged


def sft_uses_self_distillation(config: dict, model: str) -> bool:
    settings = sft_settings(config, model)
    return settings["data"] == "self_distill" and settings.get("num_train_epochs", 1) != 0


# sft.data open_r1: one SFT model per base model on open-r1's SFT set, shared by all its training sets.
SFT_SET_DEFAULTS = {"name": "bespoke-stratos-17k"}


def sft_is_shared(config: dict, model: str) -> bool:
    """Whether the model has one SFT model for all its training sets (sft.data open_r1)."""
    return sft_settings(config, model)["data"] == "open_r1"


def sft_set(config: dict) -> dict:
    """The chat SFT set of sft.data open_r1: its registry name, and a local copy (path) or the first rows (limit)."""
    return {**SFT_SET_DEFAULTS, **config.get("sft", {}).get("open_r1", {})}


def sft_seeds(config: dict) -> list[int] | None:
    """The study's SFT seeds when it trains several SFT models per condition (``sft.seeds``), else None (one
    SFT model per condition, seeded by ``sft.seed``)."""
    return config.get("sft", {}).get("seeds")


def sft_seed_of(config: dict, seed: int) -> int | None:
    """The SFT seed of the SFT model RL seed ``seed`` starts from: ``seeds`` split into len(sft.seeds) equal
    consecutive blocks, block i on SFT model sft.seeds[i]; None without ``sft.seeds``."""
    drawn = sft_seeds(config)
    if drawn is None:
        return None
    per_model = len(config["seeds"]) // len(drawn)
    return drawn[config["seeds"].index(seed) // per_model]


def sft_folder(config: dict, model: str, dataset: str, seed: int | None = None, sft_seed: int | None = None) -> str:
    """The folder of the SFT model an RL cell (of RL seed ``seed``) starts from, or of the SFT model of SFT
    seed ``sft_seed``, under the results folder; with neither, the folder that holds the condition's SFT
    models (and its self-distilled set)."""
    if seed is not None and sft_seeds(config) is not None:
        sft_seed = sft_seed_of(config, seed)
    return layout.sft(model, None if sft_is_shared(config, model) else dataset, sft_seed)


TRL_MAX_COMPLETION_LENGTH = 512  # GRPOConfig's default, where rl: names none (a test checks it against TRL)


def rl_settings(config: dict, model: str) -> dict:
    merged = {**config.get("rl", {}), **config["models"][model].get("rl", {})}
    merged["trl"] = {**config.get("rl", {}).get("trl", {}), **config["models"][model].get("rl", {}).get("trl", {})}
    merged.setdefault("max_steps", 100)
    return merged


def stage_settings(config: dict, stage: str, *, model: str | None = None, dataset: str | None = None,
                   variant: str | None = None, benchmark: str | None = None, sft_seed: int | None = None) -> dict:
    """The part of the config one stage of one cell depends on (and nothing more)."""
    from grpo_lambda.data import registry

    if stage == "prepare_sft_set":
        name = sft_set(config)["name"]
        return _with_record(config, {"key": name, "role": "sft",
                                     **registry.resolve({"source": "registry", **sft_set(config)}, name, "sft_sets")})
    if stage == "prepare":
        # where the rows are and how they are read, written out (a registry entry with the config's keys over it)
        group, key, role = ("datasets", dataset, "train") if dataset is not None else ("benchmarks", benchmark,
                                                                                       "benchmark")
        return _with_record(config, {"key": key, "role": role, **registry.resolve(config[group][key], key, group)})
    spec = config["models"][model]
    model_part = {"name": model, "source": spec["source"], "prompt": spec.get("prompt", "qwen_math"),
                  "lora": spec.get("lora")}
    if spec.get("revision"):
        model_part["revision"] = spec["revision"]
    if "system_prompt" in spec:  # only when set, so that the cells of a config without one keep their params
        model_part["system_prompt"] = spec["system_prompt"]
    if stage == "build_tiny":
        return {"name": model, "tiny": spec.get("tiny", {})}
    if stage == "sft":
        # Only what training reads: the sampling settings reach SFT through its data file.
        options = {key: value for key, value in sft_settings(config, model).items()
                   if key not in ("self_distill", "open_r1", "seeds")}
        if sft_seed is not None:  # one of sft.seeds: that SFT model's own seed
            options["seed"] = sft_seed
        for key, default in (("data", "solutions"), ("format", "boxed")):
            if options.get(key) == default:
                del options[key]  # the defaults, so existing SFT jobs keep their params
        if options.get("data") == "open_r1":
            dataset = None  # one SFT model for all the model's training sets
        return {"model": model_part, "dataset": dataset, "sft": options}
    if stage == "prepare_sft":
        sampling = {"self_distill": sft_settings(config, model)["self_distill"]}
        if sft_settings(config, model).get("format", "boxed") != "boxed":  # the length limit counts the tags
            sampling["format"] = sft_settings(config, model)["format"]
        return {"model": model_part, "dataset": dataset, "sft": sampling,
                "max_solution_tokens": rl_settings(config, model).get("max_completion_length",
                                                                      TRL_MAX_COMPLETION_LENGTH)}
    if stage == "train":
        return {"model": model_part, "dataset": dataset, "variant_name": variant,
                "variant": config["variants"][variant], "rl": rl_settings(config, model),
                "checkpoints": model_checkpoints(config, model)}
    if stage == "publish":
        return {"train": stage_settings(config, "train", model=model, dataset=dataset, variant=variant),
                "publish": config["publish"], "benchmarks": list(config["benchmarks"])}
    if stage == "evaluate":
        return {"model": model_part, "dataset": dataset, "variant": variant,
                "evaluation": {k: v for k, v in config["evaluation"].items() if k != "checkpoints"}}
    raise ValueError(f"stage {stage!r} is unknown")


def _with_record(config: dict, settings: dict) -> dict:
    """A hub source's prepare settings name the prefetch record, whose commit prepare reads it at."""
    from grpo_lambda.data import registry

    if settings["source"] != "hub":
        return settings
    return {**settings, "prefetch_record": f"{config['results']}/{registry.PREFETCH_RECORD}"}


def _cell_value(own: dict, rl: dict, fields: dict, key: str):
    """A TRL setting as a variant's cells train with it: the variant's own, else rl.trl's, else rl's, else
    TRL's default."""
    return own.get(key, rl["trl"].get(key, rl.get(key, fields.get(key))))


def _rl_key(config: dict, model: str, key: str, trl: bool) -> str:
    """Where a model's rl setting comes from: its own rl block or the study's."""
    own = config["models"][model].get("rl", {})
    own = own.get("trl", {}) if trl else own
    return ("models." + model + "." if key in own else "") + ("rl.trl." if trl else "rl.") + key


def looks_local(model_source: str) -> bool:
    """A model source meant as a folder on disk rather than a hub id (``org/name``)."""
    return (model_source.startswith(("/", ".", "~")) or model_source.count("/") > 1 or "\\" in model_source
            or Path(model_source).exists())
