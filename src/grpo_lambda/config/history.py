"""``report.history``: what a study's earlier runs used and what was decided after their data was seen.

A replicated finding needs draws no earlier run of the study saw: ``seeds_run_before`` names the RL seeds
(``rl``) and SFT seeds (``sft``) of the study's earlier runs, and the config is refused when its own
``seeds`` or SFT seeds (``sft.seeds``, or ``sft.seed``) reuse one. ``changed_after_data`` lists the
design choices made after a run's data was seen (a horizon, a data size, a family, a margin), each with
the commit that made it and what had been seen; the published run's page prints them beside what was
declared before the run. ``declared`` lists what the study declared before its run, each item with the commit
that declared it: the page prints it as declared before the run only where git shows that commit an ancestor of
the run's commit (grpo_lambda.tables.study_blocks.history), else as decided during or after the run.
``shared_with_earlier_runs`` names draws the run shares with earlier runs of any study on the same task and
settings (an SFT model trained before, a test suite used before), so that "fresh" means what it says.
``margins_set_after_data: true`` says the equivalence margins were chosen after
the run's data was seen: the tables then print no ``equivalent`` verdict (grpo_lambda.tables.verdicts.POST_HOC).
"""

from __future__ import annotations

HISTORY_KEYS = ("seeds_run_before", "changed_after_data", "margins_set_after_data", "declared",
                "shared_with_earlier_runs")
CHANGE_KEYS = ("change", "commit", "seen")


def history(config: dict, given) -> dict:
    """``report.history`` checked against the config's seeds; a ValueError names the key and the seeds."""
    if given is None:  # not declared: the pages say the config records nothing (not that nothing changed)
        return {"seeds_run_before": {"rl": [], "sft": []}, "changed_after_data": [], "margins_set_after_data": False,
                "declared": [], "shared_with_earlier_runs": [], "given": False}
    if not isinstance(given, dict) or set(given) - set(HISTORY_KEYS):
        raise ValueError(f"report.history must be a mapping of {list(HISTORY_KEYS)}, got {given!r}")
    before = given.get("seeds_run_before") or {}
    if not isinstance(before, dict) or set(before) - {"rl", "sft"} or not all(
            isinstance(seeds, list) and all(isinstance(s, int) for s in seeds) for seeds in before.values()):
        raise ValueError("report.history.seeds_run_before must be {rl: [seeds], sft: [seeds]}")
    own = {"rl": list(config["seeds"]), "sft": own_sft_seeds(config)}
    per_model = any(_seeds_of(block) for block in _model_sft_blocks(config))
    sft_label = ("sft.seeds" if (config.get("sft") or {}).get("seeds") else "sft.seed") + (
        " and models.X.sft" if per_model else "")
    for kind, label in (("rl", "seeds"), ("sft", sft_label)):
        reused = sorted(set(own[kind]) & set(before.get(kind, [])))
        if reused:
            raise ValueError(f"{label}: {reused} were run before in this study (report.history.seeds_run_before."
                             f"{kind}); a run that confirms uses fresh seeds: choose seeds outside "
                             f"{sorted(before[kind])}")
    changes = given.get("changed_after_data") or []
    if not isinstance(changes, list):
        raise ValueError(f"report.history.changed_after_data must be a list of {{change, commit, seen}}, got {changes!r}")
    for i, c in enumerate(changes):
        if not (isinstance(c, dict) and set(c) <= set(CHANGE_KEYS) and c.get("change")):
            raise ValueError(f"report.history.changed_after_data[{i}] must be {{change, commit, seen}} with a "
                             f"change, got {c!r}")
    after = given.get("margins_set_after_data", False)
    if not isinstance(after, bool):
        raise ValueError(f"report.history.margins_set_after_data must be true or false, got {after!r}")
    return {"seeds_run_before": {"rl": list(before.get("rl", [])), "sft": list(before.get("sft", []))},
            "changed_after_data": [dict(c) for c in changes], "margins_set_after_data": after,
            "declared": [dict(d) for d in given.get("declared") or []],
            "shared_with_earlier_runs": [dict(d) for d in given.get("shared_with_earlier_runs") or []], "given": True}


def own_sft_seeds(config: dict) -> list[int]:
    """Every SFT seed the study trains: sft.seeds (or sft.seed, 0 by default) and each model's own sft block's."""
    seeds = [seed for block in [config.get("sft") or {}, *_model_sft_blocks(config)] for seed in _seeds_of(block)]
    return sorted(set(seeds)) or [0]


def _model_sft_blocks(config: dict) -> list[dict]:
    return [(model or {}).get("sft") or {} for model in config["models"].values()]


def _seeds_of(block: dict) -> list[int]:
    """The SFT seeds one sft block sets: its seeds, or its seed."""
    return list(block.get("seeds") or ([block["seed"]] if "seed" in block else []))
