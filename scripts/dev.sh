#!/usr/bin/env bash
# Set up the project on a fresh machine and run it or its tests.
#   bash scripts/dev.sh run   -> install, then start a broker on localhost:8082 over ./data/lakelog
#   bash scripts/dev.sh test  -> install with dev extras, then ruff, mypy and the whole test suite
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "lakelog needs Python 3.11"'

setup() {
    if [ ! -x .venv/bin/python ]; then
        "$PYTHON" -m venv .venv
    fi
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet --editable ".[dev]"
}

case "${1:-}" in
    run)
        setup
        shift
        exec .venv/bin/lakelog broker start --root "${LAKELOG_ROOT:-./data/lakelog}" "$@"
        ;;
    test)
        setup
        shift
        echo "== ruff"; .venv/bin/ruff check . && .venv/bin/ruff format --check .
        echo "== mypy"; .venv/bin/mypy lakelog server compaction spark_connector tests benchmarks
        echo "== pytest"; exec .venv/bin/pytest "$@"
        ;;
    *)
        echo "usage: bash scripts/dev.sh run|test" >&2
        exit 2
        ;;
esac
