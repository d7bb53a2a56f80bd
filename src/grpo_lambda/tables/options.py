"""The ``report:`` options of the config (documented in ``grpo_lambda.tables``), merged over their
defaults and checked."""

from __future__ import annotations

REPORT_DEFAULTS = {
    "bootstrap": 1000,
    "level": 0.95,
    "seed": 0,
    "baseline": None,
    "grpo_lambda_variant": {"style": "recent", "update": "trace"},
    "figure1_model": None,
    "figure1_dataset": None,
    "figure4_datasets": None,
    "smoothing": "auto",
    "final_window": 20,
    "metric": "greedy",
}
SELECTOR_FIELDS = ("objective", "lam", "gamma", "style", "form", "update", "eps")
FIGURE1_PAPER_MODEL = "DeepSeek-R1-Distill-Qwen-7B"
# The paper's Figure 1 is one cell: the 7B model trained on MathRL-16K (the registry's name).
FIGURE1_PAPER_DATASET = "mathrl16k"


def report_options(config: dict) -> dict:
    """``config["report"]`` merged over REPORT_DEFAULTS and checked; errors name the key."""
    options = {**REPORT_DEFAULTS, **(config.get("report") or {})}
    unknown = sorted(set(options) - set(REPORT_DEFAULTS))
    if unknown:
        raise ValueError(f"report: unknown option(s) {unknown}; known: {sorted(REPORT_DEFAULTS)}")
    if not isinstance(options["bootstrap"], int) or options["bootstrap"] < 0:
        raise ValueError(f"report.bootstrap must be an integer >= 0, got {options['bootstrap']!r}")
    if not 0 < float(options["level"]) < 1:
        raise ValueError(f"report.level must lie in (0, 1), got {options['level']!r}")
    if options["smoothing"] != "auto" and not (isinstance(options["smoothing"], (int, float))
                                               and 0 <= options["smoothing"] < 1):
        raise ValueError(f"report.smoothing must be 'auto' or a number in [0, 1), got {options['smoothing']!r}")
    if not isinstance(options["final_window"], int) or options["final_window"] < 1:
        raise ValueError(f"report.final_window must be an integer >= 1, got {options['final_window']!r}")
    if options["metric"] not in ("greedy", "avg"):
        raise ValueError(f"report.metric must be 'greedy' (the paper's protocol) or 'avg' (avg@k over "
                         f"evaluation.samples), got {options['metric']!r}")
    if options["metric"] == "avg" and not (config.get("evaluation") or {}).get("samples"):
        raise ValueError("report.metric 'avg' needs sampled completions: set evaluation.samples")
    if options["metric"] == "greedy" and (config.get("evaluation") or {}).get("greedy") is False:
        raise ValueError("report.metric 'greedy' needs the greedy pass that evaluation.greedy: false leaves out")
    if options["baseline"] is None:
        grpo = [name for name, spec in config["variants"].items() if spec["objective"] == "grpo"]
        options["baseline"] = grpo[0] if grpo else next(iter(config["variants"]))
    elif options["baseline"] not in config["variants"]:
        raise ValueError(f"report.baseline {options['baseline']!r} is not a variant "
                         f"(known: {list(config['variants'])})")
    if options["figure1_model"] is None:
        by_paper = [m for m, spec in config["models"].items() if spec.get("paper_name") == FIGURE1_PAPER_MODEL]
        options["figure1_model"] = (by_paper or list(config["models"]))[0]
    elif options["figure1_model"] not in config["models"]:
        raise ValueError(f"report.figure1_model {options['figure1_model']!r} is not a model "
                         f"(known: {list(config['models'])})")
    options["figure1_dataset"] = _figure1_dataset(config, options["figure1_model"], options["figure1_dataset"])
    options["figure4_datasets"] = _dataset_list(config, "figure4_datasets", options["figure4_datasets"])
    options["grpo_lambda_variant"] = _per_model_choice(config, options["grpo_lambda_variant"])
    return options


def _figure1_dataset(config: dict, model: str, choice) -> str:
    """report.figure1_dataset: a training set of Figure 1's model, or "mean" (over its training sets).

    Default: the paper's cell (the model's MathRL-16K set) when the model trains on it, else its only
    training set, else "mean".
    """
    datasets = config["models"][model].get("datasets") or list(config["datasets"])
    if choice is None:
        paper = [d for d in datasets if config["datasets"][d].get("name", d) == FIGURE1_PAPER_DATASET]
        return paper[0] if paper else datasets[0] if len(datasets) == 1 else "mean"
    if choice != "mean" and choice not in datasets:
        raise ValueError(f"report.figure1_dataset {choice!r} is neither 'mean' nor a training set of "
                         f"report.figure1_model {model!r} (its training sets: {datasets})")
    return choice


def _dataset_list(config: dict, key: str, choice) -> list[str]:
    """A list of training sets (default: every one of the config)."""
    if choice is None:
        return list(config["datasets"])
    unknown = [d for d in choice if d not in config["datasets"]] if isinstance(choice, list) else None
    if unknown is None or unknown or not choice:
        raise ValueError(f"report.{key} must be a non-empty list of training sets "
                         f"(known: {list(config['datasets'])}), got {choice!r}")
    return list(choice)


def _per_model_choice(config: dict, choice) -> dict:
    """Normalise report.grpo_lambda_variant to {model: "mean" | variant name | selector dict}."""
    models = config["models"]
    if isinstance(choice, dict) and choice and set(choice) <= set(models):
        per_model = {m: choice.get(m, REPORT_DEFAULTS["grpo_lambda_variant"]) for m in models}
    else:
        per_model = {m: choice for m in models}
    for model, value in per_model.items():
        if isinstance(value, str):
            if value != "mean" and value not in config["variants"]:
                raise ValueError(f"report.grpo_lambda_variant for model {model!r}: {value!r} is neither "
                                 f"'mean' nor a variant (known: {list(config['variants'])})")
        elif isinstance(value, dict):
            bad = sorted(set(value) - set(SELECTOR_FIELDS))
            if bad:
                raise ValueError(f"report.grpo_lambda_variant for model {model!r}: selector fields {bad} "
                                 f"are not variant fields ({list(SELECTOR_FIELDS)}) nor model names")
        else:
            raise ValueError(f"report.grpo_lambda_variant must be 'mean', a variant name or a selector, "
                             f"got {value!r}")
    return per_model
