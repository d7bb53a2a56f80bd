"""grpo-lambda plan: what Snakemake would run, in a few lines, instead of its dry run's job-by-job listing.

    grpo-lambda plan                                   # snakemake -n, summarised
    grpo-lambda plan --configfile config/compare.yaml --config set='rl.max_steps=5'

Runs ``snakemake -n`` with the arguments given (Snakemake's own dry run: the same DAG, the same config checks) and
reads the job blocks it prints (``rule NAME:`` then ``reason:`` and ``wildcards:`` lines): the jobs per rule and
why each runs, in Snakemake's reason categories (output missing, after a job it needs, params / code / input set
changed since the last run, forced), then what changed since the last run, rule by rule with the wildcards of
the jobs it reruns (``train: params changed: variant grpo; seed 0, 1``). ``snakemake -n`` itself lists every job
with every file.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter, defaultdict

# Snakemake's reason (the text before its ':' or the whole text) -> how the plan says it. Others are shown as given.
REASONS = {
    "Missing output files": "output missing",
    "Input files updated by another job": "after a job it needs",
    "Updated input files": "input newer than output",
    "Code has changed since last execution": "code changed",
    "Params have changed since last execution": "params changed",
    "Set of input files has changed since last execution": "input set changed",
    "Software environment definition has changed since last execution": "software environment changed",
    "Forced execution": "forced",
}
# The reasons that say something changed since the last run (the others: never run, or a consequence).
CHANGED = ("input newer than output", "code changed", "params changed", "input set changed",
           "software environment changed", "forced")
_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) ([\w-]+):$")
_NOTHING = "Nothing to be done"


def parse_jobs(text: str) -> list[dict]:
    """The jobs of a ``snakemake -n`` output: ``{"rule", "reasons": [plan's words], "wildcards": {name: value}}``."""
    jobs = []
    for line in text.splitlines():
        found = _RULE.match(line.strip())
        if found:
            jobs.append({"rule": found[1], "reasons": [], "wildcards": {}})
        elif jobs and line.startswith("    reason: "):
            jobs[-1]["reasons"] = [reason_words(part) for part in line[len("    reason: "):].split("; ")]
        elif jobs and line.startswith("    wildcards: "):
            pairs = (item.split("=", 1) for item in line[len("    wildcards: "):].split(", "))
            jobs[-1]["wildcards"] = {name: value for name, value in (pair for pair in pairs if len(pair) == 2)}
    return jobs


def reason_words(reason: str) -> str:
    head = reason.split(":", 1)[0].strip()
    return REASONS.get(head, head[:1].lower() + head[1:])


def summary(text: str) -> str:
    """The plan's lines from a ``snakemake -n`` output."""
    jobs = parse_jobs(text)
    if not jobs:
        return ("plan: nothing to do: every requested file is present and up to date" if _NOTHING in text
                else "plan: no job found in Snakemake's dry run")
    order = _stats_order(text)
    per_rule = Counter(sorted((job["rule"] for job in jobs), key=lambda rule: order.get(rule, len(order))))
    why = defaultdict(Counter)
    for job in jobs:
        why[job["rule"]].update(list(dict.fromkeys(job["reasons"])))  # once each, in Snakemake's order (a set's varies by run)
    width = max(len(rule) for rule in per_rule)
    lines = [f"plan: {len(jobs)} jobs ({len(per_rule)} rules); `snakemake -n` lists each",
             f"  {'rule':<{width}}  jobs  why"]
    for rule, count in per_rule.items():  # in the order of Snakemake's job stats
        reasons = ", ".join(reason if n == count else f"{reason} ({n})" for reason, n in why[rule].most_common())
        lines.append(f"  {rule:<{width}}  {count:>4}  {reasons}")
    changed = [(rule, reason) for rule in per_rule for reason in CHANGED if why[rule][reason]]
    if not changed:
        lines.append("changed since the last run: nothing (each job's output is missing, or it follows one that runs)")
        return "\n".join(lines)
    lines.append("changed since the last run:")
    for rule, reason in changed:
        hit = [job["wildcards"] for job in jobs if job["rule"] == rule and reason in job["reasons"]]
        values = {name: sorted({wildcards[name] for wildcards in hit if name in wildcards}, key=_natural)
                  for name in dict.fromkeys(name for wildcards in hit for name in wildcards)}
        where = "; ".join(f"{name} {', '.join(found)}" for name, found in values.items())
        lines.append(f"  {rule}: {reason} ({len(hit)} job{'s' if len(hit) != 1 else ''}{': ' + where if where else ''})")
    return "\n".join(lines)


def _stats_order(text: str) -> dict[str, int]:
    """Each rule's place in Snakemake's "Job stats" table (the order it plans the rules in)."""
    block = text.split("Job stats:", 1)[1] if "Job stats:" in text else ""
    rules = []
    for line in block.splitlines()[3:]:
        words = line.split()
        if len(words) != 2 or words[0] == "total":
            break
        rules.append(words[0])
    return {rule: place for place, rule in enumerate(rules)}


def _natural(text: str):
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def run(snakemake_args: list[str]) -> int:
    """Print the plan of ``snakemake -n SNAKEMAKE_ARGS``; its exit status (Snakemake's own output when it fails)."""
    args = [arg for arg in snakemake_args if arg not in ("-n", "--dry-run", "--dryrun")]
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], capture_output=True, text=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print(output.rstrip(), file=sys.stderr)
        return done.returncode
    print(summary(output))
    return 0
