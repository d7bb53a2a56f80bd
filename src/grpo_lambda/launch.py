"""One training job across several nodes: ``accelerate launch`` once per node, under SLURM.

A model with ``nodes: N`` (N > 1) runs its ``sft`` and ``train`` jobs as N-node SLURM jobs whose shell
runs ``python -m grpo_lambda.launch --nodes N ... -- <stage> <options>``. That starts ``srun`` with one
task per node in the job's allocation, and each task (``--node``) starts ``accelerate launch`` with the
machine count, its node's rank and the first node's address as the rendezvous, as open-r1's SLURM
recipe does. ``srun`` is handed the job id and none of the step variables of the shell it runs in:
Snakemake runs a job's shell inside a one-node job step, whose variables would confine the new step
to that node. A CPU rehearsal (one process per node) runs all of this on the local SLURM's two nodes
(tests/test_multinode.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

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


def _required(environ: dict, name: str) -> str:
    if name not in environ:
        raise RuntimeError(f"grpo_lambda.launch runs inside a SLURM job; {name} is not set")
    return environ[name]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grpo_lambda.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--processes-per-node", type=int, required=True)
    parser.add_argument("--accelerate-config", required=True)
    parser.add_argument("--cpu", action="store_true", help="no GPU: float32")
    parser.add_argument("--node", action="store_true", help="(set by srun) start this node's accelerate launch")
    parser.add_argument("stage_args", nargs=argparse.REMAINDER, help="-- then the grpo-lambda stage and its options")
    args = parser.parse_args(argv)
    stage_args = args.stage_args[1:] if args.stage_args[:1] == ["--"] else args.stage_args
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
