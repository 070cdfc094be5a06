"""Execution, verification and rollback through the Kafka Admin API (``kafka://``), against the simulated cluster's
wire-protocol listener: the real kafka-python ``KafkaAdminClient`` over a socket, the same state as ZooKeeper."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, wait_for

from rebalancer.access.admin_backend import AdminBackend
from rebalancer.errors import InputError, SourceError
from rebalancer.execute import ExecOptions, approve, execute, open_backend, verify
from rebalancer.kafka_admin import parse_kafka_url
from rebalancer.plan import plan_run_dir
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import load_snapshot, take_snapshot

MB = 1_000_000


def opts(**kw) -> ExecOptions:
    base = dict(throttle=50 * MB, poll=0.05, min_timeout=30.0, destination_grace=1.0, throttle_settle=0.3, progress=lambda _t: None)
    base.update(kw)
    return ExecOptions(**base)


@contextmanager
def admin_backend(sim) -> Iterator[AdminBackend]:
    with open_backend(f"kafka://{sim.bootstrap}", timeout=10.0) as backend:
        yield backend


def prepared(tmp: Path, make_sim, *, acceleration=200.0, approve_it=True, partitions=48):
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=partitions, mean_partition_mib=64))
    sim = make_sim(cluster, acceleration=acceleration)
    run = tmp / "run"
    take_snapshot(f"kafka://{sim.bootstrap}", run)  # sizes from DescribeLogDirs
    plan = plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15], balance="counts")
    if approve_it:
        approve(run, by="test")
    return sim, run, plan


def assignment(backend) -> dict:
    return {p.tp: p.replicas for p in backend.read_cluster().partitions}


def test_snapshot_through_the_admin_api_equals_zookeeper(tmp_path, zk, zk_url, make_sim):
    sim, run, _ = prepared(tmp_path, make_sim, approve_it=False)
    via_kafka = load_snapshot(run)
    take_snapshot(zk_url, tmp_path / "zk", sizes=f"file://{tmp_path / 'sim' / 'log-dirs.json'}")
    via_zk = load_snapshot(tmp_path / "zk")
    assert [(b.id, b.rack, b.alive) for b in via_kafka.brokers] == [(b.id, b.rack, b.alive) for b in via_zk.brokers]
    assert [(p.tp, p.replicas, p.leader, p.isr, p.size_bytes) for p in via_kafka.partitions] == \
           [(p.tp, p.replicas, p.leader, p.isr, p.size_bytes) for p in via_zk.partitions]
    assert via_kafka.meta["sizes_known"] and sum(p.size_bytes for p in via_kafka.partitions) > 0


def test_snapshots_read_retention_and_disk_totals_for_the_load_model(tmp_path, zk, zk_url, make_sim):
    from dataclasses import replace

    from rebalancer.model import Cluster
    from rebalancer.snapshot import read_source

    base = build_scenario("new-brokers", ScenarioParams(brokers=3, racks=3, new_brokers=1, partitions=6, topics=2, rf=2))
    cluster = Cluster.build([replace(b, disk_capacity_bytes=(b.id + 1) * 10**12) for b in base.brokers],
                            base.partitions, dict(base.meta))
    sim = make_sim(cluster)
    topic = cluster.partitions[0].topic
    other = next(p.topic for p in cluster.partitions if p.topic != topic)
    with admin_backend(sim) as backend:
        backend.alter_configs("topics", topic, {"retention.ms": "86400000", "min.insync.replicas": "2"})
    via_zk = read_source(zk_url)
    via_kafka = read_source(f"kafka://{sim.bootstrap}")
    # ZooKeeper holds the topic's own override only; the Admin API gives each topic's effective setting.
    assert via_zk.meta["topic_retention_ms"] == {topic: 86400000}
    assert via_kafka.meta["topic_retention_ms"] == {topic: 86400000, other: 7 * 24 * 3600 * 1000}
    assert via_zk.meta["topic_min_insync_replicas"] == {topic: 2}
    assert via_kafka.meta["topic_min_insync_replicas"] == {topic: 2, other: 1}
    # DescribeLogDirs reports each broker's disk (its log directories' total bytes).
    assert {b.id: b.disk_capacity_bytes for b in via_kafka.brokers} == {b.id: (b.id + 1) * 10**12 for b in cluster.brokers}


def test_refusals_change_nothing(tmp_path, zk, make_sim):
    sim, run, plan = prepared(tmp_path, make_sim, approve_it=False)
    with admin_backend(sim) as backend:
        before = assignment(backend)
        with pytest.raises(InputError, match="no approval record"):
            execute(run, backend, opts())
        approve(run, by="test")
        doc = json.loads((run / "plan.json").read_text())
        original = json.dumps(doc)
        doc["changes"][0]["replicas_after"] = doc["changes"][0]["replicas_before"][::-1]
        (run / "plan.json").write_text(json.dumps(doc))
        with pytest.raises(InputError, match="do not match its content hash"):
            execute(run, backend, opts())
        (run / "plan.json").write_text(original)
        # A foreign reassignment in flight (started through the Admin API, stalled on a dead broker). Kafka only
        # accepts a live destination, so it starts throttled to a crawl (else it could finish before the kill).
        p = next(p for p in backend.read_cluster().partitions if 15 not in p.replicas)
        backend.alter_configs("brokers", "15", {"follower.replication.throttled.rate": "1"})
        backend.alter_configs("topics", p.topic, {"follower.replication.throttled.replicas": f"{p.partition}:15"})
        # The simulated controller applies throttles on their change notification: submit once it has.
        wait_for(lambda: sim.broker_config.get("15", {}).get("follower.replication.throttled.rate") == "1"
                 and sim.topic_config.get(p.topic, {}).get("follower.replication.throttled.replicas"), 30,
                 "the simulated controller to apply the throttles")
        backend.submit({p.tp: [15, *p.replicas[1:]]})
        sim.kill_broker(15)
        assert set(backend.in_flight()) == {p.tp}
        theirs = backend.throttle_configs()
        with pytest.raises(SourceError, match="a reassignment this run did not start is in flight"):
            execute(run, backend, opts())
        assert backend.throttle_configs() == theirs  # someone else's throttles stay
        # The rollback of this run leaves someone else's move alone too.
        assert set(backend.in_flight()) == {p.tp}
        after = assignment(backend)
        assert {k: v for k, v in after.items() if k != p.tp} == {k: v for k, v in before.items() if k != p.tp}
        backend.cancel([p.tp])
        # As Kafka's controller reverts a cancelled move: the full list (target ++ original) minus the adding
        # replicas, so the original set in another order.
        reverted = assignment(backend)
        assert reverted[p.tp] == (*p.replicas[1:], p.replicas[0])
        assert {k: v for k, v in reverted.items() if k != p.tp} == {k: v for k, v in before.items() if k != p.tp}
    result = run_cli("execute", str(run), "--source", f"kafka://{sim.bootstrap}", "--throttle=fast")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "invalid throttle" in result.stderr


def test_drifted_partition_is_skipped_and_reported(tmp_path, make_sim):
    sim, run, plan = prepared(tmp_path, make_sim)
    victim = next(c for c in plan.changes if c.added)
    other = next(b for b in range(12) if b not in victim.replicas_before)
    drifted = (*victim.replicas_before[:-1], other)
    with admin_backend(sim) as backend:
        backend.submit({(victim.topic, victim.partition): list(drifted)})
        wait_for(lambda: not backend.in_flight(), 20, "the controller to finish the other reassignment")
        state = execute(run, backend, opts())
        skipped = [s for b in state["batches"] for s in b["skipped"]]
        assert [(s["topic"], s["partition"]) for s in skipped] == [(victim.topic, victim.partition)]
        assert assignment(backend)[(victim.topic, victim.partition)] == drifted


# -- connection settings and secrets ---------------------------------------------------------------------------
def test_client_config_file_properties_and_json(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# ops cluster\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                     'username="ops" password="s3cret-pw";\nssl.endpoint.identification.algorithm=\n')
    target = parse_kafka_url("kafka://k1:9092,k2:9092", config_file=str(props))
    assert target.config == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                              "sasl_plain_username": "ops", "sasl_plain_password": "s3cret-pw", "ssl_check_hostname": False}
    assert "s3cret" not in target.display and "ops" in target.display
    as_json = tmp_path / "client.json"
    as_json.write_text(json.dumps({"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "a",
                                   "sasl_plain_password": "b"}))
    assert parse_kafka_url("kafka://k1:9092", config_file=str(as_json)).config["sasl_mechanism"] == "PLAIN"
    url = parse_kafka_url("kafka://alice:p%40ss@k1:9092")
    assert url.config["sasl_plain_password"] == "p@ss" and url.config["security_protocol"] == "SASL_PLAINTEXT"


@pytest.mark.parametrize("text, message", [
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "needs a username and password"),
    ("security.protocol=TLS\n", "security_protocol is not one of"),
    ("sasl.mechanism=GSSAPI-ISH\nsecurity.protocol=SASL_SSL\n", "sasl_mechanism is not one of"),
    ("ssl.truststore.location=/etc/kafka/truststore.jks\n", "Java keystore"),
    ("bootstrap.servers.typo=x\n", "unknown Kafka client property"),
    ("sasl.mechanism=PLAIN\n", "use SASL_PLAINTEXT or SASL_SSL"),
    ("ssl.ca.location=/nonexistent/ca.pem\n", "no such file"),
])
def test_bad_client_config_is_one_line_exit_2(tmp_path, text, message):
    cfg = tmp_path / "bad.properties"
    cfg.write_text(text)
    result = run_cli("snapshot", "--source", "kafka://127.0.0.1:9", "--kafka-config", str(cfg), "--out", str(tmp_path / "o"))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("key", ["security_protocol", "sasl_mechanism"])
def test_a_value_that_is_not_allowed_is_never_echoed(tmp_path, key):
    """A password pasted into the wrong field (the probe's "SASL_PLAINTEXT S3CR3TPW") is named by its key only."""
    cfg = tmp_path / "client.json"
    cfg.write_text(json.dumps({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                               "sasl_plain_username": "ops", "sasl_plain_password": "x", key: "SASL_PLAINTEXT S3CR3TPW"}))
    result = run_cli("snapshot", "--source", "kafka://127.0.0.1:9", "--kafka-config", str(cfg), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and f"{key} is not one of" in result.stderr, result.stderr
    assert "s3cr3tpw" not in (result.stderr + result.stdout).lower()
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_unreachable_kafka_never_prints_the_password(tmp_path):
    result = run_cli("snapshot", "--source", "kafka://ops:hunter2-secret@127.0.0.1:9", "--timeout", "1",
                     "--out", str(tmp_path / "o"))
    assert result.returncode == 4 and "cannot connect to Kafka at kafka://127.0.0.1:9" in result.stderr, result.stderr
    assert "hunter2" not in result.stderr + result.stdout
    assert len(result.stderr.strip().splitlines()) == 1


def test_sasl_plain_through_a_config_file(tmp_path, make_sim):
    """A SASL_PLAINTEXT cluster: the right credentials read and execute; wrong or missing ones fail in one line
    that never shows the password, and nothing is written."""
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=24, mean_partition_mib=16))
    sim = make_sim(cluster, acceleration=200.0, sasl_users={"ops": "correct-horse"})
    good = tmp_path / "client.properties"
    good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="ops" password="correct-horse";\n')
    run = tmp_path / "run"
    result = run_cli("snapshot", "--source", f"kafka://{sim.bootstrap}", "--kafka-config", str(good), "--out", str(run),
                     "--quiet")
    assert result.returncode == 0, result.stderr
    assert "SASL_PLAINTEXT, user ops" in result.stdout and "correct-horse" not in result.stdout + result.stderr
    plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15], balance="counts")
    approve(run, by="test")
    result = run_cli("execute", str(run), "--source", f"kafka://{sim.bootstrap}", "--kafka-config", str(good),
                     "--throttle", "200MB/s", "--poll", "0.1", "--throttle-settle", "0.2")
    assert result.returncode == 0, result.stderr
    with open_backend(f"kafka://ops:correct-horse@{sim.bootstrap}") as backend:
        verify(run, backend)
    for source, says in ((f"kafka://ops:wrong-horse@{sim.bootstrap}", "rejected the SASL credentials"),
                         (f"kafka://{sim.bootstrap}", "cannot connect to Kafka")):  # PLAINTEXT to a SASL listener
        # 10 s: the rejection must be seen within the bootstrap window even on a loaded machine (3 s was not).
        result = run_cli("snapshot", "--source", source, "--timeout", "10", "--out", str(tmp_path / "nope"))
        assert result.returncode == 4 and says in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "horse" not in result.stderr, result.stderr
        assert not (tmp_path / "nope").exists()


def test_throttles_read_for_named_entities_only_on_both_backends(tmp_path, zk, zk_url, make_sim):
    from rebalancer.access.zk_backend import ZkBackend

    sim, _, _ = prepared(tmp_path, make_sim, approve_it=False)
    with admin_backend(sim) as backend:
        topics = sorted({p.topic for p in backend.read_cluster().partitions})[:2]
        backend.alter_configs("brokers", "1", {"leader.replication.throttled.rate": "7"})
        backend.alter_configs("brokers", "2", {"leader.replication.throttled.rate": "8"})
        for t in topics:
            backend.alter_configs("topics", t, {"leader.replication.throttled.replicas": "0:1"})
        wanted = [("brokers", "1"), ("topics", topics[0]), ("topics", "no-such-topic"), ("brokers", "99")]
        expect = {("brokers", "1"): {"leader.replication.throttled.rate": "7"},
                  ("topics", topics[0]): {"leader.replication.throttled.replicas": "0:1"}}
        for b in (backend, ZkBackend(zk, zk_url)):
            everything = b.throttle_configs()
            assert {("brokers", "2"), ("topics", topics[1])} <= set(everything)
            assert b.throttle_configs(wanted) == expect == {k: v for k, v in everything.items() if k in wanted}
            assert b.throttle_configs([]) == {}


def test_a_broker_still_starting_answers_no_brokers_and_release_still_removes_our_rate(tmp_path, make_sim,
                                                                                     monkeypatch):
    # A ZooKeeper-mode broker just restarted answers Metadata with no brokers until the controller's first
    # UpdateMetadata reaches it. Read as it was, no broker's config was asked, and releasing took this run's rate
    # on broker 2 for someone else's change: the ledger forgot it and the rate stayed (a CI run on real Kafka 3.9).
    from rebalancer.execute import throttle as thr
    from rebalancer.sim.kafka_listener import KafkaApis

    sim, _, _ = prepared(tmp_path, make_sim, approve_it=False)
    rate = {"leader.replication.throttled.rate": "2000000", "follower.replication.throttled.rate": "2000000"}
    ledger = thr.Ledger(tmp_path / "throttles.json")
    with admin_backend(sim) as backend:
        thr.apply(backend, ledger, 2_000_000, ({2}, {}))
        assert backend.throttle_configs([("brokers", "2")]) == {("brokers", "2"): rate}
        answer, starting = KafkaApis.metadata, [3]

        def metadata(self, request, version):
            found = answer(self, request, version)
            if starting[0] > 0:
                starting[0] -= 1
                return {**found, "brokers": []}
            return found

        monkeypatch.setattr(KafkaApis, "metadata", metadata)
        assert thr.release(backend, ledger) == ["brokers/2"]
        assert starting == [0]  # the empty answers came, and were asked again
        monkeypatch.undo()
        assert backend.throttle_configs([("brokers", "2")]) == {}
    assert not thr.Ledger(tmp_path / "throttles.json")


def test_a_rate_just_deleted_and_read_back_stale_is_not_restored_by_the_next_release(tmp_path, make_sim, monkeypatch):
    # A broker answers DescribeConfigs for its own config from memory, updated a moment after a change is stored
    # (ZooKeeper notification, KRaft metadata). Read back stale, a 2 MB/s rate this run had just deleted was taken
    # for the value the next throttle replaced, and the next release put it back (a CI run on real Kafka 3.9:
    # rollback after a failed batch left broker 1 at 2 MB/s). Here every change is read back stale twice.
    from kafka.admin import ConfigResourceType

    from rebalancer.execute import throttle as thr
    from rebalancer.sim.kafka_listener import KafkaApis

    sim, _, _ = prepared(tmp_path, make_sim, approve_it=False)
    describe, alter = KafkaApis.describe_configs, KafkaApis.incremental_alter_configs
    served: dict[str, Any] = {}
    stale = [0]

    def lagging_describe(self, request, version):
        out = describe(self, request, version)
        if stale[0] > 0:
            stale[0] -= 1
            return {"results": [served.get(r.resource_name, r) if r.resource_type == ConfigResourceType.BROKER.value
                                else r for r in out["results"]]}
        served.update((r.resource_name, r) for r in out["results"])
        return out

    def lagging_alter(self, request, version):
        stale[0] = 2
        return alter(self, request, version)

    ledger = thr.Ledger(tmp_path / "throttles.json")
    with admin_backend(sim) as backend:
        monkeypatch.setattr(KafkaApis, "describe_configs", lagging_describe)
        monkeypatch.setattr(KafkaApis, "incremental_alter_configs", lagging_alter)
        thr.apply(backend, ledger, 2_000_000, ({2}, {}))
        assert thr.release(backend, ledger) == ["brokers/2"]
        thr.apply(backend, ledger, 100_000_000, ({2}, {}))
        assert ledger.brokers["2"]["leader.replication.throttled.rate"]["previous"] is None
        assert thr.release(backend, ledger) == ["brokers/2"]
        monkeypatch.undo()
        assert backend.throttle_configs([("brokers", "2")]) == {}
    assert not thr.Ledger(tmp_path / "throttles.json")
