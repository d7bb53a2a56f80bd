"""Table 1's methods and the variants each one's row pools, from the config alone: the one rule the tables
(grpo_lambda.tables.labels, table1, paired, learning_speed) and the design check (config.families) read."""

from __future__ import annotations

import math

from grpo_lambda.config.settings import model_variants

# What a grpo_lambda variant that leaves a field out gets (grpo_lambda.objectives.ObjectiveParams).
GRPO_LAMBDA_DEFAULTS = {"style": "recent", "update": "trace", "form": "relative", "gamma": 1.0, "eps": 0.0}


def variant_spec(config: dict, variant: str) -> dict:
    """The variant's config entry, with the GRPO-λ defaults filled in for grpo_lambda variants."""
    spec = config["variants"][variant]
    return {**GRPO_LAMBDA_DEFAULTS, **spec} if spec["objective"] == "grpo_lambda" else dict(spec)


def matches(spec: dict, selector: dict) -> bool:
    """Whether a variant's spec holds every field of ``selector`` (numbers equal to 1e-9)."""
    for field, wanted in selector.items():
        have = spec.get(field)
        if isinstance(wanted, (int, float)) and isinstance(have, (int, float)):
            if not math.isclose(float(have), float(wanted), rel_tol=0, abs_tol=1e-9):
                return False
        elif have != wanted:
            return False
    return True


def method_variants(config: dict, model: str, options: dict) -> dict[str, list[str]]:
    """Table 1's methods for one model, each with the variants its row averages.

    One rule: a row pools several variants only where the config says so, GRPO-λ's row by
    report.grpo_lambda_variant (the paper's Table 1 averages λ 0.98 and 0.99); every other row is one
    variant. ``grpo`` is the baseline variant when its objective is ``grpo`` (a baseline of another
    objective stays a row of its own: no row is shown as GRPO that is not); every variant of another
    objective, or a ``grpo`` variant with other settings, is a row of its own under its variant name
    (so a check line such as ``gspo-as-trace`` is never pooled into a method). GRPO-λ variants other
    than the chosen ones are in Appendix E and the paired table, not in Table 1.
    """
    variants = model_variants(config, model)
    baseline = options["baseline"]

    def objective(variant: str) -> str:
        return config["variants"][variant]["objective"]

    grpo_baseline = baseline in variants and objective(baseline) == "grpo"
    methods: dict[str, list[str]] = {"grpo": [baseline] if grpo_baseline else []}
    lam_variants = [v for v in variants if objective(v) == "grpo_lambda"]
    choice = options["grpo_lambda_variant"][model]
    if choice == "mean":
        chosen = lam_variants
    elif isinstance(choice, str):
        chosen = [choice] if choice in variants else []
    else:
        chosen = [v for v in lam_variants if matches(variant_spec(config, v), choice)] or lam_variants
    methods["grpo_lambda"] = chosen
    for v in variants:
        if objective(v) != "grpo_lambda" and not (grpo_baseline and v == baseline):
            methods[v] = [v]
    return {m: vs for m, vs in methods.items() if vs}
