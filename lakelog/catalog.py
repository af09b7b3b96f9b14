"""Topics of a storage root: create, list, describe, alter, add partitions, delete.

A topic is a pointer ``_meta/topics/<name>.json`` (created with put-if-absent,
so two creators cannot both win) naming its Delta table
``topics/<name>/<topic-id>``. The partition count and config overrides live in
the table's Delta metadata, so they change atomically and in order with the
data, through the same commit protocol as appends. The topic id in the path
plays the role of Kafka's topic ids: a topic deleted and created again never
sees, or is damaged by, the files of its predecessor.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from lakelog.delta.actions import Action, Metadata
from lakelog.delta.log import DeltaLog
from lakelog.delta.state import TableState
from lakelog.delta.table import CheckpointRequester
from lakelog.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from lakelog.partition_state import PartitionState
from lakelog.storage import S3Settings, Storage, join, open_storage
from lakelog.topic_config import INTERNAL_TOPICS, TopicConfig, validate_topic_name
from lakelog.topic_log import TopicLog
from lakelog.topic_table import (
    CONFIG_PARTITIONS,
    create_table_actions,
    table_configuration,
    topic_config_of,
)

META_TOPICS = "_meta/topics"
TOPICS_DIR = "topics"
MAX_PARTITIONS = 10_000


@dataclass(frozen=True)
class TopicPointer:
    name: str
    topic_id: str
    table_path: str
    created_ms: int

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "name": self.name,
                "topic_id": self.topic_id,
                "table": self.table_path,
                "created_ms": self.created_ms,
            },
            indent=1,
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> TopicPointer:
        obj = json.loads(data)
        return cls(obj["name"], obj["topic_id"], obj["table"], int(obj["created_ms"]))


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    table_uri: str
    version: int
    partitions: list[PartitionState]
    config: TopicConfig

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)


def _check_partition_count(partitions: object) -> int:
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
    if partitions > MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS}"
        )
    return partitions


class Catalog:
    """The topics of one storage root. Thread-safe; caches one ``TopicLog`` per topic."""

    def __init__(
        self,
        root: Storage | str,
        *,
        s3: S3Settings | None = None,
        checkpoint_interval: int = 100,
        pointer_max_age_s: float = 5.0,
        checkpointer: CheckpointRequester | None = None,
    ) -> None:
        self.storage = open_storage(root, s3) if isinstance(root, str) else root
        self.checkpoint_interval = checkpoint_interval
        self.checkpointer = checkpointer
        self.pointer_max_age_s = pointer_max_age_s
        self._lock = threading.Lock()
        self._logs: dict[str, tuple[TopicLog, float]] = {}

    @property
    def url(self) -> str:
        return self.storage.url

    # -- pointers ------------------------------------------------------------

    def _pointer_path(self, name: str) -> str:
        return join(META_TOPICS, f"{validate_topic_name(name)}.json")

    def _read_pointer(self, name: str) -> TopicPointer:
        try:
            data = self.storage.read_bytes(self._pointer_path(name))
        except FileNotFoundError:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist") from None
        except OSError as exc:
            raise KafkaStorageError(f"cannot read topic {name!r}: {exc}") from exc
        return TopicPointer.from_bytes(data)

    # -- topics --------------------------------------------------------------

    def list_topics(self) -> list[str]:
        names = []
        for info in self.storage.list_dir(META_TOPICS):
            base = info.path.rsplit("/", 1)[-1]
            if not info.is_dir and base.endswith(".json"):
                names.append(base[: -len(".json")])
        return sorted(names)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, object] | None = None,
        replication_factor: int | None = None,
    ) -> TopicDescription:
        """Create a topic; TOPIC_ALREADY_EXISTS if the name is taken, nothing written on error.

        Internal topics are created by their owner (the offsets store), never
        by a client: a client's table under that name would take their place.
        """
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not self.storage.exists(self._pointer_path(name)):
            raise InvalidTopicError(
                f"topic {name!r} is an internal topic: lakelog creates it when it first needs it"
            )
        _check_partition_count(partitions)
        if (
            replication_factor is not None
            and replication_factor not in (-1,)
            and (
                isinstance(replication_factor, bool)
                or not isinstance(replication_factor, int)
                or replication_factor < 1
            )
        ):
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1 (or -1 for the default), "
                f"got {replication_factor!r}; durability comes from the storage root"
            )
        config = TopicConfig({k: str(v) for k, v in (configs or {}).items()})
        if self.storage.exists(self._pointer_path(name)):
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        topic_id = uuid.uuid4().hex
        table_path = join(TOPICS_DIR, name, topic_id)
        now = int(time.time() * 1000)
        actions = create_table_actions(name, uuid.UUID(topic_id), partitions, config, now)
        delta = DeltaLog(self.storage, table_path)
        delta.try_commit(0, actions)
        pointer = TopicPointer(name, topic_id, table_path, now)
        if not self.storage.put_if_absent(self._pointer_path(name), pointer.to_bytes()):
            delta.delete_table()
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        return self.describe_topic(name)

    def cached_topic(self, name: str) -> TopicLog | None:
        """The open log ``topic(name)`` would return without any I/O, else None.

        Lets an event loop skip a worker-thread hop per request while the
        pointer is fresh, and still go through ``topic`` (which may read
        storage) whenever it is not.
        """
        with self._lock:
            cached = self._logs.get(name)
        if cached is not None and time.monotonic() - cached[1] < self.pointer_max_age_s:
            return cached[0]
        return None

    def topic(self, name: str) -> TopicLog:
        """The open log of a topic; re-checks the pointer now and then to notice deletion."""
        now = time.monotonic()
        with self._lock:
            cached = self._logs.get(name)
        if cached is not None and now - cached[1] < self.pointer_max_age_s:
            return cached[0]
        pointer = self._read_pointer(name)
        with self._lock:
            cached = self._logs.get(name)
            if cached is not None and cached[0].table_path == pointer.table_path:
                self._logs[name] = (cached[0], now)
                return cached[0]
        topic_log = TopicLog(
            self.storage,
            name,
            pointer.table_path,
            checkpoint_interval=self.checkpoint_interval,
            checkpointer=self.checkpointer,
        )
        with self._lock:
            old = self._logs.get(name)
            self._logs[name] = (topic_log, now)
        if old is not None:
            old[0].close()
        return topic_log

    def describe_topic(self, name: str) -> TopicDescription:
        topic_log = self.topic(name)
        topic_log.refresh()
        return TopicDescription(
            name=name,
            topic_id=topic_log.topic_id,
            table_uri=self.storage.delta_uri(topic_log.table_path),
            version=topic_log.version,
            partitions=[topic_log.partition_state(p) for p in range(topic_log.num_partitions)],
            config=topic_log.config,
        )

    def alter_topic_configs(
        self,
        name: str,
        set_configs: Mapping[str, object] | None = None,
        delete_configs: list[str] | None = None,
    ) -> TopicConfig:
        """Set and/or revert overrides in one atomic metadata commit."""
        topic_log = self.topic(name)
        topic_log.config.with_changes(set_configs or {}, delete_configs)  # validate first

        def build(state: TableState) -> list[Action]:
            assert state.metadata is not None
            current = topic_config_of(state.metadata)
            changed = current.with_changes(set_configs or {}, delete_configs)
            partitions = int(state.metadata.configuration[CONFIG_PARTITIONS])
            return [_with_configuration(state.metadata, table_configuration(partitions, changed))]

        topic_log.committer.commit(build, "SET TBLPROPERTIES", {"topic": name})
        return topic_log.config

    def create_partitions(self, name: str, total: int) -> int:
        """Grow a topic to ``total`` partitions; shrinking is refused, as in Kafka."""
        _check_partition_count(total)
        topic_log = self.topic(name)

        def build(state: TableState) -> list[Action]:
            assert state.metadata is not None
            current = int(state.metadata.configuration[CONFIG_PARTITIONS])
            if total <= current:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {current} partitions; the new count {total} "
                    "must be larger (partitions can only be added)"
                )
            conf = dict(state.metadata.configuration)
            conf[CONFIG_PARTITIONS] = str(total)
            return [_with_configuration(state.metadata, conf)]

        topic_log.committer.commit(
            build, "ADD PARTITIONS", {"topic": name, "partitions": str(total)}
        )
        return topic_log.num_partitions

    def delete_topic(self, name: str) -> None:
        """Remove a topic: its pointer first (it is gone at once), then its files.

        Internal topics are refused, as Kafka refuses to delete
        ``__consumer_offsets``: every group's committed offsets live there.
        """
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"topic {name!r} is an internal topic and cannot be deleted")
        pointer = self._read_pointer(name)
        self.storage.delete(self._pointer_path(name))
        with self._lock:
            cached = self._logs.pop(name, None)
        if cached is not None:
            cached[0].close()
        self.storage.delete_tree(pointer.table_path)

    def close(self) -> None:
        with self._lock:
            logs = [entry[0] for entry in self._logs.values()]
            self._logs.clear()
        for topic_log in logs:
            topic_log.close()


def _with_configuration(metadata: Metadata, configuration: dict[str, str]) -> Metadata:
    return Metadata(
        table_id=metadata.table_id,
        name=metadata.name,
        schema_string=metadata.schema_string,
        partition_columns=metadata.partition_columns,
        configuration=configuration,
        created_time=metadata.created_time,
        description=metadata.description,
    )


def connect(root: str, s3: S3Settings | None = None, **options: object) -> Catalog:
    """Open the topics of the storage root ``root`` names (path, file://, s3://, hdfs://)."""
    return Catalog(root, s3=s3, **options)  # type: ignore[arg-type]
