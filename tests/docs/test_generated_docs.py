"""The documentation stays true to the code.

- docs/configuration.md and docs/http-api.md are generated; regenerating
  them must give the committed text (run the tool named in the failure);
- the architecture diagram script draws a PNG;
- every test that docs/guarantees.md names as proof exists;
- docs/kafka-protocol.md lists every Kafka API served, with its versions;
- every relative link in docs/ and README.md points to a file that exists.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.fixtures import PROJECT

DOCS = PROJECT / "docs"
TOOLS = DOCS / "tools"


def load_tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_tools_{name}", TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while executing it
    spec.loader.exec_module(module)
    return module


def assert_current(path: Path, expected: str, tool: str) -> None:
    committed = path.read_text()
    if committed != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    "committed",
                    "generated",
                )
            )[:60]
        )
        pytest.fail(f"{path.name} is stale: run python docs/tools/{tool}.py\n{diff}")


def test_configuration_reference_is_current() -> None:
    tool = load_tool("gen_config_reference")
    assert_current(DOCS / "configuration.md", tool.render(), "gen_config_reference")


def test_http_reference_is_current() -> None:
    tool = load_tool("gen_http_reference")
    assert_current(DOCS / "http-api.md", tool.render(tool.openapi_document()), "gen_http_reference")


def test_http_reference_covers_every_route() -> None:
    tool = load_tool("gen_http_reference")
    document = tool.openapi_document()
    text = (DOCS / "http-api.md").read_text()
    for path, item in document["paths"].items():
        for method in item:
            assert f"### `{method.upper()} {path}`" in text


def test_architecture_diagram_is_drawn(tmp_path: Path) -> None:
    tool = load_tool("draw_architecture")
    out = tool.draw(tmp_path / "architecture.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (DOCS / "img" / "architecture.png").exists()
    assert "img/architecture.png" in (DOCS / "architecture.md").read_text()


def test_guarantees_name_tests_that_exist() -> None:
    text = (DOCS / "guarantees.md").read_text()
    refs = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", text)
    assert len(refs) >= 10
    for file, name in refs:
        source = (PROJECT / file).read_text()
        assert re.search(rf"def {name}\b", source), f"{file}::{name} does not exist"


def _links(path: Path) -> list[str]:
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())


@pytest.mark.parametrize(
    "page", [PROJECT / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name
)
def test_relative_links_resolve(page: Path) -> None:
    for link in _links(page):
        if re.match(r"[a-z]+://", link) or link.startswith("mailto:"):
            continue
        target = (page.parent / link).resolve()
        assert target.exists(), f"{page.name} links to missing {link}"


def test_schema_registry_page_lists_every_registry_code() -> None:
    """The Schema Registry answers Confluent's codes, not Kafka's: its own page lists them."""
    from lakelog import errors

    expected = {
        (c.registry_code, c.http_status)
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.SchemaRegistryError)
    }
    text = (DOCS / "schema-registry.md").read_text()
    rows = re.findall(r"^\| (\d{3,5}) \| (\d{3}) \| [^|]+ \|$", text, re.MULTILINE)
    assert {(int(c), int(h)) for c, h in rows} == expected


def test_troubleshooting_lists_every_error_code() -> None:
    from lakelog import errors

    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type)
        and issubclass(c, errors.LakelogError)
        and not issubclass(c, errors.SchemaRegistryError)
    ]
    expected = {(c.code, c.name, c.http_status, c.retriable) for c in classes}
    text = (DOCS / "troubleshooting.md").read_text()
    rows = re.findall(r"^\| (-?\d+) \| ([A-Z_]+) \| (\d+) \| (yes|no) \|$", text, re.MULTILINE)
    listed = {(int(c), n, int(h), r == "yes") for c, n, h, r in rows}
    assert listed == expected


def test_kafka_protocol_page_lists_every_api_with_its_versions() -> None:
    from server.kafka.apis import SUPPORTED

    text = (DOCS / "kafka-protocol.md").read_text()
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+)(?:\u2013(\d+))? \|$", text, re.MULTILINE)
    listed = {(int(key), name, int(low), int(high or low)) for name, key, low, high in rows}
    served = {(a.key, a.name, a.min_version, a.max_version) for a in SUPPORTED.values()}
    assert listed == served
