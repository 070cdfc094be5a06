"""The run directory: one type owns the name of every file a stage writes there, and every module asks it.

A run directory holds one rebalance from snapshot to rollback, each stage reading what the one before wrote::

    RUN_DIR/
      snapshot.json  replicas.parquet  brokers.parquet     snapshot (rebalancer.snapshot)
      analysis/summary.json  analysis/partition_load.parquet  the Spark stage (spark/skew_analysis.py)
      plan.json  reassignment.json  rollback.json         plan (rebalancer.planfile.result)
      validation/result.json  validation/docs/            the gates and their Data Docs (rebalancer.validate)
      report.html  report/                                the approver's report (rebalancer.report)
      approval.json                                       the decision (rebalancer.execute.runner.approve)
      execution/state.json  rollback_state.json  throttles.json  lock.json
                                                          execution, rollback, the throttle ledger, the local lock
      verification.json  verification_rollback.json       verify after execution, after rollback

The names are also Kafka-facing contracts (``reassignment.json`` is what ``kafka-reassign-partitions`` takes) and
the Airflow report view lists them: change one here and everywhere follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunDir", "SNAPSHOT_FILE", "REPLICAS_FILE", "BROKERS_FILE", "PLAN_FILE", "REASSIGNMENT_FILE",
           "ROLLBACK_FILE", "REPORT_FILE", "APPROVAL_FILE", "RESULT_FILE", "STATE_FILE", "ROLLBACK_STATE_FILE",
           "LEDGER_FILE", "LOCK_FILE", "ANALYSIS_DIR", "VALIDATION_DIR", "EXECUTION_DIR", "VERIFICATION_FILE",
           "VERIFICATION_ROLLBACK_FILE", "SUMMARY_FILE", "PARTITION_LOAD_FILE", "DOCS_DIR", "CHARTS_DIR",
           "PLAN_ERROR_FILE"]

SNAPSHOT_FILE = "snapshot.json"
REPLICAS_FILE = "replicas.parquet"
BROKERS_FILE = "brokers.parquet"
ANALYSIS_DIR = "analysis"
SUMMARY_FILE = "summary.json"               # in analysis/
PARTITION_LOAD_FILE = "partition_load.parquet"  # in analysis/
PLAN_FILE = "plan.json"
PLAN_ERROR_FILE = "plan_error.json"         # spark/plan_job.py's error record when its plan failed (``errors``)
REASSIGNMENT_FILE = "reassignment.json"
ROLLBACK_FILE = "rollback.json"
VALIDATION_DIR = "validation"
RESULT_FILE = "result.json"                 # in validation/
DOCS_DIR = "docs"                           # in validation/
REPORT_FILE = "report.html"
CHARTS_DIR = "report"                        # the report's PNGs
APPROVAL_FILE = "approval.json"
EXECUTION_DIR = "execution"
STATE_FILE = "state.json"                   # in execution/
ROLLBACK_STATE_FILE = "rollback_state.json"  # in execution/
LEDGER_FILE = "throttles.json"              # in execution/
LOCK_FILE = "lock.json"                     # in execution/
VERIFICATION_FILE = "verification.json"
VERIFICATION_ROLLBACK_FILE = "verification_rollback.json"


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory (nothing is created or read here)."""

    path: Path

    @classmethod
    def of(cls, run_dir: str | Path | RunDir) -> RunDir:
        return run_dir if isinstance(run_dir, RunDir) else cls(Path(run_dir))

    # -- snapshot and analysis -------------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Path:
        return self.path / SNAPSHOT_FILE

    @property
    def replicas(self) -> Path:
        return self.path / REPLICAS_FILE

    @property
    def brokers(self) -> Path:
        return self.path / BROKERS_FILE

    @property
    def analysis(self) -> Path:
        return self.path / ANALYSIS_DIR

    @property
    def analysis_summary(self) -> Path:
        return self.analysis / SUMMARY_FILE

    @property
    def partition_load(self) -> Path:
        return self.analysis / PARTITION_LOAD_FILE

    # -- plan, gates, report, decision -----------------------------------------------------------------------------
    @property
    def plan(self) -> Path:
        return self.path / PLAN_FILE

    @property
    def reassignment(self) -> Path:
        return self.path / REASSIGNMENT_FILE

    @property
    def rollback(self) -> Path:
        return self.path / ROLLBACK_FILE

    @property
    def validation(self) -> Path:
        return self.path / VALIDATION_DIR

    @property
    def validation_result(self) -> Path:
        return self.validation / RESULT_FILE

    @property
    def data_docs(self) -> Path:
        return self.validation / DOCS_DIR

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def charts(self) -> Path:
        return self.path / CHARTS_DIR

    @property
    def approval(self) -> Path:
        return self.path / APPROVAL_FILE

    # -- execution -------------------------------------------------------------------------------------------------
    @property
    def execution(self) -> Path:
        return self.path / EXECUTION_DIR

    @property
    def state(self) -> Path:
        return self.execution / STATE_FILE

    @property
    def rollback_state(self) -> Path:
        return self.execution / ROLLBACK_STATE_FILE

    @property
    def ledger(self) -> Path:
        return self.execution / LEDGER_FILE

    @property
    def lock(self) -> Path:
        return self.execution / LOCK_FILE

    def verification(self, expect: str = "planned") -> Path:
        """What verify found: after the execution (``planned``) or after a rollback (``original``)."""
        return self.path / (VERIFICATION_FILE if expect == "planned" else VERIFICATION_ROLLBACK_FILE)
