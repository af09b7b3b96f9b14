"""Options shared by the CLI tools."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

from lakelog.client.connection import CAFILE_ENV, CLIENT_CERTFILE_ENV, CLIENT_KEYFILE_ENV
from lakelog.errors import InvalidConfigError
from lakelog.settings_files import read_config_file

DEFAULT_ROOT = os.environ.get("LAKELOG_ROOT", "./data/lakelog")
DEFAULT_BOOTSTRAP = os.environ.get("LAKELOG_BOOTSTRAP_SERVER", "http://127.0.0.1:8082")


def add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        default=None,
        help="storage root URL: a path, file://, s3://bucket/prefix or hdfs:// "
        "(default: $LAKELOG_ROOT or ./data/lakelog)",
    )


def add_bootstrap(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=None if not required else DEFAULT_BOOTSTRAP,
        help="broker URL(s), comma separated (default: $LAKELOG_BOOTSTRAP_SERVER or "
        "http://127.0.0.1:8082); host:port without a scheme means http",
    )
    add_client_security(parser)


#: Client security options, passed to every client the tool opens through the
#: environment variables ``lakelog.client.connection`` reads.
SECURITY_ENV = {
    "api_key": "LAKELOG_API_KEY",
    "token": "LAKELOG_TOKEN",
    "ssl_cafile": CAFILE_ENV,
    "ssl_certfile": CLIENT_CERTFILE_ENV,
    "ssl_keyfile": CLIENT_KEYFILE_ENV,
    "client_id": "LAKELOG_CLIENT_ID",
}
#: ``--command-config`` property names (Kafka-style) and the option they set.
COMMAND_CONFIG_KEYS = {
    "api.key": "api_key",
    "token": "token",
    "ssl.cafile": "ssl_cafile",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.certfile": "ssl_certfile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.keyfile": "ssl_keyfile",
    "ssl.key.location": "ssl_keyfile",
    "client.id": "client_id",
}


def add_client_security(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("security (docs/security.md)")
    group.add_argument(
        "--command-config",
        help="properties file: api.key=..., token=..., ssl.cafile=..., ssl.certfile=..., "
        "ssl.keyfile=..., client.id=...",
    )
    group.add_argument("--api-key", help="API key (default: $LAKELOG_API_KEY)")
    group.add_argument("--token", help="bearer JWT (default: $LAKELOG_TOKEN)")
    group.add_argument("--ssl-cafile", help="CA bundle to verify https brokers")
    group.add_argument(
        "--ssl-certfile", help="client certificate (PEM), for brokers requiring mutual TLS"
    )
    group.add_argument("--ssl-keyfile", help="private key of --ssl-certfile (PEM)")


def security_options(args: argparse.Namespace) -> dict[str, str]:
    """The tool's credentials: flags beat ``--command-config``; unset ones are left out."""
    options: dict[str, str] = {}
    path = getattr(args, "command_config", None)
    if path:
        for key, value in read_config_file(path).items():
            name = COMMAND_CONFIG_KEYS.get(key.replace("_", "."))
            if name is None:
                raise InvalidConfigError(
                    f"{path}: unsupported property {key.replace('_', '.')!r}; supported: "
                    f"{', '.join(sorted(COMMAND_CONFIG_KEYS))}"
                )
            options[name] = str(value)
    for name in ("api_key", "token", "ssl_cafile", "ssl_certfile", "ssl_keyfile"):
        value = getattr(args, name, None)
        if value:
            options[name] = value
    return options


@contextlib.contextmanager
def client_security(args: argparse.Namespace) -> Iterator[None]:
    """Expose the tool's credentials to the clients it opens, for the command's duration."""
    options = security_options(args)
    saved = {env: os.environ.get(env) for env in SECURITY_ENV.values()}
    try:
        for name, value in options.items():
            os.environ[SECURITY_ENV[name]] = value
        yield
    finally:
        for env, old in saved.items():
            if old is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = old


def bootstrap_urls(value: str | None) -> list[str]:
    """Kafka tools take host:port; brokers speak HTTP, so a missing scheme means http://."""
    raw = value or DEFAULT_BOOTSTRAP
    urls = []
    for item in raw.split(","):
        item = item.strip().rstrip("/")
        if not item:
            continue
        urls.append(item if "://" in item else f"http://{item}")
    if not urls:
        raise InvalidConfigError("--bootstrap-server names no broker")
    return urls


def parse_key_values(items: list[str] | None, what: str) -> dict[str, str]:
    """``k=v`` pairs (repeatable or comma separated, as Kafka's tools accept them)."""
    result: dict[str, str] = {}
    for item in items or []:
        for pair in _split_pairs(item):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise InvalidConfigError(f"{what} {pair!r} is not of the form name=value")
            result[key.strip()] = value.strip()
    return result


def _split_pairs(item: str) -> list[str]:
    # "cleanup.policy=compact,delete" must stay one pair: split on commas that start a new k=v.
    pairs: list[str] = []
    for piece in item.split(","):
        if "=" in piece or not pairs:
            pairs.append(piece)
        else:
            pairs[-1] += "," + piece
    return pairs
