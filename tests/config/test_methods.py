"""Table 1's method rule (grpo_lambda.config.methods), on small configs written here: which variants each
method's row pools, the GRPO-λ defaults a variant's spec is read with, and how a selector matches a variant."""

from __future__ import annotations

import pytest

from grpo_lambda.config.methods import GRPO_LAMBDA_DEFAULTS, matches, method_variants, variant_spec


def config_of(variants: dict) -> dict:
    return {"models": {"m": {}}, "variants": variants}


LAMBDAS = {"lam-98": {"objective": "grpo_lambda", "lam": 0.98}, "lam-99": {"objective": "grpo_lambda", "lam": 0.99}}


def rows(variants: dict, baseline: str, choice) -> dict:
    return method_variants(config_of(variants), "m", {"baseline": baseline, "grpo_lambda_variant": {"m": choice}})


def test_a_grpo_lambda_variant_is_read_with_the_defaults_and_another_objective_without_them():
    config = config_of({"grpo": {"objective": "grpo"}, "lam": {"objective": "grpo_lambda", "lam": 0.9, "style": "both"}})
    assert variant_spec(config, "lam") == {**GRPO_LAMBDA_DEFAULTS, "objective": "grpo_lambda", "lam": 0.9, "style": "both"}
    assert variant_spec(config, "grpo") == {"objective": "grpo"}
    variant_spec(config, "grpo")["objective"] = "changed"  # a copy: the config keeps its own
    assert config["variants"]["grpo"] == {"objective": "grpo"}


@pytest.mark.parametrize("spec, selector, expected", [
    ({"lam": 0.99}, {"lam": 0.99}, True),
    ({"lam": 0.99}, {"lam": 0.99 + 1e-12}, True),           # within the absolute 1e-9
    ({"lam": 0.99}, {"lam": 0.98}, False),
    ({"lam": 0.99}, {"lam": 0.99 + 1e-6}, False),
    ({"x": 1e4}, {"x": 1e4 + 1e-6}, False),                  # no relative tolerance: 1e-10 of the value is still apart
    ({"lam": 0.99, "style": "both"}, {"lam": 0.99, "style": "recent"}, False),
    ({"style": "recent"}, {"style": "recent"}, True),
    ({"style": "recent"}, {"style": 1}, False),              # a number against a text: unequal, not an error
    ({"lam": 1}, {"lam": "1"}, False),
    ({}, {"lam": 0.99}, False),                              # a field the spec lacks
    ({"lam": 0.99}, {}, True),
])
def test_a_selector_matches_a_spec_holding_each_of_its_fields(spec, selector, expected):
    assert matches(spec, selector) is expected


def test_the_baseline_is_grpos_row_whatever_its_name_and_other_grpo_settings_are_rows_of_their_own():
    variants = {"base": {"objective": "grpo"}, "grpo-lr2": {"objective": "grpo", "learning_rate": 2e-5}, **LAMBDAS,
                "dr": {"objective": "dr_grpo"}}
    assert rows(variants, "base", "mean") == {"grpo": ["base"], "grpo_lambda": ["lam-98", "lam-99"],
                                             "grpo-lr2": ["grpo-lr2"], "dr": ["dr"]}


def test_a_baseline_of_another_objective_is_no_grpo_row():
    variants = {"dr": {"objective": "dr_grpo"}, **LAMBDAS}
    assert rows(variants, "dr", "mean") == {"grpo_lambda": ["lam-98", "lam-99"], "dr": ["dr"]}
    # a grpo variant beside it is a row under its own name, never shown as GRPO
    with_grpo = {"grpo": {"objective": "grpo"}, **variants}
    assert rows(with_grpo, "dr", "mean") == {"grpo_lambda": ["lam-98", "lam-99"], "grpo": ["grpo"], "dr": ["dr"]}


def test_grpo_lambdas_row_pools_what_the_choice_names():
    variants = {"grpo": {"objective": "grpo"}, **LAMBDAS}
    assert rows(variants, "grpo", "lam-99")["grpo_lambda"] == ["lam-99"]
    assert "grpo_lambda" not in rows(variants, "grpo", "lam-97")  # a name the model does not train: no row
    assert rows(variants, "grpo", {"lam": 0.98})["grpo_lambda"] == ["lam-98"]
    assert rows(variants, "grpo", {"lam": 0.5})["grpo_lambda"] == ["lam-98", "lam-99"]  # no match: all of them
    assert rows(variants, "grpo", {"style": "recent"})["grpo_lambda"] == ["lam-98", "lam-99"]  # by the defaults
    assert rows(variants, "grpo", "mean")["grpo_lambda"] == ["lam-98", "lam-99"]


def test_only_the_models_own_variants_are_rows():
    config = config_of({"grpo": {"objective": "grpo"}, **LAMBDAS, "dr": {"objective": "dr_grpo"}})
    config["models"]["m"]["variants"] = ["grpo", "lam-99"]
    assert method_variants(config, "m", {"baseline": "grpo", "grpo_lambda_variant": {"m": "mean"}}) == {
        "grpo": ["grpo"], "grpo_lambda": ["lam-99"]}
