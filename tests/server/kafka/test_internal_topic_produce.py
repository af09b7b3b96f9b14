"""A client producing to ``__consumer_offsets`` is refused at once, on a new root too.

librdkafka holds a record for a topic that Metadata calls unknown until its
delivery timeout runs out (five minutes by default), so the refusal must not
depend on whether any group has committed yet: Metadata names the internal
topic on a root where it was never written, and Produce answers
INVALID_TOPIC_EXCEPTION. The HTTP API gives the same refusal (400, code 17)
before any group has created the topic, not "does not exist". The offsets
table takes no record from the client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka import KafkaError, Producer

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

OFFSETS_TOPIC = "__consumer_offsets"
#: Far beyond the refusal's round trip, far below librdkafka's delivery timeout.
REPORT_WAIT_S = 60.0
INVALID_TOPIC_EXCEPTION = 17


def test_produce_to_internal_topic_fails_fast_on_a_new_root(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root)
    assert broker.kafka is not None
    forged = {"records": [{"key": "forged", "value": "not an offset commit"}]}
    answer = httpx.post(f"{broker.url}/v1/topics/{OFFSETS_TOPIC}/records", json=forged, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error_code"] == INVALID_TOPIC_EXCEPTION, answer.text
    assert f"cannot append to internal topic {OFFSETS_TOPIC}" in answer.json()["message"]

    reports: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.kafka, "message.timeout.ms": 300_000})
    producer.produce(
        OFFSETS_TOPIC,
        key=b"forged",
        value=b"not an offset commit",
        on_delivery=lambda err, _msg: reports.append(err),
    )
    left = producer.flush(REPORT_WAIT_S)

    assert left == 0, "no delivery report: the producer is still waiting for the topic"
    (err,) = reports
    assert err is not None and err.code() == KafkaError.TOPIC_EXCEPTION, err

    described = httpx.get(f"{broker.url}/v1/topics/{OFFSETS_TOPIC}", timeout=60)
    assert described.status_code == 200, described.text
    ends = [p["high_watermark"] for p in described.json()["partitions"]]
    assert ends and set(ends) == {0}, "the offsets table took a client's record"
