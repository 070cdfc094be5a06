"""The engines the execution conformance suite runs on, behind one small interface.

    sim-zk, sim-kafka        the project's simulated cluster (ZooKeeper mode), through zk:// and kafka://
    kafka-3.9-zk             real Apache Kafka 3.9 (ZooKeeper mode, a real ZooKeeper) through zk://
    kafka-3.9-kafka          the same cluster through kafka:// (the Admin API)
    kafka-4-kafka            real Apache Kafka 4.x (KRaft: 3 combined controller+broker nodes, the rest brokers)

Every engine holds the same scenario: brokers 0, 1, 2 in racks a, b, c and new, empty brokers 3, 4 in rack d;
two RF-2 topics of 6 partitions, with real (incompressible) bytes on the real brokers. A test gets an ``Engine``
with the scenario freshly loaded, its snapshot taken and an add-brokers plan made (``run``), and operates the
cluster only through the engine's fault and foreign-tool methods, so the same test code runs everywhere.

A real cluster is started once per version for the whole session (start-up takes seconds, not milliseconds);
each test gets new topics (a fresh name prefix) after the previous test's are deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from waiting import wait_for as wait_until

from rebalancer.execute import approve, open_backend
from rebalancer.model import Cluster
from rebalancer.plan import plan_run_dir
from rebalancer.sim.scenarios import ScenarioParams, build_scenario
from rebalancer.snapshot import take_snapshot

MiB = 1024 * 1024
RACKS = {0: "a", 1: "b", 2: "c", 3: "d", 4: "d"}
NEW_BROKERS = [3, 4]
ENGINES = ["sim-zk", "sim-kafka", "kafka-3.9-zk", "kafka-3.9-kafka", "kafka-4-kafka"]
REAL_DATA_MIB = 48.0  # leader bytes on a real cluster (x RF 2 on disk): a throttled move takes seconds


def scenario(prefix: str = "") -> Cluster:
    """The conformance scenario (new-brokers: 3 brokers in 3 racks plus 2 new ones in rack d), topics prefixed."""
    c = build_scenario("new-brokers", ScenarioParams(brokers=3, racks=3, new_brokers=2, partitions=12, topics=2,
                                                     rf=2, mean_partition_mib=4))
    # Equal sizes: which broker is the busiest (and so the copy's physical bound) follows from the plan alone.
    return Cluster.build(c.brokers, [replace(p, topic=f"{prefix}{p.topic}", size_bytes=4 * MiB) for p in c.partitions],
                         dict(c.meta))


@dataclass
class Engine:
    name: str
    source: str                      # the URL the backend under test uses
    run: Path                        # a run directory: snapshot, add-brokers plan (approved)
    real: bool
    time_scale: float                # simulated seconds per wall second (1 on real Kafka)
    kill_broker: Callable[[int], None]
    restart_broker: Callable[[int], None]
    kill_controller: Callable[[], int]   # kill -9 the active controller, bring it back; returns its id
    foreign_reassign: Callable[[dict[tuple[str, int], list[int]], int], None]  # someone else's, at a throttle (B/s)
    foreign_cancel: Callable[[dict[tuple[str, int], list[int]]], None]
    # Producers writing into a partition at a rate (B/s of the engine's clock) from now on; returns stop() once the
    # leader has acknowledged ``lead`` bytes of their traffic.
    ingest: Callable[[tuple[str, int], float, float], Callable[[], Any]] = lambda tp, rate, lead: lambda: None
    controller_id: Callable[[], int | None] = lambda: None  # the active controller (a broker in ZooKeeper mode)
    completed_moves: Callable[[], list[tuple[str, int, tuple[int, ...]]] | None] = lambda: None
    # How long a batch's copy took: submitted until every move was at its target (the state's wall clock on a
    # real cluster; the simulator's own clock, from its move log, since its wall clock runs x time_scale).
    copy_seconds: Callable[[dict[str, Any]], float] = lambda batch: batch["copied_at"] - batch["submitting_at"]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.source.split("://", 1)[0]


def prepare_run(source: str, run: Path, *, sizes: str | None = None) -> Path:
    take_snapshot(source, run, sizes=sizes)
    # The contract is about execution: a counts plan (milliseconds; the load program may spend its 10 s cap here).
    plan_run_dir(run, "add-brokers", brokers=NEW_BROKERS, balance="counts")
    approve(run, by="conformance")
    return run


# -- the simulator ------------------------------------------------------------------------------------------------
def sim_engine(name: str, make_sim: Callable[..., Any], zk_url: str, tmp: Path, *, acceleration: float = 10.0) -> Engine:
    sim = make_sim(scenario(), acceleration=acceleration)
    source = zk_url if name == "sim-zk" else f"kafka://{sim.bootstrap}"
    sizes = f"file://{tmp / 'sim' / 'log-dirs.json'}" if name == "sim-zk" else None
    run = prepare_run(source, tmp / "run", sizes=sizes)

    def foreign_reassign(targets: dict[tuple[str, int], list[int]], rate: int) -> None:
        # As Kafka's tool does with --throttle: rates on every broker of the moves, replica lists on the topics.
        with open_backend(f"kafka://{sim.bootstrap}") as other:
            current = other.read_partitions(set(targets))
            for b in sorted({b for tp, r in targets.items() for b in (*r, *current[tp].replicas)}):
                other.alter_configs("brokers", str(b), {"leader.replication.throttled.rate": str(rate),
                                                        "follower.replication.throttled.rate": str(rate)})
            for (t, p), r in sorted(targets.items()):
                other.alter_configs("topics", t, {
                    "leader.replication.throttled.replicas": ",".join(f"{p}:{b}" for b in current[(t, p)].replicas),
                    "follower.replication.throttled.replicas": ",".join(
                        f"{p}:{b}" for b in r if b not in current[(t, p)].replicas)})
            # The simulated controller applies config changes on their notification: submit once it has them all.
            wanted_brokers = {str(b) for tp, r in targets.items() for b in (*r, *current[tp].replicas)}
            wait_until(lambda: all(sim.broker_config.get(b, {}).get("follower.replication.throttled.rate") == str(rate)
                                   for b in wanted_brokers)
                       and all("follower.replication.throttled.replicas" in sim.topic_config.get(t, {})
                               for t, _ in targets), 30, "the simulated controller to apply the throttles")
            other.submit(targets)

    def foreign_cancel(targets: dict[tuple[str, int], list[int]]) -> None:
        with open_backend(f"kafka://{sim.bootstrap}") as other:
            other.cancel(set(targets))
            for (kind, name), keys in other.throttle_configs().items():
                other.alter_configs(kind, name, {}, delete=list(keys))

    def kill_controller() -> int:
        cid = sim.controller_id
        sim.kill_broker(cid)
        # Down for 5 simulated seconds (its controller duties pass to the lowest live broker at once), then back.
        down_since = sim.sim_time
        wait_until(lambda: sim.sim_time - down_since >= 5.0, 60, "5 simulated seconds with the controller down")
        sim.restart_broker(cid)
        return cid

    def ingest(tp: tuple[str, int], rate: float, _lead: float) -> Callable[[], None]:
        sim.set_ingest(tp, rate)  # (the simulated producer never falls behind its pace: no lead needed)
        return lambda: sim.set_ingest(tp, 0)

    return Engine(name, source, run, False, acceleration, sim.kill_broker, sim.restart_broker, kill_controller,
                  foreign_reassign, foreign_cancel, ingest=ingest,
                  completed_moves=lambda: [(e["topic"], e["partition"], tuple(e["target"])) for e in sim.completed],
                  copy_seconds=lambda _batch: _sim_copy_seconds(sim), controller_id=lambda: sim.controller_id,
                  extra={"sim": sim, "bootstrap": sim.bootstrap})


def _sim_copy_seconds(sim: Any) -> float:
    events = [e for e in sim.completed if e["bytes_copied"]]
    return max(e["finished_sim_s"] for e in events) - min(e["started_sim_s"] for e in events)


# -- real Kafka -----------------------------------------------------------------------------------------------------
class RealCluster:
    """One local real Kafka cluster (rebalancer.localkafka) for the session; topics replaced per test."""

    def __init__(self, version: str, directory: Path) -> None:
        self.version = version
        self.dir = directory
        started = time.monotonic()
        self._start()
        self.startup_s = time.monotonic() - started
        self.prefixes: list[str] = []
        self.restart_before_next = False
        self.last_load: dict[str, Any] = {}

    def _start(self) -> None:
        from rebalancer.localkafka import nodes

        # Kafka's defaults, except a short ZooKeeper session (a killed broker leaves /brokers/ids in 6 s, not 18).
        config = {} if self.version.startswith("4") else {"zookeeper.session.timeout.ms": "6000"}
        nodes.start_cluster(self.dir, version=self.version, brokers=RACKS, broker_config=config)

    @property
    def state(self) -> dict[str, Any]:
        """The cluster's state file as it is now: a restarted broker has a new process (a stale copy would count it
        as down, and loading would wait for its replicas in vain)."""
        from rebalancer.localkafka.nodes import read_state

        return read_state(self.dir)

    @property
    def bootstrap(self) -> str:
        from rebalancer.localkafka.load import bootstrap_of

        return bootstrap_of(self.state)

    @property
    def libs(self) -> Path:
        from rebalancer.localkafka.nodes import libs_dir

        return libs_dir(self.version)

    def heal(self) -> None:
        """Every node running again (a failed test may have left one killed), and no reassignment in flight.

        After a controller was killed, a fresh cluster: Kafka 3.9 in ZooKeeper mode then fails to replicate topics
        created later (followers get UNKNOWN_TOPIC_ID from their leaders for good), which is Kafka's problem, not
        the next test's."""
        from rebalancer.localkafka import cluster as lk
        from rebalancer.localkafka import nodes
        from rebalancer.localkafka.nodes import status

        if self.restart_before_next:
            nodes.stop_cluster(self.dir)
            shutil.rmtree(self.dir, ignore_errors=True)
            self._start()
            self.prefixes = []
            self.restart_before_next = False

        for proc in status(self.dir)["processes"]:
            if proc["id"] is not None and not proc["alive"]:
                lk.restart_broker(self.dir, proc["id"], in_sync=False)
        # A failed test may leave a move in flight or a throttle behind, which would slow every later one to a crawl.
        with open_backend(f"kafka://{self.bootstrap}") as backend:
            flight = backend.in_flight()
            if flight:
                backend.cancel(set(flight))
            for (kind, name), keys in backend.throttle_configs().items():
                backend.alter_configs(kind, name, {}, delete=list(keys))

    def fresh_topics(self) -> Cluster:
        """Delete the previous test's topics, then create and fill this test's (a new name prefix)."""
        from kafka import KafkaAdminClient
        from rebalancer.localkafka.load import load_cluster

        self.heal()

        if self.prefixes:
            admin = KafkaAdminClient(bootstrap_servers=self.bootstrap.split(","), client_id="conformance")
            try:
                names = [t for t in admin.list_topics() if t.startswith(self.prefixes[-1])]
                if names:
                    admin.delete_topics(names, timeout_ms=30_000)
            finally:
                admin.close()
        from rebalancer.errors import SimulationError

        for attempt in (1, 2):
            prefix = f"t{uuid.uuid4().hex[:6]}-"
            self.prefixes.append(prefix)
            cluster = scenario(prefix)
            try:
                self.last_load = load_cluster(self.state, cluster, REAL_DATA_MIB, timeout=180.0)
                return cluster
            except SimulationError as exc:
                # load_cluster produces once every broker's metadata has the new topics; should a producer still
                # find one unknown (a broker restarted meanwhile), once more with new names.
                if attempt == 2 or "UnknownTopicOrPartition" not in str(exc):
                    raise
        raise AssertionError("unreachable")

    def tool(self, main: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's own command-line tools from the jars (e.g. ReassignPartitionsCommand)."""
        from rebalancer.localkafka.nodes import java

        return subprocess.run([java(), "-Xmx256m", "-cp", f"{self.libs}/*", main, *args], capture_output=True,
                              text=True, timeout=timeout)

    def close(self) -> None:
        from rebalancer.localkafka import nodes

        nodes.stop_cluster(self.dir)


def real_engine(name: str, cluster: RealCluster, tmp: Path) -> Engine:
    from rebalancer.localkafka import cluster as lk
    from rebalancer.localkafka.load import SteadyProducer

    started = time.monotonic()
    cluster.fresh_topics()
    topics_s = time.monotonic() - started
    kafka_url = f"kafka://{cluster.bootstrap}"
    if name.endswith("-zk"):
        source = cluster.state["zk_url"]
        sizes = f"file://{cluster.dir / 'log-dirs.json'}"
    else:
        source, sizes = kafka_url, None
    run = prepare_run(source, tmp / "run", sizes=sizes)
    # Where a real test's set-up time goes (tests/artifacts/conformance.jsonl): CI time is mostly this.
    setup = {"topics_s": round(topics_s, 1), "run_s": round(time.monotonic() - started - topics_s, 1),
             **{k: cluster.last_load.get(k) for k in ("create_seconds", "produce_seconds", "sync_seconds", "seconds")}}

    def reassign_tool(action: str, targets: dict[tuple[str, int], list[int]], *extra: str) -> None:
        path = tmp / f"foreign-{uuid.uuid4().hex[:6]}.json"
        path.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]}))
        result = cluster.tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--bootstrap-server",
                              cluster.bootstrap, "--reassignment-json-file", str(path), action, *extra)
        if result.returncode != 0:
            raise AssertionError(f"kafka-reassign-partitions {action} failed: {result.stdout[-800:]} {result.stderr[-800:]}")

    return Engine(
        name, source, run, True, 1.0,
        kill_broker=lambda b: _kill_broker(cluster, b),
        restart_broker=lambda b: lk.restart_broker(cluster.dir, b) and None,
        kill_controller=lambda: _kill_controller(cluster),
        controller_id=lambda: lk.active_controller(cluster.dir),
        foreign_reassign=lambda targets, rate: reassign_tool("--execute", targets, "--throttle", str(rate)),
        foreign_cancel=lambda targets: reassign_tool("--cancel", targets),
        ingest=lambda tp, rate, lead: SteadyProducer(cluster.state, tp, rate).wait_flowing(lead / rate).stop,
        extra={"cluster": cluster, "bootstrap": cluster.bootstrap, "setup": setup},
    )


def _kill_broker(cluster: RealCluster, broker: int) -> None:
    from rebalancer.localkafka import cluster as lk

    if lk.active_controller(cluster.dir) == broker:  # in ZooKeeper mode the controller is a broker
        cluster.restart_before_next = True
    lk.kill_broker(cluster.dir, broker)


def _kill_controller(cluster: RealCluster) -> int:
    from rebalancer.localkafka import cluster as lk

    cluster.restart_before_next = True
    return int(lk.kill_controller(cluster.dir)["controller"])


@contextmanager
def real_cluster(version: str, base: Path) -> Iterator[RealCluster]:
    directory = base / f"kafka-{version}"
    shutil.rmtree(directory, ignore_errors=True)
    cluster = RealCluster(version, directory)
    try:
        yield cluster
    finally:
        cluster.close()


def keep_logs(cluster: RealCluster | None, dest: Path) -> None:
    """Copy the brokers' logs next to the test's artifacts (for a failed test)."""
    if cluster is None:
        return
    for node in sorted(cluster.dir.glob("node-*")):
        for log in node.glob("*.log"):
            target = dest / node.name / log.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, target)
    os.sync()


def create_topic_elsewhere(engine: Engine, name: str, partitions: int = 3,
                           assignment: dict[int, list[int]] | None = None) -> None:
    """Someone else creates a topic (Kafka's Admin API, as any application would): the cluster changes beside the run.
    ``assignment``: partition -> replicas, in their order (else ``partitions`` at RF 2, placed by the controller)."""
    from kafka.admin import NewTopic

    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=str(engine.extra["bootstrap"]).removeprefix("kafka://").split(","),
                             client_id="someone-else")
    new = NewTopic(name, partitions, 2) if assignment is None else \
        NewTopic(name, -1, -1, replica_assignments=assignment)
    partitions = partitions if assignment is None else len(assignment)
    try:
        admin.create_topics([new], timeout_ms=30_000)
    finally:
        admin.close()
    # Created means known to the controller; the broker the run's connection asks may learn of it a moment later.
    def shown() -> bool:
        with open_backend(engine.source) as backend:
            return sum(1 for p in backend.read_cluster().partitions if p.topic == name) == partitions

    wait_until(shown, 30, f"{engine.source} to show topic {name} (created)", poll=0.3)


def agreed_throttles(engine: Engine, want: Callable[[dict[Any, Any]], bool] | None = None,
                     timeout: float = 30.0) -> dict[tuple[str, str], dict[str, str]]:
    """The throttle configs once every broker of the engine agrees on them (and ``want`` accepts them): what to read
    after a write, since the broker asked may not have applied a change made through another (KRaft metadata,
    ZooKeeper notifications). Asked of each broker through the Admin API, whatever the engine's source."""
    from rebalancer.execute.consistency import agreed_throttles as fold
    from rebalancer.execute.consistency import until_agreed

    with open_backend(f"kafka://{str(engine.extra['bootstrap']).removeprefix('kafka://')}") as backend:
        return until_agreed(backend.throttle_views, fold, want=want, timeout=timeout, what="the throttle configs")
