"""The node's own checks, the fast ones: the packages' versions, every GPU's arithmetic, bfloat16, an all-reduce
across the GPUs (gloo between 2 processes on a CPU node), the hub sources in the cache or reachable, and the disk
against what the grid writes."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path

from grpo_lambda.preflight.context import Fail, Skip

REQUIRED_PACKAGES = ("torch", "transformers", "trl", "accelerate", "peft", "datasets", "math-verify", "jsonschema")


def check_versions(context):
    import torch

    versions = {"python": sys.version.split()[0]}
    for name in (*REQUIRED_PACKAGES, "vllm"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["torch CUDA"] = torch.version.cuda
    if torch.cuda.is_available():
        versions["NCCL"] = ".".join(map(str, torch.cuda.nccl.version()))
    shown = ", ".join(f"{name} {version}" for name, version in versions.items() if version)
    missing = [name for name in REQUIRED_PACKAGES if versions[name] is None]
    if missing:
        raise Fail(f"not installed: {', '.join(missing)} (envs/requirements-gpu.txt); found {shown}")
    return shown + ("" if versions["vllm"] else "; no vllm"), versions


def check_cuda(context):
    import torch

    if not context.gpus:
        where = f"torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'}, " \
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}"
        if context.cpu:
            raise Skip(f"no GPU (--cpu; {where})")
        raise Fail(f"no CUDA device is visible ({where}); on a machine without a GPU pass --cpu")
    a = torch.randn(256, 256, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    devices = []
    for index in range(context.gpus):
        properties = torch.cuda.get_device_properties(index)
        on_device = (a.to(f"cuda:{index}") @ a.to(f"cuda:{index}")).cpu()
        if not torch.allclose(on_device, a @ a, rtol=1e-10, atol=1e-10):
            raise Fail(f"GPU {index} ({properties.name}) computes a float64 matrix product wrongly")
        devices.append({"name": properties.name, "memory_gib": round(properties.total_memory / 2**30, 1),
                        "capability": f"{properties.major}.{properties.minor}"})
    names = sorted({f"{device['name']} ({device['memory_gib']} GiB)" for device in devices})
    return f"{context.gpus} GPU{'s' if context.gpus > 1 else ''}: {', '.join(names)}", {"devices": devices}


def check_bf16(context):
    import torch

    if not context.gpus:
        raise Skip("no GPU: CPU jobs train in float32 (models.trainer_hardware_kwargs)")
    if not torch.cuda.is_bf16_supported():
        raise Fail(f"{torch.cuda.get_device_name()} has no bfloat16: set rl.bf16: false (and expect float32's "
                   "memory and time)")
    a = torch.randn(512, 512, generator=torch.Generator().manual_seed(0))
    exact = a.double() @ a.double()
    product = (a.cuda().bfloat16() @ a.cuda().bfloat16()).double().cpu()
    error = ((product - exact).abs().max() / exact.abs().max()).item()
    if error > 2e-2:
        raise Fail(f"a bfloat16 matrix product is off by {error:.1e} of its largest entry (expected < 1e-2)")
    return f"bfloat16 matrix product within {error:.1e} of float64", {"relative_error": error}


def check_all_reduce(context):
    if context.gpus >= 2:
        world, backend = context.gpus, "nccl"
    elif context.gpus == 1:
        raise Skip("1 GPU: nothing to reduce")
    elif context.cpu:
        world, backend = 2, "gloo"  # the CPU jobs' backend (accelerate on a CPU), between 2 processes
    else:
        raise Skip("no GPU")
    result = all_reduce(world, backend)
    return (f"{backend}, {world} processes: sum right, {result['bus_gbps']:.1f} GB/s bus bandwidth "
            f"({result['megabytes']:.0f} MB)"), result


def all_reduce(world: int, backend: str, timeout: float = 120.0) -> dict:
    """Sum a tensor across `world` spawned processes (rank r holds r + 1 everywhere); Fail unless every
    process gets world(world+1)/2. Rank 0 reports the median time of 5 reductions as bus bandwidth."""
    import multiprocessing

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    processes = [spawn.Process(target=_all_reduce_worker, args=(rank, world, backend, port, results))
                 for rank in range(world)]
    for process in processes:
        process.start()
    deadline = time.monotonic() + timeout
    reports = []
    try:
        while len(reports) < world and time.monotonic() < deadline:
            try:
                reports.append(results.get(timeout=1.0))
            except Exception:  # queue.Empty: a process may have died
                if any(process.exitcode not in (None, 0) for process in processes):
                    break
    finally:
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
    if len(reports) < world:
        codes = [process.exitcode for process in processes]
        raise Fail(f"{backend} all-reduce across {world} processes did not finish in {timeout:.0f} s "
                   f"(exit codes {codes}, {len(reports)} reported)")
    wrong = [report for report in reports if report.get("error") or not report["correct"]]
    if wrong:
        raise Fail(f"{backend} all-reduce: rank {wrong[0]['rank']} got a wrong sum or failed: "
                   f"{wrong[0].get('error', 'wrong sum')}")
    return next(report for report in reports if report["rank"] == 0)


def _all_reduce_worker(rank: int, world: int, backend: str, port: int, results) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    try:
        device = torch.device(f"cuda:{rank}") if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        elements = 2**24 if backend == "nccl" else 2**18  # 64 MB on GPUs, 1 MB between CPU processes
        tensor = torch.full((elements,), float(rank + 1), device=device)
        dist.all_reduce(tensor)
        correct = bool((tensor == world * (world + 1) / 2).all())
        times = []
        for _ in range(5):
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        size = tensor.numel() * tensor.element_size()
        seconds = sorted(times)[2]
        # a ring all-reduce moves 2(n−1)/n of the data per process: NCCL's "bus bandwidth"
        results.put({"rank": rank, "correct": correct, "megabytes": size / 1e6, "seconds": seconds,
                     "bus_gbps": size * 2 * (world - 1) / world / seconds / 1e9})
        dist.destroy_process_group()
    except Exception as error:
        results.put({"rank": rank, "correct": False, "error": f"{type(error).__name__}: {error}"})


def check_hub(context):
    """Every hub model and dataset of the config: in the hub cache, or else reachable."""
    from grpo_lambda import prefetch

    sources = prefetch.hub_sources(context.config)
    wanted = [("model", entry["id"]) for entry in sources["models"]] + [("dataset", entry["hub_id"])
                                                                        for entry in sources["datasets"]]
    if not wanted:
        return "the config reads no hub model or dataset", {}
    cached = _cached_repos()
    missing = [(kind, name) for kind, name in wanted if (kind, name) not in cached]
    details = {"hf_hub_cache": prefetch.hub_cache(), "cached": len(wanted) - len(missing), "wanted": len(wanted)}
    if not missing:
        return f"all {len(wanted)} in the hub cache {prefetch.hub_cache()}", details
    unreachable = []
    for kind, name in missing:
        try:
            _hub_info(kind, name)
        except Exception as error:
            unreachable.append(f"{kind} {name} ({type(error).__name__})")
    details.update(missing=[name for _, name in missing], unreachable=unreachable)
    if unreachable:
        raise Fail(f"{len(unreachable)} of {len(wanted)} neither in the hub cache {prefetch.hub_cache()} nor "
                   f"reachable: {', '.join(unreachable[:4])}{' ...' if len(unreachable) > 4 else ''}; run the "
                   "prefetch rule where the hub is reachable, with the same HF_HOME")
    return (f"{len(wanted) - len(missing)} of {len(wanted)} cached, the rest reachable (the prefetch rule "
            f"downloads them)"), details


def _cached_repos() -> set:
    from huggingface_hub import scan_cache_dir

    try:
        return {(repo.repo_type, repo.repo_id) for repo in scan_cache_dir().repos}
    except Exception:  # no cache folder yet
        return set()


def _hub_info(kind: str, name: str):
    from huggingface_hub import HfApi

    api = HfApi()
    return api.model_info(name, timeout=15) if kind == "model" else api.dataset_info(name, timeout=15)


def check_disk(context):
    estimate, parts = grid_disk_estimate(context.config)
    folder = Path(context.config["results"]).resolve()
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    details = {"folder": str(folder), "free_gb": free / 1e9, "estimate_gb": estimate / 1e9, "parts": parts}
    words = f"{free / 1e9:,.0f} GB free at {folder}, the grid writes about {estimate / 1e9:,.1f} GB"
    if free < estimate:
        raise Fail(words + " (models × snapshots, resume states, SFT models): free space or point results: elsewhere")
    return words, details


def grid_disk_estimate(config: dict) -> tuple[float, dict]:
    """Bytes the grid's results hold at most: per RL cell its evaluated snapshots and final model, and its 2
    newest resume states (weights + Adam's 2 float32 moments of the trained weights); per SFT model one
    model. Weights count 2 bytes a parameter (bfloat16), the tiny model's 4."""
    from grpo_lambda import config as study

    parts = {}
    for model in config["models"]:
        parameters, width = model_parameters(config, model)
        trained = 0 if config["models"][model].get("lora") else parameters  # a LoRA adapter is small
        cells = [cell for cell in study.rl_cells(config) if cell["model"] == model]
        snapshots = len(study.model_checkpoints(config, model)) + 1
        sft_models = len({study.sft_folder(config, model, dataset) for dataset in study.model_datasets(config, model)})
        parts[model] = len(cells) * (snapshots * width * parameters + 2 * (width * parameters + 8 * trained)) \
            + sft_models * width * parameters
    return sum(parts.values()), {model: size / 1e9 for model, size in parts.items()}


def model_parameters(config: dict, model: str) -> tuple[int, int]:
    """(parameters, bytes per saved parameter) of a model: the tiny model counted as built, a local folder
    from its safetensors, a hub model from the cached snapshot's safetensors or else the size in its name."""
    spec = config["models"][model]
    if spec["source"] == "tiny":
        import torch

        from grpo_lambda import tiny

        architecture = dict(spec.get("tiny", {}))
        tokenizer = tiny.build_tokenizer(architecture.pop("template", "chatml"))
        architecture.pop("seed", None)
        with torch.device("meta"):
            built = tiny.build_model(tokenizer, **architecture)
        return sum(p.numel() for p in built.parameters()), 4
    folder = Path(spec["source"])
    if not folder.is_dir():
        from grpo_lambda import prefetch

        cached = Path(prefetch.hub_cache()) / f"models--{spec['source'].replace('/', '--')}" / "snapshots"
        folder = next(iter(sorted(cached.glob("*"))), cached)
    weights = sum(path.stat().st_size for path in folder.glob("*.safetensors")) if folder.is_dir() else 0
    if weights:
        return weights // 2, 2
    size = re.search(r"(\d+(?:\.\d+)?)[bB]\b", spec["source"])
    if not size:
        raise Skip(f"models.{model}: {spec['source']} is not cached and its name gives no size; run prefetch first")
    return int(float(size[1]) * 1e9), 2
