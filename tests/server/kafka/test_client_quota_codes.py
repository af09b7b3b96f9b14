"""Kafka's client quota entities, keys and filters mapped onto lakelog's quota model."""

from __future__ import annotations

import math

import pytest

from lakelog.errors import InvalidRequestError, UnsupportedVersionError
from lakelog.security.quota import DEFAULT, QuotaEntity, QuotaKind
from server.kafka.client_quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    QuotaFilter,
    alteration_of,
    described,
    entity_of,
    kafka_entity,
)

PRODUCE, FETCH, REQUEST = QuotaKind.PRODUCE, QuotaKind.FETCH, QuotaKind.REQUEST


def test_entities_map_both_ways_with_null_as_the_default() -> None:
    cases: list[tuple[list[tuple[str, str | None]], QuotaEntity]] = [
        ([("user", "alice")], QuotaEntity("alice")),
        ([("user", None)], QuotaEntity(DEFAULT)),
        ([("client-id", "app")], QuotaEntity(None, "app")),
        ([("client-id", None)], QuotaEntity(None, DEFAULT)),
        ([("client-id", "app"), ("user", "alice")], QuotaEntity("alice", "app")),
        ([("user", None), ("client-id", None)], QuotaEntity(DEFAULT, DEFAULT)),
    ]
    for components, entity in cases:
        assert entity_of(components) == entity
        assert set(kafka_entity(entity)) == set(components)
    assert kafka_entity(QuotaEntity("alice", "app")) == (("user", "alice"), ("client-id", "app"))


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("ip", "10.0.0.1")], "no ip quotas"),
        ([("ip", None)], "no ip quotas"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([("user", "a"), ("user", "b")], "duplicate entity type user"),
        ([("user", "")], "Empty user not supported"),
        ([("client-id", "")], "Empty client-id not supported"),
        ([("user", DEFAULT)], "send a null name"),
    ],
)
def test_entities_lakelog_cannot_hold_are_invalid_requests(
    components: list[tuple[str, str | None]], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        entity_of(components)


def test_alterations_set_and_remove_lakelogs_keys() -> None:
    change = alteration_of(
        [("user", "alice")],
        [
            ("producer_byte_rate", 1048576.0, False),
            ("request_rate", 2.5, False),
            ("consumer_byte_rate", -1.0, True),  # a removal's value is ignored
        ],
    )
    assert change.entity == QuotaEntity("alice")
    assert change.set_limits == {PRODUCE: 1048576.0, REQUEST: 2.5}
    assert change.remove == frozenset({FETCH})
    # a byte rate within Kafka's epsilon of a whole number is that number
    assert alteration_of(
        [("user", "a")], [("consumer_byte_rate", 10.0000001, False)]
    ).set_limits == {FETCH: 10.0}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([("request_percentage", 50.0, False)], "request_percentage is a share of"),
        ([("request_percentage", 0.0, True)], "request_percentage"),
        ([("controller_mutation_rate", 5.0, False)], "controller_mutation_rate is not kept"),
        ([("connection_creation_rate", 5.0, False)], "connection_creation_rate is not kept"),
        ([("producer.byte.rate", 5.0, False)], "Invalid configuration key producer.byte.rate"),
        ([("producer_byte_rate", -1.0, False)], "producer_byte_rate must be positive"),
        ([("request_rate", 0.0, False)], "request_rate must be positive"),
        ([("producer_byte_rate", 10.5, False)], "producer_byte_rate must be a Long value"),
        ([("request_rate", math.inf, False)], "must be a finite number"),
        ([("consumer_byte_rate", math.nan, False)], "must be a finite number"),
        (
            [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)],
            "Duplicate quota key producer_byte_rate",
        ),
        (
            [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 0.0, True)],
            "Duplicate quota key producer_byte_rate",
        ),
    ],
)
def test_keys_and_values_lakelog_cannot_hold_are_refused_by_name(
    ops: list[tuple[str, float, bool]], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        alteration_of([("user", "alice")], ops)


OVERRIDES = {
    QuotaEntity("alice"): {PRODUCE: 1000.0},
    QuotaEntity(DEFAULT): {FETCH: 2000.0},
    QuotaEntity(None, "app"): {REQUEST: 5.0},
    QuotaEntity(None, DEFAULT): {REQUEST: 9.0},
    QuotaEntity("alice", "app"): {PRODUCE: 10.0, FETCH: 20.0},
    QuotaEntity("bob", DEFAULT): {FETCH: 30.0},
    QuotaEntity("carol"): {},  # every quota removed: not an entry
}


def chosen(
    strict: bool, *components: tuple[str, int, str | None]
) -> set[tuple[tuple[str, str | None], ...]]:
    entries = described(OVERRIDES, QuotaFilter.of(components, strict))
    return {
        tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]) for entry in entries
    }


def test_filters_match_as_kafkas_describe() -> None:
    everything = {kafka_entity(e) for e, limits in OVERRIDES.items() if limits}
    assert chosen(False) == everything
    assert chosen(True) == set()
    # exact: every entity with that user, only the lone one when strict
    assert chosen(False, ("user", MATCH_EXACT, "alice")) == {
        (("user", "alice"),),
        (("user", "alice"), ("client-id", "app")),
    }
    assert chosen(True, ("user", MATCH_EXACT, "alice")) == {(("user", "alice"),)}
    # default: a null name
    assert chosen(True, ("user", MATCH_DEFAULT, None)) == {(("user", None),)}
    assert chosen(False, ("client-id", MATCH_DEFAULT, None)) == {
        (("client-id", None),),
        (("user", "bob"), ("client-id", None)),
    }
    # any: every name of the type, the default included
    assert chosen(True, ("client-id", MATCH_ANY, None)) == {
        (("client-id", "app"),),
        (("client-id", None),),
    }
    assert chosen(True, ("user", MATCH_ANY, None), ("client-id", MATCH_ANY, None)) == {
        (("user", "alice"), ("client-id", "app")),
        (("user", "bob"), ("client-id", None)),
    }
    assert chosen(False, ("user", MATCH_EXACT, "bob"), ("client-id", MATCH_DEFAULT, None)) == {
        (("user", "bob"), ("client-id", None)),
    }
    # the literal name <default> is no entity's name; lakelog has no ip entities
    assert chosen(False, ("user", MATCH_EXACT, DEFAULT)) == set()
    assert chosen(False, ("ip", MATCH_ANY, None)) == set()


def test_described_values_are_sorted_by_key() -> None:
    (entry,) = described(OVERRIDES, QuotaFilter.of([("user", MATCH_EXACT, "alice")], True))
    assert entry["values"] == [{"key": "producer_byte_rate", "value": 1000.0}]
    (entry,) = described(
        OVERRIDES,
        QuotaFilter.of([("user", MATCH_EXACT, "alice"), ("client-id", MATCH_ANY, None)], True),
    )
    assert entry["values"] == [
        {"key": "consumer_byte_rate", "value": 20.0},
        {"key": "producer_byte_rate", "value": 10.0},
    ]


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([("", MATCH_ANY, None)], InvalidRequestError, "empty entity type"),
        ([("topic", MATCH_ANY, None)], UnsupportedVersionError, "Unsupported entity type topic"),
        (
            [("user", MATCH_ANY, None), ("user", MATCH_EXACT, "a")],
            InvalidRequestError,
            "more than once",
        ),
        ([("user", MATCH_EXACT, None)], InvalidRequestError, "MATCH_TYPE_EXACT"),
        ([("user", MATCH_DEFAULT, "a")], InvalidRequestError, "MATCH_TYPE_DEFAULT"),
        ([("user", MATCH_ANY, "a")], InvalidRequestError, "MATCH_TYPE_SPECIFIED"),
        ([("user", 7, None)], InvalidRequestError, "Unknown match type 7"),
        (
            [("ip", MATCH_ANY, None), ("user", MATCH_ANY, None)],
            InvalidRequestError,
            "IP filter component",
        ),
    ],
)
def test_bad_filters_get_kafkas_errors(
    components: list[tuple[str, int, str | None]], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        QuotaFilter.of(components, False)
