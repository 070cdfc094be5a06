"""KRaft end to end: the whole runbook against a real Apache Kafka 4.x cluster (KRaft), entirely through kafka://.

One cluster for the module (Kafka 4.3.1 from the Maven Central jars, ``rebalancer.localkafka``): the ``new-brokers``
scenario with 3 old brokers (0-2, racks a-c, the KRaft controllers), 2 empty new brokers (3, 4), 2 topics of
12 partitions at RF 2 and 48 MiB of data. ``auto.leader.rebalance.enable=false``: leadership then moves only when
someone elects (otherwise the brokers might do the runbook's work for it and hide a missing ElectLeaders).

1. Leaders, through the CLI as an operator runs it: a topic whose preferred leaders all sit on broker 3 (created with
   explicit assignments) -> ``snapshot`` -> ``plan --mode leaders`` -> ``validate`` -> ``approve`` -> ``execute``
   (replica reorder plus ElectLeaders) -> ``verify``; the leaders read back independently are the plan's. A control
   reassignment shows that a reorder alone leaves the leader where it was on this cluster: the election is the
   executor's. The topic is deleted afterwards (brokers 3 and 4 are empty again).
2. Add brokers, through the CLI: ``snapshot`` -> ``plan --mode add-brokers`` -> ``validate`` -> ``approve`` ->
   ``execute`` (throttled: the throttles are seen on the cluster while it copies) -> ``verify`` -> ``rollback``:
   the original assignment, replica order included, and no throttle left.
3. One Airflow 3.3 run of ``kafka_add_brokers`` with ``backend: kafka`` (connection ``kafka_default`` made by
   ``scripts/airflow_local.py``'s ``--kafka-dir`` code from the cluster's localkafka.json), approved through the
   REST API; the cluster ends with plan.json's targets, verified, without throttles.

The cluster is read independently of the library with kafka-python's KafkaAdminClient (DescribeTopics,
DescribeConfigs). Wall times of the cluster start-up and of every stage go to ``tests/artifacts/kraft_e2e.json`` (and
are printed). The Airflow stack starts in a thread while the cluster starts and the CLI tests run.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import waiting
from conftest import REPO

wait_for = partial(waiting.wait_for, poll=0.3)  # what these tests poll is slow to ask (a CLI, a cluster)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

VERSION = "4.x"
SCENARIO = {"scenario": "new-brokers", "brokers": 3, "racks": 3, "new_brokers": 2, "partitions": 12, "topics": 2,
            "rf": 2, "data_mib": 48}
BROKER_CONFIG = {"auto.leader.rebalance.enable": "false", "broker.session.timeout.ms": "6000"}
OLD, NEW = [0, 1, 2], [3, 4]
SKEW_TOPIC, CONTROL_TOPIC = "leader-skew", "leader-control"
THROTTLE = "20MB/s"
BROKER_THROTTLE_KEYS = {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                        "replica.alter.log.dirs.io.max.bytes.per.second"}
TOPIC_THROTTLE_KEYS = {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
ARTIFACT = REPO / "tests" / "artifacts" / "kraft_e2e.json"

Assignment = dict[tuple[str, int], tuple[int, ...]]
TIMINGS: dict[str, Any] = {}


def record(section: str, key: str, seconds: float) -> None:
    TIMINGS.setdefault(section, {})[key] = round(seconds, 2)


# -- the cluster, read independently (kafka-python) ----------------------------------------------------------------
class Kafka:
    """The running cluster: its kafka:// URL and independent reads through kafka-python's KafkaAdminClient."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state
        self.url: str = state["kafka_url"]
        self.directory = Path(state["directory"])

    def admin(self) -> Any:
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.url.removeprefix("kafka://").split(","),
                                client_id="kraft-e2e-test", request_timeout_ms=15000)

    def partitions(self, topics: list[str] | None = None) -> dict[tuple[str, int], dict[str, Any]]:
        """Every partition of the user topics: ``{"replicas", "leader", "isr"}`` (replicas in their order). Listing
        every topic, one that the broker answering the listing still has and the one describing it no longer has
        (deleted a moment ago: KRaft metadata reaches brokers one by one) is gone, not an error."""
        admin = self.admin()
        try:
            names = topics or [t for t in admin.list_topics() if not t.startswith("__")]
            out = {}
            for t in admin.describe_topics(names):
                if topics is None and t["error_code"] == 3:  # UNKNOWN_TOPIC_OR_PARTITION: deleted meanwhile
                    continue
                assert t["error_code"] == 0, t
                for p in t["partitions"]:
                    out[(t["name"], p["partition_index"])] = {"replicas": tuple(p["replica_nodes"]),
                                                              "leader": p["leader_id"], "isr": set(p["isr_nodes"])}
            return out
        finally:
            admin.close()

    def assignment(self, topics: list[str] | None = None) -> Assignment:
        return {tp: p["replicas"] for tp, p in self.partitions(topics).items()}

    def leaders(self, topics: list[str] | None = None) -> dict[tuple[str, int], int]:
        return {tp: p["leader"] for tp, p in self.partitions(topics).items()}

    def throttles(self) -> dict[str, dict[str, str]]:
        """Every throttle key set (dynamically) on a broker or a topic: ``{"brokers/0": {key: value}, ...}``."""
        from kafka.admin import ConfigResource, ConfigResourceType

        admin = self.admin()
        try:
            brokers = [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]]
            topics = list(admin.list_topics())
            res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, b) for b in brokers]
                                         + [ConfigResource(ConfigResourceType.TOPIC, t) for t in topics],
                                         config_filter="modified")
        finally:
            admin.close()
        out: dict[str, dict[str, str]] = {}
        for rtype, by_name in res.items():
            keys = BROKER_THROTTLE_KEYS if rtype == "broker" else TOPIC_THROTTLE_KEYS
            for name, entries in by_name.items():
                found = {k: v.get("value") for k, v in entries.items() if k in keys and v.get("value") is not None}
                if found:
                    out[f"{'brokers' if rtype == 'broker' else 'topics'}/{name}"] = found
        return out

    def create_topic(self, name: str, assignment: dict[int, list[int]]) -> None:
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, replica_assignments=assignment)])
        finally:
            admin.close()
        wait_for(lambda: (self.partitions([name]) if name in self.topics() else None) and all(
            p["isr"] == set(p["replicas"]) and p["leader"] == p["replicas"][0]
            for p in self.partitions([name]).values()), 60, f"topic {name} with its full ISR")

    def delete_topic(self, name: str) -> None:
        admin = self.admin()
        try:
            admin.delete_topics([name])
        finally:
            admin.close()
        wait_for(lambda: name not in self.topics(), 60, f"topic {name} deleted")

    def topics(self) -> set[str]:
        admin = self.admin()
        try:
            return set(admin.list_topics())
        finally:
            admin.close()

    def produce(self, topic: str, records: int, size: int = 4096) -> None:
        """Some data for every partition (acks=all), so that elections and ISRs concern real logs."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.url.removeprefix("kafka://").split(","), acks="all",
                                 linger_ms=5)
        try:
            parts = sorted(p for t, p in self.assignment([topic]) if t == topic)
            for i in range(records):
                producer.send(topic, value=os.urandom(size), partition=parts[i % len(parts)])
            producer.flush(60)
        finally:
            producer.close()


def cli(section: str, step: str, *args: str, expect: int = 0, timeout: float = 300) -> str:
    """Run ``rebalancer ARGS`` in a subprocess as an operator would; asserts the exit code, times it, returns stdout."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rebalancer", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    record(section, step, time.monotonic() - started)
    assert proc.returncode == expect, (f"rebalancer {' '.join(args)}: exit {proc.returncode}, expected {expect}\n"
                                       f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def gate_count(plan: dict[str, Any]) -> int:
    """The gates validate runs on this plan: the 12 of every plan (failover balance among them), topic leader
    balance where the plan claims it (its leader flow met every topic's band), disk and network balance and bytes against their bound for every
    replica plan (the snapshot knows the sizes, whatever the plan balanced), and capacity headroom and transient
    disk (these brokers report their disks' total bytes through DescribeLogDirs)."""
    balanced_load = plan["mode"] != "leaders"
    topic_claimed = (plan.get("solver", {}).get("leaders") or {}).get("topic_band_violation") == 0
    return 12 + (1 if topic_claimed else 0) + (3 if balanced_load else 0) + 2


def planned(run: Path) -> Assignment:
    doc = json.loads((run / "reassignment.json").read_text())
    return {(p["topic"], p["partition"]): tuple(p["replicas"]) for p in doc["partitions"]}


def rollback_targets(run: Path) -> Assignment:
    doc = json.loads((run / "rollback.json").read_text())
    return {(p["topic"], p["partition"]): tuple(p["replicas"]) for p in doc["partitions"]}


# -- fixtures ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kafka(airflow_stack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    from rebalancer.localkafka import down, up

    directory = tmp_path_factory.mktemp("kraft")
    atexit.register(down, directory, missing_ok=True)
    started = time.monotonic()
    state = up(directory, VERSION, **SCENARIO, broker_config=BROKER_CONFIG)
    record("startup", "kafka_up_total_s", time.monotonic() - started)
    record("startup", "kafka_startup_s", state["startup_seconds"])
    load = state.get("load") or {}
    for key in ("seconds", "produce_seconds", "sync_seconds"):
        if key in load:
            record("startup", f"kafka_load_{key}", load[key])
    TIMINGS["cluster"] = {"kafka_version": state.get("kafka_version"), "kraft": state.get("kraft"),
                          "scenario": SCENARIO, "broker_config": BROKER_CONFIG,
                          "roles": {n["id"]: n["roles"] for n in state["nodes"]}}
    try:
        yield Kafka(state)
    finally:
        stopped = time.monotonic()
        down(directory, missing_ok=True)
        record("startup", "kafka_down_s", time.monotonic() - stopped)
        ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
        ARTIFACT.write_text(json.dumps(TIMINGS, indent=2) + "\n")
        print(f"\nKRaft end to end, wall times (also {ARTIFACT}):\n{json.dumps(TIMINGS, indent=2)}")


# -- 1. leaders ------------------------------------------------------------------------------------------------------
def test_kafka_is_kraft_with_empty_new_brokers(kafka: Kafka) -> None:
    assert kafka.state["kraft"] is True and kafka.state["zk_url"] is None
    assert kafka.state["kafka_version"].startswith("4.")
    admin = kafka.admin()
    try:
        brokers = {b["broker_id"] for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()
    assert brokers == set(OLD + NEW)
    held = {b for r in kafka.assignment().values() for b in r}
    assert held == set(OLD), "the new brokers must start empty"
    assert kafka.throttles() == {}


def test_cli_leaders_plan_executes_with_elect_leaders(kafka: Kafka, tmp_path: Path) -> None:
    """A topic whose preferred leaders all sit on broker 3: the leaders plan moves half of them to broker 4 by
    reordering replicas and electing the preferred leaders (ElectLeaders), with no data copied."""
    try:
        _leaders(kafka, tmp_path)
    finally:  # the new brokers empty again for the add-brokers runs, whatever happened
        started = time.monotonic()
        for topic in (CONTROL_TOPIC, SKEW_TOPIC):
            if topic in kafka.topics():
                kafka.delete_topic(topic)
        wait_for(lambda: {b for r in kafka.assignment().values() for b in r} == set(OLD), 60,
                 "brokers 3 and 4 empty")
        record("leaders", "delete_topics", time.monotonic() - started)


def _leaders(kafka: Kafka, tmp_path: Path) -> None:
    sec = "leaders"
    started = time.monotonic()
    kafka.create_topic(SKEW_TOPIC, {i: [3, 4] for i in range(8)})
    kafka.produce(SKEW_TOPIC, 256)
    record(sec, "create_skewed_topic", time.monotonic() - started)
    before = kafka.partitions()
    assert {p["leader"] for tp, p in before.items() if tp[0] == SKEW_TOPIC} == {3}

    run = tmp_path / "run-leaders"
    url = kafka.url
    out = cli(sec, "snapshot", "snapshot", "--source", url, "--out", str(run))
    assert "5 brokers" in out and "3 topics, 20 partitions" in out, out
    meta = json.loads((run / "snapshot.json").read_text())["meta"]
    assert meta["source"].startswith("kafka://127.0.0.1:") and meta["sizes_known"] is True
    assert meta["cluster_id"] == kafka.state["cluster_id"]
    # Recorded, not asserted: on KRaft, DescribeCluster names a random broker as "controller" to clients.
    from rebalancer.localkafka import active_controller

    TIMINGS["cluster"]["snapshot_controller_id"] = meta.get("controller_id")
    TIMINGS["cluster"]["kraft_quorum_leader"] = active_controller(kafka.state)
    out = cli(sec, "plan", "plan", "--mode", "leaders", str(run))
    plan = json.loads((run / "plan.json").read_text())
    targets = planned(run)
    assert plan["summary"]["replica_moves"] == 0 and "bytes to copy 0 B" in out, out
    assert len(targets) == 4 and all(tp[0] == SKEW_TOPIC and r == (4, 3) for tp, r in targets.items()), targets
    assert rollback_targets(run) == {tp: before[tp]["replicas"] for tp in targets}
    out = cli(sec, "validate", "validate", str(run))
    assert f"all {gate_count(plan)} gates passed" in out, out
    out = cli(sec, "approve", "approve", "--by", "alice", str(run))
    assert plan["content_hash"][:12] in out
    # Nothing has touched the cluster yet.
    assert kafka.partitions() == before

    out = cli(sec, "execute", "execute", "--source", url, "--throttle", THROTTLE, "--poll", "0.5", str(run))
    assert "submitted 4 moves (0 bytes)" in out and "executed: 1 batch(es) done" in out, out
    after = kafka.partitions()
    for tp, replicas in targets.items():
        assert after[tp]["replicas"] == replicas and after[tp]["leader"] == replicas[0], (tp, after[tp])
        assert after[tp]["isr"] == set(replicas)
    for tp, p in before.items():
        if tp not in targets:
            assert (after[tp]["replicas"], after[tp]["leader"]) == (p["replicas"], p["leader"]), tp
    skew_leaders = [after[tp]["leader"] for tp in after if tp[0] == SKEW_TOPIC]
    assert sorted(skew_leaders) == [3] * 4 + [4] * 4
    out = cli(sec, "verify", "verify", "--source", url, str(run))
    assert "verified: 4 partitions" in out, out
    assert json.loads((run / "verification.json").read_text())["passed"] is True
    assert kafka.throttles() == {}
    state = json.loads((run / "execution" / "state.json").read_text())
    assert state["finished"] is True and [b["status"] for b in state["batches"]] == ["done"]

    # Control: on this cluster a reorder alone (AlterPartitionReassignments, as the executor submits it) leaves the
    # leader where it was, so the leaders above moved through the executor's ElectLeaders.
    from kafka.structs import TopicPartition

    started = time.monotonic()
    kafka.create_topic(CONTROL_TOPIC, {0: [3, 4]})
    admin = kafka.admin()
    try:
        admin.alter_partition_reassignments({TopicPartition(CONTROL_TOPIC, 0): [4, 3]})
    finally:
        admin.close()
    wait_for(lambda: kafka.partitions([CONTROL_TOPIC])[(CONTROL_TOPIC, 0)]["replicas"] == (4, 3), 30, "the reorder")
    # Watched for 3 s, not slept through: the leader stays where it was all along.
    watched = time.monotonic() + 3.0
    while time.monotonic() < watched:
        control = kafka.partitions([CONTROL_TOPIC])[(CONTROL_TOPIC, 0)]
        assert control["replicas"] == (4, 3) and control["leader"] == 3, control
    record(sec, "control_reorder", time.monotonic() - started)


# -- 2. add brokers, then roll back ---------------------------------------------------------------------------------
def test_cli_add_brokers_execute_verify_rollback(kafka: Kafka, tmp_path: Path) -> None:
    sec = "add_brokers_cli"
    url = kafka.url
    original = kafka.partitions()
    assert {b for p in original.values() for b in p["replicas"]} == set(OLD)
    run = tmp_path / "run-add"
    out = cli(sec, "snapshot", "snapshot", "--source", url, "--out", str(run))
    assert "2 topics, 12 partitions, 24 replicas" in out, out
    cli(sec, "plan", "plan", "--mode", "add-brokers", "--brokers", ",".join(map(str, NEW)), str(run))
    plan = json.loads((run / "plan.json").read_text())
    targets = planned(run)
    moves = plan["summary"]["replica_moves"]
    assert targets and moves > 0
    # At most one replica added per partition, every added replica on a new broker; a load plan may also reorder
    # a partition's replicas (a leader change for bytes-out balance, no data).
    for tp, replicas in targets.items():
        added = set(replicas) - set(original[tp]["replicas"])
        reorder = not added and set(replicas) == set(original[tp]["replicas"])
        assert reorder or (len(added) == 1 and added <= set(NEW)), (tp, original[tp]["replicas"], replicas)
    assert rollback_targets(run) == {tp: original[tp]["replicas"] for tp in targets}
    out = cli(sec, "validate", "validate", str(run))
    assert f"all {gate_count(plan)} gates passed" in out, out
    cli(sec, "approve", "approve", "--by", "alice", str(run))
    assert kafka.partitions() == original

    # Execute, watching the cluster's throttle configs while it copies.
    seen: dict[str, dict[str, str]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                seen.update(kafka.throttles())
            except Exception:  # noqa: BLE001 - a read racing a config change: the next one counts
                pass
            stop.wait(0.25)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = cli(sec, "execute", "execute", "--source", url, "--throttle", THROTTLE, "--poll", "0.5", str(run))
    finally:
        stop.set()
        watcher.join(30)
    assert f"submitted {moves} moves" in out and "executed:" in out, out
    rate = str(20_000_000)
    throttled_brokers = {e for e, keys in seen.items() if e.startswith("brokers/")
                         and rate in keys.values()}
    assert throttled_brokers & {f"brokers/{b}" for b in NEW}, f"no throttle seen on the new brokers: {seen}"
    assert any(e.startswith("topics/") for e in seen), f"no topic throttle seen: {seen}"
    TIMINGS.setdefault(sec, {})["throttles_seen"] = sorted(seen)

    after = kafka.partitions()
    for tp, replicas in targets.items():
        assert after[tp]["replicas"] == replicas, (tp, after[tp], replicas)
        assert after[tp]["isr"] == set(replicas) and after[tp]["leader"] == replicas[0], (tp, after[tp])
    for tp, p in original.items():
        if tp not in targets:
            assert after[tp]["replicas"] == p["replicas"], tp
    assert sum(1 for p in after.values() for b in p["replicas"] if b in NEW) == moves
    assert kafka.throttles() == {}
    out = cli(sec, "verify", "verify", "--source", url, str(run))
    assert "verified:" in out, out
    assert json.loads((run / "verification.json").read_text())["passed"] is True

    # Roll back: the original assignment of every partition, replica order included, and no throttle left.
    out = cli(sec, "rollback", "rollback", "--source", url, "--throttle", THROTTLE, "--poll", "0.5", str(run))
    assert f"rolled back: {len(targets)} move(s) reverted, original assignment verified" in out, out
    back = kafka.partitions()
    assert {tp: p["replicas"] for tp, p in back.items()} == {tp: p["replicas"] for tp, p in original.items()}
    assert all(p["isr"] == set(p["replicas"]) for p in back.values())
    assert all(back[tp]["leader"] == original[tp]["replicas"][0] for tp in targets)
    assert json.loads((run / "verification_rollback.json").read_text())["passed"] is True
    assert kafka.throttles() == {}
    assert {b for p in back.values() for b in p["replicas"]} == set(OLD)


# -- 3. one Airflow run ----------------------------------------------------------------------------------------------
@pytest.mark.timeout(2400)  # a deadline for a hung run, not a speed target (tests/airflow_support.Stack.wait_parked)
def test_airflow_add_brokers_run_against_kraft(kafka: Kafka, airflow_stack: Any) -> None:
    from airflow_support import APPROVER, airflow_local

    sec = "airflow"
    waited = time.monotonic()
    stack = airflow_stack.result(timeout=600)
    record(sec, "waiting_for_stack", time.monotonic() - waited)
    dag = "kafka_add_brokers"
    airflow_local.configure(stack.admin, kafka_dir=kafka.directory)  # kafka_default, as `up --kafka-dir` makes it
    conn = stack.admin.request("GET", "/connections/kafka_default")
    assert conn["conn_type"] == "kafka" and conn["host"] == kafka.url.removeprefix("kafka://")

    before = kafka.partitions()
    assert {b for p in before.values() for b in p["replicas"]} == set(OLD)
    started = time.monotonic()
    run_id = stack.admin.trigger(dag, {"new_brokers": NEW, "backend": "kafka", "kafka_conn_id": "kafka_default",
                                       "throttle": THROTTLE, "poll_s": 0.2, "approvers": [APPROVER]})

    def explain() -> str:
        states = stack.admin.task_states(dag, run_id)
        out = [json.dumps(states)]
        for task_id, state in states.items():
            if state == "failed":
                out.append(f"--- {task_id} log ---\n" + stack.admin.log(dag, run_id, task_id)[-3000:])
        out.append("--- scheduler ---\n" + stack.log_tail("scheduler", 15))
        return "\n".join(out)

    try:
        stack.wait_parked(dag, run_id)
    except airflow_local.AirflowError as exc:
        raise AssertionError(f"{exc}\n{explain()}") from None
    record(sec, "trigger_to_awaiting_approval", time.monotonic() - started)

    run = stack.run_dir(dag, run_id)
    plan = json.loads((run / "plan.json").read_text())
    moves = plan["summary"]["replica_moves"]
    assert kafka.partitions() == before and not (run / "approval.json").exists()
    from rebalancer.snapshot import load_snapshot

    meta = load_snapshot(run).meta
    assert meta["source"].startswith("kafka://127.0.0.1:") and meta["cluster_id"] == kafka.state["cluster_id"]
    hitl = stack.admin.hitl(dag, run_id)
    assert hitl["subject"].startswith("Approve add-brokers on kafka://127.0.0.1:"), hitl["subject"]
    assert f"{moves} replica moves" in hitl["subject"] and f"**{gate_count(plan)}/{gate_count(plan)} passed**" in hitl["body"]
    answer = stack.client(APPROVER).answer(dag, run_id, "Approve")
    assert answer["responded_by"]["name"] == APPROVER
    approved = time.monotonic()

    state = stack.admin.wait_state(dag, run_id, states=["success", "failed"], timeout=1200)
    record(sec, "approval_to_finished", time.monotonic() - approved)
    record(sec, "run_total", time.monotonic() - started)
    assert state == "success", explain()
    states = stack.admin.task_states(dag, run_id)
    assert states == {**{t: "success" for t in states}, "rollback": "skipped"}, states
    tis = stack.admin.request("GET", f"/dags/{dag}/dagRuns/{run_id}/taskInstances", params={"limit": 100})
    TIMINGS.setdefault(sec, {})["tasks_s"] = {ti["task_id"]: round(ti["duration"], 2) for ti in tis["task_instances"]
                                              if ti.get("duration") is not None}

    approval = json.loads((run / "approval.json").read_text())
    assert approval["decision"] == "approved" and approval["by"] == APPROVER
    assert approval["plan_hash"] == plan["content_hash"]
    # The cluster, read independently: plan.json's targets (order included), the rest untouched, full ISRs, the
    # preferred leaders leading, no throttle left.
    targets = {(c["topic"], c["partition"]): tuple(c["replicas_after"]) for c in plan["changes"]}
    assert targets == planned(run)
    after = kafka.partitions()
    for tp, replicas in targets.items():
        assert after[tp]["replicas"] == replicas, (tp, after[tp], replicas)
        assert after[tp]["isr"] == set(replicas) and after[tp]["leader"] == replicas[0], (tp, after[tp])
    for tp, p in before.items():
        if tp not in targets:
            assert after[tp]["replicas"] == p["replicas"], tp
    assert sum(1 for p in after.values() for b in p["replicas"] if b in NEW) == moves
    verification = json.loads((run / "verification.json").read_text())
    assert verification["passed"] is True and verification["throttles_left"] == {}
    assert kafka.throttles() == {}
    # And the operator's own check agrees.
    out = cli(sec, "verify_cli", "verify", "--source", kafka.url, str(run))
    assert "verified:" in out, out
