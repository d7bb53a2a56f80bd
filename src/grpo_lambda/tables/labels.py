"""Variants and methods: their specs, the names tables and figures show, Table 1's methods, and the
published twin of a variant."""

from __future__ import annotations

import math

import pandas as pd

from grpo_lambda.config import model_variants
from grpo_lambda.tables.keys import SFT


# What a grpo_lambda variant that leaves a field out gets (grpo_lambda.objectives.ObjectiveParams).
GRPO_LAMBDA_DEFAULTS = {"style": "recent", "update": "trace", "form": "relative", "gamma": 1.0, "eps": 0.0}


def variant_spec(config: dict, variant: str) -> dict:
    """The variant's config entry, with the GRPO-λ defaults filled in for grpo_lambda variants."""
    spec = config["variants"][variant]
    return {**GRPO_LAMBDA_DEFAULTS, **spec} if spec["objective"] == "grpo_lambda" else dict(spec)


def objective(config: dict, variant: str) -> str:
    return SFT if variant == SFT else config["variants"][variant]["objective"]


def variant_label(config: dict, variant: str) -> str:
    """The name shown in tables and figures: the variant's ``label``, else one built from its fields.

    GRPO-λ variants read ``style/update/λ`` (``/form`` added when the config mixes trace forms), as
    the columns of the paper's Appendix E; other objectives show their name.
    """
    if variant == SFT:
        return "SFT"
    spec = variant_spec(config, variant)
    if spec.get("label"):
        return spec["label"]
    if spec["objective"] == "grpo":
        same = [v for v, s in config["variants"].items() if s["objective"] == "grpo" and not s.get("label")]
        return "GRPO" if len(same) == 1 else f"GRPO ({variant})"
    if spec["objective"] == "grpo_lambda":
        lam_specs = {v: variant_spec(config, v) for v, s in config["variants"].items()
                     if s["objective"] == "grpo_lambda"}

        def short(s: dict) -> str:
            return f"{s['style']}/{s['update']}/{s['lam']:g}"
        label = short(spec)
        if len({s["form"] for s in lam_specs.values()}) > 1:
            label += f"/{spec['form']}"
        twins = [v for v, s in lam_specs.items() if (short(s), s["form"]) == (short(spec), spec["form"])]
        return label if len(twins) == 1 else f"{label} ({variant})"
    # Other objectives show their name, and the variant's too where two lines share the objective.
    same = [v for v, s in config["variants"].items() if s["objective"] == spec["objective"] and not s.get("label")]
    return spec["objective"] if len(same) == 1 else f"{spec['objective']} ({variant})"


def _matches(spec: dict, selector: dict) -> bool:
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

    ``grpo`` is the baseline variant when its objective is ``grpo`` (a baseline of another objective,
    as in a config without GRPO, stays in its own method: no row is shown as GRPO that is not);
    ``grpo_lambda`` follows report.grpo_lambda_variant; every other objective is a method of its own
    (mean over its variants).
    """
    variants = model_variants(config, model)
    lam_variants = [v for v in variants if objective(config, v) == "grpo_lambda"]
    baseline = options["baseline"]
    grpo_baseline = baseline in variants and objective(config, baseline) == "grpo"
    methods: dict[str, list[str]] = {"grpo": [baseline] if grpo_baseline else []}
    choice = options["grpo_lambda_variant"][model]
    if choice == "mean":
        chosen = lam_variants
    elif isinstance(choice, str):
        chosen = [choice] if choice in variants else []
    else:
        chosen = [v for v in lam_variants if _matches(variant_spec(config, v), choice)] or lam_variants
    methods["grpo_lambda"] = chosen
    for v in variants:
        obj = objective(config, v)
        if obj == "grpo" and v != baseline:
            methods[v] = [v]  # a GRPO with other settings (e.g. TRL's loss_type) is a method of its own
        elif obj not in ("grpo", "grpo_lambda"):
            methods.setdefault(obj, []).append(v)
    return {m: vs for m, vs in methods.items() if vs}


METHOD_LABELS = {"sft": "SFT", "grpo": "GRPO", "grpo_lambda": "GRPO-λ"}


def method_label(config: dict, method: str) -> str:
    if method in METHOD_LABELS:
        return METHOD_LABELS[method]
    return variant_label(config, method) if method in config["variants"] else method


def _lam_text(lam) -> str:
    """λ as the key of a published cell: "" for GRPO (no λ), else e.g. "0.99"."""
    return "" if lam is None or pd.isna(lam) else f"{float(lam):g}"


def _published_variant(config: dict, variant: str, baseline: str) -> tuple[str, str, str] | None:
    """(trace_style, update_style, λ text) as in the published Appendix E, or None if it has no twin.

    Only a ``grpo`` baseline stands for the paper's GRPO: another ``grpo`` variant differs in some
    setting, and a baseline of another objective is compared with its own twin.
    """
    spec = variant_spec(config, variant)
    if variant == baseline and spec["objective"] == "grpo":
        return ("grpo", "grpo", "")
    if spec["objective"] == "grpo_lambda" and spec["style"] in ("both", "recent") and spec["gamma"] == 1.0:
        return (spec["style"], spec["update"], _lam_text(spec["lam"]))
    return None
