"""One module per group of Kafka APIs; ``HANDLERS`` maps each API's name to its handler."""

from __future__ import annotations

from server.kafka.context import Handler
from server.kafka.handlers import (
    api_versions,
    configs,
    coordinators,
    describe_cluster,
    fetch,
    groups,
    list_offsets,
    metadata,
    produce,
    producer_ids,
    sasl,
    topics,
)

HANDLERS: dict[str, Handler] = {
    "ApiVersions": api_versions.api_versions,
    "SaslHandshake": sasl.sasl_handshake,
    "SaslAuthenticate": sasl.sasl_authenticate,
    "Metadata": metadata.metadata,
    "Produce": produce.produce,
    "Fetch": fetch.fetch,
    "ListOffsets": list_offsets.list_offsets,
    "FindCoordinator": coordinators.find_coordinator,
    "InitProducerId": producer_ids.init_producer_id,
    "OffsetCommit": groups.offset_commit,
    "OffsetFetch": groups.offset_fetch,
    "JoinGroup": groups.join_group,
    "Heartbeat": groups.heartbeat,
    "LeaveGroup": groups.leave_group,
    "SyncGroup": groups.sync_group,
    "DescribeGroups": groups.describe_groups,
    "ListGroups": groups.list_groups,
    "DeleteGroups": groups.delete_groups,
    "CreateTopics": topics.create_topics,
    "DeleteTopics": topics.delete_topics,
    "CreatePartitions": topics.create_partitions,
    "DescribeConfigs": configs.describe_configs,
    "AlterConfigs": configs.alter_configs,
    "IncrementalAlterConfigs": configs.incremental_alter_configs,
    "DescribeCluster": describe_cluster.describe_cluster,
}
