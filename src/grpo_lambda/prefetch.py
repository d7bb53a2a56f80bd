"""Download every hub model and dataset a study reads, once, into the hub cache (``$HF_HOME``), and
record the exact revision of each.

On a cluster the compute nodes are often offline, and a job that downloads on its own fills its own
cache: the ``prefetch`` rule runs this on the submitting machine, and every job then runs with
``HF_HUB_OFFLINE=1`` / ``HF_DATASETS_OFFLINE=1``, reading the same ``$HF_HOME``. The settings list what
to fetch (``hub_sources``), each at the ``revision`` its config names (a branch, tag or commit; the
default branch when none). The output records, for each, the commit that revision named when it was
fetched and the hash of every file (the hub's blob ids: a file's sha256 for Git LFS files, its git
blob id for the others), so two runs months apart can tell whether they read the same bytes.
``prepare`` reads a dataset at the recorded commit (refusing a cached copy of another one:
``registry.load_hub_split``) and writes it into the prepared file's summary; the training fingerprint
and each cell's provenance carry it from there (grpo_lambda.fingerprint). A model job reads the
snapshot of its model's revision from the cache (``grpo-lambda`` resolves a hub id to that folder).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from grpo_lambda.data import registry

log = logging.getLogger(__name__)

# Model files not needed to load a checkpoint with transformers: the duplicates in other formats.
SKIPPED_MODEL_FILES = ["*.pth", "*.pt", "*.msgpack", "*.h5", "*.onnx", "*.gguf", "original/*"]
RECORD = registry.PREFETCH_RECORD  # what run() returns, under the study's results folder


def is_hub_model(source: str) -> bool:
    """A model source names the hub unless it is the locally built tiny model or an existing path."""
    return source != "tiny" and not os.path.exists(source)


def hub_sources(config: dict) -> dict:
    """The hub models and hub datasets of a (validated) study that have no local copy, each with the
    revision its config asks for (None: the default branch)."""
    from grpo_lambda import config as study

    # A source under the study's results folder is another job's output (self-distillation), not the hub's.
    made_here = f"{config['results'].rstrip('/')}/"
    models = {(spec["source"], spec.get("revision")) for spec in config["models"].values()
              if is_hub_model(spec["source"]) and not spec["source"].startswith(made_here)}
    datasets = []
    for group in ("datasets", "benchmarks"):
        for key, spec in config[group].items():
            if spec["source"] != "synthetic":
                datasets.append(registry.resolve(spec, key, group))
    chat = study.sft_set(config)
    if any(study.sft_is_shared(config, model) for model in config["models"]):
        datasets.append(registry.resolve({"source": "registry", **chat}, chat["name"], "sft_sets"))
    fetched = []
    for spec in datasets:
        entry = {key: spec.get(key) for key in ("name", "hub_id", "config", "split", "revision")}
        entry["fields"] = spec.get("fields", {})
        if spec["source"] == "hub" and entry not in fetched:
            fetched.append(entry)
    return {"models": [{"id": model, "revision": revision} for model, revision in sorted(models, key=str)],
            "datasets": sorted(fetched, key=lambda entry: (entry["name"], entry["hub_id"]))}


def hub_cache() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def model_label(model: dict) -> str:
    """A model's key in the record: its id, with ``@revision`` when the config names one."""
    return model["id"] + (f"@{model['revision']}" if model.get("revision") else "")


def snapshot_files(folder: str | os.PathLike) -> dict:
    """Every file of a cached snapshot folder and its hash: the name of the blob it links to (what the hub
    calls the file's etag: sha256 for LFS files, the git blob id for others), or its sha256 where the cache
    holds copies instead of links."""
    folder = Path(folder)
    hashes = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.is_symlink():
            hashes[path.relative_to(folder).as_posix()] = Path(os.readlink(path)).name
        else:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            hashes[path.relative_to(folder).as_posix()] = "sha256:" + digest.hexdigest()
    return hashes


def fetch_model(model_id: str, revision: str | None) -> str:
    """The local snapshot folder of a hub model at ``revision`` (downloaded unless the hub is offline, in
    which case the cache must hold it): ``.../snapshots/<commit>``."""
    from huggingface_hub import snapshot_download

    return snapshot_download(model_id, revision=revision, ignore_patterns=SKIPPED_MODEL_FILES)


def resolve_dataset(hub_id: str, revision: str | None) -> dict:
    """The commit a hub dataset's revision names now and the hash of each of its files, from the hub's
    metadata (one request; the download is ``datasets``' own)."""
    from huggingface_hub import HfApi

    info = HfApi().dataset_info(hub_id, revision=revision, files_metadata=True)
    return {"commit": info.sha,
            "files": {sibling.rfilename: sibling.lfs.sha256 if sibling.lfs else sibling.blob_id
                      for sibling in info.siblings or []}}


def run(settings: dict) -> dict:
    """Fetch each model snapshot and dataset split of ``settings`` (``hub_sources``) into the cache and
    record its commit and file hashes; a dataset's mapped fields must be among its columns."""
    fetched = {"hf_hub_cache": hub_cache(), "models": {}, "datasets": {}}
    for model in settings["models"]:
        log.info("fetching model %s at %s", model["id"], model["revision"] or "the default branch")
        try:
            folder = fetch_model(model["id"], model["revision"])
        except Exception as error:
            raise RuntimeError(f"prefetch: model {model_label(model)!r} could not be fetched: {error}") from error
        fetched["models"][model_label(model)] = {**model, "path": folder, "commit": Path(folder).name,
                                                 "files": snapshot_files(folder)}
    for entry in settings["datasets"]:
        what = f"dataset {entry['name']!r} ({entry['hub_id']})"
        log.info("fetching %s, split %s, at %s", what, entry["split"], entry["revision"] or "the default branch")
        try:
            resolved = resolve_dataset(entry["hub_id"], entry["revision"])
            rows = registry.load_hub_split({**entry, "revision": resolved["commit"]})
        except Exception as error:
            raise RuntimeError(f"prefetch: {what} could not be fetched: {error}") from error
        try:
            registry.refuse_unmapped({"source": "hub", **entry}, set(rows.column_names))
        except ValueError as error:
            raise RuntimeError(f"prefetch: {what}: {error}") from None
        label, suffix = entry["name"], 2
        while label in fetched["datasets"]:
            label, suffix = f"{entry['name']}-{suffix}", suffix + 1
        fetched["datasets"][label] = {**{k: v for k, v in entry.items() if k != "fields"}, **resolved,
                                      "rows": len(rows), "columns": sorted(rows.column_names)}
    return fetched
