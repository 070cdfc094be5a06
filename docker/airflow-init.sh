#!/usr/bin/env bash
# airflow-init service of docker-compose.yaml: runs once, as root, before the other Airflow components start.
#  1. creates the shared volumes' directories and hands them to uid 50000 (the "airflow" user, which the Spark
#     services run as too), so executors and the Airflow driver can both write the run directory;
#  2. writes the simple auth manager's passwords file ({"admin": "$AIRFLOW_ADMIN_PASSWORD"}) unless it exists;
#  3. migrates the metadata database (the image's /entrypoint waits for Postgres first);
#  4. creates the pool the runbook's mutating tasks share (one slot: one change to the cluster at a time).
set -euo pipefail

AIRFLOW_UID=50000
runs_dir=${REBALANCER_RUNS_DIR:?REBALANCER_RUNS_DIR is not set}
passwords_file=${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE is not set}
users=${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:?AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS is not set}

mkdir -p "$runs_dir" /opt/airflow/logs "$(dirname "$passwords_file")"

if [ ! -s "$passwords_file" ]; then
    # Only the admin gets a preset password; any other user listed in SIMPLE_AUTH_MANAGER_USERS gets one generated
    # by the api-server on its first start (printed in its log).
    ADMIN_USER=${users%%:*} python -c '
import json, os, sys
path, user, password = sys.argv[1], os.environ["ADMIN_USER"], os.environ.get("AIRFLOW_ADMIN_PASSWORD") or "admin"
with open(path, "w") as f:
    f.write(json.dumps({user: password}) + "\n")
' "$passwords_file"
    echo "airflow-init: wrote $passwords_file for user '${users%%:*}'"
fi

/entrypoint airflow db migrate
/entrypoint airflow pools set kafka_cluster 1 "one mutating task on the Kafka cluster at a time (rebalance runbook)"

chown "$AIRFLOW_UID:0" "$runs_dir" "$(dirname "$passwords_file")"
chown -R "$AIRFLOW_UID:0" /opt/airflow/logs
chown "$AIRFLOW_UID:0" "$passwords_file"
chmod 600 "$passwords_file"
echo "airflow-init: done (runs in $runs_dir)"
