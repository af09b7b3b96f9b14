"""One module per group of Kafka APIs; ``HANDLERS`` maps each supported API key to its handler."""

from __future__ import annotations

from server.kafka import apis
from server.kafka.context import Handler
from server.kafka.handlers.api_versions import api_versions
from server.kafka.handlers.configs import (
    alter_configs,
    describe_configs,
    incremental_alter_configs,
)
from server.kafka.handlers.coordinators import find_coordinator
from server.kafka.handlers.describe_cluster import describe_cluster
from server.kafka.handlers.fetch import fetch
from server.kafka.handlers.groups import (
    delete_groups,
    describe_groups,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_fetch,
    sync_group,
)
from server.kafka.handlers.list_offsets import list_offsets
from server.kafka.handlers.metadata import metadata
from server.kafka.handlers.produce import produce
from server.kafka.handlers.producer_ids import init_producer_id
from server.kafka.handlers.sasl import sasl_authenticate, sasl_handshake
from server.kafka.handlers.topics import create_partitions, create_topics, delete_topics

HANDLERS: dict[int, Handler] = {
    apis.API_VERSIONS: api_versions,
    apis.SASL_HANDSHAKE: sasl_handshake,
    apis.SASL_AUTHENTICATE: sasl_authenticate,
    apis.METADATA: metadata,
    apis.PRODUCE: produce,
    apis.FETCH: fetch,
    apis.LIST_OFFSETS: list_offsets,
    apis.FIND_COORDINATOR: find_coordinator,
    apis.INIT_PRODUCER_ID: init_producer_id,
    apis.OFFSET_COMMIT: offset_commit,
    apis.OFFSET_FETCH: offset_fetch,
    apis.JOIN_GROUP: join_group,
    apis.HEARTBEAT: heartbeat,
    apis.LEAVE_GROUP: leave_group,
    apis.SYNC_GROUP: sync_group,
    apis.DESCRIBE_GROUPS: describe_groups,
    apis.LIST_GROUPS: list_groups,
    apis.DELETE_GROUPS: delete_groups,
    apis.CREATE_TOPICS: create_topics,
    apis.DELETE_TOPICS: delete_topics,
    apis.CREATE_PARTITIONS: create_partitions,
    apis.DESCRIBE_CONFIGS: describe_configs,
    apis.ALTER_CONFIGS: alter_configs,
    apis.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    apis.DESCRIBE_CLUSTER: describe_cluster,
}
