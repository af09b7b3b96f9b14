"""SASL on the Kafka listener: which mechanisms a broker offers, and who a client's bytes prove.

Pure apart from the credential look-ups it is given. PLAIN's password is an API
key of ``api_keys_file`` and OAUTHBEARER's token a bearer JWT, so a principal
has one identity whatever the front end; SCRAM-SHA-256/512 check a two-step
exchange (RFC 5802) against the credentials AlterUserScramCredentials stored
(docs/kafka-protocol.md, "Authentication (SASL)").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import scramp

from lakelog.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from lakelog.security.scram import MECHANISM_NAMES, ScramCredential
from server.security.credentials import ApiKeys, AuthMode, JwtVerifier

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
SCRAM_MECHANISMS = tuple(MECHANISM_NAMES)
USER_PREFIX = "User:"
#: RFC 7628's separator of the key/value pairs of an OAUTHBEARER client response.
KV_SEP = "\x01"


#: A user's SCRAM credential for a mechanism, or None: (user name, mechanism) -> credential.
ScramLookup = Callable[[str, str], ScramCredential | None]


class SaslExchange(Protocol):
    """One connection's authentication after its handshake, one SaslAuthenticate at a time."""

    def step(self, auth_bytes: bytes) -> tuple[bytes, str | None]:
        """The server's answer to the client's bytes, and the principal once proven
        (None: the client sends another step). SASL_AUTHENTICATION_FAILED on bad bytes."""
        ...


@dataclass(frozen=True)
class SaslCredentials:
    """What the broker checks SASL bytes against (from its ``BrokerSecurity``).

    SCRAM is offered whenever ``scram`` is given (every SASL listener of a broker
    with authentication on): which users exist is the credential store's business,
    so the offer does not change as credentials come and go.
    """

    mode: AuthMode
    api_keys: ApiKeys | None
    verifier: JwtVerifier | None
    scram: ScramLookup | None = None

    def mechanisms(self) -> list[str]:
        """The mechanisms this broker offers, in Kafka's handshake answer."""
        offered = []
        if self.mode in ("api_key", "any") and self.api_keys is not None:
            offered.append(PLAIN)
        if self.mode in ("jwt", "any") and self.verifier is not None:
            offered.append(OAUTHBEARER)
        if self.scram is not None:
            offered.extend(SCRAM_MECHANISMS)
        return offered

    def start(self, mechanism: str) -> SaslExchange:
        """The exchange of a connection whose handshake chose ``mechanism``."""
        self.check_mechanism(mechanism)
        if mechanism in SCRAM_MECHANISMS:
            assert self.scram is not None
            return ScramExchange(mechanism, self.scram)
        return SingleStep(self, mechanism)

    def check_mechanism(self, mechanism: str) -> None:
        offered = self.mechanisms()
        if mechanism not in offered:
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism!r} is not enabled on this broker "
                f"(auth_mode={self.mode}); enabled: {', '.join(offered) or 'none'}"
            )

    def authenticate(self, mechanism: str, auth_bytes: bytes) -> str:
        """The principal ``auth_bytes`` prove for PLAIN or OAUTHBEARER (one step);
        SASL_AUTHENTICATION_FAILED else.

        Messages name what was wrong, never the password or token.
        """
        self.check_mechanism(mechanism)
        if mechanism in SCRAM_MECHANISMS:
            raise SaslAuthenticationFailedError(f"{mechanism} takes two steps (``start``)")
        if mechanism == PLAIN:
            assert self.api_keys is not None
            authzid, username, password = parse_plain(auth_bytes)
            return plain_principal(self.api_keys, authzid, username, password)
        assert self.verifier is not None
        return self.verifier.principal_for(parse_oauthbearer(auth_bytes))


def _text(mechanism: str, auth_bytes: bytes) -> str:
    try:
        return auth_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailedError(f"{mechanism}: the message is not UTF-8") from None


def parse_plain(auth_bytes: bytes) -> tuple[str, str, str]:
    """(authzid, username, password) of a PLAIN message."""
    parts = _text(PLAIN, auth_bytes).split("\0")
    if len(parts) != 3:
        raise SaslAuthenticationFailedError(
            "PLAIN: expected 'authzid NUL username NUL password' (RFC 4616)"
        )
    authzid, username, password = parts
    if not username or not password:
        raise SaslAuthenticationFailedError("PLAIN: the username and password must not be empty")
    return authzid, username, password


def plain_principal(api_keys: ApiKeys, authzid: str, username: str, password: str) -> str:
    """The principal of an API key given as PLAIN's password, if the username names it."""
    if authzid and authzid != username:
        raise SaslAuthenticationFailedError(
            f"PLAIN: authorization id {authzid!r} differs from username {username!r}; "
            "acting as another user is not supported"
        )
    invalid = SaslAuthenticationFailedError(
        f"PLAIN: invalid username or password for user {username!r}"
    )
    try:
        principal = api_keys.principal_for(password)
    except SaslAuthenticationFailedError:
        raise invalid from None
    if principal != (username if username.startswith(USER_PREFIX) else USER_PREFIX + username):
        raise invalid
    return principal


def parse_oauthbearer(auth_bytes: bytes) -> str:
    """The bearer token of an OAUTHBEARER client response (extensions are ignored)."""
    header, sep, rest = _text(OAUTHBEARER, auth_bytes).partition(KV_SEP)
    if not sep or not header.startswith(("n,", "y,")):
        raise SaslAuthenticationFailedError(
            "OAUTHBEARER: expected a GS2 header and 'auth=Bearer <token>' (RFC 7628)"
        )
    for pair in rest.split(KV_SEP):
        key, eq, value = pair.partition("=")
        if eq and key == "auth":
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            raise SaslAuthenticationFailedError("OAUTHBEARER: auth must be 'Bearer <token>'")
    raise SaslAuthenticationFailedError("OAUTHBEARER: the message has no auth=Bearer token")


@dataclass
class SingleStep:
    """PLAIN and OAUTHBEARER: the client's one message proves the principal."""

    credentials: SaslCredentials
    mechanism: str

    def step(self, auth_bytes: bytes) -> tuple[bytes, str | None]:
        return b"", self.credentials.authenticate(self.mechanism, auth_bytes)


def sasl_name(name: str) -> str:
    """RFC 5802's saslname decoded: ``=2C`` is a comma and ``=3D`` an equals sign."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """SCRAM's client-first -> server-first, client-final -> server-final (scramp's server).

    The username of client-first names the principal ``User:<name>``; a GS2
    authorization id is refused (scramp's rule: acting as another user is not
    supported). Every failure is Kafka's message for invalid credentials, naming
    the user and scramp's reason, never a key.
    """

    def __init__(self, mechanism: str, lookup: ScramLookup) -> None:
        self.mechanism = mechanism
        self.lookup = lookup
        self.user: str | None = None
        self.server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        self.user = sasl_name(username)
        credential = self.lookup(self.user, self.mechanism)
        if credential is None:
            return None
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _failed(self, why: str) -> SaslAuthenticationFailedError:
        who = f" for user {self.user!r}" if self.user else ""
        return SaslAuthenticationFailedError(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}{who}: {why}"
        )

    def step(self, auth_bytes: bytes) -> tuple[bytes, str | None]:
        text = _text(self.mechanism, auth_bytes)
        if self.user is None:
            return self._first(text), None
        try:
            self.server.set_client_final(text)
            final: str = self.server.get_server_final()
        except scramp.ScramException as exc:
            raise self._failed(str(exc).partition(":")[0] or "bad client-final message") from None
        return final.encode(), USER_PREFIX + self.user

    def _first(self, text: str) -> bytes:
        try:
            self.server.set_client_first(text)
            first: str = self.server.get_server_first()
        except scramp.ScramException as exc:
            raise self._failed(str(exc).partition(":")[0] or "bad client-first message") from None
        if self.user is None:
            raise self._failed("client-first names no user")
        return first.encode()
