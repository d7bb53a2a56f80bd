"""grpo-lambda plan: Snakemake's dry run of a small workflow, run for real, summarised as jobs per rule and why, and
what changed since the last run with the wildcards of the jobs it reruns."""

import subprocess
import sys

from grpo_lambda import plan

SNAKEFILE = '''
rule all:
    input: expand("out/{name}.txt", name=["a", "b", "c"]), "out/joined.txt"

rule make:
    output: "out/{name}.txt"
    params: value=lambda wildcards: config.get("value", 1) if wildcards.name != "c" else 1
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
    assert lines[-2:] == ["changed since the last run:", "  make: params changed (2 jobs: name a, b)"]


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
