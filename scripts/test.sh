#!/usr/bin/env bash
# The whole test suite: installs what it needs (scripts/setup.sh), then runs pytest against real ZooKeeper.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
