"""Kafka runbook: leader-only rebalance (replica reorder + preferred leader election, no data movement)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from rebalancer_airflow.runbook_dag import DEFAULT_ARGS, build_runbook, common_params, max_active_runs

DOC = """
### Leader rebalance (no data movement)

Balances partition leadership per topic and across the cluster by reordering replica lists and running a preferred
leader election: no byte is copied. The plan is an exact min-cost flow (`flow`; `pinterest` for comparison).

Stages as in the other runbooks: **snapshot** -> **analyze** -> **plan** -> **check_changes** -> **validate** ->
**analyze_plan** -> **report** -> **approve** -> **execute** -> **verify**, **rollback** on failure,
**cleanup_throttles** always, **outcome** last. Approval is required unless the run is triggered with `require_approval: false`
(the automatic approval is still recorded, with the plan hash, in `approval.json`).
"""

with DAG(
    dag_id="kafka_leader_rebalance",
    description="Leader-only rebalance: replica reorder + preferred election, no data movement",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=max_active_runs(),
    default_args=DEFAULT_ARGS,
    tags=["kafka", "rebalance", "runbook", "leaders"],
    doc_md=DOC,
    params={
        "require_approval": Param(True, type="boolean", title="Require approval",
                                  description="false: approve automatically (recorded as such)", section="Approval"),
        **common_params("leaders"),
    },
) as dag:
    build_runbook("leaders", approval_param="require_approval")
