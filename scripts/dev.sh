#!/usr/bin/env bash
# Set up the project on a fresh machine and run it or its tests.
#   bash scripts/dev.sh run   -> install the broker extra, then start a broker on localhost:8082 over ./data/lakelog
#   bash scripts/dev.sh test  -> install the dev extras, then ruff, mypy and the whole test suite
#   bash scripts/dev.sh test --quick -> the same checks, then only the quick tier: tests that
#                                       start no process (no broker, Spark or S3 server)
# Installs go into ./.venv and are skipped when it already holds them for this
# pyproject.toml (scripts/install_state.py; delete .venv/lakelog-install.json to force one).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "lakelog needs Python 3.11"'

# install EXTRAS: lakelog in editable mode with EXTRAS (comma separated), unless already there.
install() {
    local extras=$1
    if [ ! -x .venv/bin/python ]; then
        "$PYTHON" -m venv .venv
    fi
    if .venv/bin/python scripts/install_state.py current .venv "$extras"; then
        return
    fi
    echo "== installing lakelog[$extras] into .venv" >&2
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet --editable ".[$extras]"
    .venv/bin/python scripts/install_state.py record .venv "$extras"
}

case "${1:-}" in
    run)
        install broker
        shift
        exec .venv/bin/lakelog broker start --root "${LAKELOG_ROOT:-./data/lakelog}" "$@"
        ;;
    test)
        install dev
        shift
        echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
        echo "== mypy"; .venv/bin/mypy lakelog server compaction spark_connector tests benchmarks
        # One test worker per core (pytest-xdist); tests are handed out as workers
        # free up, so the long ones do not queue behind each other. `-n 0` after
        # `test` runs the suite in this one process; `--quick` (tests/fixtures/tiers.py)
        # only the tests that start no process.
        echo "== pytest"; exec .venv/bin/pytest -n auto --dist worksteal "$@"
        ;;
    *)
        echo "usage: bash scripts/dev.sh run|test" >&2
        exit 2
        ;;
esac
