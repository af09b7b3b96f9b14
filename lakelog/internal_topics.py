"""Internal topics take appends only from the component that owns them, as Kafka's do.

Kafka refuses a client's produce to an internal topic with
INVALID_TOPIC_EXCEPTION ("cannot append to internal topic"). lakelog keeps the
same rule: ``__consumer_offsets`` holds every group's committed offsets in a
format only the group coordinator writes, and one foreign record there would
make the table unreadable for every group.

The rule lives in ``TopicLog`` (``prepare`` refuses a request before anything
is queued; ``stage``, the step every append goes through, refuses any batch
that slipped past), so every front end — the native API, the REST Proxy APIs,
the library's ``append``, the Spark sink, and any protocol listener added
later — gets it without code of its own. The owner appends with an
``InternalWriter``: a capability, not a flag, issued once by
``issue_writer`` to ``lakelog.groups.offsets_store`` and handed out by no
public API (``tests/lakelog/test_internal_topics.py`` checks that nothing
else asks for one).
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
