#!/usr/bin/env bash
# Create .venv/ in the repo root and install the project with every pinned dependency.
# Idempotent: does nothing when pyproject.toml and constraints.txt are unchanged since the last install.
# Needs Python 3.11 and Java 17 (Spark, and the ZooKeeper server from the jars inside the pyspark wheel).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
    log "installing Debian packages: $*"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
            PY=$cand; break
        fi
    done
fi
[ -n "$PY" ] || { echo "setup: Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
command -v java >/dev/null || apt_install openjdk-17-jre-headless

if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $PY"
    if ! "$PY" -m venv .venv 2>/dev/null; then
        rm -rf .venv
        apt_install python3-venv
        "$PY" -m venv .venv
    fi
fi

stamp=.venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
    log "installing dependencies into .venv (first run takes a few minutes)"
    .venv/bin/python -m pip install -q --disable-pip-version-check "uv==0.13.9"
    # uv ignores the machine's pip.conf; every version comes from constraints.txt.
    .venv/bin/uv pip install -q --python .venv/bin/python -c constraints.txt -e '.[dev]'
    rm -f .venv/.installed-* .venv/.compiled
    touch "$stamp"
    log "done: .venv/bin/rebalancer"
fi
# Bytecode for every installed module, once: uv installs none, and where PYTHONDONTWRITEBYTECODE is set (as on the
# machines this project is built on) every process compiles what it imports from source again: 12 s of CPU to import
# Great Expectations instead of 5, 2.6 s for pandas instead of 0.8, in every CLI call, Airflow task and test worker.
# A file that does not compile (a template shipped as .py) is left to be compiled, or not, when imported.
if [ ! -f .venv/.compiled ]; then
    log "compiling the installed modules' bytecode (once, about half a minute)"
    .venv/bin/python -m compileall -q -j 0 .venv/lib/python3.11/site-packages >/dev/null || true
    touch .venv/.compiled
fi

# Real Apache Kafka's jars (3.9 and 4.x) from Maven Central into .kafka/, for 'rebalancer kafka up' and
# tests/test_local_kafka.py; every run, as it does nothing when kafka/*/pom.xml are unchanged since the last fetch.
bash scripts/fetch_kafka.sh
