"""The Kafka APIs lakelog's listener answers, and the versions of each.

Pure. The ranges are chosen so that librdkafka (confluent-kafka),
kafka-python 3 and aiokafka each negotiate their newest layout of every API
they use, within what kio's schemas cover (docs/kafka-protocol.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiRange:
    key: int
    name: str
    min_version: int
    max_version: int
    #: The API changes state (``ORDERED``).
    ordered: bool = False

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
INIT_PRODUCER_ID = 22
SASL_AUTHENTICATE = 36
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_CLUSTER = 60

SUPPORTED: dict[int, ApiRange] = {
    api.key: api
    for api in (
        ApiRange(PRODUCE, "Produce", 3, 9, ordered=True),
        ApiRange(FETCH, "Fetch", 4, 12),
        ApiRange(LIST_OFFSETS, "ListOffsets", 1, 11),
        ApiRange(METADATA, "Metadata", 0, 12),
        ApiRange(FIND_COORDINATOR, "FindCoordinator", 0, 4),
        ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
        ApiRange(SASL_HANDSHAKE, "SaslHandshake", 0, 1, ordered=True),
        ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, ordered=True),
        ApiRange(INIT_PRODUCER_ID, "InitProducerId", 0, 4, ordered=True),
        ApiRange(OFFSET_COMMIT, "OffsetCommit", 2, 8, ordered=True),
        ApiRange(OFFSET_FETCH, "OffsetFetch", 1, 7),
        ApiRange(JOIN_GROUP, "JoinGroup", 0, 9, ordered=True),
        ApiRange(HEARTBEAT, "Heartbeat", 0, 4, ordered=True),
        ApiRange(LEAVE_GROUP, "LeaveGroup", 0, 5, ordered=True),
        ApiRange(SYNC_GROUP, "SyncGroup", 0, 5, ordered=True),
        ApiRange(DESCRIBE_GROUPS, "DescribeGroups", 0, 5),
        ApiRange(LIST_GROUPS, "ListGroups", 0, 4),
        ApiRange(DELETE_GROUPS, "DeleteGroups", 0, 2, ordered=True),
        ApiRange(CREATE_TOPICS, "CreateTopics", 2, 7, ordered=True),
        ApiRange(DELETE_TOPICS, "DeleteTopics", 1, 5, ordered=True),
        ApiRange(CREATE_PARTITIONS, "CreatePartitions", 0, 3, ordered=True),
        ApiRange(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4),
        ApiRange(ALTER_CONFIGS, "AlterConfigs", 0, 2, ordered=True),
        ApiRange(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, ordered=True),
        ApiRange(DESCRIBE_CLUSTER, "DescribeCluster", 0, 1),
    )
}


def api_keys() -> list[dict[str, int]]:
    """The supported versions of every API, as ApiVersions answers them."""
    return [
        {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
        for api in SUPPORTED.values()
    ]


#: The APIs that change state: the connection's next request waits until such a request's
#: effect is queued (docs/kafka-protocol.md, "One connection's requests, in order").
ORDERED = frozenset(api.key for api in SUPPORTED.values() if api.ordered)

#: What a SASL listener answers before the client has authenticated (Kafka's rule).
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
