"""The runbook's tasks, wired once for the three DAGs in ``dags/``. Each task calls one ``rebalancer.runbook``
function on the run's directory (``$REBALANCER_RUNS_DIR/<dag_id>/<run_id>``) and returns its small summary.

    snapshot >> analyze >> plan >> check_changes >> validate >> analyze_plan >> report >> approve >> execute >> verify
    [execute, verify] >> rollback          (runs when execute or verify failed)
    [verify, rollback] >> cleanup_throttles  (teardown: runs whatever happened)
    [verify, rollback, cleanup_throttles] >> outcome   (all done: the run's verdict; fails it with the reason)

``check_changes`` short-circuits a plan with nothing to change: every later task is skipped, nobody is asked, and
the run succeeds. Nothing here runs at parse time beyond building the operators; the library is imported inside
the task bodies.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, TriggerRule, task, teardown

from rebalancer.execute import ExecOptions
from rebalancer.load import DIMENSIONS
from rebalancer.options import option_fields
from rebalancer.plan.options import PlanOptions
from rebalancer.strategies import (
    BALANCES,
    DEFAULT_SCHEDULE,
    REPLICA_MODES,
    STRATEGY_REGISTRY,
    resolve_schedule,
    strategies_for,
)
from rebalancer_airflow.operators import PlanApprovalOperator

__all__ = ["POOL", "common_params", "build_runbook", "DEFAULT_ARGS", "run_dir", "REPORT_PREFIX"]

POOL = "kafka_cluster"          # one slot: one mutating task on the cluster at a time, across all DAGs
REPORT_PREFIX = "/rebalancer"   # the report view's URL prefix (plugins/rebalancer_plugin.py)
DEFAULT_ARGS = {"owner": "kafka-platform", "retries": 0}


def max_active_runs() -> int:
    """Runs of one runbook DAG at a time: 1 (one cluster per Airflow), or ``REBALANCER_MAX_ACTIVE_RUNS`` where one
    Airflow serves several clusters (a run waiting a day for its approval then holds up no other cluster's). Each
    execution still takes its cluster's lock, and the pool still runs one mutating task at a time."""
    raw = os.environ.get("REBALANCER_MAX_ACTIVE_RUNS", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ValueError(f"REBALANCER_MAX_ACTIVE_RUNS={raw!r}: a whole number of runs from 1 to 64")
    return int(raw)
SPARK_CONF = {"spark.ui.enabled": "false"}  # shuffle partitions: sized to the snapshot by the job (size_shuffles)
RUN_DIR_XCOM = "{{ ti.xcom_pull(task_ids='snapshot')['run_dir'] }}"


# Load gates (plans that balance load): param -> (title, what empty means, minimum, maximum)
LOAD_GATE_PARAMS = {
    "max_disk_deviation_pct": ("Gate: disk bytes vs each broker's target (%)", "the plan's band, 5 %", 0, None),
    "max_network_deviation_pct": ("Gate: network in/out vs each broker's target (%)", "the plan's band, 10 %", 0, None),
    "max_disk_utilisation_pct": ("Gate: disk used after the plan (% of capacity)", "the plan's threshold, 85 %", 0, 100),
    "max_network_utilisation_pct": ("Gate: network used after the plan (% of capacity)", "the plan's threshold, 80 %", 0, 100),
    "max_bytes_to_bound": ("Gate: bytes copied vs their lower bound (factor, plus one partition)", "1.15", 1, None),
}


def _upper_bound(maximum: float | None) -> dict[str, Any]:
    return {"maximum": maximum} if maximum is not None else {}


def common_params(mode: str) -> dict[str, Param]:
    """Params shared by every runbook DAG (trigger form and REST ``conf``); the planner choices of ``mode`` come from
    the strategy registry (``rebalancer.strategies``)."""
    backend = os.environ.get("REBALANCER_BACKEND", "zookeeper")
    strategies = strategies_for(mode)
    planner = option_params(PlanOptions, ("strategy",), strategy={"enum": strategies, "description": "; ".join(
        f"{s}: {STRATEGY_REGISTRY[s].description}" for s in strategies)})
    # The weekly run orders the followers of a balanced cluster for failover (a plan that copies nothing, approved
    # like any other) rather than ending at check_changes; the other runbooks only when asked.
    plan = option_params(PlanOptions, ("max_changes_per_partition", "time_limit", "objective", "failover_order",
                                       "failover_when_balanced", "repair_racks"),
                         failover_when_balanced={"default": mode == "rebalance"})
    load = option_params(PlanOptions, ("balance", "capacity", "groups", "master"),
                         balance={"description": "; ".join(f"{k}: {v}" for k, v in BALANCES.items())},
                         capacity={"description": "Cruise Control's capacity JSON on the worker (empty: the cluster "
                                                  "connection's extra 'capacity', else the disk sizes brokers report)"})
    for param, dims, title in (("disk_band_pct", ("disk",), "Disk band around each broker's target (%)"),
                               ("network_band_pct", ("nw_in", "nw_out"), "Network in/out band around each broker's "
                                                                         "target (%)")):
        load[param] = Param(None, type=["null", "number"], minimum=0, maximum=99, title=title, section="Plan",
                            description=f"empty: {DIMENSIONS[dims[0]].band * 100:g}")
    return {
        "backend": Param(backend, type="string", enum=["zookeeper", "kafka"], title="Cluster access",
                         description="zookeeper: the zookeeper connection (ZooKeeper-mode metadata); "
                                     "kafka: the kafka connection (Admin API)", section="Cluster"),
        "zookeeper_conn_id": Param("zookeeper_default", type="string", title="ZooKeeper connection",
                                   section="Cluster"),
        "kafka_conn_id": Param("kafka_default", type="string", title="Kafka connection", section="Cluster"),
        **planner,
        **(load if mode in REPLICA_MODES else {}),
        **plan,
        "max_deviation_pct": Param(15.0, type="number", minimum=0, title="Gate: replica deviation from median (%)",
                                   section="Validation"),
        "max_leader_deviation_pct": Param(15.0, type="number", minimum=0,
                                          title="Gate: leader deviation from median (%)", section="Validation"),
        "max_failover_deviation_pct": Param(None, type=["null", "number"], minimum=0,
                                            title="Gate: leader load after one broker fails, vs the survivors' mean (%)",
                                            description="empty: 25 %; a plan no worse than the cluster was passes",
                                            section="Validation"),
        **({k: Param(None, type=["null", "number"], minimum=minimum, title=title,
                     description=f"empty: {default}", section="Validation",
                     **_upper_bound(maximum))
            for k, (title, default, minimum, maximum) in LOAD_GATE_PARAMS.items()} if mode in REPLICA_MODES else {}),
        "approvers": Param([], type="array", items={"type": "string"}, title="Approvers",
                           description="user names allowed to approve (empty: anyone with access to the DAG)",
                           section="Approval"),
        "approval_timeout_hours": Param(24.0, type="number", minimum=0, title="Approval timeout (hours)",
                                        description="no answer by then = Reject; 0 waits forever",
                                        section="Approval"),
        **option_params(ExecOptions, ("throttle", "schedule", "per_broker", "total", "poll", "destination_grace")),
        "rollback_wait_s": Param(600, type="number", minimum=0, title="Rollback: wait for in-flight moves (s)",
                                 description="ZooKeeper mode cannot cancel a move: the rollback waits this long "
                                             "for moves still copying to finish before it reverts them. A move "
                                             "that needs a broker that is down never finishes: the rollback then "
                                             "refuses at once, nothing submitted (bring the broker back and clear "
                                             "the rollback task)", section="Execution"),
    }


# -- task helpers ------------------------------------------------------------------------------------------------
def run_dir(context: Any) -> str:
    from rebalancer.runbook import run_dir_for

    return str(run_dir_for(context["dag"].dag_id, context["dag_run"].run_id))


def _cluster(context: Any) -> dict[str, Any]:
    from rebalancer_airflow.hooks import cluster_source

    return cluster_source(dict(context["params"]))


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A library error fails the task with its one-line message (no retry, no traceback wall)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from airflow.sdk.exceptions import AirflowFailException

        from rebalancer.errors import RebalancerError

        try:
            return fn(*args, **kwargs)
        except RebalancerError as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from None

    return wrapper


def _view_url(context: Any, path: str) -> str:
    """URL of a run's file in the report view, absolute when ``[api] base_url`` is set."""
    from airflow.sdk import conf

    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    return (f"{base}{REPORT_PREFIX}/runs/{quote(context['dag'].dag_id, safe='')}/"
            f"{quote(context['dag_run'].run_id, safe='')}/{path}")


def option_params(record: type, names: tuple[str, ...], **overrides: Mapping[str, Any]) -> dict[str, Param]:
    """The DAG form's params of a record's options (``rebalancer.options``), named as the form names them: type,
    range, choices, title and help from the one declaration, the default as an operator writes it; ``overrides``
    (option name -> Param keywords, ``default`` among them): what the form says otherwise (the strategies of this
    DAG's mode)."""
    fields = {f.name: f for f in option_fields(record)}
    out = {}
    for name in names:
        f = fields[name]
        if not f.param:
            raise ValueError(f"{record.__name__}.{name} is not on the DAG form")
        description = f.spec.help + (f"; empty: {f.spec.default_help}" if f.spec.default_help else "")
        given = dict(overrides.get(name, {}))
        out[f.param] = Param(given.pop("default", f.shown_default),
                             **{"title": f.spec.title or name, "description": description, "section": f.spec.section,
                                **f.schema(), **given})
    return out


def _estimated_schedule(params: Any) -> str:
    """The schedule the plan's time estimate assumes: the execution's, ``auto`` as the cluster access resolves it
    (rolling through the Admin API, batches through ZooKeeper)."""
    return resolve_schedule(str(params.get("execution_schedule") or DEFAULT_SCHEDULE), params.get("backend") == "kafka")


def _exec_options(params: Any) -> dict[str, Any]:
    """``runbook.execute``'s options (``ExecOptions``' fields) from the run's params: those on the form."""
    return {f.name: params.get(f.param) for f in option_fields(ExecOptions) if f.param}


# -- the tasks ---------------------------------------------------------------------------------------------------
@one_line_errors
def snapshot_task(**context: Any) -> dict[str, Any]:
    """Read the cluster's assignment (and sizes) into the run directory."""
    from rebalancer import runbook

    c = _cluster(context)
    return runbook.snapshot(run_dir(context), c["source"], sizes=c["sizes"], kafka_config=c["kafka_config"])


def _spark_env() -> dict[str, str]:
    # spark-submit comes with pyspark in the virtualenv running Airflow. Executors use $PYSPARK_PYTHON when the
    # deployment sets it (a Spark cluster's workers have their own Python, as in docker-compose.yaml), else this
    # interpreter (local[*]).
    venv_bin = os.path.dirname(sys.executable)
    return {"PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}


def _analyze(task_id: str, doc: str) -> SparkSubmitOperator:
    from rebalancer.runbook import spark_args, spark_job

    op = SparkSubmitOperator(
        task_id=task_id, conn_id="spark_default", application=spark_job(), name=f"kafka-skew-{task_id}",
        application_args=spark_args(RUN_DIR_XCOM), conf=dict(SPARK_CONF), env_vars=_spark_env(),
        execution_timeout=timedelta(hours=2),
    )
    op.doc_md = doc
    return op


def plan_options(mode: str, context: Any) -> dict[str, Any]:
    """``runbook.plan``'s options from the run's params: ``PlanOptions``' fields from the params on the form, the
    bands from their percentages, the capacity file else the cluster connection's, the schedule the estimate
    assumes as the cluster access resolves it; and the brokers."""
    p = context["params"]
    options = {f.name: p.get(f.param) for f in option_fields(PlanOptions) if f.param}  # None: not on this form
    bands = {}
    if p.get("disk_band_pct") is not None:
        bands["disk"] = float(p["disk_band_pct"]) / 100
    if p.get("network_band_pct") is not None:
        bands["nw_in"] = bands["nw_out"] = float(p["network_band_pct"]) / 100
    capacity = p.get("capacity_file") or (_cluster(context).get("capacity") if mode != "leaders" else None)
    return {**options, "brokers": p.get("new_brokers") or p.get("brokers") or None, "capacity": capacity or None,
            "bands": bands or None, "schedule": _estimated_schedule(p)}


class PlanOperator(SparkSubmitOperator):
    """The plan stage (writes plan.json, reassignment.json, rollback.json). A placement in one pass plans in a
    process of its own on the worker (``runbook.plan(isolated=True)``); one split in groups of topics (the
    ``plan_groups`` param, or a snapshot of 5,000,000 replicas or more) is submitted to Spark through the
    ``spark_default`` connection, like the analysis: ``spark/plan_job.py`` is ``rebalancer plan`` as the driver,
    the groups its tasks. The ``plan_spark_master`` param instead runs the groups on that master from the worker's
    plan process. Its XCom is the plan's small summary either way."""

    def __init__(self, *, mode: str, **kwargs: Any) -> None:
        from rebalancer.runbook import plan_job

        super().__init__(conn_id="spark_default", application=plan_job(), name="kafka-rebalance-plan",
                         conf=dict(SPARK_CONF), env_vars=_spark_env(), **kwargs)
        self.mode = mode

    def execute(self, context: Any) -> None:
        summary = self._plan(context)
        print(summary)
        context["ti"].xcom_push(key="return_value", value=summary)

    def _plan(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException

        from rebalancer import runbook
        from rebalancer.errors import RebalancerError

        try:
            run = run_dir(context)
            options = plan_options(self.mode, context)
            if options.get("master") is not None or runbook.plan_groups(run, self.mode, options.get("groups")) < 2:
                return runbook.plan(run, self.mode, isolated=True, **options)
            self.application_args = runbook.plan_args(run, self.mode, **options)
            print("the load placement is split in groups of topics: the plan stage goes to Spark (spark_default)")
            error = runbook.plan_job_error(run, clear=True)
            try:
                super().execute(context)
            except Exception:
                error = runbook.plan_job_error(run)
                if error is None:
                    raise
                raise AirflowFailException(error) from None
            return runbook.plan_summary(run)
        except RebalancerError as exc:
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from None


@one_line_errors
def check_changes_task(**context: Any) -> bool:
    """False (the run ends here, successfully, without asking anyone) when the plan changes nothing."""
    from rebalancer import runbook

    changes = runbook.has_changes(run_dir(context))
    if not changes:
        print("the plan changes nothing: the cluster is already balanced; ending the run")
    return changes


@one_line_errors
def validate_task(**context: Any) -> dict[str, Any]:
    """Great Expectations gates on the plan; a failed gate fails the run before anyone is asked."""
    from rebalancer import runbook

    p = context["params"]
    out = runbook.validate(run_dir(context), max_changes_per_partition=p.get("max_changes_per_partition"),
                           max_deviation_pct=float(p["max_deviation_pct"]),
                           max_leader_deviation_pct=float(p["max_leader_deviation_pct"]),
                           **{k: (None if p.get(k) is None else float(p[k]))
                              for k in ("max_failover_deviation_pct", *LOAD_GATE_PARAMS)})
    print(out["table"])
    return out


@one_line_errors
def report_task(**context: Any) -> dict[str, Any]:
    """report.html for the approver, and the approval request's subject and body."""
    from rebalancer import runbook

    display = (context["ti"].xcom_pull(task_ids="snapshot") or {}).get("source")
    return runbook.report(run_dir(context), report_url=_view_url(context, "report.html"),
                          docs_url=_view_url(context, "docs/index.html"), cluster=display)


@one_line_errors
def execute_task(**context: Any) -> dict[str, Any]:
    """Throttled, batched execution of exactly the approved plan (refused without its approval record)."""
    from rebalancer import runbook

    c = _cluster(context)
    return runbook.execute(run_dir(context), c["source"], kafka_config=c["kafka_config"],
                           **_exec_options(context["params"]))


@one_line_errors
def verify_task(**context: Any) -> dict[str, Any]:
    """Planned replicas, full ISRs, preferred leaders, no throttle left (verification.json)."""
    from rebalancer import runbook

    c = _cluster(context)
    return runbook.verify(run_dir(context), c["source"], kafka_config=c["kafka_config"])


@one_line_errors
def rollback_task(**context: Any) -> dict[str, Any]:
    """After a failed execute or verify: revert this run's moves to rollback.json and verify the original."""
    from airflow.sdk.exceptions import AirflowSkipException

    from rebalancer import runbook

    rd = run_dir(context)
    if not runbook.execution_started(rd):
        raise AirflowSkipException("the execution never started: nothing to roll back")
    c = _cluster(context)
    p = context["params"]
    out = runbook.rollback(rd, c["source"], kafka_config=c["kafka_config"], wait=float(p["rollback_wait_s"]),
                           **_exec_options(p))
    print(f"rolled back after: {out['reason'] or 'a failed verification'}; original assignment verified")
    return out


@one_line_errors
def cleanup_task(**context: Any) -> dict[str, Any]:
    """Teardown: whatever happened, no replication throttle of this run stays on the cluster."""
    from airflow.sdk.exceptions import AirflowSkipException

    from rebalancer import runbook

    rd = run_dir(context)
    if not runbook.execution_started(rd):
        raise AirflowSkipException("the execution never started: this run set no throttle")
    c = _cluster(context)
    out = runbook.cleanup_throttles(rd, c["source"], kafka_config=c["kafka_config"])
    print(f"this run's throttles removed from: {', '.join(out['removed']) or 'none left'}")
    if out.get("kept"):
        print(f"kept, for moves of this run still copying: {', '.join(out['kept'])}")
    if out.get("foreign"):
        print(f"throttles set by someone else, left alone: {', '.join(sorted(out['foreign']))}")
    return out


def outcome_task(**context: Any) -> str:
    """The run's verdict in one line; fails the run, with the first cause, when any task failed."""
    from airflow.sdk.exceptions import AirflowFailException

    from rebalancer import runbook
    from rebalancer.errors import RebalancerError

    run_id = context["dag_run"].run_id
    states = context["ti"].get_task_states(dag_id=context["dag"].dag_id, run_ids=[run_id])
    states = states.get(run_id, states)
    failed = sorted(t for t, s in states.items() if s == "failed")
    try:
        source: str | None = _cluster(context)["source"]
    except RebalancerError:  # no connection to name: the advice says SOURCE
        source = None
    verdict = runbook.outcome(run_dir(context), failed, source)
    if not verdict["ok"]:
        raise AirflowFailException(verdict["message"])
    print(verdict["message"])
    return str(verdict["message"])


def build_runbook(mode: str, *, approval_param: str | None = None) -> dict[str, Any]:
    """Create the runbook's tasks in the current DAG context; returns them by task id."""
    # The task decorators are applied here, per DAG: a decorated task shared between DAGs would carry the first
    # DAG's settings into the next one parsed in the same process.
    snap = task(task_id="snapshot")(snapshot_task)()
    analyze = _analyze("analyze", "Spark skew analysis of the snapshot (spark/skew_analysis.py through the "
                                  "`spark_default` connection; local[*] by default).")
    planned = PlanOperator(task_id="plan", mode=mode, execution_timeout=timedelta(hours=4),
                           doc_md="Plans the smallest change set (plan.json, reassignment.json, rollback.json): "
                                  "in a process of its own, or submitted to Spark when the placement is split "
                                  "in groups of topics (plan_groups, or 5,000,000 replicas and more).")
    check = task.short_circuit(task_id="check_changes", ignore_downstream_trigger_rules=True)(check_changes_task)()
    validated = task(task_id="validate")(validate_task)()
    analyze_plan = _analyze("analyze_plan", "The same Spark job again, now with plan.json: the per-broker "
                                            "tables after the plan, for the report (the tables before it are "
                                            "kept from analyze when the snapshot is the same).")
    rep = task(task_id="report")(report_task)()
    approve = PlanApprovalOperator(
        task_id="approve",
        subject="{{ ti.xcom_pull(task_ids='report')['subject'] }}",
        body="{{ ti.xcom_pull(task_ids='report')['body'] }}",
        required_param=approval_param,
        doc_md="Waits for a human decision (Required Actions in the UI, or the REST API) and records it, "
               "with the plan's hash, in approval.json. Reject or timeout: nothing executes.",
    )
    executed = task(task_id="execute", pool=POOL)(execute_task)()
    verified = task(task_id="verify", pool=POOL)(verify_task)()
    rolled = task(task_id="rollback", pool=POOL, trigger_rule=TriggerRule.ONE_FAILED)(rollback_task)()
    # A teardown: runs whatever happened upstream (and is skipped only when nothing ever touched the cluster).
    cleanup = teardown(task(task_id="cleanup_throttles", pool=POOL)(cleanup_task))()
    # The run's state follows this last task alone (Airflow judges a run by its leaves, and rollback would be the
    # leaf otherwise: a successful rollback must not make a run whose execution failed look successful). It
    # fails, with the cause, when any task failed, a failed throttle cleanup included.
    verdict = task(task_id="outcome", trigger_rule=TriggerRule.ALL_DONE)(outcome_task)()
    snap >> analyze >> planned >> check >> validated >> analyze_plan >> rep >> approve >> executed >> verified
    [executed, verified] >> rolled
    [verified, rolled] >> cleanup
    # Not a direct downstream of approve or check_changes: their skips must not swallow the verdict of a rejection.
    [verified, rolled, cleanup] >> verdict
    return {"snapshot": snap, "analyze": analyze, "plan": planned, "check_changes": check, "validate": validated,
            "analyze_plan": analyze_plan, "report": rep, "approve": approve, "execute": executed,
            "verify": verified, "rollback": rolled, "cleanup_throttles": cleanup, "outcome": verdict}
