"""Kafka runbook: the weekly rebalance of replicas and leaders, after a human approval."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from rebalancer_airflow.runbook_dag import DEFAULT_ARGS, build_runbook, common_params, max_active_runs

DOC = """
### Weekly rebalance

Every week: replica and leader counts drift as topics grow and brokers fail. This run proposes the smallest set of
changes that brings every broker back within the band of the median (replicas, then leaders), and executes it
after a human approval. Where nothing needs to change, the run orders each partition's followers so that a failed
broker's leadership spreads evenly over the others (`failover_when_balanced`, on here: a plan that copies nothing,
approved like any other). A cluster balanced in both ends the run at **check_changes**, successfully, without asking
anyone.

Stages: **snapshot** -> **analyze** (Spark) -> **plan** -> **check_changes** -> **validate** (Great Expectations
gates) -> **analyze_plan** -> **report** -> **approve** (Required Actions; decision recorded with the plan hash)
-> **execute** (throttled batches, resumable) -> **verify**; **rollback** when execute or verify failed;
**cleanup_throttles** always; **outcome**: the verdict in one line (it fails the run when any task failed).

Artifacts: `$REBALANCER_RUNS_DIR/kafka_rebalance_weekly/<run id>/` (menu *Kafka rebalance reports*). One run per
cluster at a time. The approval times out after `approval_timeout_hours` (default 24) as a Reject.
"""

with DAG(
    dag_id="kafka_rebalance_weekly",
    description="Weekly replica and leader rebalance (approval required)",
    schedule="@weekly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=max_active_runs(),
    default_args=DEFAULT_ARGS,
    tags=["kafka", "rebalance", "runbook"],
    doc_md=DOC,
    params=common_params("rebalance"),
) as dag:
    build_runbook("rebalance")
