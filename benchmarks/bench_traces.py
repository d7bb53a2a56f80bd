"""Speed and memory of `apply_trace` against the dense trace matrix.

    python benchmarks/bench_traces.py [--threads N] [--skip-long]

Prints, for B = 8, float32 and float64, λ = 0.99, ε = 1e-7:
- at T ∈ {256, 1024, 4096}: the median time of apply_trace, of the dense product x @ Wᵀ with W
  built beforehand, and of the dense product including building W (trace_matrix), and the ratios
  (goal at T = 4096: ≥ 20× for every form, ≥ 100× for the relative forms in float64 with --threads 1);
- at T = 32768: the wall time of apply_trace, forward and forward + backward (goal: < 1 s), on the
  first call at that length in a fresh process and as the median of later calls, and its extra
  peak memory (goal: < 64 MB): the rise of the process's peak resident set size (VmHWM, reset just
  before the call through /proc/self/clear_refs) over its resident size before the call. Linux only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch
from torch.utils.benchmark import Timer

from grpo_lambda.traces import apply_trace, trace_matrix

BATCH = 8
LAM, EPS = 0.99, 1e-7
SHORT_LENGTHS = (256, 1024, 4096)
LONG_LENGTH = 32768
CASES = (("recent", "relative"), ("both", "relative"), ("recent", "absolute"), ("both", "absolute"))
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def median_seconds(stmt: str, env: dict, min_run_time: float = 0.5) -> float:
    return Timer(stmt, globals=env).blocked_autorange(min_run_time=min_run_time).median


def compare_with_dense(dtype: torch.dtype) -> dict:
    """Print the table for one dtype; return {(style, form): ratio over the prebuilt dense product} at the
    longest length."""
    ratios = {}
    print(f"\n{'dtype':8} {'style/form':16} {'T':>5} {'trace ms':>9} {'dense ms':>9} {'ratio':>7} "
          f"{'dense+build ms':>15} {'ratio':>7}")
    for length in SHORT_LENGTHS:
        x = torch.randn(BATCH, length, dtype=dtype)
        for style, form in CASES:
            trace = dict(style=style, form=form, eps=EPS)
            matrix = trace_matrix(length, LAM, dtype=dtype, **trace)
            env = {"apply_trace": apply_trace, "trace_matrix": trace_matrix, "x": x, "W": matrix, "lam": LAM,
                   "trace": trace, "n": length, "dtype": dtype}
            ours = median_seconds("apply_trace(x, lam, **trace)", env)
            dense = median_seconds("x @ W.T", env)
            dense_built = median_seconds("x @ trace_matrix(n, lam, dtype=dtype, **trace).T", env)
            print(f"{str(dtype)[6:]:8} {style + '/' + form:16} {length:5d} {ours * 1e3:9.3f} {dense * 1e3:9.3f} "
                  f"{dense / ours:7.1f} {dense_built * 1e3:15.3f} {dense_built / ours:7.1f}")
            ratios[style, form] = dense / ours
    return ratios


def long_sequence(dtype_name: str, style: str, form: str, backward: bool) -> dict:
    """Run in a fresh process (see report_long_sequences): times and peak-memory rise of apply_trace."""
    dtype = DTYPES[dtype_name]
    trace = dict(style=style, form=form, eps=EPS)

    def call(x):
        y = apply_trace(x, LAM, **trace)
        if backward:
            y.sum().backward()
            x.grad = None

    # Load the kernels' code pages on a short input first, so they do not count as data memory.
    call(torch.randn(BATCH, 300, dtype=dtype, requires_grad=backward))
    x = torch.randn(BATCH, LONG_LENGTH, dtype=dtype, requires_grad=backward)
    before_kib = _reset_peak_resident_kib()
    start = time.perf_counter()
    call(x)
    first = time.perf_counter() - start
    extra_peak_mb = (_status_kib("VmHWM") - before_kib) / 1024
    later = []
    for _ in range(5):
        start = time.perf_counter()
        call(x)
        later.append(time.perf_counter() - start)
    return {"first": first, "later": sorted(later)[len(later) // 2], "extra_peak_mb": extra_peak_mb}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak_resident_kib() -> int:
    """Reset the peak resident size to the current one (Linux ≥ 4.0); return it in KiB."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status_kib("VmRSS")


def report_long_sequences() -> None:
    size_mb = BATCH * LONG_LENGTH * 8 / 2**20
    print(f"\nT = {LONG_LENGTH}, B = {BATCH} (one float64 (B, T) tensor = {size_mb:.0f} MB); fresh process per row")
    print(f"{'dtype':8} {'style/form':16} {'pass':17} {'first s':>8} {'later s':>8} {'extra peak MB':>14}")
    for dtype_name in DTYPES:
        for style, form in CASES:
            for backward in (False, True):
                command = [sys.executable, __file__, "--long-child", json.dumps([dtype_name, style, form, backward]),
                           "--threads", str(torch.get_num_threads())]
                result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
                print(f"{dtype_name:8} {style + '/' + form:16} {'forward+backward' if backward else 'forward':17} "
                      f"{result['first']:8.4f} {result['later']:8.4f} {result['extra_peak_mb']:14.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--skip-long", action="store_true", help=f"skip the T = {LONG_LENGTH} rows")
    parser.add_argument("--long-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.long_child:
        print(json.dumps(long_sequence(*json.loads(args.long_child))))
        return
    print(f"apply_trace vs dense trace matrix; B = {BATCH}, λ = {LAM}, ε = {EPS}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    ratios = {name: compare_with_dense(dtype) for name, dtype in DTYPES.items()}
    relative = ", ".join(f"{style} {ratios['float64'][style, 'relative']:.0f}×" for style in ("recent", "both"))
    print(f"\nrelative form, T = {SHORT_LENGTHS[-1]}, float64, over the prebuilt dense product: {relative} "
          f"(goal ≥ 100× with --threads 1)")
    if not args.skip_long:
        report_long_sequences()


if __name__ == "__main__":
    main()
