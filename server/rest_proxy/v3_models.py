"""Resource bodies of the Kafka REST Proxy v3 administration API (topics, groups, brokers, ACLs).

Every resource has a ``kind``, ``metadata.self`` (its own URL) and
``metadata.resource_name`` (a CRN such as ``crn:///kafka=lakelog/topic=t``);
related resources are ``{"related": url}`` links, and every link a lakelog
resource carries is served by the broker. Collections are ``{kind, metadata,
data}`` with ``metadata.next`` absent (everything fits in one page). Fields
that have no value are left out of the JSON rather than sent as null.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from lakelog.catalog import MAX_PARTITIONS
from server.rest_proxy.records_models import V3Error, error_docs

#: The errors every v3 administration route documents (``error_code`` is the HTTP status).
V3_ERRORS = error_docs(
    V3Error,
    (400, "Malformed request, invalid name, config or value"),
    (401, "No or bad credentials"),
    (403, "Not authorized by the ACLs"),
    (404, "Unknown cluster, topic, partition, group, broker or config"),
    (500, "Unexpected server error"),
    (503, "Storage or coordinator unavailable: retry"),
)


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class V3Relationship(_Out):
    related: str = Field(description="URL of the related resource or collection")


class V3ResourceMetadata(_Out):
    self_: str = Field(alias="self", description="URL of this resource")
    resource_name: str | None = Field(None, description="CRN, e.g. crn:///kafka=lakelog/topic=t")


class V3CollectionMetadata(_Out):
    self_: str = Field(alias="self", description="URL of this collection")
    next: str | None = Field(None, description="Absent: a collection is always one page")


class V3Resource(_Out):
    kind: str
    metadata: V3ResourceMetadata
    cluster_id: str


class V3Collection(_Out):
    kind: str
    metadata: V3CollectionMetadata


def kind_of(model: type[BaseModel]) -> str:
    """A resource's or collection's ``kind``: ``KafkaTopic`` for ``V3Topic``."""
    return "Kafka" + model.__name__.removeprefix("V3")


def collection_of(item: type[V3Resource], description: str | None = None) -> type[V3Collection]:
    """The collection of ``item`` resources, named after it (``V3TopicList``)."""
    data: Any = list[item]  # type: ignore[valid-type]
    if description is not None:
        data = Annotated[data, Field(description=description)]
    return create_model(f"{item.__name__}List", __base__=V3Collection, data=(data, ...))


# -- topics, partitions, replicas -----------------------------------------------------


class V3Topic(V3Resource):
    topic_name: str
    is_internal: bool = Field(description="True for __consumer_offsets")
    replication_factor: int = Field(description="1: the storage root keeps the copies")
    partitions_count: int
    partitions: V3Relationship
    configs: V3Relationship
    partition_reassignments: V3Relationship


class V3Partition(V3Resource):
    topic_name: str
    partition_id: int
    leader: V3Relationship
    replicas: V3Relationship
    reassignment: V3Relationship


class V3Replica(V3Resource):
    topic_name: str
    partition_id: int
    broker_id: int
    is_leader: bool
    is_in_sync: bool
    broker: V3Relationship


class V3Reassignment(V3Resource):
    topic_name: str
    partition_id: int
    adding_replicas: list[int]
    removing_replicas: list[int]
    replicas: V3Relationship


# -- configs ------------------------------------------------------------------------------


class V3ConfigSynonym(_Out):
    name: str
    value: str | None = None
    source: str


class V3Config(V3Resource):
    name: str
    value: str | None = Field(None, description="Absent for sensitive configs")
    is_default: bool
    is_read_only: bool
    is_sensitive: bool
    source: str = Field(description="DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG")
    synonyms: list[V3ConfigSynonym]


class V3TopicConfig(V3Config):
    topic_name: str


class V3BrokerConfig(V3Config):
    broker_id: int


class V3ClusterConfig(V3Config):
    config_type: str


# -- brokers --------------------------------------------------------------------------------


class V3Broker(V3Resource):
    broker_id: int = Field(description="The broker id if it is a number, else a number from it")
    host: str | None = None
    port: int | None = None
    rack: str | None = None
    configs: V3Relationship
    partition_replicas: V3Relationship


# -- consumer groups --------------------------------------------------------------------------


class V3ConsumerGroup(V3Resource):
    consumer_group_id: str
    is_simple: bool = Field(description="True for a group that only stores committed offsets")
    partition_assignor: str = Field(description="The group's protocol; empty when it has none")
    state: str
    type: str
    is_mixed_consumer_group: bool
    coordinator: V3Relationship
    consumers: V3Relationship
    lag_summary: V3Relationship


class V3Consumer(V3Resource):
    consumer_group_id: str
    consumer_id: str
    instance_id: str | None = None
    client_id: str
    assignments: V3Relationship


class V3ConsumerAssignment(V3Resource):
    consumer_group_id: str
    consumer_id: str
    topic_name: str
    partition_id: int
    partition: V3Relationship
    lag: V3Relationship


class V3ConsumerLag(V3Resource):
    consumer_group_id: str
    topic_name: str
    partition_id: int
    current_offset: int = Field(description="The committed offset")
    log_end_offset: int
    lag: int
    consumer_id: str = Field(description="Empty when no member owns the partition")
    instance_id: str | None = None
    client_id: str


class V3ConsumerGroupLagSummary(V3Resource):
    consumer_group_id: str
    max_lag_consumer_id: str
    max_lag_instance_id: str | None = None
    max_lag_client_id: str
    max_lag_topic_name: str
    max_lag_partition_id: int
    max_lag: int
    total_lag: int
    max_lag_consumer: V3Relationship
    max_lag_partition: V3Relationship


# -- ACLs --------------------------------------------------------------------------------------


class V3Acl(V3Resource):
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


class V3DeletedAcls(_Out):
    data: list[V3Acl]


# -- collections ------------------------------------------------------------------------------

V3TopicList = collection_of(V3Topic)
V3PartitionList = collection_of(V3Partition)
V3ReplicaList = collection_of(V3Replica)
V3ReassignmentList = collection_of(V3Reassignment, "Always empty: replicas never move")
V3TopicConfigList = collection_of(V3TopicConfig)
V3BrokerConfigList = collection_of(V3BrokerConfig)
V3ClusterConfigList = collection_of(V3ClusterConfig, "Always empty: no dynamic broker configs")
V3BrokerList = collection_of(V3Broker)
V3ConsumerGroupList = collection_of(V3ConsumerGroup)
V3ConsumerList = collection_of(V3Consumer)
V3ConsumerAssignmentList = collection_of(V3ConsumerAssignment)
V3ConsumerLagList = collection_of(V3ConsumerLag)
V3AclList = collection_of(V3Acl)


# -- requests ----------------------------------------------------------------------------------


class V3ConfigValue(_In):
    name: str = Field(min_length=1)
    value: str | None = None


class V3CreateTopic(_In):
    topic_name: str
    partitions_count: int | None = Field(None, ge=1, le=MAX_PARTITIONS, description="Default 1")
    replication_factor: int | None = Field(
        None, description="Accepted (1 or -1 and up): the storage root keeps the copies"
    )
    replicas_assignments: dict[str, Any] | None = Field(
        None, description="Refused: lakelog places no replicas on brokers"
    )
    configs: list[V3ConfigValue] = Field(default_factory=list)
    validate_only: bool = False


class V3UpdatePartitionCount(_In):
    partitions_count: int = Field(ge=1, le=MAX_PARTITIONS)


class V3UpdateConfig(_In):
    value: str | None = Field(None, description="null resets the config to its default")


class V3AlterConfigEntry(_In):
    name: str = Field(min_length=1)
    value: str | None = None
    operation: str | None = Field(None, description="SET (the default) or DELETE")


class V3AlterConfigs(_In):
    data: list[V3AlterConfigEntry]
    validate_only: bool = False


class V3CreateAcl(_In):
    resource_type: str = Field(description="TOPIC, GROUP, CLUSTER or SUBJECT")
    resource_name: str = Field(description="Name, prefix, or * (LITERAL); kafka-cluster")
    pattern_type: str = Field(description="LITERAL or PREFIXED")
    principal: str = Field(description="Kafka principal, e.g. User:alice or User:*")
    host: str
    operation: str = Field(description="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE or ALL")
    permission: str = Field(description="ALLOW or DENY")


class V3CreateAcls(_In):
    data: list[V3CreateAcl] = Field(min_length=1)
