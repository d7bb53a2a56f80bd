"""grpo_lambda.cli: readable help, --version, and one-line errors for missing or wrong arguments."""

import contextlib
import io
import json
import re

import pytest

from grpo_lambda import __version__
from grpo_lambda.cli import parser

from conftest import ROOT, run_main

CONFIG = str(ROOT / "config" / "config.yaml")


def _subcommands():
    root = parser()
    (stages,) = [action for action in root._actions if action.dest == "stage"]
    return stages.choices


def test_every_option_of_every_stage_has_help():
    for name, sub in _subcommands().items():
        for action in sub._actions:
            if action.dest != "help":
                assert action.help, f"grpo-lambda {name}: {action.option_strings or action.dest} has no help"


def test_help_is_plain_text(capsys):
    for argv in [["--help"]] + [[name, "--help"] for name in _subcommands()]:
        with pytest.raises(SystemExit) as exit_info:
            parser().parse_args(argv)
        assert exit_info.value.code == 0
        text = capsys.readouterr().out
        assert "``" not in text and not re.search(r"`\w", text.replace("`grpo-lambda STAGE --help`", "")), argv


HELP_GOLDEN = ROOT / "tests" / "data" / "cli" / "help.json"


def help_texts() -> dict[str, str]:
    """``grpo-lambda --help`` and every stage's ``--help``, at a fixed width of 100 columns."""
    texts = {}
    for argv in [["--help"]] + [[name, "--help"] for name in _subcommands()]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            parser().parse_args(argv)
        texts[" ".join(argv)] = out.getvalue()
    return texts


def test_help_is_as_recorded(monkeypatch):
    # The commands are the pipeline's interface (the rules, the docs and users' scripts call them): moving code
    # between modules must not change a stage, an option or a word of help. A deliberate change rewrites
    # tests/data/cli/help.json with `python tests/test_cli.py` and shows up in the diff.
    monkeypatch.setenv("COLUMNS", "100")
    recorded = json.loads(HELP_GOLDEN.read_text(encoding="utf-8"))
    texts = help_texts()
    assert list(texts) == list(recorded), "the stages differ from tests/data/cli/help.json"
    for argv, text in texts.items():
        assert text == recorded[argv], f"grpo-lambda {argv} differs from tests/data/cli/help.json"


def test_version(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["--version"])
    assert capsys.readouterr().out.strip() == f"grpo-lambda {__version__}"


TRAIN_CELL = ["--model", "tiny", "--dataset", "arith", "--variant", "grpo", "--base", "b", "--data", CONFIG,
              "--cell", "c", "--seed", "0"]  # --data: any file that exists


@pytest.mark.parametrize("argv, culprit", [
    (["train", "--configfile", CONFIG, "--base", "b", "--data", "d", "--cell", "c", "--seed", "0"], "--model NAME"),
    (["train", "--configfile", CONFIG, "--model", "nope", "--dataset", "arith", "--variant", "grpo", "--base", "b",
      "--data", "d", "--cell", "c", "--seed", "0"], "'nope'"),
    (["train", "--configfile", CONFIG, "--model", "tiny", "--dataset", "arith", "--variant", "grpo", "--base", "b",
      "--data", "no-such.jsonl", "--cell", "c", "--seed", "0"], "no-such.jsonl"),
    (["train", "--settings", "{not json", "--base", "b", "--data", "d", "--cell", "c", "--seed", "0"], "--settings"),
    (["train", "--base", "b", "--data", "d", "--cell", "c", "--seed", "0"], "--settings JSON or --configfile"),
    (["train", "--seed", "x", "--base", "b", "--data", "d", "--cell", "c"], "--seed"),
    (["evaluate", "--configfile", CONFIG, "--model", "tiny", "--dataset", "arith", "--variant", "grpo",
      "--checkpoint", "c", "--bench", "a.jsonl", "--out-dir", "o", "--step", "last"], "--step"),
    (["prepare", "--configfile", CONFIG, "--out", "o.jsonl"], "--dataset NAME and --benchmark NAME"),
    (["sft", "--configfile", CONFIG, "--model", "tiny", "--base", "b", "--data", "d", "--out", "o"], "--dataset NAME"),
    (["validate", "--configfile", "no-such.yaml"], "no-such.yaml"),
    (["status", "--configfile", "no-such.yaml"], "no-such.yaml"),
    (["aggregate", "--out", "o"], "--settings JSON or --configfile"),
    (["figures", "--configfile", CONFIG, "--tables", "no-such-tables", "--out", "o"], "no-such-tables"),
    (["nonsense"], "nonsense"),
    (["train", "--configfile", CONFIG, *TRAIN_CELL, "--bench", CONFIG], "--eval-dir DIR"),
    (["train", "--configfile", CONFIG, *TRAIN_CELL, "--bench", "no-such.jsonl", "--eval-dir", "o"], "no-such.jsonl"),
    (["train", "--settings", "{}", *TRAIN_CELL[6:], "--bench", CONFIG, "--eval-dir", "o"], "--evaluation JSON"),
])
def test_a_missing_or_wrong_argument_is_one_line_naming_it(argv, culprit):
    result = run_main(*argv)  # the CLI's logic, in this process (an exception would fail the test here)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(error_lines) == 1 and culprit in error_lines[0], result.stderr


def test_a_bad_config_is_named_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = (ROOT / "config" / "config.yaml").read_text()
    assert "max_steps: 25" in text
    bad.write_text(text.replace("max_steps: 25", "max_steps: zero"))
    result = run_main("status", "--configfile", bad)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "rl.max_steps" in result.stderr


@pytest.mark.parametrize("main_process", [True, False])
def test_train_with_bench_evaluates_the_model_it_trained_not_the_one_it_started_from(tmp_path, monkeypatch,
                                                                                     main_process):
    """train --bench: once training returns, the job's main process evaluates <cell>/model (the trained model, as
    the evaluate stage reads it) at step final with the job's seed, never --base (the SFT model the cell started
    from); the other processes evaluate nothing. Training and evaluation are stand-ins that record their calls."""
    from grpo_lambda import evaluate, train

    trained, evaluated = [], []
    monkeypatch.setattr(train, "run", lambda settings, **where: trained.append(where) or main_process)
    monkeypatch.setattr(evaluate, "run", lambda settings, **what: evaluated.append((settings, what)))
    base, cell, out = tmp_path / "sft-model", tmp_path / "cell", tmp_path / "eval"
    result = run_main("train", "--configfile", CONFIG, "--model", "tiny", "--dataset", "arith", "--variant", "grpo",
                      "--base", base, "--data", CONFIG, "--cell", cell, "--seed", "3", "--bench", CONFIG,
                      "--eval-dir", out)
    assert result.returncode == 0, result.stderr
    assert trained == [{"base": str(base), "data_path": CONFIG, "cell_dir": str(cell), "seed": 3}]
    if not main_process:
        assert evaluated == []
        return
    ((settings, what),) = evaluated
    assert what == {"model_path": str(cell / "model"), "benchmark_paths": [CONFIG], "out_dir": str(out), "seed": 3,
                    "step": "final"}
    from grpo_lambda import config as study

    assert settings == study.stage_settings(study.load(CONFIG), "evaluate", model="tiny", dataset="arith",
                                            variant="grpo")


if __name__ == "__main__":  # rewrite the recorded help after a deliberate change of a command
    import os

    os.environ["COLUMNS"] = "100"
    HELP_GOLDEN.write_text(json.dumps(help_texts(), indent=1) + "\n", encoding="utf-8")
