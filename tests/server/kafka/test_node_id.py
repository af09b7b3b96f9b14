"""A broker's Kafka node id is fixed by its configuration, as Kafka's ``node.id`` is.

Real broker subprocesses, asked with confluent-kafka's AdminClient (Metadata)
and over REST Proxy v3: the same configuration restarted after a SIGKILL keeps
its node id, a second broker of the same root and machine gets another, and
a numeric ``broker_id`` is the node id on both front ends.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from confluent_kafka.admin import AdminClient

from lakelog.testing.brokers import free_port, wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration

TIMEOUT_S = 30


def kafka_node_ids(bootstrap: str) -> set[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT_S)
    return set(metadata.brokers)


def rest_broker_ids(broker: BrokerProcess) -> set[int]:
    answer = httpx.get(f"{broker.url}/v3/clusters/lakelog/brokers", timeout=TIMEOUT_S)
    answer.raise_for_status()
    return {b["broker_id"] for b in answer.json()["data"]}


def test_node_id_survives_a_restart_of_the_same_configuration(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    port, kafka = free_port(), f"127.0.0.1:{free_port()}"
    settings = {"broker_session_timeout_ms": 60_000}
    first = start_broker(root, port=port, kafka_listeners=f"PLAINTEXT://{kafka}", **settings)
    (before,) = kafka_node_ids(kafka)
    first.kill()
    again = start_broker(root, port=port, kafka_listeners=f"PLAINTEXT://{kafka}", **settings)
    assert kafka_node_ids(kafka) == {before}
    # The dead incarnation's registry entry is this broker's own: no second broker appears.
    assert rest_broker_ids(again) == {before}

    other_kafka = f"127.0.0.1:{free_port()}"
    second = start_broker(root, kafka_listeners=f"PLAINTEXT://{other_kafka}", **settings)
    both = rest_broker_ids(second)
    assert len(both) == 2 and before in both
    # A broker learns of the others at its next registry heartbeat.
    wait_for(lambda: kafka_node_ids(other_kafka) == both, "Metadata to list both brokers", 30)


def test_numeric_broker_id_is_the_node_id_over_kafka_and_http(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, broker_id="7")
    assert broker.kafka is not None
    assert kafka_node_ids(broker.kafka) == {7}
    assert rest_broker_ids(broker) == {7}
