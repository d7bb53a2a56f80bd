"""One training job across several nodes: ``accelerate launch`` once per node, under SLURM.

A model with ``nodes: N`` (N > 1) runs its ``sft`` and ``train`` jobs as N-node SLURM jobs whose shell
runs ``python -m grpo_lambda.launch --nodes N ... -- <stage> <options>``. That starts ``srun`` with one
task per node in the job's allocation, and each task (``--node``) starts ``accelerate launch`` with the
machine count, its node's rank and the first node's address as the rendezvous, as open-r1's SLURM
recipe does. ``srun`` is handed the job id and none of the step variables of the shell it runs in:
Snakemake runs a job's shell inside a one-node job step, whose variables would confine the new step
to that node. A CPU rehearsal (one process per node) runs all of this on the local SLURM's two nodes
(tests/test_multinode.py).

``rl.vllm_mode: server`` (TRL's vLLM server for generation instead of an engine inside each training
process): a ``train`` job's shell runs ``python -m grpo_lambda.launch --vllm-server -- <launcher words>
train <options>``. That starts ``trl vllm-serve`` on the job's last ``GRPO_LAMBDA_VLLM_SERVER_GPUS`` GPUs
(default 1) for the cell's starting model (``--base``), waits until its ``/health`` answers, runs the
stage on the other GPUs with ``GRPO_LAMBDA_VLLM_SERVER`` naming the server (the train stage hands it
to TRL as ``vllm_server_base_url``), and stops the server when the stage ends, fails or is killed, as
open-r1's recipe serves from GPUs of its own (there: the job's last node). TRL syncs the trained
weights into the server before each generation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# accelerate's rendezvous port for a job: one per job id, so two jobs sharing a first node never collide.
PORT_BASE, PORT_SPAN = 20000, 20000
# The SLURM variables the per-node step is started with; the others describe the step it starts from.
KEPT_SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_CONF")


def launcher_words(*, nodes: int, processes_per_node: int, accelerate_config: str, cpu: bool) -> list[str]:
    """What the rule's shell runs before the stage's own words."""
    return ["python", "-m", "grpo_lambda.launch", "--nodes", str(nodes), "--processes-per-node",
            str(processes_per_node), "--accelerate-config", accelerate_config, *(["--cpu"] if cpu else []), "--"]


def srun_command(environ: dict, *, nodes: int, processes_per_node: int, accelerate_config: str, cpu: bool,
                 stage_args: list[str]) -> tuple[list[str], dict]:
    """``srun`` of one node launcher per node in the job's allocation, and the environment to run it in."""
    job = _required(environ, "SLURM_JOB_ID")
    env = {key: value for key, value in environ.items()
           if not key.startswith("SLURM_") or key in KEPT_SLURM_VARIABLES}
    command = ["srun", f"--jobid={job}", "--overlap", f"--nodes={nodes}", f"--ntasks={nodes}",
               "--ntasks-per-node=1", "--kill-on-bad-exit=1", "python", "-m", "grpo_lambda.launch", "--node",
               "--nodes", str(nodes), "--processes-per-node", str(processes_per_node),
               "--accelerate-config", accelerate_config, *(["--cpu"] if cpu else []), "--", *stage_args]
    return command, env


def first_node_address(nodelist: str) -> str:
    """The address of the allocation's first node: its NodeAddr in SLURM (the hostname on most
    clusters; not the node name where several slurmd share a host)."""
    first = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                           check=True, timeout=60).stdout.split()[0]
    shown = subprocess.run(["scontrol", "show", "node", first, "--oneliner"], capture_output=True, text=True,
                           timeout=60)
    match = re.search(r"\bNodeAddr=(\S+)", shown.stdout)
    return match[1] if shown.returncode == 0 and match else first


def accelerate_command(environ: dict, *, nodes: int, accelerate_config: str, processes_per_node: int, cpu: bool,
                       stage_args: list[str], address: str) -> list[str]:
    """``accelerate launch`` for this node, from its SLURM task's environment."""
    rank, job = int(_required(environ, "SLURM_NODEID")), int(_required(environ, "SLURM_JOB_ID"))
    if int(_required(environ, "SLURM_NNODES")) != nodes:
        raise RuntimeError(f"the step has {environ['SLURM_NNODES']} nodes, not the {nodes} asked for")
    port = PORT_BASE + job % PORT_SPAN
    return ["accelerate", "launch", "--config_file", accelerate_config, "--num_machines", str(nodes),
            "--machine_rank", str(rank), "--main_process_ip", address, "--main_process_port", str(port),
            "--num_processes", str(nodes * processes_per_node),
            *(["--mixed_precision", "no"] if cpu else []),  # as on one node: DDP on gloo, float32
            "-m", "grpo_lambda.cli", *stage_args]


# --- vLLM server mode --------------------------------------------------------------------------------

SERVER_VARIABLE = "GRPO_LAMBDA_VLLM_SERVER"  # the server's base URL, read by the train stage
SERVER_GPUS_VARIABLE = "GRPO_LAMBDA_VLLM_SERVER_GPUS"  # GPUs of the job that serve (default 1)
SERVER_PORT_BASE = 40000  # the server's port for a job: one per job id, as accelerate's rendezvous port
# The port of TRL's weight-sync group (vllm_group_port, 51216 by default for every job): one per job id
# too, so that two server-mode jobs on one node never bind the same one.
GROUP_VARIABLE = "GRPO_LAMBDA_VLLM_GROUP_PORT"
GROUP_PORT_BASE = 20000


def server_words(config: dict, model: str) -> list[str]:
    """The words a train job of the model starts with when it generates with a vLLM server, else none."""
    rl = {**config.get("rl", {}), **config["models"][model].get("rl", {})}
    if not (rl.get("use_vllm") and rl.get("vllm_mode") == "server"):
        return []
    return ["python", "-m", "grpo_lambda.launch", "--vllm-server", "--"]


def server_gpus(words: list[str], environ=os.environ) -> int:
    """The GPUs the server words take from the job (0 without them)."""
    return int(environ.get(SERVER_GPUS_VARIABLE, "1")) if "--vllm-server" in words else 0


def serve_command(model: str, *, port: int, gpus: int, max_model_len: int | None = None,
                  gpu_memory_utilization: float = 0.9) -> list[str]:
    """``trl vllm-serve`` for the model on ``gpus`` GPUs (tensor parallel: TRL serves a dense model with
    data parallelism 1), listening on every interface, so that another node can reach it."""
    return ["trl", "vllm-serve", "--model", model, "--port", str(port), "--host", "0.0.0.0",
            "--tensor_parallel_size", str(gpus), "--gpu_memory_utilization", str(gpu_memory_utilization),
            *(["--max_model_len", str(max_model_len)] if max_model_len else [])]


def split_gpus(visible: str | None, count: int, server_gpus: int) -> tuple[str, str]:
    """(the stage's GPUs, the server's GPUs) as CUDA_VISIBLE_DEVICES lists: the server takes the last."""
    devices = visible.split(",") if visible else [str(index) for index in range(count)]
    if server_gpus < 1 or server_gpus >= len(devices):
        raise RuntimeError(f"vLLM server mode: the job has {len(devices)} GPU(s) ({','.join(devices) or 'none'}); "
                           f"{server_gpus} for the server leaves none to train on. Give the train rule more GPUs "
                           f"(--set-resources train:gpu=N) or set {SERVER_GPUS_VARIABLE}")
    return ",".join(devices[:-server_gpus]), ",".join(devices[-server_gpus:])


# Seconds between health checks of a starting server: a real one takes minutes to load its model.
HEALTH_POLL_SECONDS = 2.0


def wait_until_healthy(url: str, process: subprocess.Popen, *, timeout: float, interval: float | None = None) -> float:
    """Poll ``url`` (the server's /health) every ``interval`` seconds (HEALTH_POLL_SECONDS) until it answers 200;
    the seconds it took. Raises when the server process exits first or the time runs out, naming the log to read."""
    interval = HEALTH_POLL_SECONDS if interval is None else interval
    start = time.monotonic()
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with status {process.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=interval) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"the vLLM server did not answer {url} within {timeout:.0f} s")
        time.sleep(interval)


class VLLMServer:
    """A server process started on entry (in its own process group, its output in ``log``), healthy before
    the block runs, and stopped on exit: SIGTERM to its group, SIGKILL after ``grace`` seconds."""

    def __init__(self, command: list[str], *, port: int, log: Path, env: dict | None = None,
                 timeout: float = 900.0, grace: float = 30.0):
        self.command, self.port, self.log, self.env = command, port, Path(log), env
        self.timeout, self.grace = timeout, grace
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> VLLMServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as handle:
            self.process = subprocess.Popen(self.command, stdout=handle, stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)
        try:
            waited = wait_until_healthy(f"{self.url}/health", self.process, timeout=self.timeout)
        except RuntimeError as error:
            self.stop()
            raise RuntimeError(f"{error} (log: {self.log})") from None
        except BaseException:  # interrupted while waiting (Ctrl-C, a cancelled job): __exit__ will not run
            self.stop()
            raise
        print(f"grpo_lambda.launch: vLLM server up at {self.url} after {waited:.0f} s", file=sys.stderr, flush=True)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server and every process of its group (vLLM's workers): TERM, KILL after the grace
        period; then KILL whatever of the group outlived its leader, and wait until none runs."""
        if self.process is None:
            return
        group = self.process.pid
        if self.process.poll() is None:
            for sig, wait in ((signal.SIGTERM, self.grace), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(group, sig)
                except ProcessLookupError:
                    return
                try:
                    self.process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            return
        _wait_until_group_ends(group, timeout=10.0)


def _wait_until_group_ends(group: int, *, timeout: float) -> None:
    """Wait until no process of ``group`` runs (one that has exited but is not yet reaped counts as ended);
    on a system without /proc, return at once."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = False
        for stat in proc.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # it ended while we looked
            if int(fields[2]) == group and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
                running = True
                break
        if not running:
            return
        time.sleep(0.05)


def _option(words: list[str], name: str) -> str | None:
    return words[words.index(name) + 1] if name in words[:-1] else None


def serve_and_run(stage_words: list[str], environ: dict, *, timeout: float = 900.0) -> int:
    """Start the vLLM server for a train stage's starting model on the job's last GPUs, run the stage
    (its launcher words included) on the others, stop the server; the stage's exit status."""
    base, settings = _option(stage_words, "--base"), _option(stage_words, "--settings")
    if base is None or settings is None:
        raise RuntimeError("--vllm-server wraps a train stage: its words must hold --base and --settings")
    rl = json.loads(settings).get("rl", {})
    server_gpus = int(environ.get(SERVER_GPUS_VARIABLE, "1"))
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:  # torch only to count the GPUs: SLURM names them, and the launcher then imports none
        import torch

        count = torch.cuda.device_count()
    else:
        count = 0
    stage_devices, server_devices = split_gpus(visible, count, server_gpus)
    job = int(environ.get("SLURM_JOB_ID", os.getpid()))
    port, group_port = SERVER_PORT_BASE + job % 20000, GROUP_PORT_BASE + job % 20000
    command = serve_command(base, port=port, gpus=server_gpus,
                            max_model_len=rl.get("trl", {}).get("vllm_max_model_length"),
                            gpu_memory_utilization=rl.get("vllm_gpu_memory_utilization", 0.9))
    cell = _option(stage_words, "--cell") or "."
    # A cancelled job while the server starts (SIGTERM from SLURM): leave through the block, which stops it.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    with VLLMServer(command, port=port, log=Path(cell) / "vllm-server.log", timeout=timeout,
                    env={**environ, "CUDA_VISIBLE_DEVICES": server_devices}) as server:
        stage_env = {**environ, "CUDA_VISIBLE_DEVICES": stage_devices, SERVER_VARIABLE: server.url,
                     GROUP_VARIABLE: str(group_port)}
        stage = subprocess.Popen(stage_words, env=stage_env)
        # the job's shell killed (a cancelled job): stop the stage, then the server (on leaving the block)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda number, frame: stage.send_signal(number))
        return stage.wait()


def _required(environ: dict, name: str) -> str:
    if name not in environ:
        raise RuntimeError(f"grpo_lambda.launch runs inside a SLURM job; {name} is not set")
    return environ[name]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grpo_lambda.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-server", action="store_true",
                        help="start trl vllm-serve on the job's last GPUs, run the train stage that follows on the "
                             "others, stop the server after it")
    parser.add_argument("--server-timeout", type=float, default=900.0,
                        help="seconds to wait for the server's /health (default: %(default)s)")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--processes-per-node", type=int)
    parser.add_argument("--accelerate-config")
    parser.add_argument("--cpu", action="store_true", help="no GPU: float32")
    parser.add_argument("--node", action="store_true", help="(set by srun) start this node's accelerate launch")
    parser.add_argument("stage_args", nargs=argparse.REMAINDER, help="-- then the grpo-lambda stage and its options")
    args = parser.parse_args(argv)
    stage_args = args.stage_args[1:] if args.stage_args[:1] == ["--"] else args.stage_args
    if args.vllm_server:
        try:
            sys.exit(serve_and_run(stage_args, dict(os.environ), timeout=args.server_timeout))
        except RuntimeError as error:
            sys.exit(f"grpo_lambda.launch: {error}")
    missing = [name for name in ("nodes", "processes_per_node", "accelerate_config") if getattr(args, name) is None]
    if missing:
        parser.error(f"--{missing[0].replace('_', '-')} is required (or --vllm-server)")
    options = {"nodes": args.nodes, "processes_per_node": args.processes_per_node,
               "accelerate_config": args.accelerate_config, "cpu": args.cpu, "stage_args": stage_args}
    if args.node:
        command, env = accelerate_command(os.environ, address=first_node_address(os.environ["SLURM_JOB_NODELIST"]),
                                          **options), dict(os.environ)
    else:
        command, env = srun_command(os.environ, **options)
    where = f" (on {os.environ.get('SLURMD_NODENAME', 'this node')})" if args.node else ""
    print(f"grpo_lambda.launch{where}:", " ".join(command), file=sys.stderr, flush=True)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
