"""Generate docs/http-api.md from the brokers' OpenAPI document.

``python docs/tools/gen_http_reference.py`` rewrites the file; ``--check``
exits 1 when it is stale (tests/docs runs the same comparison). The source is
``server.app.create_app().openapi()``, the document a broker serves at
``/openapi.json``, so the reference lists exactly the routes, parameters,
bodies and answers the code declares. Rendering is pure (document in,
markdown out); building the app opens no storage (that happens at start-up).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
if str(PROJECT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(PROJECT))

OUTPUT = PROJECT / "docs" / "http-api.md"
METHODS = ("get", "post", "put", "patch", "delete")

JSONObj = Mapping[str, Any]


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of a broker app with default settings (over an unused root)."""
    from server.app import create_app
    from server.settings import BrokerSettings

    with tempfile.TemporaryDirectory(prefix="lakelog-openapi-") as tmp:
        document: dict[str, Any] = create_app(BrokerSettings(root=tmp)).openapi()
    return document


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def schema_type(schema: JSONObj) -> str:
    """A short human type for a JSON schema: ``integer``, ``array of RecordIn``, ``A | null``."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " | ".join(schema_type(s) for s in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {schema_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        inner = schema_type(extra) if isinstance(extra, Mapping) else "any"
        return f"object of {inner}"
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    text = str(kind) if kind else "any"
    if "format" in schema:
        text += f" ({schema['format']})"
    return text


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") if text not in (None, "") else ""


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _bounds(schema: JSONObj) -> str:
    names = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    parts = [f"{op} {schema[k]}" for k, op in names.items() if k in schema]
    parts += [f"length >= {schema['minLength']}"] if "minLength" in schema else []
    parts += [f"length <= {schema['maxLength']}"] if "maxLength" in schema else []
    for option in schema.get("anyOf", []):
        inner = _bounds(option)
        if inner:
            parts.append(inner)
    return ", ".join(parts)


def render_operation(method: str, path: str, op: JSONObj) -> list[str]:
    out = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        out += [f"{op['summary']}.", ""]
    if op.get("description"):
        out += [str(op["description"]).strip(), ""]
    params = op.get("parameters", [])
    if params:
        rows = []
        for p in params:
            schema = p.get("schema", {})
            default = schema.get("default")
            rows.append(
                [
                    f"`{p['name']}`",
                    p.get("in", ""),
                    "yes" if p.get("required") else "",
                    schema_type(schema),
                    "" if default is None else f"`{default}`",
                    _bounds(schema),
                    p.get("description") or schema.get("description", ""),
                ]
            )
        out += _table(["parameter", "in", "required", "type", "default", "bounds", ""], rows)
        out.append("")
    body = op.get("requestBody")
    if body:
        content = body.get("content", {})
        kinds = [f"`{ctype}`: {schema_type(c.get('schema', {}))}" for ctype, c in content.items()]
        out += [f"Request body{' (required)' if body.get('required') else ''}: "
                + "; ".join(kinds), ""]  # fmt: skip
    responses = op.get("responses", {})
    rows = []
    for status, answer in responses.items():
        content = answer.get("content", {})
        types = "; ".join(
            f"`{ctype}` {schema_type(c.get('schema', {}))}".strip() for ctype, c in content.items()
        )
        rows.append([f"`{status}`", answer.get("description", ""), types])
    if rows:
        out += _table(["status", "meaning", "body"], rows)
        out.append("")
    return out


def render_schema(name: str, schema: JSONObj) -> list[str]:
    out = [f"### {name}", ""]
    if schema.get("description"):
        out += [str(schema["description"]).strip(), ""]
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    if props:
        rows = [
            [
                f"`{prop}`",
                schema_type(sub),
                "yes" if prop in required else "",
                _bounds(sub),
                sub.get("description", ""),
            ]
            for prop, sub in props.items()
        ]
        out += _table(["field", "type", "required", "bounds", ""], rows)
        out.append("")
    elif "enum" in schema or "type" in schema:
        out += [f"Type: {schema_type(schema)}", ""]
    return out


def render(document: JSONObj) -> str:
    """The whole HTTP reference for one OpenAPI document."""
    info = document.get("info", {})
    by_tag: dict[str, list[tuple[str, str, JSONObj]]] = {}
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                tag = (op.get("tags") or ["other"])[0]
                by_tag.setdefault(tag, []).append((method, path, op))
    out = [
        "# HTTP API reference",
        "",
        "<!-- Generated by docs/tools/gen_http_reference.py from the brokers' OpenAPI "
        "document; do not edit. tests/docs/test_generated_docs.py fails when it is stale. -->",
        "",
        f"{info.get('title', '')} {info.get('version', '')}: {info.get('description', '')}",
        "",
        "A running broker serves the same document at `/openapi.json`. Errors of the native "
        "API are JSON `{error_code, error, message, retriable}` ([ErrorBody](#errorbody)) "
        "with Kafka's error codes (see [troubleshooting.md](troubleshooting.md)); the REST "
        "Proxy APIs answer with Confluent's error bodies. Native request bodies are strict: "
        'no unknown field, and no coercion (a number must be a JSON number, `"3"` is '
        "refused, a flag a JSON boolean, a string a JSON string). A body or parameter that "
        "does not match its schema (wrong type, missing, unknown or out-of-range field) is "
        "refused with HTTP 422 and `INVALID_REQUEST` (42), naming each field at fault; a body "
        "that is not JSON at all, and a well-typed value lakelog itself refuses (an invalid "
        "topic name, offset or config), answer HTTP 400.",
        "",
        "## Operations",
        "",
    ]
    for tag, ops in by_tag.items():
        out.append(f"- **{tag}**: " + ", ".join(f"`{m.upper()} {p}`" for m, p, _ in ops))
    out.append("")
    for tag, ops in by_tag.items():
        out += [f"## {tag}", ""]
        for method, path, op in ops:
            out += render_operation(method, path, op)
    schemas = document.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", ""]
        for name in sorted(schemas):
            out += render_schema(name, schemas[name])
    return "\n".join(out).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render(openapi_document())
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
