"""rl.vllm_mode server: grpo_lambda.launch starts the server, waits for its health check, points the train stage
at it and stops it with the stage. On a CPU a fake server stands in for `trl vllm-serve` (an HTTP server
answering /health); the real server and TRL's weight sync into it need a GPU (docs/cluster.md)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from conftest import ROOT
from fake_servers import SERVE_HEALTH, alive, free_port
from grpo_lambda import launch

FAKE_SERVER = textwrap.dedent("""
    import http.server, os, subprocess, sys, time
    port, delay, exit_code, pid_file = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a worker, as vLLM has
    with open(pid_file, "w") as handle:
        handle.write(f"{os.getpid()} {helper.pid}")
    time.sleep(delay)
    if exit_code >= 0:
        sys.exit(exit_code)
""") + SERVE_HEALTH


@pytest.fixture(autouse=True)
def quick_health_checks(monkeypatch):
    """A fake server answers within a second, not minutes: poll it often, so each test waits what it needs."""
    monkeypatch.setattr(launch, "HEALTH_POLL_SECONDS", 0.1)


def fake_command(tmp_path, port, *, delay=0.5, exit_code=-1):
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    return [sys.executable, str(script), str(port), str(delay), str(exit_code), str(tmp_path / "server.pid")]


def server_pids(tmp_path) -> list[int]:
    return [int(pid) for pid in (tmp_path / "server.pid").read_text().split()]


def test_the_server_is_healthy_inside_the_block_and_stopped_with_its_workers_after(tmp_path):
    port = free_port()
    with launch.VLLMServer(fake_command(tmp_path, port, delay=1.0), port=port, log=tmp_path / "server.log",
                           timeout=30) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        import urllib.request

        assert urllib.request.urlopen(f"{server.url}/health", timeout=5).status == 200
        pids = server_pids(tmp_path)
        assert all(alive(pid) for pid in pids)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids), "the server and its worker are stopped"


def test_a_server_that_exits_before_it_is_healthy_is_reported_with_its_log(tmp_path):
    port = free_port()
    with pytest.raises(RuntimeError, match=r"exited with status 3 before .*/health answered \(log: .*server.log\)"):
        with launch.VLLMServer(fake_command(tmp_path, port, delay=0.2, exit_code=3), port=port,
                               log=tmp_path / "server.log", timeout=30):
            pass


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path):
    port = free_port()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"did not answer .*/health within 1 s"):
        with launch.VLLMServer(fake_command(tmp_path, port, delay=600), port=port, log=tmp_path / "server.log",
                               timeout=1, grace=2):
            pass
    assert time.monotonic() - start < 30
    assert not alive(server_pids(tmp_path)[0])


def test_the_server_takes_the_jobs_last_gpus():
    assert launch.split_gpus("0,1,2,3", 0, 1) == ("0,1,2", "3")
    assert launch.split_gpus(None, 4, 2) == ("0,1", "2,3")
    with pytest.raises(RuntimeError, match="leaves none to train on.*train:gpu"):
        launch.split_gpus("0", 0, 1)
    assert launch.serve_command("results/m/sft/model", port=41234, gpus=2, max_model_len=1024)[:4] == [
        "trl", "vllm-serve", "--model", "results/m/sft/model"]


STAGE = textwrap.dedent("""
    import json, os, sys, time, urllib.request
    url = os.environ["GRPO_LAMBDA_VLLM_SERVER"]
    health = urllib.request.urlopen(url + "/health", timeout=5).status
    with open(sys.argv[1], "w") as handle:
        json.dump({"url": url, "health": health, "gpus": os.environ["CUDA_VISIBLE_DEVICES"],
                   "group_port": os.environ["GRPO_LAMBDA_VLLM_GROUP_PORT"]}, handle)
    time.sleep(float(sys.argv[2]))
    sys.exit(int(sys.argv[3]))
""")

RUNNER = textwrap.dedent("""
    import sys
    from grpo_lambda import launch
    fake = sys.argv[1:7]
    launch.HEALTH_POLL_SECONDS = 0.1  # the fake server answers within a second
    launch.serve_command = lambda model, *, port, gpus, **options: fake[:2] + [str(port)] + fake[3:]
    sys.exit(launch.serve_and_run(sys.argv[8:], dict(__import__("os").environ), timeout=30))
""")


def run_stage(tmp_path, *, sleep, exit_code, job=None, server_delay=0.5):
    """python -c RUNNER: grpo_lambda.launch's server mode around a fake stage, with the fake server."""
    stage = tmp_path / "stage.py"
    stage.write_text(STAGE)
    settings = json.dumps({"rl": {"use_vllm": True, "vllm_mode": "server"}})
    words = [sys.executable, str(stage), str(tmp_path / "stage.json"), str(sleep), str(exit_code),
             "--base", str(tmp_path / "model"), "--settings", settings, "--cell", str(tmp_path / "cell")]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_ID": str(job or free_port())}
    # Ctrl-C's default for the runner: a suite started in the background inherits SIGINT ignored, and the
    # cancelled-start test then passed only when the server's health check timed out, 30 s later.
    return subprocess.Popen([sys.executable, "-c", RUNNER, *fake_command(tmp_path, 0, delay=server_delay), "--",
                             *words], env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_the_stage_runs_beside_a_healthy_server_and_its_status_is_the_jobs(tmp_path):
    job = free_port()
    runner = run_stage(tmp_path, sleep=0, exit_code=5, job=job)
    assert runner.wait(timeout=60) == 5
    seen = json.loads((tmp_path / "stage.json").read_text())
    assert seen["health"] == 200 and seen["gpus"] == "0"  # the server took GPU 1
    # TRL's weight-sync port is the job's own, not TRL's one default for every job on the node
    assert int(seen["group_port"]) == launch.GROUP_PORT_BASE + job % 20000 != 51216
    assert (tmp_path / "cell" / "vllm-server.log").is_file()
    assert not any(alive(pid) for pid in server_pids(tmp_path))


def test_killing_the_job_stops_the_stage_and_the_server(tmp_path):
    runner = run_stage(tmp_path, sleep=600, exit_code=0)
    deadline = time.monotonic() + 60
    while not (tmp_path / "stage.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (tmp_path / "stage.json").exists(), "the stage started"
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=60) != 0
    time.sleep(0.5)
    assert not any(alive(pid) for pid in server_pids(tmp_path))


def test_a_server_mode_train_job_is_wrapped_and_leaves_the_servers_gpu_out(tmp_path):
    """The workflow's train command for a model with rl.vllm_mode server (snakemake -n -p)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["rl"].update(use_vllm=True, vllm_mode="server")
    config["seeds"] = [0]
    config["results"] = str(tmp_path / "results")
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = subprocess.run(["snakemake", "-n", "-p", "--configfile", str(path), "--set-resources", "train:gpu=3",
                           "sft:gpu=0"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    commands = [line.split("Shell command:")[-1].strip() for line in plan.stdout.splitlines()]
    trains = [line for line in commands if " train --settings" in line]
    assert trains and all(line.startswith("python -m grpo_lambda.launch --vllm-server -- accelerate launch")
                          for line in trains), trains[:1]
    assert all("--num_processes 2 " in line for line in trains)  # 3 GPUs: 1 serves, 2 train
    sft = [line for line in commands if " sft --settings" in line]
    assert sft and not any("--vllm-server" in line for line in sft)


def test_the_train_stage_hands_the_started_server_to_trl(monkeypatch):
    from grpo_lambda import config as study
    from grpo_lambda import train

    assert (train.VLLM_SERVER_VARIABLE, train.VLLM_GROUP_VARIABLE) == (launch.SERVER_VARIABLE, launch.GROUP_VARIABLE)
    config = study.load(ROOT / "config" / "config.yaml")
    config["rl"].update(use_vllm=True, vllm_mode="server")
    settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant="grpo")
    monkeypatch.setenv(launch.SERVER_VARIABLE, "http://10.0.0.7:40123")
    monkeypatch.setenv(launch.GROUP_VARIABLE, "20123")
    built = train.build_config(settings, output_dir="o", seed=0)
    assert (built.vllm_server_base_url, built.vllm_group_port) == ("http://10.0.0.7:40123", 20123)
    config["rl"]["vllm_mode"] = "colocate"  # a colocated engine ignores it
    settings = study.stage_settings(config, "train", model="tiny", dataset="arith", variant="grpo")
    assert train.build_config(settings, output_dir="o", seed=0).vllm_server_base_url is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_job_cancelled_while_the_server_starts_stops_the_server(tmp_path, sig):
    runner = run_stage(tmp_path, sleep=0, exit_code=0, server_delay=600)  # never healthy
    deadline = time.monotonic() + 60
    while not (tmp_path / "server.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = server_pids(tmp_path)
    time.sleep(0.5)  # the runner is in its health-check loop
    runner.send_signal(sig)
    assert runner.wait(timeout=60) != 0
    assert not (tmp_path / "stage.json").exists()  # the stage never started
    assert not any(alive(pid) for pid in pids), "the server and its worker are stopped"
