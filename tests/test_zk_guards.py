"""The ZooKeeper backend's guards, on a real ZooKeeper holding the simulated cluster's metadata:

- a ZooKeeper-mode cluster migrating to KRaft (``/migration``, or a KRaft controller registered in ``/controller``)
  ignores the admin znodes: the zk:// backend refuses it in one line pointing at kafka://, with nothing written;
- with ``zookeeper.set.acl=true`` Kafka's nodes carry an ACL (the brokers' identity may write, the world reads):
  every node the tool creates carries the same ACL, and a write refused for lack of credentials is one line.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from engines import sim_engine
from kazoo.security import READ_ACL_UNSAFE, make_digest_acl

from rebalancer import kafka_zk as kz


def _with_auth(zk_url: str, user: str, password: str) -> str:
    return zk_url.replace("zk://", f"zk://{user}:{password}@", 1)


def test_a_cluster_migrating_to_kraft_is_refused_through_zookeeper(tmp_path: Path, zk, zk_url, make_sim) -> None:
    engine = sim_engine("sim-zk", make_sim, zk_url, tmp_path)
    before = {c: zk.get_children(c) for c in ("/admin", "/config/brokers")} if zk.exists("/config/brokers") else None
    zk.create("/migration", json.dumps({"version": 0, "kraft_metadata_offset": 10, "kraft_controller_id": 3000,
                                        "kraft_metadata_epoch": 1, "kraft_controller_epoch": 1}).encode())
    result = run_cli("execute", str(engine.run), "--source", zk_url, "--throttle", "50MB/s")
    assert result.returncode == 4, result.stderr
    assert result.stderr.count("\n") == 1 and "migrating to KRaft (/migration exists)" in result.stderr
    assert "use kafka://" in result.stderr
    zk.delete("/migration")
    # The other sign: a KRaft controller registered in /controller (the migration's dual-write phase).
    # (The simulator does not model /controller: written as a KRaft controller writes it during a migration.)
    zk.create(kz.CONTROLLER, json.dumps({"version": 2, "brokerid": 3000, "timestamp": "1700000000000",
                                         "kraftControllerEpoch": 2}).encode(), ephemeral=True)
    result = run_cli("execute", str(engine.run), "--source", zk_url, "--throttle", "50MB/s")
    assert result.returncode == 4 and "a KRaft controller (node 3000)" in result.stderr, result.stderr
    # Nothing was written: no reassignment, no lock, no throttle, no execution state.
    assert not zk.exists(kz.REASSIGN) and not zk.exists("/rebalancer")
    if before is not None:
        assert {c: zk.get_children(c) for c in before} == before
    assert not (engine.run / "execution" / "state.json").exists()


def test_nodes_the_tool_creates_carry_the_clusters_acl(tmp_path: Path, zk, zk_url, make_sim) -> None:
    # The brokers' identity on the test's client (the simulated controller's too) before the simulator starts: kazoo
    # mixes up replies when an auth packet goes out while that controller has requests in flight ("xids do not
    # match", seen once in the whole suite).
    zk.add_auth("digest", "kafka:broker-secret")
    engine = sim_engine("sim-zk", make_sim, zk_url, tmp_path)
    # As Kafka with zookeeper.set.acl=true: its nodes writable by the brokers' identity, readable by all.
    acl = [make_digest_acl("kafka", "broker-secret", all=True), *READ_ACL_UNSAFE]
    zk.set_acls(kz.BROKER_IDS, acl)
    for path in ("/config", "/config/brokers"):
        zk.ensure_path(path)
        zk.set_acls(path, acl)
    # No credentials: the first write is refused, in one line, and nothing is left behind.
    result = run_cli("execute", str(engine.run), "--source", zk_url, "--throttle", "50MB/s", "--throttle-settle", "0.2")
    assert result.returncode == 4, result.stderr
    assert result.stderr.count("\n") == 1 and "NoAuth" in result.stderr and "zookeeper.set.acl" in result.stderr
    assert not zk.exists(kz.REASSIGN) and not zk.exists("/rebalancer")
    assert zk.get_children("/config/brokers") == [] or all(
        not any(k.endswith("throttled.rate") for k in kz.read_config(zk, "brokers", b))
        for b in zk.get_children("/config/brokers"))
    # With the brokers' identity: it runs, and what it created carries the cluster's ACL.
    authed = _with_auth(zk_url, "kafka", "broker-secret")
    (engine.run / "execution" / "state.json").unlink(missing_ok=True)
    result = run_cli("execute", str(engine.run), "--source", authed, "--throttle", "50MB/s", "--throttle-settle", "0.2")
    assert result.returncode == 0, result.stderr[-3000:]
    created = [f"/config/brokers/{b}" for b in zk.get_children("/config/brokers")] + ["/rebalancer", "/rebalancer/locks"]
    assert created
    for path in created:
        got, _ = zk.get_acls(path)
        assert sorted(map(str, got)) == sorted(map(str, acl)), path
