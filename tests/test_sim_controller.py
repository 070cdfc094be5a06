"""The simulated controller against a real ZooKeeper: reassignment, quotas, elections, broker failure.

Every interaction goes through the znodes a ZooKeeper-mode Kafka cluster uses, written here the way Kafka's own
tools write them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time

import pytest
from conftest import examples, wait_for
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer import kafka_zk as kz
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.sim.controller import _Flow, allocate_rates
from rebalancer.sim.service import wait_ready
from rebalancer.zkclient import parse_zk_url

MB = 1_000_000


def state(zk, topic: str, p: int) -> dict:
    return json.loads(zk.get(kz.state_path(topic, p))[0])


def assignment(zk, topic: str) -> dict:
    return json.loads(zk.get(kz.topic_path(topic))[0])


def reassign(zk, moves: dict[tuple[str, int], list[int]]) -> None:
    body = {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]}
    zk.create(kz.REASSIGN, kz.encode(body))


def set_config(zk, entity_type: str, name: str, config: dict[str, str], notify: bool = True) -> None:
    """What kafka-configs --alter does in ZooKeeper mode: the entity znode, then a change notification."""
    path = kz.config_path(entity_type, name)
    body = kz.encode({"version": 1, "config": config})
    if zk.exists(path):
        zk.set(path, body)
    else:
        zk.create(path, body, makepath=True)
    if notify:
        zk.create(f"{kz.CONFIG_CHANGES}/{kz.CONFIG_CHANGE_PREFIX}", kz.encode({"version": 2, "entity_path": f"{entity_type}/{name}"}),
                  sequence=True)


def throttle(zk, rate: int, brokers: list[int], topic: str, leader_replicas: str, follower_replicas: str) -> None:
    for b in brokers:
        set_config(zk, "brokers", str(b), {"leader.replication.throttled.rate": str(rate),
                                           "follower.replication.throttled.rate": str(rate)})
    set_config(zk, "topics", topic, {"leader.replication.throttled.replicas": leader_replicas,
                                     "follower.replication.throttled.replicas": follower_replicas})


def six_brokers(*partitions: Partition) -> Cluster:
    return Cluster.build([Broker(i, "ab"[i % 2]) for i in range(6)], partitions)


def test_reassignment_completes_with_target_replicas_isr_leader_and_throttled_duration(zk, make_sim):
    size = 400 * MB
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1, 2), 0, (0, 1, 2), size)), acceleration=50)
    rate = 10 * MB
    throttle(zk, rate, [0, 3, 4], "t", "0:0,0:1,0:2", "0:3,0:4")
    sim.settle()
    reassign(zk, {("t", 0): [3, 4, 1]})

    during = wait_for(lambda: assignment(zk, "t")["adding_replicas"], what="adding replicas in the topic znode")
    assert during == {"0": [3, 4]}
    assert assignment(zk, "t")["partitions"]["0"] == [3, 4, 1, 0, 2]
    assert assignment(zk, "t")["removing_replicas"] == {"0": [0, 2]}
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=60, what="reassignment to complete")

    topic = assignment(zk, "t")
    assert topic["partitions"]["0"] == [3, 4, 1]
    assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    st_ = state(zk, "t", 0)
    assert sorted(st_["isr"]) == [1, 3, 4]
    assert st_["leader"] == 3  # the old leader left: the first live ISR replica of the target leads
    # Both new replicas copy from leader 0, whose leader-side quota is shared: 2 x 400 MB at 10 MB/s = 80 s.
    event = sim.completed[-1]
    duration = event["finished_sim_s"] - event["started_sim_s"]
    expected = 2 * size / rate
    assert abs(duration - expected) / expected < 0.10, (duration, expected)
    assert event["bytes_copied"] == 2 * size


def test_single_replica_move_duration_matches_bytes_over_throttle(zk, make_sim):
    size = 300 * MB
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), size), Partition("t", 1, (1, 2), 1, (1, 2), size)),
                   acceleration=40)
    rate = 5 * MB
    throttle(zk, rate, [0, 1, 5], "t", "0:0,0:1", "0:5")
    sim.settle()
    reassign(zk, {("t", 0): [0, 5]})
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=60, what="reassignment to complete")
    event = sim.completed[-1]
    duration = event["finished_sim_s"] - event["started_sim_s"]
    assert abs(duration - size / rate) / (size / rate) < 0.10, duration
    assert state(zk, "t", 0)["leader"] == 0
    assert assignment(zk, "t")["partitions"] == {"0": [0, 5], "1": [1, 2]}


def test_a_starved_tick_shares_the_rate_anew_when_a_copy_finishes(zk, make_sim):
    """A busy machine can hold the controller's loop for a second: the next tick then spans 40 simulated seconds.
    Two copies into broker 5 share its 10 MB/s; when the small one finishes the large one gets all of it, as Kafka's
    quota would give it, so the large one ends at (100 + 300) MB / 10 MB/s = 40 s, not at 60 s (its half rate kept
    to the end of the tick: the conformance test's 4 s copy took 10 under CPU load)."""
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 100 * MB),
                               Partition("t", 1, (1, 2), 1, (1, 2), 300 * MB)), acceleration=40)
    rate = 10 * MB
    throttle(zk, rate, [0, 1, 5], "t", "0:0,0:1,1:1,1:2", "0:5,1:5")
    sim.settle()
    reassign(zk, {("t", 0): [0, 5], ("t", 1): [1, 5]})
    wait_for(lambda: len(sim.moves) == 2 and all(m.started is not None for m in sim.moves.values()),
             what="both copies started")
    with sim._lock:  # as if the loop had been held for a second of wall time (an observable tick, no sleep)
        sim._last_wall -= 1.0
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=60, what="both moves to complete")
    done = {e["partition"]: e for e in sim.completed}
    small, large = done[0], done[1]
    assert small["finished_sim_s"] - small["started_sim_s"] == pytest.approx(2 * 100 * MB / rate, rel=0.1)
    assert large["finished_sim_s"] - large["started_sim_s"] == pytest.approx(400 * MB / rate, rel=0.1)


def test_throttle_applies_only_after_the_change_notification(zk, make_sim):
    size = 250 * MB
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), size)), acceleration=10)
    # Config written but no /config/changes notification: Kafka brokers never see it, so the copy runs at
    # interface speed (125 MB/s): 2 s simulated instead of 250 s.
    for b in (0, 4):
        set_config(zk, "brokers", str(b), {"leader.replication.throttled.rate": str(MB),
                                           "follower.replication.throttled.rate": str(MB)}, notify=False)
    set_config(zk, "topics", "t", {"leader.replication.throttled.replicas": "*",
                                   "follower.replication.throttled.replicas": "*"}, notify=False)
    reassign(zk, {("t", 0): [0, 4]})
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=30, what="reassignment to complete")
    event = sim.completed[-1]
    assert event["finished_sim_s"] - event["started_sim_s"] == pytest.approx(size / 125e6, rel=0.1)


def test_reorder_only_reassignment_completes_without_copying(zk, make_sim):
    make_sim(six_brokers(Partition("t", 0, (0, 1, 2), 0, (0, 1, 2), 10**9)))
    reassign(zk, {("t", 0): [2, 0, 1]})
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=10, what="reorder to complete")
    assert assignment(zk, "t")["partitions"]["0"] == [2, 0, 1]
    assert state(zk, "t", 0)["leader"] == 0  # a reorder alone does not move leadership...
    zk.create(kz.PREFERRED_ELECTION, kz.encode({"version": 1, "partitions": [{"topic": "t", "partition": 0}]}))
    wait_for(lambda: not zk.exists(kz.PREFERRED_ELECTION), timeout=10, what="election to finish")
    assert state(zk, "t", 0)["leader"] == 2  # ...the preferred replica election does
    assert state(zk, "t", 0)["leader_epoch"] >= 1


def test_killed_broker_leaves_isr_and_leadership_moves(zk, make_sim):
    sim = make_sim(six_brokers(
        Partition("t", 0, (0, 1, 2), 0, (0, 1, 2), 1),
        Partition("t", 1, (1, 0, 2), 1, (1, 0, 2), 1),
        Partition("u", 0, (0,), 0, (0,), 1),
    ))
    sim.kill_broker(0)
    assert not zk.exists("/brokers/ids/0")
    assert state(zk, "t", 0)["leader"] == 1 and state(zk, "t", 0)["isr"] == [1, 2]
    assert state(zk, "t", 0)["leader_epoch"] == 1
    assert state(zk, "t", 1)["leader"] == 1 and state(zk, "t", 1)["isr"] == [1, 2]
    assert state(zk, "u", 0)["leader"] == -1 and state(zk, "u", 0)["isr"] == [0]  # no unclean election
    sim.restart_broker(0)
    assert zk.exists("/brokers/ids/0")
    assert sorted(state(zk, "t", 0)["isr"]) == [0, 1, 2]
    assert state(zk, "t", 0)["leader"] == 1  # leadership stays until a preferred election
    assert state(zk, "u", 0)["leader"] == 0


def test_dead_destination_stalls_the_move_until_it_returns(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 100 * MB)), acceleration=20)
    sim.kill_broker(5)
    reassign(zk, {("t", 0): [0, 5]})
    sim.settle()  # the controller has started the move
    started = sim.sim_time
    # 20 simulated seconds: at interface speed the copy would have finished ten times over
    wait_for(lambda: sim.sim_time >= started + 20, timeout=60, what="20 simulated seconds to pass")
    assert zk.exists(kz.REASSIGN)
    assert assignment(zk, "t")["adding_replicas"] == {"0": [5]}
    sim.restart_broker(5)
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=10, what="move to resume and complete")
    assert assignment(zk, "t")["partitions"]["0"] == [0, 5]


def test_broker_killed_through_the_command_znode(zk, zk_url, make_sim):
    from rebalancer.sim.service import send_command

    make_sim(six_brokers(Partition("t", 0, (3, 1), 3, (3, 1), 1)))
    send_command(zk_url, "kill-broker", 3, timeout=10)
    assert state(zk, "t", 0)["leader"] == 1
    send_command(zk_url, "restart-broker", 3, timeout=10)
    assert zk.exists("/brokers/ids/3")


def test_a_target_replica_rejoining_the_isr_completes_the_move(zk, make_sim):
    """Kafka's controller re-checks a moving partition on every ISR change: the new replica caught up while a
    target replica was down, and the move completes when that replica comes back in sync."""
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 5 * MB)), acceleration=5)
    throttle(zk, MB, [0, 2], "t", "*", "*")
    sim.settle()
    reassign(zk, {("t", 0): [0, 1, 2]})
    wait_for(lambda: assignment(zk, "t")["adding_replicas"], what="move to start")
    sim.kill_broker(1)
    wait_for(lambda: 2 in state(zk, "t", 0)["isr"], what="broker 2 to catch up")
    sim.settle()
    assert assignment(zk, "t")["adding_replicas"] == {"0": [2]}  # not complete: broker 1 is out of the ISR
    sim.restart_broker(1)
    wait_for(lambda: not assignment(zk, "t")["adding_replicas"], what="the move to complete")
    assert assignment(zk, "t")["partitions"]["0"] == [0, 1, 2] and not zk.exists(kz.REASSIGN)


def test_edits_to_an_in_flight_reassignment_znode_are_ignored_like_kafka(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 50 * MB), Partition("t", 1, (0, 1), 0, (0, 1), 1)), acceleration=5)
    throttle(zk, MB, [0, 2], "t", "*", "*")
    sim.settle()
    reassign(zk, {("t", 0): [0, 2]})
    wait_for(lambda: assignment(zk, "t")["adding_replicas"], what="move to start")
    zk.set(kz.REASSIGN, kz.encode({"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [1, 3]}]}))
    sim.settle()
    assert assignment(zk, "t")["partitions"]["1"] == [0, 1]


def test_sizes_are_published_in_kafka_log_dirs_format(zk, make_sim, tmp_path):
    from rebalancer.formats import parse_log_dirs, read_json

    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1234)))
    sim.stop()
    sizes = parse_log_dirs(read_json(tmp_path / "sim" / "log-dirs.json"))
    assert sizes == {("t", 0): {0: 1234, 1: 1234}}


# -- the rate allocator ---------------------------------------------------------------------------------------
flows_strategy = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4), st.booleans(), st.booleans()).filter(lambda f: f[0] != f[1]),
    min_size=1, max_size=12,
)
caps_strategy = st.dictionaries(st.integers(0, 4), st.integers(1, 1000), min_size=0, max_size=5)


@settings(max_examples=examples(200), deadline=None)
@given(flows_strategy, st.integers(1, 1000), caps_strategy, caps_strategy)
def test_rates_respect_every_limit_and_every_flow_is_bottlenecked(raw, nic, lead, follow):
    flows = [_Flow(("t", i), s, d, 1.0, to, ti) for i, (s, d, to, ti) in enumerate(raw)]
    nic_map = {b: float(nic) for b in range(5)}
    allocate_rates(flows, nic_map, dict(nic_map), {k: float(v) for k, v in lead.items()}, {k: float(v) for k, v in follow.items()})
    groups: list[tuple[float, list[_Flow]]] = []
    for b in range(5):
        groups.append((nic, [f for f in flows if f.src == b]))
        groups.append((nic, [f for f in flows if f.dst == b]))
        if b in lead:
            groups.append((lead[b], [f for f in flows if f.src == b and f.throttled_out]))
        if b in follow:
            groups.append((follow[b], [f for f in flows if f.dst == b and f.throttled_in]))
    for cap, members in groups:
        assert sum(f.rate for f in members) <= cap * (1 + 1e-9)
    # Max-min fairness: each flow sits in a saturated group where no other flow gets more.
    for f in flows:
        assert f.rate > 0
        assert any(
            f in members and sum(m.rate for m in members) >= cap * (1 - 1e-9) and all(m.rate <= f.rate * (1 + 1e-9) for m in members)
            for cap, members in groups
        ), f


# -- topic creation and deletion through ZooKeeper (what AdminZkClient writes) ---------------------------------
def lock_znode(replicas: dict[int, list[int]], topic_id: str | None) -> bytes:
    """``/brokers/topics/<t>`` as Kafka's AdminZkClient.createTopicWithAssignment writes it (version 3)."""
    body: dict = {"version": 3, "partitions": {str(p): r for p, r in replicas.items()},
                  "adding_replicas": {}, "removing_replicas": {}}
    if topic_id is not None:
        body["topic_id"] = topic_id
    return kz.encode(body)


def create_topic(zk, topic: str, replicas: dict[int, list[int]], topic_id: str | None, config: dict | None = None) -> None:
    """The topic config znode first, then the topic znode: AdminZkClient's order."""
    zk.create(kz.config_path("topics", topic), kz.encode({"version": 1, "config": config or {}}), makepath=True)
    zk.create(kz.topic_path(topic), lock_znode(replicas, topic_id), makepath=True)


def delete_topic(zk, topic: str) -> None:
    """What AdminZkClient.deleteTopic does: mark the topic under /admin/delete_topics."""
    zk.create(f"/admin/delete_topics/{topic}", b"", makepath=True)


def deleted(zk, topic: str) -> bool:
    """The deletion is complete: the controller deletes the topic znode, then its config, then the mark, last."""
    return not zk.exists(kz.topic_path(topic)) and not zk.exists(f"/admin/delete_topics/{topic}")


def test_topic_created_through_zookeeper_gets_leader_isr_and_is_tracked(zk, make_sim):
    import base64
    import uuid

    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 5)))
    topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    create_topic(zk, "__rebalancer_lock", {0: [2]}, topic_id)
    wait_for(lambda: zk.exists(kz.state_path("__rebalancer_lock", 0)), timeout=5, what="the lock partition's state")
    assert state(zk, "__rebalancer_lock", 0) == {"controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 0,
                                                 "isr": [2]}
    assert assignment(zk, "__rebalancer_lock") == {"version": 3, "partitions": {"0": [2]}, "topic_id": topic_id,
                                                   "adding_replicas": {}, "removing_replicas": {}}
    with sim.lock:
        assert sim.topics["__rebalancer_lock"].topic_id == topic_id
        assert sim.size[("__rebalancer_lock", 0)] == 0 and sim.disk[("__rebalancer_lock", 0)] == {2: 0.0}
        dirs = {b["broker"]: b["logDirs"][0]["partitions"] for b in sim.log_dirs()["brokers"]}
    assert {"partition": "__rebalancer_lock-0", "size": 0, "offsetLag": 0, "isFuture": False} in dirs[2]

    # No topic id (an older tool): the controller gives it one and rewrites the znode, as Kafka 3.x does. Leaders
    # are the first live replica, the ISR every live replica; a dead broker's replica waits outside the ISR.
    sim.kill_broker(3)
    create_topic(zk, "u", {0: [3, 4], 1: [4, 3]}, None)
    wait_for(lambda: zk.exists(kz.state_path("u", 1)), timeout=5, what="u's partition states")
    assert (state(zk, "u", 0)["leader"], state(zk, "u", 0)["isr"]) == (4, [4])
    assert (state(zk, "u", 1)["leader"], state(zk, "u", 1)["isr"]) == (4, [4])
    given = wait_for(lambda: assignment(zk, "u").get("topic_id"), timeout=5, what="u's topic id")
    assert len(base64.urlsafe_b64decode(given + "==")) == 16 and assignment(zk, "u")["version"] == 3
    assert sim.topics["u"].topic_id == given
    sim.restart_broker(3)
    assert state(zk, "u", 0)["isr"] == [4, 3]  # an empty replica is caught up at once

    # The new topic moves like any other.
    reassign(zk, {("__rebalancer_lock", 0): [5]})
    wait_for(lambda: not zk.exists(kz.REASSIGN), timeout=10, what="the lock partition to move")
    assert assignment(zk, "__rebalancer_lock")["partitions"] == {"0": [5]}
    assert assignment(zk, "__rebalancer_lock")["topic_id"] == topic_id


def test_topic_whose_replicas_are_all_down_gets_a_leader_when_one_returns(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 5)))
    sim.kill_broker(5)
    create_topic(zk, "lonely", {0: [5]}, None)
    wait_for(lambda: "lonely" in sim.topics, timeout=5, what="the controller to see the topic")
    sim.settle()
    assert not zk.exists(kz.state_path("lonely", 0))  # no live replica: Kafka elects no leader and writes no state
    sim.restart_broker(5)
    assert state(zk, "lonely", 0)["leader"] == 5 and state(zk, "lonely", 0)["isr"] == [5]


def test_topic_deleted_through_zookeeper_is_gone_within_a_tick(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 5), Partition("gone", 0, (1, 2), 1, (1, 2), 7),
                               Partition("gone", 1, (2, 3), 2, (2, 3), 7)))
    set_config(zk, "topics", "gone", {"retention.ms": "1000"})
    delete_topic(zk, "gone")
    wait_for(lambda: deleted(zk, "gone"), timeout=2, what="the topic to be deleted")
    assert not zk.exists(kz.config_path("topics", "gone"))
    assert wait_for(lambda: zk.get_children("/admin/delete_topics") == [], timeout=2, what="the deletion mark to go")
    with sim.lock:
        assert "gone" not in sim.topics and all(tp[0] != "gone" for tp in {*sim.state, *sim.size, *sim.disk})
        assert "gone" not in json.dumps(sim.log_dirs()) and "gone" not in sim.topic_config
    assert assignment(zk, "t")["partitions"] == {"0": [0, 1]}
    # Kafka's controller drops a deletion mark for a topic that does not exist.
    delete_topic(zk, "nope")
    wait_for(lambda: zk.get_children("/admin/delete_topics") == [], timeout=2, what="the stray mark to go")


def test_deletion_waits_for_a_dead_replica_and_for_a_reassignment(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 5), Partition("d", 0, (1, 2), 1, (1, 2), 7),
                               Partition("m", 0, (0, 1), 0, (0, 1), 20 * MB)), acceleration=5)
    # A replica's broker is down: the topic stays marked for deletion until the broker is back.
    sim.kill_broker(2)
    delete_topic(zk, "d")
    sim.settle()
    assert zk.exists(kz.topic_path("d")) and zk.get_children("/admin/delete_topics") == ["d"]
    sim.restart_broker(2)
    wait_for(lambda: deleted(zk, "d"), timeout=2, what="the deletion to resume")
    assert zk.get_children("/admin/delete_topics") == []

    # A reassignment is in progress: deletion waits until it finishes, then runs.
    throttle(zk, MB, [0, 3], "m", "*", "*")
    sim.settle()
    reassign(zk, {("m", 0): [0, 3]})
    wait_for(lambda: assignment(zk, "m")["adding_replicas"], what="the move to start")
    delete_topic(zk, "m")
    sim.settle()
    assert zk.exists(kz.topic_path("m")) and assignment(zk, "m")["adding_replicas"] == {"0": [3]}
    wait_for(lambda: deleted(zk, "m"), timeout=20, what="the move to finish and the topic to go")
    assert not zk.exists(kz.REASSIGN) and zk.get_children("/admin/delete_topics") == []
    assert [e["topic"] for e in sim.completed] == ["m"]
    assert assignment(zk, "t")["partitions"] == {"0": [0, 1]}


def test_the_wait_for_a_simulator_retries_a_zookeeper_that_never_answers_its_handshake(zk_url, make_sim):
    # A fresh ZooKeeper on a loaded machine can take a connection before it serves sessions and never answer it (the
    # fast tier saw `sim up` hang past its test's 120 s so). The wait must give up on that connection and try again,
    # not hold it for the whole deadline. Here the first connection goes nowhere; later ones reach ZooKeeper.
    make_sim(Cluster.build([Broker(0, "a"), Broker(1, "b")], [Partition("t", 0, (0, 1), 0, (0, 1), 1)]))
    hosts, chroot = zk_url[len("zk://"):].split("/", 1)
    zk_host, zk_port = hosts.rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                if not held:
                    held.append(conn)  # taken, never answered
                    continue
                upstream = socket.create_connection((zk_host, int(zk_port)))
                for a, b in ((conn, upstream), (upstream, conn)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        target = parse_zk_url(f"zk://127.0.0.1:{listener.getsockname()[1]}/{chroot}")
        started = time.monotonic()
        status = wait_ready(target, None, None, timeout=45)
        assert held and status["alive"] == [0, 1] and status["pid"] == os.getpid()
        assert time.monotonic() - started < 30
    finally:
        listener.close()
        for conn in held:
            conn.close()
