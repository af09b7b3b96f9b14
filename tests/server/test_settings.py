"""Broker settings: defaults < config file < LAKELOG_* environment < explicit overrides."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from lakelog.errors import InvalidConfigError
from lakelog.settings_files import read_config_file
from server.settings import BrokerSettings, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LAKELOG_* variable of the machine running the tests leaks into them."""
    for name in list(os.environ):
        if name.upper().startswith("LAKELOG_"):
            monkeypatch.delenv(name)


def properties(tmp_path: Path, text: str, name: str = "broker.properties") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.root == "./data/lakelog"
    assert (settings.host, settings.port) == ("127.0.0.1", 8082)
    assert settings.linger_ms == 5
    assert settings.url == "http://127.0.0.1:8082"
    assert len(settings.broker_id) == 12
    # Derived from what identifies the broker: stable for one configuration, not another.
    assert load_settings().broker_id == settings.broker_id
    assert load_settings(port=8083).broker_id != settings.broker_id
    assert load_settings(root="/elsewhere").broker_id != settings.broker_id
    assert load_settings(broker_id="7").broker_id == "7"


def test_properties_file_overrides_defaults(tmp_path: Path) -> None:
    config = properties(
        tmp_path,
        "# a Kafka-style file\n"
        "! also a comment\n"
        "\n"
        "linger.ms = 7\n"
        "batch-bytes=2048\n"
        "advertised.url=http://lb.example:9000\n"
        "root=s3://bucket/prefix\n"
        "fetch.max.wait.ms=500\n"
        "cluster.id=a=b\n",
    )
    settings = load_settings(config)
    assert settings.linger_ms == 7
    assert settings.batch_bytes == 2048
    assert settings.fetch_max_wait_ms == 500
    assert settings.root == "s3://bucket/prefix"
    assert settings.cluster_id == "a=b"  # only the first '=' separates name and value
    assert settings.url == "http://lb.example:9000"
    assert settings.port == 8082  # untouched fields keep their defaults


def test_json_file_overrides_defaults(tmp_path: Path) -> None:
    config = tmp_path / "broker.json"
    config.write_text(json.dumps({"linger.ms": 9, "max-request-bytes": 1000, "port": 9092}))
    settings = load_settings(str(config))
    assert (settings.linger_ms, settings.max_request_bytes, settings.port) == (9, 1000, 9092)


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = properties(tmp_path, "linger.ms=7\nport=9000\n")
    monkeypatch.setenv("LAKELOG_LINGER_MS", "11")
    settings = load_settings(config)
    assert settings.linger_ms == 11  # environment beats the file
    assert settings.port == 9000  # the file still beats the default


def test_lower_case_environment_also_overrides_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = properties(tmp_path, "linger.ms=7\n")
    monkeypatch.setenv("lakelog_linger_ms", "13")
    assert load_settings(config).linger_ms == 13


def test_overrides_beat_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = properties(tmp_path, "linger.ms=7\nport=9000\nroot=/from/file\n")
    monkeypatch.setenv("LAKELOG_LINGER_MS", "11")
    monkeypatch.setenv("LAKELOG_ROOT", "/from/env")
    settings = load_settings(config, linger_ms=3, port=None, root="/from/flag")
    assert settings.linger_ms == 3
    assert settings.root == "/from/flag"
    assert settings.port == 9000  # None means "flag not given", so the file's value stands


def test_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKELOG_BROKER_ID", "b-1")
    monkeypatch.setenv("LAKELOG_FETCH_CACHE_BYTES", "0")
    settings = load_settings()
    assert settings.broker_id == "b-1"
    assert settings.fetch_cache_bytes == 0


@pytest.mark.parametrize(
    ("env", "file_text", "overrides", "words"),
    [
        ({"LAKELOG_PORT": "eighty"}, "", {}, ["port"]),
        ({"LAKELOG_LINGER_MS": "-1"}, "", {}, ["linger_ms"]),
        ({}, "port=70000\n", {}, ["port"]),
        ({}, "linger.ms=soon\n", {}, ["linger_ms"]),
        ({}, "no.such.setting=1\n", {}, ["no_such_setting"]),
        ({}, "", {"batch_bytes": 0}, ["batch_bytes"]),
        ({}, "", {"root": "   "}, ["root"]),
        ({}, "", {"heartbeat_interval_ms": 1}, ["heartbeat_interval_ms"]),
    ],
)
def test_invalid_values_are_invalid_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    file_text: str,
    overrides: dict[str, object],
    words: list[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = properties(tmp_path, file_text) if file_text else None
    with pytest.raises(InvalidConfigError) as raised:
        load_settings(config, **overrides)
    assert raised.value.code == 40 and raised.value.http_status == 400
    for word in words:  # the setting is named as in a config file: linger.ms
        assert word.replace("_", ".") in raised.value.message


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("broker.properties", "linger.ms 7\n", [":1:", "name=value"]),
        ("broker.properties", "# ok\nport=1\njust words\n", [":3:"]),
        ("broker.json", "{not json", ["not valid JSON"]),
        ("broker.json", "[1, 2]", ["JSON object"]),
    ],
)
def test_unreadable_files_are_invalid_config(
    tmp_path: Path, name: str, text: str, words: list[str]
) -> None:
    config = properties(tmp_path, text, name)
    with pytest.raises(InvalidConfigError) as raised:
        read_config_file(config)
    for word in words:  # the setting is named as in a config file: linger.ms
        assert word.replace("_", ".") in raised.value.message
    with pytest.raises(InvalidConfigError):
        load_settings(config)


def test_missing_file_is_invalid_config(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="cannot read config file"):
        load_settings(str(tmp_path / "absent.properties"))


def test_settings_are_frozen() -> None:
    settings = BrokerSettings(root="/r")
    with pytest.raises(ValueError):
        settings.linger_ms = 1  # type: ignore[misc]


def test_wildcard_bind_advertises_the_host_name() -> None:
    assert BrokerSettings(host="0.0.0.0", port=9000).url == f"http://{socket.getfqdn()}:9000"
    assert BrokerSettings(host="127.0.0.1", port=9000).url == "http://127.0.0.1:9000"
    assert BrokerSettings(host="::1", port=9000).url == "http://[::1]:9000"
    advertised = BrokerSettings(host="0.0.0.0", advertised_url="http://broker-1:8082")
    assert advertised.url == "http://broker-1:8082"
