"""Kafka's listeners settings (pure): parsing, what is advertised, and secured brokers."""

from __future__ import annotations

import socket

import pytest

from lakelog.errors import InvalidConfigError
from server.kafka.listeners import Listener, advertised, listeners_to_bind, parse_listeners
from server.settings import BrokerSettings


def test_listeners_parse_as_kafka_writes_them() -> None:
    assert parse_listeners("PLAINTEXT://0.0.0.0:9092, sasl_plaintext://[::1]:9093") == [
        Listener("PLAINTEXT", "0.0.0.0", 9092),
        Listener("SASL_PLAINTEXT", "::1", 9093),
    ]
    assert parse_listeners("PLAINTEXT://:9092") == [Listener("PLAINTEXT", "", 9092)]


@pytest.mark.parametrize(
    "text",
    [
        "localhost:9092",
        "PLAINTEXT://host",
        "PLAINTEXT://host:http",
        "SSL://h:1",
        "PLAINTEXT://h:70000",
        "PLAINTEXT://a:1,PLAINTEXT://b:2",
    ],
)
def test_bad_listeners_are_refused_with_the_setting_named(text: str) -> None:
    with pytest.raises(InvalidConfigError, match="kafka_listeners"):
        parse_listeners(text)
    with pytest.raises(ValueError, match="kafka_listeners"):
        BrokerSettings(kafka_listeners=text)


def test_advertised_addresses_replace_bound_ones_by_name() -> None:
    bound = [Listener("PLAINTEXT", "0.0.0.0", 9092), Listener("SASL_PLAINTEXT", "10.0.0.5", 9093)]
    assert advertised(bound, "PLAINTEXT://broker-1.example:19092") == {
        "PLAINTEXT": "broker-1.example:19092",
        "SASL_PLAINTEXT": "10.0.0.5:9093",
    }
    assert advertised(bound, None)["PLAINTEXT"] == f"{socket.getfqdn()}:9092"
    with pytest.raises(InvalidConfigError, match="not listeners"):
        advertised(bound[:1], "SASL_PLAINTEXT://x:1")


def test_default_listener_is_plaintext_9092_on_the_http_interface() -> None:
    settings = BrokerSettings(host="127.0.0.1", kafka_listeners=None)
    assert listeners_to_bind(settings) == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert listeners_to_bind(BrokerSettings(kafka_listeners="")) == []


def test_a_secured_broker_never_opens_an_unauthenticated_kafka_listener() -> None:
    settings = BrokerSettings(host="127.0.0.1", auth_mode="api_key", kafka_listeners=None)
    default = listeners_to_bind(settings)
    assert default == [Listener("SASL_PLAINTEXT", "127.0.0.1", 9092)]
    sasl = "SASL_PLAINTEXT://127.0.0.1:9093"
    assert listeners_to_bind(BrokerSettings(auth_mode="jwt", kafka_listeners=sasl)) == [
        Listener("SASL_PLAINTEXT", "127.0.0.1", 9093)
    ]
    with pytest.raises(InvalidConfigError, match="without authentication"):
        listeners_to_bind(
            BrokerSettings(auth_mode="jwt", kafka_listeners="PLAINTEXT://127.0.0.1:9092")
        )
    with pytest.raises(InvalidConfigError, match="no credentials to check"):
        listeners_to_bind(BrokerSettings(auth_mode="none", kafka_listeners=sasl))
    with pytest.raises(InvalidConfigError, match="needs ssl_certfile"):
        listeners_to_bind(BrokerSettings(auth_mode="jwt", kafka_listeners="SASL_SSL://h:9094"))
    with_tls = BrokerSettings(
        host="127.0.0.1",
        auth_mode="api_key",
        kafka_listeners=None,
        ssl_certfile="broker.crt",
        ssl_keyfile="broker.key",
    )
    assert listeners_to_bind(with_tls) == [Listener("SASL_SSL", "127.0.0.1", 9092)]


def test_kafka_port_shorthand_follows_auth_mode() -> None:
    from server.cli import with_kafka_port

    open_broker = BrokerSettings(host="127.0.0.1")
    secured = BrokerSettings(host="127.0.0.1", auth_mode="jwt", jwt_secret="s" * 32)
    assert with_kafka_port(open_broker, "9093").kafka_listeners == "PLAINTEXT://127.0.0.1:9093"
    assert with_kafka_port(secured, "9093").kafka_listeners == "SASL_PLAINTEXT://127.0.0.1:9093"
