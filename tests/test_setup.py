"""scripts/setup.sh: safe to source from an interactive shell, and it names what it was asked for."""

import subprocess

from conftest import ROOT


def interactive(script: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "--norc", "-i"], input=script, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_sourcing_leaves_no_shell_option_and_no_change_of_folder(tmp_path):
    # The environment is installed already (the test session runs in it): the source only checks its stamp.
    done = interactive(f"source {ROOT}/scripts/setup.sh cpu\nfalse\necho ALIVE \"$PWD\" \"$-\"\n"
                       "command -v grpo-lambda\n", tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("ALIVE")]
    assert lines, done.stdout + done.stderr
    _, folder, flags = lines[0].split(" ")
    assert folder == str(tmp_path) and "e" not in flags and "u" not in flags
    assert f"{ROOT}/.venv/bin/grpo-lambda" in done.stdout


def test_an_unknown_environment_is_refused_by_name_and_the_shell_survives(tmp_path):
    done = interactive(f"source {ROOT}/scripts/setup.sh gpu\necho STATUS $?\n", tmp_path)
    assert "unknown environment 'gpu'" in done.stderr
    assert "STATUS 2" in done.stdout
