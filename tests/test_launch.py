"""grpo_lambda.launch: the words a rule's shell runs for a multi-node or vLLM-server job, and the server's stop,
which must end every process of the server's group, a worker that ignores SIGTERM included (vLLM's workers
outlive their leader otherwise, holding the GPUs the next job is given). The srun/accelerate commands of a
2-node job are worked by hand in tests/test_multinode.py, the server's start and the stage around it in
tests/test_vllm_server.py."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fake_servers import SERVE_HEALTH, alive, free_port
from grpo_lambda import launch

# A server whose worker ignores SIGTERM: the leader dies on the group's SIGTERM, the worker would sleep on.
STUBBORN_SERVER = textwrap.dedent("""
    import http.server, os, signal, subprocess, sys, time
    port, ready = int(sys.argv[1]), sys.argv[2]
    worker = subprocess.Popen([sys.executable, "-c",
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').write('ignoring'); time.sleep(600)", ready + ".worker"])
    while not os.path.exists(ready + ".worker"):   # the worker ignores SIGTERM before the server is healthy
        time.sleep(0.02)
    with open(ready, "w") as handle:
        handle.write(f"{os.getpid()} {worker.pid}")
""") + SERVE_HEALTH


def test_stopping_the_server_ends_a_worker_that_ignores_sigterm(tmp_path):
    script, ready, port = tmp_path / "server.py", tmp_path / "ready", free_port()
    script.write_text(STUBBORN_SERVER)
    server = launch.VLLMServer([sys.executable, str(script), str(port), str(ready)], port=port,
                               log=tmp_path / "server.log", timeout=60, grace=5)
    try:
        with server:
            leader, worker = (int(pid) for pid in ready.read_text().split())
            assert alive(leader) and alive(worker)
            assert os.getpgid(worker) == leader  # the worker is in the server's process group
        deadline = time.monotonic() + 5  # stop() waits for the group; a little slack for /proc to settle
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(leader), "the leader is stopped"
        assert not alive(worker), "the worker that ignored SIGTERM outlived the server's stop"
    finally:
        for pid in [int(pid) for pid in ready.read_text().split()] if ready.exists() else []:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)  # a broken stop must not leave the worker sleeping on


def test_stop_before_start_and_after_the_group_ended_is_a_no_op(tmp_path):
    server = launch.VLLMServer(["true"], port=1, log=tmp_path / "log")
    server.stop()  # never started
    server.process = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    server.process.wait()
    start = time.monotonic()
    server.stop()  # the group is gone: returns at once, not after the grace period
    assert time.monotonic() - start < server.grace


def test_health_waiting_names_an_early_exit_and_a_timeout(tmp_path):
    exited = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(4)"])
    exited.wait()
    with pytest.raises(RuntimeError, match=r"exited with status 4 before http://127\.0\.0\.1:\d+/health answered"):
        launch.wait_until_healthy(f"http://127.0.0.1:{free_port()}/health", exited, timeout=5, interval=0.05)
    sleeping = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(RuntimeError, match=r"did not answer .*/health within 0 s"):
            launch.wait_until_healthy(f"http://127.0.0.1:{free_port()}/health", sleeping, timeout=0.2, interval=0.05)
    finally:
        sleeping.kill()
        sleeping.wait()


def test_the_words_of_a_multi_node_and_a_server_job():
    assert launch.launcher_words(nodes=2, processes_per_node=4, accelerate_config="z.yaml", cpu=False) == [
        "python", "-m", "grpo_lambda.launch", "--nodes", "2", "--processes-per-node", "4", "--accelerate-config",
        "z.yaml", "--"]
    assert launch.launcher_words(nodes=2, processes_per_node=1, accelerate_config="d.yaml", cpu=True)[-2:] == [
        "--cpu", "--"]
    config = {"rl": {"use_vllm": True, "vllm_mode": "colocate"},
              "models": {"a": {}, "b": {"rl": {"vllm_mode": "server"}}, "c": {"rl": {"use_vllm": False,
                                                                                     "vllm_mode": "server"}}}}
    assert launch.server_words(config, "a") == [] and launch.server_words(config, "c") == []
    words = launch.server_words(config, "b")  # the model's own rl: over the study's
    assert words == ["python", "-m", "grpo_lambda.launch", "--vllm-server", "--"]
    assert launch.server_gpus(words, {}) == 1 and launch.server_gpus(words, {launch.SERVER_GPUS_VARIABLE: "2"}) == 2
    assert launch.server_gpus(["python", "-m", "grpo_lambda.cli"], {launch.SERVER_GPUS_VARIABLE: "2"}) == 0
    assert launch.serve_command("m", port=40001, gpus=2, max_model_len=1024, gpu_memory_utilization=0.5) == [
        "trl", "vllm-serve", "--model", "m", "--port", "40001", "--host", "0.0.0.0", "--tensor_parallel_size", "2",
        "--gpu_memory_utilization", "0.5", "--max_model_len", "1024"]
    assert "--max_model_len" not in launch.serve_command("m", port=1, gpus=1)


def test_a_server_job_needs_its_stage_words_and_a_node_job_its_options(capsys):
    with pytest.raises(RuntimeError, match="must hold --base and --settings"):
        launch.serve_and_run(["python", "-m", "grpo_lambda.cli", "train", "--base", "m"], {})
    with pytest.raises(SystemExit) as exit_:
        launch.main(["--nodes", "2", "--", "train"])
    assert exit_.value.code == 2 and "--processes-per-node is required" in capsys.readouterr().err
