"""Verdict matrices (seeds × problems) per cell, and the bootstrap statistics every table is built on."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from grpo_lambda.stats import Interval, Term, bootstrap_linear
from grpo_lambda.tables.keys import AVERAGE, FINAL

METRICS = ("greedy", "avg")


def verdicts(samples: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per evaluated problem: ``greedy``, the greedy completion's verdict (the paper's protocol);
    ``avg``, the mean verdict of the problem's sampled completions (avg@k, pass@1 estimated from k samples,
    as DAPO and lighteval report AIME)."""
    if metric == "greedy":
        return samples[samples["mode"] == "greedy"]
    sampled = samples[samples["mode"] == "sampled"]
    return (sampled.groupby(["model", "dataset", "variant", "seed", "step", "benchmark", "id"], dropna=False,
                            sort=False, observed=True)["correct"].mean().reset_index())


class Cells:
    """Per-problem verdicts (``report.metric``) as (seeds × problems) matrices, one per model × dataset ×
    variant × step × benchmark; the columns of one benchmark are the same problems, in the same order,
    everywhere. With ``avg`` a problem's value is its samples' mean: intervals resample problems and
    seeds, not the samples within a problem."""

    def __init__(self, samples: pd.DataFrame, benchmarks: Iterable[str], options: dict):
        self.benchmarks = list(benchmarks)
        self.n_boot, self.level, self.seed = options["bootstrap"], float(options["level"]), options["seed"]
        self.resampling_cache: dict = {}
        greedy = verdicts(samples, options.get("metric", "greedy"))
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
