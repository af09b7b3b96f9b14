"""Options shared by the CLI tools."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeAlias

from lakelog.errors import InvalidConfigError, InvalidRequestError, UnknownTopicOrPartitionError
from lakelog.numerals import is_unsigned_int

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: Where the tools find their targets when no flag names one; read when a command runs.
ROOT_ENV = "LAKELOG_ROOT"
BOOTSTRAP_ENV = "LAKELOG_BOOTSTRAP_SERVER"
FALLBACK_BOOTSTRAP = "http://127.0.0.1:8082"
ROOT_KINDS = "a path, file://, s3://bucket/prefix or hdfs://"


def add_root(parser: argparse.ArgumentParser, *, instead_of_broker: bool = False) -> None:
    """``--root``. Tools that can use a broker work on a root only when this flag is given."""
    if instead_of_broker:
        text = (
            f"work directly on this storage root ({ROOT_KINDS}) instead of through a "
            "broker; no default: without --root the tool talks to a broker"
        )
    else:
        text = f"storage root URL: {ROOT_KINDS} (default: ${ROOT_ENV}; one of them is required)"
    parser.add_argument("--root", default=None, help=text)


def storage_root(args: argparse.Namespace) -> str:
    """``--root``, else ``$LAKELOG_ROOT``, else an error: a default directory would
    silently create a new, empty root wherever the command runs."""
    root = getattr(args, "root", None) or os.environ.get(ROOT_ENV)
    if not root:
        raise InvalidConfigError(missing_root_message())
    return str(root)


def missing_root_message(also: str = "") -> str:
    return f"no storage root given: pass --root URL ({ROOT_KINDS}){also} or set ${ROOT_ENV}"


def require_root_setting(settings: BaseSettings, also: str = ", root= in --config") -> None:
    """A process's settings must name their root (flag, config file or environment)."""
    if "root" not in settings.model_fields_set:
        raise InvalidConfigError(missing_root_message(also))


def add_tool(
    sub: SubParsers,
    name: str,
    text: str,
    run: Callable[[argparse.Namespace], int],
    actions: dict[str, str] | None = None,
    *,
    root: bool = False,
) -> argparse.ArgumentParser:
    """A broker tool's sub-command: its broker options (``--root`` too with ``root``) and,
    as in Kafka's tools, exactly one of its ``actions`` (``--name``: help)."""
    parser = sub.add_parser(name, help=text)
    add_bootstrap(parser)
    if root:
        add_root(parser, instead_of_broker=True)
    if actions:
        add_switches(parser.add_mutually_exclusive_group(required=True), actions)
    parser.set_defaults(run=run)
    return parser


def add_switches(parser: argparse._ActionsContainer, switches: dict[str, str]) -> None:
    """``--name`` on/off flags, each with its help text."""
    for name, text in switches.items():
        parser.add_argument(f"--{name}", action="store_true", help=text)


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=None,
        metavar="URLS",
        help=f"broker URL(s), comma separated; host:port without a scheme means http "
        f"(default: ${BOOTSTRAP_ENV}, else {FALLBACK_BOOTSTRAP})",
    )
    parser.add_argument(
        "--connect-timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help=f"give up when no broker answered within this time (default: "
        f"{DEFAULT_CONNECT_TIMEOUT_MS}, or socket.connection.setup.timeout.ms in "
        "--command-config)",
    )
    add_client_security(parser)


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
#: ``--command-config`` timeouts (Kafka's client config names) and the setting they set.
TIMEOUT_PROPERTIES = {
    "socket.connection.setup.timeout.ms": "connect_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
    "default.api.timeout.ms": "default_api_timeout_ms",
}
#: The credential flags: option -> (metavar, help, where ``{}`` is its environment variable).
SECURITY_FLAGS: dict[str, tuple[str | None, str]] = {
    "api_key": (None, "API key (default: {})"),
    "token": (None, "bearer JWT (default: {})"),
    "ssl_cafile": ("FILE", "CA bundle to verify https brokers (default: {}, else the system CAs)"),
    "ssl_certfile": (
        "FILE",
        "client certificate (PEM), for brokers requiring mutual TLS (default: {})",
    ),
    "ssl_keyfile": ("FILE", "private key of --ssl-certfile (PEM) (default: {})"),
}
#: How long a tool tries to reach its first broker: a few seconds, so a wrong
#: address fails at once instead of after the one-minute API timeout.
DEFAULT_CONNECT_TIMEOUT_MS = 5_000


def add_client_security(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("security and client settings (docs/security.md)")
    group.add_argument(
        "--command-config",
        metavar="FILE",
        help="properties file: api.key=..., token=..., ssl.cafile=..., ssl.certfile=..., "
        "ssl.keyfile=..., client.id=..., socket.connection.setup.timeout.ms=..., "
        "request.timeout.ms=..., default.api.timeout.ms=... (default: none)",
    )
    from lakelog.client.connection import SECURITY_ENV  # the client loads with its tools

    for option, (metavar, text) in SECURITY_FLAGS.items():
        flag = "--" + option.replace("_", "-")
        group.add_argument(flag, metavar=metavar, help=text.format(f"${SECURITY_ENV[option]}"))


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """The ``--command-config`` properties by their dotted names; unknown names are refused."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    from lakelog.settings_files import read_config_file

    known = {**COMMAND_CONFIG_KEYS, **TIMEOUT_PROPERTIES}
    properties: dict[str, str] = {}
    for key, value in read_config_file(path).items():
        name = key.replace("_", ".")
        if name not in known:
            raise InvalidConfigError(
                f"{path}: unsupported property {name!r}; supported: {', '.join(sorted(known))}"
            )
        properties[name] = str(value)
    return properties


def security_options(args: argparse.Namespace) -> dict[str, str]:
    """The tool's credentials: flags beat ``--command-config``; unset ones are left out."""
    options = {
        COMMAND_CONFIG_KEYS[name]: value
        for name, value in command_config(args).items()
        if name in COMMAND_CONFIG_KEYS
    }
    for name in SECURITY_FLAGS:
        value = getattr(args, name, None)
        if value:
            options[name] = value
    return options


def timeout_options(args: argparse.Namespace) -> dict[str, int]:
    """Client timeouts set by ``--command-config`` and ``--connect-timeout-ms`` (flag wins)."""
    options: dict[str, int] = {}
    for name, value in command_config(args).items():
        if name in TIMEOUT_PROPERTIES:
            options[TIMEOUT_PROPERTIES[name]] = _positive_ms(value, name)
    flag = getattr(args, "connect_timeout_ms", None)
    if flag is not None:
        options["connect_timeout_ms"] = _positive_ms(str(flag), "--connect-timeout-ms")
    return options


def _positive_ms(text: str, what: str) -> int:
    if not is_unsigned_int(text.strip()) or int(text) <= 0:
        raise InvalidConfigError(f"{what} must be a positive number of milliseconds: {text!r}")
    return int(text)


@contextlib.contextmanager
def client_security(args: argparse.Namespace) -> Iterator[None]:
    """Expose the tool's credentials to its clients (through ``SECURITY_ENV``) while it runs."""
    from lakelog.client.connection import SECURITY_ENV

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
    """``--bootstrap-server``, else ``$LAKELOG_BOOTSTRAP_SERVER``, else the local broker."""
    raw = value or os.environ.get(BOOTSTRAP_ENV) or FALLBACK_BOOTSTRAP
    if not any(item.strip().rstrip("/") for item in raw.split(",")):
        raise InvalidConfigError("--bootstrap-server names no broker")
    from lakelog.client.connection import parse_bootstrap

    return parse_bootstrap(raw)


def parse_key_values(items: list[str] | None, what: str) -> dict[str, str]:
    """``k=v`` pairs, repeatable or comma separated, as Kafka's tools accept them.

    A value may be Kafka's bracketed list, ``cleanup.policy=[compact,delete]``,
    whose commas belong to the value; the brackets are dropped.
    """
    result: dict[str, str] = {}
    for item in items or []:
        for pair in _split_pairs(item):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise InvalidConfigError(f"{what} {pair!r} is not of the form name=value")
            value = value.strip()
            if len(value) >= 2 and value[0] == "[" and value[-1] == "]":
                value = value[1:-1]
            result[key.strip()] = value
    return result


def _split_pairs(item: str) -> list[str]:
    # Outside brackets, "cleanup.policy=compact,delete" stays one pair too: only a
    # comma that starts a new k=v splits.
    pairs: list[str] = []
    for piece in _split_commas(item, lists=True) or _split_commas(item, lists=False) or []:
        if "=" in piece or not pairs:
            pairs.append(piece)
        else:
            pairs[-1] += "," + piece
    return pairs


def _split_commas(item: str, lists: bool) -> list[str] | None:
    """Split at commas, except (with ``lists``) inside a ``=[...]`` value; None if one is open."""
    pieces: list[str] = []
    start, in_list = 0, False
    for i, char in enumerate(item):
        if in_list:
            in_list = char != "]"
        elif lists and char == "[" and item[i - 1 : i] == "=":
            in_list = True
        elif char == ",":
            pieces.append(item[start:i])
            start = i + 1
    pieces.append(item[start:])
    return None if in_list else pieces


def split_names(items: list[str] | None) -> list[str]:
    """Names given as repeatable, comma-separated values (``--delete-config a,b``)."""
    return [n.strip() for item in items or [] for n in item.split(",") if n.strip()]


def topic_pattern(text: str, option: str = "--topic") -> re.Pattern[str]:
    """A topic selection as Kafka's tools read one: a regex that must match the whole name.

    Commas separate alternatives and spaces are dropped, as in Kafka's include lists.
    """
    try:
        return re.compile("".join(text.split()).replace(",", "|"))
    except re.error as exc:
        raise InvalidRequestError(
            f"{option} {text!r} is not a valid regular expression: {exc}"
        ) from None


def select_topics(names: Iterable[str], pattern: re.Pattern[str]) -> list[str]:
    return sorted(n for n in names if pattern.fullmatch(n))


def matching_topics(names: Iterable[str], text: str, option: str = "--topic") -> list[str]:
    """The topics the ``option`` ``text`` selects (``topic_pattern``); none is an error."""
    found = select_topics(names, topic_pattern(text, option))
    if not found:
        raise UnknownTopicOrPartitionError(f"no topic matches {option} {text!r}")
    return found
