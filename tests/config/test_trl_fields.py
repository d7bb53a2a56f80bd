"""TRL's config fields as ``grpo_lambda.config.trl_fields`` reads them from the source: the config class's
own fields and defaults, and types that accept TRL's own defaults."""

from grpo_lambda import config as study


def test_the_trl_fields_read_from_source_are_the_config_classes_fields():
    import dataclasses

    from grpo_lambda.trainer_config import GRPOLambdaConfig

    fields = study.trl_config_fields()
    assert set(fields) == {field.name for field in dataclasses.fields(GRPOLambdaConfig)}
    defaults = {field.name: field.default for field in dataclasses.fields(GRPOLambdaConfig)}
    for key in ("per_device_train_batch_size", "num_generations", "gradient_accumulation_steps",
                "steps_per_generation", "generation_batch_size"):
        assert fields[key] == defaults[key], key


def test_trl_field_types_accept_trls_own_defaults_and_yaml_numbers():
    """Every literal default of GRPOLambdaConfig passes the type check its annotation gives (TRL's own
    values are the independent truth here); an integer passes for a float, a bool never for a number."""
    checked = 0
    for key, default in study.trl_config_fields().items():
        if default is not None:
            assert study.trl_type_error(key, default) is None, (key, default)
            checked += 1
    assert checked > 50
    assert study.trl_type_error("beta", 0) is None and study.trl_type_error("beta", None) is not None
    assert study.trl_type_error("temperature", False) is not None
    assert study.trl_type_error("steps_per_generation", None) is None
    assert study.trl_type_error("report_to", ["tensorboard"]) is None
