"""``--master``: a Spark suite's figures from another master, printed beside local[2]'s."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import parse_args
from benchmarks.common import Report, Result
from benchmarks.masters import side_by_side


def test_master_is_for_the_spark_suites_only(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["compaction", "connector", "--master", "spark://h:7077"])
    assert args.master == "spark://h:7077"
    assert parse_args(["log"]).master is None
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["compaction", "log", "--master", "spark://h:7077"])
    assert exit_info.value.code == 2
    assert "--master applies to the Spark suites (compaction, connector), not to log" in (
        capsys.readouterr().err
    )


def test_every_figure_of_both_runs_is_in_one_table() -> None:
    local = Report("compaction")
    local.add(Result("compact", "1M/100k", "rate", 100_000.0, "records/s", {"parquet": 200_000.0}))
    remote = [
        {
            "benchmark": "compact",
            "variant": "1M/100k",
            "metric": "rate",
            "unit": "records/s",
            "value": 150_000.0,
            "baselines": {"parquet": 100_000.0},
        },
        {  # a figure only the remote run has is shown too, with no local value
            "benchmark": "compact",
            "variant": "3M/100k",
            "metric": "rate",
            "unit": "records/s",
            "value": 90_000.0,
            "baselines": {},
        },
    ]
    table = side_by_side(local, remote, "spark://h:7077")
    lines = table.splitlines()
    assert lines[0] == (
        "== suite compaction: spark://h:7077 beside local[2] (ratio = spark://h:7077 / local[2])"
    )
    rows = [line.split() for line in lines[3:]]
    assert rows == [
        ["compact", "1M/100k", "rate", "[records/s]", "lakelog", "100,000", "150,000", "1.50x"],
        ["compact", "1M/100k", "rate", "[records/s]", "parquet", "200,000", "100,000", "0.50x"],
        ["compact", "3M/100k", "rate", "[records/s]", "lakelog", "-", "90,000", "-"],
    ]
