"""SASL on the Kafka listener: which mechanisms a broker offers, and who a client's bytes prove.

Pure apart from the credential checks it is given. PLAIN's password is an API
key of ``api_keys_file`` and OAUTHBEARER's token a bearer JWT, so a principal
has one identity whatever the front end (docs/kafka-protocol.md, "Authentication (SASL)").
"""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from server.security.credentials import ApiKeys, AuthMode, JwtVerifier

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"
USER_PREFIX = "User:"
#: RFC 7628's separator of the key/value pairs of an OAUTHBEARER client response.
KV_SEP = "\x01"


@dataclass(frozen=True)
class SaslCredentials:
    """What the broker checks SASL bytes against (from its ``BrokerSecurity``)."""

    mode: AuthMode
    api_keys: ApiKeys | None
    verifier: JwtVerifier | None

    def mechanisms(self) -> list[str]:
        """The mechanisms this broker offers, in Kafka's handshake answer."""
        offered = []
        if self.mode in ("api_key", "any") and self.api_keys is not None:
            offered.append(PLAIN)
        if self.mode in ("jwt", "any") and self.verifier is not None:
            offered.append(OAUTHBEARER)
        return offered

    def check_mechanism(self, mechanism: str) -> None:
        offered = self.mechanisms()
        if mechanism not in offered:
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism!r} is not enabled on this broker "
                f"(auth_mode={self.mode}); enabled: {', '.join(offered) or 'none'}"
            )

    def authenticate(self, mechanism: str, auth_bytes: bytes) -> str:
        """The principal ``auth_bytes`` prove for ``mechanism``; SASL_AUTHENTICATION_FAILED else.

        Messages name what was wrong, never the password or token.
        """
        self.check_mechanism(mechanism)
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
