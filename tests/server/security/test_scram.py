"""SCRAM credentials from salted passwords, Kafka's alteration rules, and the exchange (pure)."""

from __future__ import annotations

import pytest
import scramp

from lakelog.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from lakelog.security.scram import (
    Credentials,
    Deletion,
    ScramCredential,
    Upsertion,
    alter,
    decode,
    derive,
    encode,
    salted_password,
)
from server.kafka.sasl import SaslCredentials, ScramExchange
from server.security.credentials import ApiKeys

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


def upsertion(
    user: str, password: str, mechanism: int = SHA256, iterations: int = 4096
) -> Upsertion:
    name = "SCRAM-SHA-256" if mechanism == SHA256 else "SCRAM-SHA-512"
    return Upsertion(
        user, mechanism, iterations, SALT, salted_password(name, password, SALT, iterations)
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_keys_from_the_salted_password_are_scramps_keys_from_the_password(mechanism: str) -> None:
    salted = salted_password(mechanism, "pa55", SALT, 4096)
    mine = derive("alice", mechanism, 4096, SALT, salted)
    expected = scramp.ScramMechanism(mechanism).make_auth_info("pa55", 4096, SALT)
    assert (mine.salt, mine.stored_key, mine.server_key, mine.iterations) == expected
    assert "pa55" not in repr(mine) and str(mine.stored_key) not in repr(mine)
    assert decode({"credentials": encode({("alice", mechanism): mine})}) == {
        ("alice", mechanism): mine
    }


def test_alter_follows_kafkas_rules_per_user() -> None:
    current, outcome = alter({}, [], [upsertion("alice", "a"), upsertion("bob", "b", SHA512)])
    assert outcome == {"alice": None, "bob": None}
    assert sorted(current) == [("alice", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-512")]
    after, outcome = alter(
        current,
        [Deletion("bob", SHA512), Deletion("carol", SHA256), Deletion("dave", 7)],
        [
            upsertion("alice", "again"),
            upsertion("alice", "twice"),
            upsertion("", "x"),
            upsertion("erin", "x", iterations=4095),
            upsertion("frank", "x", iterations=16385),
        ],
    )
    errors = {user: type(error) for user, error in outcome.items()}
    assert errors == {
        "bob": type(None),
        "carol": ResourceNotFoundError,
        "dave": UnsupportedSaslMechanismError,
        "alice": DuplicateResourceError,
        "": UnacceptableCredentialError,
        "erin": UnacceptableCredentialError,
        "frank": UnacceptableCredentialError,
    }
    assert [outcome[u].message for u in ("erin", "frank")] == [  # type: ignore[union-attr]
        "Too few iterations",
        "Too many iterations",
    ]
    # alice named twice: neither of her changes applies; bob's deletion does
    assert after == {("alice", "SCRAM-SHA-256"): current[("alice", "SCRAM-SHA-256")]}


def lookup_of(credentials: Credentials) -> SaslCredentials:
    keys = ApiKeys.from_entries([], "test")
    return SaslCredentials("api_key", keys, None, lambda user, m: credentials.get((user, m)))


def run_exchange(
    sasl: SaslCredentials, mechanism: str, user: str, password: str
) -> tuple[str | None, ScramExchange]:
    """A scramp client against the broker's exchange: the principal the server proves."""
    exchange = sasl.start(mechanism)
    assert isinstance(exchange, ScramExchange)
    client = scramp.ScramClient([mechanism], user, password)
    server_first, principal = exchange.step(client.get_client_first().encode())
    assert principal is None
    client.set_server_first(server_first.decode())
    server_final, principal = exchange.step(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # the client checks the server's signature
    return principal, exchange


@pytest.mark.parametrize(
    ("mechanism", "code"), [("SCRAM-SHA-256", SHA256), ("SCRAM-SHA-512", SHA512)]
)
def test_a_scram_exchange_proves_the_user_with_the_right_password_only(
    mechanism: str, code: int
) -> None:
    credentials, _ = alter({}, [], [upsertion("alice", "s3cret", code)])
    sasl = lookup_of(credentials)
    assert sasl.mechanisms() == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert run_exchange(sasl, mechanism, "alice", "s3cret")[0] == "User:alice"
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials") as caught:
        run_exchange(sasl, mechanism, "alice", "wrong")
    assert "wrong" not in caught.value.message and "'alice'" in caught.value.message
    with pytest.raises(SaslAuthenticationFailedError, match="user 'mallory'"):
        run_exchange(sasl, mechanism, "mallory", "s3cret")
    other = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-256"
    with pytest.raises(SaslAuthenticationFailedError):  # no credential for the other mechanism
        run_exchange(sasl, other, "alice", "s3cret")


def test_an_authorization_id_and_a_malformed_message_are_refused() -> None:
    credentials, _ = alter({}, [], [upsertion("alice", "s3cret")])
    exchange = lookup_of(credentials).start("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailedError, match="authzid"):
        exchange.step(b"n,a=bob,n=alice,r=abcdefghijklmnop")
    with pytest.raises(SaslAuthenticationFailedError, match="SCRAM-SHA-256"):
        lookup_of(credentials).start("SCRAM-SHA-256").step(b"not a scram message")


def test_a_credential_is_never_its_password() -> None:
    credentials, _ = alter({}, [], [upsertion("alice", "s3cret")])
    stored = encode(credentials)
    text = repr(stored)
    assert "s3cret" not in text
    salted = salted_password("SCRAM-SHA-256", "s3cret", SALT, 4096)
    assert all(isinstance(c, ScramCredential) for c in credentials.values())
    assert salted.hex() not in text and str(salted) not in text
