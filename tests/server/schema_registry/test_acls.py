"""The registry's routes under authentication and ACLs on SUBJECT resources, on a
secured broker subprocess; refusals in Confluent's body."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import ADMIN, acl, add_acls, call, key, start_secured

SCHEMA = json.dumps({"type": "record", "name": "O", "fields": [{"name": "a", "type": "int"}]})
ALICE, BOB, CAROL = key("User:alice"), key("User:bob"), key("User:carol")


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    tmp = tmp_path_factory.mktemp("registry-acls")
    broker = start_secured(start_module_broker, RootSpec(str(tmp / "root")), tmp)
    add_acls(
        broker,
        acl("User:alice", "WRITE", "orders", "SUBJECT", pattern_type="PREFIXED"),
        acl("User:bob", "READ", "orders-value", "SUBJECT"),
        acl("User:bob", "ALTER_CONFIGS", "orders-value", "SUBJECT"),
    )
    return broker


def refused(answer: httpx.Response, status: int, code: int) -> None:
    assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text
    assert answer.headers["content-type"] == "application/vnd.schemaregistry.v1+json"


def test_subject_acls(broker: BrokerProcess) -> None:
    body = {"schema": SCHEMA}
    refused(call(broker, "GET", "/subjects"), 401, 401)
    refused(call(broker, "GET", "/schemas/ids/1"), 401, 401)
    registered = call(broker, "POST", "/subjects/orders-value/versions", ALICE, json=body)
    assert registered.status_code == 200, registered.text
    schema_id = registered.json()["id"]
    refused(call(broker, "POST", "/subjects/payments-value/versions", ALICE, json=body), 403, 40301)
    refused(call(broker, "POST", "/subjects/orders-value/versions", BOB, json=body), 403, 40301)
    assert (
        call(broker, "POST", "/subjects/other-value/versions", ADMIN, json=body).status_code == 200
    )

    # Listings show what the caller may DESCRIBE (implied by READ and WRITE).
    assert call(broker, "GET", "/subjects", ALICE).json() == ["orders-value"]
    assert call(broker, "GET", "/subjects", BOB).json() == ["orders-value"]
    assert call(broker, "GET", "/subjects", CAROL).json() == []
    assert call(broker, "GET", "/subjects", ADMIN).json() == ["orders-value", "other-value"]
    assert call(broker, "GET", f"/schemas/ids/{schema_id}/subjects", BOB).json() == ["orders-value"]

    # Schemas by id: any authenticated principal (a consumer has only the id).
    assert call(broker, "GET", f"/schemas/ids/{schema_id}", CAROL).status_code == 200
    refused(call(broker, "GET", f"/schemas/ids/{schema_id}"), 401, 401)  # cached, still checked
    assert call(broker, "GET", "/subjects/orders-value/versions/1", BOB).status_code == 200
    refused(call(broker, "GET", "/subjects/orders-value/versions/1", CAROL), 403, 40301)
    refused(call(broker, "DELETE", "/subjects/orders-value", BOB), 403, 40301)

    # Subject config with ALTER_CONFIGS on it; the global level needs the cluster's.
    level = {"compatibility": "FULL"}
    assert call(broker, "PUT", "/config/orders-value", BOB, json=level).status_code == 200
    refused(call(broker, "PUT", "/config/other-value", BOB, json=level), 403, 40301)
    refused(call(broker, "PUT", "/config", BOB, json=level), 403, 40301)
    refused(call(broker, "PUT", "/mode", BOB, json={"mode": "READONLY"}), 403, 40301)
    assert call(broker, "GET", "/config", CAROL).json() == {"compatibilityLevel": "BACKWARD"}
    assert call(broker, "PUT", "/config", ADMIN, json=level).status_code == 200

    # The ACL admin API lists SUBJECT bindings like any other.
    listed = call(broker, "GET", "/v1/acls?resource_type=SUBJECT", ADMIN).json()
    assert len(listed["acls"]) == 3
