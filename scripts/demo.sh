#!/usr/bin/env bash
# The main job on the embedded default: a real ZooKeeper with a simulated ZooKeeper-mode Kafka cluster
# (Wix-like replica skew, 40 brokers in 4 racks), snapshotted through zk:// into a run directory, and the
# per-broker skew table printed. Pass --keep to leave the simulated cluster running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
keep=0
[ "${1:-}" = "--keep" ] && keep=1

RB=.venv/bin/rebalancer
SIM_DIR=.sim
if [ -f "$SIM_DIR/sim.json" ]; then $RB sim down --dir "$SIM_DIR" >/dev/null 2>&1 || true; fi
$RB sim up --dir "$SIM_DIR" --scenario wix --brokers 40 --racks 4 --partitions 3000 --acceleration 100
if [ "$keep" = 0 ]; then trap '$RB sim down --dir "$SIM_DIR" >/dev/null' EXIT; fi

ZK_URL=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["zk_url"])' "$SIM_DIR/sim.json")
SIZES=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["sizes"])' "$SIM_DIR/sim.json")
RUN_DIR=runs/$(date -u +%Y%m%dT%H%M%SZ)
echo
$RB snapshot --source "$ZK_URL" --sizes "$SIZES" --out "$RUN_DIR"
echo
echo "run directory: $RUN_DIR"
if [ "$keep" = 1 ]; then
    echo "simulated cluster still running at $ZK_URL; stop it with: $RB sim down --dir $SIM_DIR"
fi
