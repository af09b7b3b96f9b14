"""What each part of lakelog needs installed, and the clear error when it is missing.

``pip install lakelog`` is the core (library, client, CLI); the brokers, the
maintenance jobs and the Spark source need pip extras (``lakelog[broker]``,
``lakelog[spark]``, ``lakelog[all]``). Each part checks its modules on import,
so a missing extra is one message naming the install command, not a
``ModuleNotFoundError`` from deep inside. Standard library only (as is
``lakelog.errors``): it runs before anything it checks for is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib.util import find_spec

from lakelog.errors import MissingDependencyError

#: The top-level modules the core imports (``pyproject.toml``'s dependencies).
CORE_MODULES = (
    "pyarrow",
    "numpy",
    "fsspec",
    "s3fs",
    "botocore",
    "pydantic",
    "pydantic_settings",
    "httpx",
    "tqdm",
)

#: extra -> the top-level modules the part it installs imports.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "broker": (
        "fastapi",
        "starlette",
        "uvicorn",
        "msgspec",
        "prometheus_client",
        "jwt",
        "kio",
        "aiokafka",
        "crc32c",
        "scramp",
        "fastavro",
        "avro",
        "jsonschema",
        "referencing",
        "google.protobuf",
        "grpc_tools",
    ),
    "spark": ("pyspark", "pandas", "deltalake"),
}

#: Set in the processes Spark starts to run Python code (data sources, UDFs, mapInArrow).
_SPARK_WORKER_MODULE = "pyspark.worker_util"


def require_extra(extra: str, part: str, modules: Iterable[str] | None = None) -> None:
    """Raise ``MissingDependencyError`` naming the extra if a module ``part`` needs is missing.

    ``part`` says what needs it, e.g. "the broker (server/)"; ``modules``
    (default: every module of the extra) are the ones it imports.
    """
    needed = EXTRA_MODULES[extra] if modules is None else modules
    missing = [m for m in needed if not _installed(m)]
    if missing:
        raise MissingDependencyError(
            f"{part} needs {', '.join(missing)}, which {sys.executable} cannot import; "
            f"install lakelog with the {extra!r} extra: pip install 'lakelog[{extra}]'",
            extra=extra,
            missing=missing,
        )


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (for a dotted name,
    such as ``google.protobuf``, its parent package is imported, or is missing)."""
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def require_core() -> None:
    """Raise ``MissingDependencyError`` if a module the core needs cannot be imported: lakelog
    runs in a Python it is not installed in, in Spark the worker interpreter to change."""
    missing = [m for m in CORE_MODULES if not _installed(m)]
    if not missing:
        return
    message = (
        f"lakelog needs the module {missing[0]!r}, which the Python running here "
        f"({sys.executable}) cannot import: lakelog is not installed in it"
    )
    if _SPARK_WORKER_MODULE in sys.modules:
        message += (
            ". This is one of Spark's Python workers, which run PYSPARK_PYTHON (or "
            "spark.pyspark.python under spark-submit; `python3` from PATH when neither is "
            "set): set it to the Python lakelog is installed in, e.g. the driver's "
            "(spark_connector.register and compaction.spark_session do so themselves in "
            "local mode when it is unset)"
        )
    else:
        message += "; install it there (pip install lakelog) or use the Python it is installed in"
    raise MissingDependencyError(message, missing=missing)
