"""Topic ids and names, for the Kafka APIs that name topics by id.

Fetch v13+, Produce v13, OffsetCommit v10, OffsetFetch v10 and DeleteTopics v6
name a topic by the UUID Metadata answers for it (``topic_uuid``). Names are
looked up in the catalog's pointers and kept: an id not kept makes one new
listing (requests missing at the same moment share it), and a kept id is
checked against the topic's current log, so the id of a topic deleted or
created again names nothing (UNKNOWN_TOPIC_ID, as in Kafka).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lakelog.errors import LakelogError, UnknownTopicIdError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from server.broker import Broker

log = logging.getLogger(__name__)

NO_TOPIC_ID = uuid.UUID(int=0)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic's id as the UUID Kafka clients expect; lakelog ids that are not UUIDs map stably."""
    try:
        return uuid.UUID(topic_id)
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, f"lakelog-topic:{topic_id}")


def names_by_id(ids: Mapping[str, str]) -> dict[uuid.UUID, str]:
    """Topic names by their Kafka UUID, from the catalog's ids by name."""
    return {topic_uuid(topic_id): name for name, topic_id in ids.items()}


def unknown_topic_id(topic_id: uuid.UUID) -> UnknownTopicIdError:
    return UnknownTopicIdError(f"no topic has the id {topic_id}", topic_id=str(topic_id))


class TopicIds:
    """One broker's lookups between topic ids and names; safe for concurrent requests."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._names: dict[uuid.UUID, str] = {}
        self._listing: asyncio.Future[None] | None = None
        #: Listings started so far: a miss waits for one that started after it.
        self._listings = 0

    async def names(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The current name of each id that names a topic now; the others are left out."""
        wanted = set(ids)
        found = await self._checked(wanted)
        missing = wanted - found.keys()
        if missing:
            try:
                await self._list_after(self._listings)
            except LakelogError as exc:  # the ids stay unknown: retriable for the client
                log.warning("topic ids could not be listed: %s", exc)
                return found
            found.update(await self._checked(missing))
        return found

    async def topic_id(self, name: str) -> uuid.UUID:
        """The id of the topic named ``name`` now (UNKNOWN_TOPIC_OR_PARTITION if none)."""
        topic_log = await self.broker.topic(name)
        found = topic_uuid(topic_log.topic_id)
        self._names[found] = name
        return found

    async def _checked(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The kept names of ``ids`` whose topic still has that id."""
        found = {}
        for topic_id in ids:
            name = self._names.get(topic_id)
            if name is None:
                continue
            try:
                topic_log = await self.broker.topic(name)
            except UnknownTopicOrPartitionError:
                continue
            if topic_uuid(topic_log.topic_id) == topic_id:
                found[topic_id] = name
        return found

    async def _list_after(self, seen: int) -> None:
        """Wait for a listing that started after ``seen`` listings had: one already under
        way may predate the topic the caller looks for."""
        while True:
            listing = self._listing
            if listing is not None and self._listings > seen:
                await asyncio.shield(listing)
                return
            if listing is not None and not listing.done():
                await asyncio.shield(listing)
                continue
            self._listings += 1
            self._listing = asyncio.ensure_future(self._list())

    async def _list(self) -> None:
        ids = await asyncio.to_thread(self.broker.catalog.topic_ids)
        self._names = names_by_id(ids)


def by_topic_and_id(
    answers: Iterable[tuple[str | None, uuid.UUID, dict[str, Any]]], name: str, partitions: str
) -> list[dict[str, Any]]:
    """Partition answers grouped under their topics in request order, each topic given by
    its name (field ``name``) and its id (``topic_id``): ``build`` keeps the one the
    version has, so one answer serves the versions before and after topic ids."""
    grouped: dict[tuple[str | None, uuid.UUID], list[dict[str, Any]]] = {}
    for topic, topic_id, answer in answers:
        grouped.setdefault((topic, topic_id), []).append(answer)
    return [
        {name: topic, "topic_id": topic_id, partitions: parts}
        for (topic, topic_id), parts in grouped.items()
    ]
