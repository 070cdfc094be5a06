"""End to end: the runbook DAGs in a real Airflow 3.3 (SQLite, LocalExecutor; api-server, scheduler and
dag-processor as subprocesses) against simulated clusters on a real ZooKeeper, driven like an operator would:
trigger with conf and answer the approval through the REST API, or log in and click in headless Chromium.

Each test has its own simulated cluster (its own chroot and Airflow connection, chosen by the run's
``zookeeper_conn_id``) and checks the cluster itself (read from ZooKeeper), the run directory and the task states.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from airflow_support import (
    APPROVER,
    ARTIFACTS,
    OTHER_USER,
    Cluster,
    Stack,
    airflow_local,
    leader_skewed_description,
    planned_assignment,
    signed_in_browser,
    start_cluster,
    wait_for,
)

from rebalancer import kafka_zk as kz

# A deadline for a hung test, not a speed target: a loaded machine took 15 minutes for one run (airflow_support).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
DAG = "kafka_add_brokers"
NEW = [12, 13, 14, 15]


@pytest.fixture(scope="module")
def stack(airflow_stack: Any) -> Stack:
    return airflow_stack.result(timeout=600)  # the worker's shared stack (tests/conftest.py)


@pytest.fixture
def cluster(stack: Stack, zk_server: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    # The main job's shape (480 partitions, 90 replicas per broker). On 48 (9 per broker) no placement holds every
    # disk band at once, so validate rightly fails the disk gate and no run would reach its approval.
    params = {"partitions": 480, **getattr(request, "param", {})}
    c = start_cluster(stack, zk_server.hosts, tmp_path / "sim", **params)
    yield c
    c.stop()


def conf(cluster: Cluster, *, backend: str = "zookeeper", **extra: Any) -> dict[str, Any]:
    """The trigger conf: the cluster's own connection (ZooKeeper, or the Admin API of its simulated brokers)."""
    out = {"new_brokers": NEW, "backend": backend, "zookeeper_conn_id": cluster.conn_id, "throttle": "200MB/s",
           "poll_s": 0.2, **extra}
    if backend == "kafka":
        assert cluster.kafka_conn_id, "the simulated cluster publishes no Kafka listeners"
        out["kafka_conn_id"] = cluster.kafka_conn_id
    return out


def explain(stack: Stack, dag_id: str, run_id: str) -> str:
    """Task states and the end of the failed tasks' logs, for assertion messages."""
    states = stack.admin.task_states(dag_id, run_id)
    out = [json.dumps(states)]
    for task_id, state in states.items():
        if state == "failed":
            out.append(f"--- {task_id} log ---\n" + stack.admin.log(dag_id, run_id, task_id)[-3000:])
    out.append("--- scheduler ---\n" + stack.log_tail("scheduler", 15))
    return "\n".join(out)


def wait_awaiting_approval(stack: Stack, dag_id: str, run_id: str) -> None:
    try:
        stack.wait_parked(dag_id, run_id)
    except airflow_local.AirflowError as exc:
        raise AssertionError(f"{exc}\n{explain(stack, dag_id, run_id)}") from None


def finished(stack: Stack, dag_id: str, run_id: str, timeout: float = 900) -> str:
    return stack.admin.wait_state(dag_id, run_id, states=["success", "failed"], timeout=timeout)


def test_add_brokers_triggered_and_approved_through_rest(stack: Stack, cluster: Cluster, zk_server: Any,
                                                         tmp_path: Path) -> None:
    """Meanwhile, on another cluster, a leader rebalance triggered with require_approval=false runs unattended."""
    leaders = start_cluster(stack, zk_server.hosts, tmp_path / "sim-leaders",
                            scenario=leader_skewed_description(tmp_path / "leader-skew.json"))
    try:
        auto = stack.admin.trigger("kafka_leader_rebalance", {"zookeeper_conn_id": leaders.conn_id,
                                                              "require_approval": False, "poll_s": 0.2})
        _approved_through_rest(stack, cluster)
        lead = "kafka_leader_rebalance"
        assert finished(stack, lead, auto) == "success", explain(stack, lead, auto)
        run = stack.run_dir(lead, auto)
        record = json.loads((run / "approval.json").read_text())
        assert record["decision"] == "approved" and record["by"] == "(automatic)"
        assert record["plan_hash"] == json.loads((run / "plan.json").read_text())["content_hash"]
        planned, now = planned_assignment(run), leaders.assignment()
        assert planned and all(now[tp] == r for tp, r in planned.items())
        assert json.loads((run / "verification.json").read_text())["passed"] is True  # preferred leaders lead
        assert leaders.throttles() == {}
    finally:
        leaders.stop()


def _approved_through_rest(stack: Stack, cluster: Cluster) -> None:
    before = cluster.assignment()
    run_id = stack.admin.trigger(DAG, conf(cluster, approvers=[APPROVER]))
    wait_awaiting_approval(stack, DAG, run_id)
    run = stack.run_dir(DAG, run_id)

    # Nothing has touched the cluster; the approver sees the plan's size, balance, gates and the report link.
    assert cluster.assignment() == before and not (run / "approval.json").exists()
    plan = json.loads((run / "plan.json").read_text())
    hitl = stack.admin.hitl(DAG, run_id)
    moves = plan["summary"]["replica_moves"]
    assert hitl["subject"].startswith(f"Approve add-brokers on zk://{cluster.zk_url[5:]}: {moves} replica moves")
    assert hitl["assigned_users"] == [{"id": APPROVER, "name": APPROVER}] and hitl["defaults"] == ["Reject"]
    report_url = f"{stack.base_url}/rebalancer/runs/{DAG}/{quote(run_id, safe='')}/report.html"
    assert f"[Open the approver's report]({report_url})" in hitl["body"]
    # Every gate, the load gates included (the snapshot knows the partitions' sizes), passed.
    gates = json.loads((run / "validation" / "result.json").read_text())["gates"]
    assert {"disk-balance", "network-balance", "bytes-vs-bound"} <= {g["name"] for g in gates}
    assert f"**{len(gates)}/{len(gates)} passed**" in hitl["body"] and f"`{plan['content_hash'][:12]}`" in hitl["body"]
    # The report view serves the report and the Data Docs to a logged-in user, nothing to anyone else, and
    # nothing outside the run directory.
    approver = stack.client(APPROVER)
    page = approver.http.get(report_url.replace(stack.base_url, approver.base_url))
    assert page.status_code == 200 and "Kafka rebalance" in page.text and f"{moves}" in page.text
    docs = approver.http.get(f"{approver.base_url}/rebalancer/runs/{DAG}/{quote(run_id, safe='')}/docs/index.html")
    assert docs.status_code == 200 and "<html" in docs.text.lower()
    import httpx

    assert httpx.get(report_url.replace(stack.base_url, approver.base_url)).status_code == 401
    escape = approver.http.get(f"{approver.base_url}/rebalancer/runs/{DAG}/{quote(run_id, safe='')}/files/"
                               "..%2F..%2F..%2Fairflow.cfg")
    assert escape.status_code == 404

    # Someone who is not an assigned approver cannot answer.
    with pytest.raises(airflow_local.AirflowError, match="403"):
        stack.client(OTHER_USER).answer(DAG, run_id, "Approve")
    answer = approver.answer(DAG, run_id, "Approve")
    assert answer["responded_by"]["name"] == APPROVER

    state = finished(stack, DAG, run_id)
    assert state == "success", explain(stack, DAG, run_id)
    states = stack.admin.task_states(DAG, run_id)
    assert states == {**{t: "success" for t in states}, "rollback": "skipped"}, states

    # The approval record names the approver and exactly the executed plan.
    approval = json.loads((run / "approval.json").read_text())
    assert approval["decision"] == "approved" and approval["by"] == APPROVER
    assert approval["plan_hash"] == plan["content_hash"]
    # The cluster has the planned assignment (and nothing else moved), verification passed, no throttle left.
    after = cluster.assignment()
    planned = planned_assignment(run)
    assert planned and all(after[tp] == replicas for tp, replicas in planned.items())
    assert all(after[tp] == replicas for tp, replicas in before.items() if tp not in planned)
    assert sum(1 for r in after.values() for b in r if b in NEW) == moves
    assert json.loads((run / "verification.json").read_text())["passed"] is True
    assert cluster.throttles() == {}


def test_reject_and_timeout_execute_nothing(stack: Stack, cluster: Cluster, zk_server: Any, tmp_path: Path) -> None:
    """A person rejects one run; nobody answers another (a leader rebalance) and its timeout rejects it. The first
    goes through the Admin API (backend kafka): the snapshot reads the simulated brokers' Kafka listeners."""
    leaders = start_cluster(stack, zk_server.hosts, tmp_path / "sim-leaders",
                            scenario=leader_skewed_description(tmp_path / "leader-skew.json"))
    try:
        before, leaders_before = cluster.assignment(), leaders.assignment()
        # 36 s to answer: then the scheduler applies the default option (Reject). Not shorter: Airflow 3.3 can fail a
        # task answered (here: timed out) before it processed the parking worker's exit (see
        # airflow_local.wait_parked), which a loaded 2-core machine can delay by seconds; the other run takes longer
        # than this to reach its approval, so the wait costs nothing.
        unanswered = stack.admin.trigger("kafka_leader_rebalance", {"zookeeper_conn_id": leaders.conn_id,
                                                                    "approval_timeout_hours": 0.01})
        run_id = stack.admin.trigger(DAG, conf(cluster, backend="kafka"))
        wait_awaiting_approval(stack, DAG, run_id)
        stack.client(OTHER_USER).answer(DAG, run_id, "Reject")
        assert finished(stack, DAG, run_id) == "success", explain(stack, DAG, run_id)
        states = stack.admin.task_states(DAG, run_id)
        assert states["approve"] == "success"
        for t in ("execute", "verify", "rollback", "cleanup_throttles"):
            assert states[t] == "skipped", states
        assert states["outcome"] == "success"
        assert f"plan rejected by {OTHER_USER}" in stack.admin.log(DAG, run_id, "outcome")
        run = stack.run_dir(DAG, run_id)
        approval = json.loads((run / "approval.json").read_text())
        assert approval["decision"] == "rejected" and approval["by"] == OTHER_USER
        assert approval["plan_hash"] == json.loads((run / "plan.json").read_text())["content_hash"]
        assert not (run / "execution").exists()
        assert cluster.assignment() == before and cluster.throttles() == {}
        from rebalancer.snapshot import load_snapshot

        assert load_snapshot(run).meta["source"].startswith("kafka://127.0.0.1:")

        # The unanswered leader rebalance: rejected by its timeout, recorded as such, nothing changed.
        lead = "kafka_leader_rebalance"
        assert finished(stack, lead, unanswered) == "success", explain(stack, lead, unanswered)
        states = stack.admin.task_states(lead, unanswered)
        assert states["approve"] == "success" and states["execute"] == "skipped", states
        hitl = stack.admin.hitl(lead, unanswered)
        assert hitl["chosen_options"] == ["Reject"] and hitl["responded_by_user"] is None
        record = json.loads((stack.run_dir(lead, unanswered) / "approval.json").read_text())
        assert record["decision"] == "rejected" and record["by"] == "(timeout)" and "timeout" in record["comment"]
        assert json.loads((stack.run_dir(lead, unanswered) / "plan.json").read_text())["changes"]
        assert leaders.assignment() == leaders_before
    finally:
        leaders.stop()


@pytest.mark.parametrize("cluster", [{"acceleration": 20.0}], indirect=True)
def test_broker_killed_during_execution_rolls_back(stack: Stack, cluster: Cluster) -> None:
    original = cluster.assignment()
    run_id = stack.admin.trigger(DAG, conf(cluster, throttle="20MB/s", max_moves_per_broker=2))
    wait_awaiting_approval(stack, DAG, run_id)
    stack.admin.answer(DAG, run_id, "Approve")

    # Kill a destination broker of the first batch while it copies.
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zk_url[len("zk://"):])
    zk.start(timeout=10)
    def first_batch() -> bytes | None:
        if zk.exists(kz.REASSIGN):
            return bytes(zk.get(kz.REASSIGN)[0])
        state = stack.admin.task_states(DAG, run_id)["execute"]
        assert state in (None, "scheduled", "queued", "running"), f"execute {state}: {explain(stack, DAG, run_id)}"
        return None

    try:
        data = wait_for(first_batch, 600, "the first batch", poll=0.05)
        moving = kz.parse_reassignment(data)
        victim = sorted({b for replicas in moving.values() for b in replicas if b in NEW})[0]
    finally:
        zk.stop()
        zk.close()
    cluster.kill(victim)
    stack.admin.wait_state(DAG, run_id, task_id="execute", states=["failed"], timeout=300, fail_states=["success"])
    # The rollback task follows at once, while the broker is still down (no operator brings one back that fast):
    # ZooKeeper mode cannot cancel the move in flight that needs it, so the rollback refuses, nothing submitted. (The
    # broker stays down until then: restarted earlier, it raced the rollback task, which under load sometimes won.)
    stack.admin.wait_state(DAG, run_id, task_id="rollback", states=["failed"], timeout=300, fail_states=["success"])
    refused = stack.admin.log(DAG, run_id, "rollback")
    assert f"needs broker {victim}, which is down" in refused and "nothing submitted" in refused, refused[-2000:]
    assert finished(stack, DAG, run_id) == "failed"
    assert "the ROLLBACK FAILED" in stack.admin.log(DAG, run_id, "outcome")
    assert not (stack.run_dir(DAG, run_id) / "execution" / "rollback_state.json").exists()
    # The operator brings the broker back and rolls back again: Clear on the rollback task and what follows it.
    cluster.restart(victim)
    assert stack.admin.clear(DAG, run_id, ["rollback"]) == ["cleanup_throttles", "outcome", "rollback"]
    stack.admin.wait_state(DAG, run_id, task_id="rollback", states=["success"], timeout=600, fail_states=["failed"])
    assert finished(stack, DAG, run_id) == "failed"
    states = stack.admin.task_states(DAG, run_id)
    assert states["execute"] == "failed" and states["verify"] == "upstream_failed", states
    assert states["rollback"] == "success" and states["cleanup_throttles"] == "success", explain(stack, DAG, run_id)

    run = stack.run_dir(DAG, run_id)
    reason = json.loads((run / "execution" / "state.json").read_text())["failed"]
    assert f"destination broker {victim}" in reason and "is down" in reason
    assert reason in stack.admin.log(DAG, run_id, "execute")  # the task failed with the one-line reason
    # The run is failed by its verdict, which names the cause and the rollback's result.
    assert states["outcome"] == "failed"
    assert (f"execution failed: {reason}; rolled back: original assignment verified"
            in stack.admin.log(DAG, run_id, "outcome", try_number=2))
    assert json.loads((run / "verification_rollback.json").read_text())["passed"] is True
    assert cluster.assignment() == original
    assert cluster.throttles() == {}


@pytest.mark.parametrize("cluster", [{"new_brokers": 0}], indirect=True)
def test_nothing_to_change_ends_early_without_asking(stack: Stack, cluster: Cluster) -> None:
    run_id = stack.admin.trigger("kafka_leader_rebalance", {"zookeeper_conn_id": cluster.conn_id})
    assert finished(stack, "kafka_leader_rebalance", run_id) == "success"
    states = stack.admin.task_states("kafka_leader_rebalance", run_id)
    assert states["plan"] == "success" and states["check_changes"] == "success"
    assert {states[t] for t in ("validate", "report", "approve", "execute", "cleanup_throttles", "outcome")} == {"skipped"}
    run = stack.run_dir("kafka_leader_rebalance", run_id)
    assert json.loads((run / "plan.json").read_text())["changes"] == []
    assert not (run / "approval.json").exists()


@pytest.mark.parametrize("cluster", [{"scenario": "failover-skew", "partitions": 45}], indirect=True)
def test_the_weekly_run_orders_a_balanced_clusters_followers_then_ends_early(stack: Stack, cluster: Cluster) -> None:
    """Issue 46: on a cluster nothing needs to move in whose failures all fall on one survivor, the weekly run plans
    a follower order alone (no bytes), asks for it by name, and executes it once approved; the next week's run on the
    cluster it leaves has nothing to change and ends at check_changes without asking."""
    dag = "kafka_rebalance_weekly"
    weekly = {"zookeeper_conn_id": cluster.conn_id, "approvers": [APPROVER], "throttle": "200MB/s", "poll_s": 0.2}
    before = cluster.assignment()
    # Scheduled, so paused in the tests' stack, where a run triggered by hand would wait; unpaused, the scheduler
    # also starts the last week's run on zookeeper_default, which this stack does not have (it fails its snapshot).
    stack.admin.unpause(dag)
    try:
        _weekly_runs(stack, cluster, dag, weekly, before)
    finally:
        stack.admin.set_paused(dag, True)


def _weekly_runs(stack: Stack, cluster: Cluster, dag: str, weekly: dict[str, Any],
                 before: dict[tuple[str, int], tuple[int, ...]]) -> None:
    run_id = stack.admin.trigger(dag, weekly)
    wait_awaiting_approval(stack, dag, run_id)
    run = stack.run_dir(dag, run_id)
    plan = json.loads((run / "plan.json").read_text())
    assert plan["summary"]["replica_moves"] == 0 and plan["summary"]["bytes_moved"] == 0
    assert plan["summary"]["leader_changes"] == 0 and plan["changes"]
    assert plan["solver"]["failover"]["why"] == "nothing else to change"
    worst = {k: plan["summary"]["failover"][k]["worst_broker"]["leaders_dev_pct"] for k in ("before", "after")}
    assert worst["after"] < worst["before"], worst
    assert stack.admin.hitl(dag, run_id)["subject"].endswith(": followers reordered for failover, no data movement")
    assert cluster.assignment() == before
    stack.client(APPROVER).answer(dag, run_id, "Approve")
    assert finished(stack, dag, run_id) == "success", explain(stack, dag, run_id)
    planned, now = planned_assignment(run), cluster.assignment()
    assert planned and all(now[tp] == r for tp, r in planned.items())
    assert all(sorted(now[tp]) == sorted(r) and now[tp][0] == r[0] for tp, r in before.items())
    assert cluster.throttles() == {}

    again = stack.admin.trigger(dag, weekly)
    assert finished(stack, dag, again) == "success", explain(stack, dag, again)
    states = stack.admin.task_states(dag, again)
    assert states["check_changes"] == "success" and states["approve"] == "skipped", states
    assert json.loads((stack.run_dir(dag, again) / "plan.json").read_text())["changes"] == []


@pytest.mark.parametrize("cluster", [{"partitions": 1_600}], indirect=True)
def test_a_plan_split_in_groups_is_submitted_to_spark(stack: Stack, cluster: Cluster) -> None:
    """plan_groups=2: the plan task submits spark/plan_job.py through spark_default (like the analysis), the groups
    run as tasks of that application, and the run reaches its approval with every gate passed; rejected here."""
    dag_id = "kafka_add_brokers"
    run_id = stack.admin.trigger(dag_id, conf(cluster, plan_groups=2))
    wait_awaiting_approval(stack, dag_id, run_id)
    run = stack.run_dir(dag_id, run_id)
    solver = json.loads((run / "plan.json").read_text())["solver"]
    assert "2 groups of topics planned apart as Spark tasks (local[*])" in solver["greedy"]["algorithm"], solver
    assert "the plan stage goes to Spark" in stack.admin.log(dag_id, run_id, "plan")
    assert json.loads((run / "validation" / "result.json").read_text())["passed"]
    stack.client(APPROVER).answer(dag_id, run_id, "Reject")
    assert finished(stack, dag_id, run_id) == "success", explain(stack, dag_id, run_id)
    assert stack.admin.task_states(dag_id, run_id)["execute"] == "skipped"


@pytest.mark.browser
def test_approver_logs_in_opens_report_and_approves_in_chromium(stack: Stack, cluster: Cluster, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    # The full path through the Admin API (backend kafka): snapshot, execution, verification, cleanup.
    before = cluster.assignment()
    run_id = stack.admin.trigger(DAG, conf(cluster, backend="kafka", approvers=[APPROVER]))
    wait_awaiting_approval(stack, DAG, run_id)
    shots = ARTIFACTS / "airflow"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    plan = json.loads((stack.run_dir(DAG, run_id) / "plan.json").read_text())
    driver, wait = signed_in_browser(stack, tmp_path)  # as the approver
    try:
        # The run's Required Actions: the approval request with the plan and the report link.
        driver.get(f"{stack.base_url}/dags/{DAG}/runs/{quote(run_id, safe='')}/required_actions")
        link = wait.until(ec.element_to_be_clickable((By.PARTIAL_LINK_TEXT, "Open the approver's report")))
        approve = wait.until(ec.presence_of_element_located((By.XPATH, "//button[normalize-space()='Approve']")))
        body = driver.find_element(By.TAG_NAME, "body").text
        gates = json.loads((stack.run_dir(DAG, run_id) / "validation" / "result.json").read_text())["gates"]
        assert f"{plan['summary']['replica_moves']} replica moves" in body
        assert f"{len(gates)}/{len(gates)} passed" in body and {"disk-balance", "bytes-vs-bound"} <= {g["name"] for g in gates}
        # A load plan: the request leads with the bytes against their bound and the worst broker per dimension.
        load = plan["summary"]["load"]
        assert plan["params"]["balance"] == "load" and load["bytes_to_bound"] <= 1.10, load
        lead = wait.until(ec.presence_of_element_located((By.XPATH, "//*[starts-with(normalize-space(), 'Bytes to copy:')]")))
        assert f"ratio {load['bytes_to_bound']:.3f}" in body and "Worst broker after the plan: disk: broker" in body
        assert "inside the 5% band" in body and "outside" not in body.split("Worst broker after the plan:")[1].split(".")[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", lead)
        time.sleep(0.5)
        driver.save_screenshot(str(shots / "approval_request_load.png"))
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", approve)
        time.sleep(0.5)
        driver.save_screenshot(str(shots / "approval_page.png"))
        # The report opens (in a new tab) from the approval request.
        main = driver.current_window_handle
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        wait.until(lambda d: len(d.window_handles) > 1)
        driver.switch_to.window(next(h for h in driver.window_handles if h != main))
        wait.until(lambda d: "report.html" in d.current_url and d.find_elements(By.TAG_NAME, "h1"))
        assert "add-brokers plan" in driver.find_element(By.TAG_NAME, "h1").text
        driver.set_window_size(1400, 3000)
        driver.save_screenshot(str(shots / "report.png"))
        driver.close()
        driver.switch_to.window(main)
        driver.set_window_size(1400, 1300)
        # Approve.
        approve = wait.until(ec.element_to_be_clickable((By.XPATH, "//button[normalize-space()='Approve']")))
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", approve)
        approve.click()
        wait_for(lambda: stack.admin.hitl(DAG, run_id).get("response_received"), 30, "the answer to be stored")
        assert finished(stack, DAG, run_id) == "success", explain(stack, DAG, run_id)
        driver.get(f"{stack.base_url}/dags/{DAG}/runs/{quote(run_id, safe='')}")
        wait.until(lambda d: "Success" in d.find_element(By.TAG_NAME, "body").text)
        time.sleep(1)
        driver.save_screenshot(str(shots / "run_after_approval.png"))
        # The menu entry: every run directory, this one verified, inside the Airflow UI.
        driver.find_element(By.XPATH, "//button[normalize-space()='Browse']").click()
        wait.until(ec.element_to_be_clickable((By.XPATH, "//*[normalize-space()='Kafka rebalance reports']"))).click()
        driver.switch_to.frame(wait.until(ec.presence_of_element_located((By.TAG_NAME, "iframe"))))
        row = wait.until(ec.presence_of_element_located(
            (By.XPATH, f"//tr[td[2][normalize-space()='{stack.run_dir(DAG, run_id).name}']]")))
        assert "verified" in row.text, row.text
        driver.switch_to.default_content()
        driver.save_screenshot(str(shots / "reports_menu.png"))
    finally:
        driver.quit()
    run = stack.run_dir(DAG, run_id)
    approval = json.loads((run / "approval.json").read_text())
    assert approval["decision"] == "approved" and approval["by"] == APPROVER
    after, planned = cluster.assignment(), planned_assignment(run)
    assert planned and all(after[tp] == r for tp, r in planned.items())
    assert all(after[tp] == r for tp, r in before.items() if tp not in planned)
    assert json.loads((run / "verification.json").read_text())["passed"] is True
    assert cluster.throttles() == {}
