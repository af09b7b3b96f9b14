"""``lakelog.delete_records`` on real topic tables: the log start moves, durably, never back.

Each root (a local directory; the S3-protocol server in the full suite) holds
the new start in the table itself, so a second catalog, one that opens the
table from a checkpoint, and the fetch path all agree on it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakelog.catalog import Catalog
from lakelog.delete_records import delete_records
from lakelog.errors import OffsetOutOfRangeError, PolicyViolationError
from lakelog.records import Record


def test_the_new_start_may_cut_a_segment_and_every_reader_sees_it(
    make_catalog: Callable[..., Catalog],
) -> None:
    catalog = make_catalog(checkpoint_interval=2)
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    for batch in range(3):  # segments [0, 4), [4, 8), [8, 12) of partition 0
        log.append([Record(b"%d-%d" % (batch, i), partition=0) for i in range(4)])
    log.append([Record(b"other", partition=1)])

    version = delete_records(log, {0: 6})
    assert version is not None
    assert log.log_start_offset(0) == 6 and log.log_start_offset(1) == 0
    assert [s.base_offset for s in log.segments(0)] == [4, 8]
    with pytest.raises(OffsetOutOfRangeError, match=r"valid offsets are 6\.\.12"):
        log.read(0, 5)
    assert log.read(0, 6).records.column("offset").to_pylist() == [6, 7, 8, 9, 10, 11]
    assert delete_records(log, {0: 3}) is None  # never back, and nothing to commit

    log.wait_for_checkpoints()
    reopened = make_catalog().topic("t")
    assert reopened.log_start_offset(0) == 6
    assert delete_records(reopened, {0: -1, 1: -1}) is not None
    assert (reopened.log_start_offset(0), reopened.log_start_offset(1)) == (12, 1)
    assert reopened.segments(0) == [] and reopened.segments(1) == []
    assert reopened.read(0, 12).records.num_rows == 0


def test_a_bad_offset_or_policy_changes_nothing(make_catalog: Callable[..., Catalog]) -> None:
    catalog = make_catalog()
    catalog.create_topic("t", 1)
    catalog.create_topic("keys", 1, {"cleanup.policy": "compact"})
    log = catalog.topic("t")
    log.append([Record(b"x"), Record(b"y")])
    version = log.version
    with pytest.raises(OffsetOutOfRangeError, match="high watermark 2"):
        delete_records(log, {0: 3})
    with pytest.raises(OffsetOutOfRangeError):
        delete_records(log, {0: -2})
    with pytest.raises(PolicyViolationError, match=r"cleanup\.policy"):
        delete_records(catalog.topic("keys"), {0: 0})
    assert (log.version, log.log_start_offset(0)) == (version, 0)
