"""What the report's captions say the numbers are computed over: seeds, problems, the intervals' level and
the curves' smoothing, as text. The figures' captions (``workflow/report/figures/*.rst``, Jinja templates
that Snakemake renders) read :func:`caption_counts` of the config as ``snakemake.params.counts`` of the
figures rule; the headline (:mod:`grpo_lambda.headline`) states the same from the counts in the tables.
Standard library only: the workflow imports it when it is planned."""

from __future__ import annotations

from grpo_lambda.config.report import report_options


def counted(count: int, what: str) -> str:
    """"1 seed", "4 seeds"."""
    return f"{count} {what}{'' if count == 1 else 's'}"


def seeds_text(fewest: int, most: int) -> str:
    """The RL seeds of each variant: "4 RL seeds", or "3 to 4 RL seeds" when variants differ."""
    return counted(most, "RL seed") if fewest == most else f"{fewest} to {most} RL seeds"


def problems_text(sizes: dict[str, tuple[int | None, str]]) -> str:
    """The problems of each benchmark, ``sizes``: name → (count or None when unknown, "" or "at most ")."""
    if any(size is None for size, _ in sizes.values()):
        return (f"every problem of each of the {counted(len(sizes), 'benchmark')} "
                f"(the results table's n column counts them)")
    if len(set(sizes.values())) == 1:
        size, bound = next(iter(sizes.values()))
        return f"{counted(len(sizes), 'benchmark')} of {bound}{counted(size, 'problem')} each"
    return "; ".join(f"{name}: {bound}{counted(size, 'problem')}" for name, (size, bound) in sizes.items())


def caption_counts(config: dict) -> dict[str, str]:
    """The texts the figures' captions insert, from the (validated) config: ``seeds`` (every variant's
    RL seeds), ``problems`` (a benchmark's ``n``, or at most its ``limit``, else every problem), ``level``
    of the intervals and ``smoothing`` of the training curves. The figures are drawn only once every cell
    is evaluated, so the config's seeds and benchmarks are the run's."""
    options = report_options(config)
    seeds = config["seeds"]
    sizes = {name: (spec["n"], "") if spec.get("n") else (spec.get("limit"), "at most ")
             for name, spec in config["benchmarks"].items()}
    weight = options["smoothing"]
    smoothing = ("Each seed's curve is smoothed by a debiased exponential moving average (TensorBoard's rule) of "
                 + ("weight w = 1 − 1/(1 + n/50) for n logged steps (``report.smoothing: auto``, a window of about "
                    "2% of the run)" if weight == "auto" else f"weight {weight} (``report.smoothing``)")
                 + "; the pipeline's own choice: the paper does not say how it smoothed its curves.")
    return {"seeds": f"{counted(len(seeds), 'RL seed')} ({', '.join(map(str, seeds))})",
            "problems": problems_text(sizes), "level": f"{float(options['level']):.0%}", "smoothing": smoothing}
