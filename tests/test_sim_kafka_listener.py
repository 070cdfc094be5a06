"""The simulated cluster's Kafka listeners against the real kafka-python ``KafkaAdminClient`` over sockets.

Every answer is checked against the state ZooKeeper holds (as a ZooKeeper-mode Kafka keeps it) or against the
simulator's own bookkeeping; requests the client cannot send are framed by hand with kafka-python's classes.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kafka.errors as ke
import pytest
from conftest import run_cli, wait_for
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from kafka import KafkaAdminClient, TopicPartition
from rebalancer import kafka_zk as kz
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.sim import kafka_listener

MB = 1_000_000
LONG_MAX = str(2**63 - 1)
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


def six_brokers(*partitions: Partition) -> Cluster:
    return Cluster.build([Broker(i, "ab"[i % 2]) for i in range(6)], partitions)


def znode(zk, path: str) -> Any:
    return json.loads(zk.get(path)[0])


@pytest.fixture
def connect() -> Iterator[Callable[..., KafkaAdminClient]]:
    """Factory: a KafkaAdminClient bootstrapped from a simulated cluster; every client is closed at the end."""
    clients: list[KafkaAdminClient] = []

    def factory(sim: Any) -> KafkaAdminClient:
        client = KafkaAdminClient(bootstrap_servers=sim.bootstrap, client_id="listener-test",
                                  request_timeout_ms=5000, bootstrap_timeout_ms=5000)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.close()


def raw_call(port: int, request: Any, response_cls: Any) -> Any:
    """One request on a fresh connection, framed and decoded with kafka-python's classes."""
    request.with_header(correlation_id=7, client_id="raw")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request.encode(header=True, framed=True))
        return response_cls.decode(read_frame(conn), version=request.API_VERSION, header=True)


def read_frame(conn: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(conn, 4))
    return recv_exact(conn, size)


def recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def closed_by_peer(conn: socket.socket) -> bool:
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def throttle(admin: KafkaAdminClient, rate: int, brokers: list[int], topic: str, leader: str, follower: str) -> None:
    """Replication throttles the way kafka-reassign-partitions --throttle sets them, through the Admin API."""
    rates = {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
    result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b), dict(rates)) for b in brokers]
                                 + [ConfigResource(ConfigResourceType.TOPIC, topic,
                                                   {LEADER_REPLICAS: leader, FOLLOWER_REPLICAS: follower})])
    assert all(v == "OK" for by_name in result.values() for v in by_name.values()), result


# -- brokers and metadata -------------------------------------------------------------------------------------
def test_brokers_advertise_their_listeners_in_zookeeper_and_describe_cluster(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    for b in range(6):
        reg = znode(zk, kz.broker_path(b))
        assert (reg["host"], reg["port"]) == ("127.0.0.1", sim.kafka_ports[b])
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{sim.kafka_ports[b]}"]
    assert sim.bootstrap == ",".join(f"127.0.0.1:{sim.kafka_ports[b]}" for b in range(6))
    status = znode(zk, "/kafka-sim/status")
    assert status["bootstrap"] == sim.bootstrap

    cluster = connect(sim).describe_cluster()
    assert cluster["cluster_id"] == znode(zk, "/cluster/id")["id"] == sim.cluster_id
    assert cluster["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in cluster["brokers"]] == \
           [(b, "127.0.0.1", sim.kafka_ports[b], "ab"[b % 2]) for b in range(6)]


def test_kafka_port_base_gives_each_broker_base_plus_id(zk, make_sim):
    from rebalancer.sim.controller import SimulatedCluster
    from rebalancer.sim.kafka_listener import serve

    probes = [socket.create_server(("127.0.0.1", 0)) for _ in range(3)]
    base = probes[0].getsockname()[1]  # a free port; the next two are checked below
    for probe in probes:
        probe.close()
    for offset in (1, 2):
        try:
            socket.create_server(("127.0.0.1", base + offset)).close()
        except OSError:
            pytest.skip("no three consecutive free ports")
    sim = SimulatedCluster(zk, state_dir=None, kafka_port_base=base, listener_factory=serve)
    sim.load(Cluster.build([Broker(0), Broker(1), Broker(2)], [Partition("t", 0, (0, 1), 0, (0, 1), 1)]))
    sim.start()
    try:
        assert sim.kafka_ports == {0: base, 1: base + 1, 2: base + 2}
        assert znode(zk, kz.broker_path(2))["port"] == base + 2
    finally:
        sim.stop()
    assert all(refuses(base + b) for b in range(3))


def test_metadata_equals_zookeeper_including_offline_replicas_and_unknown_topics(zk, make_sim, connect):
    sim = make_sim(six_brokers(
        Partition("t", 0, (0, 1, 2), 0, (0, 1, 2), 10),
        Partition("t", 1, (3, 4), 3, (3, 4), 10),
        Partition("u", 0, (5,), 5, (5,), 10),
    ))
    sim.kill_broker(5)
    sim.kill_broker(3)
    admin = connect(sim)
    topics = {t["name"]: t for t in admin.describe_topics()}
    in_zk = kz.read_cluster(zk, display="zk")
    for p in in_zk.partitions:
        got = next(x for x in topics[p.topic]["partitions"] if x["partition_index"] == p.partition)
        assert tuple(got["replica_nodes"]) == p.replicas
        assert tuple(got["isr_nodes"]) == p.isr
        assert got["leader_id"] == (-1 if p.leader is None else p.leader)
        assert got["offline_replicas"] == [b for b in p.replicas if b in (3, 5)]
        assert got["leader_epoch"] == znode(zk, kz.state_path(p.topic, p.partition))["leader_epoch"]
    # u-0's only replica is down: no leader, LEADER_NOT_AVAILABLE; t-1 failed over to broker 4.
    assert topics["u"]["partitions"][0]["error_code"] == 5
    assert topics["t"]["partitions"][1]["leader_id"] == 4
    topic_id = znode(zk, kz.topic_path("t"))["topic_id"]
    assert topics["t"]["topic_id"] == str(uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "==")))
    missing = admin.describe_topics(["t", "nope"])
    assert [(t["name"], t["error_code"]) for t in missing] == [("t", 0), ("nope", 3)]
    by_id = admin.describe_topics([uuid.UUID(topics["t"]["topic_id"]), uuid.uuid4()])  # Metadata v12 by topic id
    assert [(t["name"], t["error_code"]) for t in by_id] == [("t", 0), (None, 100)]  # UNKNOWN_TOPIC_ID
    assert sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) == [0, 1, 2, 4]


def test_describe_log_dirs_reports_each_brokers_own_replicas_and_partial_copies(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 200 * MB), Partition("t", 1, (1, 2), 1, (1, 2), 7)),
                   acceleration=10)
    admin = connect(sim)
    throttle(admin, MB, [0, 5], "t", "*", "*")
    wait_for(lambda: sim.broker_config.get("5"), what="the throttle to reach the controller")
    assert admin.alter_partition_reassignments({TopicPartition("t", 0): [0, 5]}) == {TopicPartition("t", 0): None}
    wait_for(lambda: sim.disk[("t", 0)].get(5, 0) > 0, what="copying to start")
    dirs = {d["broker"]: d["log_dirs"] for d in admin.describe_log_dirs()}
    with sim.lock:
        held = {tp: dict(per) for tp, per in sim.disk.items()}
    assert sorted(dirs) == list(range(6))
    for b, entries in dirs.items():
        assert [e["log_dir"] for e in entries] == [f"/var/lib/kafka/data-{b}"]
        got = {(t["name"], p["partition_index"]): p for t in entries[0]["topics"] for p in t["partitions"]}
        assert set(got) == {tp for tp, per in held.items() if b in per}
    partial = {(t["name"], p["partition_index"]): p for t in dirs[5][0]["topics"] for p in t["partitions"]}[("t", 0)]
    assert 0 < partial["partition_size"] < 200 * MB
    assert partial["offset_lag"] == 200 * MB - partial["partition_size"]
    assert abs(partial["partition_size"] - held[("t", 0)][5]) <= MB  # read a moment apart, at 1 MB/s simulated
    only = admin.describe_log_dirs({"t": [1]}, brokers=[1])
    assert only[0]["log_dirs"][0]["topics"] == [
        {"name": "t", "partitions": [{"partition_index": 1, "partition_size": 7, "offset_lag": 0,
                                      "is_future_key": False}]}]


# -- configs --------------------------------------------------------------------------------------------------
def test_throttle_set_through_the_api_lands_in_zookeeper_and_paces_the_copy(zk, make_sim, connect):
    size, rate = 300 * MB, 5 * MB
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), size)), acceleration=40)
    admin = connect(sim)
    # Unset, the throttle keys read as Kafka's defaults: that is what lets kafka-python's alter_configs set them.
    every = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0"),
                                    ConfigResource(ConfigResourceType.TOPIC, "t")], config_filter="all")
    assert {k: (v["value"], v["config_source"]) for k, v in every["broker"]["0"].items()} == \
           {LEADER_RATE: (LONG_MAX, "DEFAULT_CONFIG"), FOLLOWER_RATE: (LONG_MAX, "DEFAULT_CONFIG")}
    assert {k: (v["value"], v["config_source"]) for k, v in every["topic"]["t"].items()} == \
           {LEADER_REPLICAS: ("", "DEFAULT_CONFIG"), FOLLOWER_REPLICAS: ("", "DEFAULT_CONFIG"),
            "retention.ms": ("604800000", "DEFAULT_CONFIG"), "retention.bytes": ("-1", "DEFAULT_CONFIG"),
            "min.insync.replicas": ("1", "DEFAULT_CONFIG")}

    notes_before = len(zk.get_children(kz.CONFIG_CHANGES))
    throttle(admin, rate, [0, 1, 5], "t", "0:0,0:1", "0:5")
    assert znode(zk, kz.config_path("brokers", "5")) == {"version": 1, "config": {LEADER_RATE: str(rate),
                                                                                 FOLLOWER_RATE: str(rate)}}
    assert znode(zk, kz.config_path("topics", "t"))["config"] == {LEADER_REPLICAS: "0:0,0:1", FOLLOWER_REPLICAS: "0:5"}
    notes = sorted(zk.get_children(kz.CONFIG_CHANGES))[notes_before:]
    assert [znode(zk, f"{kz.CONFIG_CHANGES}/{n}") for n in notes] == [
        {"version": 2, "entity_path": p} for p in ("brokers/0", "brokers/1", "brokers/5", "topics/t")]
    modified = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "5")])
    assert modified["broker"]["5"][FOLLOWER_RATE]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    wait_for(lambda: sim.topic_config.get("t"), what="the controller to read the notifications")

    assert admin.alter_partition_reassignments({TopicPartition("t", 0): [0, 5]}) == {TopicPartition("t", 0): None}
    wait_for(lambda: not sim.moves, timeout=30, what="the move to complete")
    event = sim.completed[-1]
    duration = event["finished_sim_s"] - event["started_sim_s"]
    assert abs(duration - size / rate) / (size / rate) < 0.10, duration

    # DELETE removes just that key (kafka-python sends IncrementalAlterConfigs); the rest of the znode stays.
    delete = {FOLLOWER_RATE: (AlterConfigOp.DELETE, None)}
    result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "5", delete)])
    assert result == {"broker": {"5": "OK"}}
    assert znode(zk, kz.config_path("brokers", "5"))["config"] == {LEADER_RATE: str(rate)}
    left = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "5")])
    assert left["broker"]["5"].keys() == {LEADER_RATE}
    wait_for(lambda: FOLLOWER_RATE not in sim.broker_config["5"], what="the controller to drop the deleted key")


def test_invalid_throttles_are_refused_and_nothing_is_written(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = connect(sim)
    notes_before = zk.get_children(kz.CONFIG_CHANGES)
    for resource, bad in (
        (ConfigResource(ConfigResourceType.BROKER, "1", {LEADER_RATE: "fast"}), "Not a number of type LONG"),
        (ConfigResource(ConfigResourceType.BROKER, "1", {LEADER_RATE: "-1"}), "Value must be at least 0"),
        (ConfigResource(ConfigResourceType.TOPIC, "t", {"min.insync.replicas": "0"}), "Value must be at least 1"),
        (ConfigResource(ConfigResourceType.TOPIC, "t", {"min.insync.replicas": str(2**31)}),
         "Not a number of type INT"),
        (ConfigResource(ConfigResourceType.TOPIC, "t", {LEADER_REPLICAS: "0-1"}), "Must be the literal '*'"),
        (ConfigResource(ConfigResourceType.TOPIC, "t", {LEADER_REPLICAS: (AlterConfigOp.APPEND, "x:1")}), "Must be"),
        (ConfigResource(ConfigResourceType.BROKER, "1", {LEADER_RATE: (AlterConfigOp.APPEND, "5")}),
         "append is not allowed"),
    ):
        result = admin.alter_configs([resource])
        (outcome,) = (v for by_name in result.values() for v in by_name.values())
        assert outcome.startswith("[Error 40] InvalidConfigurationError") and bad in outcome, outcome
    # A valid change with validate_only is checked, not written.
    ok = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", {LEADER_RATE: "100"})], validate_only=True)
    assert ok == {"broker": {"1": "OK"}}
    assert not zk.exists(kz.config_path("brokers", "1")) and not zk.exists(kz.config_path("topics", "t"))
    assert zk.get_children(kz.CONFIG_CHANGES) == notes_before
    # APPEND works on the replica lists, as Kafka's list-typed configs do.
    for more in ("0:2", "0:3,0:2"):
        append = {FOLLOWER_REPLICAS: (AlterConfigOp.APPEND, more)}
        assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "t", append)]) == {"topic": {"t": "OK"}}
    assert znode(zk, kz.config_path("topics", "t"))["config"] == {FOLLOWER_REPLICAS: "0:2,0:3"}


def test_config_resources_kafka_refuses(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = connect(sim)
    assert admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "nope", {LEADER_REPLICAS: "*"})],
                               raise_on_unknown=False)["topic"]["nope"].startswith("[Error 3] UnknownTopicOrPartition")
    # A broker describes and alters its own config only, or the cluster default ("", which kafka-python cannot send).
    R = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(version=4, resources=[
        R(resource_type=4, resource_name="2", configuration_keys=None),
        R(resource_type=4, resource_name="", configuration_keys=None),
        R(resource_type=2, resource_name="nope", configuration_keys=None)])
    results = raw_call(sim.kafka_ports[1], request, DescribeConfigsResponse).results
    assert [(r.resource_name, r.error_code) for r in results] == [("2", 42), ("", 0), ("nope", 3)]
    assert "expected 1" in results[0].error_message
    assert results[1].configs == []  # nothing set cluster-wide


def test_a_config_kafka_answers_with_an_error_is_raised_not_read_as_empty(zk, make_sim, connect):
    """kafka-python reads a DescribeConfigs result that carries an error as a resource with no configs: a throttle
    whose config could not be read would look removed. ``kafka_admin.describe_configs`` raises Kafka's error instead;
    only a topic that no longer exists reads as having none."""
    from rebalancer import kafka_admin as ka

    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = connect(sim)
    throttle(admin, 5 * MB, [1, 2], "t", "0:0", "0:1")
    broker = ConfigResource(ConfigResourceType.BROKER, "2")
    # kafka-python itself: broker 1 asked for broker 2's config answers error 42, read as "no configs"
    request = admin._describe_configs_request([broker], False)
    answer = admin._manager.run(lambda: admin._manager.send(request, node_id=1))
    assert [r.error_code for r in answer.results] == [42]
    assert admin._describe_configs_process_responses([answer], "modified") == {"broker": {"2": {}}}
    with pytest.raises(ke.InvalidRequestError, match="broker '2'"):
        ka.configs_seen_by(admin, 1, [broker])
    assert ka.configs_seen_by(admin, 2, [broker])["broker"]["2"][LEADER_RATE]["value"] == str(5 * MB)
    seen = ka.describe_configs(admin, [broker, ConfigResource(ConfigResourceType.TOPIC, "t"),
                                       ConfigResource(ConfigResourceType.TOPIC, "gone")])
    assert seen["broker"]["2"][FOLLOWER_RATE]["value"] == str(5 * MB)
    assert seen["topic"]["t"][LEADER_REPLICAS]["value"] == "0:0" and seen["topic"]["gone"] == {}


# -- reassignment ---------------------------------------------------------------------------------------------
def test_reassignment_through_the_api_runs_to_completion_without_the_admin_znode(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1, 2), 0, (0, 1, 2), 100 * MB),
                               Partition("t", 1, (1, 2), 1, (1, 2), 1)), acceleration=20)
    admin = connect(sim)
    throttle(admin, 20 * MB, [0, 3, 4], "t", "*", "*")
    wait_for(lambda: sim.topic_config.get("t"), what="the throttle to reach the controller")
    tp = TopicPartition("t", 0)
    assert admin.alter_partition_reassignments({tp: [3, 4, 1]}) == {tp: None}
    flight = admin.list_partition_reassignments()
    assert flight == {tp: {"replicas": [3, 4, 1, 0, 2], "adding_replicas": [3, 4], "removing_replicas": [0, 2]}}
    assert admin.list_partition_reassignments([TopicPartition("t", 1)]) == {}
    topic = znode(zk, kz.topic_path("t"))
    assert topic["partitions"]["0"] == [3, 4, 1, 0, 2] and topic["adding_replicas"] == {"0": [3, 4]}
    assert not zk.exists(kz.REASSIGN)
    wait_for(lambda: not admin.list_partition_reassignments(), timeout=30, what="the move to complete")
    topic = znode(zk, kz.topic_path("t"))
    assert topic["partitions"] == {"0": [3, 4, 1], "1": [1, 2]}
    assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    state = znode(zk, kz.state_path("t", 0))
    assert sorted(state["isr"]) == [1, 3, 4] and state["leader"] == 3
    assert not zk.exists(kz.REASSIGN)
    assert [(e["topic"], e["partition"], e["target"], e["bytes_copied"]) for e in sim.completed] == \
           [("t", 0, [3, 4, 1], 200 * MB)]
    # The same target again is a no-op.
    assert admin.alter_partition_reassignments({tp: [3, 4, 1]}) == {tp: None}
    assert not admin.list_partition_reassignments() and len(sim.completed) == 1


def test_one_request_starts_all_its_moves_in_the_same_controller_tick(zk, make_sim, connect):
    # Kafka's controller takes a request as one event. Here each partition's start gives the controller loop a chance
    # to tick (as a loaded machine does): the moves must still start at one simulated instant, or a batch's copy
    # span grows by the request's own handling time.
    sim = make_sim(six_brokers(*(Partition("t", i, (0, 1), 0, (0, 1), 100 * MB) for i in range(3))), acceleration=20)
    admin = connect(sim)
    throttle(admin, MB, [0, 1, 4, 5], "t", "*", "*")
    wait_for(lambda: sim.topic_config.get("t"), what="the throttle to reach the controller")
    reassign = sim.api_reassign

    def reassign_then_let_the_loop_tick(tp, target):
        reassign(tp, target)
        steps, deadline = sim.steps, time.monotonic() + 0.3
        while sim.steps == steps and time.monotonic() < deadline:
            time.sleep(0.01)

    sim.api_reassign = reassign_then_let_the_loop_tick
    tps = [TopicPartition("t", i) for i in range(3)]
    assert admin.alter_partition_reassignments({tp: [4, 5] for tp in tps}) == {tp: None for tp in tps}
    with sim.lock:
        started = {tp: move.started for tp, move in sim.moves.items()}
    assert len(started) == 3 and len(set(started.values())) == 1, started


def test_cancel_mid_copy_reverts_to_the_original_replicas(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 100 * MB)), acceleration=10)
    admin = connect(sim)
    tp = TopicPartition("t", 0)
    assert admin.alter_partition_reassignments({tp: None}) == {tp: ke.NoReassignmentInProgressError}
    throttle(admin, MB, [0, 4, 5], "t", "*", "*")
    wait_for(lambda: sim.topic_config.get("t"), what="the throttle to reach the controller")
    admin.alter_partition_reassignments({tp: [4, 5]})
    wait_for(lambda: sim.disk[("t", 0)].get(5, 0) > 0, what="copying to start")
    epoch = znode(zk, kz.state_path("t", 0))["leader_epoch"]

    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    assert admin.list_partition_reassignments() == {}
    topic = znode(zk, kz.topic_path("t"))
    assert topic["partitions"] == {"0": [0, 1]} and topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    state = znode(zk, kz.state_path("t", 0))
    assert state["leader"] == 0 and state["isr"] == [0, 1] and state["leader_epoch"] > epoch
    assert set(sim.disk[("t", 0)]) == {0, 1}  # the partial copies are gone
    sim.settle()
    assert not sim.completed and not sim.moves
    logdirs = {d["broker"]: d["log_dirs"][0]["topics"] for d in admin.describe_log_dirs()}
    assert logdirs[4] == [] and logdirs[5] == []


def test_retargeting_a_moving_partition_keeps_the_original_and_the_useful_copies(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 100 * MB)), acceleration=10)
    admin = connect(sim)
    throttle(admin, MB, [0, 2, 3, 4], "t", "*", "*")
    wait_for(lambda: sim.topic_config.get("t"), what="the throttle to reach the controller")
    tp = TopicPartition("t", 0)
    admin.alter_partition_reassignments({tp: [2, 3]})
    wait_for(lambda: sim.disk[("t", 0)].get(2, 0) > 0, what="copying to start")
    admin.alter_partition_reassignments({tp: [2, 4]})
    copied = sim.disk[("t", 0)][2]
    assert admin.list_partition_reassignments() == {
        tp: {"replicas": [2, 4, 0, 1], "adding_replicas": [2, 4], "removing_replicas": [0, 1]}}
    assert 3 not in sim.disk[("t", 0)] and copied > 0
    wait_for(lambda: sim.disk[("t", 0)][2] > copied, what="broker 2 to keep copying")
    # Back to the original replicas: nothing to add, so it completes at once.
    admin.alter_partition_reassignments({tp: [1, 0]})
    assert admin.list_partition_reassignments() == {}
    assert znode(zk, kz.topic_path("t"))["partitions"] == {"0": [1, 0]}
    assert set(sim.disk[("t", 0)]) == {0, 1}


def test_reassignments_kafka_refuses(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    sim.kill_broker(5)
    admin = connect(sim)
    result = admin.alter_partition_reassignments({
        TopicPartition("t", 0): [2, 2],  # duplicates
        TopicPartition("t", 1): [0, 1],  # no such partition
        TopicPartition("nope", 0): [0, 1],
    })
    assert result == {TopicPartition("t", 0): ke.InvalidReplicationAssignmentError,
                      TopicPartition("t", 1): ke.UnknownTopicOrPartitionError,
                      TopicPartition("nope", 0): ke.UnknownTopicOrPartitionError}
    for target in ([0, 99], [0, 5], [0, -1]):  # unknown broker, dead broker, negative id
        assert admin.alter_partition_reassignments({TopicPartition("t", 0): target}) == \
               {TopicPartition("t", 0): ke.InvalidReplicationAssignmentError}
    # The messages are Kafka's (kafka-python keeps only the error class).
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    request = AlterPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=[
        T(name="t", partitions=[T.ReassignablePartition(partition_index=0, replicas=[0, 5])])])
    answer = raw_call(sim.kafka_ports[0], request, AlterPartitionReassignmentsResponse)
    (partition,) = answer.responses[0].partitions
    assert partition.error_code == 39 and "not alive" in partition.error_message
    assert not sim.moves and znode(zk, kz.topic_path("t"))["partitions"] == {"0": [0, 1]}


def test_cancelling_a_zookeeper_move_also_clears_the_admin_znode(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 100 * MB),
                               Partition("t", 1, (0, 1), 0, (0, 1), 100 * MB)), acceleration=5)
    admin = connect(sim)
    throttle(admin, MB, [0, 2, 3], "t", "*", "*")
    wait_for(lambda: sim.topic_config.get("t"), what="the throttle to reach the controller")
    body = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 2]},
                                         {"topic": "t", "partition": 1, "replicas": [0, 3]}]}
    zk.create(kz.REASSIGN, kz.encode(body))
    wait_for(lambda: len(admin.list_partition_reassignments()) == 2, what="both ZooKeeper moves to be listed")
    assert admin.alter_partition_reassignments({TopicPartition("t", 0): None}) == {TopicPartition("t", 0): None}
    assert kz.parse_reassignment(zk.get(kz.REASSIGN)[0]) == {("t", 1): [0, 3]}
    admin.alter_partition_reassignments({TopicPartition("t", 1): None})
    assert not zk.exists(kz.REASSIGN)
    assert znode(zk, kz.topic_path("t"))["partitions"] == {"0": [0, 1], "1": [0, 1]}


# -- elections and the controller --------------------------------------------------------------------------------
def test_elect_leaders_is_synchronous_and_reports_kafkas_codes(zk, make_sim, connect):
    sim = make_sim(six_brokers(
        Partition("t", 0, (0, 1), 0, (0, 1), 1),
        Partition("t", 1, (2, 3), 2, (2, 3), 1),
        Partition("t", 2, (4, 1), 4, (4, 1), 1),
    ))
    sim.kill_broker(2)
    sim.restart_broker(2)  # t-1 is led by 3 now, its preferred replica 2 is back in the ISR
    sim.kill_broker(4)  # t-2's preferred replica is down
    admin = connect(sim)
    answer = admin.elect_leaders(0, {"t": [0, 1, 2, 9]}, raise_errors=False)
    codes = {p.partition_id: p.error_code for r in answer.replica_election_results for p in r.partition_result}
    assert codes == {0: 84, 1: 0, 2: 80, 9: 3}  # ELECTION_NOT_NEEDED, done, PREFERRED_LEADER_NOT_AVAILABLE, unknown
    state = znode(zk, kz.state_path("t", 1))
    assert state["leader"] == 2 and state["leader_epoch"] == 2
    # Asked for every partition (null), Kafka reports only those it elected or failed.
    P = ElectLeadersRequest
    everything = raw_call(sim.kafka_ports[0], P(version=2, election_type=0, topic_partitions=None, timeout_ms=1000),
                          ElectLeadersResponse)
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in everything.replica_election_results] == [("t", [(2, 80)])]
    unclean = raw_call(sim.kafka_ports[0], P(version=2, election_type=1, timeout_ms=1000,
                                             topic_partitions=[P.TopicPartitions(topic="t", partitions=[2])]),
                       ElectLeadersResponse)
    assert unclean.replica_election_results[0].partition_result[0].error_code == 42


def test_controller_requests_to_another_broker_get_not_controller_and_the_client_follows(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    listing = raw_call(sim.kafka_ports[3], ListPartitionReassignmentsRequest(version=0, timeout_ms=1000, topics=None),
                       ListPartitionReassignmentsResponse)
    assert listing.error_code == 41
    admin = connect(sim)
    admin._controller_id = 3  # a stale controller id, as after a controller move
    assert admin.list_partition_reassignments() == {}
    assert admin._controller_id == 0
    # The controller moves to the lowest live broker when it dies.
    sim.kill_broker(0)
    meta = raw_call(sim.kafka_ports[2], MetadataRequest(version=12, topics=[]), MetadataResponse)
    assert meta.controller_id == 1 and [b.node_id for b in meta.brokers] == [1, 2, 3, 4, 5]


def test_killed_broker_leaves_metadata_and_refuses_connections_until_restarted(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (2, 1), 2, (2, 1), 1)))
    port = sim.kafka_ports[2]
    held = socket.create_connection(("127.0.0.1", port), timeout=5)  # an open client connection
    sim.kill_broker(2)
    assert closed_by_peer(held)
    held.close()
    assert refuses(port)
    assert not zk.exists(kz.broker_path(2))
    admin = connect(sim)
    assert 2 not in [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
    assert f"127.0.0.1:{port}" not in sim.bootstrap
    (partition,) = admin.describe_topics(["t"])[0]["partitions"]
    assert partition["leader_id"] == 1 and partition["offline_replicas"] == [2]

    sim.restart_broker(2)
    assert sim.kafka_ports[2] == port and znode(zk, kz.broker_path(2))["port"] == port
    assert 2 in [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
    # kafka-python addresses brokers from its cached metadata, refreshed every metadata_max_age_ms: a new client
    # sees the returned broker at once.
    assert connect(sim).describe_log_dirs(brokers=[2])[0]["log_dirs"][0]["topics"][0]["name"] == "t"


# -- the protocol ---------------------------------------------------------------------------------------------------
def test_api_versions_newer_than_supported_gets_kafkas_downgrade_answer(zk, make_sim, connect, monkeypatch):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    # A v5 request (newer than the broker and kafka-python know): answered as v0 with UNSUPPORTED_VERSION and the
    # ApiVersions range; the connection stays open and the client's retry at v4 gets the full list.
    with socket.create_connection(("127.0.0.1", sim.kafka_ports[0]), timeout=5) as conn:
        header = struct.pack(">hhih", ApiVersionsRequest.API_KEY, 5, 41, 3) + b"abc" + b"\x00"
        body = b"\x05kafka\x02x\x00"
        conn.sendall(struct.pack(">i", len(header + body)) + header + body)
        error = ApiVersionsResponse.decode(read_frame(conn), version=0, header=True)
        assert (error.header.correlation_id, error.error_code) == (41, 35)
        assert [(k.api_key, k.min_version, k.max_version) for k in error.api_keys] == [(18, 0, 4)]
        retry = ApiVersionsRequest(version=4, client_software_name="x", client_software_version="1")
        retry.with_header(correlation_id=42, client_id="raw")
        conn.sendall(retry.encode(header=True, framed=True))
        full = ApiVersionsResponse.decode(read_frame(conn), version=4, header=True)
        assert full.error_code == 0
        advertised = {k.api_key: (k.min_version, k.max_version) for k in full.api_keys}
        assert advertised == {**kafka_listener.KAFKA_ZK_BROKER_VERSIONS, **kafka_listener.SUPPORTED_VERSIONS}
        assert advertised[1] == (0, 17)  # Fetch v17: what tells a client it is a 3.9 broker
    # A broker that knows only ApiVersions v0-2: kafka-python's v4 request is refused, it retries at v2, and works.
    monkeypatch.setitem(kafka_listener.SUPPORTED_VERSIONS, ApiVersionsRequest.API_KEY, (0, 2))
    admin = connect(sim)
    assert admin.describe_cluster()["controller_id"] == 0


def _request(api_key: int, version: int) -> tuple[Any, Callable[[Any], bool]]:
    """A request about topic t at ``version``, and what the answer must satisfy."""
    D, E, I = DescribeConfigsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest.AlterConfigsResource
    if api_key == ApiVersionsRequest.API_KEY:
        return ApiVersionsRequest(version=version), lambda r: r.error_code == 0
    if api_key == MetadataRequest.API_KEY:  # v0 has no null: an empty list asks for every topic
        return (MetadataRequest(version=version, topics=None if version else []),
                lambda r: [(t.name, len(t.partitions)) for t in r.topics] == [("t", 1)])
    if api_key == DescribeClusterRequest.API_KEY:
        return DescribeClusterRequest(version=version), lambda r: [b.broker_id for b in r.brokers] == list(range(6))
    if api_key == DescribeConfigsRequest.API_KEY:
        resource = D.DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None)
        return (D(version=version, resources=[resource]),
                lambda r: {c.name for c in r.results[0].configs} == {LEADER_REPLICAS, FOLLOWER_REPLICAS,
                                                                      "retention.ms", "retention.bytes",
                                                                      "min.insync.replicas"})
    if api_key == IncrementalAlterConfigsRequest.API_KEY:
        change = I.AlterableConfig(name=LEADER_REPLICAS, config_operation=0, value="*")
        return (IncrementalAlterConfigsRequest(version=version, validate_only=True, resources=[
            I(resource_type=2, resource_name="t", configs=[change])]), lambda r: r.responses[0].error_code == 0)
    if api_key == AlterPartitionReassignmentsRequest.API_KEY:
        return (AlterPartitionReassignmentsRequest(version=version, topics=[]),
                lambda r: r.error_code == 0 and r.responses == [])
    if api_key == ListPartitionReassignmentsRequest.API_KEY:
        return (ListPartitionReassignmentsRequest(version=version, topics=None),
                lambda r: r.error_code == 0 and r.topics == [])
    if api_key == ElectLeadersRequest.API_KEY:
        return (E(version=version, topic_partitions=[E.TopicPartitions(topic="t", partitions=[0])]),
                lambda r: r.replica_election_results[0].partition_result[0].error_code == 84)
    if api_key == CreateTopicsRequest.API_KEY:  # v0 has no validate_only: it creates (on broker 5, not asked here)
        return (CreateTopicsRequest(version=version, topics=[creatable(f"new-v{version}", assignments={0: [5]})],
                                    timeout_ms=5000, validate_only=True),
                lambda r: [(t.name, t.error_code) for t in r.topics] == [(f"new-v{version}", 0)])
    if api_key == DeleteTopicsRequest.API_KEY:
        asked = {"topics": [DeleteTopicsRequest.DeleteTopicState(name="nope")]} if version >= 6 else \
            {"topic_names": ["nope"]}
        return (DeleteTopicsRequest(version=version, timeout_ms=1000, **asked),
                lambda r: [(t.name, t.error_code) for t in r.responses] == [("nope", 3)])
    assert api_key == DescribeLogDirsRequest.API_KEY
    return DescribeLogDirsRequest(version=version, topics=None), lambda r: r.results[0].topics[0].name == "t"


def test_every_advertised_version_is_answered(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    wrong = []
    for key, (low, high) in sorted(kafka_listener.SUPPORTED_VERSIONS.items()):
        for version in range(low, high + 1):
            request, check = _request(key, version)
            answer = raw_call(sim.kafka_ports[0], request, kafka_listener.APIS[key].response)
            if answer.header.correlation_id != 7 or not check(answer):
                wrong.append(answer)
    assert not wrong


def test_malformed_requests_close_only_their_connection(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = connect(sim)
    port = sim.kafka_ports[0]
    bad_frames = [
        struct.pack(">i", 200 * MB),  # over socket.request.max.bytes
        struct.pack(">i", 12) + struct.pack(">hhih", 999, 0, 1, -1) + b"\x00\x00",  # unknown API
        struct.pack(">i", 10) + struct.pack(">hhih", MetadataRequest.API_KEY, 13, 1, -1),  # unsupported version
        struct.pack(">i", 11) + struct.pack(">hhih", MetadataRequest.API_KEY, 12, 1, -1) + b"\x07",  # truncated body
        struct.pack(">i", 3) + b"abc",  # no header
    ]
    for frame in bad_frames:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(frame)
            assert closed_by_peer(conn), frame
    assert admin.describe_cluster()["controller_id"] == 0
    assert sim.error is None


def test_stop_closes_every_listener(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    held = socket.create_connection(("127.0.0.1", sim.kafka_ports[1]), timeout=5)
    sim.stop()
    assert closed_by_peer(held)
    held.close()
    assert all(refuses(port) for port in sim.kafka_ports.values())
    assert sim.bootstrap == ""


def test_sim_up_publishes_the_bootstrap_in_sim_json_and_status(tmp_path, zk_server):
    from rebalancer.sim.scenarios import ScenarioParams
    from rebalancer.sim.service import down, up

    sim_dir = tmp_path / "up"
    state = up(sim_dir, scenario="new-brokers", params=ScenarioParams(partitions=12), zk_hosts=zk_server.hosts,
               chroot=f"/up-{uuid.uuid4().hex[:8]}", timeout=60)
    try:
        assert json.loads((sim_dir / "sim.json").read_text())["kafka_bootstrap"] == state["kafka_bootstrap"]
        assert state["kafka_bootstrap"].startswith("kafka://127.0.0.1:")
        admin = KafkaAdminClient(bootstrap_servers=state["kafka_bootstrap"][len("kafka://"):], request_timeout_ms=5000,
                                 bootstrap_timeout_ms=5000)
        try:
            assert len(admin.describe_cluster()["brokers"]) == len(state["kafka_bootstrap"].split(","))
        finally:
            admin.close()
        status = run_cli("sim", "status", "--dir", str(sim_dir))
        assert status.returncode == 0 and state["kafka_bootstrap"] in status.stdout, status.stdout
    finally:
        down(sim_dir)


# -- topic creation and deletion (CreateTopics, DeleteTopics) --------------------------------------------------------
LOCK = "__rebalancer_lock"


def creatable(name: str, partitions: int = -1, rf: int = -1, assignments: dict[int, list[int]] | None = None,
              configs: dict[str, str | None] | None = None) -> Any:
    T = CreateTopicsRequest.CreatableTopic
    return T(name=name, num_partitions=partitions, replication_factor=rf,
             assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                          for p, b in (assignments or {}).items()],
             configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def create_raw(port: int, *topics: Any, timeout_ms: int = 5000, validate_only: bool = False, version: int = 7) -> Any:
    request = CreateTopicsRequest(version=version, topics=list(topics), timeout_ms=timeout_ms,
                                  validate_only=validate_only)
    return raw_call(port, request, CreateTopicsResponse).topics


def as_uuid(topic_id: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def topic_admin(connect: Callable[..., KafkaAdminClient], sim: Any) -> KafkaAdminClient:
    """A KafkaAdminClient that takes the brokers for the Kafka 3.9 they are.

    kafka-python guesses a broker's version from the versions of APIs such as Fetch and Produce, which the
    simulated brokers neither serve nor advertise, and guesses 1.0; it then refuses, before sending anything, a
    CreateTopics with the partition count and replication factor left at -1 (as an explicit assignment needs) for
    any broker older than 2.4. A real 3.9 broker is guessed as 3.9. The requests on the wire do not depend on the
    guess (their versions come from the advertised ranges)."""
    admin = connect(sim)
    assert admin._manager.broker_version_data.broker_version == (3, 9)  # inferred from the advertised table
    return admin


def deleted(zk, topic: str) -> bool:
    """The deletion is complete: the controller deletes the topic znode, then its config, then the mark, last."""
    return not zk.exists(kz.topic_path(topic)) and not zk.exists(f"/admin/delete_topics/{topic}")


def test_create_topics_with_an_explicit_assignment_then_already_exists(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = topic_admin(connect, sim)
    (result,) = admin.create_topics({LOCK: {"assignments": {0: [2]}}})["topics"]
    lock = znode(zk, kz.topic_path(LOCK))
    assert lock == {"version": 3, "partitions": {"0": [2]}, "topic_id": lock["topic_id"], "adding_replicas": {},
                    "removing_replicas": {}}
    assert znode(zk, kz.config_path("topics", LOCK)) == {"version": 1, "config": {}}
    assert (result["name"], result["error_code"], result["error_message"]) == (LOCK, 0, None)
    assert str(result["topic_id"]) == str(as_uuid(lock["topic_id"]))
    assert (result["num_partitions"], result["replication_factor"]) == (1, 1)
    assert result["configs"]["cleanup.policy"]["value"] == "delete"
    assert result["configs"]["retention.ms"] == {"value": "604800000", "read_only": False,
                                                 "config_source": "DEFAULT_CONFIG", "is_sensitive": False}
    # The answer comes once every partition has a leader, so Metadata has the topic at once, with its id.
    (described,) = admin.describe_topics([LOCK])
    assert described["error_code"] == 0 and described["topic_id"] == str(as_uuid(lock["topic_id"]))
    assert [(p["leader_id"], p["replica_nodes"], p["isr_nodes"]) for p in described["partitions"]] == [(2, [2], [2])]
    assert znode(zk, kz.state_path(LOCK, 0))["leader"] == 2
    with sim.lock:
        assert sim.disk[(LOCK, 0)] == {2: 0.0}
    assert [t["name"] for t in admin.describe_log_dirs(brokers=[2])[0]["log_dirs"][0]["topics"]] == [LOCK]

    with pytest.raises(ke.TopicAlreadyExistsError):
        admin.create_topics({LOCK: {"assignments": {0: [3]}}})
    (again,) = create_raw(sim.kafka_ports[0], creatable(LOCK, assignments={0: [3]}))
    assert (again.error_code, again.error_message) == (36, f"Topic '{LOCK}' already exists.")
    assert (again.num_partitions, again.replication_factor, again.configs) == (-1, -1, [])
    assert znode(zk, kz.topic_path(LOCK)) == lock

    # Defaults (-1): the placement starts at the lowest live broker; configs given are the topic's dynamic ones.
    (made,) = admin.create_topics({"c": {"num_partitions": 2, "replication_factor": 2,
                                         "configs": {"retention.ms": "1000"}}})["topics"]
    assert made["error_code"] == 0 and (made["num_partitions"], made["replication_factor"]) == (2, 2)
    assert made["configs"]["retention.ms"]["value"] == "1000"
    assert made["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert znode(zk, kz.topic_path("c"))["partitions"] == {"0": [0, 1], "1": [1, 2]}
    assert znode(zk, kz.config_path("topics", "c")) == {"version": 1, "config": {"retention.ms": "1000"}}
    (default,) = admin.create_topics(["d"])["topics"]  # num.partitions and default.replication.factor: 1
    assert (default["error_code"], default["num_partitions"], default["replication_factor"]) == (0, 1, 1)


def test_topic_created_through_zookeeper_appears_in_metadata_with_its_id(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = connect(sim)
    topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    zk.create(kz.config_path("topics", LOCK), kz.encode({"version": 1, "config": {}}), makepath=True)
    zk.create(kz.topic_path(LOCK), kz.encode({"version": 3, "partitions": {"0": [4]}, "topic_id": topic_id,
                                              "adding_replicas": {}, "removing_replicas": {}}))
    described = wait_for(lambda: [t for t in admin.describe_topics([LOCK]) if t["error_code"] == 0], timeout=5,
                         what="the topic in Metadata")
    assert described[0]["topic_id"] == str(as_uuid(topic_id))
    assert [(p["leader_id"], p["isr_nodes"]) for p in described[0]["partitions"]] == [(4, [4])]
    assert admin.describe_topics([as_uuid(topic_id)])[0]["name"] == LOCK


def test_delete_topics_by_id_and_by_name(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = topic_admin(connect, sim)
    admin.create_topics({"by-id": {"assignments": {0: [1, 2], 1: [2, 3]}}, "by-name": {"assignments": {0: [3]}},
                         "old": {"num_partitions": 1, "replication_factor": 1}})
    ids = {t["name"]: uuid.UUID(str(t["topic_id"])) for t in admin.describe_topics(["by-id", "by-name", "old"])}
    assert ids["by-id"] == as_uuid(znode(zk, kz.topic_path("by-id"))["topic_id"])

    (deleted,) = admin.delete_topics([ids["by-id"]])["topics"]
    assert (deleted["name"], deleted["error_code"]) == ("by-id", 0) and str(deleted["topic_id"]) == str(ids["by-id"])
    for path in (kz.topic_path("by-id"), kz.config_path("topics", "by-id")):
        assert not zk.exists(path)  # the answer comes when the deletion is complete
    assert zk.get_children("/admin/delete_topics") == []
    assert admin.describe_topics(["by-id"])[0]["error_code"] == 3
    with sim.lock:
        assert all(tp[0] != "by-id" for tp in {*sim.state, *sim.disk})

    assert [(t["name"], t["error_code"]) for t in admin.delete_topics(["by-name"])["topics"]] == [("by-name", 0)]
    assert not zk.exists(kz.topic_path("by-name")) and zk.get_children("/admin/delete_topics") == []
    # DeleteTopics v0-v5 name the topics only.
    answer = raw_call(sim.kafka_ports[0], DeleteTopicsRequest(version=3, topic_names=["old"], timeout_ms=5000),
                      DeleteTopicsResponse)
    assert [(r.name, r.error_code) for r in answer.responses] == [("old", 0)] and not zk.exists(kz.topic_path("old"))

    unknown = admin.delete_topics(["nope", uuid.uuid4()], raise_errors=False)["topics"]
    assert [(t["name"], t["error_code"]) for t in unknown] == [("nope", 3), (None, 100)]
    with pytest.raises(ke.UnknownTopicOrPartitionError):
        admin.delete_topics(["by-name"])
    assert [t["name"] for t in admin.describe_topics()] == ["t"]


def test_a_topic_marked_for_deletion_cannot_be_created_until_it_is_gone(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    admin = topic_admin(connect, sim)
    admin.create_topics({LOCK: {"assignments": {0: [4, 5]}}})
    sim.kill_broker(5)
    # Kafka drops the topic from every broker's metadata when deletion starts, and answers then; the replica on the
    # dead broker keeps it in ZooKeeper, marked for deletion, until the broker is back.
    assert [(t["name"], t["error_code"]) for t in admin.delete_topics([LOCK])["topics"]] == [(LOCK, 0)]
    assert zk.exists(kz.topic_path(LOCK)) and zk.get_children("/admin/delete_topics") == [LOCK]
    assert admin.describe_topics([LOCK])[0]["error_code"] == 3
    (refused,) = create_raw(sim.kafka_ports[0], creatable(LOCK, assignments={0: [4]}))
    assert (refused.error_code, refused.error_message) == (36, f"Topic '{LOCK}' is marked for deletion.")
    with pytest.raises(ke.TopicAlreadyExistsError):
        admin.create_topics({LOCK: {"assignments": {0: [4]}}})
    assert admin.delete_topics([LOCK], raise_errors=False)["topics"][0]["error_code"] == 3  # no longer in metadata
    sim.settle()
    assert zk.exists(kz.topic_path(LOCK))

    sim.restart_broker(5)
    wait_for(lambda: deleted(zk, LOCK), timeout=10, what="the deletion to complete")
    assert zk.get_children("/admin/delete_topics") == []
    (created,) = admin.create_topics({LOCK: {"assignments": {0: [4]}}})["topics"]
    assert created["error_code"] == 0


def start_throttled_move(sim: Any, admin: KafkaAdminClient, rate: int) -> TopicPartition:
    """Move t-0 from [0, 1] to [0, 2] at ``rate`` bytes/s; returns once broker 2 has started copying."""
    throttle(admin, rate, [0, 2], "t", "*", "*")
    wait_for(lambda: sim.topic_config.get("t"), what="the throttle to reach the controller")
    tp = TopicPartition("t", 0)
    admin.alter_partition_reassignments({tp: [0, 2]})
    wait_for(lambda: sim.disk[("t", 0)].get(2, 0) > 0, what="copying to start")
    return tp


def test_deletion_of_a_topic_being_reassigned_waits_and_the_request_times_out(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 20 * MB), Partition("u", 0, (0, 1), 0, (0, 1), 1)),
                   acceleration=10)
    admin = topic_admin(connect, sim)
    tp = start_throttled_move(sim, admin, MB)
    started = time.monotonic()
    (late,) = admin.delete_topics(["t"], timeout_ms=300, raise_errors=False)["topics"]
    assert (late["name"], late["error_code"]) == ("t", 7)  # REQUEST_TIMED_OUT, as Kafka's delayed delete
    assert 0.25 < time.monotonic() - started < 3
    # Marked, but deletion has not started: the topic is still in metadata, so a create finds it there.
    assert zk.get_children("/admin/delete_topics") == ["t"] and admin.describe_topics(["t"])[0]["error_code"] == 0
    (exists,) = create_raw(sim.kafka_ports[0], creatable("t", assignments={0: [3]}))
    assert (exists.error_code, exists.error_message) == (36, "Topic 't' already exists.")
    # Kafka's controller takes no reassignment, not even a cancel, of a topic queued for deletion.
    assert admin.alter_partition_reassignments({tp: [0, 3]}) == {tp: ke.UnknownTopicOrPartitionError}
    assert admin.alter_partition_reassignments({tp: None}) == {tp: ke.UnknownTopicOrPartitionError}
    assert admin.list_partition_reassignments() == {
        tp: {"replicas": [0, 2, 1], "adding_replicas": [2], "removing_replicas": [1]}}
    # The move completes, then the deletion runs.
    wait_for(lambda: deleted(zk, "t"), timeout=20, what="the move, then the deletion")
    assert [(e["topic"], e["target"]) for e in sim.completed] == [("t", [0, 2])]
    assert zk.get_children("/admin/delete_topics") == []
    assert znode(zk, kz.topic_path("u"))["partitions"] == {"0": [0, 1]}


def test_create_topics_kafka_refuses(zk, make_sim, connect):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1), Partition("a_b", 0, (1, 2), 1, (1, 2), 1)))
    long_name = "x" * 250
    expected = {
        "bad name!": (17, "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII "
                          "alphanumerics, '.', '_' and '-'"),
        ".": (17, "Topic name is invalid: '.' is not allowed"),
        "..": (17, "Topic name is invalid: '..' is not allowed"),
        long_name: (17, f"Topic name is invalid: the length of '{long_name}' is longer than the max allowed "
                        "length 249"),
        "a.b": (17, "Topic 'a.b' collides with existing topics: a_b"),
        "t": (36, "Topic 't' already exists."),
        "dup": (39, "Duplicate replica assignment found: "),
        "gap": (39, "partitions should be a consecutive 0-based integer sequence"),
        "uneven": (39, "All partitions should have the same number of replicas"),
        "zero": (37, "Number of partitions must be larger than 0."),
        "norf": (38, "Replication factor must be larger than 0."),
        "big": (38, "Replication factor: 7 larger than available brokers: 6."),
        "both": (42, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used "
                     "at the same time."),
        "cfg": (40, "Unknown topic config name: no.such.config"),
        "nullcfg": (40, "Null value not supported for topic configs: retention.ms"),
        "thr": (40, "Invalid value 0-1 for configuration leader.replication.throttled.replicas: Must be the literal"),
        "__cluster_metadata": (42, "Creation of internal topic __cluster_metadata is prohibited."),
    }
    one = {0: [1]}
    topics = [creatable(n, assignments=one) for n in ("bad name!", ".", "..", long_name, "a.b", "t")] + [
        creatable("dup", assignments={0: [1, 1]}), creatable("gap", assignments={0: [1], 2: [2]}),
        creatable("uneven", assignments={0: [1, 2], 1: [3]}), creatable("zero", 0, 1), creatable("norf", 1, 0),
        creatable("big", 1, 7), creatable("both", 1, -1, assignments=one),
        creatable("cfg", assignments=one, configs={"no.such.config": "1"}),
        creatable("nullcfg", assignments=one, configs={"retention.ms": None}),
        creatable("thr", assignments=one, configs={"leader.replication.throttled.replicas": "0-1"}),
        creatable("__cluster_metadata", assignments=one), creatable("twice", assignments=one),
        creatable("twice", assignments=one)]
    results = create_raw(sim.kafka_ports[0], *topics)
    got = [(r.name, r.error_code, r.error_message) for r in results]
    assert [n for n, _, _ in got] == [t.name for t in topics]
    for name, code, message in got:
        if name == "twice":
            assert (code, message) == (42, "Found multiple entries for this topic.")
            continue
        assert code == expected[name][0] and message.startswith(expected[name][1]), (name, code, message)
    assert all((r.num_partitions, r.replication_factor, r.configs) == (-1, -1, []) for r in results)
    assert sorted(zk.get_children(kz.TOPICS)) == ["a_b", "t"] and zk.get_children("/config/topics") == []

    # validate_only checks and reports, and writes nothing.
    (ok,) = create_raw(sim.kafka_ports[0], creatable("ok", 3, 2), validate_only=True)
    assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (0, 3, 2)
    assert ok.topic_id in (None, uuid.UUID(int=0))  # no id: nothing was created
    assert len(ok.configs) == 36 and {c.name for c in ok.configs} >= {"cleanup.policy", "retention.ms"}
    assert not zk.exists(kz.topic_path("ok"))

    # Kafka 3.9 does not check the brokers of an explicit assignment (ZkAdminManager: "we don't check that
    # replicaAssignment contains unknown brokers"): the topic is created, no leader can be elected, the request
    # times out and the topic stays out of metadata.
    (ghost,) = create_raw(sim.kafka_ports[0], creatable("ghost", assignments={0: [99]}), timeout_ms=300)
    assert (ghost.error_code, ghost.error_message) == (7, None)
    assert znode(zk, kz.topic_path("ghost"))["partitions"] == {"0": [99]}
    sim.settle()
    assert not zk.exists(kz.state_path("ghost", 0))
    assert connect(sim).describe_topics(["ghost"])[0]["error_code"] == 3


def test_topic_requests_to_another_broker_get_not_controller(zk, make_sim):
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), 1)))
    (created,) = create_raw(sim.kafka_ports[3], creatable(LOCK, assignments={0: [3]}))
    assert created.error_code == 41
    deleted = raw_call(sim.kafka_ports[3], DeleteTopicsRequest(version=6, timeout_ms=1000, topics=[
        DeleteTopicsRequest.DeleteTopicState(name="t")]), DeleteTopicsResponse)
    assert [(r.name, r.error_code) for r in deleted.responses] == [("t", 41)]
    assert not zk.exists(kz.topic_path(LOCK)) and zk.get_children("/admin/delete_topics") == []


def test_a_reassignment_is_unaffected_by_topics_coming_and_going(zk, make_sim, connect):
    size, rate = 60 * MB, 2 * MB  # 30 simulated seconds: 3 s of wall clock for the topics to come and go
    sim = make_sim(six_brokers(Partition("t", 0, (0, 1), 0, (0, 1), size)), acceleration=10)
    admin = topic_admin(connect, sim)
    tp = start_throttled_move(sim, admin, rate)
    for _ in range(2):
        (made,) = admin.create_topics({LOCK: {"assignments": {0: [2]}}})["topics"]
        assert admin.delete_topics([uuid.UUID(str(made["topic_id"]))])["topics"][0]["error_code"] == 0
    zk.create(kz.topic_path("zk-made"), kz.encode({"version": 3, "partitions": {"0": [0]}, "adding_replicas": {},
                                                   "removing_replicas": {}}))
    zk.create("/admin/delete_topics/zk-made", b"")
    wait_for(lambda: deleted(zk, "zk-made"), timeout=10, what="the ZooKeeper topic to go")
    assert admin.list_partition_reassignments() == {
        tp: {"replicas": [0, 2, 1], "adding_replicas": [2], "removing_replicas": [1]}}
    wait_for(lambda: not sim.moves, timeout=30, what="the move to complete")
    event = sim.completed[-1]
    assert (event["topic"], event["target"], event["bytes_copied"]) == ("t", [0, 2], size)
    duration = event["finished_sim_s"] - event["started_sim_s"]
    assert abs(duration - size / rate) / (size / rate) < 0.10, duration
    assert znode(zk, kz.topic_path("t"))["partitions"] == {"0": [0, 2]}


# -- sim down ---------------------------------------------------------------------------------------------------------
def _sim_json(directory: Any, controller: dict[str, Any], zookeeper: dict[str, Any] | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sim.json").write_text(json.dumps({"zk_url": "zk://127.0.0.1:9/sim", "controller": controller,
                                                    "zookeeper": zookeeper}))


def _start_time(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot."""
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[19])


def test_sim_down_never_kills_a_process_that_merely_has_a_recorded_pid(tmp_path):
    import subprocess

    stranger = subprocess.Popen(["sleep", "300"])  # stands for whatever process got the pid after the simulator's
    try:
        began = _start_time(stranger.pid)
        cases = {
            "no identity recorded": ({"pid": stranger.pid}, None),
            "started at another time": ({"pid": stranger.pid, "start_time": began - 1},
                                        {"pid": stranger.pid, "port": 9, "start_time": began + 7}),
        }
        for case, (controller, zookeeper) in cases.items():
            directory = tmp_path / case.replace(" ", "-")
            _sim_json(directory, controller, zookeeper)
            result = run_cli("sim", "down", "--dir", str(directory))
            assert result.returncode == 0, result.stderr
            said = [ln for ln in result.stderr.splitlines() if ln.strip()]
            assert len(said) == (1 if zookeeper is None else 2), (case, said)  # one line per process left alone
            assert all(f"pid {stranger.pid}" in ln and "not stopping" in ln for ln in said), said
            assert stranger.poll() is None, case
            assert not (directory / "sim.json").exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_sim_down_stops_the_very_process_up_recorded(tmp_path):
    import subprocess

    from rebalancer.procs import process_identity

    ours = subprocess.Popen(["sleep", "300"])
    try:
        # The command line reads empty for a moment after Popen returns (the exec is still setting it up).
        ident = wait_for(lambda: (i := process_identity(ours.pid)) and i["cmdline"] and i, timeout=5,
                         what="sleep's command line")
        assert ident == {"pid": ours.pid, "start_time": _start_time(ours.pid), "cmdline": ["sleep", "300"]}
        _sim_json(tmp_path / "same", ident, None)
        result = run_cli("sim", "down", "--dir", str(tmp_path / "same"))
        assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
        assert ours.wait(timeout=10) == -15  # SIGTERM
    finally:
        if ours.poll() is None:
            ours.kill()
            ours.wait()
