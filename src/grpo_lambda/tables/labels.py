"""Variants and methods: their specs, the names tables and figures show, Table 1's methods, and the
published twin of a variant."""

from __future__ import annotations

import pandas as pd

from grpo_lambda.config.methods import variant_spec
from grpo_lambda.tables.keys import SFT


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
