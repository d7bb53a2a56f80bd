"""The names of the comparison families, by one rule the tables and the design check both read: each
comparison's role and family (:func:`paired_family`, :func:`factorial_family`, :func:`speed_family`,
:func:`horizon_family`), a family's key (:data:`KEYS`, :func:`key_of`: what report.descriptive and
report.multiplicity name) and the procedure that adjusts it (:func:`procedure`). grpo_lambda.config.families
lists every family a config declares and judges whether each can reject."""

from __future__ import annotations

import re

from grpo_lambda.config.settings import model_variants

# Roles of a comparison (the tables' ``role`` column) and the names the tables give the benchmark average
# and the mean over training sets (grpo_lambda.tables.keys holds the same two names).
PRIMARY, EXPLORATORY, CHECK, IN_FACTORIAL = "primary", "exploratory", "check", "factorial"
AVERAGE, ALL_DATASETS = "average", "all"
HOLM, MAX_T, DESCRIPTIVE = "holm", "max_t", "descriptive"
PROCEDURES = (HOLM, MAX_T)

# The family keys report.descriptive and report.multiplicity name, each with the family names it covers,
# whether its comparisons are seed-level (per-unit values: the sign-flip floor, max-T possible), and the
# table that writes it. A check line's families (report.checks) are all "checks".
KEYS = {
    "primary": ("paired or factorial", False, "the study's primary family (report.primary)"),
    "mean_accuracy": ("paired", False, "each line's gap per training set, where a model has several"),
    "per_suite_accuracy": ("paired, factorial", False, "the gaps and effects on each benchmark"),
    "gain_over_sft": ("results_by_variant", False, "each variant's gain over its SFT model, per benchmark"),
    "simple_effects": ("factorial", False, "the 2 × 2's simple effects when they are not the primary family"),
    "main_effects": ("factorial", False, "the 2 × 2's main effects"),
    "interaction": ("factorial", False, "the 2 × 2's interaction"),
    "reward_auc": ("learning_speed", True, "each line's training-reward AUC gap to the baseline"),
    "steps_to_threshold": ("learning_speed", True, "each line's steps-to-threshold gap to the baseline"),
    "reward_auc_simple_effects": ("factorial", True, "the 2 × 2's simple effects on the training-reward AUC"),
    "reward_auc_main_effects": ("factorial", True, "the 2 × 2's main effects on the training-reward AUC"),
    "reward_auc_interaction": ("factorial", True, "the 2 × 2's interaction on the training-reward AUC"),
    "horizon_effects": ("horizon", False, "one pair's effect at each horizon"),
    "trend": ("horizon", False, "the primary pairs' trends with ln(chain length)"),
    "exploratory_trend": ("horizon", False, "the exploratory pairs' trends"),
    "control": ("control", False, "a control study's effects and their contrast (report.control)"),
    "control_trend": ("control", False, "a dose-response control's trend of the effect on ln(relative weight)"),
    "checks": ("paired, learning_speed", True, "a check line's comparisons (report.checks), each alone"),
}
SEED_LEVEL_KEYS = tuple(key for key, (_, seed_level, _) in KEYS.items() if seed_level)

REWARD_AUC, STEPS = "reward AUC", "steps to threshold"
TREND, EXPLORATORY_TREND = "trend", "exploratory trend"
CONTROL, CONTROL_TREND = "control", "control trend"
# A control table's rows are told apart by their role (its published form has no family column): the effects
# (and a contrast) are the control family, a dose-response control's trend its own.
CONTROL_ROLES = {CONTROL: "effect", CONTROL_TREND: "trend"}
FACTORIAL_REWARD_AUC = "reward_auc"
SIMPLE, MAIN, INTERACTION = "simple", "main", "interaction"
FACTORIAL_KINDS = {SIMPLE: 4, MAIN: 2, INTERACTION: 1}  # the 2 × 2's comparisons of each kind


def simple_effect_pairs(options: dict) -> set[frozenset]:
    """The pairs of variants whose difference is a simple effect of report.factorial (cells one factor apart)."""
    design = options.get("factorial")
    if not design:
        return set()
    cells = design["cells"]
    return {frozenset((cells[a], cells[b])) for a in cells for b in cells
            if sum(x != y for x, y in zip(a, b)) == 1}


def paired_family(options: dict, variants: list[str], dataset: str, benchmark: str,
                  several_sets: bool) -> tuple[str, str]:
    """(role, family) of one row of the paired table (grpo_lambda.tables.paired): a check line's row is a
    family of its own; a simple effect of the 2 × 2 is counted there when it is the primary family; the
    mean accuracy's rows are the primary family (over all training sets where a model has several),
    per-benchmark rows the per-suite family."""
    if any(v in options["checks"] for v in variants):
        return CHECK, f"check: {' '.join(variants)}"
    if (options["primary"] == "factorial" and len(variants) == 1
            and frozenset((variants[0], options["baseline"])) in simple_effect_pairs(options)):
        return IN_FACTORIAL, ""
    if benchmark != AVERAGE:
        return EXPLORATORY, "per-suite accuracy"
    if options["primary"] == "paired" and (dataset == ALL_DATASETS) == several_sets:
        return PRIMARY, PRIMARY
    return EXPLORATORY, "mean accuracy"


def factorial_family(metric: str, benchmark: str, kind: str, primary: str) -> tuple[str, str]:
    """(role, family) of one effect of the factorial table (grpo_lambda.tables.factorial)."""
    if metric == FACTORIAL_REWARD_AUC:
        return EXPLORATORY, {SIMPLE: "reward AUC simple effects", MAIN: "reward AUC main effects",
                             INTERACTION: "reward AUC interaction"}[kind]
    if benchmark != AVERAGE:
        return EXPLORATORY, "per-suite accuracy"
    if kind == SIMPLE:
        return (PRIMARY, PRIMARY) if primary == "factorial" else (EXPLORATORY, "simple effects")
    return EXPLORATORY, {MAIN: "main effects", INTERACTION: "interaction"}[kind]


def speed_family(options: dict, config: dict, model: str, variant: str, statistic: str) -> str:
    """The family of a line's learning-speed gap to the baseline (``statistic``: REWARD_AUC or STEPS): a
    check line's own; a gap that is one of the 2 × 2's simple effects is counted in the factorial table's
    reward AUC simple effects only (a comparison is counted once); else the statistic's family."""
    if variant in options["checks"]:
        return f"check: {variant}"
    design = options.get("factorial")
    if (statistic == REWARD_AUC and design and set(design["cells"].values()) <= set(model_variants(config, model))
            and frozenset((variant, options["baseline"])) in simple_effect_pairs(options)):
        return ""
    return statistic


def horizon_family(design: dict, pair: str, trend: bool) -> str:
    """A horizon row's family: a pair's per-horizon effects are a family (named by the pair); the trends of
    the primary pairs another, those of the exploratory pairs a third."""
    if not trend:
        return pair
    return EXPLORATORY_TREND if design["pairs"][pair].get("exploratory", False) else TREND


def key_of(table: str, name: str) -> str:
    """The family key (:data:`KEYS`) of family ``name`` of ``table``."""
    if name.startswith("check"):
        return "checks"
    if table == "results_by_variant":
        return "gain_over_sft"
    if table == "horizon" and name not in (TREND, EXPLORATORY_TREND):
        return "horizon_effects"
    if table == "control":
        return "control_trend" if name in (CONTROL_TREND, CONTROL_ROLES[CONTROL_TREND]) else "control"
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def procedure(options: dict, table: str, name: str, seed_level: bool) -> str:
    """How family ``name`` of ``table`` is adjusted: ``descriptive`` (no adjusted p, no verdict) where
    report.descriptive names it, ``max_t`` where report.multiplicity does and its comparisons are
    seed-level, else ``holm``."""
    key = key_of(table, name)
    if key in options.get("descriptive", ()):
        return DESCRIPTIVE
    return options.get("multiplicity", {}).get(key, HOLM) if seed_level else HOLM
