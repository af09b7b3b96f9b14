"""Topics on a real root (local directory and the S3-protocol server)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lakelog import Catalog, Record
from lakelog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from lakelog.groups.offsets_store import OffsetsStore
from tests.fixtures.roots import RootSpec


def _objects(root: RootSpec) -> list[str]:
    storage = root.open()
    return sorted(i.path for i in storage.walk_files("_meta")) + sorted(
        i.path for i in storage.walk_files("topics")
    )


def test_create_list_describe(catalog: Catalog) -> None:
    catalog.create_topic("orders", 3, {"cleanup.policy": "compact", "retention.ms": "1000"})
    catalog.create_topic("clicks")
    assert catalog.list_topics() == ["clicks", "orders"]
    described = catalog.describe_topic("orders")
    assert described.num_partitions == 3
    assert [p.high_watermark for p in described.partitions] == [0, 0, 0]
    assert described.config.get("cleanup.policy") == "compact"
    assert described.config.get("retention.ms") == 1000
    assert described.config.get("delete.retention.ms") == 86_400_000
    sources = {c["name"]: c["source"] for c in described.config.describe()}
    assert sources["retention.ms"] == "TOPIC_CONFIG"
    assert sources["segment.bytes"] == "DEFAULT_CONFIG"


def test_topic_visible_to_another_client(make_catalog: Callable[..., Catalog]) -> None:
    first, second = make_catalog(), make_catalog()
    first.create_topic("shared", 2)
    first.topic("shared").append([Record(b"v", partition=1)])
    described = second.describe_topic("shared")
    assert described.partitions[1].high_watermark == 1


def test_duplicate_topic_is_refused(make_catalog: Callable[..., Catalog], root: RootSpec) -> None:
    first, second = make_catalog(), make_catalog()
    first.create_topic("t", 1)
    before = _objects(root)
    with pytest.raises(TopicAlreadyExistsError):
        second.create_topic("t", 5)
    assert _objects(root) == before
    assert first.describe_topic("t").num_partitions == 1


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("../x", InvalidTopicError),
        ("", InvalidTopicError),
        ("a" * 250, InvalidTopicError),
        (".", InvalidTopicError),
        ("..", InvalidTopicError),
        ("a/b", InvalidTopicError),
        ("spaces are bad", InvalidTopicError),
    ],
)
def test_invalid_names_change_nothing(
    catalog: Catalog, root: RootSpec, name: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        catalog.create_topic(name, 1)
    assert _objects(root) == []
    with pytest.raises(error):
        catalog.topic(name)


@pytest.mark.parametrize(
    ("partitions", "configs", "replication", "error"),
    [
        (0, {}, None, InvalidPartitionsError),
        (-3, {}, None, InvalidPartitionsError),
        (1, {"cleanup.policy": "shred"}, None, InvalidConfigError),
        (1, {"retention.ms": "soon"}, None, InvalidConfigError),
        (1, {"no.such.config": "1"}, None, InvalidConfigError),
        (1, {"min.cleanable.dirty.ratio": "1.5"}, None, InvalidConfigError),
        (1, {}, 0, InvalidReplicationFactorError),
    ],
)
def test_invalid_create_changes_nothing(
    catalog: Catalog,
    root: RootSpec,
    partitions: int,
    configs: dict[str, str],
    replication: int | None,
    error: type[Exception],
) -> None:
    with pytest.raises(error) as info:
        catalog.create_topic("t", partitions, configs, replication_factor=replication)
    assert str(info.value)
    assert _objects(root) == []


def test_alter_configs(make_catalog: Callable[..., Catalog]) -> None:
    catalog, other = make_catalog(), make_catalog()
    catalog.create_topic("t", 1, {"retention.ms": "5000"})
    catalog.alter_topic_configs("t", {"cleanup.policy": "compact,delete"}, ["retention.ms"])
    config = other.describe_topic("t").config
    assert config.cleanup_policy == {"compact", "delete"}
    assert config.get("retention.ms") == 604_800_000
    version = catalog.describe_topic("t").version
    with pytest.raises(InvalidConfigError):
        catalog.alter_topic_configs("t", {"retention.bytes": "-7"})
    assert catalog.describe_topic("t").version == version


def test_partitions_grow_never_shrink(catalog: Catalog) -> None:
    catalog.create_topic("t", 2)
    log = catalog.topic("t")
    log.append([Record(b"a", partition=0), Record(b"b", partition=1)])
    assert catalog.create_partitions("t", 4) == 4
    log.append([Record(b"c", partition=3)])
    described = catalog.describe_topic("t")
    assert [p.high_watermark for p in described.partitions] == [1, 1, 0, 1]
    for bad in (4, 3):
        with pytest.raises(InvalidPartitionsError):
            catalog.create_partitions("t", bad)
    assert catalog.describe_topic("t").num_partitions == 4


def test_delete_then_recreate_starts_empty(make_catalog: Callable[..., Catalog]) -> None:
    catalog, other = make_catalog(pointer_max_age_s=0.0), make_catalog(pointer_max_age_s=0.0)
    catalog.create_topic("t", 1)
    catalog.topic("t").append([Record(b"old")])
    other.topic("t")
    catalog.delete_topic("t")
    assert catalog.list_topics() == []
    with pytest.raises(UnknownTopicOrPartitionError):
        other.topic("t")
    with pytest.raises(UnknownTopicOrPartitionError):
        catalog.delete_topic("t")
    catalog.create_topic("t", 1)
    assert other.topic("t").high_watermark(0) == 0


def test_unknown_topic(catalog: Catalog) -> None:
    with pytest.raises(UnknownTopicOrPartitionError) as info:
        catalog.describe_topic("missing")
    assert info.value.code == 3
    assert "missing" in info.value.message


def test_internal_topic_cannot_be_deleted(catalog: Catalog) -> None:
    OffsetsStore(catalog, num_partitions=1).table(create=True)  # its owner creates it
    with pytest.raises(InvalidTopicError, match="internal topic"):
        catalog.delete_topic("__consumer_offsets")
    assert "__consumer_offsets" in catalog.list_topics()
