"""SASL PLAIN and OAUTHBEARER messages checked against API keys and JWTs (pure)."""

from __future__ import annotations

import time

import jwt
import pytest

from lakelog.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from server.kafka.sasl import SaslCredentials, parse_oauthbearer, parse_plain
from server.security.credentials import ApiKeys, JwtVerifier

SECRET = "sasl-unit-test-secret-0123456789abcdef"
KEYS = ApiKeys.from_entries(
    [{"principal": "User:alice", "key": "alice-key"}, {"principal": "User:bob", "key": "bob-key"}],
    "test",
)
VERIFIER = JwtVerifier(secret=SECRET)


def jwt_for(subject: str, secret: str = SECRET, exp_in_s: int = 300) -> str:
    return jwt.encode({"sub": subject, "exp": int(time.time()) + exp_in_s}, secret, "HS256")


def test_mechanisms_follow_auth_mode() -> None:
    assert SaslCredentials("api_key", KEYS, None).mechanisms() == ["PLAIN"]
    assert SaslCredentials("jwt", None, VERIFIER).mechanisms() == ["OAUTHBEARER"]
    assert SaslCredentials("any", KEYS, VERIFIER).mechanisms() == ["PLAIN", "OAUTHBEARER"]
    assert SaslCredentials("any", None, VERIFIER).mechanisms() == ["OAUTHBEARER"]
    with pytest.raises(UnsupportedSaslMechanismError, match="enabled: PLAIN"):
        SaslCredentials("api_key", KEYS, None).authenticate("OAUTHBEARER", b"")


def test_plain_maps_username_and_api_key_to_the_keys_principal() -> None:
    creds = SaslCredentials("any", KEYS, VERIFIER)
    assert creds.authenticate("PLAIN", b"\0alice\0alice-key") == "User:alice"
    assert creds.authenticate("PLAIN", b"\0User:alice\0alice-key") == "User:alice"
    assert creds.authenticate("PLAIN", b"alice\0alice\0alice-key") == "User:alice"
    for refused in (
        b"\0alice\0bob-key",  # another principal's key
        b"\0alice\0wrong",
        b"bob\0alice\0alice-key",  # acting as another user
        b"\0alice",
        b"\0\0alice-key",
        b"\xff\0alice\0alice-key",
    ):
        with pytest.raises(SaslAuthenticationFailedError) as caught:
            creds.authenticate("PLAIN", refused)
        assert not any(k in caught.value.message for k in ("alice-key", "bob-key", "wrong"))


def test_oauthbearer_checks_the_bearer_token_as_a_jwt() -> None:
    creds = SaslCredentials("jwt", None, VERIFIER)
    token = jwt_for("carol")
    message = f"n,,\x01host=broker\x01auth=Bearer {token}\x01\x01".encode()
    assert creds.authenticate("OAUTHBEARER", message) == "User:carol"
    assert parse_oauthbearer(f"n,a=carol,\x01auth=Bearer {token}\x01\x01".encode()) == token
    forged = jwt_for("carol", secret="another-secret-0123456789abcdefghij")
    expired = jwt_for("carol", exp_in_s=-60)
    for bad in (forged, expired):
        with pytest.raises(SaslAuthenticationFailedError, match="bearer token rejected") as caught:
            creds.authenticate("OAUTHBEARER", f"n,,\x01auth=Bearer {bad}\x01\x01".encode())
        assert bad not in caught.value.message
    for malformed in (b"auth=Bearer x", b"n,,\x01auth=Basic x\x01\x01", b"n,,\x01\x01"):
        with pytest.raises(SaslAuthenticationFailedError, match="OAUTHBEARER"):
            creds.authenticate("OAUTHBEARER", malformed)


def test_plain_message_layout() -> None:
    assert parse_plain(b"z\0user\0pass") == ("z", "user", "pass")
    with pytest.raises(SaslAuthenticationFailedError, match="RFC 4616"):
        parse_plain(b"user\0pass")
