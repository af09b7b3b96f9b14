"""Confluent's Schema Registry API of one broker subprocess, through confluent-kafka's
``SchemaRegistryClient`` and raw HTTP (exact error codes, bodies and content types)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)

from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

V1 = "application/vnd.schemaregistry.v1+json"
LIMIT = 4096


def record(name: str, *fields: object) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


USER_V1 = record("User", {"name": "name", "type": "string"})
USER_V2_OPTIONAL = record(
    "User", {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}
)
USER_V2_REQUIRED = record(
    "User", {"name": "name", "type": "string"}, {"name": "age", "type": "int"}
)


@pytest.fixture(scope="module")
def broker(
    tmp_path_factory: pytest.TempPathFactory, start_module_broker: Callable[..., BrokerProcess]
) -> BrokerProcess:
    root = RootSpec(str(tmp_path_factory.mktemp("registry-root")))
    return start_module_broker(root, schema_registry_max_schema_bytes=LIMIT)


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.url})


@pytest.fixture
def http(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, headers={"content-type": V1}) as c:
        yield c


def subject() -> str:
    return f"t{uuid.uuid4().hex[:8]}-value"


def fresh_client(broker: BrokerProcess) -> SchemaRegistryClient:
    """A client without the cache the module's client keeps."""
    return SchemaRegistryClient({"url": broker.url})


def error(exc: pytest.ExceptionInfo[SchemaRegistryError]) -> tuple[int, int]:
    return exc.value.http_status_code, exc.value.error_code


def test_register_get_lookup(client: SchemaRegistryClient, broker: BrokerProcess) -> None:
    s = subject()
    schema_id = client.register_schema(s, Schema(USER_V1, "AVRO"))
    assert client.register_schema(s, Schema(USER_V1, "AVRO")) == schema_id
    other = fresh_client(broker)
    assert json.loads(other.get_schema(schema_id).schema_str or "") == json.loads(USER_V1)
    latest = other.get_latest_version(s)
    assert (latest.version, latest.schema_id) == (1, schema_id)
    found = other.lookup_schema(s, Schema(USER_V1, "AVRO"))
    assert (found.version, found.schema_id, found.subject) == (1, schema_id, s)
    assert s in other.get_subjects()
    assert other.get_versions(s) == [1]
    assert other.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"]
    assert other.get_subjects_by_schema_id(schema_id) == [s]
    assert [(v.subject, v.version) for v in other.get_schema_versions(schema_id)] == [(s, 1)]
    with pytest.raises(SchemaRegistryError) as missing:
        other.get_schema(987654)
    assert error(missing) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as no_subject:
        other.get_latest_version("no-such-subject")
    assert error(no_subject) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as no_version:
        other.get_version(s, 5)
    assert error(no_version) == (404, 40402)


def test_compatibility_409_under_backward_accepted_under_none(
    client: SchemaRegistryClient, http: httpx.Client
) -> None:
    s = subject()
    client.register_schema(s, Schema(USER_V1, "AVRO"))
    assert client.get_compatibility() == "BACKWARD"
    assert client.test_compatibility(s, Schema(USER_V2_OPTIONAL, "AVRO"))
    assert not client.test_compatibility(s, Schema(USER_V2_REQUIRED, "AVRO"))
    verbose = http.post(
        f"/compatibility/subjects/{s}/versions/latest?verbose=true",
        json={"schema": USER_V2_REQUIRED},
    )
    assert verbose.status_code == 200 and verbose.json()["is_compatible"] is False
    assert verbose.json()["messages"]
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(s, Schema(USER_V2_REQUIRED, "AVRO"))
    assert error(refused) == (409, 409)
    assert "age" in refused.value.error_message
    assert http.put(f"/config/{s}", json={"compatibility": "NONE"}).json() == {
        "compatibility": "NONE"
    }
    assert client.get_compatibility(s) == "NONE"
    client.register_schema(s, Schema(USER_V2_REQUIRED, "AVRO"))
    assert client.get_versions(s) == [1, 2]
    # A subject without its own level: 40408 unless defaultToGlobal.
    t = subject()
    assert http.get(f"/config/{t}").json()["error_code"] == 40408
    assert http.get(f"/config/{t}?defaultToGlobal=true").json() == {
        "compatibilityLevel": "BACKWARD"
    }
    bad = http.put(f"/config/{t}", json={"compatibility": "SIDEWAYS"})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42203)


def test_deletes_soft_then_permanent(client: SchemaRegistryClient, http: httpx.Client) -> None:
    s = subject()
    first = client.register_schema(s, Schema(USER_V1, "AVRO"))
    client.register_schema(s, Schema(USER_V2_OPTIONAL, "AVRO"))
    assert client.delete_version(s, 1) == 1
    again = http.delete(f"/subjects/{s}/versions/1")
    assert (again.status_code, again.json()["error_code"]) == (404, 40406)
    assert http.get(f"/subjects/{s}/versions").json() == [2]
    assert http.get(f"/subjects/{s}/versions?deleted=true").json() == [1, 2]
    assert http.get(f"/schemas/ids/{first}").status_code == 200  # old records still decode
    early = http.delete(f"/subjects/{s}?permanent=true")
    assert (early.status_code, early.json()["error_code"]) == (404, 40405)
    assert client.delete_subject(s) == [2]
    assert s not in client.get_subjects()
    assert s in http.get("/subjects?deleted=true").json()
    assert client.delete_subject(s, permanent=True) == [1, 2]
    gone = http.get(f"/subjects/{s}/versions")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40401)


def test_references(client: SchemaRegistryClient, http: httpx.Client) -> None:
    base, user = subject(), subject()
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "ref",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    base_id = client.register_schema(base, Schema(address, "AVRO"))
    person = record("Person", {"name": "home", "type": "ref.Address"})
    refs = [SchemaReference("ref.Address", base, 1)]
    person_id = client.register_schema(user, Schema(person, "AVRO", refs))
    assert person_id != base_id
    assert http.get(f"/subjects/{base}/versions/1/referencedby").json() == [person_id]
    fetched = http.get(f"/schemas/ids/{person_id}").json()
    assert fetched["references"] == [{"name": "ref.Address", "subject": base, "version": 1}]
    refused = http.delete(f"/subjects/{base}/versions/1")
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42206)
    unknown = http.post(
        f"/subjects/{user}/versions",
        json={
            "schema": person,
            "references": [{"name": "ref.Address", "subject": "nope", "version": 1}],
        },
    )
    assert unknown.json()["error_code"] == 42201


def test_bad_schemas_and_content_types(http: httpx.Client) -> None:
    s = subject()
    bad = http.post(f"/subjects/{s}/versions", json={"schema": '{"type": "record", "name":'})
    assert bad.status_code == 422 and bad.headers["content-type"] == V1
    assert bad.json()["error_code"] == 42201 and set(bad.json()) == {"error_code", "message"}
    big = record("Big", *({"name": f"f{i}", "type": "string"} for i in range(200)))
    assert len(big) > LIMIT
    large = http.post(f"/subjects/{s}/versions", json={"schema": big})
    assert (large.status_code, large.json()["error_code"]) == (422, 42201)
    assert f"limit of {LIMIT} bytes" in large.json()["message"]
    assert http.get(f"/subjects/{s}/versions").json()["error_code"] == 40401  # nothing stored
    for kind in ("application/vnd.schemaregistry+json", "application/json"):
        ok = http.post(
            f"/subjects/{s}/versions",
            content=json.dumps({"schema": USER_V1}),
            headers={"content-type": kind},
        )
        assert ok.status_code == 200 and ok.headers["content-type"] == V1
    wrong = http.post(
        f"/subjects/{s}/versions", content="x", headers={"content-type": "text/plain"}
    )
    assert (wrong.status_code, wrong.json()["error_code"]) == (415, 415)
    refuse = http.get("/subjects", headers={"accept": "text/html"})
    assert refuse.status_code == 406
    unparsable = http.post(f"/subjects/{s}/versions", content="{nope")
    assert unparsable.status_code == 400 and unparsable.json()["error_code"] == 400
    version = http.get(f"/subjects/{s}/versions/zero")
    assert (version.status_code, version.json()["error_code"]) == (422, 42202)
    nowhere = http.get("/subjects/x/nowhere")
    assert nowhere.status_code == 404 and nowhere.json() == {
        "error_code": 404,
        "message": "HTTP 404 Not Found",
    }


def test_modes(http: httpx.Client) -> None:
    s = subject()
    assert http.post(f"/subjects/{s}/versions", json={"schema": USER_V1}).status_code == 200
    assert http.put(f"/mode/{s}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    refused = http.post(f"/subjects/{s}/versions", json={"schema": USER_V2_OPTIONAL})
    assert (refused.status_code, refused.json()["error_code"]) == (422, 42205)
    assert http.delete(f"/mode/{s}").json() == {"mode": "READONLY"}
    assert http.get(f"/mode/{s}").json()["error_code"] == 40409
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    bad = http.put(f"/mode/{s}", json={"mode": "SIDEWAYS"})
    assert bad.json()["error_code"] == 42204


def test_id_lookups_from_memory_answer_as_the_route(http: httpx.Client) -> None:
    """The first look-up goes through the route, the next ones are answered from memory:
    the same bytes and content type, counted under the route's template."""
    s = subject()
    schema_id = http.post(f"/subjects/{s}/versions", json={"schema": USER_V1}).json()["id"]
    answers = [http.get(f"/schemas/ids/{schema_id}") for _ in range(3)]
    assert {(a.status_code, a.headers["content-type"], a.content) for a in answers} == {
        (200, V1, answers[0].content)
    }
    assert json.loads(answers[0].json()["schema"]) == json.loads(USER_V1)
    counted = [
        line
        for line in http.get("/metrics").text.splitlines()
        if "/schemas/ids/{schema_id}" in line and line.startswith("lakelog_http_requests_total")
    ]
    assert counted, "look-ups answered from memory are not counted"
    refused = http.get(f"/schemas/ids/{schema_id}", headers={"accept": "text/html"})
    assert refused.status_code == 406
