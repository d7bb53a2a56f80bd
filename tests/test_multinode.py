"""A model on several nodes: grpo_lambda.launch's commands, worked by hand, and a 2-node SFT + RL job run
through the local SLURM (scripts/local-slurm.sh starts a second slurmd as node <host>-2, partition `two`)."""

import os
import re
import stat
import subprocess
import sys

import pytest
import yaml

from conftest import E2E_CONFIG, ROOT, rl_learning_problems
from grpo_lambda import config as study
from grpo_lambda import launch


def test_the_outer_launcher_starts_one_task_per_node_in_the_jobs_allocation_without_the_steps_variables():
    environ = {"SLURM_JOB_ID": "77", "SLURM_CONF": "/etc/slurm/slurm.conf", "SLURM_NNODES": "1",
               "SLURM_STEP_NODELIST": "a", "SLURM_JOB_NODELIST": "a", "PATH": "/bin", "HOME": "/root"}
    command, env = launch.srun_command(environ, nodes=2, processes_per_node=4, accelerate_config="z.yaml",
                                       cpu=False, stage_args=["train", "--seed", "0"])
    assert command == ["srun", "--jobid=77", "--overlap", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
                       "--kill-on-bad-exit=1", "python", "-m", "grpo_lambda.launch", "--node", "--nodes", "2",
                       "--processes-per-node", "4", "--accelerate-config", "z.yaml", "--", "train", "--seed", "0"]
    assert env == {"SLURM_JOB_ID": "77", "SLURM_CONF": "/etc/slurm/slurm.conf", "PATH": "/bin", "HOME": "/root"}
    with pytest.raises(RuntimeError, match="SLURM_JOB_ID is not set"):
        launch.srun_command({}, nodes=2, processes_per_node=1, accelerate_config="z.yaml", cpu=True, stage_args=[])


def test_each_node_launches_accelerate_with_its_rank_and_the_first_nodes_address():
    environ = {"SLURM_JOB_ID": "20007", "SLURM_NODEID": "1", "SLURM_NNODES": "2"}
    command = launch.accelerate_command(environ, nodes=2, accelerate_config="zero2.yaml", processes_per_node=4,
                                        cpu=False, stage_args=["sft", "--out", "m"], address="10.0.0.5")
    assert command == ["accelerate", "launch", "--config_file", "zero2.yaml", "--num_machines", "2",
                       "--machine_rank", "1", "--main_process_ip", "10.0.0.5", "--main_process_port", "20007",
                       "--num_processes", "8", "-m", "grpo_lambda.cli", "sft", "--out", "m"]
    cpu = launch.accelerate_command({**environ, "SLURM_JOB_ID": "40008"}, nodes=2, accelerate_config="d.yaml",
                                    processes_per_node=1, cpu=True, stage_args=[], address="h")
    assert cpu[cpu.index("--main_process_port") + 1] == "20008" and cpu[-4:-2] == ["--mixed_precision", "no"]
    with pytest.raises(RuntimeError, match="the step has 2 nodes, not the 3 asked for"):
        launch.accelerate_command(environ, nodes=3, accelerate_config="d.yaml", processes_per_node=1, cpu=True,
                                  stage_args=[], address="h")


def test_the_rendezvous_is_the_first_nodes_address_from_scontrol(tmp_path, monkeypatch):
    fake = tmp_path / "scontrol"
    fake.write_text('#!/bin/sh\nif [ "$2" = hostnames ]; then printf "gpu-a\\ngpu-b\\n"; '
                    'else echo "NodeName=$3 Arch=x86_64 NodeAddr=10.1.2.3 NodeHostName=gpu-a"; fi\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert launch.first_node_address("gpu-[a-b]") == "10.1.2.3"


def _plan(tmp_path, nodes, gpu):
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    config["models"] = {"r1-qwen-7b": {**config["models"]["r1-qwen-7b"], "nodes": nodes}}
    path = tmp_path / "paper-2-nodes.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--profile", "workflow/profiles/slurm",
                           "--configfile", str(path), "--set-resources", f"train:gpu={gpu}", f"sft:gpu={gpu}",
                           "--", "results/r1-qwen-7b/gsm8k/grpo/seed0/model"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "GRPO_LAMBDA_PARTITION": "gpu", "GRPO_LAMBDA_ACCOUNT": "lab"})


def test_a_two_node_model_plans_two_node_jobs_with_the_gpus_shared_by_the_nodes(tmp_path):
    plan = _plan(tmp_path, nodes=2, gpu=8)
    assert plan.returncode == 0, plan.stderr[-3000:]
    commands = [line for line in plan.stdout.splitlines() if line.startswith("Shell command:")]
    launched = [line for line in commands if " sft --settings" in line or " train --settings" in line]
    assert len(launched) == 2
    for line in launched:
        assert line.split(":", 1)[1].strip().startswith(
            "python -m grpo_lambda.launch --nodes 2 --processes-per-node 4 --accelerate-config "), line
        assert "zero2.yaml --" in line and "--cpu" not in line
    resources = [line for line in plan.stdout.splitlines() if "resources:" in line and "nodes=2" in line]
    assert len(resources) == 2 and all("tasks=2" in line and "gpu=8" in line for line in resources)
    uneven = _plan(tmp_path, nodes=3, gpu=8)
    assert uneven.returncode != 0 and "8 GPUs cannot be shared equally by 3 nodes" in uneven.stdout + uneven.stderr


def _two_nodes_idle():
    try:
        shown = subprocess.run(["sinfo", "-h", "-p", "two", "-N", "-o", "%N %t"], capture_output=True, text=True,
                               timeout=20).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return False
    return sum(line.endswith(" idle") for line in shown) == 2


@pytest.mark.slow
def test_sft_and_rl_run_as_two_node_slurm_jobs_and_learn(tmp_path):
    if not _two_nodes_idle():
        pytest.skip("no local SLURM with two idle nodes in partition `two` (bash scripts/local-slurm.sh start)")
    config = yaml.safe_load(E2E_CONFIG.read_text())
    config["models"] = {"tiny": {**config["models"]["tiny"], "nodes": 2}}
    config["variants"] = {"grpo": config["variants"]["grpo"]}
    config["rl"].update(max_steps=2, save_steps=1)
    config["evaluation"]["checkpoints"] = []
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cell = "results/tiny/arith/grpo/seed0"
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
         "--profile", str(ROOT / "workflow/profiles/slurm-local"), "--configfile", str(path),
         "--default-resources", "slurm_partition=two", "mem_mb=1500", "runtime=30", "cpus_per_task=1", "gpu=0",
         "--set-resources", "train:processes=1", "sft:processes=1", "--", f"{cell}/model"],
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    for log in (tmp_path / "results/logs/sft/tiny/arith.log", tmp_path / f"{cell.replace('results/', 'results/logs/train/')}.log"):
        text = log.read_text()
        ranks = dict(re.findall(r"grpo_lambda\.launch \(on (\S+)\): accelerate launch .*--machine_rank (\d)", text))
        assert ranks == {host: "0", f"{host}-2": "1"}, text[-3000:]
        assert "world size 2 (DistributedType.MULTI_CPU)" in text
    assert rl_learning_problems(tmp_path / "results", study.load(str(path))) == []
