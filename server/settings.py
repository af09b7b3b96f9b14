"""Broker settings: typed, validated once, from flags > environment > config file > defaults.

Environment variables use the prefix ``LAKELOG_`` (``LAKELOG_ROOT``,
``LAKELOG_PORT``, ``LAKELOG_LINGER_MS``...). A config file may be Kafka-style
``.properties`` (``linger.ms=5``) or JSON; dotted names map to the fields.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from lakelog.errors import InvalidConfigError
from lakelog.settings_files import load_layered
from server.kafka.listeners import WILDCARD_HOSTS, parse_listeners


class BrokerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LAKELOG_", extra="forbid", frozen=True)

    root: str = Field(
        "./data/lakelog",
        description="Storage root URL (path, file://, s3://). `lakelog broker start` needs it "
        "set (--root, config file or LAKELOG_ROOT); the default serves settings built in code.",
    )
    host: str = Field("127.0.0.1", description="Interface to listen on.")
    port: int = Field(8082, ge=0, le=65535, description="HTTP port (8082, as the REST Proxy).")
    broker_id: str = Field(
        "",
        description="Identity in the broker registry, and Kafka's node.id (a number is used "
        "as is, a name is hashed). Unset: derived from the machine's host name, the root and "
        "the HTTP address, so a broker keeps its id across restarts of one configuration.",
    )
    advertised_url: str | None = Field(
        None, description="URL other clients should use to reach this broker."
    )
    cluster_id: str = Field("lakelog", description="Cluster id reported by the REST Proxy APIs.")
    kafka_listeners: str | None = Field(
        None,
        description="Kafka protocol listeners in Kafka's `listeners` form "
        "(`PLAINTEXT://host:port`, comma-separated; an empty host listens on every "
        "interface; SASL_PLAINTEXT and SASL_SSL authenticate clients, one of them is "
        "required when auth_mode is not none; SASL_SSL uses ssl_certfile). Unset: "
        "`PLAINTEXT://<host>:9092`, or when auth_mode is not none `SASL_SSL://<host>:9092` "
        "(with ssl_certfile) or `SASL_PLAINTEXT://<host>:9092`; empty: no Kafka listener.",
    )
    kafka_advertised_listeners: str | None = Field(
        None,
        description="Kafka's `advertised.listeners`: the addresses Kafka clients are told, "
        "by listener name (for a broker behind NAT or in a container). Unset: the listeners.",
    )
    kafka_max_request_bytes: int = Field(
        100 << 20,
        ge=1024,
        description="Largest Kafka request frame accepted (Kafka's socket.request.max.bytes); "
        "a larger size prefix closes the connection.",
    )
    linger_ms: int = Field(5, ge=0, le=60_000, description="How long a batch waits for company.")
    batch_bytes: int = Field(
        1 << 20, ge=1, description="A topic's batch is committed once this many bytes wait."
    )
    max_in_flight_commits: int = Field(
        2,
        ge=1,
        le=8,
        description="Group commits of one topic in flight at once: while one commits, the "
        "next writes its segments (1 = one at a time).",
    )
    commit_handoff: bool = Field(
        True,
        description="Hand a topic's group commits to its commit leader (one live broker per "
        "topic) instead of racing other brokers for Delta versions.",
    )
    partition_buffer_bytes: int = Field(
        32 << 20, ge=1, description="Most bytes waiting for one partition before throttling."
    )
    buffer_memory: int = Field(
        128 << 20, ge=1, description="Most bytes waiting in the whole broker before throttling."
    )
    max_block_ms: int = Field(
        5_000, ge=0, description="How long a produce waits for buffer space before failing."
    )
    max_request_bytes: int = Field(
        32 << 20, ge=1, description="Largest produce body accepted (413 above it)."
    )
    fetch_max_wait_ms: int = Field(
        30_000, ge=0, description="Upper bound for a fetch's long-poll max_wait_ms."
    )
    fetch_cache_bytes: int = Field(
        64 << 20, ge=0, description="Memory for recent batches served to caught-up consumers."
    )
    refresh_interval_ms: int = Field(
        100, ge=1, description="How often a long poll looks for other brokers' commits."
    )
    heartbeat_interval_ms: int = Field(
        2_000, ge=50, description="How often the broker refreshes its registry entry."
    )
    broker_session_timeout_ms: int = Field(
        10_000, ge=100, description="A broker unseen for this long is considered dead."
    )
    checkpoint_interval: int = Field(
        100, ge=0, description="Delta checkpoint every N commits (0: never)."
    )
    checkpoint_process: bool = Field(
        True,
        description="Write Delta checkpoints in a helper process, off the broker's GIL "
        "(false: on a thread of the broker; a memory:// root always uses a thread).",
    )
    log_level: str = Field("info", description="uvicorn/lakelog log level.")
    # -- consumer groups (docs/consumer-groups.md; Kafka's names and defaults) --
    group_min_session_timeout_ms: int = Field(
        6_000, ge=1, description="Kafka's group.min.session.timeout.ms."
    )
    group_max_session_timeout_ms: int = Field(
        1_800_000, ge=1, description="Kafka's group.max.session.timeout.ms."
    )
    group_initial_rebalance_delay_ms: int = Field(
        3_000, ge=0, description="Kafka's group.initial.rebalance.delay.ms (first join waits)."
    )
    group_max_size: int | None = Field(None, ge=1, description="Kafka's group.max.size.")
    auto_create_topics_enable: bool = Field(
        True,
        description="Kafka's auto.create.topics.enable: a Kafka Metadata request that names a "
        "missing topic (with allow_auto_topic_creation) creates it, given CREATE on the topic "
        "or the cluster. The HTTP API never creates topics implicitly.",
    )
    num_partitions: int = Field(
        1,
        ge=1,
        le=10_000,
        description="Kafka's num.partitions: partitions of a topic created "
        "automatically, or by CreateTopics with num_partitions -1.",
    )
    offsets_topic_num_partitions: int = Field(
        50, ge=1, le=10_000, description="Kafka's offsets.topic.num.partitions (at creation)."
    )
    offsets_commit_linger_ms: int = Field(
        5, ge=0, le=60_000, description="How long offset commits wait to share a Delta commit."
    )
    group_tick_ms: int = Field(
        100, ge=10, description="How often session timeouts and due rebalances are checked."
    )
    # -- security (docs/security.md) --
    auth_mode: Literal["none", "api_key", "jwt", "any"] = Field(
        "none", description="Authentication: none (ACLs off), api_key, jwt, or any of both."
    )
    api_keys_file: str | None = Field(None, description="JSON file of API keys (sha256).")
    jwt_secret: SecretStr | None = Field(None, description="HS256/384/512 key for bearer JWTs.")
    jwt_public_key_file: str | None = Field(None, description="PEM key for RS/PS/ES JWTs.")
    jwt_issuer: str | None = Field(None, description="Required `iss` of bearer JWTs.")
    jwt_audience: str | None = Field(None, description="Required `aud` of bearer JWTs.")
    jwt_principal_claim: str = Field("sub", description="Claim naming the principal's user.")
    super_users: str = Field("", description="Kafka's super.users: User:a;User:b.")
    allow_everyone_if_no_acl_found: bool = Field(
        False, description="Allow requests on resources that have no ACL at all."
    )
    acl_refresh_ms: int = Field(1_000, ge=10, description="How often ACLs/quotas are re-read.")
    metrics_require_auth: bool = Field(
        False, description="/metrics needs authentication and CLUSTER DESCRIBE."
    )
    ssl_certfile: str | None = Field(None, description="PEM certificate: serve HTTPS.")
    ssl_keyfile: str | None = Field(None, description="PEM private key of ssl_certfile.")
    ssl_ca_certs: str | None = Field(None, description="CA bundle: require client certificates.")
    peer_ssl_cafile: str | None = Field(
        None,
        description="CA bundle to verify other brokers' certificates (also trusted: "
        "ssl_ca_certs, this broker's own certificate, the system CAs).",
    )
    peer_authorization: SecretStr | None = Field(
        None,
        description="Authorization header this broker sends with its commit handoffs "
        "(a principal with CLUSTER_ACTION on the cluster); needed when auth_mode is not none.",
    )
    quota_producer_byte_rate: float | None = Field(
        None, gt=0, description="Default produce bytes/s per user (unlimited if unset)."
    )
    quota_consumer_byte_rate: float | None = Field(
        None, gt=0, description="Default fetch bytes/s per user (unlimited if unset)."
    )
    quota_request_rate: float | None = Field(
        None, gt=0, description="Default requests/s per user (unlimited if unset)."
    )
    quota_window_num: int = Field(11, ge=2, description="Kafka's quota.window.num.")
    quota_window_size_ms: int = Field(1_000, ge=1, description="One quota sample's length.")
    schema_registry_max_schema_bytes: int = Field(
        1 << 20,
        ge=1024,
        description="Largest schema text the Schema Registry accepts, in bytes of UTF-8.",
    )

    @field_validator("kafka_listeners", "kafka_advertised_listeners")
    @classmethod
    def _kafka_listeners_parse(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value:
            try:
                parse_listeners(value, info.field_name or "kafka_listeners")
            except InvalidConfigError as exc:
                raise ValueError(exc.message) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _stable_broker_id(cls, data: Any) -> Any:
        """Kafka's node.id is fixed by configuration; a broker with none set keeps one id
        across restarts by deriving it from what identifies it: the machine, the storage root
        and the address it serves (two brokers of one machine and root differ by port)."""
        if isinstance(data, dict) and not data.get("broker_id"):
            data = {**data, "broker_id": derived_broker_id(data)}
        return data

    @field_validator("root")
    @classmethod
    def _root_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("root must name a storage root")
        return value

    @property
    def url(self) -> str:
        """What other brokers and clients are told to use to reach this one.

        A wildcard bind address (0.0.0.0, ::) is not reachable from elsewhere,
        so the machine's host name is advertised instead, as Kafka does when
        ``advertised.listeners`` is unset.
        """
        if self.advertised_url:
            return self.advertised_url
        scheme = "https" if self.ssl_certfile else "http"
        host = socket.getfqdn() if self.host in WILDCARD_HOSTS else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.port}"


def derived_broker_id(values: dict[str, Any]) -> str:
    """The default broker id of the raw settings ``values``: the same for the same machine,
    root, HTTP address and advertised URL."""
    fields = BrokerSettings.model_fields
    identity = "|".join(
        [socket.gethostname()]
        + [str(values.get(name, fields[name].default)) for name in ("root", "host", "port")]
        + [str(values.get("advertised_url") or "")]
    )
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class SettingValue:
    """One broker setting as the admin APIs show it (all read-only: fixed at start)."""

    name: str
    value: Any
    #: Not set by flag, environment or file: the built-in default.
    default: bool
    #: A secret: its value is never shown.
    sensitive: bool
    description: str | None


def setting_values(settings: BrokerSettings) -> list[SettingValue]:
    """Every setting of a broker, in declaration order, for REST Proxy v3 and DescribeConfigs."""
    return [
        SettingValue(
            name,
            getattr(settings, name),
            name not in settings.model_fields_set,
            isinstance(getattr(settings, name), SecretStr),
            field.description,
        )
        for name, field in type(settings).model_fields.items()
    ]


def load_settings(config_file: str | None = None, **overrides: Any) -> BrokerSettings:
    """Defaults < config file < environment < explicit overrides (CLI flags)."""
    return load_layered(BrokerSettings, config_file, overrides, "broker")
