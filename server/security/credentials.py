"""Who is calling: API keys and bearer JWTs checked into Kafka-style principals (``User:alice``).

The broker takes credentials from HTTP headers: ``X-API-Key: <key>`` or
``Authorization: Bearer <jwt>``. Failures raise SASL_AUTHENTICATION_FAILED
(HTTP 401) with a reason that never contains the credential itself.

API keys are configured in a JSON file, preferably by their SHA-256 digest so
the file holds no secret::

    {"api_keys": [{"principal": "User:alice", "sha256": "<hex digest of the key>"},
                  {"principal": "User:bob", "key": "plain-text-key"}]}

Lookups go by the digest of the presented key, so comparing keys never
leaks timing information about a stored key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jwt

from lakelog.errors import InvalidConfigError, InvalidRequestError, SaslAuthenticationFailedError
from lakelog.security.acl import ANONYMOUS, validate_principal

AuthMode = Literal["none", "api_key", "jwt", "any"]
API_KEY_HEADER = "x-api-key"
HMAC_ALGORITHMS = ["HS256", "HS384", "HS512"]
PUBLIC_KEY_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384"]


@dataclass(frozen=True, slots=True)
class Identity:
    principal: str
    method: Literal["none", "api_key", "jwt"]


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeys:
    def __init__(self, digests: Mapping[str, str]) -> None:
        self._by_digest = dict(digests)

    @classmethod
    def from_entries(cls, entries: Iterable[Mapping[str, Any]], where: str) -> ApiKeys:
        digests: dict[str, str] = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "principal" not in entry:
                raise InvalidConfigError(f"{where}: api_keys[{i}] needs a 'principal'")
            try:
                principal = validate_principal(str(entry["principal"]))
            except InvalidRequestError as exc:
                raise InvalidConfigError(f"{where}: api_keys[{i}]: {exc.message}") from None
            if "sha256" in entry:
                digest = str(entry["sha256"]).strip().lower()
                if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                    raise InvalidConfigError(f"{where}: api_keys[{i}].sha256 is not a hex digest")
            elif "key" in entry and str(entry["key"]):
                digest = key_digest(str(entry["key"]))
            else:
                raise InvalidConfigError(f"{where}: api_keys[{i}] needs 'sha256' or 'key'")
            digests[digest] = principal
        return cls(digests)

    @classmethod
    def from_file(cls, path: str) -> ApiKeys:
        try:
            body = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidConfigError(f"cannot read api_keys_file {path}: {exc}") from None
        except ValueError as exc:
            raise InvalidConfigError(f"api_keys_file {path} is not valid JSON: {exc}") from None
        if not isinstance(body, dict) or not isinstance(body.get("api_keys"), list):
            raise InvalidConfigError(f"api_keys_file {path} must hold {{'api_keys': [...]}}")
        return cls.from_entries(body["api_keys"], path)

    def principal_for(self, key: str) -> str:
        principal = self._by_digest.get(key_digest(key))
        if principal is None:
            raise SaslAuthenticationFailedError("unknown API key")
        return principal


class JwtVerifier:
    """Checks a bearer token's signature, expiry, issuer and audience; the principal is a claim."""

    def __init__(
        self,
        *,
        secret: str | None = None,
        public_key: str | None = None,
        issuer: str | None = None,
        audience: str | None = None,
        principal_claim: str = "sub",
        leeway_s: float = 0,
    ) -> None:
        if (secret is None) == (public_key is None):
            raise InvalidConfigError("JWT authentication needs jwt_secret or jwt_public_key_file")
        self._key: str = secret if secret is not None else str(public_key)
        self._algorithms = HMAC_ALGORITHMS if secret is not None else PUBLIC_KEY_ALGORITHMS
        self._issuer = issuer
        self._audience = audience
        self._claim = principal_claim
        self._leeway_s = leeway_s

    def principal_for(self, token: str) -> str:
        required = ["exp", self._claim]
        if self._issuer is not None:
            required.append("iss")
        if self._audience is not None:
            required.append("aud")
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=self._algorithms,
                issuer=self._issuer,
                audience=self._audience,
                leeway=self._leeway_s,
                options={"require": required, "verify_aud": self._audience is not None},
            )
        except jwt.PyJWTError as exc:
            raise SaslAuthenticationFailedError(
                f"bearer token rejected: {type(exc).__name__}: {exc}"
            ) from None
        subject = claims.get(self._claim)
        if not isinstance(subject, str) or not subject:
            raise SaslAuthenticationFailedError(
                f"bearer token rejected: claim {self._claim!r} must be a non-empty string"
            )
        return subject if subject.startswith("User:") else f"User:{subject}"


def authenticate(
    mode: AuthMode,
    headers: Mapping[str, str],
    api_keys: ApiKeys | None,
    verifier: JwtVerifier | None,
) -> Identity:
    """The caller's identity from request headers (lower-case names), per the broker's mode."""
    if mode == "none":
        return Identity(ANONYMOUS, "none")
    api_key = headers.get(API_KEY_HEADER)
    scheme, _, token = headers.get("authorization", "").partition(" ")
    bearer = token.strip() if scheme.lower() == "bearer" else None
    if api_key and mode in ("api_key", "any") and api_keys is not None:
        return Identity(api_keys.principal_for(api_key), "api_key")
    if bearer and mode in ("jwt", "any") and verifier is not None:
        return Identity(verifier.principal_for(bearer), "jwt")
    expected = {
        "api_key": "an X-API-Key header",
        "jwt": "an 'Authorization: Bearer <token>' header",
        "any": "an X-API-Key or 'Authorization: Bearer <token>' header",
    }[mode]
    raise SaslAuthenticationFailedError(f"authentication required: send {expected}")
