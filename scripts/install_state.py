"""Whether the project's venv already holds an install of some extras, for scripts/dev.sh.

    python scripts/install_state.py current .venv broker   # exit 0: nothing to install
    python scripts/install_state.py record .venv broker    # after `pip install -e ".[broker]"`

`pip install` takes seconds even when everything is installed, and a broker
restart should not. After an install, dev.sh records the hash of
pyproject.toml and the extras installed in ``<venv>/lakelog-install.json``; an
install is needed again when pyproject.toml changed or when the extras asked
for are not covered by those installed (``dev`` covers ``broker``, since it
includes it through ``test`` and ``all``; ``broker`` does not cover ``dev``).
Delete the file to force an install.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
STATE_FILE = "lakelog-install.json"


def pyproject_digest(pyproject: Path) -> str:
    return hashlib.sha256(pyproject.read_bytes()).hexdigest()


def extras_closure(pyproject_text: str, extras: Iterable[str]) -> set[str]:
    """``extras`` and every extra they pull in through ``<project>[...]`` requirements."""
    project = tomllib.loads(pyproject_text)["project"]
    name = re.escape(project["name"])
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    self_reference = re.compile(rf"^\s*{name}\s*\[([^\]]*)\]", re.IGNORECASE)
    found: set[str] = set()
    pending = [e.strip() for e in extras if e.strip()]
    while pending:
        extra = pending.pop()
        if extra in found:
            continue
        if extra not in optional:
            raise SystemExit(f"install_state: pyproject.toml has no extra {extra!r}")
        found.add(extra)
        for requirement in optional[extra]:
            match = self_reference.match(requirement)
            if match:
                pending += [e.strip() for e in match.group(1).split(",")]
    return found


def read_state(venv: Path) -> dict[str, object]:
    path = venv / STATE_FILE
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {}  # a torn or hand-edited file: install again, which rewrites it
    return state if isinstance(state, dict) else {}


def installed_extras(state: dict[str, object], digest: str) -> list[str]:
    """The extras the state says are installed for this pyproject.toml (none if it changed)."""
    extras = state.get("extras")
    if state.get("pyproject_sha256") != digest or not isinstance(extras, list):
        return []
    return [str(e) for e in extras]


def is_current(venv: Path, pyproject: Path, wanted: Iterable[str]) -> bool:
    """True when the venv holds an install covering ``wanted`` for this pyproject.toml."""
    text = pyproject.read_text()
    have = installed_extras(read_state(venv), pyproject_digest(pyproject))
    if not have:
        return False
    return extras_closure(text, wanted) <= extras_closure(text, have)


def record(venv: Path, pyproject: Path, installed: Iterable[str]) -> None:
    """Note that ``installed`` was just installed (kept with what was installed before,
    as long as pyproject.toml is the same)."""
    digest = pyproject_digest(pyproject)
    extras = set(installed_extras(read_state(venv), digest)) | set(installed)
    state = {"pyproject_sha256": digest, "extras": sorted(extras)}
    path = venv / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in {"current", "record"}:
        print("usage: install_state.py current|record VENV EXTRA[,EXTRA...]", file=sys.stderr)
        return 2
    command, venv, extras = argv[0], Path(argv[1]), argv[2].split(",")
    pyproject = PROJECT / "pyproject.toml"
    if command == "current":
        return 0 if is_current(venv, pyproject, extras) else 1
    record(venv, pyproject, extras)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
