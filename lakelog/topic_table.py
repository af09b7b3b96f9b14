"""How a topic is kept in a Delta table, and a topic's table as of its latest known version.

The conventions (docs/architecture.md): the high watermark of partition p is the
version of the Delta app transaction ``lakelog.partition.<p>``; the partition
count and config overrides are entries of the table's Delta configuration.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

from lakelog.delta.actions import Action, Metadata, Protocol
from lakelog.delta.state import TableState
from lakelog.delta.table import CheckpointRequester, TableCommitter, commit_info
from lakelog.errors import UnknownTopicOrPartitionError
from lakelog.offset_index import OffsetIndex, PartitionIndex, Segment
from lakelog.partition_state import PartitionState
from lakelog.records import DELTA_SCHEMA_STRING
from lakelog.storage import Storage
from lakelog.topic_config import TopicConfig

PARTITION_TXN_PREFIX = "lakelog.partition."
#: App transactions holding each partition's log start offset as DeleteRecords set it.
LOG_START_TXN_PREFIX = "lakelog.log_start."
CONFIG_PARTITIONS = "lakelog.partitions"
CONFIG_PREFIX = "lakelog.config."


def partition_txn(partition: int) -> str:
    return f"{PARTITION_TXN_PREFIX}{partition}"


def log_start_txn(partition: int) -> str:
    return f"{LOG_START_TXN_PREFIX}{partition}"


def log_start_of(state: TableState, index: PartitionIndex, partition: int) -> int:
    """A partition's log start offset: its first segment's base, or a later offset that
    DeleteRecords set (which may fall inside a segment), never past the high watermark."""
    hwm = state.txn_version(partition_txn(partition))
    deleted_to = state.txn_version(log_start_txn(partition))
    return min(hwm, max(index.log_start_offset(hwm), deleted_to))


def topic_config_of(metadata: Metadata) -> TopicConfig:
    conf = metadata.configuration
    return TopicConfig(
        {k[len(CONFIG_PREFIX) :]: v for k, v in conf.items() if k.startswith(CONFIG_PREFIX)}
    )


def table_configuration(partitions: int, config: TopicConfig) -> dict[str, str]:
    """The Delta table configuration that stores a topic's partition count and overrides."""
    conf = {CONFIG_PARTITIONS: str(partitions)}
    conf.update({CONFIG_PREFIX + k: v for k, v in config.overrides.items()})
    return conf


def create_table_actions(
    name: str, table_id: uuid.UUID, partitions: int, config: TopicConfig, now_ms: int
) -> list[Action]:
    """Version 0 of a topic's table: protocol, metadata (schema, partitions, config), commit
    info; committed with put-if-absent, so of two creators exactly one wins."""
    return [
        Protocol(1, 2),
        Metadata(
            table_id=str(table_id),
            name=name,
            schema_string=DELTA_SCHEMA_STRING,
            partition_columns=("partition",),
            configuration=table_configuration(partitions, config),
            created_time=now_ms,
        ),
        commit_info("CREATE TABLE", {"partitions": str(partitions)}, now_ms),
    ]


class TopicTable:
    """A topic's Delta table: its committer and the offset index that follows every commit
    (under the committer's state lock, with the state). Thread-safe."""

    def __init__(
        self,
        storage: Storage,
        name: str,
        table_path: str,
        *,
        checkpoint_interval: int = 100,
        checkpointer: CheckpointRequester | None = None,
    ) -> None:
        self.name = name
        self._index = OffsetIndex()
        self.committer = TableCommitter(
            storage,
            table_path,
            name,
            checkpoint_interval=checkpoint_interval,
            checkpointer=checkpointer,
            view=self,
        )

    # -- the committer's view ----------------------------------------------------

    def reload(self, state: TableState) -> None:
        self._index = OffsetIndex.from_adds(state.files.values())

    def apply(self, actions: Sequence[Action]) -> None:
        self._index.apply(actions)

    # -- snapshot ------------------------------------------------------------------

    @property
    def state(self) -> TableState:
        return self.committer.state

    @property
    def state_lock(self) -> threading.RLock:
        return self.committer.state_lock

    @property
    def index(self) -> OffsetIndex:
        """The offset index at the state's version; read it under ``state_lock``."""
        return self._index

    @property
    def version(self) -> int:
        return self.committer.version

    @property
    def metadata(self) -> Metadata:
        metadata = self.committer.state.metadata
        if metadata is None:
            raise UnknownTopicOrPartitionError(f"topic {self.name!r} has no Delta metadata")
        return metadata

    @property
    def config(self) -> TopicConfig:
        return topic_config_of(self.metadata)

    @property
    def num_partitions(self) -> int:
        return int(self.metadata.configuration.get(CONFIG_PARTITIONS, "1"))

    @property
    def topic_id(self) -> str:
        return self.metadata.table_id

    def refresh(self) -> bool:
        """Pick up commits made by other processes; True if anything new was found."""
        return self.committer.refresh()

    def check_partition(self, partition: int) -> None:
        if not isinstance(partition, int) or not 0 <= partition < self.num_partitions:
            raise UnknownTopicOrPartitionError(
                f"partition {partition} does not exist in topic {self.name!r} "
                f"(it has {self.num_partitions} partitions)"
            )

    def txn_version(self, app_id: str) -> int | None:
        """The latest version of a Delta app transaction (None if never written)."""
        with self.state_lock:
            return self.state.txns.get(app_id)

    def app_transactions(self, prefix: str) -> dict[str, int]:
        """The table's Delta app transactions whose id starts with ``prefix``: id -> version."""
        with self.state_lock:
            return {app: v for app, v in self.state.txns.items() if app.startswith(prefix)}

    def live_paths(self) -> set[str]:
        """Paths of the segments in the current snapshot."""
        with self.state_lock:
            return set(self.state.files)

    def high_watermark(self, partition: int) -> int:
        self.check_partition(partition)
        return self.state.txn_version(partition_txn(partition))

    def log_start_offset(self, partition: int) -> int:
        self.check_partition(partition)
        with self.state_lock:
            return log_start_of(self.state, self._index.partition(partition), partition)

    def partition_state(self, partition: int) -> PartitionState:
        self.check_partition(partition)
        with self.state_lock:
            hwm = self.state.txn_version(partition_txn(partition))
            index = self._index.partition(partition)
            return PartitionState(
                partition=partition,
                log_start_offset=log_start_of(self.state, index, partition),
                high_watermark=hwm,
                size_bytes=index.size_bytes(),
                num_segments=len(index),
                num_records=sum(s.num_records for s in index),
            )

    def segments(self, partition: int) -> list[Segment]:
        self.check_partition(partition)
        with self.state_lock:
            return self._index.partition(partition).segments
