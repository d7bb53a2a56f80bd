"""grpo-lambda preflight: whether this node is ready for the grid, in minutes, before it spends GPU-days.

One line per check (ok, fail or skip, and why), then a go/no-go and a JSON record of every number:

    versions       the Python packages the jobs import, their versions, torch's CUDA and NCCL
    cuda           every visible GPU answers: a matrix product on each against the CPU's
    bf16           bfloat16 is supported and its matrix product agrees with float32
    all-reduce     torch.distributed across the visible GPUs (NCCL, one spawned process per GPU): the
                   sum is right, and its bus bandwidth; on a CPU, gloo across 2 processes (the CPU jobs'
                   backend); one GPU: nothing to reduce
    hub            every hub model and dataset of --configfile is in the hub cache ($HF_HOME), or else
                   reachable (then the prefetch rule downloads it)
    disk           free space where the results go, against an estimate of what the grid writes
    step-ratio     benchmarks/bench_step.py on the Qwen2.5-1.5B shape (the tiny model on a CPU): GRPO-λ's
                   loss + backward against TRL's GRPO, goal ≤ 1.03
    study          the embedded default (config/config.yaml) for one seed, stage by stage through the CLI
                   (Snakemake is not needed on the node): every stage runs, and RL beats SFT
    vllm-colocate  a 2-step train cell with TRL's colocated vLLM and its weight sync, when vLLM is installed

--quick skips the last three (the slow ones); once a check has failed (the verdict is no-go whatever
follows) the slow ones are skipped too, saying so. --cpu is for a node without a GPU: the GPU checks are
skipped instead of failed, and the study check runs a small built-in study (``small_study``: the default's
task at its first level, a 2-layer model, 240 SFT steps on 128 sums, 2 RL steps, 2 benchmarks of 20 problems:
every stage must run and every RL step be logged with a finite loss, RL need not beat SFT) unless
--study-config names one, so that the whole run answers in minutes on 2 cores. Any study that learned nothing
(accuracy 0 for every arm and every RL group's rewards equal: ``nothing_learned``) is a no-go, naming why. A slow check prints a line as each stage starts and every
``PROGRESS_SECONDS`` while one runs. The record is written after every check (a partial one on Ctrl-C,
marked ``interrupted``). It is a CLI stage rather than a script so that the jobs' own environment runs it,
as one job of the cluster (`srun --gpus 4 grpo-lambda preflight --configfile config/paper.yaml`).
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

CHECKS = ("versions", "cuda", "bf16", "all-reduce", "hub", "disk", "step-ratio", "study", "vllm-colocate")
SLOW = ("step-ratio", "study", "vllm-colocate")
REQUIRED_PACKAGES = ("torch", "transformers", "trl", "accelerate", "peft", "datasets", "math-verify", "jsonschema")
REPOSITORY = Path(__file__).resolve().parents[2]
STEP_RATIO_GOAL = 1.03
# The variants of the step-ratio check: the relative form the paper states and the released code's absolute one.
STEP_VARIANTS = ("grpo-lambda-recent", "grpo-lambda-absolute")
# A slow check's running stage is reported this often (seconds), so that a long stage never looks hung.
PROGRESS_SECONDS = 30
# The study --cpu runs unless --study-config names one: config/config.yaml made small enough to run every stage
# in a few minutes on 2 cores (the default's 940-step SFT alone takes 15 on them).
SMALL_STUDY = {"models": {"tiny": {"tiny": {"num_hidden_layers": 2, "intermediate_size": 256}}},
               "datasets": {"arith": {"n": 128, "levels": [1], "carry_error_rate": 0.5}},
               "sft": {"num_train_epochs": 30, "learning_rate": 3.0e-3, "max_length": 96},
               "rl": {"max_steps": 2, "per_device_train_batch_size": 16, "max_completion_length": 48, "save_steps": 5,
                      "log_completions": None},
               "evaluation": {"max_new_tokens": 48}}
SMALL_BENCHMARKS = 2
SMALL_BENCHMARK_ROWS = 20
DEFAULT_STUDY = "config/config.yaml"


class Skip(Exception):
    """The check does not apply here; its message says why."""


class Fail(Exception):
    """The check failed; its message says what to do."""


class Context:
    def __init__(self, config: dict, *, cpu: bool, work: Path, study_config: str | None, out=print):
        import torch

        # --cpu without --study-config: the small built-in study (SMALL_STUDY)
        self.small_study = cpu and study_config is None
        self.config, self.cpu, self.work, self.study_config = config, cpu, work, study_config or DEFAULT_STUDY
        self.gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        self.study_results: Path | None = None  # the study's results folder, once it ran
        self.out, self.check = out, ""  # where progress lines go, and the check that prints them

    def progress(self, text: str) -> None:
        self.out(f"  .. {self.check:14} {text}")


def run(config: dict, *, cpu: bool = False, quick: bool = False, skip=(), work: str = "results/preflight",
        study_config: str | None = None, out=print, save=None) -> dict:
    """Run the checks in order, printing one line each; the record (verdict, checks) is returned, and given to
    ``save`` after every check. Once a check fails the slow ones are skipped (the verdict is no-go already).
    Ctrl-C ends the check under way as failed and the rest as skipped: the record says ``interrupted``."""
    context = Context(config, cpu=cpu, work=Path(work), study_config=study_config, out=out)
    context.work.mkdir(parents=True, exist_ok=True)
    checks = []
    interrupted = False
    for name in CHECKS:
        start = time.perf_counter()
        details = {}
        failed = next((check["name"] for check in checks if check["status"] == "fail"), None)
        if interrupted:
            status, reason = "skip", "interrupted"
        elif name in skip:
            status, reason = "skip", "--skip"
        elif quick and name in SLOW:
            status, reason = "skip", "--quick"
        elif failed and name in SLOW:
            status, reason = "skip", f"{failed} failed: no-go already, the slow checks are left out"
        else:
            context.check = name
            try:
                reason, details = globals()[f"check_{name.replace('-', '_')}"](context)
                status = "ok"
            except Skip as why:
                status, reason = "skip", str(why)
            except Fail as why:
                status, reason = "fail", str(why)
            except KeyboardInterrupt:
                status, reason, interrupted = "fail", "interrupted (Ctrl-C)", True
            except Exception as error:  # a check that breaks is a failed check, not a broken preflight
                status, reason = "fail", f"{type(error).__name__}: {error}"
        seconds = time.perf_counter() - start
        checks.append({"name": name, "status": status, "reason": reason, "seconds": round(seconds, 1),
                       "details": details})
        out(f"{status:4} {name:14} {reason} ({seconds:.0f} s)")
        if save is not None:
            save(_record(checks, cpu=cpu, quick=quick, interrupted=interrupted, complete=False))
    record = _record(checks, cpu=cpu, quick=quick, interrupted=interrupted, complete=True)
    counts = record["counts"]
    skipped = ", ".join(check["name"] for check in checks if check["status"] == "skip")
    out(f"preflight: {record['verdict']} ({counts['ok']} ok, {counts['fail']} failed, {counts['skip']} skipped"
        + (f": {skipped})" if skipped else ")") + (", interrupted" if interrupted else ""))
    if not cpu and not context.gpus and not interrupted:
        out("preflight: this machine has no GPU: pass --cpu to check it as a CPU node "
            "(grpo-lambda preflight --cpu answers in minutes)")
    if save is not None:
        save(record)
    return record


def _record(checks: list[dict], *, cpu: bool, quick: bool, interrupted: bool, complete: bool) -> dict:
    """The JSON record of the checks so far; ``complete`` False while checks remain (a partial record)."""
    counts = {status: sum(check["status"] == status for check in checks) for status in ("ok", "fail", "skip")}
    verdict = "no-go" if counts["fail"] or interrupted else ("go" if complete else "unfinished")
    return {"verdict": verdict, "host": socket.gethostname(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cpu": cpu, "quick": quick, "interrupted": interrupted, "complete": complete, "counts": counts,
            "checks": list(checks)}


# --- the checks: each returns (reason, details) or raises Skip / Fail ------------------------------------


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


def check_step_ratio(context):
    bench = REPOSITORY / "benchmarks" / "bench_step.py"
    if not bench.is_file():
        raise Skip(f"no {bench}: run the preflight from the repository's checkout")
    shape = ["--device", "cuda", "--shape", "qwen2.5-1.5b"] if context.gpus else ["--shape", "tiny"]
    if not context.gpus and not context.cpu:
        raise Skip("no GPU")
    record = context.work / "step-ratio.json"
    command = [sys.executable, str(bench), *shape, "--completion-length", "256", "--rounds", "3", "--iterations", "2",
               "--variants", *STEP_VARIANTS, "--json", str(record)]
    context.progress(f"benchmarks/bench_step.py --shape {shape[-1]} (log: {context.work / 'step-ratio.log'})")
    _run_logged(command, context.work / "step-ratio.log", timeout=900, progress=context.progress)
    rows = {row["variant"]: row for row in json.loads(record.read_text())["rows"]}
    # the loss-only estimate: low-noise where the whole call's time scatters (a shared CPU)
    worst = max(rows[name]["ratio_from_loss_only"] for name in STEP_VARIANTS)
    words = (f"{shape[-1]}: GRPO-λ ÷ TRL's GRPO " + ", ".join(f"{name.removeprefix('grpo-lambda-')} "
                                                               f"{rows[name]['ratio']:.3f}" for name in STEP_VARIANTS)
             + f" per call, {worst:.4f} from the loss alone (goal ≤ {STEP_RATIO_GOAL})")
    if worst > STEP_RATIO_GOAL:
        raise Fail(words)
    return words, rows


def check_study(context):
    from grpo_lambda import config as study

    config = study.load(context.study_config)
    if context.small_study:
        config = small_study(config)
    config.update(seeds=[0], results=str(context.work / "study"))
    # one torch thread a stage on a CPU: the stages run one after another, and two threads on two busy cores spin
    # (measured here: the small study's SFT took 97 s of processor time for half its steps with 2, 22 s with 1)
    commands = study_commands(config, threads=1 if context.small_study else None)
    times = {}
    for index, (label, command) in enumerate(commands, 1):
        log = context.work / "study" / "logs" / f"{label.replace('/', '_')}.log"
        context.progress(f"stage {index}/{len(commands)} {label} (log: {log})")
        start = time.perf_counter()
        _run_logged(command, log, timeout=1800, progress=context.progress)
        times[label] = round(time.perf_counter() - start, 1)
    context.study_results = Path(config["results"])
    accuracy = study_accuracies(config)
    logs = study_train_logs(config)
    words = (("the small built-in study (--cpu): " if context.small_study else "")
             + f"{len(commands)} stages in {sum(times.values()):.0f} s; accuracy "
             + ", ".join(f"{arm} {value:.3f}" for arm, value in accuracy.items()))
    details = {"seconds": times, "accuracy": accuracy, "results": config["results"], "small": context.small_study,
               "train_logs": logs}
    steps = config["rl"]["max_steps"]
    short = [f"{cell} ({logged} of {steps} steps{'' if finite else ', a loss not finite'})"
             for cell, (logged, finite, _) in logs.items() if logged != steps or not finite]
    if short and context.small_study:  # its settings log every step
        raise Fail(words + f"; RL cells without their steps: {', '.join(short)}")
    nothing = nothing_learned(accuracy, logs)
    if nothing:
        raise Fail(words + f"; {nothing}")
    if context.small_study:  # 2 RL steps judge no accuracy: every step must have run, and something been learned
        flat = [share for _, _, share in logs.values() if share is not None]
        return (words + f"; every RL cell logged its {steps} steps with finite losses"
                + (f" (groups with equal rewards: {sum(flat) / len(flat):.0%})" if flat else "")
                + "; whether RL beats SFT is a full study's question (--study-config)"), details
    behind = [arm for arm, value in accuracy.items() if arm != "sft" and not value > accuracy["sft"]]
    if behind:
        raise Fail(words + f"; RL did not beat SFT: {', '.join(behind)}")
    return words, details


def nothing_learned(accuracy: dict, train_logs: dict) -> str | None:
    """Why a study learned nothing, or None: every arm's accuracy (SFT's and each variant's, ``study_accuracies``)
    is 0 and every RL step of every cell had all of its groups' rewards equal (``study_train_logs``: TRL's
    frac_reward_zero_std 1 throughout), so no advantage was ever nonzero. Stages that run and learn nothing check
    nothing a grid needs."""
    flat = [share for _, _, share in train_logs.values()]
    if not accuracy or any(value > 0 for value in accuracy.values()):
        return None
    if not flat or any(share is None or share < 1.0 for share in flat):
        return None
    return (f"nothing was learned: accuracy 0 for every arm ({', '.join(accuracy)}) and every group of every RL step "
            f"got equal rewards ({len(flat)} cell(s), frac_reward_zero_std 1 throughout), so every advantage was 0: "
            "the SFT model never reaches a rewarded answer (check the model's prompt.txt, the answers and the reward)")


def small_study(config: dict) -> dict:
    """A study made small (SMALL_STUDY over it, its first SMALL_BENCHMARKS benchmarks of SMALL_BENCHMARK_ROWS
    problems each) for the study check of --cpu."""
    from grpo_lambda import config as study

    small = study.merge(copy.deepcopy(config), {key: value for key, value in SMALL_STUDY.items() if key != "datasets"})
    for name, spec in SMALL_STUDY["datasets"].items():
        if name in small["datasets"]:
            small["datasets"][name] = {**small["datasets"][name], **spec}
    small["benchmarks"] = {name: {**spec, "n": min(spec.get("n", SMALL_BENCHMARK_ROWS), SMALL_BENCHMARK_ROWS)}
                           if spec.get("source") == "synthetic" else spec
                           for name, spec in list(config["benchmarks"].items())[:SMALL_BENCHMARKS]}
    return study.validate(small, source="the small built-in study")


def study_train_logs(config: dict) -> dict:
    """Each RL cell's logged steps, as (steps logged, whether every loss is finite, the mean share of groups whose
    rewards were all equal: frac_reward_zero_std)."""
    import math

    from grpo_lambda import config as study
    from grpo_lambda import layout
    from grpo_lambda.status import read_train_log

    found = {}
    for cell in study.rl_cells(config):
        name = layout.cell(cell["model"], cell["dataset"], cell["variant"], cell["seed"])
        rows = read_train_log(Path(config["results"]) / layout.train_log(cell["model"], cell["dataset"],
                                                                          cell["variant"], cell["seed"]))
        flat = [row["frac_reward_zero_std"] for row in rows if row.get("frac_reward_zero_std") is not None]
        found[name] = (len(rows), all(isinstance(row.get("loss"), float) and math.isfinite(row["loss"]) for row in rows),
                       sum(flat) / len(flat) if flat else None)
    return found


def study_commands(config: dict, threads: int | None = None) -> list[tuple[str, list[str]]]:
    """The default study's stages for its seeds as the workflow's rules run them (their --settings JSON),
    in an order that respects the DAG; ``threads``: the torch threads of the stages that train or evaluate (the
    rules' --threads; None: torch's default). For configs of its kind: tiny or local models, SFT on the training
    sets' solutions, final evaluations only."""
    from grpo_lambda import config as study
    from grpo_lambda import layout

    results = config["results"]
    cli = [sys.executable, "-m", "grpo_lambda.cli"]

    def settings(stage, **cell):
        return json.dumps(study.stage_settings(config, stage, **cell), sort_keys=True)

    benches = [f"{results}/bench/{benchmark}.jsonl" for benchmark in config["benchmarks"]]
    threaded = ["--threads", str(threads)] if threads else []
    commands = []
    for model, spec in config["models"].items():
        if study.sft_uses_self_distillation(config, model) or study.sft_is_shared(config, model):
            raise Skip(f"models.{model}: the study check runs configs whose SFT trains on the training set's solutions")
        if spec["source"] == "tiny":
            commands.append((f"build_tiny/{model}", [*cli, "build-tiny", "--settings", settings("build_tiny", model=model),
                                                     "--out", f"{results}/models/{model}"]))
    for group, key in (("datasets", "dataset"), ("benchmarks", "benchmark")):
        for name in config[group]:
            out = f"{results}/data/{name}.jsonl" if key == "dataset" else f"{results}/bench/{name}.jsonl"
            commands.append((f"prepare/{name}", [*cli, "prepare", "--settings", settings("prepare", **{key: name}),
                                                 "--out", out]))
    for model, spec in config["models"].items():
        base = f"{results}/models/{model}" if spec["source"] == "tiny" else spec["source"]
        for dataset in study.model_datasets(config, model):
            sft_model = f"{results}/{study.sft_folder(config, model, dataset)}/model"
            commands.append((f"sft/{model}/{dataset}", [
                *cli, "sft", "--settings", settings("sft", model=model, dataset=dataset), "--base", base,
                "--data", f"{results}/data/{dataset}.jsonl", "--out", sft_model, *threaded]))
            commands.append((f"evaluate/{model}/{dataset}/sft", [
                *cli, "evaluate", "--settings", settings("evaluate", model=model, dataset=dataset, variant="sft"),
                "--checkpoint", sft_model, "--bench", *benches,
                "--out-dir", f"{results}/{layout.sft(model, dataset)}/eval/final", *threaded]))
    for cell in study.rl_cells(config):
        model, dataset, variant, seed = cell["model"], cell["dataset"], cell["variant"], str(cell["seed"])
        folder = f"{results}/{layout.cell(model, dataset, variant, seed)}"
        commands.append((f"train/{layout.cell(model, dataset, variant, seed)}", [*train_command(
            config, model, dataset, variant, seed, f"{results}/{study.sft_folder(config, model, dataset)}/model"),
            *threaded]))
        commands.append((f"evaluate/{layout.cell(model, dataset, variant, seed)}", [
            *cli, "evaluate", "--settings", settings("evaluate", model=model, dataset=dataset, variant=variant),
            "--checkpoint", f"{folder}/model", "--bench", *benches, "--out-dir", f"{folder}/eval/final",
            "--seed", seed, "--step", "final", *threaded]))
    whole = json.dumps(config, sort_keys=True)
    commands.append(("aggregate", [*cli, "aggregate", "--settings", whole, "--results", results,
                                   "--out", f"{results}/tables"]))
    commands.append(("figures", [*cli, "figures", "--settings", whole, "--tables", f"{results}/tables",
                                 "--out", f"{results}/figures"]))
    return commands


def train_command(config: dict, model: str, dataset: str, variant: str, seed, base: str) -> list[str]:
    from grpo_lambda import config as study
    from grpo_lambda import layout

    settings = study.stage_settings(config, "train", model=model, dataset=dataset, variant=variant)
    return [sys.executable, "-m", "grpo_lambda.cli", "train", "--settings", json.dumps(settings, sort_keys=True),
            "--base", base, "--data", f"{config['results']}/data/{dataset}.jsonl",
            "--cell", f"{config['results']}/{layout.cell(model, dataset, variant, seed)}", "--seed", str(seed)]


def study_accuracies(config: dict) -> dict:
    """Mean accuracy over the benchmarks (and cells) of the SFT models and of each variant's final models."""
    from grpo_lambda import config as study
    from grpo_lambda import layout

    results = Path(config["results"])

    def mean(paths):
        values = [json.loads((results / path).read_text())["accuracy"] for path in paths]
        return sum(values) / len(values)

    arms = {"sft": mean([layout.sft_evaluation(model, dataset, benchmark, "json")
                         for model in config["models"] for dataset in study.model_datasets(config, model)
                         for benchmark in config["benchmarks"]])}
    for variant in config["variants"]:
        arms[variant] = mean([layout.evaluation(cell["model"], cell["dataset"], variant, cell["seed"], "final",
                                                benchmark, "json")
                              for cell in study.rl_cells(config) if cell["variant"] == variant
                              for benchmark in config["benchmarks"]])
    return arms


def check_vllm_colocate(context):
    """Two steps of a train cell that generates with TRL's colocated vLLM, whose weights TRL syncs from the
    trained model before each generation."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        raise Skip("vLLM is not installed (envs/requirements-gpu.txt installs it)") from None
    if not context.gpus:
        raise Skip("no GPU: vLLM's CPU build cannot take TRL's weight sync (tests/test_vllm.py)")
    from grpo_lambda import config as study
    from grpo_lambda import layout

    config = study.load(context.study_config)
    model, dataset = next(iter(config["models"])), next(iter(config["datasets"]))
    variant = next((name for name, spec in config["variants"].items() if spec.get("objective") == "grpo_lambda"),
                   next(iter(config["variants"])))
    config.update(seeds=[0], results=str(context.work / "vllm"))
    config["rl"].update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3, max_steps=2)
    results = config["results"]
    sft = context.study_results / study.sft_folder(config, model, dataset) / "model" if context.study_results else None
    commands = []
    if sft is not None and sft.is_dir():  # from the study's SFT model: rewards differ, so the weights move
        base = str(sft)
    else:  # from the untrained tiny model: the steps run, though its rewards may all be 0
        base = f"{results}/models/{model}"
        commands = [command for label, command in study_commands(config) if label == f"build_tiny/{model}"]
    commands += [command for label, command in study_commands(config) if label == f"prepare/{dataset}"]
    commands.append(train_command(config, model, dataset, variant, 0, base))
    for index, command in enumerate(commands):
        _run_logged(command, context.work / "vllm" / f"stage{index}.log", timeout=900)
    import pandas

    log = pandas.read_csv(Path(config["results"]) / layout.train_log(model, dataset, variant, 0))
    if len(log) < 2:
        raise Fail(f"the cell logged {len(log)} steps, not 2 ({context.work / 'vllm'})")
    return (f"2 steps of {variant} with colocated vLLM from {base}; "
            f"reward {log['reward'].iloc[-1]:.3f}"), {"rows": log.to_dict("records")}


def _run_logged(command: list[str], log: Path, *, timeout: float, progress=None) -> None:
    """Run a command with its output in `log`; Fail with the log's last line when it exits non-zero.
    ``progress`` (a callable taking a line) hears every PROGRESS_SECONDS how long it has run and the log's last
    line. Ctrl-C ends the command before it reaches the caller."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
           "HF_DATASETS_OFFLINE": os.environ.get("HF_DATASETS_OFFLINE", "1")}
    start = time.monotonic()
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                try:
                    code = process.wait(timeout=PROGRESS_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if elapsed > timeout:
                        raise Fail(f"{' '.join(command[1:3])} ran past {timeout:.0f} s (log: {log})") from None
                    if progress is not None:
                        last = _last_line(log)[:120]
                        progress(f"{elapsed:.0f} s" + (f": {last}" if last else ", nothing logged yet"))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    if code:
        raise Fail(f"{' '.join(command[1:4])} exited {code}: {_last_line(log)} (log: {log})")


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def write(record: dict, path: Path) -> None:
    from grpo_lambda import files

    files.write_json(path, record)
