"""Publish a finished run into docs/<run>/ (see grpo_lambda.publish_run): its raw files, every table rebuilt
from them with this checkout's code, the figures, run.json, and the generated blocks of README.md and
docs/**/*.md named <run>/... .

    python scripts/publish_run.py CONFIG DOCS_DIR [--results DIR] [--spread DIR] [--partial]
    python scripts/publish_run.py CONFIG DOCS_DIR --from-raw

--from-raw rebuilds an already published run from its committed raw/ files (no results folder needed),
with CONFIG's report: section (grpo_lambda.publish_run.republish): how the committed runs are
republished after a change to the tables' code or the report options.

e.g. python scripts/publish_run.py config/compare.yaml docs/compare-run (the results folder is the
config's `results` unless --results names another; --spread copies a `grpo-lambda spread` folder's
spread.csv/md beside the run). Commit what it writes; tests/test_publish_run.py then checks that the
committed tables and blocks are what the raw files give.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="the study's config file (the one the run was made with)")
    parser.add_argument("docs_dir", help="the run's folder under docs/, e.g. docs/compare-run")
    parser.add_argument("--results", help="the run's results folder (default: the config's `results`)")
    parser.add_argument("--spread", help="a folder `grpo-lambda spread` wrote (spread.csv, spread.md)")
    parser.add_argument("--partial", action="store_true", help="publish although evaluation files are missing")
    parser.add_argument("--from-raw", action="store_true",
                        help="rebuild the published run from DOCS_DIR/raw (no results folder), with CONFIG's report:")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    from grpo_lambda.config import ConfigError
    from grpo_lambda.publish_run import check_published, publish, republish

    try:
        if args.from_raw:
            written = republish(args.config, args.docs_dir)
        else:
            written = publish(args.config, args.docs_dir, args.results, args.spread, args.partial)
    except (ConfigError, FileNotFoundError, ValueError) as error:
        print(f"publish_run: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    problems = check_published(Path(args.docs_dir))
    if problems:  # what was just written must rebuild from what was just written
        print("\n".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
