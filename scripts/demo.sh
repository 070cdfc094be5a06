#!/usr/bin/env bash
# The main job on the embedded default: a local real Apache Kafka 3.9 cluster (ZooKeeper mode, 6 loaded brokers in 3
# racks + 2 new empty ones, 6 and 7, in a 4th; 240 MiB of real data) and a real Airflow 3 (SQLite, LocalExecutor:
# api-server, scheduler, dag-processor, triggerer) in .airflow/. It triggers the DAG kafka_add_brokers through the
# REST API, prints where to log in and how to approve, follows the run (snapshot -> Spark analysis -> plan -> GX
# gates -> report -> approval -> throttled execution moving real bytes -> verification) and prints its outcome.
#
#   bash scripts/demo.sh                     # you approve in the UI (Required Actions) or with the printed curl
#   bash scripts/demo.sh --approve-as NAME   # unattended: approves through the REST API as user NAME
#   bash scripts/demo.sh --keep              # leave Airflow and the cluster running afterwards
#   bash scripts/demo.sh --sim               # the simulated cluster instead (a real ZooKeeper, 12 balanced brokers
#                                            # + 4 new ones, 12-15: gigabytes "moved" in seconds)
#   AIRFLOW_PORT=8080 (default; a free port is picked when it is taken)
#
# The CLI-only version of the same runbook is scripts/demo_cli.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

keep=0
approver=""
engine=real
while [ $# -gt 0 ]; do
    case "$1" in
        --keep) keep=1 ;;
        --real) engine=real ;;
        --sim) engine=sim ;;
        --approve-as) approver="${2:?--approve-as needs a user name}"; shift ;;
        --approve-as=*) approver="${1#--approve-as=}" ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "demo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$approver" in *[!A-Za-z0-9_.-]*) echo "demo.sh: --approve-as takes a plain user name ([A-Za-z0-9_.-])" >&2; exit 2 ;; esac

bash scripts/setup.sh
PY=.venv/bin/python
RB=.venv/bin/rebalancer
AF="$PY scripts/airflow_local.py"
SIM_DIR=.sim
KAFKA_DIR=$PWD/.kafka-demo
AF_HOME=$PWD/.airflow
DAG=kafka_add_brokers
step() { printf '\n== %s\n' "$*"; }

port=${AIRFLOW_PORT:-8080}
if ! $PY -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
    port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    echo "port ${AIRFLOW_PORT:-8080} is taken: the api-server listens on $port"
fi

cleanup() {
    $AF down --home "$AF_HOME" || true
    if [ "$engine" = real ]; then $RB kafka down --dir "$KAFKA_DIR" >/dev/null 2>&1 || true
    else $RB sim down --dir "$SIM_DIR" >/dev/null 2>&1 || true; fi
}
if [ "$keep" = 0 ]; then trap cleanup EXIT; fi

if [ "$engine" = real ]; then
    step "1/4 real Apache Kafka 3.9 (ZooKeeper mode): 6 loaded brokers in 3 racks + 2 new empty ones (6, 7) in a 4th"
    $RB kafka down --dir "$KAFKA_DIR" >/dev/null 2>&1 || true
    rm -rf "$KAFKA_DIR"
    $RB kafka up --dir "$KAFKA_DIR" --version 3.9 --scenario new-brokers --brokers 6 --racks 3 --new-brokers 2 \
        --partitions 48 --topics 4 --rf 3 --data-mib 240
    new_brokers="[6, 7]"; throttle="20MB/s"; cluster_args=(--kafka-dir "$KAFKA_DIR")
else
    step "1/4 simulated cluster: 12 loaded brokers in 3 racks + 4 new empty ones (12-15) in a 4th"
    if [ -f "$SIM_DIR/sim.json" ]; then $RB sim down --dir "$SIM_DIR" >/dev/null 2>&1 || true; fi
    $RB sim up --dir "$SIM_DIR" --scenario new-brokers --acceleration 100
    new_brokers="[12, 13, 14, 15]"; throttle="200MB/s"; cluster_args=(--sim-dir "$SIM_DIR")
fi

step "2/4 Airflow 3 in $AF_HOME (first start migrates the database; about a minute)"
# Small Spark jobs: a quick JIT and a serial GC (spark-defaults for the embedded local[*] master only).
mkdir -p "$AF_HOME/spark-conf"
printf 'spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC\n' > "$AF_HOME/spark-conf/spark-defaults.conf"
export SPARK_CONF_DIR="$AF_HOME/spark-conf"
up_args=(--home "$AF_HOME" --port "$port" "${cluster_args[@]}")
if [ -n "$approver" ]; then up_args+=(--approver "$approver"); fi
$AF up "${up_args[@]}" > "$AF_HOME/up.json"
url=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$AF_HOME/up.json")
admin_pw=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["passwords"]["admin"])' "$AF_HOME/up.json")
echo "Airflow is up at $url (connections zookeeper_default, spark_default; pool kafka_cluster)"

step "3/4 trigger $DAG with conf new_brokers $new_brokers through the REST API"
conf="{\"new_brokers\": $new_brokers, \"throttle\": \"$throttle\", \"max_moves_per_broker\": 25, \"max_moves\": 100, \"poll_s\": 0.2}"
run_id=$($AF trigger --home "$AF_HOME" "$DAG" --conf "$conf")
run_q=$($PY -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$run_id")
cat <<EOF
run: $run_id

  Log in:   $url   user admin, password $admin_pw
            (passwords of every user: $AF_HOME/simple_auth_manager_passwords.json.generated)
  Approve:  when the run reaches 'approve' (a few minutes: Spark runs twice), open
            $url/dags/$DAG/runs/$run_q/required_actions
            read the plan and the report it links to, and click Approve (or Reject).
  Or:       TOKEN=\$(curl -s -X POST $url/auth/token -H 'Content-Type: application/json' \\
                     -d '{"username": "admin", "password": "$admin_pw"}' | $PY -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
            curl -X PATCH -H "Authorization: Bearer \$TOKEN" -H 'Content-Type: application/json' \\
                 $url/api/v2/dags/$DAG/dagRuns/$run_q/taskInstances/approve/-1/hitlDetails \\
                 -d '{"chosen_options": ["Approve"]}'
  Reports:  $url/rebalancer/  (also under Browse > Kafka rebalance reports, and the run's "Rebalance report" tab)
EOF

step "4/4 following the run$([ -n "$approver" ] && echo " (approving through the REST API as $approver)")"
wait_args=(--home "$AF_HOME" "$DAG" "$run_id" --timeout 3600)
if [ -n "$approver" ]; then wait_args+=(--approve-as "$approver"); fi
status=0
$AF wait "${wait_args[@]}" || status=$?

run_dir=$($PY -c 'import sys; from rebalancer.runbook import run_dir_for; print(run_dir_for(*sys.argv[1:]))' \
          "$DAG" "$run_id" "$AF_HOME/rebalancer-runs" 2>/dev/null || true)
echo
if [ -n "$run_dir" ] && [ -f "$run_dir/plan.json" ]; then
    echo "the cluster now:"
    if [ "$engine" = real ]; then
        KAFKA_URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["kafka_url"])' "$KAFKA_DIR/localkafka.json")
        $RB snapshot --source "$KAFKA_URL" --out "$run_dir/after" | tail -n +4   # live sizes (DescribeLogDirs)
    else
        ZK_URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["zk_url"])' "$SIM_DIR/sim.json")
        SIZES=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["sizes"])' "$SIM_DIR/sim.json")
        $RB snapshot --source "$ZK_URL" --sizes "$SIZES" --out "$run_dir/after" | tail -n +4
    fi
    [ -f "$run_dir/approval.json" ] && echo "approval record: $(tr -d '\n ' < "$run_dir/approval.json")"
fi
echo "run directory: ${run_dir:-?} (report.html, plan.json, validation/, approval.json, execution/, verification.json)"
if [ "$keep" = 1 ]; then
    if [ "$engine" = real ]; then stop="$RB kafka down --dir $KAFKA_DIR"; else stop="$RB sim down --dir $SIM_DIR"; fi
    echo "still running: Airflow at $url (stop: $AF down --home $AF_HOME) and the cluster (stop: $stop)"
fi
exit $status
