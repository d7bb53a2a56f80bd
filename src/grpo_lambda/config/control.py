"""``report.control``: a control study's declaration, checked against the config. A control puts the same
pair of variants (``pair``: treatment and baseline) on training sets built so that the objective's own
weighting predicts the sign of the treatment's effect on each (``suites``: training set -> its held-out
suite; ``predicted``: training set -> ``ahead`` or ``behind``), declared before the run; the tables test each
effect and, with two training sets of opposite predictions, their contrast (grpo_lambda.tables.control)."""

from __future__ import annotations

DIRECTIONS = ("ahead", "behind")


def control(config: dict, given) -> dict | None:
    """``report.control`` checked; a ValueError names the key."""
    if given is None:
        return None
    if not isinstance(given, dict) or not {"suites", "pair", "predicted"} <= set(given) <= {
            "suites", "pair", "predicted", "equivalence_margin"}:
        raise ValueError("report.control must be {suites, pair, predicted} (and an equivalence_margin)")
    suites, pair, predicted = given["suites"], given["pair"], given["predicted"]
    if not isinstance(suites, dict) or not suites:
        raise ValueError("report.control.suites must map each training set to its held-out suite")
    for dataset, suite in suites.items():
        if dataset not in config["datasets"]:
            raise ValueError(f"report.control.suites: {dataset!r} is not a training set (known: "
                             f"{list(config['datasets'])})")
        if suite not in config["benchmarks"]:
            raise ValueError(f"report.control.suites.{dataset}: {suite!r} is not a benchmark (known: "
                             f"{list(config['benchmarks'])})")
    if not isinstance(pair, dict) or set(pair) != {"treatment", "baseline"}:
        raise ValueError("report.control.pair must be {treatment: VARIANT, baseline: VARIANT}")
    for role, variant in pair.items():
        if variant not in config["variants"]:
            raise ValueError(f"report.control.pair.{role}: {variant!r} is not a variant "
                             f"(known: {list(config['variants'])})")
    if not isinstance(predicted, dict) or set(predicted) != set(suites) or not all(
            direction in DIRECTIONS for direction in predicted.values()):
        raise ValueError(f"report.control.predicted must give every training set of suites {list(suites)} "
                         f"one of {list(DIRECTIONS)}")
    margin = given.get("equivalence_margin")
    if margin is not None and not (isinstance(margin, (int, float)) and margin > 0):
        raise ValueError(f"report.control.equivalence_margin must be a positive number, got {margin!r}")
    return {"suites": dict(suites), "pair": dict(pair), "predicted": dict(predicted), "equivalence_margin": margin}
