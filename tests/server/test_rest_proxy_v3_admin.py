"""REST Proxy v3 administration against a real broker: topics, configs, brokers, groups, ACLs.

Every body is checked against the shape a REST Proxy client expects, every
change is checked through the native API, and every link of every resource
is followed from the cluster resource down (a client navigates by them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lakelog.client import Consumer, Producer
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.rest_proxy_v3_shapes import SHAPE_OF_KIND, assert_shape
from tests.server.security.helpers import (
    ADMIN,
    acl,
    add_acls,
    call,
    eventually,
    key,
    start_secured,
)

CLUSTER = "/v3/clusters/lakelog"
GROUP_BROKER = {
    "group_min_session_timeout_ms": 500,
    "group_initial_rebalance_delay_ms": 0,
    "group_tick_ms": 50,
}
#: Links that answer 404 by design: no partition is ever being reassigned.
NEVER_THERE = ("/reassignment",)


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, f"{response.request.url}: {response.text}"
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def shaped(response: httpx.Response, name: str, status: int = 200) -> Any:
    body = ok(response, status)
    assert_shape(name, body)
    return body


def refused(response: httpx.Response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert_shape("Error", body)
    assert body["error_code"] == status
    for word in words:
        assert word in body["message"], body
    return str(body["message"])


def links(body: Any) -> Iterator[str]:
    """Every ``related`` URL and ``metadata.self`` in a body."""
    if isinstance(body, dict):
        for name, value in body.items():
            if name in ("related", "self") and isinstance(value, str):
                yield value
            else:
                yield from links(value)
    elif isinstance(body, list):
        for item in body:
            yield from links(item)


def crawl(http: httpx.Client, start: str) -> dict[str, str]:
    """Follow every link from ``start``; each must answer a resource of the shape its kind says."""
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        got = http.get(url)
        if got.status_code == 404 and url.endswith(NEVER_THERE):
            seen[url] = "404"
            continue
        body = ok(got)
        kind = body.get("kind") if isinstance(body, dict) else None
        assert kind in SHAPE_OF_KIND, f"{url} answered {body}"
        assert_shape(SHAPE_OF_KIND[kind], body, url)
        seen[url] = kind
        todo += [link for link in links(body) if link not in seen]
    return seen


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_every_v3_resource_and_link(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    broker = start_broker(root, broker_id="7", **GROUP_BROKER)
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        cluster = shaped(http.get(CLUSTER), "Cluster")
        for name in ("topics", "brokers", "consumer_groups", "acls", "broker_configs"):
            ok(http.get(cluster[name]["related"]))  # every advertised collection is served

        # -- topics
        created = shaped(
            http.post(
                f"{CLUSTER}/topics",
                json={
                    "topic_name": "orders",
                    "partitions_count": 2,
                    "replication_factor": 3,
                    "configs": [{"name": "retention.ms", "value": "3600000"}],
                },
            ),
            "Topic",
            201,
        )
        assert (created["partitions_count"], created["is_internal"]) == (2, False)
        assert created["metadata"]["self"] == f"{broker.url}{CLUSTER}/topics/orders"
        native = http.get("/v1/topics/orders").json()
        assert len(native["partitions"]) == 2
        assert {c["name"]: c["value"] for c in native["configs"]}["retention.ms"] == "3600000"
        refused(http.post(f"{CLUSTER}/topics", json={"topic_name": "orders"}), 400, "exists")
        dry = {"topic_name": "dry", "partitions_count": 4, "validate_only": True}
        assert shaped(http.post(f"{CLUSTER}/topics", json=dry), "Topic")["partitions_count"] == 4
        bad_config = {"topic_name": "bad", "configs": [{"name": "retention.ms", "value": "x"}]}
        refused(http.post(f"{CLUSTER}/topics", json=bad_config), 400, "retention.ms")
        placed = {"topic_name": "placed", "replicas_assignments": {"0": [1]}}
        refused(http.post(f"{CLUSTER}/topics", json=placed), 400, "replicas_assignments")
        refused(http.post(f"{CLUSTER}/topics", json={"topic_name": "a/b"}), 400)
        not_json = http.post(
            f"{CLUSTER}/topics", content=b"\x17\xff{", headers={"Content-Type": "application/json"}
        )
        refused(not_json, 400)
        assert http.get("/v1/topics").json()["topics"] == ["orders"]  # nothing else created
        listed = shaped(http.get(f"{CLUSTER}/topics"), "TopicList")
        assert [t["topic_name"] for t in listed["data"]] == ["orders"]
        refused(http.get(f"{CLUSTER}/topics/nope"), 404, "nope")
        refused(http.get("/v3/clusters/other/topics"), 404, "other")

        # -- partitions and replicas: broker 7 answers, so it leads every partition
        partition = shaped(http.get(f"{CLUSTER}/topics/orders/partitions/1"), "Partition")
        assert partition["leader"]["related"].endswith("/topics/orders/partitions/1/replicas/7")
        replica = shaped(http.get(partition["leader"]["related"]), "Replica")
        assert (replica["broker_id"], replica["is_leader"], replica["is_in_sync"]) == (
            7,
            True,
            True,
        )
        refused(http.get(f"{CLUSTER}/topics/orders/partitions/2"), 404, "partition 2")
        refused(http.get(f"{CLUSTER}/topics/orders/partitions/1/replicas/8"), 404, "broker 8")
        refused(http.get(f"{CLUSTER}/topics/orders/partitions/0/reassignment"), 404)
        grown = shaped(
            http.patch(f"{CLUSTER}/topics/orders", json={"partitions_count": 3}), "Topic"
        )
        assert grown["partitions_count"] == 3
        refused(http.patch(f"{CLUSTER}/topics/orders", json={"partitions_count": 1}), 400)

        # -- configs
        configs = shaped(http.get(f"{CLUSTER}/topics/orders/configs"), "TopicConfigList")
        by_name = {c["name"]: c for c in configs["data"]}
        assert by_name["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
        assert by_name["cleanup.policy"]["is_default"] is True
        path = f"{CLUSTER}/topics/orders/configs"
        assert http.put(f"{path}/cleanup.policy", json={"value": "compact"}).status_code == 204
        one = shaped(http.get(f"{path}/cleanup.policy"), "TopicConfig")
        assert (one["value"], one["is_default"]) == ("compact", False)
        assert http.delete(f"{path}/retention.ms").status_code == 204
        alter = {"data": [{"name": "cleanup.policy", "operation": "DELETE"}]}
        dry_alter = {**alter, "validate_only": True}
        assert http.post(f"{path}:alter", json=dry_alter).status_code == 204
        assert shaped(http.get(f"{path}/cleanup.policy"), "TopicConfig")["value"] == "compact"
        assert http.post(f"{path}:alter", json=alter).status_code == 204
        native_configs = {c["name"]: c for c in http.get("/v1/topics/orders").json()["configs"]}
        assert native_configs["cleanup.policy"]["is_default"] is True
        assert native_configs["retention.ms"]["is_default"] is True
        refused(http.put(f"{path}/retention.ms", json={"value": "soon"}), 400, "retention.ms")
        refused(http.get(f"{path}/no.such.config"), 404, "no.such.config")
        everything = shaped(http.get(f"{CLUSTER}/topics/-/configs"), "TopicConfigList")
        assert {c["topic_name"] for c in everything["data"]} == {"orders"}

        # -- brokers
        brokers = shaped(http.get(f"{CLUSTER}/brokers"), "BrokerList")
        assert [b["broker_id"] for b in brokers["data"]] == [7]
        assert http.get("/brokers").json() == {"brokers": [7]}
        linger = shaped(http.get(f"{CLUSTER}/brokers/7/configs/linger_ms"), "BrokerConfig")
        assert (linger["value"], linger["is_read_only"]) == ("5", True)
        refused(http.get(f"{CLUSTER}/brokers/8"), 404, "8")
        refused(http.get(f"{CLUSTER}/broker-configs/compression.type"), 404)

        # -- consumer groups: a member that consumed and committed everything
        with Producer(broker.url) as producer:
            for i in range(6):
                producer.send("orders", f"v{i}", partition=i % 3)
        consumer = Consumer(
            broker.url, group_id="billing", auto_offset_reset="earliest", client_id="biller"
        )
        try:
            consumer.subscribe(["orders"])
            seen = 0
            while seen < 6:
                seen += sum(len(r) for r in consumer.poll(500).values())
            consumer.commit()
            group = shaped(http.get(f"{CLUSTER}/consumer-groups/billing"), "ConsumerGroup")
            assert group["state"] == "STABLE" and group["is_simple"] is False
            assert group["coordinator"]["related"].endswith("/brokers/7")
            (member,) = shaped(http.get(group["consumers"]["related"]), "ConsumerList")["data"]
            assert member["client_id"] == "biller"
            assignments = shaped(
                http.get(member["assignments"]["related"]), "ConsumerAssignmentList"
            )
            assert sorted(a["partition_id"] for a in assignments["data"]) == [0, 1, 2]
            lags = shaped(http.get(f"{CLUSTER}/consumer-groups/billing/lags"), "ConsumerLagList")
            assert {(r["partition_id"], r["current_offset"], r["lag"]) for r in lags["data"]} == {
                (0, 2, 0),
                (1, 2, 0),
                (2, 2, 0),
            }
            with Producer(broker.url) as producer:
                producer.send("orders", "late", partition=1)
            summary = shaped(http.get(group["lag_summary"]["related"]), "ConsumerGroupLagSummary")
            assert (summary["max_lag"], summary["total_lag"]) == (1, 1)
            assert summary["max_lag_partition_id"] == 1
            assert summary["max_lag_consumer_id"] == member["consumer_id"]
            groups = shaped(http.get(f"{CLUSTER}/consumer-groups"), "ConsumerGroupList")
            assert [g["consumer_group_id"] for g in groups["data"]] == ["billing"]
            refused(http.get(f"{CLUSTER}/consumer-groups/nobody"), 404, "nobody")

            # -- ACLs
            ace = {
                "resource_type": "TOPIC",
                "resource_name": "ord",
                "pattern_type": "PREFIXED",
                "principal": "User:alice",
                "host": "*",
                "operation": "READ",
                "permission": "ALLOW",
            }
            assert http.post(f"{CLUSTER}/acls", json=ace).status_code == 201
            more = [
                {**ace, "resource_name": "orders", "pattern_type": "LITERAL"},
                {**ace, "resource_name": "payments", "pattern_type": "LITERAL"},
            ]
            assert http.post(f"{CLUSTER}/acls:batch", json={"data": more}).status_code == 201
            assert len(http.get("/v1/acls").json()["acls"]) == 3  # the store /v1/acls reads
            matching = shaped(
                http.get(
                    f"{CLUSTER}/acls",
                    params={"resource_type": "TOPIC", "resource_name": "orders",
                            "pattern_type": "MATCH"},
                ),
                "AclList",
            )  # fmt: skip
            assert sorted(a["resource_name"] for a in matching["data"]) == ["ord", "orders"]
            cluster_acl = {**ace, "resource_type": "CLUSTER", "resource_name": "other"}
            refused(http.post(f"{CLUSTER}/acls", json=cluster_acl), 400, "kafka-cluster")
            refused(http.post(f"{CLUSTER}/acls", json={**ace, "operation": "FLY"}), 400, "FLY")

            # -- every link, from the cluster down, answers
            seen_kinds = set(crawl(http, cluster["metadata"]["self"]).values())
            assert {
                "KafkaTopic",
                "KafkaPartition",
                "KafkaReplica",
                "KafkaTopicConfig",
                "KafkaBroker",
                "KafkaBrokerConfig",
                "KafkaConsumerGroup",
                "KafkaConsumer",
                "KafkaConsumerAssignment",
                "KafkaConsumerLag",
                "KafkaConsumerGroupLagSummary",
                "KafkaAclList",
            } <= seen_kinds
            # an ACL's own URL is the search that finds exactly that ACL
            for found in matching["data"]:
                (again,) = shaped(http.get(found["metadata"]["self"]), "AclList")["data"]
                assert again == found
        finally:
            consumer.close()

        deleted = shaped(
            http.delete(
                f"{CLUSTER}/acls",
                params={"resource_type": "TOPIC", "pattern_type": "ANY", "operation": "READ",
                        "permission": "ALLOW", "resource_name": "orders"},
            ),
            "DeletedAcls",
        )  # fmt: skip
        assert [a["resource_name"] for a in deleted["data"]] == ["orders"]
        assert len(http.get("/v1/acls").json()["acls"]) == 2
        refused(http.delete(f"{CLUSTER}/acls", params={"resource_type": "TOPIC"}), 400)

        assert http.delete(f"{CLUSTER}/topics/orders").status_code == 204
        refused(http.get(f"{CLUSTER}/topics/orders"), 404)
        refused(http.delete(f"{CLUSTER}/topics/__consumer_offsets"), 400, "internal")
        refused(http.get(f"{CLUSTER}/topics/bad$name"), 404, "bad$name")


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_v3_routes_apply_the_native_acl_rules(
    root: RootSpec, start_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = start_secured(start_broker, root, tmp_path)
    alice = key("User:alice")
    for name in ("visible", "hidden"):
        created = call(broker, "POST", f"{CLUSTER}/topics", ADMIN, json={"topic_name": name})
        assert created.status_code == 201, created.text
    add_acls(broker, acl("User:alice", "DESCRIBE", "visible"))

    def as_alice(method: str, path: str, **kwargs: Any) -> httpx.Response:
        return call(broker, method, path, alice, **kwargs)

    def eventually_listed() -> list[str]:
        body = as_alice("GET", f"{CLUSTER}/topics").json()
        return [t["topic_name"] for t in body["data"]]

    eventually(lambda: eventually_listed() == ["visible"])
    configs = as_alice("GET", f"{CLUSTER}/topics/-/configs").json()["data"]
    assert {c["topic_name"] for c in configs} == {"visible"}
    assert as_alice("GET", f"{CLUSTER}/topics/visible").status_code == 200
    refused(as_alice("GET", f"{CLUSTER}/topics/hidden"), 403, "hidden")
    refused(as_alice("GET", f"{CLUSTER}/topics/hidden/configs"), 403)
    refused(as_alice("POST", f"{CLUSTER}/topics", json={"topic_name": "mine"}), 403, "CREATE")
    refused(as_alice("DELETE", f"{CLUSTER}/topics/visible"), 403, "DELETE")
    refused(
        as_alice("PUT", f"{CLUSTER}/topics/visible/configs/retention.ms", json={"value": "1"}),
        403,
        "ALTER",
    )
    refused(as_alice("PATCH", f"{CLUSTER}/topics/visible", json={"partitions_count": 2}), 403)
    refused(as_alice("GET", f"{CLUSTER}/acls"), 403)
    refused(as_alice("GET", f"{CLUSTER}/consumer-groups/g1"), 403)
    assert as_alice("GET", f"{CLUSTER}/consumer-groups").json()["data"] == []
    refused(call(broker, "GET", f"{CLUSTER}/topics"), 401)
    listed = call(broker, "GET", f"{CLUSTER}/topics", ADMIN).json()["data"]
    assert sorted(t["topic_name"] for t in listed) == ["hidden", "visible"]
    assert call(broker, "GET", "/v1/topics", ADMIN).json()["topics"] == ["hidden", "visible"]
    # CREATE on the topic's own name is enough, as for POST /v1/topics
    add_acls(broker, acl("User:alice", "CREATE", "mine"), acl("User:alice", "DELETE", "mine"))
    eventually(
        lambda: (
            as_alice("POST", f"{CLUSTER}/topics", json={"topic_name": "mine"}).status_code == 201
        )
    )
    assert as_alice("DELETE", f"{CLUSTER}/topics/mine").status_code == 204


@pytest.mark.parametrize("make_root", ["local"], indirect=True)
def test_v3_answers_about_other_brokers_and_their_groups(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    """Broker configs and group members live on one broker; any broker answers for them."""
    brokers = [
        start_broker(root, broker_id=str(n), heartbeat_interval_ms=200, **GROUP_BROKER)
        for n in (1, 2)
    ]
    clients = [httpx.Client(base_url=b.url, timeout=60) for b in brokers]
    try:

        def both_listed() -> bool:
            return all(
                [b["broker_id"] for b in c.get(f"{CLUSTER}/brokers").json()["data"]] == [1, 2]
                for c in clients
            )

        eventually(both_listed)
        for http in clients:
            assert http.get("/brokers").json() == {"brokers": [1, 2]}
            for number in (1, 2):  # the other broker's settings come from that broker
                config = shaped(
                    http.get(f"{CLUSTER}/brokers/{number}/configs/broker_id"), "BrokerConfig"
                )
                assert config["value"] == str(number)

        shaped(http.post(f"{CLUSTER}/topics", json={"topic_name": "t"}), "Topic", 201)
        with Producer(brokers[0].url) as producer:
            producer.send("t", "v", partition=0)
        groups = [f"group-{i}" for i in range(6)]  # coordinators spread over both brokers
        consumers = [
            Consumer(brokers[0].url, group_id=g, auto_offset_reset="earliest") for g in groups
        ]
        try:
            for consumer in consumers:
                consumer.subscribe(["t"])
                while not consumer.poll(500):
                    pass
                consumer.commit()
            coordinators = set()
            for http in clients:
                listed = shaped(http.get(f"{CLUSTER}/consumer-groups"), "ConsumerGroupList")
                assert [g["consumer_group_id"] for g in listed["data"]] == groups
                assert {g["state"] for g in listed["data"]} == {"STABLE"}
                for group in groups:
                    one = shaped(http.get(f"{CLUSTER}/consumer-groups/{group}"), "ConsumerGroup")
                    coordinators.add(one["coordinator"]["related"].rsplit("/", 1)[1])
                    (member,) = shaped(
                        http.get(f"{CLUSTER}/consumer-groups/{group}/consumers"), "ConsumerList"
                    )["data"]
                    assert member["consumer_group_id"] == group
            assert coordinators == {"1", "2"}
        finally:
            for consumer in consumers:
                consumer.close()
    finally:
        for http in clients:
            http.close()
