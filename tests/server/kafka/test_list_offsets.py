"""ListOffsets' special timestamps, each answered from the version Kafka introduced it in.

Raw frames, so that each version and timestamp is sent exactly as a client
of that version would: -1 and -2 always, -3 (largest timestamp) from v7,
-4 (earliest local) from v8, -5 (latest tiered) from v9, -6 (earliest
pending upload) from v11; any other negative timestamp, or one too new for
the version, gets UNSUPPORTED_VERSION on its partition and nothing else.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from kio.index import load_request_schema

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.test_produce_consume import create_topic

TOPIC = "stamps"
LIST_OFFSETS = 2
UNSUPPORTED_VERSION = 35
STAMPS = [1_000, 5_000, 3_000, 5_000, 2_000]


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory,
    start_module_broker: Callable[..., BrokerProcess],
) -> BrokerProcess:
    started = start_module_broker(RootSpec(str(tmp_path_factory.mktemp("root"))))
    create_topic(started, TOPIC, partitions=1)
    records = [{"value": f"v{i}", "timestamp_ms": t, "partition": 0} for i, t in enumerate(STAMPS)]
    response = httpx.post(
        f"{started.url}/v1/topics/{TOPIC}/records", json={"records": records}, timeout=60
    )
    assert response.status_code == 200, response.text
    return started


def list_offset(broker: BrokerProcess, version: int, timestamp: int) -> tuple[int, int, int]:
    """(error code, offset, timestamp) of partition 0 in a ListOffsets of ``version``."""
    assert broker.kafka is not None
    schema: Any = load_request_schema(LIST_OFFSETS, version)
    module = __import__(schema.__module__, fromlist=["ListOffsetsTopic", "ListOffsetsPartition"])
    fields: dict[str, Any] = {"replica_id": -1}
    if version >= 2:
        fields["isolation_level"] = 0
    if version >= 10:
        fields["timeout"] = datetime.timedelta(seconds=30)
    request = schema(
        topics=(
            module.ListOffsetsTopic(
                name=TOPIC,
                partitions=(module.ListOffsetsPartition(partition_index=0, timestamp=timestamp),),
            ),
        ),
        **fields,
    )
    conn = RawConnection(broker.kafka)
    try:
        answer = conn.request(LIST_OFFSETS, version, request)
    finally:
        conn.close()
    (part,) = answer.topics[0].partitions
    return int(part.error_code), int(part.offset), int(part.timestamp)


@pytest.mark.parametrize(
    ("version", "timestamp", "expected"),
    [
        (1, -2, (0, 0, -1)),
        (6, -1, (0, 5, -1)),
        (7, -3, (0, 1, 5_000)),
        (8, -4, (0, 0, -1)),
        (9, -5, (0, -1, -1)),
        (11, -6, (0, -1, -1)),
        (11, 2_500, (0, 1, 5_000)),
        (11, 9_000, (0, -1, -1)),
    ],
)
def test_each_special_timestamp_from_its_version(
    broker: BrokerProcess, version: int, timestamp: int, expected: tuple[int, int, int]
) -> None:
    assert list_offset(broker, version, timestamp) == expected


@pytest.mark.parametrize(("version", "timestamp"), [(6, -3), (7, -4), (8, -5), (10, -6), (11, -7)])
def test_a_timestamp_the_version_lacks_is_unsupported(
    broker: BrokerProcess, version: int, timestamp: int
) -> None:
    assert list_offset(broker, version, timestamp) == (UNSUPPORTED_VERSION, -1, -1)
