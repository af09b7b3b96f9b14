"""Sending a group commit to the topic's commit leader over HTTP."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence

import httpx

from lakelog.append.result import AppendResult
from lakelog.errors import (
    AmbiguousCommitError,
    CommitLeaderUnreachableError,
    InvalidRequestError,
    LakelogError,
)
from lakelog.produce import PreparedBatch
from server.commit_leader.codec import decode_results, encode_batches

HANDOFF_MEDIA_TYPE = "application/vnd.apache.arrow.stream"
#: Sent with every handoff: the leader never hands a handed-off group on again.
FROM_BROKER_HEADER = "X-Lakelog-Handoff-From"


class HandoffClient:
    """One connection pool to the other brokers, for this broker's handoffs."""

    def __init__(
        self,
        broker_id: str,
        timeout_s: float,
        verify: ssl.SSLContext | bool = True,
        authorization: str | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.timeout_s = timeout_s
        self._verify = verify
        self._headers = {"content-type": HANDOFF_MEDIA_TYPE, FROM_BROKER_HEADER: broker_id}
        if authorization:
            self._headers["authorization"] = authorization
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=2.0),
                verify=self._verify,
                limits=httpx.Limits(max_keepalive_connections=32),
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def send(
        self,
        leader_url: str,
        topic: str,
        batches: Sequence[PreparedBatch],
        on_taken: Callable[[], None],
    ) -> list[AppendResult | LakelogError]:
        """The leader's outcome of each request, once its commit is durable.

        ``on_taken`` runs when the leader's answer starts (status 200): the group
        is queued there, in order, and the next group may be sent while this
        one commits. ``CommitLeaderUnreachableError``: the leader never got the
        group (commit it elsewhere). ``AmbiguousCommitError``: it may have
        committed it; nobody can say.
        """
        body = encode_batches(batches)
        url = f"{leader_url.rstrip('/')}/internal/v1/topics/{topic}/commits"
        taken = False
        try:
            async with self._http().stream(
                "POST", url, content=body, headers=self._headers
            ) as answer:
                if answer.status_code != 200:
                    # Anything but 200 comes before the leader takes a request (unreadable
                    # body, not allowed, unknown topic): nothing of the group is in its commit.
                    text = (await answer.aread()).decode(errors="replace")
                    raise CommitLeaderUnreachableError(
                        f"the commit leader of topic {topic!r} at {leader_url} refused the "
                        f"handoff ({answer.status_code}: {text[:200]})"
                    )
                taken = True
                on_taken()
                content = await answer.aread()
            results = decode_results(content)
        except InvalidRequestError as exc:  # an answer cut short or garbled after it began
            raise self._ambiguous(topic, leader_url, exc) from exc
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            if taken:
                raise self._ambiguous(topic, leader_url, exc) from exc
            raise CommitLeaderUnreachableError(
                f"the commit leader of topic {topic!r} at {leader_url} cannot be reached: {exc}"
            ) from exc
        except httpx.HTTPError as exc:
            raise self._ambiguous(topic, leader_url, exc) from exc
        if len(results) != len(batches):
            count = ValueError(f"{len(results)} outcomes for {len(batches)} requests")
            raise self._ambiguous(topic, leader_url, count)
        return results

    @staticmethod
    def _ambiguous(topic: str, leader_url: str, exc: Exception) -> AmbiguousCommitError:
        return AmbiguousCommitError(
            f"the commit leader of topic {topic!r} at {leader_url} took the records and did "
            f"not answer ({type(exc).__name__}: {exc}); they may or may not be written"
        )
