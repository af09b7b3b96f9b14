"""One module per group of Kafka APIs; ``HANDLERS`` maps each supported API key to its handler."""

from __future__ import annotations

from server.kafka import apis
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

HANDLERS: dict[int, Handler] = {
    apis.API_VERSIONS: api_versions.api_versions,
    apis.SASL_HANDSHAKE: sasl.sasl_handshake,
    apis.SASL_AUTHENTICATE: sasl.sasl_authenticate,
    apis.METADATA: metadata.metadata,
    apis.PRODUCE: produce.produce,
    apis.FETCH: fetch.fetch,
    apis.LIST_OFFSETS: list_offsets.list_offsets,
    apis.FIND_COORDINATOR: coordinators.find_coordinator,
    apis.INIT_PRODUCER_ID: producer_ids.init_producer_id,
    apis.OFFSET_COMMIT: groups.offset_commit,
    apis.OFFSET_FETCH: groups.offset_fetch,
    apis.JOIN_GROUP: groups.join_group,
    apis.HEARTBEAT: groups.heartbeat,
    apis.LEAVE_GROUP: groups.leave_group,
    apis.SYNC_GROUP: groups.sync_group,
    apis.DESCRIBE_GROUPS: groups.describe_groups,
    apis.LIST_GROUPS: groups.list_groups,
    apis.DELETE_GROUPS: groups.delete_groups,
    apis.CREATE_TOPICS: topics.create_topics,
    apis.DELETE_TOPICS: topics.delete_topics,
    apis.CREATE_PARTITIONS: topics.create_partitions,
    apis.DESCRIBE_CONFIGS: configs.describe_configs,
    apis.ALTER_CONFIGS: configs.alter_configs,
    apis.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
    apis.DESCRIBE_CLUSTER: describe_cluster.describe_cluster,
}
