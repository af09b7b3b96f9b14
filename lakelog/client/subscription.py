"""What a consumer reads: its assigned partitions, their positions, pause flags, pending resets.

Kept apart from fetching so that the application (``assign``) or the group's
rebalances can decide the assignment. Not thread-safe, like the consumer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lakelog.client.structs import TopicPartition

ResetPolicy = Literal["earliest", "latest", "none"]
ResetTo = Literal["earliest", "latest"]


@dataclass
class _Partition:
    position: int | None = None
    paused: bool = False
    reset_to: ResetTo | None = None  # an explicit seek_to_beginning/end waiting to resolve
    high_watermark: int | None = None
    #: a group consumer looks the committed offset up once, before any reset policy
    use_committed: bool = True


class SubscriptionState:
    """The consumer's per-partition state, keyed by its assigned partitions."""

    def __init__(self, default_reset: ResetPolicy) -> None:
        self.default_reset: ResetPolicy = default_reset
        self._parts: dict[TopicPartition, _Partition] = {}

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions kept from before keep their position."""
        wanted = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        self._parts = {tp: self._parts.get(tp) or _Partition() for tp in wanted}

    def assigned(self) -> list[TopicPartition]:
        return list(self._parts)

    def _get(self, tp: TopicPartition) -> _Partition:
        try:
            return self._parts[tp]
        except KeyError:
            raise ValueError(f"partition {tp} is not assigned to this consumer") from None

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._parts

    def position(self, tp: TopicPartition) -> int | None:
        return self._get(tp).position

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        state = self._get(tp)
        state.position = offset
        state.reset_to = None
        state.use_committed = False

    def request_reset(self, tp: TopicPartition, to: ResetTo | None) -> None:
        """Forget the position; ``to``, else the default policy, decides where to go."""
        state = self._get(tp)
        state.position = None
        state.reset_to = to
        state.use_committed = False

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self._parts.items() if s.position is None]

    def wants_committed(self, tp: TopicPartition) -> bool:
        """No position yet and none chosen by the application or an out-of-range reset."""
        state = self._get(tp)
        return state.position is None and state.use_committed

    def positions(self) -> dict[TopicPartition, int]:
        """Every assigned partition that has a position (what a commit of "all consumed" sends)."""
        return {tp: s.position for tp, s in self._parts.items() if s.position is not None}

    def reset_target(self, tp: TopicPartition) -> ResetTo | Literal["none"]:
        """Where a partition without a position goes: an explicit seek, else the policy."""
        return self._get(tp).reset_to or self.default_reset

    def set_high_watermark(self, tp: TopicPartition, hwm: int) -> None:
        if tp in self._parts:
            self._parts[tp].high_watermark = hwm

    def high_watermark(self, tp: TopicPartition) -> int | None:
        return self._get(tp).high_watermark

    def pause(self, tp: TopicPartition) -> None:
        self._get(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        self._get(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._parts.items() if s.paused}

    def is_fetchable(self, tp: TopicPartition) -> bool:
        state = self._parts.get(tp)
        return state is not None and not state.paused and state.position is not None

    def fetchable(self) -> list[tuple[TopicPartition, int]]:
        """Partitions to fetch now, with the offset to fetch from."""
        return [
            (tp, s.position)
            for tp, s in self._parts.items()
            if not s.paused and s.position is not None
        ]


__all__ = ["ResetPolicy", "ResetTo", "SubscriptionState"]
