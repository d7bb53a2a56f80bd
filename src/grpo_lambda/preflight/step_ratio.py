"""The step-ratio check: benchmarks/bench_step.py's GRPO-λ loss + backward against TRL's GRPO on this node, one
line per variant under column headers, then the worst ratio against the goal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grpo_lambda.preflight.context import Fail, Skip, run_logged

REPOSITORY = Path(__file__).resolve().parents[3]
STEP_RATIO_GOAL = 1.03
# The variants of the step-ratio check: the relative form the paper states and the released code's absolute one.
STEP_VARIANTS = ("grpo-lambda-recent", "grpo-lambda-absolute")


def check_step_ratio(context):
    bench = REPOSITORY / "benchmarks" / "bench_step.py"
    if not bench.is_file():
        raise Skip(f"no {bench}: run the preflight from the repository's checkout")
    shape = ["--device", "cuda", "--shape", "qwen2.5-1.5b"] if context.gpus else ["--shape", "tiny"]
    if not context.gpus and not context.cpu:
        raise Skip("no GPU")
    record = context.work / "step-ratio.json"
    command = [sys.executable, str(bench), *shape, "--completion-length", "256", "--rounds", "3", "--iterations", "2",
               "--variants", *STEP_VARIANTS, "--json", str(record)]
    context.progress(f"benchmarks/bench_step.py --shape {shape[-1]} (log: {context.work / 'step-ratio.log'})")
    run_logged(command, context.work / "step-ratio.log", timeout=900, progress=context.progress)
    rows = {row["variant"]: row for row in json.loads(record.read_text())["rows"]}
    for line in ratio_table(rows.values()):
        context.progress(line)
    # the loss-only estimate: low-noise where the whole call's time scatters (a shared CPU)
    worst = max(rows[name]["ratio_from_loss_only"] for name in STEP_VARIANTS)
    words = (f"{shape[-1]}: GRPO-λ ÷ TRL's GRPO " + ", ".join(f"{name.removeprefix('grpo-lambda-')} "
                                                               f"{rows[name]['ratio']:.3f}" for name in STEP_VARIANTS)
             + f" per call, {worst:.4f} from the loss alone (goal ≤ {STEP_RATIO_GOAL})")
    if worst > STEP_RATIO_GOAL:
        raise Fail(words)
    return words, rows


def ratio_table(rows) -> list[str]:
    """bench_step.py's rows (TRL's GRPO, the baseline, among them) as lines under column headers: each variant's
    median milliseconds a loss + backward call, its ratio to the baseline's call, and the ratio its loss
    arithmetic alone adds (the low-noise estimate the goal is judged on)."""
    lines = [f"{'variant':24} {'ms/call':>9} {'÷ GRPO per call':>16} {'÷ GRPO from the loss alone':>27}"]
    for row in rows:
        alone = row.get("ratio_from_loss_only")
        lines.append(f"{row['variant']:24} {row['ms']:9.2f} {row['ratio']:16.3f} "
                     + (f"{alone:27.4f}" if alone is not None else f"{'-':>27}"))
    return lines
