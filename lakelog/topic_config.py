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
    kind: Literal["long", "int", "double", "list", "string"]
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def parse(self, raw: object) -> Any:
        """A typed value from a string (or already typed) input, or INVALID_CONFIG."""

        def invalid(why: str) -> InvalidConfigError:
            return InvalidConfigError(f"invalid value {raw!r} for config {self.name}: {why}")

        text = str(raw).strip() if not isinstance(raw, bool) else None
        if text is None or text == "":
            raise invalid("empty")
        value: Any
        try:
            if self.kind in ("long", "int"):
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
        if self.choices:
            parts = value.split(",") if self.kind == "list" else [value]
            if not parts or any(p not in self.choices for p in parts):
                raise invalid(f"allowed values are {', '.join(self.choices)}")
        return value


_DAY_MS = 24 * 60 * 60 * 1000

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
                "value": str(self.get(name)),
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
        value = _definition(name).parse(raw)
        result[name] = repr(value) if isinstance(value, float) else str(value)
    lo = int(result.get("min.compaction.lag.ms", CONFIG_DEFS["min.compaction.lag.ms"].default))
    hi = int(result.get("max.compaction.lag.ms", CONFIG_DEFS["max.compaction.lag.ms"].default))
    if lo > hi:
        raise InvalidConfigError(
            f"min.compaction.lag.ms ({lo}) must not be greater than max.compaction.lag.ms ({hi})"
        )
    return result
