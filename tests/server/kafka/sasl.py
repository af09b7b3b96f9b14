"""SASL credentials for the Kafka security tests: client-library settings and raw exchanges.

PLAIN's username is the principal's user name and its password the
principal's API key; OAUTHBEARER's token is an HS256 JWT whose ``sub`` is
the user (docs/kafka-protocol.md).
"""

from __future__ import annotations

import time
from typing import Any

import jwt
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.server.kafka.raw import RawConnection
from tests.server.security.helpers import JWT_SECRET, KEYS

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
TOKEN_LIFETIME_S = 600


def user(principal: str) -> str:
    return principal.partition(":")[2]


def token(principal: str, secret: str = JWT_SECRET) -> str:
    claims = {
        "sub": user(principal),
        "exp": int(time.time()) + TOKEN_LIFETIME_S,
        "iss": "lakelog-tests",
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def plain_bytes(username: str, password: str) -> bytes:
    return f"\0{username}\0{password}".encode()


def oauth_bytes(bearer: str) -> bytes:
    return f"n,,\x01auth=Bearer {bearer}\x01\x01".encode()


def client_settings(client_name: str, mechanism: str, principal: str) -> dict[str, Any]:
    """The settings each library's users give for SASL_PLAINTEXT with ``mechanism``."""
    if client_name == "confluent":
        if mechanism == "PLAIN":
            return {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user(principal),
                "sasl.password": KEYS[principal],
            }
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token(principal), time.time() + TOKEN_LIFETIME_S),
        }
    settings: dict[str, Any] = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    if mechanism == "PLAIN":
        settings.update(sasl_plain_username=user(principal), sasl_plain_password=KEYS[principal])
    elif client_name == "kafka-python":
        settings["sasl_oauth_token_provider"] = _kafka_python_provider(principal)
    else:
        settings["sasl_oauth_token_provider"] = _aiokafka_provider(principal)
    return settings


def _kafka_python_provider(principal: str) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return token(principal)

    return Provider()


def _aiokafka_provider(principal: str) -> Any:
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return token(principal)

    return Provider()


def handshake(conn: RawConnection, mechanism: str) -> Any:
    return conn.request(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))


def authenticate(conn: RawConnection, mechanism: str, auth_bytes: bytes) -> Any:
    """Handshake then SaslAuthenticate v2; the SaslAuthenticate answer."""
    answer = handshake(conn, mechanism)
    assert int(answer.error_code) == 0, answer
    return conn.request(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=auth_bytes))


def sasl_connection(address: str, principal: str, mechanism: str = "PLAIN") -> RawConnection:
    """A raw connection authenticated as ``principal``."""
    conn = RawConnection(address)
    if mechanism == "PLAIN":
        auth_bytes = plain_bytes(user(principal), KEYS[principal])
    else:
        auth_bytes = oauth_bytes(token(principal))
    answer = authenticate(conn, mechanism, auth_bytes)
    assert int(answer.error_code) == 0, answer
    return conn
