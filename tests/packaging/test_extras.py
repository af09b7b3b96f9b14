"""What each part imports is declared in its group of pyproject.toml, and a missing extra is
one clear message: on import of the part, and from the ``lakelog`` command.

A missing package is simulated in a subprocess with ``sys.modules[name] = None``,
which makes both ``import name`` and ``importlib.util.find_spec(name)`` see it
as absent (a real install without the extras is tested in test_core_install).
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lakelog.extras import CORE_MODULES, EXTRA_MODULES
from tests.fixtures.brokers import PROJECT

pytestmark = pytest.mark.integration  # each test imports the parts in a fresh interpreter

PROJECT_META = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]

#: part (a folder) -> the requirement groups installed for it.
PARTS = {
    "lakelog": ("core",),
    "server": ("core", "broker"),
    "compaction": ("core", "spark"),
    "spark_connector": ("core", "spark"),
}
#: Folders inside a part that need more than it: lakelog.testing starts the test S3
#: server, which the test extra installs, for tests and benchmarks only.
SUBPARTS = {"lakelog/testing/": ("core", "test")}
#: The groups whose every dependency some part must import.
RUNTIME_GROUPS = ("core", "broker", "spark")
#: Declared but imported by a library rather than by lakelog: s3fs is what fsspec
#: loads for s3:// URLs, pandas what PySpark's SQL runs on (declared to bound its version).
LOADED_BY_OTHERS = {"s3fs", "pandas"}


def group(name: str) -> set[str]:
    """The distributions a requirement group names directly (lakelog[...] excluded)."""
    raw = (
        PROJECT_META["dependencies"]
        if name == "core"
        else PROJECT_META["optional-dependencies"][name]
    )
    names = {str(canonicalize_name(Requirement(r).name)) for r in raw}
    return names - {"lakelog"}


def third_party_imports(path: Path) -> Iterator[str]:
    """Top-level modules a file imports anywhere, leaving out the stdlib and lakelog's own."""
    ours = set(PARTS)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            if top not in sys.stdlib_module_names and top not in ours:
                yield top


@functools.cache
def installed_modules() -> Mapping[str, list[str]]:
    """Top-level module -> distributions, read once: each read scans every installed package."""
    return packages_distributions()


def distributions_of(module: str) -> set[str]:
    """The distributions providing ``module``; for a dotted name (a package inside a namespace
    shared by several, as ``google.protobuf``), the one whose files hold that package."""
    found = installed_modules().get(module.partition(".")[0])
    assert found, f"no installed distribution provides {module!r}"
    if "." in module:
        folder = module.replace(".", "/") + "/"
        found = [
            d for d in found if any(str(f).startswith(folder) for f in distribution(d).files or ())
        ]
        assert found, f"no installed distribution holds the package {module!r}"
    return {canonicalize_name(d) for d in found}


def imports_by_file() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for part in PARTS:
        for path in sorted((PROJECT / part).rglob("*.py")):
            found[path.relative_to(PROJECT).as_posix()] = set(third_party_imports(path))
    return found


def groups_of(relative: str) -> tuple[str, ...]:
    for folder, groups in SUBPARTS.items():
        if relative.startswith(folder):
            return groups
    return PARTS[relative.partition("/")[0]]


def test_every_import_is_declared_in_its_part_group() -> None:
    missing = []
    for relative, modules in imports_by_file().items():
        declared = set().union(*(group(g) for g in groups_of(relative)))
        for module in sorted(modules):
            if not distributions_of(module) & declared:
                missing.append(f"{relative}: {module} ({', '.join(groups_of(relative))})")
    assert missing == []


def test_every_declared_dependency_is_imported_by_its_part() -> None:
    used: dict[str, set[str]] = {name: set() for name in RUNTIME_GROUPS}
    for relative, modules in imports_by_file().items():
        for name in groups_of(relative):
            for module in modules:
                if name in used:
                    used[name] |= distributions_of(module)
    for name, imported in used.items():
        assert group(name) - imported - LOADED_BY_OTHERS == set(), name


def test_the_import_checks_list_the_groups_modules() -> None:
    """lakelog.extras checks exactly the modules of what each group declares."""
    for name, modules in [("core", CORE_MODULES), *EXTRA_MODULES.items()]:
        provided = set().union(*(distributions_of(m) for m in modules))
        assert provided == group(name), name


def test_the_spark_extra_installs_a_pandas_pyspark_supports() -> None:
    """PySpark 4 supports pandas 2.2 up to 3 and warns on import of anything newer, while
    pyspark[sql] bounds pandas below only: the extra bounds it, and this venv keeps to it."""
    (pin,) = [
        Requirement(r)
        for r in PROJECT_META["optional-dependencies"]["spark"]
        if canonicalize_name(Requirement(r).name) == "pandas"
    ]
    assert not pin.specifier.contains("3.0.0") and pin.specifier.contains("2.3.3")
    code = """
import warnings
warnings.simplefilter("error")
from pyspark.sql.pandas.utils import require_minimum_pandas_version
require_minimum_pandas_version()
import pandas
print(pandas.__version__)
"""
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert pin.specifier.contains(done.stdout.strip())


def python(code: str, *blocked: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter in which the ``blocked`` modules are absent."""
    prelude = "".join(f"import sys; sys.modules[{b!r}] = None\n" for b in blocked)
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("part", "blocked", "extra"),
    [
        ("server", "fastapi", "broker"),
        ("server", "jwt", "broker"),
        ("compaction", "pyspark", "spark"),
        ("compaction", "deltalake", "spark"),
        ("spark_connector", "pyspark", "spark"),
    ],
)
def test_importing_a_part_without_its_extra_names_the_extra(
    part: str, blocked: str, extra: str
) -> None:
    code = f"""
try:
    import {part}
except ImportError as exc:
    from lakelog.errors import MissingDependencyError
    assert isinstance(exc, MissingDependencyError), type(exc)
    print(exc)
else:
    raise SystemExit("imported")
"""
    done = python(code, blocked)
    assert done.returncode == 0, done.stderr
    assert f"needs {blocked}, which {sys.executable} cannot import" in done.stdout
    assert f"pip install 'lakelog[{extra}]'" in done.stdout


def test_a_package_whose_namespace_is_missing_is_named() -> None:
    """``google.protobuf`` is looked for through ``google``: no ``google`` is one message."""
    done = python("import server", "google")
    assert "Traceback" in done.stderr and "MissingDependencyError" in done.stderr
    assert "needs google.protobuf, which" in done.stderr


def test_the_core_imports_without_any_extra() -> None:
    done = python(
        "import lakelog, lakelog.client, lakelog.cli, lakelog.doctor; print('ok')",
        "fastapi",
        "uvicorn",
        "pyspark",
        "deltalake",
        "msgspec",
        "jwt",
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_command_whose_extra_is_missing_says_what_to_install() -> None:
    run = "from lakelog.cli import main; sys.exit(main(sys.argv[1:]))"
    code = f"sys.argv[1:] = ['broker', 'start', '--port', '9']\n{run}"
    done = python(code, "fastapi")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: the lakelog broker (server/) needs fastapi")
    assert "pip install 'lakelog[broker]'" in done.stderr

    done = python(f"sys.argv[1:] = ['maintain', '--root', '/nowhere']\n{run}", "pyspark")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "pip install 'lakelog[spark]'" in done.stderr

    # --version is added to every command, but one whose extra is missing takes no options:
    # it still gives the install hint.
    done = python(f"sys.argv[1:] = ['maintain', '--version']\n{run}", "pyspark")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "pip install 'lakelog[spark]'" in done.stderr

    helped = python(f"sys.argv[1:] = ['--help']\n{run}", "pyspark")
    assert helped.returncode == 0
    assert "(not installed: pip install 'lakelog[spark]')" in helped.stdout
    assert "broker          run a broker" in helped.stdout  # the installed parts as usual


def test_the_core_missing_says_so() -> None:
    done = python("import lakelog", "pyarrow")
    assert done.returncode == 1
    assert "lakelog.errors.MissingDependencyError: lakelog needs the module 'pyarrow'" in (
        done.stderr
    )
    assert "install it there (pip install lakelog)" in done.stderr
