"""Kafka runbook: fill newly added brokers with the fewest replica moves, after a human approval."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from rebalancer_airflow.runbook_dag import DEFAULT_ARGS, build_runbook, common_params, max_active_runs

DOC = """
### Fill new brokers (add-brokers)

Triggered after brokers were added to a cluster (trigger form, or `POST /api/v2/dags/kafka_add_brokers/dagRuns`
with `{"conf": {"new_brokers": [12, 13, 14, 15]}}`). The new brokers sit empty; this run moves replicas onto them
with the fewest moves that bring every broker within the band of the median, and nothing else.

1. **snapshot** reads the assignment (ZooKeeper `zookeeper_default`, or the Admin API `kafka_default`).
2. **analyze** (Spark, `spark_default`): per-broker skew tables.
3. **plan** the smallest change set and its lower bound; **check_changes** ends the run successfully when there is
   nothing to change.
4. **validate**: Great Expectations gates (at most one change per partition, deviation from the median, known and
   live brokers, racks kept, hashes, the worst single broker failure). A failed gate fails the run; nobody is
   asked.
5. **analyze_plan** + **report**: the approver's report (before/after charts, gates, every change).
6. **approve**: Required Actions in the UI (or the REST API). The request links to the report and Data Docs. The
   decision is recorded with the plan's hash in `approval.json`; Reject or timeout ends the run untouched.
7. **execute** in throttled batches (`throttle`, `max_moves_per_broker`, `max_moves`), resumable: clearing the
   task continues where it stopped. **verify** checks the planned replicas, ISRs, leaders and throttles.
8. **rollback** runs when execute or verify failed. Through ZooKeeper, which cannot cancel a move, a move in flight
   that needs a broker that is down makes it refuse at once, nothing submitted: bring the broker back, then Clear
   the rollback task (with its downstream) to roll back again. **cleanup_throttles** always removes this run's
   replication throttles.
9. **outcome**: the run's verdict in one line (executed and verified / rejected by whom / what failed and whether
   the rollback restored the cluster); it fails the run when any task failed.

Artifacts: `$REBALANCER_RUNS_DIR/kafka_add_brokers/<run id>/`, browsable from the *Kafka rebalance reports* menu.
One run per cluster at a time (one active run per DAG unless `REBALANCER_MAX_ACTIVE_RUNS` allows more for several
clusters, pool `kafka_cluster`, and the cluster lock).
"""

with DAG(
    dag_id="kafka_add_brokers",
    description="Fill newly added brokers with the fewest moves (approval required)",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=max_active_runs(),
    default_args=DEFAULT_ARGS,
    tags=["kafka", "rebalance", "runbook"],
    doc_md=DOC,
    params={
        "new_brokers": Param([12, 13, 14, 15], type="array", items={"type": "integer", "minimum": 0}, minItems=1,
                             title="New broker ids", description="the brokers just added (they receive replicas)",
                             section="Plan"),
        **common_params("add-brokers"),
    },
) as dag:
    build_runbook("add-brokers")
