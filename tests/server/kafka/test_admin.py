"""Kafka's admin APIs with unmodified admin clients against a real broker subprocess.

confluent-kafka's ``AdminClient`` (librdkafka), kafka-python's
``KafkaAdminClient`` and aiokafka's ``AIOKafkaAdminClient`` create, list,
describe, alter, grow and delete topics over the Kafka listener of one
broker per storage root (a local directory, then the S3-protocol server);
what they change is checked over the broker's HTTP API. Each client is
wrapped in a small adapter that answers ``None`` for success or the Kafka
error code and message the broker gave.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import KafkaAdminClient
from kio.schema.create_topics.v5.response import CreateTopicsResponse
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig
from kio.static.primitive import i8

from lakelog.errors import InvalidConfigError
from lakelog.topic_config import TopicConfig
from server.kafka.build import build
from server.kafka.cluster import node_id
from server.kafka.config_entries import LONG, PASSWORD, broker_entries, topic_entries
from server.kafka.handlers.configs import APPEND, SUBTRACT, resolve_changes
from server.settings import BrokerSettings
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.fixtures.snapshots import RootSnapshots

T = TypeVar("T")

TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
INVALID_TOPIC, TOPIC_EXISTS, INVALID_PARTITIONS, INVALID_CONFIG = 17, 36, 37, 40
UNKNOWN_TOPIC = 3
INVALID_REQUEST = 42
INVALID_REPLICA_ASSIGNMENT = 39
TIMEOUT_S = 30


@dataclass(frozen=True)
class Refused:
    code: int
    #: The broker's message; None where the client's version of the API carries none.
    message: str | None


class Admin(Protocol):
    #: Whether the client can ask for a validate-only config change.
    alters_validate_only: bool

    def create(
        self, name: str, partitions: int, configs: dict[str, str], validate_only: bool = False
    ) -> Refused | None: ...

    def partitions(self) -> dict[str, int]:
        """Every topic and its partition count, from Metadata."""
        ...

    def configs(self, topic: str) -> dict[str, tuple[str, int]]:
        """Every config of a topic: (value, Kafka config source)."""
        ...

    def set_config(
        self, topic: str, name: str, value: str, validate_only: bool = False
    ) -> Refused | None: ...

    def add_partitions(
        self, topic: str, total: int, validate_only: bool = False
    ) -> Refused | None: ...

    def delete(self, topic: str) -> Refused | None: ...

    def close(self) -> None: ...


class ConfluentAdmin:
    alters_validate_only = True

    def __init__(self, bootstrap: str) -> None:
        self.client = AdminClient({"bootstrap.servers": bootstrap})

    @staticmethod
    def _outcome(future: Any) -> Refused | None:
        try:
            future.result(timeout=TIMEOUT_S)
        except KafkaException as exc:
            error = exc.args[0]
            text = error.str()
            # librdkafka names the code itself when the broker's answer has no message.
            return Refused(error.code(), None if text.startswith("Broker: ") else text)
        return None

    def create(
        self, name: str, partitions: int, configs: dict[str, str], validate_only: bool = False
    ) -> Refused | None:
        new = NewTopic(name, partitions, config=configs)
        (future,) = self.client.create_topics([new], validate_only=validate_only).values()
        return self._outcome(future)

    def partitions(self) -> dict[str, int]:
        topics = self.client.list_topics(timeout=TIMEOUT_S).topics
        return {name: len(t.partitions) for name, t in topics.items()}

    def configs(self, topic: str) -> dict[str, tuple[str, int]]:
        (future,) = self.client.describe_configs(
            [ConfigResource(ResourceType.TOPIC, topic)]
        ).values()
        entries = future.result(timeout=TIMEOUT_S)
        return {name: (e.value, int(e.source)) for name, e in entries.items()}

    def set_config(
        self, topic: str, name: str, value: str, validate_only: bool = False
    ) -> Refused | None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        (future,) = self.client.incremental_alter_configs(
            [resource], validate_only=validate_only
        ).values()
        return self._outcome(future)

    def add_partitions(self, topic: str, total: int, validate_only: bool = False) -> Refused | None:
        (future,) = self.client.create_partitions(
            [NewPartitions(topic, total)], validate_only=validate_only
        ).values()
        return self._outcome(future)

    def delete(self, topic: str) -> Refused | None:
        (future,) = self.client.delete_topics([topic], operation_timeout=TIMEOUT_S).values()
        return self._outcome(future)

    def close(self) -> None:
        """librdkafka's admin client has nothing to close."""


class KafkaPythonAdmin:
    alters_validate_only = True

    def __init__(self, bootstrap: str) -> None:
        self.client = KafkaAdminClient(bootstrap_servers=bootstrap)

    @staticmethod
    def _outcome(result: dict[str, Any]) -> Refused | None:
        if result["error_code"] == 0:
            return None
        return Refused(result["error_code"], result["error_message"])

    def create(
        self, name: str, partitions: int, configs: dict[str, str], validate_only: bool = False
    ) -> Refused | None:
        answer = self.client.create_topics(
            {name: {"num_partitions": partitions, "configs": configs}},
            validate_only=validate_only,
            raise_errors=False,
        )
        return self._outcome(answer["topics"][0])

    def partitions(self) -> dict[str, int]:
        return {t["name"]: len(t["partitions"]) for t in self.client.describe_topics()}

    def configs(self, topic: str) -> dict[str, tuple[str, int]]:
        answer = self.client.describe_configs(
            [KpConfigResource("TOPIC", topic)], config_filter="all"
        )
        sources = {"DYNAMIC_TOPIC_CONFIG": TOPIC_CONFIG, "DEFAULT_CONFIG": DEFAULT_CONFIG}
        return {
            name: (entry["value"], sources[entry["config_source"]])
            for name, entry in answer["topic"][topic].items()
        }

    def set_config(
        self, topic: str, name: str, value: str, validate_only: bool = False
    ) -> Refused | None:
        resource = KpConfigResource("TOPIC", topic, configs={name: ("SET", value)})
        answer = self.client.alter_configs(
            [resource], validate_only=validate_only, incremental=True
        )
        result = answer["topic"][topic]
        if result == "OK":
            return None
        # kafka-python reports a refusal as text: "[Error <code>] <ErrorName>: <message>".
        found = re.match(r"\[Error (-?\d+)\]", result)
        assert found is not None, result
        return Refused(int(found.group(1)), result)

    def add_partitions(self, topic: str, total: int, validate_only: bool = False) -> Refused | None:
        answer = self.client.create_partitions(
            {topic: total}, validate_only=validate_only, raise_errors=False
        )
        result = answer.results[0]
        return None if result.error_code == 0 else Refused(result.error_code, result.error_message)

    def delete(self, topic: str) -> Refused | None:
        return self._outcome(self.client.delete_topics([topic], raise_errors=False)["topics"][0])

    def close(self) -> None:
        self.client.close()


class AiokafkaAdmin:
    """aiokafka's admin client on its own event loop; it alters configs with AlterConfigs."""

    alters_validate_only = False

    def __init__(self, bootstrap: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = self._run(self._started(bootstrap))

    @staticmethod
    async def _started(bootstrap: str) -> AIOKafkaAdminClient:
        client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await client.start()
        return client

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def create(
        self, name: str, partitions: int, configs: dict[str, str], validate_only: bool = False
    ) -> Refused | None:
        new = AioNewTopic(name, partitions, 1, topic_configs=configs)
        answer = self._run(self.client.create_topics([new], validate_only=validate_only))
        (_, code, message) = answer.topic_errors[0]
        return None if code == 0 else Refused(code, message)

    def partitions(self) -> dict[str, int]:
        return {t["topic"]: len(t["partitions"]) for t in self._run(self.client.describe_topics())}

    def _entries(self, topic: str) -> list[Any]:
        resource = AioConfigResource(AioResourceType.TOPIC, topic)
        (answer,) = self._run(self.client.describe_configs([resource]))
        (found,) = answer.resources
        return list(found[4])

    def configs(self, topic: str) -> dict[str, tuple[str, int]]:
        return {e[0]: (e[1], e[3]) for e in self._entries(topic)}

    def set_config(
        self, topic: str, name: str, value: str, validate_only: bool = False
    ) -> Refused | None:
        assert not validate_only, "aiokafka's alter_configs has no validate_only"
        # AlterConfigs replaces a topic's overrides: keep the others, as its users must.
        kept = {e[0]: e[1] for e in self._entries(topic) if e[3] == TOPIC_CONFIG}
        resource = AioConfigResource(AioResourceType.TOPIC, topic, {**kept, name: value})
        (answer,) = self._run(self.client.alter_configs([resource]))
        (code, message, _, _) = answer.resources[0]
        return None if code == 0 else Refused(code, message)

    def add_partitions(self, topic: str, total: int, validate_only: bool = False) -> Refused | None:
        try:
            self._run(
                self.client.create_partitions(
                    {topic: AioNewPartitions(total)}, validate_only=validate_only
                )
            )
        except Exception as exc:  # aiokafka raises the error class of the broker's code
            return Refused(int(exc.errno), str(exc))  # type: ignore[attr-defined]
        return None

    def delete(self, topic: str) -> Refused | None:
        answer = self._run(self.client.delete_topics([topic]))
        (_, code) = answer.topic_error_codes[0]
        return None if code == 0 else Refused(code, None)

    def close(self) -> None:
        self._run(self.client.close())
        self.loop.close()


CLIENTS: dict[str, Callable[[str], Admin]] = {
    "confluent": ConfluentAdmin,
    "kafka-python": KafkaPythonAdmin,
    "aiokafka": AiokafkaAdmin,
}


@pytest.fixture(scope="module")
def broker(
    module_root: RootSpec, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    """One broker for the module's tests (each test names its own topics)."""
    return start_module_broker(module_root)


@pytest.fixture(params=list(CLIENTS))
def admin(request: pytest.FixtureRequest, broker: BrokerProcess) -> Iterator[Admin]:
    assert broker.kafka is not None
    client = CLIENTS[request.param](broker.kafka)
    yield client
    client.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def http_topic(broker: BrokerProcess, topic: str) -> dict[str, Any] | None:
    """The topic as the broker's HTTP API describes it; None if it does not exist."""
    response = httpx.get(f"{broker.url}/v1/topics/{topic}", timeout=TIMEOUT_S)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    described: dict[str, Any] = response.json()
    return described


def http_config(broker: BrokerProcess, topic: str, name: str) -> tuple[str, str]:
    described = http_topic(broker, topic)
    assert described is not None
    (entry,) = [c for c in described["configs"] if c["name"] == name]
    return entry["value"], entry["source"]


def test_topic_lifecycle(admin: Admin, broker: BrokerProcess) -> None:
    topic = unique("life")
    overrides = {"retention.ms": "60000"}

    assert admin.create(topic, 2, overrides, validate_only=True) is None
    assert http_topic(broker, topic) is None, "validate_only created the topic"

    assert admin.create(topic, 2, overrides) is None
    assert admin.partitions()[topic] == 2
    configs = admin.configs(topic)
    assert configs["retention.ms"] == ("60000", TOPIC_CONFIG)
    assert configs["cleanup.policy"] == ("delete", DEFAULT_CONFIG)

    if admin.alters_validate_only:
        assert admin.set_config(topic, "retention.ms", "120000", validate_only=True) is None
        assert http_config(broker, topic, "retention.ms") == ("60000", "TOPIC_CONFIG")
    assert admin.set_config(topic, "retention.ms", "120000") is None
    assert http_config(broker, topic, "retention.ms") == ("120000", "TOPIC_CONFIG")
    assert admin.configs(topic)["retention.ms"] == ("120000", TOPIC_CONFIG)

    assert admin.add_partitions(topic, 3, validate_only=True) is None
    assert len((http_topic(broker, topic) or {})["partitions"]) == 2
    assert admin.add_partitions(topic, 3) is None
    assert len((http_topic(broker, topic) or {})["partitions"]) == 3
    assert admin.partitions()[topic] == 3

    assert admin.delete(topic) is None
    assert http_topic(broker, topic) is None
    assert topic not in admin.partitions()


def test_kafka_topic_configs_lakelog_does_not_act_on_are_stored_and_described(
    admin: Admin, broker: BrokerProcess
) -> None:
    topic = unique("kafka-configs")
    overrides = {
        "compression.type": "lz4",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "message.timestamp.after.max.ms": "60000",
    }
    assert admin.create(topic, 1, overrides) is None
    configs = admin.configs(topic)
    for name, value in overrides.items():
        assert configs[name] == (value, TOPIC_CONFIG), name
    assert configs["flush.ms"] == (str(2**63 - 1), DEFAULT_CONFIG)
    assert http_config(broker, topic, "compression.type") == ("lz4", "TOPIC_CONFIG")
    assert admin.set_config(topic, "compression.type", "zstd") is None
    assert admin.configs(topic)["compression.type"] == ("zstd", TOPIC_CONFIG)
    refused = admin.set_config(topic, "compression.type", "brotli")
    assert refused is not None and refused.code == INVALID_CONFIG
    assert refused.message is not None and "compression.type" in refused.message
    assert http_config(broker, topic, "compression.type") == ("zstd", "TOPIC_CONFIG")


def test_bad_input_is_refused_and_changes_nothing(
    admin: Admin, broker: BrokerProcess, module_root: RootSpec
) -> None:
    topic = unique("kept")
    created = httpx.post(
        f"{broker.url}/v1/topics",
        json={"name": topic, "partitions": 2, "configs": {"retention.ms": "60000"}},
        timeout=TIMEOUT_S,
    )
    assert created.status_code == 201, created.text
    snapshots = RootSnapshots(module_root)
    stored = snapshots.take()

    bad_name = admin.create("no spaces allowed", 1, {})
    assert bad_name is not None and bad_name.code == INVALID_TOPIC
    assert bad_name.message is not None and "illegal" in bad_name.message

    other = unique("refused")
    bad_value = admin.create(other, 1, {"retention.ms": "soon"})
    assert bad_value is not None and bad_value.code == INVALID_CONFIG
    assert bad_value.message is not None and "retention.ms" in bad_value.message
    assert http_topic(broker, other) is None

    taken = admin.create(topic, 4, {})
    assert taken is not None and taken.code == TOPIC_EXISTS

    bad_alter = admin.set_config(topic, "retention.ms", "-5")
    assert bad_alter is not None and bad_alter.code == INVALID_CONFIG
    assert bad_alter.message is not None and "retention.ms" in bad_alter.message

    fewer = admin.add_partitions(topic, 1)
    assert fewer is not None and fewer.code == INVALID_PARTITIONS
    assert fewer.message is not None and "only be added" in fewer.message

    missing = unique("missing")
    gone = admin.delete(missing)
    assert gone is not None and gone.code == UNKNOWN_TOPIC
    assert gone.message is None or missing in gone.message

    internal = admin.create("__consumer_offsets", 1, {})
    assert internal is not None and internal.code in (INVALID_TOPIC, TOPIC_EXISTS)
    kept_internal = admin.delete("__consumer_offsets")
    assert kept_internal is not None and kept_internal.code == INVALID_TOPIC

    assert snapshots.take() == stored


def test_creation_answer_and_replica_assignments(broker: BrokerProcess) -> None:
    """CreateTopics v5+ answers the created topic; replica assignments must name live
    brokers."""
    assert broker.kafka is not None
    client = KafkaAdminClient(bootstrap_servers=broker.kafka)
    try:
        topic = unique("answered")
        answer = client.create_topics(
            {topic: {"replication_factor": 3, "configs": {"cleanup.policy": "compact"}}},
            raise_errors=False,
        )
        (created,) = answer["topics"]
        assert (created["error_code"], created["num_partitions"]) == (0, 1)
        assert created["replication_factor"] == 1, "one replica per partition, whatever was asked"
        assert created["configs"]["cleanup.policy"]["value"] == "compact"
        assert created["configs"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        described = http_topic(broker, topic)
        assert described is not None
        assert uuid.UUID(created["topic_id"]) == uuid.UUID(described["topic_id"])

        # Assignments naming live brokers are accepted (and have no effect), as Kafka
        # accepts them; an unknown broker is INVALID_REPLICA_ASSIGNMENT, nothing created.
        node = client.describe_cluster()["brokers"][0]["broker_id"]
        placed, stray = unique("placed"), unique("stray")
        answer = client.create_topics({placed: {"assignments": {0: [node], 1: [node]}}})
        (made,) = answer["topics"]
        assert (made["error_code"], made["num_partitions"]) == (0, 2)
        answer = client.create_topics({stray: {"assignments": {0: [node + 1]}}}, raise_errors=False)
        (refused,) = answer["topics"]
        assert refused["error_code"] == INVALID_REPLICA_ASSIGNMENT
        assert "unknown broker" in refused["error_message"]
        assert http_topic(broker, stray) is None

        answer = client.create_partitions(
            {placed: {"count": 3, "assignments": [[node + 1]]}}, raise_errors=False
        )
        (grown,) = answer.results
        assert grown.error_code == INVALID_REPLICA_ASSIGNMENT
        assert len((http_topic(broker, placed) or {})["partitions"]) == 2
        answer = client.create_partitions({placed: {"count": 3, "assignments": [[node]]}})
        assert answer.results[0].error_code == 0
        assert len((http_topic(broker, placed) or {})["partitions"]) == 3
    finally:
        client.close()


def test_cluster_and_broker_settings(broker: BrokerProcess) -> None:
    """DescribeCluster names this broker; DescribeConfigs of it answers its settings, read-only."""
    assert broker.kafka is not None
    client = AdminClient({"bootstrap.servers": broker.kafka})
    cluster = client.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    broker_id = httpx.get(f"{broker.url}/healthz", timeout=TIMEOUT_S).json()["broker_id"]
    (node,) = cluster.nodes
    assert (cluster.cluster_id, cluster.controller.id) == ("lakelog", node_id(broker_id))
    assert f"{node.host}:{node.port}" == broker.kafka

    resource = ConfigResource(ResourceType.BROKER, str(node.id))
    (future,) = client.describe_configs([resource]).values()
    settings = future.result(timeout=TIMEOUT_S)
    assert settings["broker_id"].value == broker_id
    assert settings["broker_id"].is_read_only
    assert settings["cluster_id"].source == DEFAULT_CONFIG
    assert settings["kafka_listeners"].source == STATIC_BROKER_CONFIG

    kafka_python = KafkaAdminClient(bootstrap_servers=broker.kafka)
    try:
        described = kafka_python.describe_cluster()
    finally:
        kafka_python.close()
    assert described["controller_id"] == node.id
    assert [b["broker_id"] for b in described["brokers"]] == [node.id]


def test_broker_configs_answer_kafkas_names(broker: BrokerProcess, module_root: RootSpec) -> None:
    """Kafka's tools read a broker's listeners, log dirs and topic defaults by Kafka's names;
    a topic config's default is the synonym of its broker-wide name."""
    assert broker.kafka is not None
    client = AdminClient({"bootstrap.servers": broker.kafka})
    (node,) = client.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S).nodes
    (future,) = client.describe_configs(
        [ConfigResource(ResourceType.BROKER, str(node.id))]
    ).values()
    configs = {name: entry.value for name, entry in future.result(timeout=TIMEOUT_S).items()}
    assert configs["advertised.listeners"] == f"PLAINTEXT://{broker.kafka}"
    assert configs["listeners"] == f"PLAINTEXT://{broker.kafka}"
    assert configs["node.id"] == str(node.id)
    assert configs["log.dirs"] == module_root.url
    assert configs["log.retention.ms"] == str(7 * 24 * 3600 * 1000)
    assert configs["log.cleanup.policy"] == "delete"
    assert configs["message.max.bytes"] == TopicConfig().text("max.message.bytes")
    assert (configs["num.partitions"], configs["auto.create.topics.enable"]) == ("1", "true")
    assert configs["default.replication.factor"] == "1"
    assert configs["broker_id"]  # lakelog's own names are answered beside Kafka's

    topic = unique("synonyms")
    (created,) = client.create_topics([NewTopic(topic, 1)]).values()
    created.result(timeout=TIMEOUT_S)
    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    retention = future.result(timeout=TIMEOUT_S)["retention.ms"]
    assert [(s.name, s.source) for s in retention.synonyms.values()] == [
        ("log.retention.ms", DEFAULT_CONFIG)
    ]

    kafka_python = KafkaAdminClient(bootstrap_servers=broker.kafka)
    try:
        answer = kafka_python.describe_configs(
            [KpConfigResource("BROKER", str(node.id))], config_filter="all"
        )
    finally:
        kafka_python.close()
    (entries,) = answer["broker"].values()
    assert entries["advertised.listeners"]["value"] == f"PLAINTEXT://{broker.kafka}"


def _change(name: str, operation: int, value: str | None) -> AlterableConfig:
    return AlterableConfig(name=name, config_operation=i8(operation), value=value)


def test_append_and_subtract_work_on_the_current_list() -> None:
    current = TopicConfig({"cleanup.policy": "delete"})
    assert resolve_changes(current, [_change("cleanup.policy", APPEND, "compact")]) == (
        {"cleanup.policy": "delete,compact"},
        [],
    )
    both = TopicConfig({"cleanup.policy": "compact,delete"})
    assert resolve_changes(both, [_change("cleanup.policy", SUBTRACT, "delete")]) == (
        {"cleanup.policy": "compact"},
        [],
    )
    with pytest.raises(InvalidConfigError, match="list configs only"):
        resolve_changes(current, [_change("retention.ms", APPEND, "5")])
    with pytest.raises(InvalidConfigError, match="empty"):
        resolve_changes(current, [_change("cleanup.policy", SUBTRACT, "delete")])


def test_nullable_lists_of_entities_are_built_or_left_null() -> None:
    """CreateTopics v5+ ``configs`` is a nullable array: dicts become entities, None stays."""
    config = {"name": "retention.ms", "value": "1", "read_only": False, "is_sensitive": False}
    topic = {"name": "t", "error_code": 0, "error_message": None, "num_partitions": 1}
    built = build(CreateTopicsResponse, throttle_time=0, topics=[{**topic, "configs": [config]}])
    configs = built.topics[0].configs
    assert configs is not None
    (entry,) = configs
    assert (type(entry).__name__, entry.value) == ("CreatableTopicConfigs", "1")
    refused = build(CreateTopicsResponse, throttle_time=0, topics=[{**topic, "configs": None}])
    assert refused.topics[0].configs is None


def test_config_entries_carry_synonyms_documentation_and_hide_secrets() -> None:
    config = TopicConfig({"retention.ms": "5000"})
    (entry,) = topic_entries(config, {"retention.ms"}, synonyms=True, documentation=True)
    assert (entry["value"], entry["config_source"], entry["config_type"]) == ("5000", 1, LONG)
    assert [(s["value"], s["source"]) for s in entry["synonyms"]] == [
        ("5000", TOPIC_CONFIG),
        (str(7 * 24 * 3600 * 1000), DEFAULT_CONFIG),
    ]
    assert entry["documentation"]
    assert topic_entries(config, set()) == []

    settings = BrokerSettings(jwt_secret="not to be shown", cluster_id="c1")
    entries = {e["name"]: e for e in broker_entries(settings)}
    secret = entries["jwt_secret"]
    assert (secret["value"], secret["is_sensitive"], secret["config_type"]) == (
        None,
        True,
        PASSWORD,
    )
    assert (entries["cluster_id"]["value"], entries["cluster_id"]["config_source"]) == (
        "c1",
        STATIC_BROKER_CONFIG,
    )
    assert all(e["read_only"] for e in entries.values())
