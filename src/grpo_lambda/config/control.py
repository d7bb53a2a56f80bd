"""``report.control``: a control study's declaration, checked against the config. A control puts the same
pair of variants (``pair``: treatment and baseline) on training sets built so that the objective's own
weighting predicts the sign of the treatment's effect on each (``suites``: training set -> its held-out
suite; ``predicted``: training set -> ``ahead`` or ``behind``), declared before the run; the tables test each
effect and, with two training sets of opposite predictions, their contrast (grpo_lambda.tables.control).

A dose-response control also declares ``levels`` (training set -> the deciding token's weight under the
treatment relative to the other decisions', the baseline's 1: derived from the loss's gradient, and checked
there by the tests) and ``trend`` (the predicted sign of the slope of the effect on the log of that weight,
tested one-sided). A level weighted above 1 must be predicted ahead, one below 1 behind.

A dose over variants instead puts several treatments on one training set (``pair.treatment``: a list of
variants, the same objective at different settings, each against the one baseline): ``predicted`` and
``levels`` then name those variants. Every level's effect then shares the baseline's cells, which a trend's
weights (summing to 0) cancel.

``arms`` (added here): level -> (training set, its suite, the treatment variant), what the tables iterate."""

from __future__ import annotations

DIRECTIONS = ("ahead", "behind")


def check_suite_map(config: dict, mapping: dict, key: str) -> None:
    """A mapping of training sets to their held-out suites (``key`` names it in the error): every name known."""
    for dataset, suite in mapping.items():
        if dataset not in config["datasets"]:
            raise ValueError(f"{key}: {dataset!r} is not a training set (known: {list(config['datasets'])})")
        if suite not in config["benchmarks"]:
            raise ValueError(f"{key}.{dataset}: {suite!r} is not a benchmark (known: {list(config['benchmarks'])})")


def control(config: dict, given) -> dict | None:
    """``report.control`` checked; a ValueError names the key."""
    if given is None:
        return None
    if not isinstance(given, dict) or not {"suites", "pair", "predicted"} <= set(given) <= {
            "suites", "pair", "predicted", "equivalence_margin", "levels", "trend"}:
        raise ValueError("report.control must be {suites, pair, predicted} (and an equivalence_margin; "
                         "levels and trend for a dose-response control)")
    suites, pair, predicted = given["suites"], given["pair"], given["predicted"]
    if not isinstance(suites, dict) or not suites:
        raise ValueError("report.control.suites must map each training set to its held-out suite")
    check_suite_map(config, suites, "report.control.suites")
    if not isinstance(pair, dict) or set(pair) != {"treatment", "baseline"}:
        raise ValueError("report.control.pair must be {treatment: VARIANT, baseline: VARIANT} "
                         "(treatment: a list of variants for a dose over variants)")
    treatments = pair["treatment"] if isinstance(pair["treatment"], list) else None
    for role, variant in [("baseline", pair["baseline"])] + [("treatment", v) for v in treatments or [pair["treatment"]]]:
        if not isinstance(variant, str) or variant not in config["variants"]:
            raise ValueError(f"report.control.pair.{role}: {variant!r} is not a variant "
                             f"(known: {list(config['variants'])})")
    if treatments is not None and (len(suites) != 1 or len(treatments) < 2
                                   or len(set(treatments)) != len(treatments) or pair["baseline"] in treatments):
        raise ValueError("report.control.pair.treatment: a list of treatments (a dose over variants) needs one "
                         "training set in suites, two or more distinct treatments, and a baseline not among them")
    names = list(treatments) if treatments is not None else list(suites)
    what = "treatment of pair.treatment" if treatments is not None else "training set of suites"
    if not isinstance(predicted, dict) or set(predicted) != set(names) or not all(
            direction in DIRECTIONS for direction in predicted.values()):
        raise ValueError(f"report.control.predicted must give every {what} {names} one of {list(DIRECTIONS)}")
    margin = given.get("equivalence_margin")
    if margin is not None and not (isinstance(margin, (int, float)) and margin > 0):
        raise ValueError(f"report.control.equivalence_margin must be a positive number, got {margin!r}")
    levels, trend = dose_levels(given, names, predicted, what)
    if treatments is not None and levels is None:
        raise ValueError("report.control.pair.treatment: a list of treatments is a dose: declare levels and trend")
    if treatments is None:
        arms = {d: (d, s, pair["treatment"]) for d, s in suites.items()}
    else:
        (dataset, suite), = suites.items()
        arms = {v: (dataset, suite, v) for v in treatments}
    return {"suites": dict(suites), "pair": dict(pair), "predicted": dict(predicted), "equivalence_margin": margin,
            "levels": levels, "trend": trend, "arms": arms}


MIN_LEVELS = 3  # a slope with fewer has no df left to doubt it by


def dose_levels(given: dict, names: list, predicted: dict, what: str) -> tuple[dict | None, str | None]:
    """``levels`` (level -> relative weight: a training set, or a treatment of a dose over variants) and
    ``trend`` (ahead or behind) of a dose-response control, both or neither; (None, None) for a plain control."""
    levels, trend = given.get("levels"), given.get("trend")
    if levels is None and trend is None:
        return None, None
    if levels is None or trend is None:
        raise ValueError("report.control: levels and trend go together (a dose-response control declares both)")
    if not isinstance(levels, dict) or set(levels) != set(names) or len(levels) < MIN_LEVELS:
        raise ValueError(f"report.control.levels must give every {what} {names} its relative "
                         f"weight ({MIN_LEVELS} levels at least), got {levels!r}")
    for dataset, weight in levels.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise ValueError(f"report.control.levels.{dataset}: a relative weight must be a positive number, "
                             f"got {weight!r}")
        if weight == 1 or predicted[dataset] != ("ahead" if weight > 1 else "behind"):
            raise ValueError(f"report.control.levels.{dataset}: relative weight {weight} predicts "
                             f"{'nothing' if weight == 1 else 'ahead' if weight > 1 else 'behind'}, but "
                             f"report.control.predicted.{dataset} is {predicted[dataset]!r}")
    if len(set(levels.values())) != len(levels):
        raise ValueError("report.control.levels: two levels with the same relative weight leave no dose between them")
    if trend not in DIRECTIONS:
        raise ValueError(f"report.control.trend must be one of {list(DIRECTIONS)} (the predicted sign of the slope "
                         f"of the effect on ln(relative weight)), got {trend!r}")
    return {dataset: float(weight) for dataset, weight in levels.items()}, trend
