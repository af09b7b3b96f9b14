"""What a Kafka REST Proxy v3 client expects of each answer body, written down as data.

These are the facts the compatibility tests check (field names, which are
always present, their JSON types), as the REST Proxy's v3 API defines them,
recorded here so the tests need nothing outside the repository. Types:
``str``, ``int``, ``bool``; a trailing ``?`` admits null; ``link`` is a
``{"related": url}`` object, ``meta`` a resource's and ``list-meta`` a
collection's metadata; ``[Name]`` a list of the shape ``Name``, ``[int]`` a
list of integers, ``{Name}`` one nested ``Name``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Shape:
    required: dict[str, str]
    optional: dict[str, str] = field(default_factory=dict)


def resource(kind_fields: dict[str, str], optional: dict[str, str] | None = None) -> Shape:
    return Shape({"kind": "str", "metadata": "meta", **kind_fields}, optional or {})


def collection(item: str) -> Shape:
    return Shape({"kind": "str", "metadata": "list-meta", "data": f"[{item}]"})


CONFIG_FIELDS = {
    "cluster_id": "str",
    "name": "str",
    "is_default": "bool",
    "is_read_only": "bool",
    "is_sensitive": "bool",
    "source": "str",
    "synonyms": "[ConfigSynonym]",
}

SHAPES: dict[str, Shape] = {
    "Error": Shape({"error_code": "int", "message": "str?"}),
    "ProduceResponse": Shape(
        {"error_code": "int"},
        {
            "message": "str?",
            "cluster_id": "str",
            "topic_name": "str",
            "partition_id": "int",
            "offset": "int",
            "timestamp": "str?",
            "key": "{ProduceData}?",
            "value": "{ProduceData}?",
        },
    ),
    "ProduceData": Shape(
        {"type": "str", "size": "int"},
        {"subject": "str?", "schema_id": "int?", "schema_version": "int?"},
    ),
    "BatchResponse": Shape({}, {"successes": "[BatchSuccess]", "failures": "[BatchFailure]"}),
    "BatchSuccess": Shape(
        {"id": "str", "cluster_id": "str", "topic_name": "str", "partition_id": "int"},
        {"offset": "int", "timestamp": "str?", "key": "{ProduceData}?", "value": "{ProduceData}?"},
    ),
    "BatchFailure": Shape({"id": "str", "error_code": "int"}, {"message": "str?"}),
    "Cluster": resource(
        {
            "cluster_id": "str",
            "acls": "link",
            "brokers": "link",
            "broker_configs": "link",
            "consumer_groups": "link",
            "topics": "link",
            "partition_reassignments": "link",
        },
        {"controller": "link"},
    ),
    "ClusterList": collection("Cluster"),
    "Topic": resource(
        {
            "cluster_id": "str",
            "topic_name": "str",
            "is_internal": "bool",
            "replication_factor": "int",
            "partitions_count": "int",
            "partitions": "link",
            "configs": "link",
            "partition_reassignments": "link",
        },
        {"authorized_operations": "[str]"},
    ),
    "TopicList": collection("Topic"),
    "Partition": resource(
        {
            "cluster_id": "str",
            "topic_name": "str",
            "partition_id": "int",
            "replicas": "link",
            "reassignment": "link",
        },
        {"leader": "link"},
    ),
    "PartitionList": collection("Partition"),
    "Replica": resource(
        {
            "cluster_id": "str",
            "topic_name": "str",
            "partition_id": "int",
            "broker_id": "int",
            "is_leader": "bool",
            "is_in_sync": "bool",
            "broker": "link",
        }
    ),
    "ReplicaList": collection("Replica"),
    "Reassignment": resource(
        {
            "cluster_id": "str",
            "topic_name": "str",
            "partition_id": "int",
            "adding_replicas": "[int]",
            "removing_replicas": "[int]",
            "replicas": "link",
        }
    ),
    "ReassignmentList": collection("Reassignment"),
    "ConfigSynonym": Shape({"name": "str", "source": "str"}, {"value": "str?"}),
    "TopicConfig": resource({**CONFIG_FIELDS, "topic_name": "str"}, {"value": "str?"}),
    "TopicConfigList": collection("TopicConfig"),
    "BrokerConfig": resource({**CONFIG_FIELDS, "broker_id": "int"}, {"value": "str?"}),
    "BrokerConfigList": collection("BrokerConfig"),
    "ClusterConfig": resource({**CONFIG_FIELDS, "config_type": "str"}, {"value": "str?"}),
    "ClusterConfigList": collection("ClusterConfig"),
    "Broker": resource(
        {
            "cluster_id": "str",
            "broker_id": "int",
            "configs": "link",
            "partition_replicas": "link",
        },
        {"host": "str?", "port": "int?", "rack": "str?"},
    ),
    "BrokerList": collection("Broker"),
    "ConsumerGroup": resource(
        {
            "cluster_id": "str",
            "consumer_group_id": "str",
            "is_simple": "bool",
            "partition_assignor": "str",
            "state": "str",
            "type": "str",
            "is_mixed_consumer_group": "bool",
            "coordinator": "link",
            "consumers": "link",
            "lag_summary": "link",
        }
    ),
    "ConsumerGroupList": collection("ConsumerGroup"),
    "Consumer": resource(
        {
            "cluster_id": "str",
            "consumer_group_id": "str",
            "consumer_id": "str",
            "client_id": "str",
            "assignments": "link",
        },
        {"instance_id": "str?"},
    ),
    "ConsumerList": collection("Consumer"),
    "ConsumerAssignment": resource(
        {
            "cluster_id": "str",
            "consumer_group_id": "str",
            "consumer_id": "str",
            "topic_name": "str",
            "partition_id": "int",
            "partition": "link",
            "lag": "link",
        }
    ),
    "ConsumerAssignmentList": collection("ConsumerAssignment"),
    "ConsumerLag": resource(
        {
            "cluster_id": "str",
            "consumer_group_id": "str",
            "topic_name": "str",
            "partition_id": "int",
            "current_offset": "int",
            "log_end_offset": "int",
            "lag": "int",
            "consumer_id": "str",
            "client_id": "str",
        },
        {"instance_id": "str?"},
    ),
    "ConsumerLagList": collection("ConsumerLag"),
    "ConsumerGroupLagSummary": resource(
        {
            "cluster_id": "str",
            "consumer_group_id": "str",
            "max_lag_consumer_id": "str",
            "max_lag_client_id": "str",
            "max_lag_topic_name": "str",
            "max_lag_partition_id": "int",
            "max_lag": "int",
            "total_lag": "int",
            "max_lag_consumer": "link",
            "max_lag_partition": "link",
        },
        {"max_lag_instance_id": "str?"},
    ),
    "Acl": resource(
        {
            "cluster_id": "str",
            "resource_type": "str",
            "resource_name": "str",
            "pattern_type": "str",
            "principal": "str",
            "host": "str",
            "operation": "str",
            "permission": "str",
        }
    ),
    "AclList": collection("Acl"),
    "DeletedAcls": Shape({"data": "[Acl]"}),
}

#: The ``kind`` of each resource and collection shape.
KINDS = {
    "Cluster": "KafkaCluster",
    "ClusterList": "KafkaClusterList",
    "Topic": "KafkaTopic",
    "TopicList": "KafkaTopicList",
    "Partition": "KafkaPartition",
    "PartitionList": "KafkaPartitionList",
    "Replica": "KafkaReplica",
    "ReplicaList": "KafkaReplicaList",
    "ReassignmentList": "KafkaReassignmentList",
    "TopicConfig": "KafkaTopicConfig",
    "TopicConfigList": "KafkaTopicConfigList",
    "BrokerConfig": "KafkaBrokerConfig",
    "BrokerConfigList": "KafkaBrokerConfigList",
    "ClusterConfigList": "KafkaClusterConfigList",
    "Broker": "KafkaBroker",
    "BrokerList": "KafkaBrokerList",
    "ConsumerGroup": "KafkaConsumerGroup",
    "ConsumerGroupList": "KafkaConsumerGroupList",
    "Consumer": "KafkaConsumer",
    "ConsumerList": "KafkaConsumerList",
    "ConsumerAssignment": "KafkaConsumerAssignment",
    "ConsumerAssignmentList": "KafkaConsumerAssignmentList",
    "ConsumerLag": "KafkaConsumerLag",
    "ConsumerLagList": "KafkaConsumerLagList",
    "ConsumerGroupLagSummary": "KafkaConsumerGroupLagSummary",
    "Acl": "KafkaAcl",
    "AclList": "KafkaAclList",
}
SHAPE_OF_KIND = {kind: name for name, kind in KINDS.items()}

_SCALARS: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "bool": bool}


def _check_value(tag: str, value: Any, where: str) -> None:
    if tag.endswith("?"):
        if value is None:
            return
        tag = tag[:-1]
    if tag in _SCALARS:
        wanted = _SCALARS[tag]
        ok = isinstance(value, wanted) and not (tag == "int" and isinstance(value, bool))
        assert ok, f"{where}: {value!r} is not {tag}"
    elif tag == "link":
        assert isinstance(value, dict) and set(value) == {"related"}, f"{where}: {value!r}"
        assert isinstance(value["related"], str) and value["related"].startswith("http")
    elif tag in ("meta", "list-meta"):
        allowed = {"self", "resource_name"} if tag == "meta" else {"self", "next"}
        assert isinstance(value, dict) and "self" in value and set(value) <= allowed, where
        assert isinstance(value["self"], str) and value["self"].startswith("http"), where
    elif tag.startswith("["):
        assert isinstance(value, list), f"{where}: {value!r} is not a list"
        for i, item in enumerate(value):
            _check_value(tag[1:-1], item, f"{where}[{i}]")
    elif tag.startswith("{"):
        assert_shape(tag[1:-1], value, where)
    else:
        assert_shape(tag, value, where)


def assert_shape(name: str, body: Any, where: str = "") -> None:
    """``body`` has exactly the fields of the shape ``name``, each of its type."""
    where = where or name
    shape = SHAPES[name]
    assert isinstance(body, dict), f"{where}: {body!r} is not an object"
    missing = set(shape.required) - set(body)
    assert not missing, f"{where}: missing {sorted(missing)} in {body}"
    extra = set(body) - set(shape.required) - set(shape.optional)
    assert not extra, f"{where}: fields {sorted(extra)} are not part of {name}"
    for key, value in body.items():
        tag = shape.required.get(key) or shape.optional[key]
        _check_value(tag, value, f"{where}.{key}")
    if name in KINDS:
        assert body["kind"] == KINDS[name], f"{where}: kind {body['kind']!r}, not {KINDS[name]}"
