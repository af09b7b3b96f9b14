"""Internal topics take appends only from the component that owns them, as Kafka's do.

``__consumer_offsets`` holds every group's committed offsets in a format only the
group coordinator writes: one foreign record would make it unreadable for every
group, so a client's append gets Kafka's INVALID_TOPIC_EXCEPTION. The rule lives in
``TopicLog`` (``prepare``, and ``stage``, which every append goes through), so every
front end gets it without code of its own. The owner appends with an
``InternalWriter``: a capability, not a flag, issued once by ``issue_writer`` and
handed out by no public API.
"""

from __future__ import annotations

from typing import Final, final

from lakelog.errors import InternalTopicError
from lakelog.topic_config import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPICS

#: Who writes each internal topic, for the error a refused client reads.
WRITTEN_BY: Final[dict[str, str]] = {
    CONSUMER_OFFSETS_TOPIC: "the group coordinator; commit offsets through a consumer group",
}

_SEAL: Final = object()


@final
class InternalWriter:
    """The right to append to one internal topic; only ``issue_writer`` makes one."""

    __slots__ = ("topic",)

    def __init__(self, topic: str, seal: object) -> None:
        if seal is not _SEAL:
            raise TypeError("an InternalWriter is issued only to the owner of an internal topic")
        self.topic = topic

    def __repr__(self) -> str:
        return f"InternalWriter({self.topic!r})"


def issue_writer(topic: str) -> InternalWriter:
    """The writer of an internal topic, for its owner alone (see the module docstring)."""
    if topic not in INTERNAL_TOPICS:
        raise ValueError(f"{topic!r} is not an internal topic")
    return InternalWriter(topic, _SEAL)


def check_append(topic: str, writer: InternalWriter | None) -> None:
    """INVALID_TOPIC_EXCEPTION for an append to an internal topic without its writer."""
    if topic in INTERNAL_TOPICS and (writer is None or writer.topic != topic):
        owner = WRITTEN_BY.get(topic, "lakelog itself")
        raise InternalTopicError(
            f"cannot append to internal topic {topic}: it is written only by {owner}"
        )
