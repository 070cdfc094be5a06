"""``rebalancer.runbook``, the functions the DAG tasks call, used without Airflow on file:// snapshots."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from rebalancer import runbook
from rebalancer.errors import GateFailure, InputError
from rebalancer.formats import write_cluster_json
from rebalancer.sim.scenarios import ScenarioParams, build_scenario


def test_runbook_does_not_import_airflow() -> None:
    code = "import sys, rebalancer.runbook; sys.exit(any(m.split('.')[0] == 'airflow' for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_run_dir_is_one_safe_directory_per_dag_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = "manual__2026-01-05T10:00:00.123+00:00"
    d = runbook.run_dir_for("kafka_add_brokers", run_id, tmp_path)
    assert d.parent == tmp_path / "kafka_add_brokers" and d.name.startswith("manual__2026-01-05T10_00_00.123_00_00-")
    assert runbook.run_dir_for("x", "../../etc", tmp_path).parent == tmp_path / "x"
    assert runbook.safe_name("..").startswith("_-") and runbook.safe_name("a/b").startswith("a_b-")
    assert runbook.safe_name("manual__plain") == "manual__plain"  # already file-safe: unchanged
    # One-to-one: ids that differ only in characters a file name cannot hold get different directories.
    assert runbook.safe_name("a:b") != runbook.safe_name("a_b") != runbook.safe_name("a/b")
    monkeypatch.setenv("REBALANCER_RUNS_DIR", str(tmp_path / "runs"))
    assert runbook.runs_root() == tmp_path / "runs"
    monkeypatch.delenv("REBALANCER_RUNS_DIR")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    assert runbook.runs_root() == tmp_path / "home" / "rebalancer-runs"


@pytest.fixture
def description(tmp_path: Path) -> str:
    path = tmp_path / "cluster.json"
    # The main job's cluster (480 partitions): 48 leave 9 replicas per broker, too few for the disk and count gates
    # to hold together (tests/test_load_gates.py covers clusters whose bands are out of reach).
    write_cluster_json(build_scenario("new-brokers", ScenarioParams()), path)
    return f"file://{path}"


def test_stages_return_small_summaries_and_the_approval_request(tmp_path: Path, description: str) -> None:
    run = tmp_path / "run"
    snap = runbook.snapshot(run, description)
    assert snap["brokers"] == 16 and snap["partitions"] == 480 and snap["run_dir"] == str(run)
    plan = runbook.plan(run, "add-brokers", brokers=[12, 13, 14, 15])
    assert plan["changes"] > 0 and plan["replica_moves"] >= 1 and len(plan["plan_hash"]) == 64
    assert runbook.has_changes(run)
    json.dumps(snap), json.dumps(plan)  # XCom-able
    val = runbook.validate(run)
    assert val["passed"] and "PASS" in val["table"] and Path(val["docs"]).exists()
    subject, body = runbook.approval_request(run, report_url="http://af/rebalancer/runs/d/r/report.html",
                                             docs_url="http://af/rebalancer/runs/d/r/docs/index.html",
                                             cluster="zk://zk1:2181/kafka")
    assert subject.startswith("Approve add-brokers on zk://zk1:2181/kafka:")
    assert f"{plan['replica_moves']} replica moves" in subject and re.search(r"\d+\.\d (GiB|MiB)", subject)
    assert f"| replica moves | {plan['replica_moves']} |" in body
    assert "| replicas | 100.0% |" in body  # before: the new brokers are empty
    assert "Validation gates (Great Expectations): **16/16 passed**" in body  # disk, network, bytes, failover too
    assert body.split("\n\n")[1].startswith("**Bytes to copy:")  # the request leads with bytes and their bound
    assert "[Open the approver's report](http://af/rebalancer/runs/d/r/report.html)" in body
    assert f"`{plan['plan_hash'][:12]}`" in body


def test_decision_record_is_bound_to_the_plan_hash(tmp_path: Path, description: str) -> None:
    run = tmp_path / "run"
    runbook.snapshot(run, description)
    plan = runbook.plan(run, "add-brokers", brokers=[12, 13, 14, 15])
    rec = runbook.record_decision(run, decision="rejected", by="alice", comment="not this week")
    assert rec["plan_hash"] == plan["plan_hash"] and rec["decision"] == "rejected" and rec["by"] == "alice"
    assert json.loads((run / "approval.json").read_text()) == rec
    assert not runbook.execution_started(run)
    with pytest.raises(InputError, match="needs the broker ids"):
        runbook.plan(run, "add-brokers", brokers=[])


def test_balanced_cluster_has_nothing_to_do(tmp_path: Path) -> None:
    path = tmp_path / "balanced.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=48, new_brokers=0)), path)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{path}")
    summary = runbook.plan(run, "leaders")
    assert summary["changes"] == 0 and not runbook.has_changes(run)


def test_spark_application_args() -> None:
    assert Path(runbook.spark_job()) == REPO / "spark" / "skew_analysis.py"
    assert runbook.spark_args("/r", "h.parquet") == ["--run-dir", "/r", "--history", "h.parquet"]


def test_plan_groups_reach_the_planner_and_keep_every_gate(tmp_path: Path) -> None:
    """The DAG params plan_groups / plan_spark_master reach ``plan --groups/--master`` through the runbook: the
    main job's add-brokers plan, on 1,600 partitions (two groups of 150 replicas per broker each, the split's
    minimum), split in two groups of topics still passes every gate."""
    path = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=1_600)), path)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{path}")
    runbook.plan(run, "add-brokers", brokers=[12, 13, 14, 15], groups=2)
    solver = json.loads((run / "plan.json").read_text())["solver"]
    assert solver["greedy"]["groups"] == 2 and "2 groups of topics planned apart" in solver["greedy"]["algorithm"]
    assert runbook.validate(run)["passed"]


def test_an_isolated_plan_is_the_in_process_plan_and_reports_errors_in_one_line(tmp_path: Path,
                                                                               description: str) -> None:
    """``isolated=True`` (the DAGs) plans in ``python -m rebalancer plan``: the same plan as in process, the
    options (bands included) passed through, and a bad input the same one-line error class."""
    run = tmp_path / "run"
    runbook.snapshot(run, description)
    # greedy: the program's result depends on the machine's speed (its 10 s cap), the greedy placement does not
    options = {"brokers": [12, 13, 14, 15], "bands": {"disk": 0.06}, "time_limit": 120.0, "strategy": "greedy"}
    here = runbook.plan(run, "add-brokers", **options)
    apart = runbook.plan(run, "add-brokers", isolated=True, **options)
    assert apart == here and here["changes"] > 0
    assert json.loads((run / "plan.json").read_text())["summary"]["load"]["dimensions"]["disk"]["band_pct"] == 6
    with pytest.raises(InputError, match=r"^.*\b99\b.*$") as err:
        runbook.plan(run, "add-brokers", brokers=[99], isolated=True)
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)


@pytest.mark.parametrize("args, error, line", [
    # argparse's own error (exit 2): an InputError naming the option, where the scraped stderr gave a RuntimeError
    (["plan", "RUN", "--mode", "sideways"], InputError, r"^rebalancer plan: argument --mode: invalid choice"),
    # a gate failing (exit 6), which the exit-code table did not know: GateFailure, not RuntimeError
    (["validate", "RUN", "--max-disk-deviation", "0.01"], GateFailure, r"disk"),
])
def test_a_cli_child_hands_its_error_back_as_a_record(tmp_path: Path, description: str, args: list[str],
                                                       error: type[Exception], line: str) -> None:
    """``runbook.run_cli`` (the isolated plan, the DAGs' stages in a process of their own) raises what the CLI
    recorded (``errors.ERROR_RECORD_ENV``): the error's class and its one line, whatever its exit code."""
    run = tmp_path / "run"
    runbook.snapshot(run, description)
    runbook.plan(run, "add-brokers", brokers=[12, 13, 14, 15])
    with pytest.raises(error, match=line) as err:
        runbook.run_cli([str(run) if a == "RUN" else a for a in args])
    assert type(err.value) is error and "\n" not in str(err.value)


def test_a_large_plan_runs_under_a_host_process_that_cannot_be_re_imported(tmp_path: Path) -> None:
    """Inside an Airflow task the main module is Airflow's, and a child process that re-imports it fails (tasks
    may not reach the metadata database): the leader waves' process pool (from 12,000 partitions) broke every DAG
    plan of a cluster that size ("BrokenProcessPool"). The DAGs plan isolated; this host stands for the task."""
    path = tmp_path / "cluster.json"
    # leaders mode solves the flow whole up to 20,000 partitions: above, in topic groups, four at a time in the pool
    write_cluster_json(build_scenario("wix", ScenarioParams(partitions=21_000, topics=100)), path)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{path}")
    host = tmp_path / "host.py"
    host.write_text("import sys\n"
                    "if __name__ != '__main__':\n"
                    "    raise SystemExit('this host cannot be imported again (like Airflow inside a task)')\n"
                    "from rebalancer import runbook\n"
                    "print(runbook.plan(sys.argv[1], 'leaders', isolated=sys.argv[2] == 'isolated')['changes'])\n")
    proc = subprocess.run([sys.executable, str(host), str(run), "isolated"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    solver = json.loads((run / "plan.json").read_text())["solver"]
    # fifteen topic groups of up to 1,500 partitions (seven topics of 210), solved four at a time in the pool
    assert int(proc.stdout.split()[-1]) > 0 and solver["leaders"]["groups"] == 15, solver["leaders"]


def test_the_plan_job_submitted_to_spark_is_the_plan_with_its_groups_as_tasks(tmp_path: Path) -> None:
    """``spark/plan_job.py``, what the DAGs submit when the placement is split in groups, through a real
    spark-submit on local[2]: the plan ``rebalancer plan`` makes in process with the same groups, change for change
    (each group a pure function), the groups run as tasks of the submitted application; a bad input ends with the
    CLI's exit status and its error record in plan_error.json, whose one line the DAG's task fails with."""
    from rebalancer.analyze import spark_env

    path = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams(partitions=1_600)), path)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{path}")
    new = [12, 13, 14, 15]
    assert runbook.plan_groups(run, "add-brokers") == 1  # 4,800 replicas: one pass (the DAG plans on the worker)
    assert runbook.plan_groups(run, "add-brokers", 2) == 2 and runbook.plan_groups(run, "leaders", 2) == 1
    runbook.plan(run, "add-brokers", brokers=new, groups=2)
    in_process = json.loads((run / "plan.json").read_text())
    submit = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
              "--conf", "spark.ui.enabled=false", runbook.plan_job()]
    proc = subprocess.run([*submit, *runbook.plan_args(run, "add-brokers", brokers=new, groups=2)],
                          env=spark_env("local[2]"), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    on_spark = json.loads((run / "plan.json").read_text())
    assert "2 groups of topics planned apart as Spark tasks (local[2])" in on_spark["solver"]["greedy"]["algorithm"]
    assert on_spark["changes"] == in_process["changes"] and on_spark["changes"]
    assert runbook.plan_summary(run)["changes"] == len(on_spark["changes"])
    assert runbook.plan_job_error(run) is None

    proc = subprocess.run([*submit, *runbook.plan_args(run, "add-brokers", brokers=[99], groups=2)],
                          env=spark_env("local[2]"), capture_output=True, text=True, timeout=900)
    error = runbook.plan_job_error(run)
    assert proc.returncode == InputError.exit_code and error is not None and "99" in error, proc.stderr[-2000:]
    assert "\n" not in error and not error.startswith("rebalancer:")
    runbook.plan_job_error(run, clear=True)
    assert runbook.plan_job_error(run) is None
