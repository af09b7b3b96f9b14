"""Layered settings for lakelog processes (broker, scheduler): defaults < file < env < flags.

A config file is Kafka-style ``.properties`` (``linger.ms=5``) or a JSON
object; dotted names map to the settings' field names (``linger_ms``).
Environment variables ``LAKELOG_<FIELD>`` (any case) beat the file, and
explicit values (command-line flags) beat both. Every problem becomes
INVALID_CONFIG naming the setting.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from lakelog.errors import InvalidConfigError

S = TypeVar("S", bound=BaseSettings)


def read_config_file(path: str) -> dict[str, Any]:
    """Settings from a ``.properties`` or ``.json`` file, keyed by field name."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidConfigError(f"cannot read config file {path}: {exc}") from exc
    raw: dict[str, Any] = {}
    if file.suffix == ".json":
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise InvalidConfigError(f"config file {path} is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise InvalidConfigError(f"config file {path} must hold a JSON object")
        raw = loaded
    else:
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise InvalidConfigError(f"{path}:{number}: expected name=value, got {line!r}")
            raw[key.strip()] = value.strip()
    return {k.replace(".", "_").replace("-", "_"): v for k, v in raw.items()}


def load_layered(
    settings_class: type[S], config_file: str | None, overrides: dict[str, Any], what: str
) -> S:
    """Build ``settings_class`` from defaults < file < environment < non-None overrides."""
    from_file = read_config_file(config_file) if config_file else {}
    # pydantic-settings reads LAKELOG_* case-insensitively: a variable in any case
    # must keep the file's value out, or the file would beat the environment.
    present = {k.upper() for k in os.environ}
    merged = {
        k: v
        for k, v in from_file.items()
        if f"LAKELOG_{k.upper()}" not in present or k not in settings_class.model_fields
    }
    merged.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return settings_class(**merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']).replace('_', '.')}: {e['msg']}"
            for e in exc.errors()
        )
        raise InvalidConfigError(f"invalid {what} settings: {problems}") from None
