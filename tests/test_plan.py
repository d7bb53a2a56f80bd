"""grpo-lambda plan: Snakemake's dry run of a small workflow, run for real, summarised as jobs per rule and why, and
what changed since the last run with the wildcards of the jobs it reruns."""

import json
import subprocess
import sys

from conftest import ROOT, run_main
from grpo_lambda import plan

SNAKEFILE = '''
import json

rule all:
    input: expand("out/{name}.txt", name=["a", "b", "c"]), "out/joined.txt"

rule make:
    output: "out/{name}.txt"
    params:
        value=lambda wildcards: config.get("value", 1) if wildcards.name != "c" else 1,
        settings=lambda wildcards: json.dumps({"rl": {"max_steps": config.get("steps", 25), "beta": 0.0},
                                               "name": wildcards.name, "note": "a; b now: c"}),
    shell: "echo {params.value} > {output}"

rule join:
    input: expand("out/{name}.txt", name=["a", "b", "c"])
    output: "out/joined.txt"
    shell: "cat {input} > {output}"
'''


def plan_of(folder, *words):
    done = subprocess.run([sys.executable, "-m", "grpo_lambda.cli", "plan", "--snakefile", str(folder / "Snakefile"),
                           "--directory", str(folder), *words], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def test_the_plan_counts_jobs_per_rule_and_names_what_changed(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    code, out, err = plan_of(tmp_path)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "plan: 5 jobs (3 rules); `snakemake -n` lists each"
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in lines[2:5]}
    assert rows == {"make": ["3", "output missing"], "join": ["1", "output missing, after a job it needs"],
                    "all": ["1", "after a job it needs"]}
    assert lines[-1].startswith("changed since the last run: nothing")

    ran = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--snakefile", str(tmp_path / "Snakefile"),
                          "--directory", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    code, out, _ = plan_of(tmp_path)
    assert out.strip() == "plan: nothing to do: every requested file is present and up to date"

    code, out, err = plan_of(tmp_path, "--config", "value=2")  # the params of make for a and b change, not c
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "plan: 4 jobs (3 rules); `snakemake -n` lists each"
    assert lines[2].split(None, 2) == ["make", "2", "params changed"]
    assert lines[-2:] == ["changed since the last run:", "  make: params changed (2 jobs: name a, b): 1 → 2"]

    # a setting of a JSON param, named with its old and new value (the param's "; " and " now: " read as its text)
    code, out, err = plan_of(tmp_path, "--config", "steps=5")
    assert code == 0, err
    assert out.splitlines()[-1] == "  make: params changed (3 jobs: name a, b, c): rl.max_steps 25 → 5"


def test_a_failing_dry_run_gives_snakemakes_own_words_and_status(tmp_path):
    (tmp_path / "Snakefile").write_text("rule all:\n    input: 'missing.txt'\n")
    code, out, err = plan_of(tmp_path)
    assert code == 1 and out == ""
    assert "MissingInputException" in err and "missing.txt" in err


def test_reasons_are_read_from_each_job_block():
    text = """Job stats:
job      count
-----  -------
train        2
all          1
total        3

rule train:
    output: r/a/seed0/model
    jobid: 1
    reason: Params have changed since last execution: settings; Code has changed since last execution
    wildcards: variant=grpo, seed=10
    resources: tmpdir=/tmp
rule train:
    jobid: 2
    reason: Params have changed since last execution
    wildcards: variant=grpo, seed=2
localrule all:
    jobid: 0
    reason: Input files updated by another job: r/a/seed0/model
"""
    assert plan.summary(text).splitlines() == [
        "plan: 3 jobs (2 rules); `snakemake -n` lists each",
        "  rule   jobs  why",
        "  train     2  params changed, code changed (1)",
        "  all       1  after a job it needs",
        "changed since the last run:",
        "  train: code changed (1 job: variant grpo; seed 10)",
        "  train: params changed (2 jobs: variant grpo; seed 2, 10)",
    ]


def test_params_differences_name_each_setting_and_other_params():
    old, new = json.dumps({"rl": {"max_steps": 25, "lr": 1e-5}, "seed": 1}), json.dumps({"rl": {"max_steps": 5}, "seed": 1})
    detail = ("Union of exclusive params before and now across all output: "
              f"before: {old!r},'launch a' now: {new!r},'launch b' ")
    assert plan.params_differences(detail) == ["rl.max_steps 25 → 5", "rl.lr 1e-05 → unset", "launch a → launch b"]
    assert plan.params_differences("Union of exclusive params before and now across all output: "
                                   "before: <nothing exclusive> now: 3 ") == ["unset → 3"]
    assert plan.params_differences("settings") == []  # no values given: nothing to name


def test_set_becomes_snakemakes_config_set_beside_the_other_config_values():
    assert plan.snakemake_arguments(["-n", "--set", "rl.max_steps=5", "--set=seeds=[0, 1]", "--cores", "2"]) == [
        "--cores", "2", "--config", 'set=["rl.max_steps=5", "seeds=[0, 1]"]']
    assert plan.snakemake_arguments(["--config", "a=1", "--set", "rl.beta=0.1"]) == [
        "--config", 'set=["rl.beta=0.1"]', "a=1"]


def test_a_target_after_configfile_gets_the_hint_not_snakemakes_yaml_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "grpo_lambda.cli", "plan", "--configfile", "my.yaml",
                           "results/tiny/arith/grpo/seed0/done"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "grpo-lambda plan: error: 'results/tiny/arith/grpo/seed0/done' after --configfile is not a config file: a "
        "target goes before --configfile, which takes every word after it as a config file (grpo-lambda plan "
        "results/tiny/arith/grpo/seed0/done --configfile my.yaml)")


def test_plan_takes_set_as_every_command_that_reads_a_config(tmp_path):
    """The project's Snakefile planned with --set seeds=[0]: one seed's cells, not the default's four."""
    def train_jobs(*words):
        done = subprocess.run([sys.executable, "-m", "grpo_lambda.cli", "plan", "--snakefile", str(ROOT / "Snakefile"),
                               "--directory", str(tmp_path), "--configfile", str(ROOT / "config" / "config.yaml"),
                               "--set", f"results={tmp_path / 'results'}", *words],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return next(line.split()[1] for line in done.stdout.splitlines() if line.split()[:1] == ["train"])

    assert train_jobs() == "8"
    assert train_jobs("--set", "seeds=[0]") == "2"


def test_every_command_that_reads_a_config_applies_set():
    """grpo-lambda --help: every command that reads a config takes --set. Each applies it: a bad value given by --set
    is refused naming --set (plan's --set reaches Snakemake's config: test_plan_takes_set_...)."""
    from grpo_lambda import cli

    [commands] = [action for action in cli.parser()._actions if action.dest == "stage"]
    assert "--set KEY.PATH=VALUE" in cli.__doc__.replace("\n", " ")
    reading = {name: sub for name, sub in commands.choices.items()
               if any("--configfile" in action.option_strings for action in sub._actions)}
    assert len(reading) >= 15
    for name, sub in reading.items():
        words = [name, "--configfile", ROOT / "config" / "config.yaml", "--set", "rl.max_steps=five"]
        for action in sub._actions:
            if action.required and action.option_strings:
                words += [action.option_strings[0], *["1"] * (action.nargs if isinstance(action.nargs, int) else 1)]
            if action.dest in ("model", "dataset", "variant") and action.option_strings:
                words += [action.option_strings[0], {"model": "tiny", "dataset": "arith", "variant": "grpo"}[action.dest]]
        done = run_main(*words)
        assert (done.returncode, done.stderr.strip()) == (2, f"grpo-lambda {name}: error: --set: invalid value at "
                                                             "'rl.max_steps': 'five' is not of type 'integer' "
                                                             f"({ROOT / 'config' / 'config.yaml'} alone is valid)"), name
    assert "--set" in commands.choices["plan"].description  # plan passes its words to snakemake, --set as --config
