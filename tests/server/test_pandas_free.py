"""The broker process keeps pandas out even where it is installed (it never builds a DataFrame)."""

from __future__ import annotations

import subprocess
import sys

from tests.fixtures.brokers import PROJECT

PROBE = """
import sys
from server.pandas_free import keep_pandas_unloaded
assert keep_pandas_unloaded()
import pyarrow as pa
pa.array([1, 2]); pa.scalar(b"")  # the calls that make pyarrow import pandas when it can
try:
    import pandas
except ModuleNotFoundError as exc:
    print("refused:", exc)
print("loaded:", "pandas" in sys.modules)
"""


def test_arrow_works_and_pandas_stays_unloaded() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=PROJECT, capture_output=True, text=True, check=True
    )
    assert "refused: the broker process does not load pandas" in done.stdout, done.stdout
    assert "loaded: False" in done.stdout, done.stdout


def test_pandas_already_loaded_is_left_alone() -> None:
    probe = "import pandas, sys\nfrom server.pandas_free import keep_pandas_unloaded\n"
    probe += "print(keep_pandas_unloaded(), 'pandas' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "True"], done.stdout
