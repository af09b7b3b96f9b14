"""Authentication on a real broker: without valid credentials nothing is read or written.

Every data-touching route is tried without credentials, with an unknown API
key, an expired JWT and a JWT signed with the wrong key: each answer is 401
SASL_AUTHENTICATION_FAILED and the storage root is byte-for-byte unchanged.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import (
    ADMIN,
    JWT_SECRET,
    KEYS,
    StartBroker,
    assert_refused,
    bearer,
    call,
    create_topic,
    data_snapshot,
    produce_body,
    start_secured,
)

BINARY_V2 = "application/vnd.kafka.binary.v2+json"
COMMIT = {
    "member_id": "",
    "generation_id": -1,
    "offsets": [{"topic": "orders", "partition": 0, "offset": 1, "metadata": ""}],
}

#: (method, path, keyword arguments) of every route that reads or changes data.
ATTEMPTS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/topics/orders/records", {"json": produce_body("intruder")}),
    ("GET", "/v1/topics/orders/partitions/0/records", {}),
    ("GET", "/v1/topics/orders/partitions/0/offsets", {}),
    ("GET", "/v1/topics/orders/offsets", {}),
    ("GET", "/v1/topics", {}),
    ("GET", "/v1/topics/orders", {}),
    ("POST", "/v1/topics", {"json": {"name": "intruder", "partitions": 1}}),
    ("DELETE", "/v1/topics/orders", {}),
    ("PATCH", "/v1/topics/orders/configs", {"json": {"set": {"retention.ms": "1"}}}),
    ("POST", "/v1/topics/orders/partitions", {"json": {"count": 4}}),
    ("GET", "/v1/brokers", {}),
    ("GET", "/v1/acls", {}),
    ("POST", "/v1/acls", {"json": {"acls": []}}),
    ("DELETE", "/v1/acls", {"params": {"principal": "User:admin"}}),
    ("PATCH", "/v1/quotas", {"json": {"entity": {"user": "x"}, "set": {"request_rate": 1}}}),
    ("GET", "/v1/groups", {}),
    ("GET", "/v1/groups/g1", {}),
    ("GET", "/v1/groups/g1/offsets", {}),
    ("POST", "/v1/groups/g1/offsets", {"json": COMMIT}),
    ("DELETE", "/v1/groups/g1", {}),
    (
        "POST",
        "/v1/groups/g1/offsets:reset",
        {"json": {"all_topics": True, "to": {"earliest": True}, "execute": True}},
    ),
    (
        "POST",
        "/v1/groups/g1/members",
        {"json": {"member_id": "", "protocols": ["range"], "topics": ["orders"]}},
    ),
]
#: REST Proxy v2: (method, path, extra headers, keyword arguments)
V2_ATTEMPTS: list[tuple[str, str, dict[str, str], dict[str, Any]]] = [
    ("GET", "/topics/orders", {}, {}),
    (
        "POST",
        "/topics/orders",
        {"Content-Type": BINARY_V2},
        {"json": {"records": [{"value": "aW50cnVkZXI="}]}},
    ),
    ("GET", "/topics/orders/partitions/0/offsets", {}, {}),
]
V3_RECORDS = "/v3/clusters/lakelog/topics/orders/records"


def bad_credentials() -> dict[str, dict[str, str]]:
    return {
        "none": {},
        "unknown API key": {"X-API-Key": "guessed-key"},
        "expired JWT": bearer("admin", exp_in_s=-60),
        "JWT signed with another key": bearer("admin", secret="not-the-" + JWT_SECRET),
        "unsigned JWT": {
            "Authorization": "Bearer "
            + jwt.encode({"sub": "admin", "exp": int(time.time()) + 60}, "", algorithm="none")
        },
        "basic auth": {"Authorization": "Basic YWRtaW46YWRtaW4="},
    }


def test_unauthenticated_requests_touch_no_data(start_broker: StartBroker, tmp_path: Path) -> None:
    root = RootSpec(str(tmp_path / "root"))
    broker = start_secured(start_broker, root, tmp_path)
    create_topic(broker, "orders", partitions=2)
    produced = call(broker, "POST", "/v1/topics/orders/records", ADMIN, json=produce_body("a", "b"))
    assert produced.status_code == 200, produced.text
    committed = call(broker, "POST", "/v1/groups/g1/offsets", ADMIN, json=COMMIT)
    assert committed.status_code == 200, committed.text
    before = data_snapshot(root.open())
    checked = 0
    for what, headers in bad_credentials().items():
        for method, path, kwargs in ATTEMPTS:
            answer = call(broker, method, path, headers, **kwargs)
            assert answer.status_code == 401, (what, method, path, answer.text)
            body = answer.json()
            assert body["error_code"] == 58 and body["error"] == "SASL_AUTHENTICATION_FAILED"
            assert "records" not in body
            checked += 1
        for method, path, extra, kwargs in V2_ATTEMPTS:
            answer = call(broker, method, path, {**headers, **extra}, **kwargs)
            assert_refused(answer, 401, 40101)
            checked += 1
        answer = call(
            broker, "POST", V3_RECORDS, headers, json={"value": {"type": "STRING", "data": "x"}}
        )
        assert answer.status_code == 401 and "SASL_AUTHENTICATION_FAILED" in answer.text
        checked += 1
    assert data_snapshot(root.open()) == before
    print(f"{checked} unauthenticated requests refused; stored objects unchanged: {len(before)}")

    # open routes stay open; admin still sees the untouched data
    assert call(broker, "GET", "/healthz").status_code == 200
    assert call(broker, "GET", "/metrics").status_code == 200
    fetched = call(broker, "GET", "/v1/topics/orders/partitions/0/records", ADMIN).json()
    fetched1 = call(broker, "GET", "/v1/topics/orders/partitions/1/records", ADMIN).json()
    values = [r["value"] for r in fetched["records"] + fetched1["records"]]
    assert sorted(values) == ["a", "b"]

    log = broker.log()
    assert "authentication failed" in log
    for secret in [*KEYS.values(), JWT_SECRET, "guessed-key"]:
        assert secret not in log


def test_valid_jwt_and_api_key_identify_the_principal(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    broker = start_secured(start_broker, RootSpec(str(tmp_path / "root")), tmp_path)
    assert call(broker, "GET", "/v1/whoami", bearer("alice")).json() == {
        "principal": "User:alice",
        "method": "jwt",
    }
    assert call(broker, "GET", "/v1/whoami", {"X-API-Key": KEYS["User:bob"]}).json() == {
        "principal": "User:bob",
        "method": "api_key",
    }
    wrong_issuer = {
        "Authorization": "Bearer "
        + jwt.encode({"sub": "alice", "exp": int(time.time()) + 60, "iss": "elsewhere"}, JWT_SECRET)
    }
    assert_refused(call(broker, "GET", "/v1/whoami", wrong_issuer), 401, 58)


def test_rs256_tokens_and_protected_metrics(start_broker: StartBroker, tmp_path: Path) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_file = tmp_path / "jwt-public.pem"
    public_file.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    broker = start_broker(
        RootSpec(str(tmp_path / "root")),
        auth_mode="jwt",
        jwt_public_key_file=str(public_file),
        super_users="User:ops",
        metrics_require_auth="true",
    )

    def rs256(subject: str, exp_in_s: int = 60) -> dict[str, str]:
        claims = {"sub": subject, "exp": int(time.time()) + exp_in_s}
        return {"Authorization": "Bearer " + jwt.encode(claims, private, algorithm="RS256")}

    assert call(broker, "GET", "/v1/whoami", rs256("ops")).json()["principal"] == "User:ops"
    assert_refused(call(broker, "GET", "/v1/whoami", rs256("ops", exp_in_s=-5)), 401, 58)
    assert_refused(call(broker, "GET", "/v1/whoami", bearer("ops")), 401, 58)  # HS256: refused
    assert_refused(call(broker, "GET", "/metrics"), 401, 58)
    assert_refused(call(broker, "GET", "/metrics", rs256("viewer")), 403, 31)
    metrics = call(broker, "GET", "/metrics", rs256("ops"))
    assert metrics.status_code == 200
    assert "lakelog_authentication_failures_total 3.0" in metrics.text
    assert call(broker, "GET", "/healthz").status_code == 200
