"""Topic names and topic-level configs, with Kafka's names, defaults and limits.

Configs travel as ``dict[str, str]`` (as in Kafka's admin protocol and in the
Delta table's ``configuration`` map where they are stored); ``TopicConfig``
parses and validates them once, so code below works with typed values. Only
overrides are stored, so a topic follows a changed default as Kafka does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakelog.errors import InvalidConfigError, InvalidTopicError
from lakelog.names import MAX_NAME_LENGTH, check_name

MAX_TOPIC_NAME_LENGTH = MAX_NAME_LENGTH

LONG_MAX = 2**63 - 1

#: Kafka's internal topic of committed consumer-group offsets (see lakelog.groups).
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
#: Topics lakelog itself depends on: they can be described and altered, never deleted.
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC})


def validate_topic_name(name: object) -> str:
    """Kafka's topic-name rules; also what keeps names safe as storage path segments."""
    return check_name(name, "topic name", InvalidTopicError)


@dataclass(frozen=True)
class ConfigDef:
    """One topic config: its Kafka name, type, default, lower bound and meaning."""

    name: str
    kind: Literal["long", "int", "double", "list", "string", "boolean"]
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    #: An empty string is a value of its own (a string config whose default means "none").
    empty_ok: bool = False
    #: The value names a topic, so it must be a valid topic name.
    names_topic: bool = False
    #: False for a Kafka config lakelog stores and describes but does not act on:
    #: it governs replicas, local log files or record batches, which lakelog has not.
    applies: bool = True

    def render(self, value: Any) -> str:
        """A typed value as Kafka writes it in config answers (booleans in lower case)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return repr(value) if isinstance(value, float) else str(value)

    def parse(self, raw: object) -> Any:
        """A typed value from a string (or already typed) input, or INVALID_CONFIG."""

        def invalid(why: str) -> InvalidConfigError:
            return InvalidConfigError(f"invalid value {raw!r} for config {self.name}: {why}")

        if isinstance(raw, bool):
            if self.kind == "boolean":
                return raw
            raise invalid(f"expected a {self.kind}")
        text = str(raw).strip()
        if text == "" and self.empty_ok:
            return ""
        if text == "":
            raise invalid("empty")
        value: Any
        try:
            if self.kind == "boolean":
                # Kafka's ConfigDef reads booleans case-insensitively.
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                value = text.lower() == "true"
            elif self.kind in ("long", "int"):
                value = int(text)
            elif self.kind == "double":
                value = float(text)
                # float() accepts "nan", which would pass the minimum/maximum checks
                # below because every comparison with it is false.
                if math.isnan(value):
                    raise ValueError(text)
            elif self.kind == "list":
                value = ",".join(sorted(p.strip() for p in text.split(",") if p.strip()))
            else:
                value = text
        except ValueError:
            raise invalid(f"expected a {self.kind}") from None
        if self.kind == "int" and not -(2**31) <= value < 2**31:
            raise invalid("not an int")
        if self.kind == "long" and not -(2**63) <= value <= LONG_MAX:
            raise invalid("not a long")
        if self.minimum is not None and value < self.minimum:
            raise invalid(f"must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise invalid(f"must be at most {self.maximum}")
        if self.names_topic:
            try:
                validate_topic_name(value)
            except InvalidTopicError as exc:
                raise invalid(exc.message) from None
        if self.choices:
            parts = value.split(",") if self.kind == "list" else [value]
            if not parts or any(p not in self.choices for p in parts):
                raise invalid(f"allowed values are {', '.join(self.choices)}")
        return value


_DAY_MS = 24 * 60 * 60 * 1000

#: Confluent's subject name strategies, by the class names its topic configs take.
TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
RECORD_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
SUBJECT_NAME_STRATEGIES = (TOPIC_NAME_STRATEGY, RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY)
#: Where records that fail schema validation go instead of refusing their batch.
DEAD_LETTER_TOPIC = "lakelog.schema.validation.dead.letter.topic"

#: Kafka's topic configs that have no effect in lakelog (docs/kafka-protocol.md, "Topic
#: configs"), with Kafka's types, defaults and bounds, so Kafka's tools set and read them.
_KAFKA_ONLY_CONFIGS = [
    ConfigDef(
        "compression.type",
        "string",
        "producer",
        "The codec of the broker's record batches. Segments are Parquet files, "
        "compressed as one; stored for Kafka's tools, no effect in lakelog.",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        applies=False,
    ),
    ConfigDef(
        "compression.gzip.level",
        "int",
        -1,
        "gzip level of record batches: no effect in lakelog.",
        minimum=-1,
        maximum=9,
        applies=False,
    ),
    ConfigDef(
        "compression.lz4.level",
        "int",
        9,
        "lz4 level of record batches: no effect in lakelog.",
        minimum=1,
        maximum=17,
        applies=False,
    ),
    ConfigDef(
        "compression.zstd.level",
        "int",
        3,
        "zstd level of record batches: no effect in lakelog.",
        minimum=-131072,
        maximum=22,
        applies=False,
    ),
    ConfigDef(
        "file.delete.delay.ms",
        "long",
        60000,
        "Delay before a local segment file is deleted: no effect in lakelog (retention's "
        "file cleanup keeps removed files for Delta readers instead).",
        minimum=0,
        applies=False,
    ),
    ConfigDef(
        "flush.messages",
        "long",
        LONG_MAX,
        "Records between forced fsyncs: no effect in lakelog, which acknowledges a record "
        "only once its commit is durable.",
        minimum=1,
        applies=False,
    ),
    ConfigDef(
        "flush.ms",
        "long",
        LONG_MAX,
        "Time between forced fsyncs: no effect in lakelog (every commit is durable).",
        minimum=0,
        applies=False,
    ),
    ConfigDef(
        "follower.replication.throttled.replicas",
        "list",
        "",
        "Replicas whose replication is throttled on the follower: no effect in lakelog, "
        "which has no replicas.",
        empty_ok=True,
        applies=False,
    ),
    ConfigDef(
        "leader.replication.throttled.replicas",
        "list",
        "",
        "Replicas whose replication is throttled on the leader: no effect in lakelog.",
        empty_ok=True,
        applies=False,
    ),
    ConfigDef(
        "index.interval.bytes",
        "int",
        4096,
        "Bytes between offset index entries: no effect in lakelog (segments carry their "
        "offset range).",
        minimum=0,
        applies=False,
    ),
    ConfigDef(
        "segment.index.bytes",
        "int",
        10 * 1024 * 1024,
        "Size of a segment's offset index: no effect in lakelog.",
        minimum=4,
        applies=False,
    ),
    ConfigDef(
        "segment.jitter.ms",
        "long",
        0,
        "Random jitter subtracted from segment.ms: no effect in lakelog.",
        minimum=0,
        applies=False,
    ),
    ConfigDef(
        "local.retention.bytes",
        "long",
        -2,
        "Tiered storage's local retention (-2: retention.bytes): no effect in lakelog, "
        "whose storage root is the only tier.",
        minimum=-2,
        applies=False,
    ),
    ConfigDef(
        "local.retention.ms",
        "long",
        -2,
        "Tiered storage's local retention (-2: retention.ms): no effect in lakelog.",
        minimum=-2,
        applies=False,
    ),
    ConfigDef(
        "remote.storage.enable",
        "boolean",
        False,
        "Tiered storage for the topic: no effect in lakelog, whose segments are already "
        "in the storage root.",
        applies=False,
    ),
    ConfigDef(
        "remote.log.copy.disable",
        "boolean",
        False,
        "Stops copying segments to tiered storage: no effect in lakelog.",
        applies=False,
    ),
    ConfigDef(
        "remote.log.delete.on.disable",
        "boolean",
        False,
        "Deletes tiered segments when tiered storage is turned off: no effect in lakelog.",
        applies=False,
    ),
    ConfigDef(
        "remote.copy.lag.ms",
        "long",
        0,
        "How long a segment waits before it is copied to tiered storage: no effect in lakelog.",
        minimum=-1,
        applies=False,
    ),
    ConfigDef(
        "remote.copy.lag.bytes",
        "long",
        0,
        "How many bytes wait before they are copied to tiered storage: no effect in lakelog.",
        minimum=-1,
        applies=False,
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be: no effect in lakelog, which "
        "stores every timestamp it is given.",
        minimum=0,
        applies=False,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms",
        "long",
        3_600_000,
        "How far in the future a CreateTime timestamp may be: no effect in lakelog.",
        minimum=0,
        applies=False,
    ),
    ConfigDef(
        "min.insync.replicas",
        "int",
        1,
        "Replicas that must have a record before acks=all answers: lakelog's one copy is "
        "the durable commit, so 1 is always met; stored, no effect.",
        minimum=1,
        applies=False,
    ),
    ConfigDef(
        "preallocate",
        "boolean",
        False,
        "Preallocate segment files on disk: no effect in lakelog.",
        applies=False,
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Let an out-of-sync replica lead: no effect in lakelog, which has no replicas.",
        applies=False,
    ),
]

CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in [
        ConfigDef(
            "cleanup.policy",
            "list",
            "delete",
            "delete: remove old segments by time/size; compact: keep the latest record per key; "
            "both may be given.",
            choices=("compact", "delete"),
        ),
        ConfigDef(
            "retention.ms",
            "long",
            7 * _DAY_MS,
            "Segments whose newest record is older than this are removed (-1: keep forever).",
            minimum=-1,
        ),
        ConfigDef(
            "retention.bytes",
            "long",
            -1,
            "Per partition, the oldest segments are removed while the partition is larger "
            "than this (-1: no limit).",
            minimum=-1,
        ),
        ConfigDef(
            "segment.bytes",
            "int",
            1024 * 1024 * 1024,
            "Target size of a segment after merging small broker segments.",
            minimum=14,
        ),
        ConfigDef(
            "segment.ms",
            "long",
            7 * _DAY_MS,
            "A merged segment spans at most this much time, so retention can remove it whole.",
            minimum=1,
        ),
        ConfigDef(
            "min.compaction.lag.ms",
            "long",
            0,
            "A record stays uncompacted at least this long after it was written.",
            minimum=0,
        ),
        ConfigDef(
            "max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "A record becomes eligible for compaction at the latest this long after it was "
            "written, whatever the dirty ratio.",
            minimum=1,
        ),
        ConfigDef(
            "delete.retention.ms",
            "long",
            _DAY_MS,
            "How long a tombstone (null value) is kept after compaction reached it.",
            minimum=0,
        ),
        ConfigDef(
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            "Compact a partition only when this share of its cleanable bytes is uncompacted.",
            minimum=0.0,
            maximum=1.0,
        ),
        ConfigDef(
            "max.message.bytes",
            "int",
            1024 * 1024 + 12,
            "Largest record (key + value + headers) accepted by produce.",
            minimum=0,
        ),
        ConfigDef(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "CreateTime keeps the producer's timestamp; LogAppendTime uses the broker's clock.",
            choices=("CreateTime", "LogAppendTime"),
        ),
        *_KAFKA_ONLY_CONFIGS,
        ConfigDef(
            "confluent.key.schema.validation",
            "boolean",
            False,
            "Every record's key must be framed with the id of a schema registered under "
            "its subject and decode with that schema; others are refused (INVALID_RECORD).",
        ),
        ConfigDef(
            "confluent.value.schema.validation",
            "boolean",
            False,
            "Every record's non-null value must be framed with the id of a schema "
            "registered under its subject and decode with that schema; others are refused "
            "(INVALID_RECORD).",
        ),
        ConfigDef(
            "confluent.key.subject.name.strategy",
            "string",
            TOPIC_NAME_STRATEGY,
            "How a key's subject is named: TopicNameStrategy <topic>-key, RecordNameStrategy "
            "the schema's record name, TopicRecordNameStrategy <topic>-<record name>.",
            choices=SUBJECT_NAME_STRATEGIES,
        ),
        ConfigDef(
            "confluent.value.subject.name.strategy",
            "string",
            TOPIC_NAME_STRATEGY,
            "How a value's subject is named: TopicNameStrategy <topic>-value, "
            "RecordNameStrategy the schema's record name, TopicRecordNameStrategy "
            "<topic>-<record name>.",
            choices=SUBJECT_NAME_STRATEGIES,
        ),
        ConfigDef(
            DEAD_LETTER_TOPIC,
            "string",
            "",
            "A topic that takes the records schema validation refuses (bytes unchanged, the "
            "reason in headers) while the rest of their batch is stored; empty: refuse the "
            "batch.",
            empty_ok=True,
            names_topic=True,
        ),
    ]
}


@dataclass(frozen=True)
class TopicConfig:
    """Resolved, typed topic configuration (defaults plus validated overrides)."""

    overrides: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overrides", normalise_overrides(self.overrides))

    def get(self, name: str) -> Any:
        definition = CONFIG_DEFS[name]
        raw = self.overrides.get(name)
        return definition.default if raw is None else definition.parse(raw)

    def text(self, name: str) -> str:
        """The value of ``name`` as config answers show it."""
        return CONFIG_DEFS[name].render(self.get(name))

    def with_changes(
        self, set_configs: Mapping[str, object], delete_configs: list[str] | None = None
    ) -> TopicConfig:
        """A new config with some overrides set and others reverted to the default."""
        merged = dict(self.overrides)
        for name in delete_configs or []:
            _definition(name)
            merged.pop(name, None)
        merged.update({k: str(v) for k, v in set_configs.items()})
        return TopicConfig(merged)

    def describe(self) -> list[dict[str, Any]]:
        """Every config with its value and whether it is a topic override or the default."""
        return [
            {
                "name": name,
                "value": self.text(name),
                "source": "TOPIC_CONFIG" if name in self.overrides else "DEFAULT_CONFIG",
                "is_default": name not in self.overrides,
            }
            for name in CONFIG_DEFS
        ]

    @property
    def cleanup_policy(self) -> frozenset[str]:
        return frozenset(str(self.get("cleanup.policy")).split(","))

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return bool(self.get("message.timestamp.type") == "LogAppendTime")

    @property
    def max_message_bytes(self) -> int:
        return int(self.get("max.message.bytes"))

    @property
    def validates_schemas(self) -> bool:
        """Whether produce checks keys or values against the Schema Registry."""
        return bool(
            self.get("confluent.key.schema.validation")
            or self.get("confluent.value.schema.validation")
        )

    @property
    def dead_letter_topic(self) -> str:
        """Where refused records go instead of refusing their batch ("" for nowhere)."""
        return str(self.get(DEAD_LETTER_TOPIC))


def _definition(name: str) -> ConfigDef:
    try:
        return CONFIG_DEFS[name]
    except KeyError:
        raise InvalidConfigError(
            f"unknown topic config {name!r}; known configs: {', '.join(sorted(CONFIG_DEFS))}"
        ) from None


def normalise_overrides(overrides: Mapping[str, object]) -> dict[str, str]:
    """Validate every override and put it in canonical string form.

    Also the cross-config rules Kafka enforces (one bound may not exceed the other).
    """
    result: dict[str, str] = {}
    for name, raw in overrides.items():
        definition = _definition(name)
        result[name] = definition.render(definition.parse(raw))
    lo = int(result.get("min.compaction.lag.ms", CONFIG_DEFS["min.compaction.lag.ms"].default))
    hi = int(result.get("max.compaction.lag.ms", CONFIG_DEFS["max.compaction.lag.ms"].default))
    if lo > hi:
        raise InvalidConfigError(
            f"min.compaction.lag.ms ({lo}) must not be greater than max.compaction.lag.ms ({hi})"
        )
    return result
