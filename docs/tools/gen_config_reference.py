"""Generate docs/configuration.md from the code's own configuration models.

``python docs/tools/gen_config_reference.py`` rewrites the file;
``--check`` exits 1 when the committed file differs from what the code says
(tests/docs runs the same comparison). The sources are the models the
programs validate their settings with, so the reference cannot drift from
them: the brokers' ``BrokerSettings``, the scheduler's ``SchedulerSettings``,
``S3Settings``, the topic configs of ``lakelog.topic_config``, the client
constructors' keyword parameters, the catalog's options and the maintenance
jobs' ``JobOptions``. Rendering is pure (models in, markdown out).
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
if str(PROJECT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(PROJECT))

from annotated_types import Ge, Gt, Le, Lt  # noqa: E402
from pydantic import AliasChoices  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402
from pydantic_settings import BaseSettings  # noqa: E402

from lakelog.topic_config import ConfigDef  # noqa: E402

OUTPUT = PROJECT / "docs" / "configuration.md"

_UNITS_MS = ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s"))


def _duration(ms: int) -> str:
    for size, unit in _UNITS_MS:
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def show_default(name: str, value: object) -> str:
    """A default as a reader wants it: code-quoted, with durations of ``*_ms`` spelled out."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and value >= 2**62:
        return "`Long.MAX_VALUE`"
    if isinstance(value, str):
        return f"`{value!r}`"
    if not isinstance(value, int):
        return f"`{value}`"
    text = f"`{value:,}`" if value >= 10_000 else f"`{value}`"
    if (name.endswith("_ms") or name.endswith(".ms")) and value >= 1_000:
        text += f" ({_duration(value)})"
    return text


def type_name(annotation: object) -> str:
    """``int | None`` rather than ``typing.Optional[int]``; literals as their choices."""
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def constraints(field: FieldInfo) -> str:
    parts = []
    for item in field.metadata:
        if isinstance(item, Ge):
            parts.append(f">= {item.ge:,}")
        elif isinstance(item, Gt):
            parts.append(f"> {item.gt:,}")
        elif isinstance(item, Le):
            parts.append(f"<= {item.le:,}")
        elif isinstance(item, Lt):
            parts.append(f"< {item.lt:,}")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _field_default(name: str, field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "generated"
    if field.default is PydanticUndefined:
        return "required"
    return show_default(name, field.default)


def settings_rows(model: type[BaseSettings]) -> list[list[str]]:
    """One row per field: environment variable(s), file key, type, default, bounds, meaning."""
    prefix = str(model.model_config.get("env_prefix", ""))
    rows = []
    for name, field in model.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            env = ", ".join(f"`{c}`" for c in alias.choices if isinstance(c, str))
        else:
            env = f"`{prefix}{name.upper()}`"
        rows.append(
            [
                env,
                f"`{name.replace('_', '.')}`" if prefix else f"`{name}`",
                type_name(field.annotation),
                _field_default(name, field),
                constraints(field),
                field.description or "",
            ]
        )
    return rows


def signature_rows(
    fn: Callable[..., Any], skip: Sequence[str] = ("self",), kafka_names: bool = True
) -> list[list[str]]:
    """Keyword parameters of a constructor: name, Kafka's name, type, default."""
    hints = typing.get_type_hints(fn)
    rows = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = "required" if param.default is param.empty else show_default(name, param.default)
        row = [f"`{name}`"]
        if kafka_names:
            row.append(f"`{name.replace('_', '.')}`")
        row += [type_name(hints.get(name, param.annotation)), default]
        rows.append(row)
    return rows


def _doc(obj: object) -> str:
    return inspect.cleandoc(inspect.getdoc(obj) or "")


def render() -> str:
    """The whole configuration reference, from the models as the code defines them now."""
    from compaction.defaults import DEFAULT_GRACE_MS, DEFAULT_ORPHAN_GRACE_MS, JOBS
    from compaction.runner import JobOptions
    from compaction.scheduler import SchedulerSettings
    from lakelog.catalog import Catalog
    from lakelog.client import AdminClient, Consumer, Producer
    from lakelog.storage import S3Settings
    from lakelog.topic_config import CONFIG_DEFS
    from server.settings import BrokerSettings

    settings_header = ["environment", "file key", "type", "default", "bounds", "meaning"]
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by docs/tools/gen_config_reference.py from the code; do not edit. "
        "tests/docs/test_generated_docs.py fails when it is stale. -->",
        "",
        "Every setting below is read from the model the program validates it with, so this "
        "page is what the code accepts. Invalid values are refused at start-up (brokers, "
        "scheduler) or with `INVALID_CONFIG` (topic configs), naming the setting.",
        "",
        "## Broker (`lakelog broker start`, `python -m server`)",
        "",
        "Precedence: command-line flags > `LAKELOG_*` environment variables > config file "
        "(`--config broker.properties` with the dotted *file key*, or JSON) > defaults.",
        "",
        *_table(settings_header, settings_rows(BrokerSettings)),
        "",
        "## Storage root: S3 settings",
        "",
        _doc(S3Settings),
        "",
        "Read from the first variable set, in the order listed. Every process that opens an "
        "`s3://` root needs them: brokers, jobs, Spark executors, clients using the library.",
        "",
        *_table(settings_header, settings_rows(S3Settings)),
        "",
        "## Topic configs",
        "",
        "Kafka's names and defaults; set at creation (`--config k=v`, `configs={...}`) or "
        "altered later (`--alter --add-config`, `PATCH /v1/topics/{t}/configs`). Only "
        "overrides are stored (in the Delta table's metadata), so a topic follows the defaults.",
        "",
        *_table(
            TOPIC_CONFIG_HEADER, topic_config_rows(d for d in CONFIG_DEFS.values() if d.applies)
        ),
        "",
        "### Kafka's topic configs that have no effect",
        "",
        "Accepted with Kafka's types and bounds, stored and described as Kafka does, so "
        "Kafka's tools can set them; they govern replicas, local log files, fsyncs or record "
        'batches, which lakelog has not (docs/kafka-protocol.md, "Admin APIs").',
        "",
        *_table(
            TOPIC_CONFIG_HEADER, topic_config_rows(d for d in CONFIG_DEFS.values() if not d.applies)
        ),
        "",
        "## Python clients (`lakelog.client`)",
        "",
        "Keyword arguments of the constructors. Where Kafka's clients have a setting of the "
        "same meaning it has the dotted name shown (the others are lakelog's own). "
        "`bootstrap_servers` takes broker URLs (or `host:port`).",
        "",
    ]
    for cls in (Producer, Consumer, AdminClient):
        out += [f"### `{cls.__name__}`", ""] + ([_doc(cls), ""] if _doc(cls) else [])
        out += _table(
            ["parameter", "Kafka-style name", "type", "default"],
            signature_rows(cls.__init__, skip=("self", "connection", "transport")),
        )
        out.append("")
    out += [
        "`connection` (share one `Connection` between clients) and `transport` (replace "
        "httpx's network layer, for tests) are also accepted by every client.",
        "",
        "## Library (`lakelog.connect` / `Catalog`)",
        "",
        inspect.cleandoc(Catalog.__doc__ or "Options of a catalog opened on a storage root."),
        "",
        *_table(
            ["parameter", "type", "default"],
            signature_rows(Catalog.__init__, skip=("self",), kafka_names=False),
        ),
        "",
        "## Maintenance jobs",
        "",
        f"Jobs, in the order `lakelog maintain` runs them: {', '.join(f'`{j}`' for j in JOBS)}.",
        f"Vacuum keeps removed files for {_duration(DEFAULT_GRACE_MS)} by default and deletes "
        f"never-committed files older than {_duration(DEFAULT_ORPHAN_GRACE_MS)}.",
        "",
        "### Per run (`lakelog compact|retention|merge|vacuum|maintain`, `JobOptions`)",
        "",
        _doc(JobOptions),
        "",
        *_table(
            ["field", "type", "default"],
            (
                [
                    f"`{f.name}`",
                    type_name(typing.get_type_hints(JobOptions)[f.name]),
                    show_default(f.name, f.default),
                ]
                for f in dataclasses.fields(JobOptions)
            ),
        ),
        "",
        "### Scheduler (`lakelog scheduler`)",
        "",
        _doc(SchedulerSettings),
        "",
        *_table(settings_header, settings_rows(SchedulerSettings)),
        "",
        "The Spark session of the jobs also reads `LAKELOG_SPARK_MASTER` (default "
        "`local[2]`), `LAKELOG_SHUFFLE_PARTITIONS`, `LAKELOG_SPARK_DRIVER_MEMORY` and "
        "`LAKELOG_SPARK_DRIVER_JAVA_OPTIONS` (see `compaction/spark_session.py`); under "
        "spark-submit the submitter's configuration is used as is.",
        "",
    ]
    return "\n".join(out).rstrip() + "\n"


TOPIC_CONFIG_HEADER = ["name", "type", "default", "allowed", "meaning"]


def topic_config_rows(definitions: Iterable[ConfigDef]) -> list[list[str]]:
    return [
        [
            f"`{d.name}`",
            d.kind,
            show_default(d.name, d.default),
            ", ".join(d.choices)
            or ", ".join(
                p
                for p in (
                    f">= {d.minimum:g}" if d.minimum is not None else "",
                    f"<= {d.maximum:g}" if d.maximum is not None else "",
                )
                if p
            ),
            d.doc,
        ]
        for d in definitions
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale: run python {Path(__file__).relative_to(PROJECT)}")
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
