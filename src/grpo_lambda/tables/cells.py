"""Per-problem values (seeds × problems) per cell, and the intervals every accuracy table is built on."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from grpo_lambda.config import sft_folder, sft_seed_of, sft_seeds
from grpo_lambda.stats import NO_INTERVAL, Interval, Term, linear_interval, proportion_interval
from grpo_lambda.seed_level import cluster_means
from grpo_lambda.tables.collect import sampled_per_problem
from grpo_lambda.tables.keys import AVERAGE, FINAL, KEYS, SFT

# The summary's column (collect.summarise) that holds each sampled metric per cell.
SAMPLED_COLUMNS = {"avg": "sampled_accuracy", "pass_at_k": "pass_at_k", "maj_at_k": "maj_at_k"}


def verdicts(samples: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per evaluated problem (KEYS, id) with its value under ``metric`` in ``correct``."""
    if metric == "greedy":
        return samples[samples["mode"] == "greedy"]
    per_problem = sampled_per_problem(samples[samples["mode"] == "sampled"])
    value = {"avg": per_problem["right"] / per_problem["samples"], "pass_at_k": (per_problem["right"] > 0) * 1.0,
             "maj_at_k": per_problem["maj"]}[metric]
    return per_problem[KEYS + ["id"]].assign(correct=value.astype(float))


def pairing_key(config: dict, model: str, dataset: str, variant: str):
    """The ``seeds`` key of a run group (see grpo_lambda.stats): every RL run started from one SFT model
    shares it, so runs with the same training seed are paired; the SFT model is a stratum of its own."""
    if variant == SFT:
        return (SFT, model, dataset)
    return ("rl", sft_folder(config, model, dataset))


def sft_clusters(config: dict, model: str, dataset: str, variant: str, rows) -> tuple | None:
    """The draw one level up of each row (grpo_lambda.stats ``Term.clusters``): with several SFT models per
    condition (``sft.seeds``), the SFT model an RL seed started from, or the SFT model itself for the SFT
    rows (named by their SFT seed), all in one stratum per condition; None with one SFT model per
    condition (the intervals are then conditional on it)."""
    if sft_seeds(config) is None:
        return None
    stratum = ("sft", sft_folder(config, model, dataset))
    return tuple((stratum, row if variant == SFT else sft_seed_of(config, row)) for row in rows)


def seed_clusters(config: dict, seeds) -> list | None:
    """The SFT seed of each RL seed in ``seeds`` (the units a seed-level test flips, seed_level.seed_interval's
    ``clusters``) with several SFT models per condition; None with one."""
    if sft_seeds(config) is None:
        return None
    return [sft_seed_of(config, seed) for seed in seeds]


def unit_values(values, seeds, clusters) -> dict:
    """Per-seed values as the units a seed-level test or a t interval counts (unit -> value): each seed, or
    with ``clusters`` (:func:`seed_clusters`) each SFT model, its seeds' mean."""
    if clusters is None:
        return dict(zip(seeds, np.asarray(values, dtype=float).tolist()))
    means, units = cluster_means(values, seeds, clusters)
    return dict(zip(units, means.tolist()))


class Cells:
    """Per-problem values (``report.metric``, or ``metric``) as (seeds × problems) matrices, one per
    model × dataset × variant × step × benchmark; the columns of one benchmark are the same problems,
    in the same order, everywhere. A sampled metric's value is per problem: intervals are over problems
    and seeds, not over the samples within a problem."""

    def __init__(self, samples: pd.DataFrame, config: dict, options: dict, metric: str | None = None):
        self.config = config
        self.benchmarks = list(config["benchmarks"])
        self.level = float(options["level"])
        values = verdicts(samples, metric or options.get("metric", "greedy"))
        self.matrices: dict[tuple, tuple[list, np.ndarray]] = {}
        for benchmark, rows in values.groupby("benchmark", sort=False, observed=True):
            problem_ids = sorted(rows["id"].unique())
            position = {pid: i for i, pid in enumerate(problem_ids)}
            for key, group in rows.groupby(["model", "dataset", "variant", "step"], sort=False, observed=True):
                seeds = [None if pd.isna(s) else int(s) for s in group["seed"]]
                seed_list = sorted(set(seeds), key=lambda s: -1 if s is None else s)
                seed_row = {s: i for i, s in enumerate(seed_list)}
                matrix = np.full((len(seed_list), len(problem_ids)), np.nan)
                matrix[[seed_row[s] for s in seeds], [position[p] for p in group["id"]]] = group["correct"].to_numpy()
                self.matrices[(*key, benchmark)] = (seed_list, matrix)

    def seeds(self, model, dataset, variant, step=FINAL) -> list:
        """The seeds of a run group on any benchmark."""
        found = set()
        for benchmark in self.benchmarks:
            cell = self.matrices.get((model, dataset, variant, step, benchmark))
            if cell is not None:
                found.update(cell[0])
        return sorted(found, key=lambda s: -1 if s is None else s)

    def terms(self, model, dataset, variant, step, benchmarks, seed="all") -> list[Term] | None:
        """Terms of the mean over ``benchmarks`` of the cell's value; None if one is absent.

        ``seed="all"`` pools the cell's seeds; an int restricts to that seed. Rows are named by seed
        and keyed by the SFT model (:func:`pairing_key`): terms of two variants pair by seed; with
        several SFT models per condition, each row names its SFT model (:func:`sft_clusters`).
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
                matrix, seed_list = matrix[[seed_list.index(seed)]], [seed]
            terms.append(Term(1.0 / len(benchmarks), matrix, pairing_key(self.config, model, dataset, variant),
                              benchmark, tuple(seed_list),
                              sft_clusters(self.config, model, dataset, variant, seed_list)))
        return terms

    def interval(self, terms: list[Term] | None) -> Interval:
        """The interval of a linear statistic of the terms (a difference, an effect): the t interval."""
        return linear_interval(terms, self.level) if terms else NO_INTERVAL

    def level_interval(self, terms: list[Term] | None) -> Interval:
        """The interval of an accuracy itself (terms of positive weights summing to 1), kept inside [0, 1]
        by the Wilson form at the cluster variance's effective size (grpo_lambda.stats.proportion_interval)."""
        if not terms:
            return NO_INTERVAL
        observations = int(sum((~np.isnan(t.correct)).sum() for t in terms))
        return proportion_interval(linear_interval(terms, self.level), observations, self.level)


def scaled(terms: list[Term], factor: float) -> list[Term]:
    return [Term(t.weight * factor, t.correct, t.seeds, t.problems, t.rows, t.clusters) for t in terms]


def estimate(terms: list[Term] | None) -> float:
    """The point estimate alone: Σ_j w_j m_j."""
    if not terms:
        return np.nan
    return float(sum(t.weight * np.nanmean(t.correct) if (~np.isnan(t.correct)).any() else np.nan for t in terms))


def targets(benchmarks: Iterable[str]) -> list[tuple[str, list[str]]]:
    """Each benchmark alone, then the unweighted average over all of them."""
    benchmarks = list(benchmarks)
    return [(b, [b]) for b in benchmarks] + [(AVERAGE, benchmarks)]


def interval_columns(prefix: str, interval: Interval | None) -> dict:
    """``prefix``, ``prefix_low``, ``prefix_high`` of an interval (NaN for none)."""
    interval = interval or NO_INTERVAL
    return {prefix: interval.estimate, f"{prefix}_low": interval.low, f"{prefix}_high": interval.high}
