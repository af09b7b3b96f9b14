"""The group protocol's requests as plain functions over a Connection (docs/consumer-groups.md).

Shared by the consumer's coordinator and the admin client. No retries and no
state: callers decide what is worth repeating (a join is, a stale commit is not).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from lakelog.client.connection import Connection
from lakelog.client.structs import OffsetAndMetadata, TopicPartition
from lakelog.errors import error_for_code

#: generation and member id of a commit made outside any generation (manual assignment, admin).
NO_GENERATION = -1
NO_MEMBER = ""


def group_path(group_id: str) -> str:
    return f"/v1/groups/{quote(group_id, safe='')}"


def member_path(group_id: str, member_id: str) -> str:
    return f"{group_path(group_id)}/members/{quote(member_id, safe='')}"


def tp_json(tp: TopicPartition) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition}


def tp_from_json(item: Mapping[str, Any]) -> TopicPartition:
    return TopicPartition(str(item["topic"]), int(item["partition"]))


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A completed rebalance as this member sees it."""

    generation_id: int
    member_id: str
    protocol: str
    assignment: list[TopicPartition]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> JoinResult:
        return cls(
            generation_id=int(body["generation_id"]),
            member_id=str(body["member_id"]),
            protocol=str(body.get("protocol") or ""),
            assignment=[tp_from_json(a) for a in body.get("assignment") or []],
        )


def join(
    conn: Connection,
    group_id: str,
    body: Mapping[str, Any],
    timeout_s: float,
) -> JoinResult:
    """One join call: long-polls until the rebalance completes (MEMBER_ID_REQUIRED is raised)."""
    response = conn.request(
        "POST", f"{group_path(group_id)}/members", json=dict(body), timeout_s=timeout_s
    )
    return JoinResult.from_json(response.json())


def heartbeat(conn: Connection, group_id: str, member_id: str, generation_id: int) -> None:
    conn.request(
        "POST",
        f"{member_path(group_id, member_id)}/heartbeat",
        json={"generation_id": generation_id},
    )


def leave(conn: Connection, group_id: str, member_id: str) -> None:
    conn.request("DELETE", member_path(group_id, member_id))


def commit(
    conn: Connection,
    group_id: str,
    member_id: str,
    generation_id: int,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> None:
    """Commit ``offsets``; raises the first per-partition error the broker reports."""
    body = {
        "member_id": member_id,
        "generation_id": generation_id,
        "offsets": [
            {**tp_json(tp), "offset": om.offset, "metadata": om.metadata}
            for tp, om in offsets.items()
        ],
    }
    answer = conn.request("POST", f"{group_path(group_id)}/offsets", json=body).json()
    for item in answer.get("offsets") or []:
        code = int(item.get("error_code") or 0)
        if code != 0:
            cls = error_for_code(code)
            where = f"{item.get('topic')}-{item.get('partition')}"
            error = item.get("error") or cls.name
            raise cls(f"commit of {where} for group {group_id!r} failed: {error}")


def fetch_committed(
    conn: Connection, group_id: str, topic: str | None = None
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Every committed offset of the group (of one topic if given); uncommitted are absent."""
    params = {"topic": topic} if topic is not None else None
    body = conn.get_json(f"{group_path(group_id)}/offsets", params=params)
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for item in body.get("offsets") or []:
        stamp = item.get("commit_timestamp")
        out[tp_from_json(item)] = OffsetAndMetadata(
            int(item["offset"]),
            str(item.get("metadata") or ""),
            None if stamp is None else int(stamp),
        )
    return out


__all__ = [
    "NO_GENERATION",
    "NO_MEMBER",
    "JoinResult",
    "commit",
    "fetch_committed",
    "group_path",
    "heartbeat",
    "join",
    "leave",
    "member_path",
    "tp_from_json",
    "tp_json",
]
