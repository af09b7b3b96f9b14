"""The notebooks in notebooks/ run, cell by cell, against a real broker and local Spark.

Each notebook is executed with nbclient in a fresh ``python3`` kernel whose
spec is written here to run *this* interpreter (the venv's), so the kernel
sees the same installed packages as the tests whatever kernels the machine
has. The broker is a real uvicorn subprocess (``start_broker``); the
notebooks find it, and the storage root Spark reads, through
``LAKELOG_BROKER_URL`` and ``LAKELOG_ROOT``, exactly as a user points them at
``bash scripts/dev.sh run``. Any failing cell fails its test with the cell's
traceback. All notebook tests live in this one module so their kernels (and
the JVMs of the Spark notebooks) never overlap.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook

from lakelog.testing.env import child_env
from tests.fixtures.brokers import PROJECT, BrokerProcess
from tests.fixtures.roots import RootSpec

pytestmark = pytest.mark.integration  # notebooks run in a Jupyter kernel process

NOTEBOOKS = PROJECT / "notebooks"
EXPECTED = {"quickstart", "analytics", "compaction", "streaming"}

#: JVM flags that start Spark in a third of the time (short runs; see compaction/spark_session.py).
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A ``python3`` kernelspec running this interpreter, found first through JUPYTER_PATH."""
    data_dir = tmp_path / "jupyter"
    write_kernel_spec(data_dir / "kernels" / "python3")
    monkeypatch.setenv("JUPYTER_PATH", str(data_dir))
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable, spec.argv
    return child_env(PROJECT, LAKELOG_SPARK_DRIVER_JAVA_OPTIONS=FAST_JVM)


def read_notebook(path: Path) -> NotebookNode:
    nb: NotebookNode = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
    return nb


def execute(name: str, env: dict[str, str], stderr: Path | None = None) -> NotebookNode:
    """Run every cell of ``notebooks/<name>.ipynb`` in a new kernel, in the notebooks folder.

    ``stderr`` receives the kernel's own stderr (and that of the JVM it starts).
    """
    nb = read_notebook(NOTEBOOKS / f"{name}.ipynb")
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=420,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    if stderr is None:
        client.execute(env=env)
        return nb
    with stderr.open("wb") as sink:
        client.execute(env=env, stderr=sink)
    return nb


def assert_spark_stopped_cleanly(stderr: Path) -> None:
    """No Java exception on the kernel's stderr: Spark ended before the kernel was shut down."""
    text = stderr.read_text(errors="replace")
    assert "Exception" not in text, text[-4000:]


def outputs(nb: NotebookNode) -> list[NotebookNode]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def text_of(nb: NotebookNode) -> str:
    return "".join(out.get("text", "") for out in outputs(nb) if out.output_type == "stream")


def images(nb: NotebookNode) -> int:
    return sum("image/png" in out.get("data", {}) for out in outputs(nb))


# -- static checks -----------------------------------------------------------


def test_every_notebook_is_committed_without_outputs() -> None:
    found = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert found >= EXPECTED
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = read_notebook(path)
        nbformat.validate(nb)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path.name} cell {i} has outputs: strip them"
                assert cell.execution_count is None, f"{path.name} cell {i} has a count"
        assert nb.metadata.get("kernelspec", {}).get("name") == "python3", path.name


def test_a_failing_cell_fails_execution(kernel_env: dict[str, str]) -> None:
    cells = [new_code_cell("x = 1"), new_code_cell("raise ValueError('broken')")]  # type: ignore[no-untyped-call]
    nb = new_notebook(cells=cells)  # type: ignore[no-untyped-call]
    client = NotebookClient(nb, kernel_name="python3", timeout=120)
    with pytest.raises(CellExecutionError, match="broken"):
        client.execute(env=kernel_env)


# -- executed against a broker -----------------------------------------------


def test_quickstart_runs_against_a_broker_twice(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, kernel_env: dict[str, str]
) -> None:
    """Only the broker URL is set (the README broker is the default); reruns reuse the topic."""
    broker = start_broker(RootSpec(str(tmp_path / "root")))
    env = {**kernel_env, "LAKELOG_BROKER_URL": broker.url}
    env.pop("LAKELOG_ROOT", None)
    first = text_of(execute("quickstart", env))
    assert "created quickstart-events" in first
    assert "12 records read" in first
    second = text_of(execute("quickstart", env))
    assert "already exists; reusing it" in second
    assert "24 records read" in second


def test_the_readme_command_prints_the_quickstart_results(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, kernel_env: dict[str, str]
) -> None:
    """The README's command runs the notebook and prints its cells with their outputs."""
    readme = (PROJECT / "README.md").read_text()
    (command,) = re.findall(r"^\.venv/bin/jupyter nbconvert .*$", readme, re.MULTILINE)
    broker = start_broker(RootSpec(str(tmp_path / "root")))
    env = {**kernel_env, "LAKELOG_BROKER_URL": broker.url}
    args = shlex.split(command.replace(".venv/bin/", f"{Path(sys.executable).parent}/"))
    done = subprocess.run(
        args, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "created quickstart-events" in done.stdout
    assert "12 records read" in done.stdout
    assert re.search(r"^ *partition \d offset \d+$", done.stdout, re.MULTILINE)


def _cluster_env(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, kernel_env: dict[str, str]
) -> dict[str, str]:
    root = tmp_path / "root"
    broker = start_broker(RootSpec(str(root)))
    assert broker.kafka is not None
    return {
        **kernel_env,
        "LAKELOG_BROKER_URL": broker.url,
        "LAKELOG_KAFKA_BOOTSTRAP": broker.kafka,
        "LAKELOG_ROOT": str(root),
    }


@pytest.mark.timeout(900)
def test_analytics_notebook(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, kernel_env: dict[str, str]
) -> None:
    stderr = tmp_path / "kernel.stderr"
    nb = execute("analytics", _cluster_env(start_broker, tmp_path, kernel_env), stderr)
    assert "produced 400 Avro orders" in text_of(nb)
    assert images(nb) == 2  # page views, and the typed orders' revenue per region
    assert_spark_stopped_cleanly(stderr)


@pytest.mark.timeout(900)
def test_compaction_notebook(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, kernel_env: dict[str, str]
) -> None:
    stderr = tmp_path / "kernel.stderr"
    nb = execute("compaction", _cluster_env(start_broker, tmp_path, kernel_env), stderr)
    text = text_of(nb)
    assert "latest values preserved for 25 keys" in text
    assert images(nb) == 1
    assert_spark_stopped_cleanly(stderr)


@pytest.mark.timeout(900)
def test_streaming_notebook(
    start_broker: Callable[..., BrokerProcess], tmp_path: Path, kernel_env: dict[str, str]
) -> None:
    stderr = tmp_path / "kernel.stderr"
    nb = execute("streaming", _cluster_env(start_broker, tmp_path, kernel_env), stderr)
    assert "word counts match what was produced" in text_of(nb)
    assert images(nb) == 1
    assert_spark_stopped_cleanly(stderr)


def test_notebooks_leave_nothing_in_their_folder() -> None:
    """Kernels run in notebooks/; nothing (spark-warehouse, checkpoints, data) may be left there."""
    allowed = {".ipynb", ".md"}
    stray = [
        p.name
        for p in NOTEBOOKS.iterdir()
        if p.suffix not in allowed and p.name not in {".ipynb_checkpoints", "__pycache__"}
    ]
    assert stray == []
