"""HTTP transport to a lakelog cluster: bootstrap list, broker discovery, failover, errors.

Every broker serves every topic (one shared storage root), so there is no
leader to find: when a broker does not answer, or answers a retriable or 5xx
error, the request goes to the next one (bootstrap list plus ``/v1/brokers``).
Brokers that just failed go last for ``reconnect_backoff_ms``, so one dead host
does not cost a timeout on every request. One pass per call, no sleeping:
backoff and deadlines belong to the caller, which knows what is worth repeating.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

import httpx

from lakelog import __version__
from lakelog.client.errors import NetworkError
from lakelog.errors import (
    InvalidConfigError,
    InvalidRequestError,
    LakelogError,
    RequestTimedOutError,
    UnknownServerError,
    error_for_code,
)

log = logging.getLogger(__name__)

QueryParams = Mapping[str, str | int | float | bool | None]


#: Names the broker's HTTP URL in the answer its Kafka listener gives an HTTP request.
HTTP_URL_HEADER = "X-Lakelog-Http-Url"
MISDIRECTED = 421


def kafka_listener_redirect(url: str, response: httpx.Response) -> str | None:
    """Where to send what was sent to ``url`` if that is a lakelog Kafka listener: the same
    host (credentials stay with the host the user named) on the HTTP port it names."""
    told = response.headers.get(HTTP_URL_HEADER)
    if response.status_code != MISDIRECTED or not told:
        return None
    http_url = httpx.URL(told)
    if http_url.port is None:
        return None
    moved = str(httpx.URL(url).copy_with(scheme=http_url.scheme, port=http_url.port))
    return moved.rstrip("/") if moved.rstrip("/") != url else None


def parse_bootstrap(servers: str | Sequence[str]) -> list[str]:
    """Broker base URLs from ``"host:port,http://other:8082"`` or a list, in order.

    A bare ``host:port`` means http; duplicates are dropped so no pass tries a broker twice.
    """
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    urls: list[str] = []
    for item in items:
        text = item.strip().rstrip("/")
        if not text:
            continue
        if "://" not in text:
            text = f"http://{text}"
        if not text.startswith(("http://", "https://")):
            raise ValueError(f"bootstrap server {item!r} must be host:port or an http(s) URL")
        if text not in urls:
            urls.append(text)
    if not urls:
        raise ValueError("bootstrap_servers names no broker")
    return urls


def error_from_response(response: httpx.Response) -> LakelogError:
    """The LakelogError of a broker's error body, so callers check ``.retriable``, not statuses.

    The Kafka code picks the class and ``details`` become ``.details``. A body
    that is not ours (a proxy's 502 page) is a network problem if 5xx, else a bad request.
    """
    where = f"{response.request.method} {response.request.url.path}"
    body = _json_or_none(response)
    if isinstance(body, dict) and isinstance(body.get("error_code"), int):
        cls = error_for_code(body["error_code"])
        message = str(body.get("message") or body.get("error") or response.reason_phrase)
        raw = body.get("details")
        details = {k: v for k, v in raw.items() if k != "message"} if isinstance(raw, dict) else {}
        if cls is UnknownServerError and body["error_code"] != UnknownServerError.code:
            details.setdefault("error_code", body["error_code"])
            details.setdefault("error", body.get("error"))
        return cls(message, **details)
    text = response.text[:200]
    if response.status_code >= 500:
        return NetworkError(f"{where}: HTTP {response.status_code} without an error body: {text}")
    return InvalidRequestError(f"{where}: HTTP {response.status_code}: {text}")


#: Where each unset security option of a Connection is read from (how the CLI passes flags on).
SECURITY_ENV = {
    "api_key": "LAKELOG_API_KEY",
    "token": "LAKELOG_TOKEN",
    "client_id": "LAKELOG_CLIENT_ID",
    "ssl_cafile": "LAKELOG_SSL_CAFILE",
    "ssl_certfile": "LAKELOG_SSL_CLIENT_CERTFILE",
    "ssl_keyfile": "LAKELOG_SSL_CLIENT_KEYFILE",
}


def _or_env(value: str | None, option: str) -> str | None:
    return value or os.environ.get(SECURITY_ENV[option])


def security_headers(
    api_key: str | None, token: str | None, client_id: str | None
) -> dict[str, str]:
    """Credential and client-id headers (unset values from ``SECURITY_ENV``)."""
    api_key = _or_env(api_key, "api_key")
    token = _or_env(token, "token")
    client_id = _or_env(client_id, "client_id")
    headers = {"X-API-Key": api_key} if api_key else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if client_id:
        headers["X-Lakelog-Client-Id"] = client_id
    return headers


def ssl_context(
    cafiles: Sequence[str],
    certfile: str | None = None,
    keyfile: str | None = None,
    *,
    trust_system: bool = False,
    purpose: str = "",
) -> ssl.SSLContext:
    """A TLS client context trusting ``cafiles`` (plus the system CAs with ``trust_system``).

    A file that cannot be loaded is refused here, by name, not at the first
    request as an opaque handshake failure.
    """
    if keyfile and not certfile:
        raise InvalidConfigError(f"ssl_keyfile {keyfile!r} was given without ssl_certfile")
    try:
        if trust_system or not cafiles:
            context, extra = ssl.create_default_context(), list(cafiles)
        else:
            context, extra = ssl.create_default_context(cafile=cafiles[0]), list(cafiles[1:])
        for cafile in extra:
            context.load_verify_locations(cafile=cafile)
        if certfile:
            context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        files = ", ".join(repr(f) for f in (*cafiles, certfile, keyfile) if f)
        raise InvalidConfigError(f"cannot load the TLS files {files}{purpose}: {exc}") from exc
    return context


def tls_verification(
    cafile: str | None, certfile: str | None = None, keyfile: str | None = None
) -> ssl.SSLContext | bool:
    """httpx's ``verify``: trust ``cafile`` (else the system CAs), present ``certfile`` for
    mutual TLS; unset arguments come from the environment."""
    cafile = _or_env(cafile, "ssl_cafile")
    certfile = _or_env(certfile, "ssl_certfile")
    keyfile = _or_env(keyfile, "ssl_keyfile")
    if not cafile and not certfile and not keyfile:
        return True
    return ssl_context([cafile] if cafile else [], certfile, keyfile)


@dataclass(frozen=True)
class ProbeFailure:
    """Why one broker did not answer a probe; ``final`` when trying it again cannot help."""

    url: str
    cause: str
    final: bool


def describe_network_failure(exc: BaseException) -> str:
    """Why a broker could not be reached, in an operator's words.

    The chain of causes is searched for the socket error httpx wraps, so the
    message names what happened rather than the wrapper.
    """
    for seen in _causes(exc):
        if isinstance(seen, httpx.ConnectTimeout):
            return "connection timed out"
        if isinstance(seen, httpx.TimeoutException):
            return "connected, but no answer in time"
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return f"name not resolved ({seen.strerror or seen})"
        if isinstance(seen, httpx.RemoteProtocolError):
            return f"not an HTTP answer ({seen}); is it a lakelog broker?"
        if isinstance(seen, ssl.SSLCertVerificationError):
            detail = seen.verify_message or seen.reason or seen.strerror
            return f"TLS certificate not trusted ({detail}); is the CA given (ssl.cafile)?"
        if isinstance(seen, ssl.SSLError):
            return f"TLS handshake failed ({seen.reason or seen.strerror})"
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror[0].lower() + seen.strerror[1:]
    return f"{type(exc).__name__}: {exc}"


class Connection:
    """Thread-safe access to a cluster: ``request()`` returns a 2xx response or raises.

    ``transport`` replaces httpx's network layer (tests); ``discover=False``
    keeps to the bootstrap list. Security options: docs/security.md;
    ``ssl_context`` replaces the three ``ssl_*`` files.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        reconnect_backoff_ms: int = 1_000,
        metadata_max_age_ms: int = 300_000,
        discover: bool = True,
        transport: httpx.BaseTransport | None = None,
        api_key: str | None = None,
        token: str | None = None,
        client_id: str | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._brokers = list(self._bootstrap)
        self._current = self._bootstrap[0]
        self._failed_at: dict[str, float] = {}
        self._request_timeout_s = request_timeout_ms / 1000
        self._connect_timeout_s = connect_timeout_ms / 1000
        self._reconnect_backoff_s = reconnect_backoff_ms / 1000
        self._metadata_max_age_s = metadata_max_age_ms / 1000
        self._discover = discover
        self._discovered_at: float | None = None
        self._discovering = False
        self._lock = threading.Lock()
        self._closed = False
        self._http = httpx.Client(
            transport=transport,
            headers={
                "User-Agent": f"lakelog-client/{__version__}",
                **security_headers(api_key, token, client_id),
            },
            verify=ssl_context or tls_verification(ssl_cafile, ssl_certfile, ssl_keyfile),
            timeout=httpx.Timeout(self._request_timeout_s, connect=self._connect_timeout_s),
            follow_redirects=False,
        )
        self.cluster_id: str | None = None

    # -- state -----------------------------------------------------------------

    @property
    def brokers(self) -> list[str]:
        """Every broker URL this client may use, in preference order."""
        with self._lock:
            return list(self._brokers)

    @property
    def current(self) -> str:
        """The broker requests go to first (the last one that answered)."""
        with self._lock:
            return self._current

    @property
    def request_timeout_s(self) -> float:
        return self._request_timeout_s

    @property
    def connect_timeout_s(self) -> float:
        return self._connect_timeout_s

    @property
    def bootstrap_servers(self) -> list[str]:
        return list(self._bootstrap)

    def _candidates(self) -> list[str]:
        """This pass's order: current broker first, then the ring; recent failures last."""
        with self._lock:
            brokers = self._brokers
            start = brokers.index(self._current) if self._current in brokers else 0
            ring = brokers[start:] + brokers[:start]
            now = time.monotonic()

            def recently_failed(url: str) -> bool:
                failed = self._failed_at.get(url)
                return failed is not None and now - failed < self._reconnect_backoff_s

            return sorted(ring, key=recently_failed)

    def _answered(self, url: str) -> None:
        with self._lock:
            self._current = url
            self._failed_at.pop(url, None)

    def _retarget(self, url: str, http_url: str) -> None:
        """``url`` is a Kafka listener: use ``http_url`` in its place from now on."""
        log.warning(
            "%s is a lakelog broker's Kafka listener; using its HTTP API at %s (give that "
            "as --bootstrap-server to skip this step)",
            url,
            http_url,
        )
        with self._lock:
            self._bootstrap = [http_url if u == url else u for u in self._bootstrap]
            self._brokers = [http_url if u == url else u for u in self._brokers]
            if self._current == url:
                self._current = http_url

    def _failed(self, url: str, error: LakelogError) -> None:
        log.info("broker %s failed (%s); trying the next broker", url, error)
        with self._lock:
            self._failed_at[url] = time.monotonic()
            self._discovered_at = None  # the cluster changed: ask for the broker list again

    # -- requests --------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: QueryParams | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        failover: bool = True,
    ) -> httpx.Response:
        """Send to the current broker, then to the others while the failure is the broker's.

        An error neither retriable nor 5xx is raised at once (it would be the
        same everywhere); otherwise the last one after every broker was tried.
        """
        if self._closed:
            raise RuntimeError("the connection is closed")
        if self._discover:
            self._maybe_discover()
        return self._one_pass(method, path, params, json, content, headers, timeout_s, failover)

    def _one_pass(
        self,
        method: str,
        path: str,
        params: QueryParams | None,
        json: Any,
        content: bytes | None,
        headers: Mapping[str, str] | None,
        timeout_s: float | None,
        failover: bool,
    ) -> httpx.Response:
        total = self._request_timeout_s if timeout_s is None else timeout_s
        timeout = httpx.Timeout(total, connect=min(self._connect_timeout_s, total))
        query = {k: v for k, v in (params or {}).items() if v is not None}
        last: LakelogError | None = None
        candidates = self._candidates()
        for url in candidates:  # a Kafka listener's HTTP URL is inserted to be tried next
            try:
                response = self._http.request(
                    method,
                    url + path,
                    params=query,
                    json=json,
                    content=content,
                    headers=headers,
                    timeout=timeout,
                )
            except httpx.TimeoutException as exc:
                error: LakelogError = RequestTimedOutError(
                    f"{method} {url}{path}: no answer within {total:g} s ({type(exc).__name__})"
                )
            except httpx.TransportError as exc:
                error = NetworkError(f"{method} {url}{path}: {type(exc).__name__}: {exc}")
            except RuntimeError as exc:  # httpx refuses requests once the client is closed
                if not self._closed:
                    raise
                raise NetworkError(f"{method} {url}{path}: the connection is closed") from exc
            else:
                if response.is_success:
                    self._answered(url)
                    return response
                moved = kafka_listener_redirect(url, response)
                if moved is not None:
                    self._retarget(url, moved)
                    candidates.insert(candidates.index(url) + 1, moved)
                    continue
                error = error_from_response(response)
                if not error.retriable and response.status_code < 500:
                    self._answered(url)
                    raise error
            if self._closed:
                raise error  # closed while waiting: not the broker's fault, try no other
            self._failed(url, error)
            last = error
            if not failover:
                break
        assert last is not None
        raise last

    def get_json(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs).json()

    # -- discovery -------------------------------------------------------------

    def _maybe_discover(self) -> None:
        with self._lock:
            fresh = (
                self._discovered_at is not None
                and time.monotonic() - self._discovered_at < self._metadata_max_age_s
            )
            if fresh or self._discovering:
                return
            self._discovering = True
        try:
            self.refresh_brokers()
        except LakelogError as exc:
            log.debug("broker discovery failed, keeping %s: %s", self.brokers, exc)
        finally:
            with self._lock:
                self._discovering = False

    def refresh_brokers(self) -> list[str]:
        """Ask the cluster which brokers are alive; bootstrap servers are always kept
        (an operator named them, and they may come back)."""
        body = self._one_pass("GET", "/v1/brokers", None, None, None, None, None, True).json()
        return self._adopt_brokers(body)

    def _adopt_brokers(self, body: Any) -> list[str]:
        alive = [u.rstrip("/") for u in (b.get("url") for b in body.get("brokers", [])) if u]
        with self._lock:
            self.cluster_id = body.get("cluster_id", self.cluster_id)
            merged = list(self._bootstrap)
            merged += [u for u in alive if u not in merged]
            self._brokers = merged
            if self._current not in merged:
                self._current = merged[0]
            self._discovered_at = time.monotonic()
            return list(merged)

    def probe(
        self, urls: Sequence[str] | None = None, connect_timeout_s: float | None = None
    ) -> list[ProbeFailure]:
        """One pass over ``urls`` (the bootstrap brokers) until one answers ``/v1/brokers``.

        Returns ``[]`` once one answered, else why each failed. Any lakelog
        answer counts, even an error: an authentication failure is for the
        next request to report. The CLI repeats this until its deadline.
        """
        connect_s = self._connect_timeout_s
        if connect_timeout_s is not None:
            connect_s = max(min(connect_s, connect_timeout_s), 0.001)
        timeout = httpx.Timeout(self._request_timeout_s, connect=connect_s)
        failures: list[ProbeFailure] = []
        for url in self._bootstrap if urls is None else urls:
            try:
                response = self._http.get(url + "/v1/brokers", timeout=timeout)
            except httpx.TransportError as exc:
                # A TLS failure: the same certificates fail the same way on every attempt.
                tls = any(isinstance(e, ssl.SSLError) for e in _causes(exc))
                failures.append(ProbeFailure(url, describe_network_failure(exc), tls))
                continue
            moved = kafka_listener_redirect(url, response)
            if moved is not None:
                self._retarget(url, moved)
                return self.probe([moved], connect_timeout_s)
            body = _json_or_none(response)
            if response.is_success and isinstance(body, dict) and "brokers" in body:
                self._adopt_brokers(body)
                self._answered(url)
                return []
            if isinstance(body, dict) and isinstance(body.get("error_code"), int):
                self._answered(url)
                return []
            cause = f"HTTP {response.status_code} that is not a lakelog broker's answer"
            failures.append(ProbeFailure(url, cause, response.status_code < 500))
        return failures

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        self._http.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ClientBase:
    """A client over a shared ``connection``, or over its own, which it closes with itself."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        connection: Connection | None,
        request_timeout_ms: int,
        transport: httpx.BaseTransport | None,
    ) -> None:
        self._owns_connection = connection is None
        self._conn = connection or Connection(
            bootstrap_servers, request_timeout_ms=request_timeout_ms, transport=transport
        )

    @property
    def connection(self) -> Connection:
        return self._conn

    def close(self) -> None:
        if self._owns_connection:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, innermost last."""
    seen: BaseException | None = exc
    while seen is not None:
        yield seen
        seen = seen.__cause__ or seen.__context__


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


__all__ = [
    "ClientBase",
    "Connection",
    "ProbeFailure",
    "describe_network_failure",
    "error_from_response",
    "parse_bootstrap",
]
