"""One broker's security state: credentials, and ACLs and quota overrides refreshed from storage.

ACLs and quota overrides live in the storage root (``lakelog.security.stored_config``)
so every broker enforces the same rules; each broker re-reads them every
``acl_refresh_ms``. Until the first successful read with authentication on,
nothing but super users is allowed (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

from lakelog.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    InvalidConfigError,
    LakelogError,
    SubjectAuthorizationFailedError,
    TopicAuthorizationFailedError,
)
from lakelog.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    Decision,
    Operation,
    ResourceType,
    authorize,
    parse_super_users,
)
from lakelog.security.scram import Credentials, ScramCredential, ScramStore
from lakelog.security.stored_config import AclStore, QuotaStore
from lakelog.storage import Storage
from server.metrics import BrokerMetrics
from server.security.credentials import ApiKeys, AuthMode, JwtVerifier
from server.security.quotas import QuotaManager
from server.settings import BrokerSettings

log = logging.getLogger(__name__)
denials_log = logging.getLogger("lakelog.security")

DENIED: dict[ResourceType, type[LakelogError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.SUBJECT: SubjectAuthorizationFailedError,
}


def denial(
    principal: str, operation: Operation, resource_type: ResourceType, name: str
) -> LakelogError:
    """The resource's *_AUTHORIZATION_FAILED error, over HTTP and Kafka alike."""
    return DENIED[resource_type](
        f"principal {principal} is not authorized to {operation.value} "
        f"{resource_type.value} {name!r}",
        principal=principal,
        operation=operation.value,
        resource_type=resource_type.value,
        resource_name=name,
    )


def load_api_keys(settings: BrokerSettings) -> ApiKeys | None:
    if settings.auth_mode not in ("api_key", "any") or settings.api_keys_file is None:
        if settings.auth_mode == "api_key":
            raise InvalidConfigError("auth_mode=api_key needs api_keys_file")
        return None
    return ApiKeys.from_file(settings.api_keys_file)


def load_verifier(settings: BrokerSettings) -> JwtVerifier | None:
    configured = settings.jwt_secret is not None or settings.jwt_public_key_file is not None
    if settings.auth_mode not in ("jwt", "any") or not configured:
        if settings.auth_mode == "jwt":
            raise InvalidConfigError("auth_mode=jwt needs jwt_secret or jwt_public_key_file")
        return None
    if settings.jwt_secret is not None and settings.jwt_public_key_file is not None:
        raise InvalidConfigError("set jwt_secret (HMAC) or jwt_public_key_file, not both")
    public_key = None
    if settings.jwt_public_key_file is not None:
        try:
            public_key = Path(settings.jwt_public_key_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidConfigError(f"cannot read jwt_public_key_file: {exc}") from None
    return JwtVerifier(
        secret=settings.jwt_secret.get_secret_value() if settings.jwt_secret else None,
        public_key=public_key,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        principal_claim=settings.jwt_principal_claim,
    )


class BrokerSecurity:
    def __init__(self, settings: BrokerSettings, storage: Storage, metrics: BrokerMetrics) -> None:
        self.settings = settings
        self.mode: AuthMode = settings.auth_mode
        self.api_keys = load_api_keys(settings)
        self.verifier = load_verifier(settings)
        if self.mode == "any" and self.api_keys is None and self.verifier is None:
            raise InvalidConfigError("auth_mode=any needs api_keys_file and/or a JWT key")
        try:
            self.super_users = parse_super_users(settings.super_users)
        except LakelogError as exc:
            raise InvalidConfigError(f"invalid super_users: {exc.message}") from None
        self.metrics = metrics
        self.acl_store = AclStore(storage)
        self.quota_store = QuotaStore(storage)
        self.scram_store = ScramStore(storage)
        self.scram: Credentials = {}
        self.scram_version = 0
        self.quotas = QuotaManager(settings, metrics)
        self.acls: frozenset[AclBinding] = frozenset()
        self.acl_version = 0
        self.quota_version = 0
        self.acls_loaded = False
        self._task: asyncio.Task[None] | None = None
        self._refresh_lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether requests are authenticated and authorized (ACLs are off without auth)."""
        return self.mode != "none"

    def refresh(self) -> None:
        """Read newer ACL, quota and SCRAM credential snapshots from the root (blocking I/O)."""
        with self._refresh_lock:
            acls = self.acl_store.load(self.acl_version)
            if acls is not None:
                self.acl_version, self.acls = acls
            self.acls_loaded = True
            quotas = self.quota_store.load(self.quota_version)
            if quotas is not None:
                self.quota_version, overrides = quotas
                self.quotas.set_overrides(overrides)
            scram = self.scram_store.load(self.scram_version)
            if scram is not None:
                self.scram_version, self.scram = scram
            self.quotas.forget_idle()

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored SCRAM credential of ``user`` for ``mechanism`` (as last refreshed)."""
        return self.scram.get((user, mechanism))

    async def catch_up(self, acl_version: int) -> None:
        """Re-read the ACLs now when a peer forwarded this request with a newer version.

        The broker a client talks to authorizes with the ACLs it has read; the
        group coordinator it forwards to must not judge by older ones, or an ACL
        change would look applied on one broker and not yet on the next.
        """
        if self.enabled and acl_version > self.acl_version:
            await asyncio.to_thread(self.refresh)

    async def start(self) -> None:
        await asyncio.to_thread(self.refresh)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.acl_refresh_ms / 1000)
            try:
                await asyncio.to_thread(self.refresh)
            except (OSError, LakelogError) as exc:
                log.warning("could not refresh ACLs/quotas (keeping the last ones): %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def check(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> Decision:
        if not self.enabled:
            return Decision(True, "authentication is off")
        if not self.acls_loaded and principal not in self.super_users:
            return Decision(False, "ACLs not loaded yet")
        return authorize(
            self.acls,
            principal,
            host,
            operation,
            resource_type,
            name,
            super_users=self.super_users,
            allow_if_no_acls=self.settings.allow_everyone_if_no_acl_found,
        )

    def permits(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
        *,
        via: str = "",
    ) -> bool:
        """``check``, counting and logging a denial (never with credentials)."""
        decision = self.check(principal, host, operation, resource_type, name)
        if not decision.allowed:
            self.metrics.authorization_denials.labels(resource_type.value, operation.value).inc()
            denials_log.warning(
                "authorization denied%s: principal=%s host=%s operation=%s resource=%s:%s (%s)",
                via,
                principal,
                host,
                operation.value,
                resource_type.value,
                name,
                decision.reason,
            )
        return decision.allowed

    def describable(
        self, principal: str, host: str, resource_type: ResourceType, names: Iterable[str]
    ) -> list[str]:
        """The names the principal may DESCRIBE, in order, as Kafka's Metadata and ListGroups list.

        A principal learns nothing of resources it has no ACL on; CLUSTER DESCRIBE
        shows every group, as in Kafka. Hidden names are not denials and are not logged.
        """
        names = list(names)

        def may(rtype: ResourceType, name: str) -> bool:
            return self.check(principal, host, Operation.DESCRIBE, rtype, name).allowed

        if resource_type is ResourceType.GROUP and may(ResourceType.CLUSTER, CLUSTER_NAME):
            return names
        return [name for name in names if may(resource_type, name)]
