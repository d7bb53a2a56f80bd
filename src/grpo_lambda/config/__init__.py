"""The study's config: loading, validation against the JSON Schema, and the settings of one cell.

The schema (``workflow/schemas/config.schema.yaml``) says what each key may hold; ``validate`` adds
the checks a schema cannot express (names that refer to each other, checkpoint steps within the run).
Snakemake calls ``validate`` right after loading the config, so a bad config fails before any job
starts, with a message that names the key. Each stage then receives only its cell's settings
(``stage_settings``) as JSON on the command line: they are also the rule's params, so a change to a
cell's settings reruns that cell and nothing else.

One module per job, each importing only those below it:

``loading``     ``load``: YAML files read (a key given twice refused) and merged as Snakemake merges them,
                ``--set`` / ``--config`` overrides typed by the schema (``parse_override``, ``coerce_override``; ``--config set=``:
                ``set_overrides``)
``validation``  ``validate``: the schema with its defaults, sweeps expanded, the cross-checks, the environment
``checks``      the cross-checks, one function each, run in the order of ``CHECKS`` (add a check there), and
                ``check_design``, run where jobs are about to run: every comparison family can reject
``families``    the comparison families a study declares and whether each can reject at its seeds (the rules
                the tables name their families by)
``methods``     Table 1's methods and the variants each row pools (``method_variants``), a variant's spec with
                GRPO-λ's defaults (``variant_spec``): read by the tables and by ``families``
``settings``    the cells of the grid (``rl_cells``) and what each stage of one cell reads (``stage_settings``,
                ``rl_settings``, ``sft_settings``, ...)
``trl_fields``  TRL's config fields and their defaults, read from its source (``trl_config_fields``)
``report``      the ``report:`` options, their defaults and checks (``report_options``), read by the tables
``schema``      the schema (``load_schema``) and ``ConfigError``

The names other modules use are gathered here.
"""

from grpo_lambda.config.checks import check_design
from grpo_lambda.config.loading import (coerce_override, load, load_naming_source, merge, override_value, parse_override,
                                        read_yaml, set_overrides)
from grpo_lambda.config.schema import ConfigError, load_schema
from grpo_lambda.config.settings import (SELF_DISTILL_DEFAULTS, TRL_MAX_COMPLETION_LENGTH, looks_local,
                                         model_checkpoints, model_datasets, model_variants, rl_cells, rl_settings, sft_folder,
                                         sft_is_shared, sft_seed_of, sft_seeds, sft_set, sft_settings, sft_uses_self_distillation,
                                         stage_settings)
from grpo_lambda.config.trl_fields import trl_config_fields, trl_type_error
from grpo_lambda.config.validation import check_environment, validate

__all__ = ["ConfigError", "SELF_DISTILL_DEFAULTS", "TRL_MAX_COMPLETION_LENGTH", "check_design", "check_environment", "coerce_override",
           "load", "load_naming_source", "load_schema", "looks_local", "merge", "model_checkpoints", "model_datasets", "model_variants",
           "override_value", "parse_override", "read_yaml", "rl_cells", "rl_settings", "sft_folder", "sft_is_shared",
           "set_overrides", "sft_seed_of", "sft_seeds", "sft_set", "sft_settings", "sft_uses_self_distillation", "stage_settings", "trl_config_fields",
           "trl_type_error", "validate"]
