#!/usr/bin/env bash
# The whole test suite: installs what it needs (scripts/setup.sh; Debian's chromium and chromium-driver for the
# report and Airflow browser tests), then runs pytest against real ZooKeeper, Kafka, Spark, Airflow and Chromium,
# in two workers. A test file stays on one worker (its real clusters are started once); the conformance suite, the
# longest, is handed out first (tests/conftest.py).
#
#   bash scripts/test.sh            the whole suite (what CI runs)
#   bash scripts/test.sh --fast     the tier for working: everything that needs no real Kafka, no Airflow and no
#                                   browser (markers kafka, airflow, browser; tests/conftest.py), in minutes;
#                                   property tests run a quarter of their examples there
#
# ruff, mypy and lint-imports run first and stop the run on a finding. Extra arguments go to pytest (-n 0 runs in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
    fast=1
    shift
fi
bash scripts/setup.sh
# The project's own modules and pytest's rewritten test files are compiled once per change, not in every one of the
# suite's thousands of Python processes (CLI calls, Airflow tasks, Spark workers): the bytecode goes to the
# __pycache__/ directories git ignores.
unset PYTHONDONTWRITEBYTECODE
# The contracts machines check, before any test (pyproject.toml: [tool.ruff], [tool.mypy], [tool.importlinter]):
# seconds once mypy's cache (.mypy_cache/) exists, about a minute on a fresh clone.
echo "[test] ruff check" >&2
.venv/bin/ruff check .
echo "[test] mypy (strict on rebalancer/)" >&2
.venv/bin/mypy
echo "[test] lint-imports (the layers of rebalancer/, no cycles in its packages)" >&2
.venv/bin/lint-imports --no-cache --no-logo
if [ "$fast" = 1 ]; then
    # Most of these tests wait on simulated clusters and subprocesses, not the CPU: four workers, a test at a time.
    # Property tests check the same properties on a quarter of the generated examples (tests/conftest.examples).
    export REBALANCER_TEST_TIER=fast
    # A test at a time, longest first, except a file's tests that share a module's fixture (tests/conftest.py).
    exec .venv/bin/python -m pytest -n 4 --dist loadscope --no-loadscope-reorder --durations=15 \
        -m "not kafka and not airflow and not browser" "$@"
fi
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "[test] installing Debian's chromium and chromium-driver for the browser tests" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
exec .venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25 "$@"
