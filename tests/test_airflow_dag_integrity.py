"""DAG integrity: every file in dags/ imports without errors (in a fresh interpreter, as the dag-processor does),
fast, into an acyclic DAG with the runbook's tasks, one run at a time, and the mutating tasks in the cluster pool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

DAG_FILES = sorted(p.name for p in (REPO / "dags").glob("*.py"))
EXPECTED = {
    "kafka_add_brokers.py": ("kafka_add_brokers", None),
    "kafka_rebalance_weekly.py": ("kafka_rebalance_weekly", "@weekly"),
    "kafka_leader_rebalance.py": ("kafka_leader_rebalance", None),
}
TASKS = ["snapshot", "analyze", "plan", "check_changes", "validate", "analyze_plan", "report", "approve", "execute",
         "verify", "rollback", "cleanup_throttles", "outcome"]
MUTATING = {"execute", "verify", "rollback", "cleanup_throttles"}

# Runs in a fresh interpreter with a throw-away AIRFLOW_HOME: Airflow's import configures logging and settings
# for the whole process, which the other tests of the session should not inherit.
PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
import airflow.sdk  # Airflow's own import cost is not the DAG files' parse time
from airflow.dag_processing.dagbag import DagBag
t0 = time.monotonic()
bag = DagBag(dag_folder=sys.argv[1], known_pools={"default_pool", "kafka_cluster"})
seconds = time.monotonic() - t0
out = {"seconds": seconds, "errors": {k: str(v)[:2000] for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {
        "file": dag.fileloc.rsplit("/", 1)[-1], "schedule": str(dag.schedule) if dag.schedule else None,
        "max_active_runs": dag.max_active_runs, "catchup": dag.catchup, "doc_md": bool(dag.doc_md),
        "params": sorted(dag.params.keys()),
        "failover_defaults": {k: dag.params[k] for k in ("failover_order", "failover_when_balanced") if k in dag.params},
        "tasks": {t.task_id: {"down": sorted(t.downstream_task_ids), "pool": t.pool, "trigger_rule": getattr(t.trigger_rule, "value", t.trigger_rule),
                              "teardown": t.is_teardown, "type": type(t).__name__,
                              "conn_id": getattr(t, "_conn_id", None)} for t in dag.tasks},
    }
print(json.dumps(out))
"""


def parse_dags(home: Path, **env: str) -> dict[str, Any]:
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin",
           "AIRFLOW__CORE__UNIT_TEST_MODE": "True", **env}
    proc = subprocess.run([sys.executable, "-c", PROBE, str(REPO / "dags"), str(REPO / "plugins")],
                          capture_output=True, text=True, timeout=180, env=env, cwd=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return parse_dags(tmp_path_factory.mktemp("airflow-home"))


def test_one_airflow_for_several_clusters_may_allow_more_runs(tmp_path: Path) -> None:
    more = parse_dags(tmp_path, REBALANCER_MAX_ACTIVE_RUNS="4")
    assert {d["max_active_runs"] for d in more["dags"].values()} == {4} and not more["errors"]
    bad = parse_dags(tmp_path, REBALANCER_MAX_ACTIVE_RUNS="lots")
    assert set(bad["errors"]) and all("REBALANCER_MAX_ACTIVE_RUNS='lots'" in e for e in bad["errors"].values())


def test_all_dag_files_parse_in_under_5_seconds(bag: dict[str, Any]) -> None:
    assert bag["seconds"] < 5.0, f"DagBag took {bag['seconds']:.1f} s"
    assert set(DAG_FILES) == set(EXPECTED)


@pytest.mark.parametrize("dag_file", DAG_FILES)
def test_dag_file_imports_without_errors(bag: dict[str, Any], dag_file: str) -> None:
    errors = {k: v for k, v in bag["errors"].items() if Path(k).name == dag_file}
    assert not errors, errors
    dag_id, schedule = EXPECTED[dag_file]
    dag = bag["dags"][dag_id]
    assert dag["file"] == dag_file
    assert dag["schedule"] == schedule
    assert dag["max_active_runs"] == 1 and dag["catchup"] is False and dag["doc_md"]


@pytest.mark.parametrize("dag_id", [v[0] for v in EXPECTED.values()])
def test_runbook_tasks_wiring_and_no_cycles(bag: dict[str, Any], dag_id: str) -> None:
    tasks = bag["dags"][dag_id]["tasks"]
    assert sorted(tasks) == sorted(TASKS)
    chain = ["snapshot", "analyze", "plan", "check_changes", "validate", "analyze_plan", "report", "approve",
             "execute", "verify"]
    for a, b in zip(chain, chain[1:], strict=False):
        assert b in tasks[a]["down"], f"{a} >> {b}"
    assert tasks["execute"]["down"] == ["rollback", "verify"]
    assert tasks["verify"]["down"] == ["cleanup_throttles", "outcome", "rollback"]
    assert tasks["rollback"]["down"] == ["cleanup_throttles", "outcome"]
    assert tasks["rollback"]["trigger_rule"] == "one_failed"
    assert tasks["cleanup_throttles"]["teardown"] is True and tasks["cleanup_throttles"]["down"] == ["outcome"]
    # The verdict is the one leaf that decides the run's state.
    assert tasks["outcome"]["trigger_rule"] == "all_done" and tasks["outcome"]["down"] == []
    assert tasks["approve"]["type"] == "PlanApprovalOperator"
    assert tasks["approve"]["down"] == ["execute"]  # Reject skips execute, and with it everything after it
    for name in ("analyze", "analyze_plan"):
        assert tasks[name]["type"] == "SparkSubmitOperator" and tasks[name]["conn_id"] == "spark_default"
    for name, t in tasks.items():
        assert (t["pool"] == "kafka_cluster") == (name in MUTATING), name
    # Acyclic: Kahn's algorithm consumes every task.
    indegree = {t: 0 for t in tasks}
    for t in tasks.values():
        for d in t["down"]:
            indegree[d] += 1
    ready = [t for t, n in indegree.items() if n == 0]
    assert ready == ["snapshot"], ready  # the only root
    seen = 0
    while ready:
        t = ready.pop()
        seen += 1
        for d in tasks[t]["down"]:
            indegree[d] -= 1
            if indegree[d] == 0:
                ready.append(d)
    assert seen == len(tasks), "cycle"


def test_trigger_params(bag: dict[str, Any]) -> None:
    add = bag["dags"]["kafka_add_brokers"]["params"]
    for p in ("new_brokers", "throttle", "execution_schedule", "strategy", "max_moves_per_broker", "backend", "approvers",
              "approval_timeout_hours", "zookeeper_conn_id", "kafka_conn_id"):
        assert p in add
    assert "require_approval" in bag["dags"]["kafka_leader_rebalance"]["params"]
    assert "require_approval" not in bag["dags"]["kafka_rebalance_weekly"]["params"]
    # Load balancing (issue 13): what the replica runbooks balance and the load gates' thresholds are params; the
    # leader runbook moves no data and has neither.
    load = {"balance", "capacity_file", "disk_band_pct", "network_band_pct", "max_disk_deviation_pct", "max_network_deviation_pct", "max_disk_utilisation_pct",
            "max_network_utilisation_pct", "plan_groups", "plan_spark_master"}
    for dag_id in ("kafka_add_brokers", "kafka_rebalance_weekly"):
        assert load <= set(bag["dags"][dag_id]["params"]), dag_id
    assert not load & set(bag["dags"]["kafka_leader_rebalance"]["params"])
    # Failover (issue 46): every runbook orders followers on request and gates the worst single broker failure.
    for dag in bag["dags"].values():
        assert {"failover_order", "max_failover_deviation_pct"} <= set(dag["params"])
    # The weekly run orders a balanced cluster's followers for failover (issue 46, Deliver 4); the others on request.
    assert {d: dag["failover_defaults"] for d, dag in bag["dags"].items()} == {
        "kafka_add_brokers": {"failover_order": False, "failover_when_balanced": False},
        "kafka_rebalance_weekly": {"failover_order": False, "failover_when_balanced": True},
        "kafka_leader_rebalance": {"failover_order": False, "failover_when_balanced": False}}
