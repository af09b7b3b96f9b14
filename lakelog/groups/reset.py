"""Planning ``--reset-offsets``: where each partition's committed offset should move.

Pure: the caller resolves what needs storage (log bounds, committed offsets,
offsets by time) and passes it in, so the plan is the same for a dry run and
an execution. As in Kafka, every new offset is clamped to [log start, log end].
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from lakelog.errors import InvalidRequestError
from lakelog.structs import TopicPartition

ResetKind = Literal[
    "earliest", "latest", "current", "offset", "shift_by", "datetime", "duration", "timestamp_ms"
]
KINDS: tuple[ResetKind, ...] = get_args(ResetKind)
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


@dataclass(frozen=True)
class ResetSpec:
    kind: ResetKind
    #: offset / shift / epoch ms for the numeric kinds; ISO text for datetime/duration.
    value: int | str | None = None

    def timestamp_ms(self, now_ms: int) -> int | None:
        """The instant a time-based reset looks up, or None for the other kinds."""
        if self.kind == "timestamp_ms":
            assert isinstance(self.value, int)
            return self.value
        if self.kind == "datetime":
            assert isinstance(self.value, str)
            return parse_datetime_ms(self.value)
        if self.kind == "duration":
            assert isinstance(self.value, str)
            return now_ms - parse_duration_ms(self.value)
        return None


@dataclass(frozen=True)
class PartitionPosition:
    """What the planner needs to know about one partition of the group."""

    tp: TopicPartition
    log_start: int
    log_end: int
    committed: int | None


@dataclass(frozen=True)
class ResetRow:
    tp: TopicPartition
    current_offset: int | None
    new_offset: int


def parse_spec(obj: Mapping[str, Any]) -> ResetSpec:
    """``{"earliest": true}``, ``{"offset": 10}``, ``{"duration": "PT1H"}``...: exactly one."""
    given = [k for k, v in obj.items() if v is not None and v is not False]
    unknown = [k for k in obj if k not in KINDS]
    if unknown:
        raise InvalidRequestError(f"unknown reset target(s) {unknown}; use one of {list(KINDS)}")
    if len(given) != 1:
        raise InvalidRequestError(
            f"exactly one reset target is needed (one of {list(KINDS)}), got {given or 'none'}"
        )
    kind: ResetKind = given[0]  # type: ignore[assignment]
    value = obj[kind]
    if kind in ("earliest", "latest", "current"):
        if value is not True:
            raise InvalidRequestError(f"reset target {kind!r} takes true, got {value!r}")
        return ResetSpec(kind)
    if kind in ("offset", "shift_by", "timestamp_ms"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequestError(f"reset target {kind!r} takes an integer, got {value!r}")
        if kind == "offset" and value < 0:
            raise InvalidRequestError(f"offset must be >= 0, got {value}")
        return ResetSpec(kind, value)
    if not isinstance(value, str):
        raise InvalidRequestError(f"reset target {kind!r} takes a string, got {value!r}")
    spec = ResetSpec(kind, value)
    spec.timestamp_ms(0)  # validates the text
    return spec


def parse_datetime_ms(text: str) -> int:
    """ISO-8601 date-time; without a zone it is UTC (Kafka's tool uses the local zone)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(
            f"datetime {text!r} is not ISO-8601 (e.g. 2026-01-01T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration ``PnDTnHnMnS`` (Kafka's --by-duration format)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip() in ("P", "PT") or text.strip().endswith("T"):
        raise InvalidRequestError(f"duration {text!r} is not ISO-8601 PnDTnHnMnS (e.g. PT1H)")
    days, hours, minutes = (int(match.group(g) or 0) for g in "dhm")
    seconds = float(match.group("s") or 0)
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def plan_reset(
    spec: ResetSpec,
    positions: Sequence[PartitionPosition],
    by_time: Mapping[TopicPartition, int | None] | None = None,
) -> list[ResetRow]:
    """The new offset of each partition, clamped to [log start, log end].

    ``by_time`` holds, for time-based kinds, the first offset at or after the
    instant (None: no such record, which resets to the log end as Kafka does).
    A shift of a partition with no committed offset is refused, as Kafka does.
    """
    rows = []
    for pos in positions:
        target: int
        if spec.kind == "earliest":
            target = pos.log_start
        elif spec.kind == "latest":
            target = pos.log_end
        elif spec.kind == "current":
            target = pos.committed if pos.committed is not None else pos.log_end
        elif spec.kind == "offset":
            assert isinstance(spec.value, int)
            target = spec.value
        elif spec.kind == "shift_by":
            assert isinstance(spec.value, int)
            if pos.committed is None:
                raise InvalidRequestError(
                    f"cannot shift the offset of {pos.tp.topic}-{pos.tp.partition}: "
                    "it has no committed offset"
                )
            target = pos.committed + spec.value
        else:
            found = (by_time or {}).get(pos.tp)
            target = found if found is not None else pos.log_end
        new = max(pos.log_start, min(pos.log_end, target))
        rows.append(ResetRow(pos.tp, pos.committed, new))
    return rows
