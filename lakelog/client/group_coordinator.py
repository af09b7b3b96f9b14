"""The consumer's side of the group protocol: membership, heartbeats, commits (aiokafka's split).

The consumer owns *what* it reads; this class owns *being a member*: the
two-step join (KIP-394), generation and member id, the heartbeat thread, the
client-side ``max_poll_interval_ms`` check, and commits stamped with the
generation. The heartbeat thread only flips flags (``rejoin_needed``,
``lost``) under one lock; joins, commits and listener callbacks happen on the
polling thread, which reads them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lakelog.client import group_requests as rq
from lakelog.client.connection import Connection
from lakelog.client.retry import Retrying, call_with_retries
from lakelog.client.structs import OffsetAndMetadata, TopicPartition
from lakelog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    LakelogError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from lakelog.groups.ids import validate_group_id

log = logging.getLogger(__name__)

ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
COOPERATIVE = "cooperative-sticky"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's group settings of a consumer (snake_case names, Kafka's defaults)."""

    group_id: str
    client_id: str = "lakelog-consumer"
    group_instance_id: str | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    partition_assignment_strategy: Sequence[str] = ("range", COOPERATIVE)

    def validate(self) -> None:
        validate_group_id(self.group_id)
        if self.session_timeout_ms <= 0 or self.heartbeat_interval_ms <= 0:
            raise ValueError("session_timeout_ms and heartbeat_interval_ms must be positive")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        if self.max_poll_interval_ms <= 0:
            raise ValueError("max_poll_interval_ms must be positive")
        strategies = list(self.partition_assignment_strategy)
        unknown = [s for s in strategies if s not in ASSIGNORS]
        if not strategies or unknown:
            raise ValueError(
                f"partition_assignment_strategy must name some of {', '.join(ASSIGNORS)}; "
                f"got {strategies!r}"
            )


class GroupCoordinator:
    """One consumer's membership in one group, via any broker (they forward to the coordinator)."""

    def __init__(self, conn: Connection, config: GroupConfig, retry: Retrying) -> None:
        config.validate()
        self.config = config
        self.group_id = config.group_id
        self._conn = conn
        self._retry = retry
        self._lock = threading.Lock()
        self._member_id = rq.NO_MEMBER
        self._generation = rq.NO_GENERATION
        self._protocol: str | None = None
        self._rejoin_needed = True
        self._lost = False
        self._fatal: LakelogError | None = None
        self._last_poll = time.monotonic()
        self._last_heartbeat_ok = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- state seen by the polling thread --------------------------------------

    @property
    def member_id(self) -> str:
        with self._lock:
            return self._member_id

    @property
    def generation_id(self) -> int:
        with self._lock:
            return self._generation

    @property
    def protocol(self) -> str | None:
        with self._lock:
            return self._protocol

    def in_generation(self) -> bool:
        """True while this member belongs to a completed generation nobody told it is over."""
        with self._lock:
            return self._generation != rq.NO_GENERATION and not self._rejoin_needed

    def rejoin_needed(self) -> bool:
        with self._lock:
            return self._rejoin_needed

    def request_rejoin(self) -> None:
        """Rejoin on the next poll (subscription changed, or a commit saw a rebalance)."""
        with self._lock:
            self._rejoin_needed = True

    def take_lost(self) -> bool:
        """Whether the last generation was lost (not revoked) since the last call; clears it."""
        with self._lock:
            lost, self._lost = self._lost, False
            return lost

    def raise_fatal(self) -> None:
        """Re-raise a non-retriable error the heartbeat thread met (e.g. FENCED_INSTANCE_ID)."""
        with self._lock:
            fatal, self._fatal = self._fatal, None
        if fatal is not None:
            raise fatal

    def poll_called(self) -> None:
        """The application polled: the max_poll_interval_ms clock starts again."""
        with self._lock:
            self._last_poll = time.monotonic()

    # -- join ------------------------------------------------------------------

    def join(self, topics: Iterable[str], owned: Iterable[TopicPartition]) -> rq.JoinResult:
        """Join (or rejoin) and wait for the rebalance to complete; returns the assignment.

        MEMBER_ID_REQUIRED gives the id to join with; UNKNOWN_MEMBER_ID (start over
        without one), REBALANCE_IN_PROGRESS and retriable errors are retried with
        backoff until ``default_api_timeout_ms``.
        """
        deadline = time.monotonic() + self._retry.timeout_ms / 1000
        attempt = 0
        topic_list = sorted(set(topics))
        owned_list = [rq.tp_json(tp) for tp in sorted(set(owned))]
        while True:
            body = {
                "member_id": self.member_id,
                "group_instance_id": self.config.group_instance_id,
                "client_id": self.config.client_id,
                "session_timeout_ms": self.config.session_timeout_ms,
                "rebalance_timeout_ms": self.config.max_poll_interval_ms,
                "protocols": list(self.config.partition_assignment_strategy),
                "topics": topic_list,
                "owned": owned_list,
            }
            timeout_s = self.config.max_poll_interval_ms / 1000 + self._conn.request_timeout_s
            try:
                result = rq.join(self._conn, self.group_id, body, timeout_s)
            except MemberIdRequiredError as exc:
                member = exc.details.get("member_id")
                if not isinstance(member, str) or not member:
                    raise
                with self._lock:
                    self._member_id = member
                continue
            except UnknownMemberIdError as exc:
                with self._lock:
                    self._member_id = rq.NO_MEMBER
                error: LakelogError = exc
            except RebalanceInProgressError as exc:
                error = exc
            except LakelogError as exc:
                if not exc.retriable:
                    raise
                error = exc
            else:
                with self._lock:
                    self._member_id = result.member_id
                    self._generation = result.generation_id
                    self._protocol = result.protocol
                    self._rejoin_needed = False
                    self._last_heartbeat_ok = time.monotonic()
                self._ensure_heartbeat_thread()
                return result
            if time.monotonic() >= deadline:
                raise error
            attempt += 1
            log.info("join of group %s failed, retrying: %s", self.group_id, error)
            time.sleep(self._retry.backoff.delay_s(attempt))

    # -- commits and committed offsets -------------------------------------------

    def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *, in_group: bool
    ) -> None:
        """Commit as a member of the current generation (``in_group``), else as a simple commit;
        a stale generation, forgotten member or rebalance makes this member rejoin and raises."""
        if not offsets:
            return
        if in_group:
            with self._lock:
                member, generation = self._member_id, self._generation
        else:
            member, generation = rq.NO_MEMBER, rq.NO_GENERATION
        try:
            self._retry(lambda: rq.commit(self._conn, self.group_id, member, generation, offsets))
        except (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError):
            if in_group:
                self.request_rejoin()
            raise

    def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of just these partitions (one topic's when they are of one)."""
        wanted = set(partitions)
        topics = {tp.topic for tp in wanted}
        if not topics:
            return {}
        topic = next(iter(topics)) if len(topics) == 1 else None
        found = self._retry(lambda: rq.fetch_committed(self._conn, self.group_id, topic))
        return {tp: om for tp, om in found.items() if tp in wanted}

    # -- leaving -----------------------------------------------------------------

    def leave(self, reason: str) -> None:
        """Leave the group now (the others rebalance at once instead of after a timeout)."""
        with self._lock:
            member = self._member_id
            had_generation = self._generation != rq.NO_GENERATION
            self._member_id = rq.NO_MEMBER
            self._generation = rq.NO_GENERATION
            self._protocol = None
            self._rejoin_needed = True
        if not member or not had_generation:
            return
        log.info("member %s leaves group %s: %s", member, self.group_id, reason)
        try:
            call_with_retries(
                lambda: rq.leave(self._conn, self.group_id, member),
                backoff=self._retry.backoff,
                timeout_ms=min(self._retry.timeout_ms, self.config.session_timeout_ms),
            )
        except UnknownMemberIdError:
            pass  # already expired: the coordinator has forgotten us, which is what we wanted
        except LakelogError as exc:
            log.warning(
                "leaving group %s failed (the session timeout will expire member %s): %s",
                self.group_id,
                member,
                exc,
            )

    def close(self) -> None:
        """Stop the heartbeat thread (call ``leave`` first to leave the group)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.config.heartbeat_interval_ms / 1000 + 5)

    # -- heartbeat thread -------------------------------------------------------

    def _ensure_heartbeat_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._heartbeat_loop,
                name=f"lakelog-heartbeat-{self.group_id}",
                daemon=True,
            )
            self._thread.start()

    def _heartbeat_loop(self) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        while not self._stop.wait(interval_s):
            try:
                self._heartbeat_once()
            except Exception:  # the thread must survive anything; the failure is logged
                log.exception("heartbeat of group %s failed unexpectedly", self.group_id)

    def _heartbeat_once(self) -> None:
        now = time.monotonic()
        with self._lock:
            member, generation = self._member_id, self._generation
            active = generation != rq.NO_GENERATION and not self._rejoin_needed
            idle_s = now - self._last_poll
            session_expired = now - self._last_heartbeat_ok > self.config.session_timeout_ms / 1000
        if not member or generation == rq.NO_GENERATION:
            return
        if idle_s > self.config.max_poll_interval_ms / 1000:
            log.warning(
                "consumer of group %s did not poll for %.1f s (max_poll_interval_ms=%d): "
                "leaving the group so its partitions go to a live member",
                self.group_id,
                idle_s,
                self.config.max_poll_interval_ms,
            )
            with self._lock:
                self._lost = True
            self.leave("max_poll_interval_ms exceeded")
            return
        if not active:
            return
        try:
            rq.heartbeat(self._conn, self.group_id, member, generation)
        except RebalanceInProgressError:
            self._on_heartbeat_error(generation, lost=False, forget_member=False)
        except IllegalGenerationError:
            self._on_heartbeat_error(generation, lost=True, forget_member=False)
        except UnknownMemberIdError:
            self._on_heartbeat_error(generation, lost=True, forget_member=True)
        except FencedInstanceIdError as exc:
            with self._lock:
                self._fatal = exc
            self._on_heartbeat_error(generation, lost=True, forget_member=True)
        except LakelogError as exc:
            log.info("heartbeat to group %s failed: %s", self.group_id, exc)
            if session_expired:
                log.warning(
                    "no successful heartbeat to group %s within session_timeout_ms=%d: "
                    "assuming the partitions are lost",
                    self.group_id,
                    self.config.session_timeout_ms,
                )
                self._on_heartbeat_error(generation, lost=True, forget_member=False)
        else:
            with self._lock:
                self._last_heartbeat_ok = time.monotonic()

    def _on_heartbeat_error(self, generation: int, *, lost: bool, forget_member: bool) -> None:
        with self._lock:
            if self._generation != generation:
                return  # the polling thread already moved to a newer generation
            self._rejoin_needed = True
            if lost:
                self._lost = True
                self._generation = rq.NO_GENERATION
            if forget_member:
                self._member_id = rq.NO_MEMBER


__all__ = ["ASSIGNORS", "COOPERATIVE", "GroupConfig", "GroupCoordinator"]
