"""The ``report:`` options of the config (documented in ``grpo_lambda.tables``), merged over their
defaults and checked; ``grpo_lambda.config.validate`` runs the same checks before any job, and the tables
and figures read them here (this module imports neither)."""

from __future__ import annotations

import logging

from grpo_lambda.config.control import control
from grpo_lambda.config.family_names import KEYS, MAX_T, PROCEDURES, SEED_LEVEL_KEYS
from grpo_lambda.config.history import history
from grpo_lambda.config.horizon import horizon

log = logging.getLogger(__name__)

# What a problem's value is, per report.metric: the greedy completion's verdict (the paper's protocol),
# or from its k sampled completions: avg@k (their mean verdict), pass@k (any right), maj@k (the
# verdict of their most frequent answer).
METRICS = ("greedy", "avg", "pass_at_k", "maj_at_k")

REPORT_DEFAULTS = {
    "level": 0.95,
    "baseline": None,
    "grpo_lambda_variant": {"style": "recent", "update": "trace"},
    "figure1_model": None,
    "figure1_dataset": None,
    "figure4_datasets": None,
    "smoothing": "auto",
    "final_window": 20,
    "figure3_window": 20,
    "figure3_paper_cells": False,
    "figure4_variant": {"lam": 0.99, "style": "recent", "update": "trace"},
    "eval_length_pooled": False,
    "dataset_gain_variant": {"lam": 0.99, "style": "recent", "update": "trace"},
    "metric": "greedy",
    "equivalence_margin": {},
    "factorial": None,
    "primary": "paired",
    "checks": [],
    "horizon": None,
    "history": None,
    "control": None,
    "descriptive": [],
    "multiplicity": {},
}
# Options of the bootstrap the intervals once were; accepted so that older configs still run, and unused.
RETIRED = ("bootstrap", "seed")
SELECTOR_FIELDS = ("objective", "lam", "gamma", "style", "form", "update", "eps")
FIGURE1_PAPER_MODEL = "DeepSeek-R1-Distill-Qwen-7B"
MARGIN_METRICS = ("accuracy", "reward_auc")
# The paper's Figure 1 is one cell: the 7B model trained on MathRL-16K (the registry's name).
FIGURE1_PAPER_DATASET = "mathrl16k"


def report_options(config: dict) -> dict:
    """``config["report"]`` merged over REPORT_DEFAULTS and checked; errors name the key."""
    given = dict(config.get("report") or {})
    for key in RETIRED:
        if given.pop(key, None) is not None:
            log.info("report.%s is not used: the intervals are analytic (grpo_lambda.stats)", key)
    options = {**REPORT_DEFAULTS, **given}
    unknown = sorted(set(options) - set(REPORT_DEFAULTS))
    if unknown:
        raise ValueError(f"report: unknown option(s) {unknown}; known: {sorted(REPORT_DEFAULTS)}")
    if not 0 < float(options["level"]) < 1:
        raise ValueError(f"report.level must lie in (0, 1), got {options['level']!r}")
    if options["smoothing"] != "auto" and not (isinstance(options["smoothing"], (int, float))
                                               and 0 <= options["smoothing"] < 1):
        raise ValueError(f"report.smoothing must be 'auto' or a number in [0, 1), got {options['smoothing']!r}")
    if not isinstance(options["final_window"], int) or options["final_window"] < 1:
        raise ValueError(f"report.final_window must be an integer >= 1, got {options['final_window']!r}")
    _check_metric(config, options["metric"])
    options["equivalence_margin"] = _margins(options["equivalence_margin"])
    if options["baseline"] is None:
        grpo = [name for name, spec in config["variants"].items() if spec["objective"] == "grpo"]
        options["baseline"] = grpo[0] if grpo else next(iter(config["variants"]))
    elif options["baseline"] not in config["variants"]:
        raise ValueError(f"report.baseline {options['baseline']!r} is not a variant "
                         f"(known: {list(config['variants'])})")
    if options["figure1_model"] is None:
        by_paper = [m for m, spec in config["models"].items() if spec.get("paper_name") == FIGURE1_PAPER_MODEL]
        options["figure1_model"] = (by_paper or list(config["models"]))[0]
    elif options["figure1_model"] not in config["models"]:
        raise ValueError(f"report.figure1_model {options['figure1_model']!r} is not a model "
                         f"(known: {list(config['models'])})")
    options["figure1_dataset"] = _figure1_dataset(config, options["figure1_model"], options["figure1_dataset"])
    options["figure4_datasets"] = _dataset_list(config, "figure4_datasets", options["figure4_datasets"])
    _check_paper_figure_options(options)
    options["grpo_lambda_variant"] = _per_model_choice(config, options["grpo_lambda_variant"])
    options["factorial"] = _factorial(config, options["factorial"])
    options["checks"] = _checks(config, options["checks"], options["baseline"])
    options["primary"] = _primary(options["primary"], options["factorial"])
    options["horizon"] = horizon(config, options["horizon"])
    options["history"] = history(config, options["history"])
    options["control"] = control(config, options["control"])
    options["descriptive"] = _descriptive(options["descriptive"])
    options["multiplicity"] = _multiplicity(options["multiplicity"])
    return options


def _descriptive(keys) -> list[str]:
    """report.descriptive: the families (grpo_lambda.config.families.KEYS) published without a verdict."""
    if keys is None:
        return []
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise ValueError(f"report.descriptive must be a list of family keys ({', '.join(KEYS)}), got {keys!r}")
    unknown = [key for key in keys if key not in KEYS]
    if unknown:
        raise ValueError(f"report.descriptive: {unknown} are not family keys (known: {', '.join(KEYS)})")
    return list(keys)


def _multiplicity(given) -> dict[str, str]:
    """report.multiplicity: ``holm`` (every family, the default), ``max_t`` (every seed-level family: the
    step-down max-T over joint sign flips, grpo_lambda.multiplicity.max_t), or a mapping family key -> either.
    Normalised to {key: max_t} for the seed-level families that use it; a family of t tests is always Holm."""
    if given is None or given == "holm":
        return {}
    if given == MAX_T:
        return {key: MAX_T for key in SEED_LEVEL_KEYS}
    if not isinstance(given, dict):
        raise ValueError(f"report.multiplicity must be holm, max_t or a mapping family key -> holm | max_t, got {given!r}")
    for key, choice in given.items():
        if key not in KEYS:
            raise ValueError(f"report.multiplicity.{key}: not a family key (known: {', '.join(KEYS)})")
        if choice not in PROCEDURES:
            raise ValueError(f"report.multiplicity.{key} must be one of {list(PROCEDURES)}, got {choice!r}")
        if choice == MAX_T and key not in SEED_LEVEL_KEYS:
            raise ValueError(f"report.multiplicity.{key}: max_t needs one value per seed, and the {key} family holds "
                             f"t tests over seeds and problems (max_t applies to: {', '.join(SEED_LEVEL_KEYS)})")
    return {key: choice for key, choice in given.items() if choice == MAX_T}


PRIMARY_TABLES = ("paired", "factorial")


def _checks(config: dict, checks, baseline: str) -> list[str]:
    """report.checks: the variants that check the comparison itself (a line that should equal the
    baseline, or another line): each is a family of its own, never in the primary family."""
    if checks is None:
        return []
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        raise ValueError(f"report.checks must be a list of variants, got {checks!r}")
    unknown = [c for c in checks if c not in config["variants"]]
    if unknown:
        raise ValueError(f"report.checks: {unknown} are not variants (known: {list(config['variants'])})")
    if baseline in checks:
        raise ValueError(f"report.checks: the baseline {baseline!r} cannot be a check line")
    return list(checks)


def _primary(primary, factorial: dict | None) -> str:
    """report.primary: the table whose mean-accuracy comparisons are the study's one primary family:
    ``paired`` (each line minus the baseline) or ``factorial`` (the 2 × 2's simple effects)."""
    if primary not in PRIMARY_TABLES:
        raise ValueError(f"report.primary must be one of {list(PRIMARY_TABLES)}, got {primary!r}")
    if primary == "factorial" and factorial is None:
        raise ValueError("report.primary: factorial needs report.factorial (the 2 × 2 design)")
    return primary


def _check_metric(config: dict, metric) -> None:
    if metric not in METRICS:
        raise ValueError(f"report.metric must be one of {list(METRICS)} ('greedy': the paper's protocol; the "
                         f"others from evaluation.samples), got {metric!r}")
    evaluation = config.get("evaluation") or {}
    if metric != "greedy" and not evaluation.get("samples"):
        raise ValueError(f"report.metric {metric} needs sampled completions: set evaluation.samples")
    if metric == "greedy" and evaluation.get("greedy") is False:
        raise ValueError("report.metric greedy needs the greedy pass that evaluation.greedy: false leaves out; "
                         "set report.metric: avg")


def _margins(margins) -> dict[str, float]:
    """report.equivalence_margin: {accuracy: x, reward_auc: y}, each optional and > 0."""
    if margins is None:
        return {}
    if not isinstance(margins, dict):
        raise ValueError(f"report.equivalence_margin must map {list(MARGIN_METRICS)} to margins, got {margins!r}")
    for metric, margin in margins.items():
        if metric not in MARGIN_METRICS:
            raise ValueError(f"report.equivalence_margin.{metric}: not a metric with a margin "
                             f"(known: {list(MARGIN_METRICS)})")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin > 0:
            raise ValueError(f"report.equivalence_margin.{metric} must be a number > 0, got {margin!r}")
    return {metric: float(margin) for metric, margin in margins.items()}


def _factorial(config: dict, design) -> dict | None:
    """report.factorial: two factors and the variant of each of their four level combinations.

        factorial:
          factors: [trace, clamp]
          cells:
            grpo: {trace: false, clamp: false}
            grpo-clamp: {trace: false, clamp: true}
            ...

    Normalised to {"factors": (a, b), "cells": {(a_on, b_on): variant}}.
    """
    if design is None:
        return None
    where = "report.factorial"
    if not isinstance(design, dict) or set(design) != {"factors", "cells"}:
        raise ValueError(f"{where} must have exactly the keys 'factors' and 'cells', got {design!r}")
    factors = design["factors"]
    if (not isinstance(factors, list) or len(factors) != 2 or len(set(factors)) != 2
            or not all(isinstance(f, str) and f for f in factors)):
        raise ValueError(f"{where}.factors must name two different factors, got {factors!r}")
    cells = design["cells"]
    if not isinstance(cells, dict):
        raise ValueError(f"{where}.cells must map variants to their factor levels, got {cells!r}")
    by_levels: dict[tuple[bool, bool], str] = {}
    for variant, levels in cells.items():
        if variant not in config["variants"]:
            raise ValueError(f"{where}.cells: {variant!r} is not a variant (known: {list(config['variants'])})")
        if (not isinstance(levels, dict) or set(levels) != set(factors)
                or not all(isinstance(levels[f], bool) for f in factors)):
            raise ValueError(f"{where}.cells.{variant} must give each factor of {factors} true or false, "
                             f"got {levels!r}")
        key = (levels[factors[0]], levels[factors[1]])
        if key in by_levels:
            raise ValueError(f"{where}.cells: {by_levels[key]!r} and {variant!r} are the same cell "
                             f"({factors[0]}: {key[0]}, {factors[1]}: {key[1]}); each cell needs exactly one variant")
        by_levels[key] = variant
    missing = [key for key in [(a, b) for a in (False, True) for b in (False, True)] if key not in by_levels]
    if missing:
        empty = ", ".join(f"{factors[0]}: {a}, {factors[1]}: {b}" for a, b in missing)
        raise ValueError(f"{where}.cells: no variant for {empty}; each of the four cells needs exactly one variant")
    return {"factors": tuple(factors), "cells": by_levels}


def _figure1_dataset(config: dict, model: str, choice) -> str:
    """report.figure1_dataset: a training set of Figure 1's model, or "mean" (over its training sets).

    Default: the paper's cell (the model's MathRL-16K set) when the model trains on it, else its only
    training set, else "mean".
    """
    datasets = config["models"][model].get("datasets") or list(config["datasets"])
    if choice is None:
        paper = [d for d in datasets if config["datasets"][d].get("name", d) == FIGURE1_PAPER_DATASET]
        return paper[0] if paper else datasets[0] if len(datasets) == 1 else "mean"
    if choice != "mean" and choice not in datasets:
        raise ValueError(f"report.figure1_dataset {choice!r} is neither 'mean' nor a training set of "
                         f"report.figure1_model {model!r} (its training sets: {datasets})")
    return choice


def _dataset_list(config: dict, key: str, choice) -> list[str]:
    """A list of training sets (default: every one of the config)."""
    if choice is None:
        return list(config["datasets"])
    unknown = [d for d in choice if d not in config["datasets"]] if isinstance(choice, list) else None
    if unknown is None or unknown or not choice:
        raise ValueError(f"report.{key} must be a non-empty list of training sets "
                         f"(known: {list(config['datasets'])}), got {choice!r}")
    return list(choice)


def _per_model_choice(config: dict, choice) -> dict:
    """Normalise report.grpo_lambda_variant to {model: "mean" | variant name | selector dict}."""
    models = config["models"]
    if isinstance(choice, dict) and choice and set(choice) <= set(models):
        per_model = {m: choice.get(m, REPORT_DEFAULTS["grpo_lambda_variant"]) for m in models}
    else:
        per_model = {m: choice for m in models}
    for model, value in per_model.items():
        if isinstance(value, str):
            if value != "mean" and value not in config["variants"]:
                raise ValueError(f"report.grpo_lambda_variant for model {model!r}: {value!r} is neither "
                                 f"'mean' nor a variant (known: {list(config['variants'])})")
        elif isinstance(value, dict):
            bad = sorted(set(value) - set(SELECTOR_FIELDS))
            if bad:
                raise ValueError(f"report.grpo_lambda_variant for model {model!r}: selector fields {bad} "
                                 f"are not variant fields ({list(SELECTOR_FIELDS)}) nor model names")
        else:
            raise ValueError(f"report.grpo_lambda_variant must be 'mean', a variant name or a selector, "
                             f"got {value!r}")
    return per_model


def _check_paper_figure_options(options: dict) -> None:
    """figure3_window, figure3_paper_cells, figure4_variant, eval_length_pooled, dataset_gain_variant."""
    window = options["figure3_window"]
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"report.figure3_window must be an integer >= 1, got {window!r}")
    for key in ("figure3_paper_cells", "eval_length_pooled"):
        if not isinstance(options[key], bool):
            raise ValueError(f"report.{key} must be true or false, got {options[key]!r}")
    for key, allowed in (("figure4_variant", "'best'"), ("dataset_gain_variant", None)):
        value = options[key]
        if isinstance(value, dict) and value and not set(value) - set(SELECTOR_FIELDS):
            continue
        if allowed and value == "best":
            continue
        raise ValueError(f"report.{key} must be a selector of variant fields {list(SELECTOR_FIELDS)}"
                         + (f" or {allowed}" if allowed else "") + f", got {value!r}")
