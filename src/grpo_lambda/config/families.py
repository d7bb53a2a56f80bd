"""The comparison families a study declares, from its config alone, and whether each can reject at the
study's seeds: the design check that ``validate`` runs before any job.

Every comparison table (grpo_lambda.tables: ``paired``, ``results_by_variant``, ``learning_speed``,
``factorial``, ``horizon``, ``control``) puts each comparison in a family, within which its p-values are adjusted for
multiplicity (grpo_lambda.tables.verdicts), named by the rules of grpo_lambda.config.family_names, which the
tables and the design check both read; :func:`declared_families` lists every family of a config with its size m.

A family is refused before any job when its test cannot reject whatever the seeds show. A seed-level
family (one number per unit: a training-reward AUC gap, steps to a threshold; the exact sign-flip test,
grpo_lambda.seed_level.seed_interval) has a smallest p of 2^(1−n) at n units; Holm's first step asks for
p < α/m, so it can reject only when m · 2^(1−n) < α; the step-down max-T over joint sign flips
(``report.multiplicity``, grpo_lambda.multiplicity.max_t) only when 2^(1−n) < α, whatever m. A family of t tests
(an accuracy comparison on one SFT model per condition) has no such floor. One unit is no test at all: the
tables give no p and no verdict, so nothing is refused. The units are the RL seeds, or the SFT models where
the study declares several (``sft.seeds``): the RL seeds of one SFT model are not independent draws of the
method's effect. There an accuracy family is read over the K SFT models too (grpo_lambda.stats, "Nested
draws"): its t test has K − 1 df, and a verdict stands only where the exact sign-flip test over the SFT
models backs it (floor 2^(1−K), Holm: m · 2^(1−K) < α) and K ≥ 6, where the t test's normality is not a bare
assumption; a family whose comparisons span training sets (a horizon's trend) has no exact test and needs
K ≥ 6 alone. Below that such a family is refused unless declared descriptive, as a seed-level one is.

A family the config declares descriptive (``report.descriptive``: the family keys of :data:`KEYS`) is
published with its estimates and intervals and no adjusted p or verdict, and is never refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grpo_lambda.config.family_names import (ALL_DATASETS, AVERAGE, CONTROL, CONTROL_ROLES, CONTROL_TREND, DESCRIPTIVE,
                                             EXPLORATORY_TREND, FACTORIAL_KINDS,
                                             FACTORIAL_REWARD_AUC, HOLM, MAX_T, REWARD_AUC, STEPS, TREND,
                                             factorial_family, horizon_family, key_of, paired_family, procedure,
                                             speed_family)
from grpo_lambda.config.methods import method_variants
from grpo_lambda.config.settings import model_datasets, model_variants

# --- the families a config declares ------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """One declared family: the table and the family's name there (its ``column`` holds ``name``), the
    model and training set it is in ("" for a horizon family, which spans them), its key, its size m, the
    units n its tests have, whether they are seed-level, and the procedure that adjusts it."""

    table: str
    model: str
    dataset: str
    name: str
    key: str
    size: int
    units: int
    seed_level: bool
    procedure: str
    column: str = "family"
    prefix: str = ""
    nested: bool = False   # its units are SFT models (sft.seeds): an accuracy family is read over them
    spans: bool = False    # its comparisons span strata (horizons, training sets): no exact test over SFT models

    @property
    def metric(self) -> str:
        """What the family's comparisons measure (the unit of an effect): ``accuracy``, ``reward_auc``,
        ``steps`` (to the threshold) or ``slope`` (of a horizon trend, accuracy per unit ln length)."""
        if self.prefix == "steps_":
            return "steps"
        if self.prefix == "auc_" or self.key.startswith("reward_auc"):
            return "reward_auc"
        return "slope" if self.key in ("trend", "exploratory_trend", "control_trend") else "accuracy"

    @property
    def label(self) -> str:
        """The family as a reader names it (the tables' family name, with what a bare name leaves out)."""
        if self.table == "results_by_variant":
            return f"gain over SFT, {self.name}"
        if self.table == "learning_speed" and self.key == "checks":
            return f"{self.name}, {'reward AUC' if self.prefix == 'auc_' else 'steps to threshold'}"
        if self.table == "horizon" and self.key == "horizon_effects":
            return f"{self.name}: effect per horizon"
        if self.table == "control":
            return CONTROL_TREND if self.key == "control_trend" else CONTROL
        return self.name

    def floor(self) -> float:
        """The smallest p one test of the family can give: 2^(1−n) for a sign-flip test of n units (1 at one
        unit, where there is no test), 0 for a t test."""
        if self.over_sft_models:
            if self.units > MAX_EXACT_UNITS or (self.spans and self.units >= MIN_NORMAL_UNITS):
                return 0.0
            return 2.0 ** (1 - self.units)
        if not self.seed_level:
            return 0.0
        return 2.0 ** (1 - self.units) if self.units <= MAX_EXACT_UNITS else 0.0

    @property
    def over_sft_models(self) -> bool:
        """An accuracy (or slope) family read over SFT models (grpo_lambda.stats, "Nested draws"): its t test
        has df K − 1 and, within one stratum, the exact sign-flip test over the K SFT models backs it; below
        MIN_NORMAL_UNITS it has no verdict (the floor 2^(1−K): neither test can be trusted to reject)."""
        return self.nested and not self.seed_level

    def family_floor(self) -> float:
        """The smallest adjusted p the family's procedure can give: m times the floor under Holm, the floor
        under max-T."""
        return self.floor() * (self.size if self.procedure == HOLM else 1)

    def reachable(self, alpha: float) -> bool:
        return (self.procedure == DESCRIPTIVE or not (self.seed_level or self.over_sft_models) or self.units < 2
                or self.family_floor() < alpha)

    def units_needed(self, alpha: float, procedure: str | None = None) -> int:
        """The fewest units at which the family's procedure (or ``procedure``) can reject: 2^(1−n)·m < α
        under Holm, 2^(1−n) < α under max-T (2 for a t test)."""
        if self.over_sft_models and self.spans:
            return MIN_NORMAL_UNITS
        if not (self.seed_level or self.over_sft_models):
            return 2
        m = self.size if (procedure or self.procedure) == HOLM else 1
        needed = min(max(2, math.floor(1 + math.log2(m / alpha)) + 1), MAX_EXACT_UNITS + 1)
        return max(needed, MIN_NORMAL_UNITS) if self.over_sft_models else needed


MAX_EXACT_UNITS = 16  # grpo_lambda.signflip.MAX_EXACT_SEEDS: beyond it the seed-level tests are t tests
MIN_NORMAL_UNITS = 6  # grpo_lambda.stats.MIN_NORMAL_UNITS: the fewest SFT models a verdict is read over


def units(config: dict) -> tuple[int, str]:
    """The independent units the seed-level tests have: (n, what they are): the SFT models where the study
    declares several (``sft.seeds``, the RL seeds split among them), else the RL seeds."""
    sft_seeds = (config.get("sft") or {}).get("seeds") if isinstance(config.get("sft"), dict) else None
    if sft_seeds:
        return len(sft_seeds), "SFT models"
    return len(config["seeds"]), "seeds"


def _targets(config: dict) -> list[str]:
    return [*config["benchmarks"], AVERAGE]


def _paired_rows(config: dict, options: dict, model: str) -> list[tuple[str, tuple[str, str]]]:
    """(dataset, (role, family)) of every row of the paired table of ``model`` with a test."""
    baseline, datasets = options["baseline"], model_datasets(config, model)
    several = len(datasets) > 1
    variants = model_variants(config, model)
    rows = [(dataset, paired_family(options, [v], dataset, target, several))
            for dataset in datasets for v in variants if v != baseline for target in _targets(config)]
    if several:  # Table 1's methods over all training sets, as the paired table writes them
        rows += [(ALL_DATASETS, paired_family(options, pooled, ALL_DATASETS, target, True))
                 for method, pooled in method_variants(config, model, options).items()
                 if method != "grpo" and pooled != [baseline] for target in _targets(config)]
    return rows


def declared_families(config: dict, options: dict) -> list[Family]:
    """Every family the comparison tables of ``config`` will hold once every cell has run, with its size
    (``options``: grpo_lambda.config.report.report_options of the config)."""
    n, what = units(config)
    counts: dict[tuple, int] = {}

    def add(table, model, dataset, name, seed_level, column="family", prefix=""):
        if name:
            key = (table, model, dataset, name, seed_level, column, prefix)
            counts[key] = counts.get(key, 0) + 1

    baseline, design = options["baseline"], options.get("factorial")
    for model in config["models"]:
        variants, datasets = model_variants(config, model), model_datasets(config, model)
        for dataset, (_, name) in _paired_rows(config, options, model):
            add("paired", model, dataset, name, False)
        for dataset in datasets:
            for target in _targets(config):
                for _ in variants:
                    add("results_by_variant", model, dataset, target, False, "benchmark", "gain_")
            for variant in variants:
                if variant == baseline:
                    continue
                add("learning_speed", model, dataset, speed_family(options, config, model, variant, REWARD_AUC), True,
                    "auc_family", "auc_")
                add("learning_speed", model, dataset, speed_family(options, config, model, variant, STEPS), True,
                    "steps_family", "steps_")
            if design and set(design["cells"].values()) <= set(variants):
                for kind, count in FACTORIAL_KINDS.items():
                    for _ in range(count):
                        for target in _targets(config):
                            add("factorial", model, dataset, factorial_family("accuracy", target, kind,
                                                                              options["primary"])[1], False)
                        add("factorial", model, dataset,
                            factorial_family(FACTORIAL_REWARD_AUC, "", kind, options["primary"])[1], True)
        horizon = options.get("horizon")
        if horizon:
            for pair in horizon["pairs"]:
                for _ in horizon["chains"]:
                    add("horizon", model, "", horizon_family(horizon, pair, False), False)
                for _ in range(2 if horizon.get("curvature") else 1):  # the trend, and its lack of fit
                    add("horizon", model, "", horizon_family(horizon, pair, True), False)
        control = options.get("control")
        if control:
            predicted = list(control["predicted"].values())
            contrast = predicted.count("ahead") == 1 and predicted.count("behind") == 1
            for _ in range(len(control["arms"]) + contrast):
                add("control", model, "", CONTROL_ROLES[CONTROL], False, "role")
            if control.get("levels"):  # a dose over variants has one training set: its trend stays in it
                trained_on = {dataset for dataset, _, _ in control["arms"].values()}
                add("control", model, trained_on.pop() if len(trained_on) == 1 else "",
                    CONTROL_ROLES[CONTROL_TREND], False, "role")
    nested = what == "SFT models"
    return [Family(table, model, dataset, name, key_of(table, name), size, n, seed_level,
                   procedure(options, table, name, seed_level), column, prefix, nested,
                   spans=_spans_strata(table, dataset, name))
            for (table, model, dataset, name, seed_level, column, prefix), size in counts.items()]


def _spans_strata(table: str, dataset: str, name: str) -> bool:
    """Whether a family's comparisons span training sets (each its own SFT models): a horizon's trend, the
    rows pooled over all training sets. Its t test then has df from every stratum's SFT models and no exact
    test over one set of SFT models backs it (a control's contrast does too, but its family also holds the
    per-set effects, which an exact test backs: the family is read as theirs; a dose-response control's trend
    is a family of its own, and spans, unless its levels are treatments on one training set)."""
    return ((table == "horizon" and name in (TREND, EXPLORATORY_TREND))
            or (table == "control" and name == CONTROL_ROLES[CONTROL_TREND] and not dataset)
            or dataset == ALL_DATASETS)


def refusal(family: Family, alpha: float, what: str) -> str:
    """Why ``family`` cannot reject, and what would let it: the line validate refuses the config with."""
    where = f"{family.model}/{family.dataset}" if family.dataset else family.model
    floor, m = family.floor(), family.size
    if family.over_sft_models:
        line = (f"report: the {family.name!r} family ({family.table}, {where}: {m} comparison{'s' if m != 1 else ''}) "
                f"is read over {family.units} SFT models and cannot reject there: ")
        if family.units < MIN_NORMAL_UNITS:
            line += (f"its t test has {family.units - 1} df and rests on the normality of {family.units} SFT models' "
                     f"means, which so few cannot check, and the exact sign-flip test over them has floor "
                     f"2^(1−{family.units}) = {floor:.4g} ≥ {alpha:g}")
        else:
            line += (f"the exact sign-flip test over them backs each verdict, and Holm's first step asks for "
                     f"p < {alpha:g}/{m} = {alpha / m:.4g} below its floor 2^(1−{family.units}) = {floor:.4g}")
        return line + (f"; it needs {family.units_needed(alpha)} SFT models, or publish it without a verdict: "
                       f"report.descriptive: [{family.key}]")
    line = (f"report: the {family.name!r} family ({family.table}, {where}: {m} comparison{'s' if m != 1 else ''}) "
            f"cannot reject at {family.units} {what}: the sign-flip test's smallest p is 2^(1−{family.units}) = "
            f"{floor:.4g}")
    if family.procedure == HOLM:
        line += (f", and Holm's first step asks for p < {alpha:g}/{m} = {alpha / m:.4g} ({m} × {floor:.4g} = "
                 f"{m * floor:.3g} ≥ {alpha:g}); it needs {family.units_needed(alpha)} {what}")
        if m > 1:
            line += (f", or {family.units_needed(alpha, MAX_T)} under report.multiplicity: "
                     f"{{{family.key}: max_t}} (max-T over joint sign flips, floor 2^(1−n) whatever m)")
    else:
        line += f" ≥ {alpha:g} even under max-T; it needs {family.units_needed(alpha)} {what}"
    return line + f"; or publish it without a verdict: report.descriptive: [{family.key}]"


def check_families(config: dict, options: dict) -> None:
    """Raise ValueError naming the first declared family that cannot reject at the study's units."""
    alpha = 1 - float(options["level"])
    _, what = units(config)
    for family in declared_families(config, options):
        if not family.reachable(alpha):
            raise ValueError(refusal(family, alpha, what))
