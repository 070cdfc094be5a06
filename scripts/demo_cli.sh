#!/usr/bin/env bash
# The runbook without Airflow: the same stages the DAGs run (scripts/demo.sh), stage by stage from the command line,
# on a real ZooKeeper with a simulated ZooKeeper-mode Kafka cluster that just got 4 new empty brokers:
#   snapshot (zk://) -> Spark skew analysis (local) -> plan (add-brokers) -> GX validation gates -> approver report
#   -> approval (recorded, by hash) -> throttled batched execution -> verification.
# Pass --keep to leave the simulated cluster running afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
keep=0
[ "${1:-}" = "--keep" ] && keep=1

RB=.venv/bin/rebalancer
SIM_DIR=.sim
if [ -f "$SIM_DIR/sim.json" ]; then $RB sim down --dir "$SIM_DIR" >/dev/null 2>&1 || true; fi
$RB sim up --dir "$SIM_DIR" --scenario new-brokers --acceleration 100
if [ "$keep" = 0 ]; then trap '$RB sim down --dir "$SIM_DIR" >/dev/null' EXIT; fi

ZK_URL=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["zk_url"])' "$SIM_DIR/sim.json")
SIZES=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["sizes"])' "$SIM_DIR/sim.json")
RUN_DIR=runs/$(date -u +%Y%m%dT%H%M%SZ)
step() { printf '\n== %s\n' "$*"; }

step "1/8 snapshot"
$RB snapshot --source "$ZK_URL" --sizes "$SIZES" --out "$RUN_DIR"
step "2/8 Spark skew analysis (local[*])"
$RB analyze "$RUN_DIR"
step "3/8 plan: fill the new brokers 12-15"
$RB plan "$RUN_DIR" --mode add-brokers --brokers 12,13,14,15
step "4/8 validation gates"
$RB validate "$RUN_DIR"
step "5/8 Spark analysis of the plan, and the approver's report"
$RB analyze "$RUN_DIR" >/dev/null
$RB report "$RUN_DIR"
step "6/8 approval (an operator would read $RUN_DIR/report.html first)"
$RB approve "$RUN_DIR" --by "demo operator"
step "7/8 throttled, batched execution"
$RB execute "$RUN_DIR" --source "$ZK_URL" --throttle 200MB/s --max-moves-per-broker 25 --max-moves 100 --poll 0.2
step "8/8 verification"
$RB verify "$RUN_DIR" --source "$ZK_URL"
$RB snapshot --source "$ZK_URL" --sizes "$SIZES" --out "$RUN_DIR/after" | tail -n +4
echo
echo "run directory: $RUN_DIR (report.html, plan.json, validation/, execution/, verification.json)"
if [ "$keep" = 1 ]; then
    echo "simulated cluster still running at $ZK_URL; stop it with: $RB sim down --dir $SIM_DIR"
fi
