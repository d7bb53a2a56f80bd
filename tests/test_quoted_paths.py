"""Every shell parameter of the rules is quoted: a model source with shell syntax is one word (tests/test_pipeline.py
runs the end-to-end config under a results folder whose name holds a space and a quote)."""

import subprocess
import sys

import yaml

from conftest import E2E_CONFIG, ROOT


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
