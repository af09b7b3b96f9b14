"""Kafka's client quota entities, keys and filters mapped onto lakelog's quota model. Pure.

Kafka names a quota entity by ``(entity_type, name)`` pairs, a null name being
the type's default; lakelog's ``QuotaEntity`` holds a user and/or a client id,
``<default>`` standing for the default. The entities both can hold are
``user``, ``client-id`` and the two together, named or default; lakelog keeps
no ``ip`` (connection) quotas.

Keys: ``producer_byte_rate`` and ``consumer_byte_rate`` are lakelog's byte
quotas (Kafka's LONG configs: integral values); ``request_rate`` is lakelog's
request quota in requests per second, a key of its own. Kafka's
``request_percentage`` is a share of request-handler thread time, another
unit, so it is refused as are ``controller_mutation_rate`` and
``connection_creation_rate``, which lakelog has no quota for: a refused key is
named in an INVALID_REQUEST and nothing of its entry is stored.

Describe filters match as Kafka's ``ClientQuotasImage.describe``: EXACT (a
name), DEFAULT (the default entity) and ANY (any name, the default included)
components must all hold; ``strict`` also excludes entities of further types.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidRequestError, UnsupportedVersionError
from lakelog.security.quota import DEFAULT, QuotaEntity, QuotaKind

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

#: DescribeClientQuotas' match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

#: The Kafka keys of lakelog's quotas (``request_rate`` is lakelog's own).
KEYS: dict[str, QuotaKind] = {kind.value: kind for kind in QuotaKind}
#: Kafka's LONG quota configs: their values must be whole numbers.
INTEGRAL = frozenset({QuotaKind.PRODUCE, QuotaKind.FETCH})
#: Kafka quota keys lakelog has no quota for, and why.
UNREPRESENTED: dict[str, str] = {
    "request_percentage": (
        "is a share of request-handler thread time, which lakelog does not meter; "
        "its request quota is request_rate, in requests per second"
    ),
    "controller_mutation_rate": "is not kept: lakelog has no controller mutation quota",
    "connection_creation_rate": "is not kept: lakelog has no connection (ip) quotas",
}

#: One entity in Kafka's form: ``(entity_type, name)`` pairs, None naming the default.
KafkaEntity = tuple[tuple[str, str | None], ...]


def kafka_entity(entity: QuotaEntity) -> KafkaEntity:
    """``entity`` as Kafka names it: user first, ``<default>`` as a null name."""
    pairs = ((USER, entity.user), (CLIENT_ID, entity.client_id))
    return tuple((kind, None if name == DEFAULT else name) for kind, name in pairs if name)


def entity_of(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The lakelog entity for Kafka's ``(entity_type, name)`` pairs, or INVALID_REQUEST.

    The literal name ``<default>`` is refused: lakelog stores the default entity
    under it, so a user or client of that name could not be told from the default.
    """
    names: dict[str, str | None] = {}
    for kind, name in components:
        if kind in names:
            raise InvalidRequestError(f"duplicate entity type {kind} in a client quota entity")
        if kind not in ENTITY_TYPES:
            raise InvalidRequestError(f"Unhandled client quota entity type: {kind}")
        if kind == IP:
            raise InvalidRequestError(
                "lakelog keeps no ip quotas (connection_creation_rate); "
                "quota entities are user and/or client-id"
            )
        if name is not None and not name:
            raise InvalidRequestError(f"Empty {kind} not supported")
        if name == DEFAULT:
            raise InvalidRequestError(
                f"the {kind} name {DEFAULT} stands for the default entity; send a null name"
            )
        names[kind] = name
    if not names:
        raise InvalidRequestError("Invalid empty client quota entity")

    def stored(kind: str) -> str | None:
        if kind not in names:
            return None
        return names[kind] or DEFAULT

    return QuotaEntity(stored(USER), stored(CLIENT_ID)).check()


@dataclass(frozen=True, slots=True)
class Alteration:
    """One AlterClientQuotas entry, validated: what to set and what to remove."""

    entity: QuotaEntity
    set_limits: Mapping[QuotaKind, float]
    remove: frozenset[QuotaKind]


def _kind_of(key: str) -> QuotaKind:
    if key in UNREPRESENTED:
        raise InvalidRequestError(f"quota {key} {UNREPRESENTED[key]}")
    kind = KEYS.get(key)
    if kind is None:
        raise InvalidRequestError(
            f"Invalid configuration key {key}; lakelog's quotas are {', '.join(KEYS)}"
        )
    return kind


def _checked_value(kind: QuotaKind, value: float) -> float:
    """Kafka's rule for LONG configs (whole within 1e-6), then lakelog's: positive and finite
    (a quota of 0 would stop the entity entirely, which lakelog's model does not hold)."""
    if math.isnan(value) or math.isinf(value):
        raise InvalidRequestError(f"quota {kind.value} must be a finite number; remove it for none")
    if kind in INTEGRAL and abs(round(value) - value) > 1e-6:
        raise InvalidRequestError(f"Configuration {kind.value} must be a Long value")
    if value <= 0:
        raise InvalidRequestError(f"quota {kind.value} must be positive, got {value:g}")
    return float(round(value)) if kind in INTEGRAL else float(value)


def alteration_of(
    components: Iterable[tuple[str, str | None]], ops: Iterable[tuple[str, float, bool]]
) -> Alteration:
    """An entry's entity and ``(key, value, remove)`` operations, or INVALID_REQUEST naming
    the first problem (a key given twice, one lakelog cannot hold, a bad value)."""
    entity = entity_of(components)
    set_limits: dict[QuotaKind, float] = {}
    remove: set[QuotaKind] = set()
    seen: set[str] = set()
    for key, value, removing in ops:
        if key in seen:
            raise InvalidRequestError(
                f"Duplicate quota key {key} not updating quota for this entity"
            )
        seen.add(key)
        kind = _kind_of(key)
        if removing:
            remove.add(kind)
        else:
            set_limits[kind] = _checked_value(kind, value)
    return Alteration(entity, set_limits, frozenset(remove))


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """A DescribeClientQuotas filter: exact names (None: the default), types present, strict."""

    exact: Mapping[str, str | None]
    specified: frozenset[str]
    strict: bool

    @classmethod
    def of(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
        """Kafka's validation of ``(entity_type, match_type, match)`` components: INVALID_REQUEST
        for an empty or repeated type, a bad match; UNSUPPORTED_VERSION for an unknown type."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for kind, match_type, match in components:
            if not kind:
                raise InvalidRequestError("Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise InvalidRequestError(
                    f"Entity type {kind} cannot appear more than once in the filter."
                )
            if kind not in ENTITY_TYPES:
                raise UnsupportedVersionError(f"Unsupported entity type {kind}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise InvalidRequestError(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null."
                    )
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise InvalidRequestError(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                    )
                exact[kind] = None
            elif match_type == MATCH_ANY:
                if match is not None:
                    raise InvalidRequestError(
                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                    )
                specified.add(kind)
            else:
                raise InvalidRequestError(f"Unknown match type {match_type}")
        if (IP in exact or IP in specified) and len(exact) + len(specified) > 1:
            raise InvalidRequestError(
                "Invalid entity filter component combination. IP filter component should "
                "not be used with user or clientId filter component."
            )
        return cls(exact, frozenset(specified), strict)

    def matches(self, entity: KafkaEntity) -> bool:
        names = dict(entity)
        if not self.exact and not self.specified:
            return not self.strict
        if any(kind not in names or names[kind] != name for kind, name in self.exact.items()):
            return False
        if any(kind not in names for kind in self.specified):
            return False
        return not self.strict or len(names) == len(self.exact) + len(self.specified)


def described(
    overrides: Mapping[QuotaEntity, Mapping[QuotaKind, float]], chosen: QuotaFilter
) -> list[dict[str, Any]]:
    """DescribeClientQuotas entries of the stored overrides ``chosen`` selects, sorted by
    entity; an entity without quotas is not an entry (Kafka forgets it too)."""
    entries = []
    for entity in sorted(overrides, key=QuotaEntity.key):
        limits = overrides[entity]
        named = kafka_entity(entity)
        if not limits or not chosen.matches(named):
            continue
        entries.append(
            {
                "entity": [{"entity_type": kind, "entity_name": name} for kind, name in named],
                "values": [{"key": k.value, "value": limits[k]} for k in sorted(limits)],
            }
        )
    return entries
