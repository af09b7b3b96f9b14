"""The broker process keeps pandas out even where it is installed (it never builds a DataFrame)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.fixtures.brokers import PROJECT, BrokerProcess
from tests.fixtures.roots import RootSpec

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


def test_a_broker_serves_produce_and_fetch_without_pandas(
    root: RootSpec, start_broker: Callable[..., BrokerProcess]
) -> None:
    # pandas is installed here (beside PySpark), so only the broker's own refusal keeps it out.
    assert importlib.util.find_spec("pandas") is not None
    broker = start_broker(root)
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        http.post("/v1/topics", json={"name": "t", "partitions": 2}).raise_for_status()
        produced = http.post("/v1/topics/t/records", json={"records": [{"key": "k", "value": "v"}]})
        assert produced.status_code == 200, produced.text
        (record,) = produced.json()["records"]
        fetched = http.get(f"/v1/topics/t/partitions/{record['partition']}/records")
        assert [r["value"] for r in fetched.json()["records"]] == ["v"], fetched.text
    mapped = Path(f"/proc/{broker.pid}/maps").read_text()
    assert "pyarrow" in mapped  # the probe would be empty if it read the wrong process
    assert "/pandas/" not in mapped, "the broker process loaded pandas"
