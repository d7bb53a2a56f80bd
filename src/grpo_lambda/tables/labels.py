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
    """The one name a variant has in every table and figure: its ``label``, else one built from its fields
    (:func:`described`), with the variant's name added where two variants would read alike."""
    if variant == SFT:
        return "SFT"
    spec = config["variants"][variant]
    if spec.get("label"):
        return spec["label"]
    label = described(config, variant)
    twins = [v for v, s in config["variants"].items() if not s.get("label") and described(config, v) == label]
    return label if len(twins) == 1 else f"{label} ({variant})"


OBJECTIVE_NAMES = {"grpo": "GRPO", "grpo_lambda": "GRPO-λ", "ptrace": "P-trace", "strace": "S-trace"}
OAR_NAMES = {"gradient": "OAR-G", "perturbation": "OAR-P"}
CLAMP_DEFAULT = {"grpo_lambda": -0.1}  # trainer_config._resolve_advantage_clamp: the paper's Algorithm 1


def described(config: dict, variant: str) -> str:
    """A variant's name from its fields: the method it is (GRPO, Dr. GRPO, DAPO, GSPO, OAR-G/P for the
    ``grpo`` objective; GRPO-λ's style/update/λ, as the paper's Appendix E names its columns, with the
    form when the config mixes forms; P-/S-trace and λ), then what it adds (``+ DAPO``, ``+ clip-higher``,
    ``+ OAR-G``) or changes (``, no clamp``)."""
    spec = variant_spec(config, variant)
    kind = spec["objective"]
    if kind == "grpo":
        base = ("GSPO" if spec.get("importance_sampling_level") == "sequence" else
                "Dr. GRPO" if spec.get("loss_type") == "dr_grpo" else
                "DAPO" if spec.get("dynamic_sampling") else
                OAR_NAMES.get(spec.get("oar_method"), "GRPO"))
    elif kind == "grpo_lambda":
        base = f"{spec['style']}/{spec['update']}/{spec['lam']:g}"  # the paper's Appendix E columns
        forms = {variant_spec(config, v)["form"] for v, s in config["variants"].items()
                 if s["objective"] == "grpo_lambda"}
        base += f"/{spec['form']}" if len(forms) > 1 else ""
    else:
        scope = " sequence" if spec.get("scope") == "sequence" else ""
        base = f"{OBJECTIVE_NAMES.get(kind, kind)}{scope} λ {spec.get('lam', 1.0):g}"
    added = []
    if spec.get("oar_method") and base not in OAR_NAMES.values():
        added.append(OAR_NAMES[spec["oar_method"]])
    if spec.get("dynamic_sampling") and base != "DAPO":
        added.append("DAPO")
    elif spec.get("epsilon_high") and base not in ("DAPO", "GSPO") and kind != "ptrace":
        added.append("clip-higher")
    label = base + "".join(f" + {name}" for name in added)
    if "advantage_clamp" in spec and spec["advantage_clamp"] != CLAMP_DEFAULT.get(kind):
        label += ", no clamp" if spec["advantage_clamp"] is None else f", clamp {spec['advantage_clamp']:g}"
    return label


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
    grpo_baseline = baseline in variants and objective(config, baseline) == "grpo"
    methods: dict[str, list[str]] = {"grpo": [baseline] if grpo_baseline else []}
    lam_variants = [v for v in variants if objective(config, v) == "grpo_lambda"]
    choice = options["grpo_lambda_variant"][model]
    if choice == "mean":
        chosen = lam_variants
    elif isinstance(choice, str):
        chosen = [choice] if choice in variants else []
    else:
        chosen = [v for v in lam_variants if _matches(variant_spec(config, v), choice)] or lam_variants
    methods["grpo_lambda"] = chosen
    for v in variants:
        if objective(config, v) != "grpo_lambda" and not (grpo_baseline and v == baseline):
            methods[v] = [v]
    return {m: vs for m, vs in methods.items() if vs}


METHOD_LABELS = {"sft": "SFT", "grpo": "GRPO", "grpo_lambda": "GRPO-λ"}


def method_label(config: dict, method: str, variants: list[str] | None = None) -> str:
    """A Table 1 row's name: given its ``variants``, the variant's own label when the row is one variant,
    else the method's (``GRPO-λ`` for a mean over several GRPO-λ variants, which the row's ``variants``
    column lists); without them, the method's name (a variant's label for a one-variant method)."""
    if method == SFT:
        return "SFT"
    if variants is not None and len(variants) == 1:
        return variant_label(config, variants[0])
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
