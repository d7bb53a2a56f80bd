"""The paper's tables, under their former module name: they live in ``grpo_lambda.tables`` (see its
docstring for the tables, the ``report:`` options and the package layout). Every name this module held
before is importable from here still; a monkeypatch must target the module that defines the name.
"""

from grpo_lambda.tables.keys import (  # noqa: F401
    ALL_DATASETS, AVERAGE, FINAL, KEYS, SFT,
)
from grpo_lambda.tables.options import (  # noqa: F401
    FIGURE1_PAPER_MODEL, _per_model_choice, REPORT_DEFAULTS, report_options, SELECTOR_FIELDS,
)
from grpo_lambda.tables.labels import (  # noqa: F401
    GRPO_LAMBDA_DEFAULTS, _lam_text, _matches, method_label, METHOD_LABELS, method_variants, objective,
    _published_variant, variant_label, variant_spec,
)
from grpo_lambda.tables.collect import (  # noqa: F401
    collect, collect_samples, collect_train_logs, eval_file, expected_cells, final_step, load_published,
    missing_cells, _read_samples, _SAMPLE_DTYPES, _SAMPLE_FIELDS, _SAMPLE_OPTIONAL, _SAMPLE_REQUIRED,
    summarise, TRAIN_LOG_COLUMNS,
)
from grpo_lambda.tables.cells import (  # noqa: F401
    Cells, _estimate, _interval_columns, _scaled, _targets,
)
from grpo_lambda.tables.results import (  # noqa: F401
    checkpoints_table, _order, results_by_variant, _RESULTS_COLUMNS, results_table, _variant_columns,
)
from grpo_lambda.tables.table1 import (  # noqa: F401
    _method_terms, table1, table1_published,
)
from grpo_lambda.tables.paired import (  # noqa: F401
    paired_table,
)
from grpo_lambda.tables.appendix_e import (  # noqa: F401
    appendix_e, appendix_e_published, _variant_order,
)
from grpo_lambda.tables.write import (  # noqa: F401
    _display, main, _number, output_files, TABLE_FORMATS, table_names, write_table,
)
from grpo_lambda.tables.build import (  # noqa: F401
    build_tables,
)
