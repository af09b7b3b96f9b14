"""Options of the ``lakelog`` data source: parsed and validated, with no I/O.

Names, meanings and case-insensitivity follow Spark's Kafka source and sink;
``root`` (or ``load(path)``) replaces ``kafka.bootstrap.servers``. Every error
names its option. Unknown options are ignored, as Spark does, so jobs migrated
from Kafka keep their ``kafka.*`` settings harmlessly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakelog.errors import InvalidConfigError
from lakelog.numerals import is_unsigned_int
from lakelog.storage import S3Settings, open_storage
from lakelog.storage.base import Storage
from lakelog.structs import TopicPartition

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

#: In per-partition offset JSON (Spark's convention).
EARLIEST = -2
LATEST = -1


def option_error(name: str, message: str) -> InvalidConfigError:
    return InvalidConfigError(f"option '{name}': {message}")


# -- storage -----------------------------------------------------------------


@dataclass(frozen=True)
class StorageSpec:
    """How to open the storage root: its URL and explicitly given S3 settings.

    The rest is left to ``S3Settings`` in the process that opens the root, so
    executors read their own environment (AWS or ``LAKELOG_S3_*`` variables).
    """

    url: str
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    region: str | None = None

    @property
    def is_s3(self) -> bool:
        return self.url.split("://", 1)[0].lower() in ("s3", "s3a")

    def s3_settings(self) -> S3Settings | None:
        if not self.is_s3:
            return None
        given: dict[str, Any] = {
            "endpoint_url": self.endpoint,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "region": self.region,
        }
        return S3Settings(**{k: v for k, v in given.items() if v is not None})

    def open(self) -> Storage:
        return open_storage(self.url, self.s3_settings())


def parse_storage(options: Mapping[str, str]) -> StorageSpec:
    url = options.get("root") or options.get("path")
    if not url:
        raise option_error("root", "required: the storage root URL (a path, file://, s3://, ...)")
    return StorageSpec(
        url=url.rstrip("/") if len(url) > 1 else url,
        endpoint=options.get("s3.endpoint"),
        access_key_id=options.get("s3.accesskeyid"),
        secret_access_key=options.get("s3.secretaccesskey"),
        region=options.get("s3.region"),
    )


# -- subscriptions -----------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: a comma-separated list of topics."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every topic whose whole name matches the regex."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    """``assign``: explicit partitions, ``{"t1": [0, 1]}``."""

    partitions: tuple[tuple[str, tuple[int, ...]], ...]

    def as_dict(self) -> dict[str, tuple[int, ...]]:
        return dict(self.partitions)


Subscription = Subscribe | SubscribePattern | Assign
SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in SUBSCRIPTION_OPTIONS if options.get(name.lower()) is not None]
    if not given:
        raise InvalidConfigError(
            "one of the options 'subscribe', 'subscribePattern' or 'assign' is required "
            "to say which topics to read"
        )
    if len(given) > 1:
        listed = " and ".join(f"'{n}'" for n in given)
        raise InvalidConfigError(
            f"options {listed} were both given: use exactly one of "
            "'subscribe', 'subscribePattern' or 'assign'"
        )
    (name,) = given
    text = options[name.lower()]
    if name == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise option_error("subscribe", f"no topic names in {text!r}")
        return Subscribe(tuple(dict.fromkeys(topics)))
    if name == "subscribePattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise option_error(
                "subscribePattern", f"invalid regular expression {text!r}: {exc}"
            ) from None
        return SubscribePattern(text)
    return Assign(_parse_assign(text))


def _load_json(name: str, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise option_error(
            name, f"not valid JSON ({exc.msg} at char {exc.pos}): {text!r}"
        ) from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_assign(text: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    obj = _load_json("assign", text)
    if not isinstance(obj, dict) or not obj:
        raise option_error("assign", 'expected a JSON object like {"topic": [0, 1]}, got ' + text)
    out = []
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not parts:
            raise option_error(
                "assign", f"topic {topic!r}: expected a non-empty list of partitions, got {parts!r}"
            )
        for p in parts:
            if not _is_int(p) or p < 0:
                raise option_error("assign", f"topic {topic!r}: {p!r} is not a partition number")
        out.append((topic, tuple(sorted(set(parts)))))
    return tuple(sorted(out))


# -- offsets -----------------------------------------------------------------


@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets (``-2`` earliest, ``-1`` latest); others use the default."""

    offsets: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True)
class GlobalTimestamp:
    """``startingTimestamp``/``endingTimestamp``: one timestamp (ms) for every partition."""

    timestamp_ms: int


@dataclass(frozen=True)
class PartitionTimestamps:
    """``...OffsetsByTimestamp``: per-partition timestamps (ms)."""

    timestamps: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.timestamps)


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | PartitionTimestamps


@dataclass(frozen=True)
class Bound:
    """Where a read starts or ends, and the option that said so (for error messages)."""

    spec: OffsetSpec
    option: str


def _parse_partition_json(name: str, text: str, minimum: int) -> dict[TopicPartition, int]:
    obj = _load_json(name, text)
    example = '{"topic": {"0": 23, "1": -2}}'
    if not isinstance(obj, dict):
        raise option_error(name, f"expected a JSON object like {example}, got {text}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise option_error(
                name, f"topic {topic!r}: expected an object of partition -> number, got {parts!r}"
            )
        for key, value in parts.items():
            if not is_unsigned_int(key):
                raise option_error(
                    name, f"partition {key!r} of topic {topic!r} is not a partition number"
                )
            partition = int(key)
            if not _is_int(value) or value < minimum:
                raise option_error(
                    name,
                    f"{topic}-{partition}: {value!r} is not valid "
                    f"(expected an integer >= {minimum})",
                )
            out[TopicPartition(topic, partition)] = value
    return out


def _parse_timestamp(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise option_error(
            name, f"expected a timestamp in epoch milliseconds, got {text!r}"
        ) from None
    if value < 0:
        raise option_error(name, f"timestamp must not be negative, got {value}")
    return value


def parse_bound(options: Mapping[str, str], which: Literal["starting", "ending"]) -> Bound | None:
    """The start or end bound, in Spark's precedence: timestamp, by-timestamp JSON, offsets."""
    ts_name, by_ts_name, offsets_name = (
        f"{which}Timestamp",
        f"{which}OffsetsByTimestamp",
        f"{which}Offsets",
    )
    if (text := options.get(ts_name.lower())) is not None:
        return Bound(GlobalTimestamp(_parse_timestamp(ts_name, text)), ts_name)
    if (text := options.get(by_ts_name.lower())) is not None:
        stamps = _parse_partition_json(by_ts_name, text, 0)
        return Bound(PartitionTimestamps(tuple(sorted(stamps.items()))), by_ts_name)
    if (text := options.get(offsets_name.lower())) is not None:
        word = text.strip().lower()
        if word == "earliest":
            return Bound(Earliest(), offsets_name)
        if word == "latest":
            return Bound(Latest(), offsets_name)
        if not word.startswith("{"):
            raise option_error(
                offsets_name,
                f"expected 'earliest', 'latest' or per-partition JSON like "
                f'{{"topic": {{"0": 23, "1": -2}}}}, got {text!r}',
            )
        offsets = _parse_partition_json(offsets_name, text, EARLIEST)
        return Bound(SpecificOffsets(tuple(sorted(offsets.items()))), offsets_name)
    return None


# -- scalar options ----------------------------------------------------------


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    word = text.strip().lower()
    if word in ("true", "false"):
        return word == "true"
    raise option_error(name, f"expected true or false, got {text!r}")


def parse_positive_int(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise option_error(name, f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise option_error(name, f"expected a positive integer, got {text!r}")
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
_UNIT_MS = {
    unit: ms
    for ms, units in (
        (1, ("", "ms", "milli", "millis", "millisecond", "milliseconds")),
        (1000, ("s", "sec", "second", "seconds")),
        (60_000, ("m", "min", "minute", "minutes")),
        (3_600_000, ("h", "hour", "hours")),
        (86_400_000, ("d", "day", "days")),
    )
    for unit in units
}


def parse_duration_ms(options: Mapping[str, str], name: str, default: int) -> int:
    """Spark-style durations: ``15m``, ``30s``, ``500ms``, ``2 hours`` (a bare number is ms)."""
    text = options.get(name.lower())
    if text is None:
        return default
    match = _DURATION.match(text.lower())
    if match is None or match.group(2) not in _UNIT_MS:
        raise option_error(name, f"expected a duration like '15m', '30s' or '500ms', got {text!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


# -- read options ------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """Everything a batch or streaming read needs, validated."""

    storage: StorageSpec
    subscription: Subscription
    streaming: bool
    starting: Bound | None = None
    ending: Bound | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    #: startingOffsetsByTimestampStrategy: what if no record is that recent.
    timestamp_strategy: Literal["error", "latest"] = "error"

    @property
    def default_start(self) -> OffsetSpec:
        """Spark's defaults: batch reads start at earliest, streams at latest."""
        return Latest() if self.streaming else Earliest()


def include_headers(options: Mapping[str, str]) -> bool:
    return parse_bool(options, "includeHeaders", False)


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    opts = {k.lower(): v for k, v in options.items()}
    storage = parse_storage(opts)
    subscription = parse_subscription(opts)
    starting = parse_bound(opts, "starting")
    ending = parse_bound(opts, "ending")
    if streaming and ending is not None:
        raise option_error(ending.option, "is not valid in a streaming query (it never ends)")
    if not streaming:
        _check_batch_bounds(starting, ending)
    strategy = (opts.get("startingoffsetsbytimestampstrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise option_error(
            "startingOffsetsByTimestampStrategy", f"expected 'error' or 'latest', got {strategy!r}"
        )
    max_records = parse_positive_int(opts, "maxRecordsPerPartition")
    max_offsets = parse_positive_int(opts, "maxOffsetsPerTrigger")
    min_offsets = parse_positive_int(opts, "minOffsetsPerTrigger")
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise option_error(
            "minOffsetsPerTrigger",
            f"{min_offsets} is larger than maxOffsetsPerTrigger={max_offsets}",
        )
    return ReadOptions(
        storage=storage,
        subscription=subscription,
        streaming=streaming,
        starting=starting,
        ending=ending,
        include_headers=include_headers(opts),
        fail_on_data_loss=parse_bool(opts, "failOnDataLoss", True),
        max_records_per_partition=max_records or DEFAULT_MAX_RECORDS_PER_PARTITION,
        min_partitions=parse_positive_int(opts, "minPartitions"),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=parse_duration_ms(
            opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS
        ),
        timestamp_strategy="latest" if strategy == "latest" else "error",
    )


def _check_batch_bounds(starting: Bound | None, ending: Bound | None) -> None:
    """Spark's rules: a batch cannot start at latest nor end at earliest."""
    for bound, kind, special, word, where in (
        (starting, Latest, LATEST, "'latest' (-1)", "start"),
        (ending, Earliest, EARLIEST, "'earliest' (-2)", "end"),
    ):
        if bound is None:
            continue
        spec = bound.spec
        if isinstance(spec, kind) or (
            isinstance(spec, SpecificOffsets) and special in spec.as_dict().values()
        ):
            raise option_error(
                bound.option, f"{word} is not allowed as the {where} of a batch query"
            )


# -- write options -----------------------------------------------------------


@dataclass(frozen=True)
class WriteOptions:
    storage: StorageSpec
    #: The ``topic`` option: overrides any ``topic`` column (as in Spark's Kafka sink).
    topic: str | None = None
    #: Streaming only: explicit identity of the writing query (see writers.py).
    writer_id: str | None = None
    checkpoint_location: str | None = None


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = {k.lower(): v for k, v in options.items()}
    return WriteOptions(  # keyword order = check order: topic, writerId, then root
        topic=_non_empty(opts, "topic"),
        writer_id=_non_empty(opts, "writerId"),
        storage=parse_storage(opts),
        checkpoint_location=opts.get("checkpointlocation") or None,
    )


def _non_empty(options: Mapping[str, str], name: str) -> str | None:
    text = options.get(name.lower())
    if text is not None and not text.strip():
        raise option_error(name, "must not be empty")
    return text.strip() if text else None
