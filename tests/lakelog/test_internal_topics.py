"""Only the offsets store appends to ``__consumer_offsets``; every other way in is refused.

Kafka refuses client produce to internal topics with INVALID_TOPIC_EXCEPTION.
lakelog refuses it in ``TopicLog`` itself, so the library's public append, a
batch prepared by hand and committed with ``append_prepared``, an exactly-once
append and a staged group commit are all refused with nothing stored, while
the offsets store keeps committing (local + S3).
"""

from __future__ import annotations

import time

import pytest

from lakelog.catalog import Catalog
from lakelog.errors import InternalTopicError, InvalidTopicError, LakelogError
from lakelog.groups.codec import OFFSETS_TOPIC, CommittedOffset
from lakelog.groups.offsets_store import OffsetsStore
from lakelog.internal_topics import InternalWriter, issue_writer
from lakelog.partitioner import make_keyless_partitioner
from lakelog.produce import prepare_batch
from lakelog.records import Record
from lakelog.structs import TopicPartition
from tests.fixtures import PROJECT
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots

REFUSAL = "cannot append to internal topic __consumer_offsets"


def refused(error: pytest.ExceptionInfo[LakelogError]) -> None:
    assert isinstance(error.value, InvalidTopicError)
    assert (error.value.code, error.value.name) == (17, "INVALID_TOPIC_EXCEPTION")
    assert REFUSAL in error.value.message
    assert not error.value.retriable


def test_every_public_append_to_the_offsets_table_is_refused(
    root: RootSpec, catalog: Catalog
) -> None:
    catalog.create_topic("t", 2)
    store = OffsetsStore(catalog, num_partitions=3)
    store.commit("g1", {TopicPartition("t", 0): CommittedOffset(4, "", 1)})
    snapshots = RootSnapshots(root)
    before = snapshots.take()
    offsets = catalog.topic(OFFSETS_TOPIC)
    forged = [Record(b"x", key=b"g1")]

    with pytest.raises(LakelogError) as error:
        offsets.append(forged)
    refused(error)
    with pytest.raises(LakelogError) as error:
        offsets.append_once(forged, "spark-query.q", 0)
    refused(error)
    with pytest.raises(LakelogError) as error:
        offsets.prepare(forged)
    refused(error)
    # A batch prepared for an ordinary topic, or by hand, carries no writer: refused at stage,
    # the step every append (and a broker's group commit) goes through.
    elsewhere = catalog.topic("t").prepare([Record(b"x", key=b"g1", partition=0)])
    by_hand = prepare_batch(
        forged,
        topic="t",
        num_partitions=3,
        config=offsets.config,
        keyless=make_keyless_partitioner("sticky"),
        now_ms=int(time.time() * 1000),
    )
    for batch in (elsewhere, by_hand):
        with pytest.raises(LakelogError) as error:
            offsets.append_prepared([batch])
        refused(error)
        with pytest.raises(LakelogError) as error:
            offsets.appender.stage([batch])
        refused(error)
    assert isinstance(error.value, InternalTopicError)
    assert snapshots.take() == before, "a refused append changed stored files"

    # The owner's own writes go on.
    store.commit("g1", {TopicPartition("t", 0): CommittedOffset(9, "", 2)})
    assert store.fetch("g1")[TopicPartition("t", 0)].offset == 9


def test_a_client_cannot_create_an_internal_topic(root: RootSpec, catalog: Catalog) -> None:
    snapshots = RootSnapshots(root)
    before = snapshots.take()
    with pytest.raises(InvalidTopicError, match="internal topic"):
        catalog.create_topic(OFFSETS_TOPIC, 1)
    assert snapshots.take() == before
    OffsetsStore(catalog, num_partitions=2).table(create=True)
    with pytest.raises(LakelogError, match="already exists"):
        catalog.create_topic(OFFSETS_TOPIC, 1)


def test_the_internal_writer_is_held_by_the_offsets_store_alone() -> None:
    with pytest.raises(TypeError):
        InternalWriter(OFFSETS_TOPIC, object())
    with pytest.raises(ValueError, match="not an internal topic"):
        issue_writer("orders")
    holders = sorted(
        str(path.relative_to(PROJECT))
        for package in ("lakelog", "server", "compaction", "spark_connector")
        for path in (PROJECT / package).rglob("*.py")
        if "issue_writer(" in path.read_text()
    )
    assert holders == ["lakelog/groups/offsets_store.py", "lakelog/internal_topics.py"]
