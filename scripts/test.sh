#!/usr/bin/env bash
# The whole test suite: installs what it needs (scripts/setup.sh; Debian's chromium and chromium-driver for the
# report and Airflow browser tests), then runs pytest against real ZooKeeper, Kafka, Spark, Airflow and Chromium,
# in two workers. A test file stays on one worker (its real clusters are started once); the conformance suite, the
# longest, is handed out first (tests/conftest.py).
# Extra arguments go to pytest (-n 0 runs in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "[test] installing Debian's chromium and chromium-driver for the browser tests" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
exec .venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25 "$@"
