"""ACLs on real brokers: who may produce, fetch, describe and commit; prefixed vs literal;
deny beats allow; super users; the ``lakelog acls`` tool; ACL changes reaching other brokers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lakelog.cli import main as lakelog_main
from lakelog.client import Consumer, Producer, TopicPartition
from lakelog.client.connection import Connection
from lakelog.errors import TopicAuthorizationFailedError
from lakelog.testing.brokers import wait_for
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import (
    ADMIN,
    KEYS,
    StartBroker,
    acl,
    add_acls,
    assert_refused,
    bearer,
    call,
    create_topic,
    data_snapshot,
    eventually,
    key,
    produce_body,
    start_secured,
)


def connection(broker: BrokerProcess, principal: str) -> Connection:
    return Connection(broker.url, api_key=KEYS[principal], discover=False)


def commit(broker: BrokerProcess, principal: str, group: str, topic: str) -> int:
    """Commit offset 1 of partition 0 as ``principal``: 0, or the 403's Kafka error code."""
    body = {
        "member_id": "",
        "generation_id": -1,
        "offsets": [{"topic": topic, "partition": 0, "offset": 1, "metadata": ""}],
    }
    answer = call(broker, "POST", f"/v1/groups/{group}/offsets", key(principal), json=body)
    if answer.status_code == 200:
        return 0
    assert answer.status_code == 403, answer.text
    return int(answer.json()["error_code"])


def test_write_read_and_group_acls(start_broker: StartBroker, tmp_path: Path) -> None:
    root = RootSpec(str(tmp_path / "root"))
    broker = start_secured(start_broker, root, tmp_path)
    create_topic(broker, "orders-eu")
    create_topic(broker, "payments")
    add_acls(
        broker,
        acl("User:alice", "WRITE", "orders", pattern_type="PREFIXED"),
        acl("User:bob", "READ", "orders-eu"),
        acl("User:bob", "READ", "analytics", resource_type="GROUP"),
        acl("User:carol", "READ", "analytics", resource_type="GROUP"),
    )

    # alice writes through the Python client to the prefix, and nowhere else
    with Producer(broker.url, connection=connection(broker, "User:alice")) as producer:
        assert producer.send("orders-eu", b"v1").result(timeout=60).offset == 0
        denied = producer.send("payments", b"v2")
        with pytest.raises(TopicAuthorizationFailedError):
            denied.result(timeout=60)
    assert_refused(
        call(broker, "GET", "/v1/topics/orders-eu/partitions/0/records", key("User:alice")), 403, 29
    )
    assert call(broker, "GET", "/v1/topics/orders-eu", key("User:alice")).status_code == 200
    assert_refused(call(broker, "GET", "/v1/topics/payments", key("User:alice")), 403, 29)

    # bob reads but cannot write; a refused produce stores nothing
    before = data_snapshot(root.open())
    assert_refused(
        call(
            broker, "POST", "/v1/topics/orders-eu/records", key("User:bob"), json=produce_body("x")
        ),
        403,
        29,
    )
    assert data_snapshot(root.open()) == before
    consumer = Consumer(
        broker.url, connection=connection(broker, "User:bob"), auto_offset_reset="earliest"
    )
    try:
        consumer.assign([TopicPartition("orders-eu", 0)])
        records: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records += [r.value for r in batch]
        assert records == [b"v1"]
    finally:
        consumer.close()

    # offset commits need GROUP READ on the group and TOPIC READ on each topic
    assert commit(broker, "User:bob", "analytics", "orders-eu") == 0
    assert commit(broker, "User:bob", "other-group", "orders-eu") == 30
    assert commit(broker, "User:alice", "analytics", "orders-eu") == 30
    assert commit(broker, "User:carol", "analytics", "orders-eu") == 29

    # so does executing a reset: named topics, and the group's own with all_topics
    for principal, expected in (("User:carol", 403), ("User:bob", 200)):
        for selection in ({"topics": [{"topic": "orders-eu"}]}, {"all_topics": True}):
            reset = {**selection, "to": {"earliest": True}, "execute": True}
            answer = call(
                broker, "POST", "/v1/groups/analytics/offsets:reset", key(principal), json=reset
            )
            assert answer.status_code == expected, (principal, selection, answer.text)
            if expected == 403:
                assert answer.json()["error_code"] == 29

    # listings show only what the caller may DESCRIBE, as Kafka's Metadata and ListGroups do
    def topics(principal: str, path: str = "/v1/topics") -> set[str]:
        answer = call(broker, "GET", path, key(principal))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        return set(body["topics"] if isinstance(body, dict) else body) - {"__consumer_offsets"}

    def groups(principal: str) -> set[str]:
        answer = call(broker, "GET", "/v1/groups", key(principal))
        assert answer.status_code == 200, answer.text
        return {g["group_id"] for g in answer.json()["groups"]}

    assert topics("User:admin") == {"orders-eu", "payments"}
    assert topics("User:alice") == topics("User:alice", "/topics") == {"orders-eu"}
    assert topics("User:bob") == topics("User:bob", "/topics") == {"orders-eu"}
    assert topics("User:carol") == topics("User:carol", "/topics") == set()
    assert groups("User:admin") == groups("User:bob") == groups("User:carol") == {"analytics"}
    assert groups("User:alice") == set()
    add_acls(broker, acl("User:alice", "DESCRIBE", "kafka-cluster", resource_type="CLUSTER"))
    eventually(lambda: groups("User:alice") == {"analytics"})  # CLUSTER DESCRIBE: every group
    assert topics("User:alice") == {"orders-eu"}  # but no extra topic

    log = broker.log()
    assert (
        "authorization denied: principal=User:bob host=127.0.0.1 operation=WRITE "
        "resource=TOPIC:orders-eu" in log
    )
    assert "operation=READ resource=GROUP:other-group" in log


def test_deny_beats_allow_super_users_and_literal_wildcard(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)
    for topic in ("public", "secret-plans"):
        create_topic(broker, topic)
    add_acls(
        broker,
        acl("User:carol", "ALL", "*"),
        acl("User:carol", "WRITE", "secret", pattern_type="PREFIXED", permission="DENY"),
        acl("User:admin", "ALL", "*", permission="DENY"),  # super users ignore ACLs
    )
    carol = key("User:carol")
    produce = "/v1/topics/{}/records"
    assert (
        call(broker, "POST", produce.format("public"), carol, json=produce_body("p")).status_code
        == 200
    )
    assert_refused(
        call(broker, "POST", produce.format("secret-plans"), carol, json=produce_body("s")), 403, 29
    )
    assert (
        call(broker, "GET", "/v1/topics/secret-plans/partitions/0/records", carol).status_code
        == 200
    )
    # the JWT principal User:dave has no ACL at all; "*" protects every topic
    assert_refused(call(broker, "GET", "/v1/topics/public", bearer("dave")), 403, 29)
    # ALL on the literal "*" includes TOPIC CREATE, so carol may create a topic
    assert (
        call(broker, "POST", "/v1/topics", carol, json={"name": "new", "partitions": 1}).status_code
        == 201
    )
    assert_refused(
        call(broker, "POST", "/v1/acls", carol, json={"acls": [acl("User:carol", "ALL", "x")]}),
        403,
        31,
    )
    # the super user does anything despite its DENY ALL
    assert (
        call(
            broker, "POST", produce.format("secret-plans"), ADMIN, json=produce_body("a")
        ).status_code
        == 200
    )
    assert call(broker, "DELETE", "/v1/topics/new", ADMIN).status_code == 204


def test_acl_admin_filters_and_an_unfiltered_delete(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    """``/v1/acls`` selects by any of its seven parameters (``ANY`` matches all); a DELETE
    that names none is refused and removes nothing."""
    broker = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)
    add_acls(
        broker,
        acl("User:alice", "WRITE", "orders", pattern_type="PREFIXED"),
        acl("User:bob", "READ", "orders-eu"),
        acl("User:bob", "READ", "analytics", resource_type="GROUP"),
    )

    def listed(**params: str) -> list[tuple[str, str, str]]:
        answer = call(broker, "GET", "/v1/acls", ADMIN, params=params)
        assert answer.status_code == 200, answer.text
        return [
            (a["principal"], a["resource_type"], a["resource_name"]) for a in answer.json()["acls"]
        ]

    everything = listed()
    assert len(everything) == 3
    assert listed(principal="User:bob", resource_type="ANY") == [
        ("User:bob", "GROUP", "analytics"),
        ("User:bob", "TOPIC", "orders-eu"),
    ]
    assert listed(pattern_type="PREFIXED") == [("User:alice", "TOPIC", "orders")]

    assert_refused(call(broker, "DELETE", "/v1/acls", ADMIN), 400, 42)
    assert listed() == everything
    removed = call(broker, "DELETE", "/v1/acls", ADMIN, params={"resource_type": "GROUP"})
    assert removed.status_code == 200, removed.text
    assert [a["resource_name"] for a in removed.json()["acls"]] == ["analytics"]
    assert listed() == [e for e in everything if e[1] != "GROUP"]


def group_coordinated_by(via: BrokerProcess, coordinator: BrokerProcess) -> str:
    """A group id that ``via`` sends to ``coordinator`` (once ``via`` has seen it live)."""
    found: list[str] = []

    def search() -> bool:
        for n in range(64):
            answer = call(via, "GET", f"/v1/groups/g{n}/coordinator", ADMIN)
            if answer.status_code == 200 and answer.json()["url"] == coordinator.url:
                found.append(f"g{n}")
                return True
        return False

    wait_for(search, f"a group {via.url} forwards to {coordinator.url}", 60)
    return found[0]


def test_a_forwarded_group_request_is_judged_by_acls_as_new_as_the_forwarders(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    """The coordinator re-reads ACLs the relaying broker has already applied, so an ACL
    change made through a broker holds for its next request, wherever the group lives."""
    root = RootSpec(str(tmp_path / "root"))
    a = start_secured(start_broker, root, tmp_path)
    b = start_secured(start_broker, root, tmp_path, acl_refresh_ms=3_600_000)  # no timed re-read
    create_topic(a, "logs-1")
    group = group_coordinated_by(a, b)
    assert commit(a, "User:bob", group, "logs-1") == 30

    add_acls(a, acl("User:bob", "READ", "logs-1"), acl("User:bob", "READ", group, "GROUP"))
    assert commit(a, "User:bob", group, "logs-1") == 0

    removed = call(a, "DELETE", "/v1/acls", ADMIN, params={"resource_name": group})
    assert removed.status_code == 200, removed.text
    assert commit(a, "User:bob", group, "logs-1") == 30


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = lakelog_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_acls_tool_and_other_brokers_follow(
    start_broker: StartBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = RootSpec(str(tmp_path / "root"))
    a = start_secured(start_broker, root, tmp_path)
    b = start_secured(start_broker, root, tmp_path)
    create_topic(a, "logs-1")
    # group requests are forwarded to the group's coordinator with the caller's credentials
    add_acls(a, acl("User:bob", "READ", "logs-1"), acl("User:bob", "READ", "g", "GROUP"))
    assert commit(a, "User:bob", "g", "logs-1") == 0
    eventually(lambda: commit(b, "User:bob", "g", "logs-1") == 0)  # b refreshes its ACLs
    config = tmp_path / "admin.properties"
    config.write_text(f"api.key={KEYS['User:admin']}\n")

    code, out, err = run_cli(
        capsys, "acls", "--bootstrap-server", a.url, "--command-config", str(config),
        "--add", "--allow-principal", "User:alice", "--operation", "Write",
        "--topic", "logs", "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert code == 0, err
    assert "principal=User:alice" in out and "operation=WRITE" in out

    def alice_can_write_on_b() -> bool:
        body = produce_body("x")
        return (
            call(b, "POST", "/v1/topics/logs-1/records", key("User:alice"), json=body).status_code
            == 200
        )

    eventually(alice_can_write_on_b)

    code, out, _ = run_cli(
        capsys, "acls", "--bootstrap-server", b.url, "--api-key", KEYS["User:admin"],
        "--list", "--topic", "logs",
    )  # fmt: skip
    assert code == 0 and "name=logs, patternType=PREFIXED" in out and "User:alice" in out

    code, _, err = run_cli(
        capsys, "acls", "--bootstrap-server", a.url, "--api-key", KEYS["User:alice"],
        "--add", "--allow-principal", "User:alice", "--operation", "All", "--cluster",
    )  # fmt: skip
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err

    code, out, err = run_cli(
        capsys, "acls", "--bootstrap-server", a.url, "--api-key", KEYS["User:admin"],
        "--remove", "--allow-principal", "User:alice", "--topic", "logs",
        "--resource-pattern-type", "prefixed",
    )  # fmt: skip
    assert code == 0 and "Removed ACLs (1)" in out, err
    eventually(lambda: not alice_can_write_on_b())

    code, out, err = run_cli(
        capsys, "client-quotas", "--bootstrap-server", a.url, "--api-key", KEYS["User:admin"],
        "--alter", "--user", "alice", "--add-config", "producer_byte_rate=2048,request_rate=50",
    )  # fmt: skip
    assert code == 0, err
    code, out, _ = run_cli(
        capsys, "client-quotas", "--bootstrap-server", b.url, "--api-key", KEYS["User:admin"],
        "--describe", "--user", "alice",
    )  # fmt: skip
    assert "Quotas of user=alice: producer_byte_rate=2048, request_rate=50" in out
    code, _, err = run_cli(
        capsys, "client-quotas", "--bootstrap-server", a.url, "--api-key", KEYS["User:admin"],
        "--alter", "--user", "alice", "--add-config", "speed=1",
    )  # fmt: skip
    assert code == 1 and "unknown quota 'speed'" in err
