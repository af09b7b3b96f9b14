"""Topics of a storage root: create, list, describe, alter, add partitions, delete.

A topic is a pointer ``_meta/topics/<name>.json`` (put-if-absent: one creator
wins) naming its Delta table ``topics/<name>/<topic-id>``; partition count and
config live in the table's metadata, so they change in order with the data. The
topic id plays the role of Kafka's: a recreated topic never sees its predecessor's files.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import weakref
from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TypeGuard

from lakelog.commit_stats import CommitStats
from lakelog.delta.actions import Action
from lakelog.delta.log import DeltaLog
from lakelog.delta.state import TableState
from lakelog.delta.table import CheckpointRequester, TableCommitter
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
    CONFIG_PREFIX,
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


def _is_count(value: object) -> TypeGuard[int]:
    """An int of at least 1 (``True`` is an int, but not a count)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_partition_count(partitions: object) -> int:
    if not _is_count(partitions):
        raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
    if partitions > MAX_PARTITIONS:
        raise InvalidPartitionsError(
            f"number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS}"
        )
    return partitions


def _check_growth(name: str, current: int, total: int) -> None:
    if total <= current:
        raise InvalidPartitionsError(
            f"topic {name!r} has {current} partitions; the new count {total} "
            "must be larger (partitions can only be added)"
        )


@dataclass(frozen=True)
class _Cached:
    log: TopicLog
    #: ``time.monotonic()`` when the pointer last named this log's table.
    checked_at: float


@dataclass(frozen=True)
class _OpenLog:
    """A log not closed yet; ``closer`` runs once, when nothing holds the log any more."""

    committer: TableCommitter
    closer: weakref.finalize  # type: ignore[type-arg]
    #: The same, waiting for the pools' work to finish: for ``Catalog.close``.
    close_waiting: Callable[[], None]


class Catalog:
    """The topics of one storage root. Thread-safe; opens each topic once, however many
    threads ask for it at once.

    The log of a topic deleted or created again stays usable by whoever
    still holds it, and is closed once nothing does.
    """

    # Closed on the last reference (``weakref.finalize``), not on a release: callers hold
    # a log across awaits and threads, and none has to remember to give it back.

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
        self._logs: dict[str, _Cached] = {}
        #: Names whose pointer is being read (and table opened) right now, by one caller.
        self._opening: dict[str, Future[TopicLog]] = {}
        #: Logs opened and not yet closed, the cached one and any replaced one still held.
        self._open_logs: dict[str, list[_OpenLog]] = defaultdict(list)
        self._closed_stats: dict[str, CommitStats] = defaultdict(CommitStats)
        self._opens: dict[str, int] = defaultdict(int)
        self._deletions: dict[str, int] = defaultdict(int)

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
        files = (
            i.path.rsplit("/", 1)[-1] for i in self.storage.list_dir(META_TOPICS) if not i.is_dir
        )
        return sorted(f.removesuffix(".json") for f in files if f.endswith(".json"))

    def topic_ids(self) -> dict[str, str]:
        """Every topic's id, by name, from the pointers (one read per topic): what the
        Kafka APIs that name topics by id look names up in."""
        ids = {}
        for name in self.list_topics():
            try:
                ids[name] = self._read_pointer(name).topic_id
            except UnknownTopicOrPartitionError:  # deleted since the listing
                continue
        return ids

    def check_new_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, object] | None = None,
        replication_factor: int | None = None,
    ) -> TopicConfig:
        """Everything ``create_topic`` checks, in its order, writing nothing (``validate_only``)."""
        validate_topic_name(name)
        exists = self.storage.exists(self._pointer_path(name))
        if name in INTERNAL_TOPICS and not exists:
            raise InvalidTopicError(
                f"topic {name!r} is an internal topic: lakelog creates it when it first needs it"
            )
        _check_partition_count(partitions)
        if replication_factor not in (None, -1) and not _is_count(replication_factor):
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1 (or -1 for the default), "
                f"got {replication_factor!r}; durability comes from the storage root"
            )
        config = TopicConfig({k: str(v) for k, v in (configs or {}).items()})
        if exists:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        return config

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, object] | None = None,
        replication_factor: int | None = None,
    ) -> TopicDescription:
        """Create a topic; TOPIC_ALREADY_EXISTS if the name is taken, nothing written on error.

        Internal topics are created by their owner (the offsets store), never by a client.
        """
        config = self.check_new_topic(name, partitions, configs, replication_factor)
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
        """The open log ``topic(name)`` would return without any I/O, else None: an event
        loop skips a worker-thread hop while the pointer is fresh."""
        with self._lock:
            return self._fresh(self._logs.get(name))

    def _fresh(self, cached: _Cached | None) -> TopicLog | None:
        if cached is not None and time.monotonic() - cached.checked_at < self.pointer_max_age_s:
            return cached.log
        return None

    def topic(self, name: str) -> TopicLog:
        """The open log of a topic; re-checks the pointer now and then to notice deletion.

        Opened once however many callers ask at once (two instances in one process would
        race each other for Delta versions): the first reads the pointer, the others
        wait for its answer, a failure included, which is not kept.
        """
        with self._lock:
            cached = self._logs.get(name)
            fresh = self._fresh(cached)
            if fresh is not None:
                return fresh
            deletions = self._deletions[name]
            pending = self._opening.get(name)
            first = pending is None
            if pending is None:
                pending = self._opening[name] = Future()
        if not first:
            return pending.result()
        try:
            topic_log = self._check_or_open(
                name, cached.log if cached is not None else None, deletions
            )
        except BaseException as exc:
            with self._lock:
                del self._opening[name]
            pending.set_exception(exc)
            raise
        pending.set_result(topic_log)
        return topic_log

    def _check_or_open(self, name: str, cached: TopicLog | None, deletions: int) -> TopicLog:
        """Read the pointer; keep ``cached`` if it still names its table, else open anew.

        One thread per name at a time (``topic``). A topic deleted by this catalog
        meanwhile is not cached: the pointer read may predate the deletion.
        """
        pointer = self._read_pointer(name)
        if cached is None or cached.table_path != pointer.table_path:
            topic_log = TopicLog(
                self.storage,
                name,
                pointer.table_path,
                checkpoint_interval=self.checkpoint_interval,
                checkpointer=self.checkpointer,
            )
            closer = weakref.finalize(topic_log, topic_log.closer())
            with self._lock:
                self._forget_closed()
                self._opens[name] += 1
                self._open_logs[name].append(
                    _OpenLog(topic_log.committer, closer, topic_log.closer(wait=True))
                )
        else:
            topic_log = cached
        with self._lock:
            del self._opening[name]
            if self._deletions[name] == deletions:
                self._logs[name] = _Cached(topic_log, time.monotonic())
        return topic_log

    def _forget_closed(self) -> None:
        """Drop the logs closed since, keeping their counts; with the lock held (the
        finalizer takes none: it may run under this very lock)."""
        for name, opened in self._open_logs.items():
            for o in opened:
                if not o.closer.alive:
                    self._closed_stats[name] += o.committer.commit_stats
            self._open_logs[name] = [o for o in opened if o.closer.alive]

    def topic_opens(self) -> dict[str, int]:
        """How many times each topic was opened by this catalog (once, unless recreated)."""
        with self._lock:
            return dict(self._opens)

    def open_logs(self, name: str) -> int:
        """Logs of the topic opened and not closed yet: one, more while requests still hold
        a log replaced by a newer table of the name, none once it is deleted and let go."""
        with self._lock:
            self._forget_closed()
            return len(self._open_logs.get(name, ()))

    def commit_stats(self) -> dict[str, CommitStats]:
        """Each topic's commits through this catalog, over every log it opened for the name
        (counts only grow: a closed log's counts stay in the total)."""
        with self._lock:
            self._forget_closed()
            totals = dict(self._closed_stats)
            for name, opened in list(self._open_logs.items()):
                for o in opened:
                    totals[name] = totals.get(name, CommitStats()) + o.committer.commit_stats
        return totals

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
            configuration = state.metadata.configuration
            partitions = int(configuration[CONFIG_PARTITIONS])
            # Properties lakelog does not own (delta.*, a user's own) stay as they are.
            kept = {k: v for k, v in configuration.items() if not k.startswith(CONFIG_PREFIX)}
            conf = {**kept, **table_configuration(partitions, changed)}
            return [replace(state.metadata, configuration=conf)]

        topic_log.committer.commit(build, "SET TBLPROPERTIES", {"topic": name})
        return topic_log.config

    def check_create_partitions(self, name: str, total: int) -> None:
        """What ``create_partitions`` checks, against the topic's latest state; writes nothing."""
        _check_partition_count(total)
        topic_log = self.topic(name)
        topic_log.refresh()
        _check_growth(name, topic_log.num_partitions, total)

    def create_partitions(self, name: str, total: int) -> int:
        """Grow a topic to ``total`` partitions; shrinking is refused, as in Kafka."""
        _check_partition_count(total)
        topic_log = self.topic(name)

        def build(state: TableState) -> list[Action]:
            assert state.metadata is not None
            current = int(state.metadata.configuration[CONFIG_PARTITIONS])
            _check_growth(name, current, total)
            conf = dict(state.metadata.configuration)
            conf[CONFIG_PARTITIONS] = str(total)
            return [replace(state.metadata, configuration=conf)]

        topic_log.committer.commit(
            build, "ADD PARTITIONS", {"topic": name, "partitions": str(total)}
        )
        return topic_log.num_partitions

    def delete_topic(self, name: str) -> None:
        """Remove a topic: its pointer first (it is gone at once), then its files.

        Internal topics are refused, as Kafka refuses to delete ``__consumer_offsets``.
        """
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"topic {name!r} is an internal topic and cannot be deleted")
        pointer = self._read_pointer(name)
        self.storage.delete(self._pointer_path(name))
        with self._lock:
            # Requests may still hold the log: it is closed once the last one lets go.
            self._logs.pop(name, None)
            self._deletions[name] += 1
        self.storage.delete_tree(pointer.table_path)

    def close(self) -> None:
        """Stop every log this catalog opened (its callers are done: the owner is closing)."""
        with self._lock:
            self._logs.clear()
            opened = [o for logs in self._open_logs.values() for o in logs]
        for o in opened:
            if o.closer.detach() is not None:  # not closed yet: close it, waiting for its work
                o.close_waiting()


def connect(root: str, s3: S3Settings | None = None, **options: object) -> Catalog:
    """Open the topics of the storage root ``root`` names (path, file://, s3://, hdfs://)."""
    return Catalog(root, s3=s3, **options)  # type: ignore[arg-type]
