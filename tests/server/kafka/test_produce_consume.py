"""Unmodified Kafka clients produce to and consume from a real broker (local root and S3).

Each client library runs the same steps (``clients.py``): keyed and keyless
records with headers in every compression, consumed back from the earliest
offset; the records are the same rows HTTP fetch returns, and keyed ones sit
in Kafka's murmur2 partition. Offsets for times, and records produced over
HTTP consumed by the Kafka client, complete the round trip.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from lakelog.partitioner import partition_for_key
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.clients import CLIENTS, COMPRESSIONS, Message, kafka_client

PARTITIONS = 3
PER_COMPRESSION = 30


def create_topic(broker: BrokerProcess, name: str, partitions: int = PARTITIONS) -> None:
    response = httpx.post(
        f"{broker.url}/v1/topics", json={"name": name, "partitions": partitions}, timeout=60
    )
    assert response.status_code == 201, response.text


def http_records(broker: BrokerProcess, topic: str, partition: int) -> list[dict[str, object]]:
    response = httpx.get(
        f"{broker.url}/v1/topics/{topic}/partitions/{partition}/records",
        params={"offset": 0, "max_records": 10_000, "value_format": "base64"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    records: list[dict[str, object]] = response.json()["records"]
    return records


def messages(tag: str, n: int) -> list[Message]:
    """Every other record keyed; headers on most, a null value (tombstone) on one."""
    out = []
    for i in range(n):
        key = f"{tag}-key-{i}".encode() if i % 2 else None
        value = None if i == 3 else f"{tag}-value-{i}".encode() * (1 + i % 5)
        headers = () if i % 3 == 0 else (("source", tag.encode()), ("n", str(i).encode()))
        out.append(Message(key, value, headers))
    return out


@pytest.mark.parametrize("client_name", CLIENTS)
def test_client_produces_every_compression_and_consumes_from_earliest(
    client_name: str, root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    assert broker.kafka is not None
    client = kafka_client(client_name)
    topic = "orders"
    create_topic(broker, topic)

    sent: dict[tuple[int, int], Message] = {}
    for compression in COMPRESSIONS:
        batch = messages(compression, PER_COMPRESSION)
        delivered = client.produce(broker.kafka, topic, batch, compression)
        for message, where in zip(batch, delivered, strict=True):
            if message.key is not None:
                assert where.partition == partition_for_key(message.key, PARTITIONS)
            assert (where.partition, where.offset) not in sent, "an offset was given twice"
            sent[(where.partition, where.offset)] = message

    got = client.consume(broker.kafka, topic, range(PARTITIONS), len(sent), timeout_s=60)
    consumed = {(m.partition, m.offset): m.body for m in got}
    assert consumed == {where: m.body for where, m in sent.items()}

    for partition in range(PARTITIONS):
        over_http = http_records(broker, topic, partition)
        offsets = [r["offset"] for r in over_http]
        assert offsets == sorted(o for p, o in sent if p == partition), "offsets are dense"
        for record in over_http:
            message = sent[(partition, int(str(record["offset"])))]
            value = record["value"]
            assert (None if value is None else base64.b64decode(str(value))) == message.value


@pytest.mark.parametrize("client_name", CLIENTS)
def test_http_records_consumed_over_kafka_and_offsets_for_times(
    client_name: str,
    tmp_path_factory: pytest.TempPathFactory,
    start_broker: Callable[..., BrokerProcess],
) -> None:
    broker = start_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))
    assert broker.kafka is not None
    client = kafka_client(client_name)
    create_topic(broker, "clicks", partitions=1)
    body = {
        "records": [
            {
                "key": f"k{i}",
                "value": f"v{i}",
                "timestamp_ms": 1_700_000_000_000 + i * 1000,
                "headers": [{"key": "via", "value": "http"}],
                "partition": 0,
            }
            for i in range(10)
        ]
    }
    response = httpx.post(f"{broker.url}/v1/topics/clicks/records", json=body, timeout=60)
    assert response.status_code == 200, response.text

    got = client.consume(broker.kafka, "clicks", [0], 10, timeout_s=60)
    assert [(m.offset, m.key, m.value, m.headers) for m in got] == [
        (i, f"k{i}".encode(), f"v{i}".encode(), (("via", b"http"),)) for i in range(10)
    ]
    assert [m.timestamp_ms for m in got] == [1_700_000_000_000 + i * 1000 for i in range(10)]

    assert client.offsets_for_time(broker.kafka, "clicks", 0, 1_700_000_004_500) == 5
    assert client.offsets_for_time(broker.kafka, "clicks", 0, 1_700_000_000_000) == 0
    # After the last record: no offset (Kafka answers -1), which each client shows as None.
    assert client.offsets_for_time(broker.kafka, "clicks", 0, 1_800_000_000_000) is None


def test_admin_list_offsets_answers_every_offset_spec(
    tmp_path_factory: pytest.TempPathFactory, start_broker: Callable[..., BrokerProcess]
) -> None:
    """confluent-kafka's AdminClient.list_offsets with each OffsetSpec, on records whose
    timestamps do not grow with their offsets."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    broker = start_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))
    assert broker.kafka is not None
    create_topic(broker, "stamps", partitions=1)
    stamps = [1_000, 5_000, 3_000, 5_000, 2_000]
    body = {
        "records": [
            {"value": f"v{i}", "timestamp_ms": t, "partition": 0} for i, t in enumerate(stamps)
        ]
    }
    response = httpx.post(f"{broker.url}/v1/topics/stamps/records", json=body, timeout=60)
    assert response.status_code == 200, response.text
    admin = AdminClient({"bootstrap.servers": broker.kafka})
    tp = TopicPartition("stamps", 0)

    def listed(spec: Any) -> tuple[int, int]:
        (found,) = admin.list_offsets({tp: spec}, request_timeout=30).values()
        info = found.result(timeout=30)
        return int(info.offset), int(info.timestamp)

    specs: Any = OffsetSpec  # untyped in confluent-kafka
    assert listed(specs.earliest())[0] == 0
    assert listed(specs.latest())[0] == 5
    assert listed(specs.max_timestamp()) == (1, 5_000), "the first of the largest"
    assert listed(specs.for_timestamp(2_500)) == (1, 5_000)
    assert listed(specs.for_timestamp(6_000)) == (-1, -1)
