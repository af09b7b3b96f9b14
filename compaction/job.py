"""spark-submit entry point for the maintenance jobs.

    spark-submit --master yarn compaction/job.py --root s3://bucket/lakelog maintain
    python -m compaction.job --root /data/lakelog vacuum --grace-ms 0

The arguments are those of the ``lakelog`` maintenance commands (the same
parsers); ``--root`` and ``--master`` may also come before the command. The
session spark-submit created is used as it is (``compaction.spark_session``).
"""

from __future__ import annotations

import argparse
import os
import sys

# Run as a script (spark-submit compaction/job.py), Python puts this file's
# directory first on sys.path, where e.g. ``merge.py`` would shadow any
# top-level module of that name; the project root is what must be there.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path[0] = os.path.dirname(_HERE)

from compaction import cli  # noqa: E402
from lakelog.cli import run_command  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark-submit compaction/job.py",
        description="lakelog maintenance jobs on Spark (retention, compaction, merge, vacuum).",
    )
    cli.add_common_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
