#!/usr/bin/env bash
# Flakes found, not hoped away: run tests N times under CPU load and count the failures of each test.
#
#   bash bench/flake_hunt.sh                          # the real-Kafka and Airflow tests, 5 rounds, 1 core busy
#   bash bench/flake_hunt.sh -n 3 --busy 2 tests/test_conformance.py "tests/test_airflow_runbook.py::test_reject_and_timeout_execute_nothing"
#   bash bench/flake_hunt.sh -n 5 -- -m "kafka or airflow" -k approv
#
# Each round runs pytest as scripts/test.sh does (two workers, a file per worker) while --busy CORES processes spin
# (stress-ng --cpu when installed, else a shell busy loop per core), so a wait that is really a race shows up. Each
# round's JUnit XML and log go to $FLAKE_DIR (default .flake-hunt/); the table at the end gives, per test, the
# rounds it ran in and the rounds it failed (errors in set-up count as failures), slowest first; the exit status is
# 1 when any test failed in any round. Without a selection: every test marked kafka or airflow (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=5
busy=1
workers=2
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) rounds=$2; shift 2 ;;
        --busy) busy=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --) shift; args+=("$@"); break ;;
        *) args+=("$1"); shift ;;
    esac
done
[ ${#args[@]} -gt 0 ] || args=(-m "kafka or airflow")
out=${FLAKE_DIR:-.flake-hunt}
mkdir -p "$out"
rm -f "$out"/round-*.xml "$out"/round-*.log
bash scripts/setup.sh

spinners=()
stop_spinners() { for pid in "${spinners[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_spinners EXIT
if [ "$busy" -gt 0 ]; then
    if command -v stress-ng >/dev/null; then
        stress-ng --cpu "$busy" --quiet &
        spinners+=($!)
    else
        for _ in $(seq "$busy"); do
            bash -c 'while :; do :; done' &
            spinners+=($!)
        done
    fi
    echo "[flake-hunt] $busy core(s) kept busy (pids ${spinners[*]})" >&2
fi

dist=()
[ "$workers" -gt 0 ] && dist=(-n "$workers" --dist loadfile)
for i in $(seq "$rounds"); do
    started=$(date +%s)
    set +e
    .venv/bin/python -m pytest -p no:cacheprovider -q "${dist[@]}" --junitxml="$out/round-$i.xml" "${args[@]}" \
        >"$out/round-$i.log" 2>&1
    rc=$?
    set -e
    echo "[flake-hunt] round $i/$rounds: exit $rc in $(( $(date +%s) - started )) s ($(tail -n 1 "$out/round-$i.log"))" >&2
done
stop_spinners

.venv/bin/python - "$out" "$rounds" "$busy" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

out, rounds, busy = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
runs: dict[str, list[int]] = {}
fails: dict[str, list[int]] = {}
seconds: dict[str, float] = {}
for i in range(1, rounds + 1):
    path = out / f"round-{i}.xml"
    if not path.exists():
        print(f"round {i}: no JUnit XML (pytest did not finish): see {out}/round-{i}.log")
        continue
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        if case.find("skipped") is not None:
            continue
        runs.setdefault(name, []).append(i)
        seconds[name] = max(seconds.get(name, 0.0), float(case.get("time") or 0))
        if case.find("failure") is not None or case.find("error") is not None:
            fails.setdefault(name, []).append(i)
width = max((len(n) for n in runs), default=10)
print(f"\nflake hunt: {rounds} round(s), {busy} core(s) busy")
print(f"{'test':<{width}} {'runs':>4} {'failed':>6} {'max s':>7}  rounds failed")
for name in sorted(runs, key=lambda n: (-len(fails.get(n, [])), -seconds[n])):
    f = fails.get(name, [])
    print(f"{name:<{width}} {len(runs[name]):>4} {len(f):>6} {seconds[name]:>7.1f}  {','.join(map(str, f)) or '-'}")
total = sum(len(v) for v in fails.values())
print(f"{len(runs)} tests, {sum(len(v) for v in runs.values())} runs, {total} failure(s)")
sys.exit(1 if total else 0)
EOF
