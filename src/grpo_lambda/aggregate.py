"""The paper's tables, with uncertainty, from the results folder.

Reads the per-sample evaluation files (``{model}/{dataset}/{variant}/seed{seed}/eval/{step}/
{benchmark}.jsonl`` and the SFT baseline ``{model}/{dataset}/sft/eval/final/{benchmark}.jsonl``;
see docs/results-format.md) — the per-sample files are the source of truth, the summary JSON is not
read — and writes every table as CSV (numbers), Markdown and LaTeX (booktabs) to one folder:

``results``             per model × dataset × variant × seed × benchmark (final model), with the SFT
                        baseline, the gain over it and a 95% interval over problems
``results_by_variant``  the same, mean over seeds, interval over problems and seeds, gain over SFT
``checkpoints``         accuracy at every evaluated step (SFT = step 0), mean over seeds
``table1``              Table 1: per model × method, mean over training sets, five benchmarks and
                        their unweighted average
``table1_published``    Table 1 beside the published values, with the difference
``appendix_e_{model}``  Tables 3–6: rows benchmark × training set, columns the variants
``appendix_e_published`` Appendix E cells beside the published values, with the difference
``paired``              each method minus the baseline (GRPO) over the same problems, its interval,
                        and whether the gap is distinguishable from noise (interval excludes 0)
``missing``             cells the config asks for that have no evaluation file (a partial run)

Options, under ``report:`` in the config (all optional):

``bootstrap`` (1000)    bootstrap replicates per interval; 0 gives point estimates only.
``level`` (0.95)        coverage of the intervals.
``seed`` (0)            seed of the bootstrap's random generator (tables are reproducible).
``baseline``            the variant other methods are compared with (default: the first variant
                        whose objective is ``grpo``).
``grpo_lambda_variant`` which GRPO-λ variants make Table 1's GRPO-λ row: ``"mean"`` (all GRPO-λ
                        variants of the model), a variant name, or a selector of variant fields
                        such as ``{style: recent, update: trace}`` (mean over the matching
                        variants). Either one value for every model or a mapping model → value.
                        Default ``{style: recent, update: trace}``: the published Table 1 rows
                        equal the mean over the model's recent-style ε-trace variants (λ 0.98 and
                        0.99 for the 1.5B models, λ 0.99 alone for 3B and 7B), to the printed
                        precision. A selector that matches no variant falls back to ``"mean"``.
``figure1_model``       the model of Figure 1 (default: the one whose ``paper_name`` is
                        DeepSeek-R1-Distill-Qwen-7B, as in the paper, else the first model).
``smoothing`` ("auto")  weight w of the exponential moving average applied to training curves;
                        "auto" picks w = 1 − 1/(1 + n/50) for a run of n logged steps (an
                        averaging window of about 2% of the run: 0.44 for 40 steps, 0.995 for
                        10000).
``final_window`` (20)   steps averaged for the final training reward (Figure 3).

Every interval is a percentile bootstrap over problems and seeds (see ``grpo_lambda.stats``); the
training sets of a mean over datasets are fixed (they are the study's design, not a sample).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_lambda import files
from grpo_lambda.config import model_datasets, model_variants, rl_settings
from grpo_lambda.files import write_text
from grpo_lambda.learning_speed import learning_speed_table
from grpo_lambda.stats import Interval, Term, bootstrap_linear

FINAL = "final"
SFT = "sft"
AVERAGE = "average"
ALL_DATASETS = "all"
KEYS = ["model", "dataset", "variant", "seed", "step", "benchmark"]

REPORT_DEFAULTS = {
    "bootstrap": 1000,
    "level": 0.95,
    "seed": 0,
    "baseline": None,
    "grpo_lambda_variant": {"style": "recent", "update": "trace"},
    "figure1_model": None,
    "smoothing": "auto",
    "final_window": 20,
}
SELECTOR_FIELDS = ("objective", "lam", "gamma", "style", "form", "update", "eps")
FIGURE1_PAPER_MODEL = "DeepSeek-R1-Distill-Qwen-7B"


# ---- options -----------------------------------------------------------------------------------

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
    options["grpo_lambda_variant"] = _per_model_choice(config, options["grpo_lambda_variant"])
    return options


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


# ---- variants and methods ----------------------------------------------------------------------

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
    return spec["objective"]


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

    ``grpo`` is the baseline variant; ``grpo_lambda`` follows report.grpo_lambda_variant; every
    other objective is a method of its own (mean over its variants).
    """
    variants = model_variants(config, model)
    lam_variants = [v for v in variants if objective(config, v) == "grpo_lambda"]
    methods: dict[str, list[str]] = {"grpo": [options["baseline"]] if options["baseline"] in variants else []}
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
        if obj == "grpo" and v != options["baseline"]:
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

    Only the baseline stands for the paper's GRPO: another ``grpo`` variant differs in some setting.
    """
    spec = variant_spec(config, variant)
    if variant == baseline:
        return ("grpo", "grpo", "")
    if spec["objective"] == "grpo_lambda" and spec["style"] in ("both", "recent") and spec["gamma"] == 1.0:
        return (spec["style"], spec["update"], _lam_text(spec["lam"]))
    return None


# ---- reading the results folder ----------------------------------------------------------------

def final_step(config: dict, model: str) -> int:
    """The optimizer step of the final model (where ``final`` sits on a step axis)."""
    return int(rl_settings(config, model)["max_steps"])


def expected_cells(config: dict) -> list[tuple]:
    """Every (model, dataset, variant, seed, step, benchmark) the config asks to evaluate."""
    steps = [str(s) for s in sorted(config.get("evaluation", {}).get("checkpoints", []))] + [FINAL]
    cells = []
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            for benchmark in config["benchmarks"]:
                cells.append((model, dataset, SFT, None, FINAL, benchmark))
            for variant in model_variants(config, model):
                for seed in config["seeds"]:
                    for step in steps:
                        for benchmark in config["benchmarks"]:
                            cells.append((model, dataset, variant, seed, step, benchmark))
    return cells


def eval_file(results_dir: str | os.PathLike, model: str, dataset: str, variant: str,
              seed: int | None, step: str, benchmark: str) -> Path:
    base = Path(results_dir) / model / dataset / variant
    if variant != SFT:
        base = base / f"seed{seed}"
    return base / "eval" / str(step) / f"{benchmark}.jsonl"


_SAMPLE_FIELDS = ["id", "mode", "sample", "correct", "formatted", "length"]


# What a per-sample evaluation line must hold (docs/results-format.md); the other fields may be absent.
_SAMPLE_REQUIRED = {"id": (str, int), "correct": (bool, int, float)}
_SAMPLE_OPTIONAL = {"mode": str, "sample": int, "formatted": (bool, int, float), "length": (int, float)}


def _read_samples(path: Path, columns: dict[str, list]) -> int:
    """Append the fields of each line of an evaluation file to ``columns``; return the line count.

    A bad line (not UTF-8, not JSON, a required field missing or null, a field of the wrong type) is
    skipped and named (``path:line``) in the log, with a summary line for the file; the same
    (id, mode, sample) twice is dropped when it agrees and an error naming both lines when not.
    """
    summary = files.ReadSummary(str(path))
    seen: dict[tuple, tuple[int, bool]] = {}
    count = 0
    for line_no, row in files.iter_jsonl(path, summary, fields=_SAMPLE_REQUIRED, optional=_SAMPLE_OPTIONAL):
        key = (str(row["id"]), row.get("mode", "greedy"), int(row.get("sample", 0)))
        if key in seen:
            earlier, correct = seen[key]
            if correct != bool(row["correct"]):
                raise ValueError(f"{path}:{earlier} and {path}:{line_no}: sample {key} appears twice, graded "
                                 "differently")
            summary.duplicates += 1
            continue
        seen[key] = (line_no, bool(row["correct"]))
        length = row.get("length")
        columns["id"].append(key[0])
        columns["mode"].append(key[1])
        columns["sample"].append(key[2])
        columns["correct"].append(float(bool(row["correct"])))
        columns["formatted"].append(float(bool(row.get("formatted"))))
        columns["length"].append(float("nan") if length is None else float(length))
        count += 1
    summary.rows = count
    if summary.total_skipped or summary.duplicates:
        summary.report()
    return count


def collect_samples(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """One row per evaluated sample of every cell the config names and the folder holds.

    Columns: model, dataset, variant, seed (nullable; empty for SFT), step (``final`` or a step
    number, as text), benchmark, id (text), mode (greedy | sampled), sample, correct, formatted
    (0/1 floats) and length (tokens). Absent files are skipped (see :func:`missing_cells`).
    """
    columns: dict[str, list] = {name: [] for name in KEYS + _SAMPLE_FIELDS}
    for cell in expected_cells(config):
        path = eval_file(results_dir, *cell)
        if not path.is_file():
            continue
        count = _read_samples(path, columns)
        for key, value in zip(KEYS, cell):
            columns[key].extend([value] * count)
    frame = pd.DataFrame({name: pd.Series(values, dtype=_SAMPLE_DTYPES.get(name, "object"))
                          for name, values in columns.items()})
    return frame


_SAMPLE_DTYPES = {"seed": "Int64", "sample": "int64", "correct": "float64", "formatted": "float64",
                  "length": "float64", "model": "category", "dataset": "category", "variant": "category",
                  "step": "category", "benchmark": "category", "mode": "category"}


def summarise(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per model × dataset × variant × seed × step × benchmark.

    accuracy, formatted and mean_length are over the greedy samples (n of them); when sampled
    completions exist: k, sampled_accuracy (mean over all sampled completions) and pass_at_k
    (share of problems with at least one correct sample).
    """
    greedy = samples[samples["mode"] == "greedy"]
    summary = (greedy.groupby(KEYS, dropna=False, sort=False, observed=True)
               .agg(n=("correct", "size"), accuracy=("correct", "mean"),
                    formatted=("formatted", "mean"), mean_length=("length", "mean"))
               .reset_index())
    sampled = samples[samples["mode"] == "sampled"]
    if not sampled.empty:
        per_problem = sampled.groupby(KEYS + ["id"], dropna=False, sort=False, observed=True)["correct"].max()
        extra = (sampled.groupby(KEYS, dropna=False, sort=False, observed=True)
                 .agg(k=("sample", lambda s: int(s.max()) + 1), sampled_accuracy=("correct", "mean"))
                 .join(per_problem.groupby(KEYS, dropna=False, sort=False, observed=True).mean().rename("pass_at_k"))
                 .reset_index())
        summary = summary.merge(extra, on=KEYS, how="left")
    summary["seed"] = summary["seed"].astype("Int64")
    return summary


def collect(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """One row per model × dataset × variant × seed × step × benchmark: accuracy, n, formatted,
    mean_length (and pass@k figures when sampled completions exist), from the per-sample files."""
    return summarise(collect_samples(results_dir, config))


def missing_cells(summary: pd.DataFrame, config: dict) -> pd.DataFrame:
    """The cells the config asks for that have no evaluation file."""
    found = {(r.model, r.dataset, r.variant, None if pd.isna(r.seed) else int(r.seed), r.step, r.benchmark)
             for r in summary[KEYS].itertuples(index=False)}
    rows = [cell for cell in expected_cells(config) if cell not in found]
    frame = pd.DataFrame(rows, columns=KEYS)
    frame["seed"] = frame["seed"].astype("Int64")
    return frame


TRAIN_LOG_COLUMNS = ["step", "reward", "reward_std", "frac_reward_zero_std", "kl", "loss", "entropy",
                     "completion_length", "trace_weight", "step_time"]


def collect_train_logs(results_dir: str | os.PathLike, config: dict) -> pd.DataFrame:
    """Every ``train_log.csv`` of the grid, stacked, with model, dataset, variant, seed columns.

    Columns the logs lack are filled with NaN, so plots of an unlogged metric are empty, not errors.
    """
    parts = []
    for model in config["models"]:
        for dataset in model_datasets(config, model):
            for variant in model_variants(config, model):
                for seed in config["seeds"]:
                    path = Path(results_dir) / model / dataset / variant / f"seed{seed}" / "train_log.csv"
                    if not path.is_file() or path.stat().st_size == 0:
                        continue
                    log = pd.read_csv(path)
                    if "step" not in log.columns or log.empty:
                        continue
                    log = log.assign(model=model, dataset=dataset, variant=variant, seed=seed)
                    parts.append(log)
    keys = ["model", "dataset", "variant", "seed"]
    if not parts:
        return pd.DataFrame(columns=keys + TRAIN_LOG_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    for column in TRAIN_LOG_COLUMNS:
        if column not in frame.columns:
            frame[column] = np.nan
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def load_published() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The published Table 1 (wide) and Appendix E (long), as shipped in ``grpo_lambda/published``."""
    folder = resources.files("grpo_lambda.published")
    with folder.joinpath("table1.csv").open(encoding="utf-8") as handle:
        table1 = pd.read_csv(handle)
    with folder.joinpath("appendix_e_benchmarks.csv").open(encoding="utf-8") as handle:
        appendix = pd.read_csv(handle)
    return table1, appendix


# ---- verdict matrices and the statistics built on them -----------------------------------------

class Cells:
    """Greedy verdicts as (seeds × problems) matrices, one per model × dataset × variant × step ×
    benchmark; the columns of one benchmark are the same problems, in the same order, everywhere."""

    def __init__(self, samples: pd.DataFrame, benchmarks: Iterable[str], options: dict):
        self.benchmarks = list(benchmarks)
        self.n_boot, self.level, self.seed = options["bootstrap"], float(options["level"]), options["seed"]
        self.resampling_cache: dict = {}
        greedy = samples[samples["mode"] == "greedy"]
        self.matrices: dict[tuple, tuple[list, np.ndarray]] = {}
        for benchmark, rows in greedy.groupby("benchmark", sort=False, observed=True):
            problem_ids = sorted(rows["id"].unique())
            position = {pid: i for i, pid in enumerate(problem_ids)}
            for key, group in rows.groupby(["model", "dataset", "variant", "step"], sort=False, observed=True):
                seeds = [None if pd.isna(s) else int(s) for s in group["seed"]]
                seed_list = sorted(set(seeds), key=lambda s: -1 if s is None else s)
                seed_row = {s: i for i, s in enumerate(seed_list)}
                matrix = np.full((len(seed_list), len(problem_ids)), np.nan)
                matrix[[seed_row[s] for s in seeds], [position[p] for p in group["id"]]] = group["correct"].to_numpy()
                self.matrices[(*key, benchmark)] = (seed_list, matrix)
        # One seed list per run group across benchmarks (a seed missing on one benchmark gets a NaN
        # row there), so that the group's seeds are resampled together.
        groups: dict[tuple, set] = {}
        for (*run, _), (seed_list, _) in self.matrices.items():
            groups.setdefault(tuple(run), set()).update(seed_list)
        for key, (seed_list, matrix) in list(self.matrices.items()):
            union = sorted(groups[key[:4]], key=lambda s: -1 if s is None else s)
            if union != seed_list:
                padded = np.full((len(union), matrix.shape[1]), np.nan)
                padded[[union.index(s) for s in seed_list]] = matrix
                self.matrices[key] = (union, padded)

    def seeds(self, model, dataset, variant, step=FINAL) -> list:
        for benchmark in self.benchmarks:
            cell = self.matrices.get((model, dataset, variant, step, benchmark))
            if cell is not None:
                return cell[0]
        return []

    def terms(self, model, dataset, variant, step, benchmarks, seed="all") -> list[Term] | None:
        """Terms of the mean over ``benchmarks`` of the cell's accuracy; None if one is absent.

        ``seed="all"`` pools the cell's seeds; an int restricts to that seed.
        """
        terms = []
        for benchmark in benchmarks:
            cell = self.matrices.get((model, dataset, variant, step, benchmark))
            if cell is None:
                return None
            seed_list, matrix = cell
            if seed != "all":
                if seed not in seed_list:
                    return None
                matrix = matrix[[seed_list.index(seed)]]
            terms.append(Term(1.0 / len(benchmarks), matrix, (model, dataset, variant, step, seed), benchmark))
        return terms

    def interval(self, terms: list[Term]) -> Interval:
        return bootstrap_linear(terms, self.n_boot, self.level, self.seed, self.resampling_cache)


def _scaled(terms: list[Term], factor: float) -> list[Term]:
    return [Term(t.weight * factor, t.correct, t.seeds, t.problems) for t in terms]


def _estimate(terms: list[Term] | None) -> float:
    """The point estimate alone (no resampling)."""
    return bootstrap_linear(terms, 0).estimate if terms else np.nan


def _targets(benchmarks: list[str]) -> list[tuple[str, list[str]]]:
    """Each benchmark alone, then the unweighted average over all of them."""
    return [(b, [b]) for b in benchmarks] + [(AVERAGE, benchmarks)]


def _interval_columns(prefix: str, interval: Interval | None) -> dict:
    if interval is None:
        return {prefix: np.nan, f"{prefix}_low": np.nan, f"{prefix}_high": np.nan}
    return {prefix: interval.estimate, f"{prefix}_low": interval.low, f"{prefix}_high": interval.high}


def _variant_columns(config: dict, variant: str) -> dict:
    spec = {} if variant == SFT else variant_spec(config, variant)
    return {"label": variant_label(config, variant), "objective": objective(config, variant),
            "form": spec["form"] if spec.get("objective") == "grpo_lambda" else ""}


# ---- the tables --------------------------------------------------------------------------------

def results_table(summary: pd.DataFrame, cells: Cells, config: dict) -> pd.DataFrame:
    """Final models, one row per model × dataset × variant × seed × benchmark (and the average)."""
    final = summary[summary["step"] == FINAL]
    benchmarks = list(config["benchmarks"])
    rows = []
    for (model, dataset, variant, seed), group in final.groupby(["model", "dataset", "variant", "seed"],
                                                                sort=False, dropna=False, observed=True):
        seed = None if pd.isna(seed) else int(seed)
        by_bench = group.set_index("benchmark")
        seed_key = "all" if seed is None else seed
        for target, members in _targets(benchmarks):
            if not set(members) <= set(by_bench.index):
                continue
            terms = cells.terms(model, dataset, variant, FINAL, members, seed=seed_key)
            sft_terms = cells.terms(model, dataset, SFT, FINAL, members)
            accuracy = cells.interval(terms)
            sft = _estimate(sft_terms)
            part = by_bench.loc[members]
            rows.append({"model": model, "dataset": dataset, "variant": variant, "seed": seed,
                         **_variant_columns(config, variant), "benchmark": target, "n": int(part["n"].sum()),
                         **_interval_columns("accuracy", accuracy),
                         "formatted": part["formatted"].mean(), "mean_length": part["mean_length"].mean(),
                         "sft_accuracy": sft, "gain": accuracy.estimate - sft if variant != SFT else np.nan})
    return _order(pd.DataFrame(rows, columns=_RESULTS_COLUMNS), config)


_RESULTS_COLUMNS = ["model", "dataset", "variant", "seed", "label", "objective", "form", "benchmark", "n",
                    "accuracy", "accuracy_low", "accuracy_high", "formatted", "mean_length", "sft_accuracy", "gain"]


def results_by_variant(summary: pd.DataFrame, cells: Cells, config: dict) -> pd.DataFrame:
    """Final models, mean over seeds: accuracy and gain over SFT, each with its interval."""
    final = summary[summary["step"] == FINAL]
    benchmarks = list(config["benchmarks"])
    rows = []
    for (model, dataset, variant), group in final.groupby(["model", "dataset", "variant"], sort=False, observed=True):
        for target, members in _targets(benchmarks):
            part = group[group["benchmark"].isin(members)]
            if set(part["benchmark"]) != set(members):
                continue
            terms = cells.terms(model, dataset, variant, FINAL, members)
            sft_terms = cells.terms(model, dataset, SFT, FINAL, members)
            gain = None
            if variant != SFT and sft_terms:
                gain = cells.interval(terms + _scaled(sft_terms, -1.0))
            rows.append({"model": model, "dataset": dataset, "variant": variant,
                         **_variant_columns(config, variant), "benchmark": target,
                         "n_seeds": len(cells.seeds(model, dataset, variant)),
                         **_interval_columns("accuracy", cells.interval(terms)),
                         "formatted": part["formatted"].mean(), "mean_length": part["mean_length"].mean(),
                         "sft_accuracy": _estimate(sft_terms),
                         **_interval_columns("gain", gain),
                         "gain_distinguishable": gain.excludes(0.0) if gain is not None else None})
    columns = ["model", "dataset", "variant", "label", "objective", "form", "benchmark", "n_seeds",
               "accuracy", "accuracy_low", "accuracy_high", "formatted", "mean_length", "sft_accuracy",
               "gain", "gain_low", "gain_high", "gain_distinguishable"]
    return _order(pd.DataFrame(rows, columns=columns), config)


def checkpoints_table(summary: pd.DataFrame, cells: Cells, config: dict) -> pd.DataFrame:
    """Accuracy at each evaluated step, mean over seeds with its interval; SFT sits at step 0."""
    benchmarks = list(config["benchmarks"])
    rows = []
    runs = summary.groupby(["model", "dataset", "variant", "step"], sort=False, observed=True)
    for (model, dataset, variant, step), _ in runs:
        step_num = 0 if variant == SFT else (final_step(config, model) if step == FINAL else int(step))
        for target, members in _targets(benchmarks):
            terms = cells.terms(model, dataset, variant, step, members)
            if terms is None:
                continue
            rows.append({"model": model, "dataset": dataset, "variant": variant,
                         "label": variant_label(config, variant), "step": step, "step_num": step_num,
                         "benchmark": target,
                         "n_seeds": len(cells.seeds(model, dataset, variant, step)),
                         **_interval_columns("accuracy", cells.interval(terms))})
    columns = ["model", "dataset", "variant", "label", "step", "step_num", "benchmark", "n_seeds",
               "accuracy", "accuracy_low", "accuracy_high"]
    frame = pd.DataFrame(rows, columns=columns)
    return _order(frame, config, extra=["step_num"])


def _method_terms(cells: Cells, config: dict, model: str, variants: list[str], members: list[str],
                  datasets: list[str]) -> tuple[list[Term] | None, list[str]]:
    """Terms of the mean over ``datasets`` of the mean over ``variants`` (those present)."""
    per_dataset = {}
    for dataset in datasets:
        present = [terms for v in variants if (terms := cells.terms(model, dataset, v, FINAL, members))]
        if present:
            per_dataset[dataset] = [t for terms in present for t in _scaled(terms, 1.0 / len(present))]
    if not per_dataset:
        return None, []
    return [t for terms in per_dataset.values() for t in _scaled(terms, 1.0 / len(per_dataset))], list(per_dataset)


def table1(cells: Cells, config: dict, options: dict) -> pd.DataFrame:
    """Table 1: per model × method, the mean over training sets of each benchmark and the average.

    Wide: one column per benchmark and ``average`` with ``_low``/``_high`` interval columns.
    """
    benchmarks = list(config["benchmarks"])
    rows = []
    for model in config["models"]:
        datasets = model_datasets(config, model)
        methods = {SFT: [SFT], **method_variants(config, model, options)}
        for method, variants in methods.items():
            row = {"model": model, "paper_name": config["models"][model].get("paper_name", ""),
                   "method": method, "label": method_label(config, method), "variants": " ".join(variants)}
            used: list[str] = []
            for target, members in [(AVERAGE, benchmarks)] + [(b, [b]) for b in benchmarks]:
                terms, present = _method_terms(cells, config, model, variants, members, datasets)
                row.update(_interval_columns(target, cells.interval(terms) if terms else None))
                if target == AVERAGE:
                    used = present
            row["datasets"] = " ".join(used)
            if any(not pd.isna(row[t]) for t, _ in _targets(benchmarks)):
                rows.append(row)
    columns = ["model", "paper_name", "method", "label", "variants", "datasets"] + [
        c for t in [AVERAGE] + benchmarks for c in (t, f"{t}_low", f"{t}_high")]
    return pd.DataFrame(rows, columns=columns)


def paired_table(cells: Cells, config: dict, options: dict) -> pd.DataFrame:
    """Each variant minus the baseline per model × dataset, and each Table 1 method minus the
    baseline over all training sets (dataset ``all``), paired over problems."""
    baseline = options["baseline"]
    benchmarks = list(config["benchmarks"])
    rows = []

    def add(model, dataset, method, label, variants, datasets):
        for target, members in _targets(benchmarks):
            common = [d for d in datasets if cells.terms(model, d, baseline, FINAL, members)
                      and any(cells.terms(model, d, v, FINAL, members) for v in variants)]
            treated, _ = _method_terms(cells, config, model, variants, members, common)
            base, _ = _method_terms(cells, config, model, [baseline], members, common)
            if not treated or not base:
                continue
            diff = cells.interval(treated + _scaled(base, -1.0))
            rows.append({"model": model, "dataset": dataset, "method": method, "label": label,
                         "baseline": baseline, "benchmark": target,
                         "accuracy": _estimate(treated), "baseline_accuracy": _estimate(base),
                         **_interval_columns("diff", diff), "distinguishable": diff.excludes(0.0)})

    for model in config["models"]:
        datasets = model_datasets(config, model)
        others = [v for v in model_variants(config, model) if v != baseline]
        for dataset in datasets:
            for variant in others:
                add(model, dataset, variant, variant_label(config, variant), [variant], [dataset])
        for method, variants in method_variants(config, model, options).items():
            if method != "grpo":
                add(model, ALL_DATASETS, method, method_label(config, method), variants, datasets)
    columns = ["model", "dataset", "method", "label", "baseline", "benchmark", "accuracy", "baseline_accuracy",
               "diff", "diff_low", "diff_high", "distinguishable"]
    return pd.DataFrame(rows, columns=columns)


def table1_published(ours: pd.DataFrame, published: pd.DataFrame, config: dict) -> pd.DataFrame:
    """Long: every Table 1 cell present both here and in the paper, with ours − published."""
    rows = []
    published = published.set_index(["model", "method"])
    for row in ours.to_dict("records"):  # not itertuples: benchmark names need not be identifiers
        key = (row["paper_name"], row["method"])
        if not row["paper_name"] or key not in published.index:
            continue
        for target in list(config["benchmarks"]) + [AVERAGE]:
            if target not in published.columns or pd.isna(row[target]):
                continue
            value, paper = row[target], float(published.loc[key, target])
            low, high = row[f"{target}_low"], row[f"{target}_high"]
            rows.append({"model": row["model"], "paper_name": row["paper_name"], "method": row["method"],
                         "benchmark": target, "ours": value, "ours_low": low, "ours_high": high,
                         "published": paper, "difference": value - paper,
                         "published_in_interval": bool(low <= paper <= high) if not pd.isna(low) else None})
    columns = ["model", "paper_name", "method", "benchmark", "ours", "ours_low", "ours_high", "published",
               "difference", "published_in_interval"]
    return pd.DataFrame(rows, columns=columns)


def _variant_order(config: dict, variants: Iterable[str], baseline: str) -> list[str]:
    """Baseline first, then GRPO-λ variants as in the paper (style, update, λ), then the rest."""
    variants = list(variants)
    lam = [v for v in variants if objective(config, v) == "grpo_lambda"]
    lam.sort(key=lambda v: tuple(str(variant_spec(config, v)[f]) for f in ("style", "update", "lam", "form")))
    rest = [v for v in variants if v != baseline and v not in lam and v != SFT]
    return ([baseline] if baseline in variants else []) + lam + rest


def appendix_e(by_variant: pd.DataFrame, config: dict, model: str, options: dict) -> pd.DataFrame:
    """Tables 3–6 for one model: rows benchmark × training set, one column per variant."""
    rows = by_variant[(by_variant["model"] == model) & (by_variant["variant"] != SFT)]
    order = _variant_order(config, model_variants(config, model), options["baseline"])
    labels = [variant_label(config, v) for v in order]
    if rows.empty:
        return pd.DataFrame(columns=["benchmark", "dataset"] + labels)
    wide = rows.pivot_table(index=["benchmark", "dataset"], columns="label", values="accuracy", sort=False)
    wide = wide.reindex(columns=labels)
    targets = [t for t, _ in _targets(list(config["benchmarks"]))]
    datasets = model_datasets(config, model)
    index = [(t, d) for t in targets for d in datasets if (t, d) in wide.index]
    wide = wide.reindex(pd.MultiIndex.from_tuples(index, names=["benchmark", "dataset"]) if index else wide.index[:0])
    wide.columns.name = None
    return wide.reset_index()


def appendix_e_published(by_variant: pd.DataFrame, published: pd.DataFrame, config: dict,
                         options: dict) -> pd.DataFrame:
    """Long: every Appendix E cell present both here and in the paper, with ours − published."""
    index = {(r.model, r.train_dataset, r.trace_style, r.update_style, _lam_text(r.lam), r.benchmark):
             float(r.accuracy) for r in published.itertuples(index=False)}
    rows = []
    for r in by_variant[by_variant["variant"] != SFT].itertuples(index=False):
        paper_model = config["models"][r.model].get("paper_name")
        twin = _published_variant(config, r.variant, options["baseline"])
        if not paper_model or twin is None:
            continue
        # the dataset's key, or its registry name, as the paper names it
        names = (r.dataset, config["datasets"].get(r.dataset, {}).get("name"))
        paper = next((index[key] for name in names
                      if (key := (paper_model, name, *twin, r.benchmark)) in index), None)
        if paper is None:
            continue
        rows.append({"model": r.model, "paper_name": paper_model, "dataset": r.dataset, "variant": r.variant,
                     "label": r.label, "form": r.form, "benchmark": r.benchmark, "ours": r.accuracy,
                     "ours_low": r.accuracy_low, "ours_high": r.accuracy_high, "published": paper,
                     "difference": r.accuracy - paper,
                     "published_in_interval": bool(r.accuracy_low <= paper <= r.accuracy_high)
                     if not pd.isna(r.accuracy_low) else None})
    columns = ["model", "paper_name", "dataset", "variant", "label", "form", "benchmark", "ours", "ours_low",
               "ours_high", "published", "difference", "published_in_interval"]
    return pd.DataFrame(rows, columns=columns)


def _order(frame: pd.DataFrame, config: dict, extra: list[str] | None = None) -> pd.DataFrame:
    """Sort rows in config order: model, dataset, variant (SFT first), seed, benchmark (average last)."""
    if frame.empty:
        return frame
    rank = {
        "model": {m: i for i, m in enumerate(config["models"])},
        "dataset": {d: i for i, d in enumerate(config["datasets"])},
        "variant": {v: i for i, v in enumerate([SFT] + list(config["variants"]))},
        "benchmark": {b: i for i, b in enumerate(list(config["benchmarks"]) + [AVERAGE])},
    }
    keys = [k for k in ("model", "dataset", "variant", "seed") if k in frame.columns] + (extra or []) + ["benchmark"]

    def sort_key(column: pd.Series) -> pd.Series:
        if column.name in rank:
            return column.map(rank[column.name])
        return column
    return frame.sort_values(keys, key=sort_key, kind="stable", na_position="first").reset_index(drop=True)


# ---- writing -----------------------------------------------------------------------------------

def table_names(config: dict) -> list[str]:
    """The tables ``main`` writes (without extension), in order."""
    return (["results", "results_by_variant", "checkpoints", "table1", "learning_speed", "table1_published"]
            + [f"appendix_e_{model}" for model in config["models"]]
            + ["appendix_e_published", "paired", "missing"])


TABLE_FORMATS = ("csv", "md", "tex")


def output_files(config: dict) -> list[str]:
    """File names ``main`` writes into its out_dir (for a rule's output list)."""
    return [f"{name}.{ext}" for name in table_names(config) for ext in TABLE_FORMATS]


def _display(frame: pd.DataFrame) -> pd.DataFrame:
    """Text for people: x, x_low, x_high become "x [low, high]"; floats 3 decimals; NaN "–"."""
    out = pd.DataFrame(index=frame.index)
    skip = set()
    for column in frame.columns:
        if column in skip:
            continue
        low, high = f"{column}_low", f"{column}_high"
        values = frame[column]
        if low in frame.columns and high in frame.columns:
            skip |= {low, high}
            out[column] = [_number(v) + (f" [{_number(lo)}, {_number(hi)}]" if not pd.isna(lo) else "")
                           if not pd.isna(v) else "–" for v, lo, hi in zip(values, frame[low], frame[high])]
        elif pd.api.types.is_bool_dtype(values) or values.map(lambda v: isinstance(v, (bool, np.bool_))).any():
            out[column] = values.map(lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v))
                                     else ("yes" if v else "no"))
        elif pd.api.types.is_float_dtype(values) and column in ("seed", "n", "step"):
            # Whole numbers that a missing value (the SFT row's seed) turned into floats.
            out[column] = values.map(lambda v: "–" if pd.isna(v) else str(int(v)))
        elif pd.api.types.is_float_dtype(values):
            digits = 1 if "length" in column else 3
            out[column] = values.map(lambda v: "–" if pd.isna(v) else f"{v:.{digits}f}")
        else:
            out[column] = values.map(lambda v: "–" if v is None or (not isinstance(v, str) and pd.isna(v))
                                     else str(v))
    return out


def _number(value: float) -> str:
    return f"{value:.3f}"


def write_table(frame: pd.DataFrame, out_dir: str | os.PathLike, name: str) -> list[str]:
    """Write ``name``.csv (numbers), .md and .tex (booktabs, formatted); return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shown = _display(frame)
    texts = {
        "csv": frame.to_csv(index=False),
        # disable_numparse: tabulate would otherwise re-format the already formatted numbers
        "md": shown.to_markdown(index=False, disable_numparse=True) + "\n" if not shown.empty else
              "| " + " | ".join(frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n",
        "tex": shown.to_latex(index=False, escape=True).replace("λ", r"$\lambda$"),
    }
    paths = []
    for ext in TABLE_FORMATS:
        path = out_dir / f"{name}.{ext}"
        write_text(path, texts[ext])  # temporary name, then renamed
        paths.append(str(path))
    return paths


def build_tables(config: dict, results_dir: str | os.PathLike) -> dict[str, pd.DataFrame]:
    """Every table, by name (see :func:`table_names`)."""
    options = report_options(config)
    samples = collect_samples(results_dir, config)
    summary = summarise(samples)
    cells = Cells(samples, config["benchmarks"], options)
    published_table1, published_appendix = load_published()
    by_variant = results_by_variant(summary, cells, config)
    t1 = table1(cells, config, options)
    tables = {
        "results": results_table(summary, cells, config),
        "results_by_variant": by_variant,
        "checkpoints": checkpoints_table(summary, cells, config),
        "table1": t1,
        "learning_speed": learning_speed_table(config, collect_train_logs(results_dir, config), options),
        "table1_published": table1_published(t1, published_table1, config),
    }
    for model in config["models"]:
        tables[f"appendix_e_{model}"] = appendix_e(by_variant, config, model, options)
    tables["appendix_e_published"] = appendix_e_published(by_variant, published_appendix, config, options)
    tables["paired"] = paired_table(cells, config, options)
    tables["missing"] = missing_cells(summary, config)
    return tables


def main(config: dict, results_dir: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Write every table (CSV, Markdown, LaTeX) to ``out_dir``; return the paths, in
    :func:`output_files` order. Cells absent from ``results_dir`` are left out (and listed in
    ``missing``); the tables are written even when nothing has been evaluated yet."""
    tables = build_tables(config, results_dir)
    paths = []
    for name in table_names(config):
        paths += write_table(tables[name], out_dir, name)
    return paths
