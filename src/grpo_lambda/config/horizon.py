"""``report.horizon``: a horizon study's declaration, checked against the config. A horizon study trains the
same pairs of variants (``pairs``: treatment and baseline; ``exploratory`` ones outside the primary family) on
training sets of different chain lengths (``chains``: training set -> its held-out synthetic arith suite, whose
``columns`` are the chain's length); the tables test each pair's effect per length and its trend over the
lengths (a slope, with ``curvature`` its lack of fit), and the band the RL waits for (grpo_lambda.tables.horizon)."""

from __future__ import annotations

from grpo_lambda.config.control import check_suite_map
from grpo_lambda.config.family_names import EXPLORATORY_TREND, TREND

HORIZON_MARGINS = ("effect", "slope")  # the horizon table's two statistics (grpo_lambda.tables.horizon)


def horizon(config: dict, given) -> dict | None:
    """``report.horizon`` checked against the config; a ValueError names the key."""
    if given is None:
        return None
    if not isinstance(given, dict):
        raise ValueError("report.horizon must be a mapping with chains and pairs")
    unknown = sorted(set(given) - {"chains", "pairs", "equivalence_margin", "band", "curvature"})
    if unknown:
        raise ValueError(f"report.horizon: unknown key(s) {unknown}; known: chains, pairs, equivalence_margin, band, "
                         "curvature")
    if not isinstance(given.get("curvature", False), bool):
        raise ValueError(f"report.horizon.curvature must be true or false, got {given['curvature']!r}")
    band = given.get("band")
    if band is not None and not (isinstance(band, list) and len(band) == 2
                                 and all(isinstance(x, (int, float)) for x in band) and 0 <= band[0] < band[1] <= 1):
        raise ValueError(f"report.horizon.band must be [low, high] within [0, 1], got {band!r}")
    chains, pairs = given.get("chains") or {}, given.get("pairs") or {}
    if len(chains) < 2:
        raise ValueError("report.horizon.chains must map at least two training sets to their held-out suites")
    if given.get("curvature") and len(chains) < 3:
        raise ValueError("report.horizon.curvature needs at least three horizons (report.horizon.chains)")
    check_suite_map(config, chains, "report.horizon.chains")
    for dataset, benchmark in chains.items():
        if "columns" not in config["benchmarks"][benchmark]:
            raise ValueError(f"report.horizon.chains.{dataset}: benchmark {benchmark!r} has no columns "
                             "(a horizon suite is a synthetic arith suite with columns and carry_free_share)")
    # the slope needs two chain lengths and the lack of fit three: horizons of equal columns are one length
    lengths = {config["benchmarks"][benchmark]["columns"] for benchmark in chains.values()}
    if len(lengths) < (3 if given.get("curvature") else 2):
        raise ValueError(f"report.horizon.chains: their suites have {len(lengths)} distinct column count(s) "
                         f"{sorted(lengths)}; the {'lack of fit needs three' if given.get('curvature') else 'slope needs two'}")
    if not pairs:
        raise ValueError("report.horizon.pairs must name at least one {treatment, baseline} pair")
    for name, pair in pairs.items():
        if name in (TREND, EXPLORATORY_TREND):  # the names of the trends' own families (config.families)
            raise ValueError(f"report.horizon.pairs: {name!r} is the name of a trend family; name the pair otherwise")
        if not isinstance(pair, dict) or not {"treatment", "baseline"} <= set(pair) <= {"treatment", "baseline",
                                                                                        "exploratory"}:
            raise ValueError(f"report.horizon.pairs.{name} must be {{treatment: VARIANT, baseline: VARIANT}}, "
                             "with exploratory: true for a pair outside the primary family")
        if not isinstance(pair.get("exploratory", False), bool):
            raise ValueError(f"report.horizon.pairs.{name}.exploratory must be true or false")
        for role in ("treatment", "baseline"):
            variant = pair[role]
            if variant not in config["variants"]:
                raise ValueError(f"report.horizon.pairs.{name}.{role}: {variant!r} is not a variant "
                                 f"(known: {list(config['variants'])})")
    if all(pair.get("exploratory", False) for pair in pairs.values()):
        raise ValueError("report.horizon.pairs: every pair is exploratory; the primary test needs one that is not")
    margins = dict(given.get("equivalence_margin") or {})
    bad = sorted(set(margins) - set(HORIZON_MARGINS))
    if bad:
        raise ValueError(f"report.horizon.equivalence_margin: unknown key(s) {bad}; known: {list(HORIZON_MARGINS)}")
    for key, value in margins.items():
        if not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"report.horizon.equivalence_margin.{key} must be a positive number, got {value!r}")
    return {"chains": dict(chains), "pairs": {k: {"exploratory": False, **v} for k, v in pairs.items()},
            "equivalence_margin": margins,
            "band": list(band) if band is not None else None, "curvature": bool(given.get("curvature", False))}
