"""Every shell parameter of the rules is quoted: the end-to-end config runs under a results folder
whose name holds a space and a quote."""

import subprocess
import sys

import pytest
import yaml

from conftest import E2E_CONFIG, ROOT

pytestmark = pytest.mark.slow

ODD_RESULTS = "res dir 'x'"


def test_the_pipeline_runs_under_a_results_folder_with_a_space_and_a_quote(tmp_path):
    config = yaml.safe_load(E2E_CONFIG.read_text())
    config["results"] = ODD_RESULTS
    del config["models"]["tiny-shared"]  # its chat SFT set is a repository file, relative to test_pipeline's folder
    # A model made by the pipeline is named under the results folder, wherever that is.
    config["models"]["tiny-distill"]["source"] = f"{ODD_RESULTS}/tiny/arith/sft/model"
    # Every rule's command runs; RL need not learn here (test_pipeline's run checks that): one step fewer.
    config["rl"]["max_steps"] = 3
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
                             "--directory", str(tmp_path), "--cores", "2", "--configfile", str(config_file)],
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    results = tmp_path / ODD_RESULTS
    assert (results / "tables" / "results.csv").exists() and (results / "figures" / "figure4.png").exists()
    assert (results / "tiny" / "arith" / "grpo" / "seed0" / "eval" / "final" / "arith-2.json").exists()
    assert (results / "logs" / "train" / "tiny" / "arith" / "recent-trace" / "seed0.log").stat().st_size > 0
    # Nothing escaped to a stray file or folder named after a piece of the path.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".snakemake", "config.yaml", ODD_RESULTS])


def test_a_model_source_with_shell_syntax_is_passed_as_one_quoted_word(tmp_path):
    import shlex

    config = yaml.safe_load(E2E_CONFIG.read_text())
    source = "org/$(touch pwned)"
    config["models"] = {"tiny": {"source": source, "prompt": "plain", "datasets": ["arith"]}}  # one SFT job
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--snakefile", str(ROOT / "Snakefile"),
                             "--directory", str(tmp_path), "--configfile", str(config_file)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    [sft] = [line.split(":", 1)[1] for line in result.stdout.splitlines() if line.startswith("Shell command: grpo-lambda sft ")]
    words = shlex.split(sft)
    assert words[words.index("--base") + 1] == source
    assert not (tmp_path / "pwned").exists()
