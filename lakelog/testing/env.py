"""One environment rule for every process tests and benchmarks start (a broker, a job, a
tool): it imports the parent's code and reaches the parent's S3 store."""

from __future__ import annotations

import os
from pathlib import Path

from lakelog.storage import S3Settings


def child_env(
    checkout: Path | str, *, s3: S3Settings | None = None, **variables: str
) -> dict[str, str]:
    """This process's environment for a child: ``checkout`` first on ``PYTHONPATH``, the S3
    store of ``s3`` (if given), then ``variables``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(checkout), env.get("PYTHONPATH", "")) if part
    )
    if s3 is not None:
        env.update(s3.aws_variables())
    env.update(variables)
    return env
