"""SCRAM credentials (RFC 5802/7677, Kafka's KIP-554): derivation, alteration rules, storage.

A credential is what a broker needs to check a SCRAM exchange and no more:
salt, iterations, StoredKey and ServerKey per user and mechanism. Clients
send the salted password (AlterUserScramCredentials); the broker keeps only
the two keys derived from it, so neither the password nor the salted password
is ever stored. Credentials live in the storage root, ``_meta/scram``, as a
versioned document like the ACLs, so every broker authenticates the same users.

The derivation and ``alter`` are pure; ``ScramStore`` is the I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.errors import (
    CorruptRecordError,
    DuplicateResourceError,
    LakelogError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from lakelog.security.store import VersionedDocument
from lakelog.storage import Storage

SCRAM_DIR = "_meta/scram"

#: Kafka's ScramMechanism types -> (mechanism name, hash).
MECHANISMS: dict[int, tuple[str, str]] = {
    1: ("SCRAM-SHA-256", "sha256"),
    2: ("SCRAM-SHA-512", "sha512"),
}
MECHANISM_NAMES = {name: code for code, (name, _) in MECHANISMS.items()}
#: Kafka's bounds on a credential's PBKDF2 iterations (minIterations, MAX_ITERATIONS).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    user: str
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def __repr__(self) -> str:
        return f"ScramCredential({self.user!r}, {self.mechanism}, keys hidden)"

    def to_json(self) -> dict[str, Any]:
        def text(b: bytes) -> str:
            return base64.b64encode(b).decode()

        return {
            "user": self.user,
            "mechanism": self.mechanism,
            "iterations": self.iterations,
            "salt": text(self.salt),
            "stored_key": text(self.stored_key),
            "server_key": text(self.server_key),
        }

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> ScramCredential:
        try:
            return cls(
                user=str(item["user"]),
                mechanism=str(item["mechanism"]),
                iterations=int(item["iterations"]),
                salt=base64.b64decode(item["salt"], validate=True),
                stored_key=base64.b64decode(item["stored_key"], validate=True),
                server_key=base64.b64decode(item["server_key"], validate=True),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptRecordError(f"{SCRAM_DIR}: a credential is malformed: {exc!r}") from None


Key = tuple[str, str]
Credentials = dict[Key, ScramCredential]


def mechanism_name(code: int) -> str:
    """The name of Kafka's mechanism type; UNSUPPORTED_SASL_MECHANISM for another."""
    if code not in MECHANISMS:
        raise UnsupportedSaslMechanismError(f"Unknown SCRAM mechanism (type {code})")
    return MECHANISMS[code][0]


def derive(
    user: str, mechanism: str, iterations: int, salt: bytes, salted_password: bytes
) -> ScramCredential:
    """RFC 5802's StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
    ServerKey = HMAC(SaltedPassword, "Server Key"): what the broker checks proofs with."""
    digest = MECHANISMS[MECHANISM_NAMES[mechanism]][1]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    return ScramCredential(
        user=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.digest(salted_password, b"Server Key", digest),
    )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (PBKDF2-HMAC), as a Kafka admin client computes it."""
    digest = MECHANISMS[MECHANISM_NAMES[mechanism]][1]
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion({self.user!r}, {self.mechanism}, {self.iterations}, secrets hidden)"


def _check_user_and_mechanism(user: str, mechanism: int) -> str:
    if not user:
        raise UnacceptableCredentialError("Username must not be empty")
    return mechanism_name(mechanism)


def alter(
    current: Mapping[Key, ScramCredential],
    deletions: Iterable[Deletion],
    upsertions: Iterable[Upsertion],
) -> tuple[Credentials, dict[str, LakelogError | None]]:
    """Kafka's ``ScramControlManager.alterCredentials``: the credentials after, and each
    named user's outcome (None: done).

    A user named twice in one request is DUPLICATE_RESOURCE and nothing of it
    changes; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; an empty name or
    iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL; deleting a credential
    that does not exist RESOURCE_NOT_FOUND. The other users' changes apply.
    """
    after: Credentials = dict(current)
    errors: dict[str, LakelogError] = {}
    chosen: dict[str, Deletion | Upsertion] = {}
    order: list[str] = []
    items: list[Deletion | Upsertion] = [*deletions, *upsertions]

    def duplicate(user: str) -> None:
        chosen.pop(user, None)
        errors[user] = DuplicateResourceError(
            "A user credential cannot be altered twice in the same request"
        )

    for item in items:
        user = item.user
        if user not in order:
            order.append(user)
        if user in errors:
            continue
        if user in chosen:
            duplicate(user)
            continue
        try:
            name = _check_user_and_mechanism(user, item.mechanism)
            if isinstance(item, Deletion):
                if (user, name) not in current:
                    raise ResourceNotFoundError(
                        "Attempt to delete a user credential that does not exist"
                    )
            elif item.iterations < MIN_ITERATIONS:
                raise UnacceptableCredentialError("Too few iterations")
            elif item.iterations > MAX_ITERATIONS:
                raise UnacceptableCredentialError("Too many iterations")
        except LakelogError as exc:
            errors[user] = exc
            continue
        chosen[user] = item
    for user, item in chosen.items():
        name = mechanism_name(item.mechanism)
        if isinstance(item, Deletion):
            del after[(user, name)]
        else:
            after[(user, name)] = derive(
                user, name, item.iterations, item.salt, item.salted_password
            )
    return after, {user: errors.get(user) for user in order}


def encode(credentials: Mapping[Key, ScramCredential]) -> list[dict[str, Any]]:
    return [credentials[key].to_json() for key in sorted(credentials)]


def decode(body: Mapping[str, Any] | None) -> Credentials:
    items = (body or {}).get("credentials", [])
    found = (ScramCredential.from_json(item) for item in items)
    return {(c.user, c.mechanism): c for c in found}


class ScramStore:
    """The credentials document of the storage root (put-if-absent versions, see ``store``)."""

    def __init__(self, storage: Storage) -> None:
        self.document = VersionedDocument(storage, SCRAM_DIR)

    def load(self, newer_than: int = 0) -> tuple[int, Credentials] | None:
        snapshot = self.document.latest(newer_than)
        return None if snapshot.body is None else (snapshot.version, decode(snapshot.body))

    def alter(
        self, deletions: list[Deletion], upsertions: list[Upsertion]
    ) -> dict[str, LakelogError | None]:
        """Apply one AlterUserScramCredentials request; each user's outcome.

        A request every user of which is refused writes nothing.
        """
        _, results = alter(decode(self.document.latest().body), deletions, upsertions)
        if all(error is not None for error in results.values()):
            return results
        outcome: dict[str, LakelogError | None] = {}

        def change(body: dict[str, Any] | None) -> dict[str, Any]:
            after, results = alter(decode(body), deletions, upsertions)
            outcome.clear()
            outcome.update(results)
            return {"credentials": encode(after)}

        self.document.update(change)
        return outcome
