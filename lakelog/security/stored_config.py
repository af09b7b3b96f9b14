"""ACL bindings and quota overrides kept in the storage root (``_meta/acls``, ``_meta/quotas``)
as versioned documents (see ``store``); brokers pick changes up from the newest snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from lakelog.security.acl import AclBinding, decode_bindings, encode_bindings
from lakelog.security.quota import QuotaEntity, QuotaKind, decode_quotas, encode_quotas
from lakelog.security.store import VersionedDocument
from lakelog.storage import Storage

ACLS_DIR = "_meta/acls"
QUOTAS_DIR = "_meta/quotas"

Quotas = dict[QuotaEntity, dict[QuotaKind, float]]
#: One entity's quota change: the limits to set and the quotas to remove.
QuotaChange = tuple[QuotaEntity, Mapping[QuotaKind, float], Iterable[QuotaKind]]
T = TypeVar("T")


class BindingFilter(Protocol):
    """Selects bindings: lakelog's ``AclFilter``, or a Kafka filter with Kafka's matching."""

    def matches(self, binding: AclBinding) -> bool: ...


def _bindings(body: dict[str, Any] | None) -> frozenset[AclBinding]:
    return decode_bindings((body or {}).get("acls", []))


def _quotas(body: dict[str, Any] | None) -> Quotas:
    return decode_quotas((body or {}).get("quotas", []))


def _load(
    document: VersionedDocument, newer_than: int, decode: Callable[[dict[str, Any]], T]
) -> tuple[int, T] | None:
    """The newest version and its decoded body, or None when nothing newer than that exists."""
    snapshot = document.latest(newer_than)
    return None if snapshot.body is None else (snapshot.version, decode(snapshot.body))


class AclStore:
    def __init__(self, storage: Storage) -> None:
        self.document = VersionedDocument(storage, ACLS_DIR)

    def load(self, newer_than: int = 0) -> tuple[int, frozenset[AclBinding]] | None:
        return _load(self.document, newer_than, _bindings)

    def add(self, bindings: Iterable[AclBinding]) -> list[AclBinding]:
        """Store the bindings (already present ones are kept once); returns those added."""
        wanted = frozenset(bindings)
        added: list[AclBinding] = []

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            current = _bindings(body)
            added[:] = sorted(wanted - current)
            return {"acls": encode_bindings(current | wanted)}

        self.document.update(change)
        return added

    def remove(self, filters: Iterable[BindingFilter]) -> list[AclBinding]:
        """Delete every binding matching any filter; returns the deleted bindings."""
        chosen = list(filters)
        removed: list[AclBinding] = []

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            current = _bindings(body)
            gone = {b for b in current if any(f.matches(b) for f in chosen)}
            removed[:] = sorted(gone)
            return {"acls": encode_bindings(current - gone)}

        self.document.update(change)
        return removed


class QuotaStore:
    def __init__(self, storage: Storage) -> None:
        self.document = VersionedDocument(storage, QUOTAS_DIR)

    def load(self, newer_than: int = 0) -> tuple[int, Quotas] | None:
        return _load(self.document, newer_than, _quotas)

    def alter(
        self,
        entity: QuotaEntity,
        set_limits: Mapping[QuotaKind, float],
        delete: Iterable[QuotaKind] = (),
    ) -> dict[QuotaKind, float]:
        """Set and remove quotas of one entity in one change; returns its quotas after."""
        return self.alter_many([(entity, set_limits, delete)])[entity]

    def alter_many(self, changes: Sequence[QuotaChange]) -> Quotas:
        """Set and remove quotas of several entities in one new version, so every change is
        stored or none is; returns each changed entity's quotas after."""
        wanted = [(entity, dict(limits), set(delete)) for entity, limits, delete in changes]
        after: Quotas = {}

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            current = _quotas(body)
            after.clear()
            for entity, set_limits, removing in wanted:
                limits = {k: v for k, v in current.get(entity, {}).items() if k not in removing}
                limits.update(set_limits)
                current[entity] = limits
                after[entity] = dict(limits)
            return {"quotas": encode_quotas(current)}

        self.document.update(change)
        return after
