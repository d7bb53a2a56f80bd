"""Download every hub model and dataset a study reads, once, into the hub cache (``$HF_HOME``).

On a cluster the compute nodes are often offline, and a job that downloads on its own fills its own
cache: the ``prefetch`` rule runs this on the submitting machine, and every job then runs with
``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``, reading the same ``$HF_HOME``. The settings list what
to fetch (``hub_sources``); the output records what was fetched and where.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

# Model files not needed to load a checkpoint with transformers: the duplicates in other formats.
SKIPPED_MODEL_FILES = ["*.pth", "*.pt", "*.msgpack", "*.h5", "*.onnx", "*.gguf", "original/*"]


def is_hub_model(source: str) -> bool:
    """A model source names the hub unless it is the locally built tiny model or an existing path."""
    return source != "tiny" and not os.path.exists(source)


def hub_sources(config: dict) -> dict:
    """The hub models and registry datasets of a (validated) study that have no local copy."""
    from grpo_lambda.data.registry import get_spec

    # A source under the study's results folder is another job's output (self-distillation), not the hub's.
    made_here = f"{config['results'].rstrip('/')}/"
    models = sorted({spec["source"] for spec in config["models"].values()
                     if is_hub_model(spec["source"]) and not spec["source"].startswith(made_here)})
    datasets = []
    for group in ("datasets", "benchmarks"):
        for key, spec in config[group].items():
            if spec["source"] == "registry" and not spec.get("path"):
                entry = get_spec(spec.get("name", key))
                datasets.append({"name": entry.name, "hub_id": entry.hub_id, "config": entry.config,
                                 "split": entry.split})
    from grpo_lambda import config as study
    from grpo_lambda.data.registry import SFT_SETS

    chat = study.sft_set(config)
    if not chat.get("path") and any(study.sft_is_shared(config, model) for model in config["models"]):
        entry = SFT_SETS[chat["name"]]
        datasets.append({"name": entry.name, "hub_id": entry.hub_id, "config": entry.config, "split": entry.split})
    datasets.sort(key=lambda entry: entry["name"])
    return {"models": models, "datasets": datasets}


def hub_cache() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def run(settings: dict) -> dict:
    """Fetch each model snapshot and dataset split of ``settings`` (``hub_sources``) into the cache."""
    import datasets
    from huggingface_hub import snapshot_download

    fetched = {"hf_hub_cache": hub_cache(), "models": {}, "datasets": {}}
    for model in settings["models"]:
        log.info("fetching model %s", model)
        try:
            fetched["models"][model] = snapshot_download(model, ignore_patterns=SKIPPED_MODEL_FILES)
        except Exception as error:
            raise RuntimeError(f"prefetch: model {model!r} could not be fetched: {error}") from error
    for entry in settings["datasets"]:
        log.info("fetching dataset %s (%s, split %s)", entry["name"], entry["hub_id"], entry["split"])
        try:
            rows = datasets.load_dataset(entry["hub_id"], entry["config"], split=entry["split"])
        except Exception as error:
            raise RuntimeError(f"prefetch: dataset {entry['name']!r} ({entry['hub_id']}) could not be fetched: "
                               f"{error}") from error
        fetched["datasets"][entry["name"]] = {"hub_id": entry["hub_id"], "rows": len(rows)}
    return fetched
