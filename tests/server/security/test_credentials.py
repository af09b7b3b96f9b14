"""API keys and JWTs (HS256 and RS256) to principals; failures never echo the credential."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from lakelog.errors import InvalidConfigError, SaslAuthenticationFailedError
from server.security.credentials import ApiKeys, JwtVerifier, authenticate, key_digest

SECRET = "a-test-secret-that-is-long-enough-for-hs256"


def write_keys(tmp_path: Path, entries: object) -> str:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"api_keys": entries}))
    return str(path)


def test_api_keys_by_digest_or_plain(tmp_path: Path) -> None:
    keys = ApiKeys.from_file(
        write_keys(
            tmp_path,
            [
                {"principal": "User:alice", "sha256": key_digest("alice-key")},
                {"principal": "User:bob", "key": "bob-key"},
            ],
        )
    )
    assert keys.principal_for("alice-key") == "User:alice"
    assert keys.principal_for("bob-key") == "User:bob"
    with pytest.raises(SaslAuthenticationFailedError) as info:
        keys.principal_for("alice-key-guess")
    assert "alice-key-guess" not in str(info.value)


@pytest.mark.parametrize(
    "entries, problem",
    [
        ([{"key": "k"}], "principal"),
        ([{"principal": "alice", "key": "k"}], "Type:name"),
        ([{"principal": "User:a", "sha256": "xyz"}], "hex digest"),
        ([{"principal": "User:a"}], "'sha256' or 'key'"),
    ],
)
def test_bad_key_files_are_named(tmp_path: Path, entries: object, problem: str) -> None:
    with pytest.raises(InvalidConfigError, match=problem):
        ApiKeys.from_file(write_keys(tmp_path, entries))
    with pytest.raises(InvalidConfigError, match="cannot read"):
        ApiKeys.from_file(str(tmp_path / "missing.json"))


def token(key: object, algorithm: str = "HS256", **claims: object) -> str:
    body = {"sub": "alice", "exp": int(time.time()) + 60, **claims}
    return jwt.encode(body, key, algorithm=algorithm)  # type: ignore[arg-type]


def test_hs256_tokens() -> None:
    verifier = JwtVerifier(secret=SECRET, issuer="lakelog-tests", audience="brokers")
    good = token(SECRET, iss="lakelog-tests", aud="brokers")
    assert verifier.principal_for(good) == "User:alice"
    failures = {
        "expired": token(SECRET, iss="lakelog-tests", aud="brokers", exp=int(time.time()) - 5),
        "bad signature": token(SECRET + "x", iss="lakelog-tests", aud="brokers"),
        "wrong issuer": token(SECRET, iss="elsewhere", aud="brokers"),
        "wrong audience": token(SECRET, iss="lakelog-tests", aud="others"),
        "no expiry": jwt.encode({"sub": "a", "iss": "lakelog-tests", "aud": "brokers"}, SECRET),
        "not a jwt": "abc.def",
    }
    for what, bad in failures.items():
        with pytest.raises(SaslAuthenticationFailedError) as info:
            verifier.principal_for(bad)
        assert bad not in str(info.value), what


def test_rs256_tokens_and_no_algorithm_confusion() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    verifier = JwtVerifier(public_key=public_pem)
    assert verifier.principal_for(token(private, "RS256", sub="svc")) == "User:svc"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(SaslAuthenticationFailedError):
        verifier.principal_for(token(other, "RS256"))
    # Algorithm confusion: an HS256 token keyed with the public key text must not pass.
    forged = hs256_by_hand({"sub": "x", "exp": int(time.time()) + 60}, public_pem.encode())
    with pytest.raises(SaslAuthenticationFailedError):
        verifier.principal_for(forged)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_by_hand(claims: dict[str, object], key: bytes) -> str:
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    mac = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(mac)}"


def test_authenticate_by_mode(tmp_path: Path) -> None:
    keys = ApiKeys({key_digest("k1"): "User:alice"})
    verifier = JwtVerifier(secret=SECRET)
    bearer = {"authorization": f"Bearer {token(SECRET, sub='bob')}"}
    assert authenticate("none", {}, None, None).principal == "User:ANONYMOUS"
    assert authenticate("api_key", {"x-api-key": "k1"}, keys, None).principal == "User:alice"
    assert authenticate("any", bearer, keys, verifier).principal == "User:bob"
    with pytest.raises(SaslAuthenticationFailedError, match="X-API-Key"):
        authenticate("api_key", bearer, keys, verifier)  # a JWT is not an API key
    with pytest.raises(SaslAuthenticationFailedError, match="Bearer"):
        authenticate("jwt", {"x-api-key": "k1"}, keys, verifier)
    with pytest.raises(SaslAuthenticationFailedError, match="authentication required"):
        authenticate("any", {}, keys, verifier)
