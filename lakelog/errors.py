"""The one exception hierarchy of lakelog.

Every error a user can see carries the Kafka protocol error code and name a
Kafka client would get for the same situation, whether the request may be
retried unchanged (``retriable``, checked by the client's retry loop the way
aiokafka does), and the HTTP status the brokers answer with. Layers above the
core (server, compaction, connector) translate these, they never invent codes.
"""

from __future__ import annotations

from typing import Any, ClassVar

#: The class standing for each Kafka error code (-1, the fallback, is never looked up).
_BY_CODE: dict[int, type[LakelogError]] = {}


class LakelogError(Exception):
    """Base of all lakelog errors; ``code``/``name`` are Kafka's error code and name.

    A subclass names its code, name, ``retriable`` and HTTP status as class
    keywords. One that keeps its parent's code is a more specific case of it
    (``InternalTopicError``) and never stands for the code in ``error_for_code``.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    http_status: ClassVar[int] = 500

    def __init_subclass__(
        cls,
        code: int | None = None,
        name: str | None = None,
        retriable: bool | None = None,
        http_status: int | None = None,
    ) -> None:
        super().__init_subclass__()
        given = {"code": code, "name": name, "retriable": retriable, "http_status": http_status}
        for attribute, value in given.items():
            if value is not None:
                setattr(cls, attribute, value)
        if code is not None:
            _BY_CODE.setdefault(code, cls)

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The error as the brokers put it in a response body."""
        body: dict[str, Any] = {
            "error_code": self.code,
            "error": self.name,
            "message": self.message,
            "retriable": self.retriable,
        }
        if self.details:
            body["details"] = self.details
        return body

    def __str__(self) -> str:
        return f"[{self.name}] {self.message}"


class UnknownServerError(LakelogError):
    """An unexpected failure; the message says what failed."""


# ``name`` is Kafka's error name here (ImportError's module ``name`` is not used).
class MissingDependencyError(UnknownServerError, ImportError):  # type: ignore[misc]
    """A part of lakelog was imported or run without the packages it needs (the message
    names the pip extra); also an ``ImportError``, for code probing optional parts."""

    def __str__(self) -> str:
        return self.message


class OffsetOutOfRangeError(LakelogError, code=1, name="OFFSET_OUT_OF_RANGE", http_status=416): ...


class CorruptRecordError(LakelogError, code=2, name="CORRUPT_MESSAGE", http_status=500):
    """A stored segment cannot be read back (truncated, not Parquet, wrong schema)."""


class OffsetMetadataTooLargeError(
    LakelogError, code=12, name="OFFSET_METADATA_TOO_LARGE", http_status=400
):
    """A committed offset's metadata is longer than Kafka's offset.metadata.max.bytes."""


class UnknownTopicOrPartitionError(
    LakelogError, code=3, name="UNKNOWN_TOPIC_OR_PARTITION", http_status=404
): ...


class UnknownTopicIdError(
    LakelogError, code=100, name="UNKNOWN_TOPIC_ID", retriable=True, http_status=404
):
    """A request names a topic by an id no topic has (deleted, or created again since):
    retriable, as Kafka's clients refresh their metadata and retry."""


class RequestTimedOutError(
    LakelogError, code=7, name="REQUEST_TIMED_OUT", retriable=True, http_status=504
): ...


class MessageTooLargeError(LakelogError, code=10, name="MESSAGE_TOO_LARGE", http_status=413): ...


class InvalidTopicError(LakelogError, code=17, name="INVALID_TOPIC_EXCEPTION", http_status=400): ...


class InternalTopicError(InvalidTopicError):
    """A client append to an internal topic, which only lakelog itself writes.

    Kafka's INVALID_TOPIC_EXCEPTION, but reported per record by the REST Proxy front
    ends, where a bad topic *name* refuses the whole request.
    """


class RecordListTooLargeError(
    LakelogError, code=18, name="RECORD_LIST_TOO_LARGE", http_status=413
): ...


class InvalidRequiredAcksError(
    LakelogError, code=21, name="INVALID_REQUIRED_ACKS", http_status=400
): ...


class InvalidTimestampError(LakelogError, code=32, name="INVALID_TIMESTAMP", http_status=400): ...


class TopicAlreadyExistsError(
    LakelogError, code=36, name="TOPIC_ALREADY_EXISTS", http_status=409
): ...


class InvalidPartitionsError(LakelogError, code=37, name="INVALID_PARTITIONS", http_status=400): ...


class InvalidReplicationFactorError(
    LakelogError, code=38, name="INVALID_REPLICATION_FACTOR", http_status=400
): ...


class InvalidConfigError(LakelogError, code=40, name="INVALID_CONFIG", http_status=400): ...


class InvalidRequestError(LakelogError, code=42, name="INVALID_REQUEST", http_status=400): ...


class SchemaMismatchError(InvalidRequestError, http_status=422):
    """Well-formed JSON or a parameter that does not match the route's schema.

    INVALID_REQUEST, but HTTP 422, so a client tells "not JSON" (400) from "not this route's".
    """


class UnsupportedContentTypeError(InvalidRequestError, http_status=415):
    """A body in a content type the route does not read (INVALID_REQUEST, but HTTP 415)."""


class KafkaStorageError(
    LakelogError, code=56, name="KAFKA_STORAGE_ERROR", retriable=True, http_status=503
):
    """The storage root could not be read or written; usually transient."""


class AmbiguousCommitError(KafkaStorageError):
    """A commit's outcome is unknown (its write failed and the log could not be read back);
    its files must be kept, since a landed commit may reference them."""


class CommitLeaderUnreachableError(
    LakelogError, code=6, name="NOT_LEADER_OR_FOLLOWER", retriable=True, http_status=503
):
    """The topic's commit leader did not take a handoff: safe to commit elsewhere."""


class FencedLeaderEpochError(
    LakelogError, code=74, name="FENCED_LEADER_EPOCH", retriable=True, http_status=409
):
    """The client named a leader epoch older than the partition's: its metadata is stale."""


class UnknownLeaderEpochError(
    LakelogError, code=75, name="UNKNOWN_LEADER_EPOCH", retriable=True, http_status=409
):
    """The client named a leader epoch newer than the partition's (Kafka: this broker lags)."""


class ElectionNotNeededError(
    LakelogError, code=84, name="ELECTION_NOT_NEEDED", retriable=True, http_status=409
):
    """A leader election on a partition that already has the leader it would elect."""


class InvalidReplicaAssignmentError(
    LakelogError, code=39, name="INVALID_REPLICA_ASSIGNMENT", http_status=400
): ...


class NoReassignmentInProgressError(
    LakelogError, code=85, name="NO_REASSIGNMENT_IN_PROGRESS", http_status=409
): ...


class UnsupportedVersionError(LakelogError, code=35, name="UNSUPPORTED_VERSION", http_status=400):
    """A version this side does not implement: of a Delta table's protocol, or of a Kafka API."""


class OutOfOrderSequenceError(
    LakelogError, code=45, name="OUT_OF_ORDER_SEQUENCE_NUMBER", http_status=409
):
    """An idempotent producer skipped sequence numbers (a request in between was lost)."""


class DuplicateSequenceError(
    LakelogError, code=46, name="DUPLICATE_SEQUENCE_NUMBER", http_status=409
):
    """A retried request was already written, but its original offsets can no longer be found."""


class InvalidRecordError(LakelogError, code=87, name="INVALID_RECORD", http_status=400): ...


class SchemaValidationError(InvalidRecordError):
    """Records of a topic that validates schemas on produce are not framed with a schema
    registered under their subject, or do not decode with it.

    ``details["record_errors"]`` lists refused records (``batch_index``,
    ``message``; the first hundred), which Kafka's Produce answers as its
    record-level errors; ``refused`` holds every one, as (index, reason).
    """

    refused: list[tuple[int, str]]

    def __init__(
        self, message: str, refused: list[tuple[int, str]] | None = None, **details: Any
    ) -> None:
        super().__init__(message, **details)
        self.refused = refused or []


class ThrottlingQuotaExceededError(
    LakelogError, code=89, name="THROTTLING_QUOTA_EXCEEDED", retriable=True, http_status=429
): ...


class ConcurrentCommitError(
    LakelogError, code=51, name="CONCURRENT_TRANSACTIONS", retriable=True, http_status=503
):
    """Another writer kept winning the Delta version; surfaced once the retry budget is spent."""


# --- consumer groups -------------------------------------------------------


class CoordinatorNotAvailableError(
    LakelogError, code=15, name="COORDINATOR_NOT_AVAILABLE", retriable=True, http_status=503
):
    """No live broker can act as the group's coordinator right now."""


class NotCoordinatorError(
    LakelogError, code=16, name="NOT_COORDINATOR", retriable=True, http_status=421
):
    """This broker is not the group's coordinator; ``details`` name the one that is."""


class CoordinatorLoadInProgressError(
    LakelogError, code=14, name="COORDINATOR_LOAD_IN_PROGRESS", retriable=True, http_status=503
): ...


class IllegalGenerationError(LakelogError, code=22, name="ILLEGAL_GENERATION", http_status=409): ...


class InconsistentGroupProtocolError(
    LakelogError, code=23, name="INCONSISTENT_GROUP_PROTOCOL", http_status=409
): ...


class InvalidGroupIdError(LakelogError, code=24, name="INVALID_GROUP_ID", http_status=400): ...


class UnknownMemberIdError(LakelogError, code=25, name="UNKNOWN_MEMBER_ID", http_status=409): ...


class InvalidSessionTimeoutError(
    LakelogError, code=26, name="INVALID_SESSION_TIMEOUT", http_status=400
): ...


class RebalanceInProgressError(
    LakelogError, code=27, name="REBALANCE_IN_PROGRESS", http_status=409
): ...


class InvalidCommitOffsetSizeError(
    LakelogError, code=28, name="INVALID_COMMIT_OFFSET_SIZE", http_status=400
): ...


class NonEmptyGroupError(LakelogError, code=68, name="NON_EMPTY_GROUP", http_status=409):
    """Refused because the group still has active members (delete, reset offsets)."""


class GroupIdNotFoundError(LakelogError, code=69, name="GROUP_ID_NOT_FOUND", http_status=404): ...


class GroupSubscribedToTopicError(
    LakelogError, code=86, name="GROUP_SUBSCRIBED_TO_TOPIC", http_status=409
):
    """Offsets of a topic the group's active members subscribe to cannot be deleted."""


class MemberIdRequiredError(LakelogError, code=79, name="MEMBER_ID_REQUIRED", http_status=409):
    """First join of a member: retry the join with the member id in ``details``."""


class FencedInstanceIdError(LakelogError, code=82, name="FENCED_INSTANCE_ID", http_status=409): ...


class GroupMaxSizeReachedError(
    LakelogError, code=81, name="GROUP_MAX_SIZE_REACHED", http_status=409
): ...


# --- security ----------------------------------------------------------------


class TopicAuthorizationFailedError(
    LakelogError, code=29, name="TOPIC_AUTHORIZATION_FAILED", http_status=403
): ...


class GroupAuthorizationFailedError(
    LakelogError, code=30, name="GROUP_AUTHORIZATION_FAILED", http_status=403
): ...


class ClusterAuthorizationFailedError(
    LakelogError, code=31, name="CLUSTER_AUTHORIZATION_FAILED", http_status=403
): ...


class SaslAuthenticationFailedError(
    LakelogError, code=58, name="SASL_AUTHENTICATION_FAILED", http_status=401
):
    """No credentials, or credentials that do not check out (HTTP 401)."""


class UnsupportedSaslMechanismError(
    LakelogError, code=33, name="UNSUPPORTED_SASL_MECHANISM", http_status=401
):
    """A Kafka client asked for a SASL mechanism the broker's ``auth_mode`` does not enable."""


class IllegalSaslStateError(LakelogError, code=34, name="ILLEGAL_SASL_STATE", http_status=400):
    """A SASL request out of order: authenticate before handshake, or a second handshake."""


class SecurityDisabledError(LakelogError, code=54, name="SECURITY_DISABLED", http_status=400): ...


class ResourceNotFoundError(LakelogError, code=91, name="RESOURCE_NOT_FOUND", http_status=404):
    """A named security resource does not exist (a SCRAM credential to describe or delete)."""


class DuplicateResourceError(LakelogError, code=92, name="DUPLICATE_RESOURCE", http_status=400):
    """One request names the same resource twice (a user in AlterUserScramCredentials)."""


class UnacceptableCredentialError(
    LakelogError, code=93, name="UNACCEPTABLE_CREDENTIAL", http_status=400
):
    """A SCRAM credential Kafka's rules refuse: no user name, iterations out of bounds."""


class PolicyViolationError(LakelogError, code=44, name="POLICY_VIOLATION", http_status=400): ...


class DeltaTableRuleError(PolicyViolationError):
    """A commit a rule of the topic's Delta table forbids (``delta.appendOnly``, a CHECK
    constraint or column invariant lakelog cannot evaluate, a ``delta.*`` property lakelog
    would change); set on the table outside lakelog, so the message names it and how to
    lift it. Nothing is committed (``lakelog.delta.writer_rules``)."""


def error_for_code(code: int) -> type[LakelogError]:
    """The exception class for a Kafka error code (``UnknownServerError`` if unknown)."""
    return _BY_CODE.get(code, UnknownServerError)


class SchemaRegistryError(LakelogError, http_status=500):
    """An answer of the Schema Registry API.

    ``registry_code`` is the ``error_code`` Confluent's Schema Registry puts in its
    JSON body for the same situation; clients (and Confluent's serializers) branch on
    it, so each subclass names Confluent's code and HTTP status, never a new one.
    """

    registry_code: ClassVar[int] = 50001


class SubjectNotFoundError(SchemaRegistryError, http_status=404):
    registry_code = 40401


class VersionNotFoundError(SchemaRegistryError, http_status=404):
    registry_code = 40402


class SchemaNotFoundError(SchemaRegistryError, http_status=404):
    registry_code = 40403


class SubjectSoftDeletedError(SchemaRegistryError, http_status=404):
    registry_code = 40404


class SubjectNotSoftDeletedError(SchemaRegistryError, http_status=404):
    registry_code = 40405


class VersionSoftDeletedError(SchemaRegistryError, http_status=404):
    registry_code = 40406


class VersionNotSoftDeletedError(SchemaRegistryError, http_status=404):
    registry_code = 40407


class SubjectCompatibilityNotConfiguredError(SchemaRegistryError, http_status=404):
    registry_code = 40408


class SubjectModeNotConfiguredError(SchemaRegistryError, http_status=404):
    registry_code = 40409


class IncompatibleSchemaError(SchemaRegistryError, http_status=409):
    registry_code = 409


class InvalidSchemaError(SchemaRegistryError, http_status=422):
    registry_code = 42201


class InvalidSchemaVersionError(SchemaRegistryError, http_status=422):
    registry_code = 42202


class InvalidCompatibilityLevelError(SchemaRegistryError, http_status=422):
    registry_code = 42203


class InvalidModeError(SchemaRegistryError, http_status=422):
    registry_code = 42204


class OperationNotPermittedError(SchemaRegistryError, http_status=422):
    registry_code = 42205


class ReferenceExistsError(SchemaRegistryError, http_status=422):
    registry_code = 42206


class SubjectAuthorizationFailedError(SchemaRegistryError, http_status=403):
    """An ACL denial on a subject (Confluent's Schema Registry authorizer answers 40301)."""

    registry_code = 40301
