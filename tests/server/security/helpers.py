"""Shared pieces of the security tests: credentials, secured brokers, storage snapshots."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from lakelog.storage import Storage
from server.security.credentials import key_digest
from tests.fixtures.brokers import BrokerProcess
from tests.fixtures.roots import RootSpec

StartBroker = Callable[..., BrokerProcess]

JWT_SECRET = "jwt-secret-for-the-security-tests-0123456789"
#: principal -> API key (the file stores only their digests)
KEYS = {
    "User:admin": "admin-key-7f3e",
    "User:alice": "alice-key-91ab",
    "User:bob": "bob-key-2c44",
    "User:carol": "carol-key-5d10",
}


def write_key_file(directory: Path) -> str:
    path = directory / "api-keys.json"
    entries = [{"principal": p, "sha256": key_digest(k)} for p, k in KEYS.items()]
    path.write_text(json.dumps({"api_keys": entries}))
    return str(path)


def key(principal: str) -> dict[str, str]:
    return {"X-API-Key": KEYS[principal]}


def bearer(subject: str, secret: str = JWT_SECRET, exp_in_s: int = 300) -> dict[str, str]:
    claims = {"sub": subject, "exp": int(time.time()) + exp_in_s, "iss": "lakelog-tests"}
    return {"Authorization": "Bearer " + jwt.encode(claims, secret, algorithm="HS256")}


ADMIN = key("User:admin")


def start_secured(
    start_broker: StartBroker, root: RootSpec, tmp_path: Path, **settings: object
) -> BrokerProcess:
    """A broker with API keys and HS256 JWTs on, and User:admin as super user."""
    options: dict[str, object] = {
        "auth_mode": "any",
        "api_keys_file": write_key_file(tmp_path),
        "jwt_secret": JWT_SECRET,
        "jwt_issuer": "lakelog-tests",
        "super_users": "User:admin",
        "acl_refresh_ms": 200,
    }
    options.update(settings)
    return start_broker(root, **options)


def call(
    broker: BrokerProcess,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    with httpx.Client(base_url=broker.url, timeout=60) as http:
        return http.request(method, path, headers=headers, **kwargs)


def add_acls(broker: BrokerProcess, *acls: dict[str, str]) -> None:
    answer = call(broker, "POST", "/v1/acls", ADMIN, json={"acls": list(acls)})
    assert answer.status_code == 201, answer.text


def acl(
    principal: str,
    operation: str,
    resource_name: str,
    resource_type: str = "TOPIC",
    pattern_type: str = "LITERAL",
    permission: str = "ALLOW",
) -> dict[str, str]:
    return {
        "principal": principal,
        "operation": operation,
        "resource_type": resource_type,
        "resource_name": resource_name,
        "pattern_type": pattern_type,
        "permission": permission,
    }


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    answer = call(
        broker, "POST", "/v1/topics", ADMIN, json={"name": name, "partitions": partitions}
    )
    assert answer.status_code == 201, answer.text


def produce_body(*values: str) -> dict[str, Any]:
    return {"records": [{"value": v} for v in values]}


def data_snapshot(storage: Storage) -> dict[str, str]:
    """Every stored object but broker heartbeats, by path, with a digest of its bytes."""
    return {
        info.path: hashlib.sha256(storage.read_bytes(info.path)).hexdigest()
        for top in ("_meta", "topics", "_consumer_offsets")
        for info in storage.walk_files(top)
        if not info.path.startswith("_meta/brokers/")
    }


def assert_refused(answer: httpx.Response, status: int, code: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code, answer.text


def eventually(check: Callable[[], bool], guard_s: float = 20) -> None:
    """Poll until ``check()`` holds (brokers pick up ACL changes on their next
    refresh); the guard stops a hang, it does not judge speed."""
    deadline = time.monotonic() + guard_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"condition still false after {guard_s} s: {check}")
        time.sleep(0.1)
