"""Speed and memory of `apply_trace` against the dense trace matrix.

    python benchmarks/bench_traces.py [--threads N] [--skip-long]      on the CPU
    python benchmarks/bench_traces.py --device cuda [--quick]          on a GPU

On a GPU (`--device cuda`) it times forward + backward, CUDA-synchronised, median of --repeats calls,
for float32 and bfloat16, λ = 0.99, ε = 1e-7, every form and style, B = 16 (8 at T = 32768), T from
256 to 32768: `apply_trace` as dispatched (`method="auto"`: a cached W below the crossover length,
the O(T) operator above), the O(T) operator alone (`method="scan"`) and the baseline, the dense
product x @ Wᵀ with W built beforehand in the same dtype. It prints each one's ratio to the baseline
(goal for the dispatched operator: ≤ 1 at every T, within timing noise), the crossover the O(T)
operator shows (the shortest T at which it beats the dense product, to set `traces.DENSE_BELOW`), and
the largest error of each against a float64 dense product on the GPU. With --device cuda and no CUDA
device it stops with a message saying so.

On the CPU it prints, for B = 8, float32 and float64, λ = 0.99, ε = 1e-7:
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
import statistics
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


def require_cuda() -> None:
    """Stop with a message, not a traceback, when --device cuda is asked for where there is no GPU."""
    if not torch.cuda.is_available():
        built = torch.version.cuda or "none"
        raise SystemExit(f"{sys.argv[0]}: --device cuda: no CUDA device is visible (torch {torch.__version__}, "
                         f"built for CUDA {built}); run it on a GPU machine, or without --device for the CPU")


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


GPU_LENGTHS = (256, 1024, 4096, 8192, 16384, 32768)
GPU_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
GPU_CASES = CASES + (("early", "relative"),)


def synchronised_median(call, device: str, repeats: int) -> float:
    """Median wall time of `call()` over `repeats` calls after two warm-ups, each bracketed by a CUDA
    synchronisation (kernels run asynchronously: without it the clock would stop at their launch)."""
    synchronise = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    for index in range(repeats + 2):
        synchronise()
        start = time.perf_counter()
        call()
        synchronise()
        if index >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward_backward(function, x):
    def call():
        function(x).sum().backward()
        x.grad = None

    return call


def compare_on_device(device: str, lengths, dtypes: dict, repeats: int) -> list[dict]:
    """The GPU table: dispatched, O(T) and dense forward + backward per form, style, dtype and T."""
    from grpo_lambda import traces

    rows = []
    print(f"\n{'dtype':9} {'style/form':16} {'B×T':>9} {'dense ms':>9} {'auto ms':>8} {'auto÷dense':>11} "
          f"{'O(T) ms':>8} {'O(T)÷dense':>11} {'auto path':>9} {'max rel err auto':>17} {'O(T)':>9}")
    for length in lengths:
        batch = 16 if length < 32768 else 8
        x64 = torch.randn(batch, length, dtype=torch.float64, device=device)
        for style, form in GPU_CASES:
            kappa = LAM  # γ = 1
            for dtype_name, dtype in dtypes.items():
                trace = dict(style=style, form=form, eps=EPS)
                # the baseline's W, built on the device once (as the cache does), outside the timing
                matrix = traces._dense_weights(length, 0, kappa, style, form, EPS, dtype, torch.device(device))
                traces._dense_weights.cache_clear()
                x = x64.to(dtype).requires_grad_()
                dense = synchronised_median(forward_backward(lambda v: v @ matrix.T, x), device, repeats)
                auto = synchronised_median(forward_backward(lambda v: apply_trace(v, LAM, **trace), x), device, repeats)
                scan = synchronised_median(forward_backward(lambda v: apply_trace(v, LAM, method="scan", **trace), x),
                                           device, repeats)
                with torch.no_grad():
                    exact = x64 @ traces._dense_weights(length, 0, kappa, style, form, EPS, torch.float64,
                                                        torch.device(device)).T
                    scale = exact.abs().max()
                    error_auto = ((apply_trace(x.detach(), LAM, **trace).double() - exact).abs().max() / scale).item()
                    error_scan = ((apply_trace(x.detach(), LAM, method="scan", **trace).double() - exact).abs().max()
                                  / scale).item()
                traces._dense_weights.cache_clear()
                del matrix, exact
                path = "dense" if traces.uses_dense(x, style, form) else "O(T)"
                print(f"{dtype_name:9} {style + '/' + form:16} {f'{batch}×{length}':>9} {dense * 1e3:9.3f} "
                      f"{auto * 1e3:8.3f} {auto / dense:11.2f} {scan * 1e3:8.3f} {scan / dense:11.2f} {path:>9} "
                      f"{error_auto:17.1e} {error_scan:9.1e}", flush=True)
                rows.append({"dtype": dtype_name, "style": style, "form": form, "batch": batch, "length": length,
                             "dense_ms": dense * 1e3, "auto_ms": auto * 1e3, "scan_ms": scan * 1e3, "auto_path": path,
                             "error_auto": error_auto, "error_scan": error_scan})
        del x64
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def report_crossovers(rows: list[dict]) -> None:
    """Per form, style and dtype: the shortest measured T from which the O(T) operator beats the dense
    product at every longer T, against traces.DENSE_BELOW; and the worst dispatched ratio."""
    from grpo_lambda import traces

    print(f"\n{'style/form':16} {'dtype':9} {'O(T) faster from T':>19} {'DENSE_BELOW':>12} {'worst auto÷dense':>17}")
    for style, form in GPU_CASES:
        for dtype_name in GPU_DTYPES:
            mine = sorted((row for row in rows if (row["style"], row["form"], row["dtype"]) == (style, form, dtype_name)),
                          key=lambda row: row["length"])
            if not mine:
                continue
            faster = [row["length"] for index, row in enumerate(mine)
                      if all(later["scan_ms"] < later["dense_ms"] for later in mine[index:])]
            crossover = str(faster[0]) if faster else f"> {mine[-1]['length']}"
            worst = max(row["auto_ms"] / row["dense_ms"] for row in mine)
            print(f"{style + '/' + form:16} {dtype_name:9} {crossover:>19} {traces.DENSE_BELOW[form, style]:12d} "
                  f"{worst:17.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where to time (default: %(default)s; cuda: the GPU table of the docstring)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--skip-long", action="store_true", help=f"skip the T = {LONG_LENGTH} rows")
    parser.add_argument("--quick", action="store_true", help="GPU: T = 256, 4096, 32768 only")
    parser.add_argument("--repeats", type=int, default=20, help="GPU: timed calls per entry (default: %(default)s)")
    parser.add_argument("--json", metavar="FILE", help="GPU: also write the table's rows as JSON")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --device cuda: run the GPU table's code on the CPU, T ≤ 1024, the GPU's dispatch "
                             "forced (checks the script where there is no GPU; the times mean nothing)")
    parser.add_argument("--long-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda":
        device, lengths = "cuda", (256, 4096, 32768) if args.quick else GPU_LENGTHS
        if args.dry_run:
            from grpo_lambda import traces

            device, lengths, args.repeats = "cpu", (256, 1024), 2
            traces.DENSE_DEVICES = ("cpu", "cuda")
        else:
            require_cuda()
        name = torch.cuda.get_device_name() if device == "cuda" else "the CPU (dry run)"
        print(f"apply_trace vs the dense product x @ Wᵀ (W prebuilt) on {name}, "
              f"forward + backward, λ = {LAM}, ε = {EPS}, median of {args.repeats}, torch {torch.__version__}")
        rows = compare_on_device(device, lengths, GPU_DTYPES, args.repeats)
        report_crossovers(rows)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(rows, handle, indent=1)
        return
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
