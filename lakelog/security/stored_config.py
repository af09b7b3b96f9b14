"""ACL bindings and quota overrides kept in the storage root (``_meta/acls``, ``_meta/quotas``).

Both are versioned documents (see ``store``): every change is a new snapshot
written with put-if-absent, so concurrent administrators never lose each
other's changes, and brokers pick changes up by reading the newest snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lakelog.security.acl import AclBinding, AclFilter, decode_bindings, encode_bindings
from lakelog.security.quota import QuotaEntity, QuotaKind, decode_quotas, encode_quotas
from lakelog.security.store import Snapshot, VersionedDocument
from lakelog.storage import Storage

ACLS_DIR = "_meta/acls"
QUOTAS_DIR = "_meta/quotas"

Quotas = dict[QuotaEntity, dict[QuotaKind, float]]


def bindings_of(snapshot: Snapshot) -> frozenset[AclBinding]:
    return decode_bindings((snapshot.body or {}).get("acls", []))


def quotas_of(snapshot: Snapshot) -> Quotas:
    return decode_quotas((snapshot.body or {}).get("quotas", []))


class AclStore:
    def __init__(self, storage: Storage) -> None:
        self.document = VersionedDocument(storage, ACLS_DIR)

    def load(self, newer_than: int = 0) -> tuple[int, frozenset[AclBinding]] | None:
        """The newest version and its bindings, or None when nothing newer than that exists."""
        snapshot = self.document.latest(newer_than)
        if snapshot.body is None:
            return None
        return snapshot.version, bindings_of(snapshot)

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Store the bindings (already present ones are kept once); returns those added."""
        wanted = frozenset(bindings)
        added: list[AclBinding] = []

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            current = decode_bindings((body or {}).get("acls", []))
            added[:] = sorted(wanted - current)
            return {"acls": encode_bindings(current | wanted)}

        self.document.update(change)
        return added

    def remove(self, filters: Iterable[AclFilter]) -> list[AclBinding]:
        """Delete every binding matching any filter; returns the deleted bindings."""
        chosen = list(filters)
        removed: list[AclBinding] = []

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            current = decode_bindings((body or {}).get("acls", []))
            gone = {b for b in current if any(f.matches(b) for f in chosen)}
            removed[:] = sorted(gone)
            return {"acls": encode_bindings(current - gone)}

        self.document.update(change)
        return removed


class QuotaStore:
    def __init__(self, storage: Storage) -> None:
        self.document = VersionedDocument(storage, QUOTAS_DIR)

    def load(self, newer_than: int = 0) -> tuple[int, Quotas] | None:
        snapshot = self.document.latest(newer_than)
        if snapshot.body is None:
            return None
        return snapshot.version, quotas_of(snapshot)

    def alter(
        self,
        entity: QuotaEntity,
        set_limits: Mapping[QuotaKind, float],
        delete: Iterable[QuotaKind] = (),
    ) -> dict[QuotaKind, float]:
        """Set and remove quotas of one entity in one change; returns its quotas after."""
        removing = set(delete)
        after: dict[QuotaKind, float] = {}

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            current = decode_quotas((body or {}).get("quotas", []))
            limits = {k: v for k, v in current.get(entity, {}).items() if k not in removing}
            limits.update(set_limits)
            current[entity] = limits
            after.clear()
            after.update(limits)
            return {"quotas": encode_quotas(current)}

        self.document.update(change)
        return after
