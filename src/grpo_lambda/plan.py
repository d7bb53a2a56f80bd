"""grpo-lambda plan: what Snakemake would run, in a few lines, instead of its dry run's job-by-job listing.

    grpo-lambda plan                                   # snakemake -n, summarised
    grpo-lambda plan --configfile config/compare.yaml --config set='rl.max_steps=5'

Runs ``snakemake -n`` with the arguments given (Snakemake's own dry run: the same DAG, the same config checks) and
reads the job blocks it prints (``rule NAME:`` then ``reason:`` and ``wildcards:`` lines): the jobs per rule and
why each runs, in Snakemake's reason categories (output missing, after a job it needs, params / code / input set
changed since the last run, forced), then what changed since the last run, rule by rule with the wildcards of
the jobs it reruns and what changed (``train: params changed (2 jobs: variant grpo; seed 0, 1): rl.max_steps 25 → 5``:
each setting of the rules' JSON settings that differs, read from the old and new params Snakemake's reason gives;
``input newer than output (...): my_advantages.py``: the files). ``snakemake -n`` itself lists every job with every
file.

``--set KEY.PATH=VALUE`` (grpo-lambda's overrides, repeatable) is passed on as Snakemake's ``--config set=...``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

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
# How each of Snakemake's reasons starts (snakemake.jobs.Reason): a job's reasons are joined by "; ", which the old
# and new params a reason quotes may hold too.
_REASON_STARTS = ("Forced execution", "Rules with ", "Missing output files", "Incomplete output files",
                  "Updated input files", "Input files updated by another job", "Output file is a pipe",
                  "Job provides a service", "Set of input files has changed", "Code has changed", "Params have changed",
                  "Software environment definition")
_NEXT_REASON = re.compile("; (?=" + "|".join(re.escape(start) for start in _REASON_STARTS) + ")")
# The old and new params of a job, as Snakemake's reason gives them (snakemake.persistence.ParamsChange)
_PARAMS = re.compile(r"Union of exclusive params before and now across all output: before: (.*) now: (.*?)\s*$",
                     re.S)
SHOWN_FILES = 3  # updated input files named per rule; more are counted


def parse_jobs(text: str) -> list[dict]:
    """The jobs of a ``snakemake -n`` output: ``{"rule", "reasons": [plan's words], "details": {plan's words: the
    text after Snakemake's reason}, "wildcards": {name: value}}``."""
    jobs = []
    for line in text.splitlines():
        found = _RULE.match(line.strip())
        if found:
            jobs.append({"rule": found[1], "reasons": [], "details": {}, "wildcards": {}})
        elif jobs and line.startswith("    reason: "):
            parts = _NEXT_REASON.split(line[len("    reason: "):])
            jobs[-1]["reasons"] = [reason_words(part) for part in parts]
            jobs[-1]["details"] = {reason_words(part): part.split(": ", 1)[1] for part in parts if ": " in part}
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
        what = _what_changed(reason, [job["details"].get(reason, "") for job in jobs
                                      if job["rule"] == rule and reason in job["reasons"]])
        lines.append(f"  {rule}: {reason} ({len(hit)} job{'s' if len(hit) != 1 else ''}{': ' + where if where else ''})"
                     + (f": {what}" if what else ""))
    return "\n".join(lines)


def _what_changed(reason: str, details: list[str]) -> str:
    """What changed for a rule's jobs: the settings whose values differ (params), or the newer input files."""
    if reason == "params changed":
        found = [difference for detail in details for difference in params_differences(detail)]
    elif reason == "input newer than output":
        found = [path for detail in details for path in detail.split(", ") if path]
    else:
        return ""
    found = list(dict.fromkeys(found))
    if reason == "params changed" or len(found) <= SHOWN_FILES:
        return ", ".join(found)
    return f"{', '.join(found[:SHOWN_FILES])} and {len(found) - SHOWN_FILES} more"


def params_differences(detail: str) -> list[str]:
    """What Snakemake's "Params have changed" reason says changed, in words: each setting of a param that holds
    JSON (the rules' --settings) whose value differs, ``rl.max_steps 25 → 5``; another param as its old and new
    value, shortened. [] when the reason gives no values (an older Snakemake)."""
    sides = _params_sides(detail)
    if sides is None:
        return []
    before, now = ([_as_json(value) for value in side] for side in sides)
    differences = []
    for old in [value for value in before if isinstance(value, dict)]:
        candidates = [value for value in now if isinstance(value, dict)]
        if not candidates:
            break
        new = max(candidates, key=lambda value: len(set(value) & set(old)))  # the same param: the most keys shared
        now.remove(new)
        before.remove(old)
        flat_old, flat_new = _flatten(old), _flatten(new)
        for key in dict.fromkeys([*flat_old, *flat_new]):
            was, now_is = flat_old.get(key, _UNSET), flat_new.get(key, _UNSET)
            if was != now_is:
                differences.append(f"{key} {_short(was)} → {_short(now_is)}")
    differences += [f"{_short(old)} → {_short(new)}" for old, new in zip(before, now)]
    differences += [f"{_short(_UNSET)} → {_short(new)}" for new in now[len(before):]]
    differences += [f"{_short(old)} → {_short(_UNSET)}" for old in before[len(now):]]
    return differences


_UNSET = object()


def _params_sides(detail: str) -> tuple[list, list] | None:
    """The old and new params of Snakemake's reason: each side the reprs of the params, joined by ','."""
    found = _PARAMS.match(detail)
    if not found:
        return None
    text = found[1] + " now: " + found[2]
    for split in (match.start() for match in re.finditer(" now: ", text)):  # " now: " may occur inside a param
        try:
            return _side(text[:split]), _side(text[split + len(" now: "):].rstrip())
        except (ValueError, SyntaxError):
            continue
    return None


def _side(text: str) -> list:
    return [] if text == "<nothing exclusive>" else list(ast.literal_eval(f"[{text}]"))


def _as_json(value):
    """A param that holds a JSON object as that object; any other as it is."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


def _flatten(settings: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _short(value, width: int = 40) -> str:
    text = "unset" if value is _UNSET else value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= width else text[:width - 1] + "…"


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


class PlanError(Exception):
    """Arguments snakemake -n would misread: the message says how to write them."""


CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def snakemake_arguments(args: list[str]) -> list[str]:
    """The arguments of ``snakemake -n`` for plan's: ``--set KEY.PATH=VALUE`` (repeatable) as ``--config set='...'``
    (beside the other --config values given), a dry-run flag dropped (plan adds its own). PlanError when a word after
    --configfile is not a config file (a target there would be read as one: targets go before --configfile)."""
    overrides, rest = [], []
    words = iter(args)
    for word in words:
        if word == "--set":
            overrides.append(next(words, ""))
        elif word.startswith("--set="):
            overrides.append(word[len("--set="):])
        elif word not in ("-n", "--dry-run", "--dryrun"):
            rest.append(word)
    _check_configfiles(rest)
    if not overrides:
        return rest
    # a YAML list of the texts, as Snakemake reads a --config value: no text needs quoting for a shell's split
    value = "set=" + json.dumps(overrides)
    if "--config" in rest:
        at = rest.index("--config") + 1
        return [*rest[:at], value, *rest[at:]]
    return [*rest, "--config", value]


def _check_configfiles(args: list[str]) -> None:
    for at, word in enumerate(args):
        if word not in ("--configfile", "--configfiles"):
            continue
        for value in args[at + 1:]:
            if value.startswith("-"):
                break
            if Path(value).suffix not in CONFIG_SUFFIXES and not Path(value).is_file():
                targets = [other for other in args[at + 1:] if not other.startswith("-")]
                configs = [other for other in targets if Path(other).suffix in CONFIG_SUFFIXES or Path(other).is_file()]
                raise PlanError(f"{value!r} after --configfile is not a config file: a target goes before --configfile, "
                                "which takes every word after it as a config file (grpo-lambda plan "
                                f"{' '.join(other for other in targets if other not in configs)} --configfile "
                                f"{' '.join(configs)})")


def run(snakemake_args: list[str]) -> int:
    """Print the plan of ``snakemake -n SNAKEMAKE_ARGS``; its exit status (Snakemake's own output when it fails)."""
    try:
        args = snakemake_arguments(snakemake_args)
    except PlanError as error:
        print(f"grpo-lambda plan: error: {error}", file=sys.stderr)
        return 2
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], capture_output=True, text=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print(output.rstrip(), file=sys.stderr)
        return done.returncode
    print(summary(output))
    return 0
