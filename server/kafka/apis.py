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


#: The API keys the listener names; the others appear only in ``SUPPORTED``.
SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36

SUPPORTED: dict[int, ApiRange] = {
    api.key: api
    for api in (
        ApiRange(0, "Produce", 3, 13, ordered=True),
        ApiRange(1, "Fetch", 4, 18),
        ApiRange(2, "ListOffsets", 1, 11),
        ApiRange(3, "Metadata", 0, 13),
        ApiRange(10, "FindCoordinator", 0, 6),
        ApiRange(API_VERSIONS, "ApiVersions", 0, 4),
        ApiRange(SASL_HANDSHAKE, "SaslHandshake", 0, 1, ordered=True),
        ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, ordered=True),
        ApiRange(22, "InitProducerId", 0, 4, ordered=True),
        ApiRange(8, "OffsetCommit", 2, 10, ordered=True),
        ApiRange(9, "OffsetFetch", 1, 10),
        ApiRange(11, "JoinGroup", 0, 9, ordered=True),
        ApiRange(12, "Heartbeat", 0, 4, ordered=True),
        ApiRange(13, "LeaveGroup", 0, 5, ordered=True),
        ApiRange(14, "SyncGroup", 0, 5, ordered=True),
        ApiRange(15, "DescribeGroups", 0, 6),
        ApiRange(16, "ListGroups", 0, 5),
        ApiRange(42, "DeleteGroups", 0, 2, ordered=True),
        ApiRange(19, "CreateTopics", 2, 7, ordered=True),
        ApiRange(20, "DeleteTopics", 1, 6, ordered=True),
        ApiRange(37, "CreatePartitions", 0, 3, ordered=True),
        ApiRange(32, "DescribeConfigs", 1, 4),
        ApiRange(33, "AlterConfigs", 0, 2, ordered=True),
        ApiRange(44, "IncrementalAlterConfigs", 0, 1, ordered=True),
        ApiRange(60, "DescribeCluster", 0, 2),
        ApiRange(21, "DeleteRecords", 0, 2, ordered=True),
        ApiRange(23, "OffsetForLeaderEpoch", 2, 4),
        ApiRange(35, "DescribeLogDirs", 1, 5),
        ApiRange(75, "DescribeTopicPartitions", 0, 0),
        ApiRange(43, "ElectLeaders", 0, 2, ordered=True),
        ApiRange(46, "ListPartitionReassignments", 0, 0),
        ApiRange(45, "AlterPartitionReassignments", 0, 1, ordered=True),
        ApiRange(47, "OffsetDelete", 0, 0, ordered=True),
        ApiRange(61, "DescribeProducers", 0, 0),
        ApiRange(29, "DescribeAcls", 1, 3),
        ApiRange(30, "CreateAcls", 1, 3, ordered=True),
        ApiRange(31, "DeleteAcls", 1, 3, ordered=True),
        ApiRange(50, "DescribeUserScramCredentials", 0, 0),
        ApiRange(51, "AlterUserScramCredentials", 0, 0, ordered=True),
        ApiRange(48, "DescribeClientQuotas", 0, 1),
        ApiRange(49, "AlterClientQuotas", 0, 1, ordered=True),
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
