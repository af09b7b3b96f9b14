"""DescribeClientQuotas and AlterClientQuotas on real brokers, over a local and an S3 root.

A quota altered over Kafka is the one store's override: it is described over
Kafka, listed over HTTP, throttles Kafka and HTTP requests alike, and once
removed no longer applies. Entities and keys lakelog cannot hold get Kafka's
INVALID_REQUEST per entry and store nothing; a principal without the cluster's
config ACLs gets CLUSTER_AUTHORIZATION_FAILED; with authentication off both
APIs serve, as quotas still apply. No client library has these
calls (kafka-python 3 has only the protocol classes, confluent-kafka and
aiokafka nothing), so the requests are sent raw, as ``kafka-configs`` sends them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from kio.schema.alter_client_quotas.v1.request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from kio.schema.describe_client_quotas.v0.request import (
    ComponentData as ComponentDataV0,
)
from kio.schema.describe_client_quotas.v0.request import (
    DescribeClientQuotasRequest as DescribeClientQuotasRequestV0,
)
from kio.schema.describe_client_quotas.v1.request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from kio.static.primitive import f64, i8

from lakelog.testing.brokers import free_port
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.kafka.raw import RawConnection
from tests.server.kafka.sasl import sasl_connection
from tests.server.kafka.test_security import produce, record_batch
from tests.server.security.helpers import (
    ADMIN,
    StartBroker,
    acl,
    add_acls,
    call,
    create_topic,
    data_snapshot,
    eventually,
    key,
    start_secured,
)

pytestmark = pytest.mark.integration

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, INVALID_REQUEST = 31, 35, 42
EXACT, DEFAULT, ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
#: ``(key, value, remove)``
Op = tuple[str, float, bool]


def entry(entity: Entity, *ops: Op) -> EntryData:
    return EntryData(
        entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
        ops=tuple(OpData(key=k, value=f64(v), remove=r) for k, v, r in ops),
    )


def alter(conn: RawConnection, *entries: EntryData, validate_only: bool = False) -> list[Any]:
    """Each entry's answer: ``(error_code, error_message, entity)``."""
    answer = conn.request(
        ALTER_CLIENT_QUOTAS,
        1,
        AlterClientQuotasRequest(entries=tuple(entries), validate_only=validate_only),
    )
    return [
        (
            int(e.error_code),
            e.error_message,
            tuple((d.entity_type, d.entity_name) for d in e.entity),
        )
        for e in answer.entries
    ]


def describe(
    conn: RawConnection, *components: tuple[str, int, str | None], strict: bool = False
) -> tuple[int, str | None, dict[Entity, dict[str, float]] | None]:
    """(error code, message, entity -> quotas) of a DescribeClientQuotas v1."""
    answer = conn.request(
        DESCRIBE_CLIENT_QUOTAS,
        1,
        DescribeClientQuotasRequest(
            components=tuple(
                ComponentData(entity_type=t, match_type=i8(m), match=n) for t, m, n in components
            ),
            strict=strict,
        ),
    )
    entries = None
    if answer.entries is not None:
        entries = {
            tuple((d.entity_type, d.entity_name) for d in e.entity): {
                v.key: float(v.value) for v in e.values
            }
            for e in answer.entries
        }
    return int(answer.error_code), answer.error_message, entries


def http_quotas(broker: BrokerProcess) -> list[dict[str, Any]]:
    answer = call(broker, "GET", "/v1/quotas", ADMIN)
    assert answer.status_code == 200, answer.text
    quotas: list[dict[str, Any]] = answer.json()["quotas"]
    return quotas


def http_produce_throttle(broker: BrokerProcess, principal: str) -> int:
    body = {"records": [{"value": "x" * 2_000}]}
    with httpx.Client(base_url=broker.url, headers=key(principal), timeout=60) as http:
        answer = http.post("/v1/topics/metered/records", json=body)
    assert answer.status_code == 200, answer.text
    throttle: int = answer.json()["throttle_time_ms"]
    return throttle


def user(name: str | None) -> Entity:
    return (("user", name),)


ALICE = user("alice")


def test_a_quota_altered_over_kafka_is_described_shown_over_http_throttles_and_is_removed(
    make_root: Callable[[], RootSpec], start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = start_secured(
        start_broker, make_root(), tmp_path, quota_window_num=3, quota_window_size_ms=500
    )
    address = broker.kafka or ""
    create_topic(broker, "metered")
    add_acls(broker, acl("User:alice", "WRITE", "metered"))
    admin = sasl_connection(address, "User:admin")
    alice = sasl_connection(address, "User:alice")
    assert produce(alice, "metered", record_batch(4, 500)) == (0, 0)  # no quota yet

    # validate_only answers as the change would and stores nothing
    rate = ("producer_byte_rate", 1000.0, False)
    assert alter(admin, entry(ALICE, rate), validate_only=True) == [(0, None, ALICE)]
    assert http_quotas(broker) == []

    assert alter(admin, entry(ALICE, rate)) == [(0, None, ALICE)]
    assert describe(admin, ("user", EXACT, "alice")) == (
        0,
        None,
        {ALICE: {"producer_byte_rate": 1000.0}},
    )
    # v0 (not flexible) answers the same
    answer = admin.request(
        DESCRIBE_CLIENT_QUOTAS,
        0,
        DescribeClientQuotasRequestV0(
            components=(ComponentDataV0(entity_type="user", match_type=i8(ANY), match=None),),
            strict=True,
        ),
    )
    assert int(answer.error_code) == 0
    assert [(v.key, float(v.value)) for e in answer.entries for v in e.values] == [
        ("producer_byte_rate", 1000.0)
    ]
    assert http_quotas(broker) == [
        {"user": "alice", "client_id": None, "quotas": {"producer_byte_rate": 1000.0}}
    ]

    # it throttles Kafka and HTTP produce requests of alice (one budget), not admin's
    eventually(lambda: produce(alice, "metered", record_batch(4, 500))[1] > 0)
    eventually(lambda: http_produce_throttle(broker, "User:alice") > 0)
    assert produce(admin, "metered", record_batch(4, 500)) == (0, 0)

    # a default entity and a user+client entity, set in one request and described by filter
    app_default = (("user", "alice"), ("client-id", None))
    assert alter(
        admin,
        entry((("user", None),), ("consumer_byte_rate", 5000.0, False)),
        entry(app_default, ("request_rate", 20.0, False)),
    ) == [(0, None, (("user", None),)), (0, None, app_default)]
    assert describe(admin, ("user", ANY, None), strict=True)[2] == {
        ALICE: {"producer_byte_rate": 1000.0},
        (("user", None),): {"consumer_byte_rate": 5000.0},
    }
    assert describe(admin, ("client-id", DEFAULT, None))[2] == {app_default: {"request_rate": 20.0}}
    assert describe(admin, ("user", DEFAULT, None), strict=True)[2] == {
        (("user", None),): {"consumer_byte_rate": 5000.0}
    }

    # remove=true deletes a key; with no quota left the entity is gone everywhere
    removal = ("producer_byte_rate", 0.0, True)
    assert alter(admin, entry(ALICE, removal)) == [(0, None, ALICE)]
    assert describe(admin, ("user", EXACT, "alice"), strict=True) == (0, None, {})
    assert [q for q in http_quotas(broker) if q["user"] == "alice" and not q["client_id"]] == []
    eventually(lambda: produce(alice, "metered", record_batch(4, 500))[1] == 0)
    eventually(lambda: http_produce_throttle(broker, "User:alice") == 0)
    for conn in (admin, alice):
        conn.close()


def test_bad_entries_get_kafkas_codes_and_store_nothing(
    make_root: Callable[[], RootSpec], start_broker: StartBroker, tmp_path: Path
) -> None:
    root = make_root()
    broker = start_secured(start_broker, root, tmp_path)
    admin = sasl_connection(broker.kafka or "", "User:admin")
    storage = root.open()
    bad = [
        (entry(user("a1"), ("request_percentage", 50.0, False)), "request_percentage"),
        (entry(user("a2"), ("controller_mutation_rate", 5.0, False)), "controller_mutation_rate"),
        (entry(user("a3"), ("producer_byte_rate", -1000.0, False)), "must be positive"),
        (entry(user("a4"), ("producer_byte_rate", 10.5, False)), "must be a Long value"),
        (
            entry(user("a5"), ("no_such_quota", 1.0, False)),
            "Invalid configuration key no_such_quota",
        ),
        (entry((("ip", "10.0.0.1"),), ("connection_creation_rate", 5.0, False)), "ip quotas"),
        (entry((("group", "g"),), ("producer_byte_rate", 1.0, False)), "entity type: group"),
        (entry((), ("producer_byte_rate", 1.0, False)), "empty client quota entity"),
        (entry((("user", ""),), ("producer_byte_rate", 1.0, False)), "Empty user"),
        (
            entry(
                (("client-id", "app"),),
                ("consumer_byte_rate", 1.0, False),
                ("consumer_byte_rate", 2.0, False),
            ),
            "Duplicate quota key consumer_byte_rate",
        ),
    ]
    before = data_snapshot(storage)
    answers = alter(admin, *(e for e, _ in bad))
    for (code, message, _), (_, named) in zip(answers, bad, strict=True):
        assert code == INVALID_REQUEST, (code, message)
        assert named in (message or ""), message
    assert data_snapshot(storage) == before
    # an entity named twice is refused on both entries
    twice = alter(
        admin,
        entry(ALICE, ("producer_byte_rate", 1.0, False)),
        entry(ALICE, ("consumer_byte_rate", 1.0, False)),
    )
    assert [code for code, _, _ in twice] == [INVALID_REQUEST, INVALID_REQUEST]
    assert data_snapshot(storage) == before

    # one good entry among bad ones: it alone is stored, the bad one's other keys are not
    answers = alter(
        admin,
        entry((("client-id", "app"),), ("consumer_byte_rate", 2048.0, False)),
        entry(ALICE, ("producer_byte_rate", 1000.0, False), ("request_percentage", 5.0, False)),
    )
    assert [code for code, _, _ in answers] == [0, INVALID_REQUEST]
    assert http_quotas(broker) == [
        {"user": None, "client_id": "app", "quotas": {"consumer_byte_rate": 2048.0}}
    ]

    # bad filters: the whole answer carries Kafka's error, no entries
    for components, expected in [
        ((("user", EXACT, None),), INVALID_REQUEST),
        ((("user", ANY, None), ("user", EXACT, "alice")), INVALID_REQUEST),
        ((("ip", ANY, None), ("user", ANY, None)), INVALID_REQUEST),
        ((("topic", ANY, None),), UNSUPPORTED_VERSION),
    ]:
        code, _, entries = describe(admin, *components)
        assert (code, entries) == (expected, None)
    # ip filters are valid in Kafka; lakelog has no ip entities
    assert describe(admin, ("ip", ANY, None)) == (0, None, {})
    admin.close()


def test_a_principal_without_cluster_config_acls_is_refused(
    make_root: Callable[[], RootSpec], start_broker: StartBroker, tmp_path: Path
) -> None:
    root = make_root()
    broker = start_secured(start_broker, root, tmp_path)
    address = broker.kafka or ""
    storage = root.open()
    admin = sasl_connection(address, "User:admin")
    assert alter(admin, entry(ALICE, ("producer_byte_rate", 1000.0, False))) == [(0, None, ALICE)]
    # carol may describe the cluster's configs (not alter them); bob has no cluster ACL
    add_acls(broker, acl("User:carol", "DESCRIBE_CONFIGS", "kafka-cluster", "CLUSTER"))
    bob = sasl_connection(address, "User:bob")
    carol = sasl_connection(address, "User:carol")
    eventually(lambda: describe(carol)[0] == 0)
    assert describe(carol) == (0, None, {ALICE: {"producer_byte_rate": 1000.0}})
    code, _, entries = describe(bob)
    assert (code, entries) == (CLUSTER_AUTHORIZATION_FAILED, None)

    before = data_snapshot(storage)
    changes = [
        entry(ALICE, ("producer_byte_rate", 1.0, False)),
        entry((("user", "bob"),), ("request_percentage", 1.0, False)),
    ]
    for conn in (bob, carol):
        answers = alter(conn, *changes)
        assert [code for code, _, _ in answers] == [CLUSTER_AUTHORIZATION_FAILED] * 2
        assert [entity for _, _, entity in answers] == [ALICE, (("user", "bob"),)]
    assert data_snapshot(storage) == before
    assert describe(admin)[2] == {ALICE: {"producer_byte_rate": 1000.0}}
    for conn in (admin, bob, carol):
        conn.close()


def test_a_broker_without_authentication_serves_client_quotas(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    """Quotas apply with ``auth_mode=none`` (to ``User:ANONYMOUS``), so they are managed then."""
    address = f"127.0.0.1:{free_port()}"
    broker = start_broker(
        RootSpec(str(tmp_path / "root")), kafka_listeners=f"PLAINTEXT://{address}"
    )
    conn = RawConnection(address)
    anonymous = user("ANONYMOUS")
    assert alter(conn, entry(anonymous, ("request_rate", 50.0, False))) == [(0, None, anonymous)]
    assert describe(conn, ("user", ANY, None)) == (0, None, {anonymous: {"request_rate": 50.0}})
    assert call(broker, "GET", "/v1/quotas").json()["quotas"] == [
        {"user": "ANONYMOUS", "client_id": None, "quotas": {"request_rate": 50.0}}
    ]
    conn.close()
