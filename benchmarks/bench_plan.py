"""Time to plan the paper grid (`snakemake -n --configfile config/paper.yaml`), goal <= 10 s.

Prints the wall time of the dry run against the time of a bare `snakemake --version` in the same
run (the interpreter and Snakemake start-up that any plan pays), and the planned job counts.
"""

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(*args):
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stderr[-2000:])
    return time.perf_counter() - start, result.stdout


def main():
    baseline, _ = timed("--version")
    plan, out = timed("-n", "--quiet", "rules", "--configfile", "config/paper.yaml")
    counts = [line for line in out.splitlines() if line.split()[:1] and line.split()[0] in ("train", "evaluate", "total")]
    print("\n".join(counts))
    print(f"snakemake --version: {baseline:.1f} s; plan of the paper grid: {plan:.1f} s "
          f"(ratio {plan / baseline:.1f}x; goal <= 10 s: {'met' if plan <= 10 else 'NOT met'})")


if __name__ == "__main__":
    main()
