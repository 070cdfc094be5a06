"""Snapshots through zk:// read back exactly what a scenario wrote in Kafka's ZooKeeper layout."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rebalancer import kafka_zk as kz
from rebalancer.errors import SourceError
from rebalancer.formats import atomic_write_json
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import load_snapshot, read_source, take_snapshot


def _log_dirs(cluster: Cluster) -> dict:
    per: dict[int, list[dict]] = {b.id: [] for b in cluster.brokers}
    for p in cluster.partitions:
        for b in p.replicas:
            per[b].append({"partition": f"{p.topic}-{p.partition}", "size": p.size_bytes, "offsetLag": 0, "isFuture": False})
    return {"version": 1, "brokers": [{"broker": b, "logDirs": [{"logDir": "/d", "error": None, "partitions": ps}]} for b, ps in per.items()]}


@pytest.mark.parametrize("scenario", ["wix", "pinterest", "new-brokers", "sqooba"])
def test_zk_snapshot_equals_what_the_scenario_wrote(scenario: str, zk, zk_url: str, tmp_path: Path):
    params = ScenarioParams(partitions=600) if scenario == "wix" else ScenarioParams()
    written = build_scenario(scenario, params)
    kz.write_cluster(zk, written)
    sizes = tmp_path / "log-dirs.json"
    atomic_write_json(sizes, _log_dirs(written))

    snap = take_snapshot(zk_url, tmp_path / "run", sizes=f"file://{sizes}")

    assert snap.partitions == written.partitions
    assert [(b.id, b.rack, b.alive) for b in snap.brokers] == [(b.id, b.rack, True) for b in written.brokers]
    assert load_snapshot(tmp_path / "run").partitions == written.partitions
    table = pq.read_table(tmp_path / "run" / "replicas.parquet").to_pandas()
    assert len(table) == written.replica_count
    leaders = table[table.is_leader]
    assert len(leaders) == len(written.partitions)
    assert int(table.size_bytes.sum()) == sum(p.size_bytes * len(p.replicas) for p in written.partitions)


def test_zk_snapshot_reports_dead_brokers_and_in_flight_reassignment(zk, zk_url: str, tmp_path: Path):
    cluster = Cluster.build(
        [Broker(0, "a"), Broker(1, "b"), Broker(2, "c", alive=False)],
        [Partition("t", 0, (0, 1, 2), 0, (0, 1), 5)],
    )
    kz.write_cluster(zk, cluster)
    zk.create(kz.REASSIGN, kz.encode({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 0, 2]}]}))
    snap = read_source(zk_url)
    assert snap.broker(2).alive is False and snap.broker(2).rack is None
    assert snap.meta["reassignment_in_progress"] == [{"topic": "t", "partition": 0, "replicas": [1, 0, 2]}]
    assert snap.partition("t", 0).isr == (0, 1)
    assert snap.meta["sizes_known"] is False


def test_znode_encodings_match_kafka(zk):
    cluster = Cluster.build([Broker(1, "r1")], [Partition("t", 0, (1,), 1, (1,), 0)])
    kz.write_cluster(zk, cluster)
    broker = json.loads(zk.get("/brokers/ids/1")[0])
    assert broker["version"] == 5 and broker["rack"] == "r1" and broker["endpoints"] == ["PLAINTEXT://localhost:9093"]
    assert zk.get("/brokers/ids/1")[1].ephemeralOwner != 0
    topic = json.loads(zk.get("/brokers/topics/t")[0])
    assert topic["version"] == 3 and topic["partitions"] == {"0": [1]} and topic["adding_replicas"] == {}
    state = json.loads(zk.get("/brokers/topics/t/partitions/0/state")[0])
    assert state == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
    for path in ("/config/changes", "/admin/delete_topics", "/isr_change_notification"):
        assert zk.exists(path)


def test_wrong_chroot_is_a_clear_error(zk_url: str):
    with pytest.raises(SourceError, match="no Kafka metadata at zk://.*/brokers/ids"):
        read_source(zk_url)


def test_unreachable_zookeeper_is_a_clear_error():
    from rebalancer.zkserver import free_port

    with pytest.raises(SourceError, match=r"cannot connect to ZooKeeper at zk://127.0.0.1:\d+ within 1 s"):
        read_source(f"zk://127.0.0.1:{free_port()}", timeout=1)


def test_acl_protected_metadata_needs_credentials(zk_url: str):
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl

    hosts, chroot = zk_url[len("zk://"):].split("/", 1)
    owner = KazooClient(hosts=f"{hosts}/{chroot}", auth_data=[("digest", "kafka:s3cret")])
    owner.start(timeout=10)
    try:
        acl = [make_digest_acl("kafka", "s3cret", all=True)]
        cluster = Cluster.build([Broker(0)], [Partition("t", 0, (0,), 0, (0,), 0)])
        kz.write_cluster(owner, cluster)
        owner.set_acls(kz.BROKER_IDS, acl)
    finally:
        owner.stop()
        owner.close()
    with pytest.raises(SourceError, match=r"denied access to the Kafka metadata with no credentials"):
        read_source(zk_url)
    with pytest.raises(SourceError, match=r"denied access .* with the given credentials"):
        read_source(f"zk://kafka:wrong@{hosts}/{chroot}")
    snap = read_source(f"zk://kafka:s3cret@{hosts}/{chroot}")
    assert snap.partitions == cluster.partitions


def test_reader_processes_read_the_states_a_single_session_reads(zk, zk_url: str) -> None:
    """A large cluster's partition states read by reader processes (``rebalancer.zk_readers``, each its own session,
    credentials on stdin): the cluster one session reads, a partition whose state znode is missing included; with
    the wrong credentials on ACL'd states, one line naming the cause, no password in it."""
    from kazoo.security import make_digest_acl

    from rebalancer.zkclient import parse_zk_url

    written = build_scenario("wix", ScenarioParams(partitions=900))
    kz.write_cluster(zk, written)
    lost = written.partitions[7]
    zk.delete(kz.state_path(lost.topic, lost.partition))  # created, no leader elected yet

    def read(url: str, readers: int) -> Cluster:
        return kz.read_cluster(zk, display="zk://test", target=parse_zk_url(url), readers=readers)

    one, four = read(zk_url, 1), read(zk_url, 4)
    assert four.partitions == one.partitions and len(four.partitions) == len(written.partitions)
    assert four.partition(lost.topic, lost.partition).leader is None
    got, want = four.partition(*written.partitions[8].tp), written.partitions[8]
    assert (got.replicas, got.leader, got.isr) == (want.replicas, want.leader, want.isr)  # ZooKeeper holds no sizes

    acl = [make_digest_acl("kafka", "s3cret", all=True)]
    zk.add_auth("digest", "kafka:s3cret")
    p = written.partitions[3]
    zk.set_acls(kz.state_path(p.topic, p.partition), acl)
    hosts, chroot = zk_url[len("zk://"):].split("/", 1)
    assert read(f"zk://kafka:s3cret@{hosts}/{chroot}", 2).partitions == one.partitions
    with pytest.raises(SourceError, match=r"^ZooKeeper at zk://\S+: a reader of partition states failed: NoAuth") as err:
        read(f"zk://kafka:wr0ng@{hosts}/{chroot}", 2)
    assert "wr0ng" not in str(err.value) and "\n" not in str(err.value)
