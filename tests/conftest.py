import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
E2E_CONFIG = ROOT / "tests" / "data" / "config-e2e.yaml"

# Tests run the CLI as a user would; it must be the one of this interpreter's environment.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Idle OpenMP threads sleep instead of spinning (set before torch loads its OpenMP runtime): on a machine
# whose cores other work shares, torch's spinning threads took 40% more CPU on tests/test_trainer.py and ran
# the suite's torch tests several times slower (benchmarks/README.md). Results do not change.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def snakemake(*args, workdir: Path | None = None, configfiles=(), targets=(), check: bool = True, timeout: int = 1800,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """The project's Snakefile run as a user runs it, in ``workdir`` (the repository when None), with
    ``configfiles`` and then ``args``. Targets come first: --configfile takes several values and would
    swallow them. ``check``: a failure fails the test with the end of Snakemake's output."""
    command = [sys.executable, "-m", "snakemake", *map(str, targets), "--snakefile", str(ROOT / "Snakefile")]
    if workdir is not None:
        command += ["--directory", str(workdir)]
    if configfiles:
        command += ["--configfile", *map(str, configfiles)]
    result = subprocess.run([*command, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)
    if check:
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


# The environment a cluster profile's plan needs (workflow/profiles/slurm reads both variables).
CLUSTER_ENV = {"GRPO_LAMBDA_PARTITION": "gpu", "GRPO_LAMBDA_ACCOUNT": "myproject"}


@functools.cache
def _empty_hf_home() -> str:
    return tempfile.mkdtemp(prefix="grpo-lambda-test-hf-")


@functools.cache
def planned(*words: str, cluster: bool = False) -> subprocess.CompletedProcess:
    """A command (``snakemake -n ...`` as a user types it) run once per test session in the repository and its
    result shared by every test that reads the same plan: planning the paper grid takes seconds, and several
    tests read one plan. ``cluster``: with CLUSTER_ENV set and a session's own empty HF_HOME."""
    env = {**os.environ, **CLUSTER_ENV, "HF_HOME": _empty_hf_home()} if cluster else None
    return subprocess.run(list(words), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def paper_plan() -> str:
    """The paper grid's plan (``snakemake -n --configfile config/paper.yaml``), its job table and every job."""
    result = planned(sys.executable, "-m", "snakemake", "-n", "--configfile", "config/paper.yaml")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout + result.stderr


def paper_slurm_plan() -> str:
    """The paper grid's plan through the SLURM profile, as docs/cluster.md's command (the profile prints each
    job's shell command)."""
    result = planned("snakemake", "-n", "--profile", "workflow/profiles/slurm", "--configfile", "config/paper.yaml",
                     cluster=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout + result.stderr


# ------------------------------------------------------------------------------------------------
# Tests marked `gpu`: run where torch sees a CUDA device, skipped with the reason elsewhere
# ------------------------------------------------------------------------------------------------

# GRPO_LAMBDA_GPU_TESTS_ON=cpu runs the gpu tests on the CPU (their device fixture gives "cpu" and the trace
# operator takes the GPU's dispatch): a check of the tests themselves where there is no GPU, not of a GPU.
GPU_TESTS_ON = os.environ.get("GRPO_LAMBDA_GPU_TESTS_ON", "cuda")


# The test files whose slow tests take longest, longest first (docs/testing.md's CI figures), then the other
# slow tests: on several workers (pytest -n) they start first, on different workers (_deal_longest), and the
# run does not end on one worker still in the rehearsal.
LONGEST_FIRST = ("test_rehearsal.py", "test_default_sft.py", "test_pipeline.py", "test_vllm.py", "test_preflight.py",
                 "test_spread.py", "test_nested_study.py", "test_multinode.py",
                 "test_seed_interval.py", "test_resume.py")


def _run_order(item) -> tuple:
    file = item.path.name
    return ("slow" not in item.keywords, LONGEST_FIRST.index(file) if file in LONGEST_FIRST else len(LONGEST_FIRST))


def _deal_longest(items: list, workers: int) -> None:
    """Under ``pytest -n N --dist loadfile --no-loadscope-reorder`` (scripts/run_tests.sh) xdist hands out
    whole files in this order, one to each worker, then a second to each, then one to whichever worker frees
    first: the N longest files first, then N short ones (so no long file waits behind another), then the rest.
    A file stays on one worker, so a module's fixture (the rehearsal, the pipeline run) is made once."""
    files = list(dict.fromkeys(item.path for item in items))
    if workers < 2 or len(files) < 2 * workers:
        return
    slow = {item.path for item in items if "slow" in item.keywords}
    short = [path for path in files[workers:] if path not in slow][-workers:]
    order = files[:workers] + short + [path for path in files[workers:] if path not in short]
    position = {path: index for index, path in enumerate(order)}
    items.sort(key=lambda item: position[item.path])


def pytest_collection_modifyitems(config, items):
    items.sort(key=_run_order)  # stable: each file's tests keep their order
    _deal_longest(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")))
    gpu_tests = [item for item in items if "gpu" in item.keywords]
    if not gpu_tests or GPU_TESTS_ON == "cpu":
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no CUDA device (torch {torch.__version__}, built for CUDA "
                                   f"{torch.version.cuda or 'none'}): run on a GPU machine (docs/testing.md)")
    for item in gpu_tests:
        item.add_marker(skip)


@pytest.fixture
def gpu_device(monkeypatch):
    """The device of a `gpu` test: "cuda", or "cpu" under GRPO_LAMBDA_GPU_TESTS_ON=cpu, where the trace
    operator is made to dispatch as on CUDA."""
    if GPU_TESTS_ON == "cpu":
        from grpo_lambda import traces

        monkeypatch.setattr(traces, "DENSE_DEVICES", ("cpu", "cuda"))
        return "cpu"
    return "cuda"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A small tiny model (and its tokenizer) saved once for the whole session."""
    from grpo_lambda import tiny

    folder = tmp_path_factory.mktemp("tiny") / "model"
    tiny.build(str(folder), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    return folder


class CliResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def run_main(*args, cwd: Path | str | None = None) -> CliResult:
    """``grpo-lambda ARGS`` run in this process by ``grpo_lambda.cli.main``, as a test of the CLI's logic: its
    exit status and what it printed (log lines go to pytest's log capture, not to ``stderr``). A test of the
    command as a process (its entry point, its environment, signals) starts one instead (fixture ``cli``);
    this saves the seconds each such process spends importing torch and transformers again."""
    from grpo_lambda.cli import main

    out, err = io.StringIO(), io.StringIO()
    returncode = 0
    threads = None
    if "--threads" in map(str, args):  # the command sets this process's torch threads: the next test gets its own back
        import torch

        threads = torch.get_num_threads()
    try:
        with contextlib.chdir(cwd or os.getcwd()), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(arg) for arg in args])
            except SystemExit as exit_info:
                if isinstance(exit_info.code, str):
                    print(exit_info.code, file=sys.stderr)
                returncode = exit_info.code if isinstance(exit_info.code, int) else int(exit_info.code is not None)
    finally:
        if threads is not None:
            sys.modules["torch"].set_num_threads(threads)
    return CliResult(returncode, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def cli():
    path = shutil.which("grpo-lambda")
    if path is None:
        pytest.skip("the grpo-lambda command is not installed (pip install -e .)")
    return path


# ------------------------------------------------------------------------------------------------
# Evidence that RL trained: read from a finished run's own files (weights and train_log.csv)
# ------------------------------------------------------------------------------------------------


def model_weights(folder: Path) -> dict:
    """Every tensor of a saved model folder (its safetensors files)."""
    from safetensors.torch import load_file

    weights = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        weights.update(load_file(path))
    assert weights, f"no weights in {folder}"
    return weights


def largest_weight_change(before: Path, after: Path) -> float:
    """max |w_after − w_before| over every tensor; the two folders must hold the same tensors."""
    a, b = model_weights(before), model_weights(after)
    assert a.keys() == b.keys(), (before, after)
    return max((b[name].float() - a[name].float()).abs().max().item() for name in a)


# PEFT's "all-linear": every linear layer of the decoder blocks, not the output layer
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def changed_weights(before: Path, after: Path) -> dict:
    """name -> after − before (float64) for every tensor of two saved models that differs."""
    a, b = model_weights(before), model_weights(after)
    assert a.keys() == b.keys(), (before, after)
    deltas = {name: b[name].double() - a[name].double() for name in a}
    return {name: delta for name, delta in deltas.items() if delta.abs().max() > 0}


def matrix_rank(delta) -> int:
    """A weight change's rank, relative to its largest singular value, above the float32 rounding of saved
    weights (a LoRA update of rank r merged into its base changes each target matrix by rank ≤ r)."""
    import torch

    return int(torch.linalg.matrix_rank(delta, rtol=1e-4))


def rl_learning_problems(results: Path, config: dict) -> list[str]:
    """What shows that RL did not train, cell by cell ([] when every cell learned).

    A cell learned when, in its train_log.csv, some group's rewards disagree (frac_reward_zero_std < 1) on
    at least half of the steps that generated, the loss is nonzero on at least half of the steps, the KL to the
    reference is positive at the last step where β > 0; when its final model and every step snapshot
    differ from the SFT model it started from; and when each variant's final model differs from every
    other variant's of the same model, training set and seed.
    """
    import pandas as pd

    from grpo_lambda import config as study

    problems, finals = [], {}
    for cell in study.rl_cells(config):
        name = f"{cell['model']}/{cell['dataset']}/{cell['variant']}/seed{cell['seed']}"
        folder = results / name
        log = pd.read_csv(folder / "train_log.csv")
        generated = log.dropna(subset=["reward"])
        if not len(generated) or (generated["frac_reward_zero_std"] < 1).mean() < 0.5:
            problems.append(f"{name}: no group's rewards disagreed on most generation steps "
                            f"(frac_reward_zero_std {list(generated['frac_reward_zero_std'])})")
        if (log["loss"].abs() > 0).mean() < 0.5:
            problems.append(f"{name}: loss 0 on most steps {list(log['loss'])}")
        beta = config["models"][cell["model"]].get("rl", {}).get("beta", config["rl"].get("beta", 0.0))
        if beta > 0 and not log["kl"].iloc[-1] > 0:
            problems.append(f"{name}: β = {beta} but the KL at the last step is {log['kl'].iloc[-1]}")
        sft = results / study.sft_folder(config, cell["model"], cell["dataset"]) / "model"
        for snapshot in [*sorted((folder / "checkpoints").glob("step-*")), folder / "model"]:
            if largest_weight_change(sft, snapshot) == 0:
                problems.append(f"{name}: {snapshot.name} is byte-identical to the SFT model")
        same_start = (cell["model"], cell["dataset"], cell["seed"])
        finals.setdefault(same_start, []).append((cell["variant"], folder / "model"))
    for variants in finals.values():
        for index, (variant, model) in enumerate(variants):
            for other, other_model in variants[index + 1:]:
                if largest_weight_change(model, other_model) == 0:
                    problems.append(f"{model}: variants {variant} and {other} trained identical weights")
    return problems


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny Llama (hidden 32, 2 layers) and its character tokenizer, saved so TRL can load a reference copy
    (the trainer tests' model: tests/trainer_batch.py builds trainers and batches on it)."""
    from grpo_lambda import tiny

    path = tmp_path_factory.mktemp("tiny") / "model"
    tiny.build(str(path), seed=0, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               max_position_embeddings=64)
    return str(path)


@pytest.fixture(scope="module")
def fingerprint_inputs(tmp_path_factory):
    """(base model folder, data file): stand-ins that a resume fingerprint hashes (fingerprint.compute)."""
    folder = tmp_path_factory.mktemp("fingerprint-inputs")
    (folder / "base").mkdir()
    (folder / "base" / "config.json").write_text("{}")
    (folder / "data.jsonl").write_text('{"id": "a", "problem": "1+1", "answer": "2"}\n')
    return str(folder / "base"), str(folder / "data.jsonl")


@pytest.fixture(scope="module")
def tree_config():
    """The synthetic results tree's config (a test module may override this fixture to shrink the tree)."""
    from results_tree import make_config

    return make_config()


@pytest.fixture(scope="module")
def tree(tmp_path_factory, tree_config):
    """(root, config): the synthetic results tree of tests/results_tree.py, with accuracies known exactly."""
    from results_tree import build_tree

    root = tmp_path_factory.mktemp("results")
    build_tree(root, tree_config)
    return root, tree_config
