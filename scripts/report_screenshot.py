"""The report's first screen as a picture: the Snakemake report of a published run (its tables rebuilt from
docs/<run>/raw, every figure and the headline drawn from them; no training), shown by headless Chromium in a
1400 × 900 viewport and written as a PNG (grpo_lambda.report_screen).

    python scripts/report_screenshot.py [--raw docs/default-run/raw] [--out docs/report-first-screen.png]

Needs Debian's chromium on PATH. Commit what it writes after a change to the report's front page.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", default=str(ROOT / "docs" / "default-run" / "raw"),
                        help="a published run's raw files (default: %(default)s)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "report-first-screen.png"),
                        help="the PNG to write (default: %(default)s)")
    args = parser.parse_args(argv)
    from grpo_lambda import report_screen

    if report_screen.chromium() is None:
        print("report_screenshot: no chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as workdir:
        report_screen.published_tree(args.raw, Path(workdir) / "results", every_figure=True)
        made = report_screen.write_report(ROOT / "Snakefile", workdir, Path(args.raw) / "config.yaml")
        if made.returncode != 0:
            print(made.stderr[-3000:], file=sys.stderr)
            return 1
        seen = report_screen.first_screen(Path(workdir) / "results" / "report.html", screenshot=args.out)
    print(f"{args.out}: the first {seen['width']} × {seen['height']} pixels of the report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
