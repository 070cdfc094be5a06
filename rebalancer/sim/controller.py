"""The simulated cluster: Kafka's ZooKeeper-mode controller and brokers, minus the log data.

It keeps real Kafka metadata in a real ZooKeeper and reacts to it as Kafka 3.x's controller does:

- ``/admin/reassign_partitions`` (on creation, as Kafka's ``PartitionReassignmentHandler``): for every partition
  the full replica set becomes ``target ++ (original -- target)`` with ``adding_replicas``/``removing_replicas``
  in the topic znode; each adding replica copies the partition's bytes from the leader; a caught-up replica joins
  the ISR; when every target replica is in the ISR the partition completes (replicas = target, removed replicas
  dropped from the ISR, a new leader elected if the old one left) and is removed from the admin znode, which is
  deleted when empty. A target on a dead broker never catches up: the reassignment stalls, as in Kafka.
- Copy speed obeys Kafka's replication quotas, read (as brokers do) on ``/config/changes`` notifications:
  ``leader.replication.throttled.rate``/``follower.replication.throttled.rate`` on ``/config/brokers/<id>`` (or
  ``<default>``) cap the throttled traffic out of a leader and into a follower; only replicas listed in the topic's
  ``leader.replication.throttled.replicas``/``follower.replication.throttled.replicas`` (``p:b`` lists or ``*``)
  are throttled. Every broker's network interface (``network_capacity_bytes_per_s``, default 125 MB/s in and out)
  bounds all traffic. Rates are shared by max-min fairness (progressive filling).
- ``/admin/preferred_replica_election``: the preferred replica leads where it is alive and in the ISR; the znode is
  deleted when done.
- Topic creation (Kafka's ``TopicChangeHandler``): a new child of ``/brokers/topics`` (written by Kafka's
  ``AdminZkClient``, or by CreateTopics) gets a topic id when its znode has none (the znode is rewritten, as a 3.x
  controller does), and each partition a leader: the first live replica, the ISR every live replica, leader epoch 0,
  in a new ``.../partitions/<p>/state``. A partition with no live replica gets no leader and no state znode until one
  of its brokers returns. New partitions hold 0 bytes and are tracked like the others (log dirs, reassignment).
  A topic znode removed by hand is forgotten.
- Topic deletion (Kafka's ``TopicDeletionManager``): a child of ``/admin/delete_topics`` queues the topic. Unless a
  partition of it is being reassigned (deletion then waits until every such reassignment completes), deletion starts:
  the topic leaves the brokers' metadata, the replicas on live brokers are deleted (each leaves the ISR as Kafka's
  OfflineReplica transition does). When every replica's broker is live it completes in the same tick: the partition
  znodes and ``/brokers/topics/<t>``, then ``/config/topics/<t>``, then ``/admin/delete_topics/<t>`` are deleted. A
  replica on a dead broker keeps the topic in ZooKeeper, marked for deletion, until the broker is back. A mark for a
  topic that does not exist is deleted. A topic queued for deletion takes no reassignment (UNKNOWN_TOPIC_OR_PARTITION,
  even a cancel) and no election.
- Broker failure: the ephemeral ``/brokers/ids/<id>`` disappears, the broker leaves every ISR (unless it is the
  last member), and partitions it led fail over to the next live ISR replica in assignment order (leader -1 when
  none, no unclean election). A restarted broker re-registers and rejoins the ISR of the partitions it holds in
  full; a partially copied replica resumes copying.
- Time runs ``acceleration`` times faster than the wall clock, so gigabytes copy in seconds while every duration
  is still bytes / rate in simulated seconds.
- The Kafka protocol: every live broker serves a listener on 127.0.0.1 (``kafka_listener``) and registers that
  endpoint in ``/brokers/ids/<id>``, as a broker does at start-up; a killed broker's port refuses connections. The
  controller requests of the Admin API act on the same state: ``api_reassign``/``api_cancel``
  (AlterPartitionReassignments, KIP-455: such moves never appear in ``/admin/reassign_partitions``),
  ``ongoing`` (ListPartitionReassignments) and ``elect_preferred`` (ElectLeaders); ``in_metadata`` is what the
  brokers' metadata lists and ``wait_until`` is the purgatory of the delayed topic requests. The controller is the
  lowest live broker id. Listener threads and the controller loop share one lock (``lock``).

- Producer traffic: ``set_ingest`` makes a partition grow at a rate (bytes per simulated second) while its leader
  lives. In-sync replicas grow with it, unthrottled (Kafka throttles only replicas out of the ISR, on both sides); a
  replica being added copies toward a log end that keeps moving. As in Kafka (KIP-73), the in-sync followers'
  fetches of a throttled partition count against the leader's and the follower's rates, so the copy gets only what
  they leave: nothing once ingest x in-sync followers reaches the throttle. A restarted broker's replicas that are
  not being added catch up at once.

Not simulated: log retention, auto leader rebalancing
(``auto.leader.rebalance.enable`` behaves as false), the ``/controller`` znode and its election, partitions added to
an existing topic (``/brokers/topics/<t>`` edits), ``delete.topic.enable=false``.

Private state lives outside Kafka's paths: ``/kafka-sim/status`` (simulated clock, live brokers) and
``/kafka-sim/commands`` (fault injection requests from ``rebalancer sim kill-broker``); per-replica sizes are
written to ``STATE_DIR/log-dirs.json`` in ``kafka-log-dirs --describe`` format and completed moves appended to
``STATE_DIR/events.jsonl``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from .. import kafka_zk as kz
from ..errors import SimulationError, SourceError
from ..formats import atomic_write_json, parse_log_dirs, read_json
from ..kafka_names import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, new_topic_id
from ..model import Broker, Cluster, TopicPartition
from .common import DELETE_TOPICS, LISTEN_HOST, ApiError, Listener, delete_topic_path

__all__ = ["SimulatedCluster", "ListenerFactory", "Move", "Reassignment", "ApiError", "allocate_rates", "new_topic_id",
           "delete_topic_path", "SIM_ROOT", "STATUS_PATH", "COMMANDS_PATH", "DELETE_TOPICS", "DEFAULT_NIC",
           "LISTEN_HOST"]

log = logging.getLogger(__name__)

SIM_ROOT = "/kafka-sim"
STATUS_PATH = f"{SIM_ROOT}/status"
COMMANDS_PATH = f"{SIM_ROOT}/commands"
DEFAULT_NIC = 125_000_000  # bytes/s: a 1 Gbit/s interface
IDLE_TICK = 0.1  # seconds between ticks while nothing is copying, producing or being deleted (see _busy)
UNLIMITED = math.inf
MAX_BROKER_ID = 2**31 - 1

# (cluster, broker id, host, port or 0) -> a bound listener of that broker; OSError when the port cannot be bound
ListenerFactory = Callable[["SimulatedCluster", int, str, int], Listener]

# Kafka error codes (org.apache.kafka.common.protocol.Errors) of the controller requests answered here.
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REPLICA_ASSIGNMENT = 39
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85


@dataclass
class Move:
    """One partition being reassigned; ``via_api`` when AlterPartitionReassignments started (or took over) it."""

    tp: TopicPartition
    original: list[int]
    target: list[int]
    started: float  # simulated seconds
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    bytes_copied: float = 0.0
    via_api: bool = False

    @property
    def full(self) -> list[int]:
        return self.target + [b for b in self.original if b not in self.target]


class Reassignment(NamedTuple):
    """A reassignment in flight as ListPartitionReassignments reports it."""

    replicas: list[int]  # the full replica set: target, then the original replicas leaving
    adding: list[int]
    removing: list[int]


@dataclass
class _Flow:
    tp: TopicPartition
    src: int
    dst: int
    remaining: float
    throttled_out: bool
    throttled_in: bool
    rate: float = 0.0


def allocate_rates(flows: list[_Flow], nic_out: dict[int, float], nic_in: dict[int, float],
                   leader_cap: dict[int, float], follower_cap: dict[int, float]) -> None:
    """Max-min fair rates (progressive filling) under every broker's NIC and throttle limits; sets ``flow.rate``."""
    constraints: list[tuple[float, list[_Flow]]] = []
    by_key: dict[tuple[str, int], list[_Flow]] = {}
    for f in flows:
        by_key.setdefault(("out", f.src), []).append(f)
        by_key.setdefault(("in", f.dst), []).append(f)
        if f.throttled_out:
            by_key.setdefault(("lead", f.src), []).append(f)
        if f.throttled_in:
            by_key.setdefault(("follow", f.dst), []).append(f)
    for (kind, b), members in by_key.items():
        cap = {"out": nic_out, "in": nic_in, "lead": leader_cap, "follow": follower_cap}[kind].get(b, UNLIMITED)
        if cap < UNLIMITED:
            constraints.append((cap, members))
    for f in flows:
        f.rate = 0.0
    active = {id(f): f for f in flows}
    room = [cap for cap, _ in constraints]  # what each constraint has left
    while active:
        best = UNLIMITED
        for left, (_, members) in zip(room, constraints, strict=True):
            n = sum(1 for m in members if id(m) in active)
            if n:
                best = min(best, left / n)
        if best == UNLIMITED:  # no constraint binds (cannot happen with NIC limits set); leave rates at 0
            break
        for f in active.values():
            f.rate += best
        saturated: set[int] = set()
        for i, (_, members) in enumerate(constraints):
            n = sum(1 for m in members if id(m) in active)
            if n:
                room[i] -= best * n
                if room[i] <= 1e-9 * max(1.0, best):
                    saturated.update(id(m) for m in members)
        for key in saturated:
            active.pop(key, None)


def _parse_throttled(value: str) -> set[tuple[int, int]] | str:
    value = (value or "").strip()
    if value == "*":
        return "*"
    out: set[tuple[int, int]] = set()
    for item in filter(None, (x.strip() for x in value.split(","))):
        p, _, b = item.partition(":")
        try:
            out.add((int(p), int(b)))
        except ValueError:
            log.warning("ignoring malformed throttled replica %r", item)
    return out


def _parse_rate(value: Any) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        log.warning("ignoring malformed throttle rate %r", value)
        return UNLIMITED
    return rate if rate > 0 else UNLIMITED


class SimulatedCluster:
    """The controller loop over one ZooKeeper chroot. Use ``load`` or ``attach``, then ``start``/``stop``.

    Each broker's Kafka listener binds ``kafka_port_base + broker id`` when a base is given, else an ephemeral port;
    a restarted broker listens on its previous port again."""

    def __init__(self, zk: Any, *, acceleration: float = 1.0, tick: float = 0.02,
                 state_dir: str | Path | None = None, nic_bytes_per_s: float = DEFAULT_NIC,
                 kafka_port_base: int | None = None, sasl_users: dict[str, str] | None = None,
                 listener_factory: ListenerFactory) -> None:
        if acceleration <= 0:
            raise SimulationError(f"acceleration must be positive, got {acceleration}")
        self.zk = zk
        self.listener_factory = listener_factory
        self.acceleration = float(acceleration)
        self.tick = tick
        self.state_dir = Path(state_dir) if state_dir else None
        self.nic = nic_bytes_per_s
        self.brokers: dict[int, Broker] = {}
        self.alive: set[int] = set()
        self.topics: dict[str, kz.TopicAssignment] = {}
        self.state: dict[TopicPartition, list[Any]] = {}  # tp -> [leader, isr, leader_epoch]
        self.size: dict[TopicPartition, int] = {}
        self.disk: dict[TopicPartition, dict[int, float]] = {}  # bytes each replica holds
        self.moves: dict[TopicPartition, Move] = {}
        self.ingest: dict[TopicPartition, float] = {}  # producer bytes per simulated second
        self._ingest_carry: dict[TopicPartition, float] = {}
        self.completed: list[dict[str, Any]] = []
        self.broker_config: dict[str, dict[str, str]] = {}
        self.topic_config: dict[str, dict[str, str]] = {}
        self.to_delete: set[str] = set()  # queued for deletion (Kafka's topicsToBeDeleted)
        self.deletion_started: set[str] = set()  # out of the brokers' metadata, replicas being deleted
        self.new_partitions: set[TopicPartition] = set()  # no live replica at creation: no leader, no state yet
        self._ignored_topics: set[str] = set()  # malformed topic znodes, reported once
        self._topics_cversion: int | None = None
        self.sim_time = 0.0
        self.steps = 0  # whole ticks run: ``settle`` waits on it
        self._last_wall: float | None = None
        self._seen_config_change = -1
        self._reassign_czxid: int | None = None
        self._dirty_sizes = True
        self._last_flush = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reregister = threading.Event()
        self._lock = threading.RLock()
        self.error: BaseException | None = None
        self.cluster_id = ""
        self.kafka_port_base = kafka_port_base
        self.sasl_users = dict(sasl_users or {})  # SASL/PLAIN users of the listeners (none: PLAINTEXT)
        self.kafka_ports: dict[int, int] = {}  # broker -> listener port, kept while the broker is down
        self._listeners: dict[int, Listener] = {}
        zk.add_listener(self._on_state)

    @property
    def lock(self) -> threading.RLock:
        """Held by the controller loop for each step: hold it to read a consistent state or change it from elsewhere."""
        return self._lock

    @property
    def controller_id(self) -> int | None:
        """The broker acting as Kafka's controller: the lowest live broker id (None when every broker is down)."""
        with self._lock:
            return min(self.alive, default=None)

    @property
    def bootstrap(self) -> str:
        """``HOST:PORT,...`` of every live broker's Kafka listener (empty before ``start``)."""
        with self._lock:
            return ",".join(f"{LISTEN_HOST}:{self.kafka_ports[b]}" for b in sorted(self.alive) if b in self._listeners)

    # -- setting up ----------------------------------------------------------------------------------------
    def load(self, cluster: Cluster) -> None:
        """Write a scenario's metadata into ZooKeeper (which must hold no Kafka metadata yet) and adopt it."""
        if self.zk.exists(kz.TOPICS) and self.zk.get_children(kz.TOPICS):
            raise SimulationError("ZooKeeper already holds Kafka topics here: use attach, or a fresh chroot")
        kz.write_cluster(self.zk, cluster, register_brokers=False)
        self.zk.ensure_path(COMMANDS_PATH)
        self._adopt(cluster)
        self._load_configs()
        self._flush_sizes(force=True)

    def attach(self) -> None:
        """Adopt the metadata already in ZooKeeper (sizes from ``STATE_DIR/log-dirs.json`` when present)."""
        sizes = None
        if self.state_dir and (self.state_dir / "log-dirs.json").exists():
            sizes = parse_log_dirs(read_json(self.state_dir / "log-dirs.json"))
        cluster = kz.read_cluster(self.zk, display="zk", sizes=sizes)
        alive_before = {b.id for b in cluster.brokers if b.alive}
        self._adopt(cluster)
        if sizes:
            for tp, per in sizes.items():
                if tp in self.disk:
                    self.disk[tp].update({b: float(v) for b, v in per.items() if b in self.disk[tp]})
        # Our brokers' ephemeral znodes died with the previous session: all of them register again at start.
        for b in cluster.brokers:
            if b.id not in alive_before:
                self.alive.add(b.id)
        self.zk.ensure_path(COMMANDS_PATH)
        self._load_configs()

    def _adopt(self, cluster: Cluster) -> None:
        with self._lock:
            self.cluster_id = self._ensure_cluster_id()
            self.brokers = {b.id: b for b in cluster.brokers}
            self.alive = {b.id for b in cluster.brokers if b.alive}
            self.topics = {}
            for p in cluster.partitions:
                a = self.topics.setdefault(p.topic, kz.TopicAssignment(partitions={}))
                a.partitions[p.partition] = list(p.replicas)
                if p.adding:
                    a.adding[p.partition] = list(p.adding)
                if p.removing:
                    a.removing[p.partition] = list(p.removing)
                self.state[p.tp] = [p.leader, list(p.isr), 0]
                self.size[p.tp] = p.size_bytes
                self.disk[p.tp] = {b: float(p.size_bytes if b in p.isr or b not in p.adding else 0) for b in p.replicas}
            for name in list(self.topics):
                if self.zk.exists(kz.topic_path(name)):
                    data, _ = self.zk.get(kz.topic_path(name))
                    self.topics[name].topic_id = kz.parse_topic_znode(data, name).topic_id
                for num in self.topics[name].partitions:
                    st = self.zk.exists(kz.state_path(name, num))
                    if st is not None:
                        data, _ = self.zk.get(kz.state_path(name, num))
                        self.state[(name, num)][2] = kz.parse_state_znode(data, name, num)[2]

    def _ensure_cluster_id(self) -> str:
        """Kafka's cluster id from ``/cluster/id``, written as the first broker of a new cluster does when missing."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        try:
            data, _ = self.zk.get(kz.CLUSTER_ID)
        except NoNodeError:
            cluster_id = new_topic_id()  # the same form: a base64url UUID
            try:
                self.zk.create(kz.CLUSTER_ID, kz.encode({"version": "1", "id": cluster_id}), makepath=True)
                return cluster_id
            except NodeExistsError:
                data, _ = self.zk.get(kz.CLUSTER_ID)
        try:
            return str(json.loads(data)["id"])
        except (ValueError, KeyError, TypeError):
            raise SimulationError(f"ZooKeeper node {kz.CLUSTER_ID} is not a Kafka cluster id") from None

    # -- running -------------------------------------------------------------------------------------------
    def start(self) -> SimulatedCluster:
        """Every live broker opens its Kafka listener and registers; then the controller loop runs."""
        with self._lock:
            self._register_all()
            self._publish_status()
        self._thread = threading.Thread(target=self.run, name="sim-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the controller loop, then close every listener and its connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._lock:
            listeners = list(self._listeners.values())
            self._listeners.clear()
            for listener in listeners:
                listener.close()
        for listener in listeners:  # outside the lock: a connection thread may be waiting for it
            listener.join(timeout)

    def run(self) -> None:
        """The loop: one ``step`` per tick until ``stop``. ZooKeeper hiccups are retried on the next tick."""
        from kazoo.exceptions import ConnectionLoss, KazooException, SessionExpiredError

        self._last_wall = time.monotonic()
        while not self._stop.is_set():
            try:
                self.step()
            except (ConnectionLoss, SessionExpiredError) as exc:
                log.warning("ZooKeeper unavailable (%s); retrying", type(exc).__name__)
                self._stop.wait(0.2)
            except KazooException as exc:
                log.warning("ZooKeeper error %r; retrying", exc)
                self._stop.wait(0.2)
            except Exception as exc:  # a bug: keep it visible to tests and the CLI, and stop
                log.exception("simulated controller failed")
                self.error = exc
                return
            self._stop.wait(self.tick if self._busy() else max(self.tick, IDLE_TICK))
        self._flush_sizes(force=True)

    def _busy(self) -> bool:
        """Whether time moves anything: a copy, a producer, a deletion under way. Otherwise the loop ticks every
        ``IDLE_TICK`` seconds only: each tick reads ZooKeeper some ten times, and an idle simulator ticking every
        10 ms kept a core a quarter busy between itself and ZooKeeper."""
        return bool(self.moves or self.ingest or self.to_delete)

    def step(self) -> None:
        with self._lock:
            now = time.monotonic()
            dt = 0.0 if self._last_wall is None else (now - self._last_wall) * self.acceleration
            self._last_wall = now
            if self._reregister.is_set():
                self._reregister.clear()
                self._register_all()
            self._process_commands()
            self._process_config_changes()
            self._process_topic_changes()
            self._process_reassignment()
            self._produce(dt)
            left = dt
            for _ in range(100_000):  # up to each copy that finishes within the tick, then the rates shared anew
                used = self._copy(left)
                self.sim_time += used
                left -= used
                if left <= 1e-9:
                    break
            else:  # (each pass but the last finishes a copy: never reached)
                self.sim_time += left
            self._process_election()
            self._process_deletions()
            if now - self._last_flush > 0.5:
                self._publish_status()
                self._flush_sizes()
                self._last_flush = now
            self.steps += 1

    def _on_state(self, state: str) -> None:
        # Kazoo calls this from its own thread: only flag the work, the loop does it.
        if state == "LOST":
            self._reregister.set()

    # -- brokers -------------------------------------------------------------------------------------------
    def _listen(self, bid: int) -> int:
        """Open the broker's Kafka listener unless it is open; returns its port."""
        if bid in self._listeners:
            return self._listeners[bid].port
        port = self.kafka_ports.get(bid, 0 if self.kafka_port_base is None else self.kafka_port_base + bid)
        try:
            listener = self.listener_factory(self, bid, LISTEN_HOST, port)
        except OSError as exc:
            reason = exc.strerror or exc
            raise SimulationError(f"broker {bid} cannot listen on {LISTEN_HOST}:{port}: {reason}") from None
        listener.start()
        self._listeners[bid] = listener
        self.kafka_ports[bid] = listener.port
        return listener.port

    def _register(self, bid: int) -> None:
        """The broker serves its listener and advertises it in its ephemeral ``/brokers/ids/<id>``."""
        port = self._listen(bid)
        path = kz.broker_path(bid)
        if self.zk.exists(path):
            self.zk.delete(path)
        endpoint = replace(self.brokers[bid], host=LISTEN_HOST, port=port)
        self.zk.create(path, kz.encode(kz.broker_znode(endpoint)), ephemeral=True, makepath=True)

    def _register_all(self) -> None:
        for bid in sorted(self.alive):
            self._register(bid)

    def kill_broker(self, bid: int) -> None:
        """The broker dies: its listener and connections close, its registration vanishes, it leaves the ISRs, its
        leaderships fail over."""
        with self._lock:
            if bid not in self.brokers:
                raise SimulationError(f"unknown broker {bid}")
            if bid not in self.alive:
                return
            self.alive.discard(bid)
            listener = self._listeners.pop(bid, None)
            if listener is not None:
                listener.close()
            try:
                self.zk.delete(kz.broker_path(bid))
            except Exception:  # already gone with a lost session
                pass
            for tp, (leader, isr, epoch) in list(self.state.items()):
                if bid not in isr or tp[0] in self.deletion_started:  # Kafka fails the replica's deletion instead
                    continue
                replicas = self.topics[tp[0]].partitions[tp[1]]
                new_isr = [b for b in isr if b != bid] or isr  # the last ISR member stays (no unclean election)
                new_leader = leader
                if leader == bid:
                    new_leader = next((b for b in replicas if b in new_isr and b in self.alive), None)
                self._set_state(tp, new_leader, new_isr, epoch + (1 if new_leader != leader else 0))
            log.info("broker %d killed", bid)

    def restart_broker(self, bid: int) -> None:
        """The broker comes back: listens on its port again, registers, rejoins the ISR where its replica is complete,
        leads offline partitions."""
        with self._lock:
            if bid not in self.brokers:
                raise SimulationError(f"unknown broker {bid}")
            if bid in self.alive:
                return
            self.alive.add(bid)
            self._register(bid)
            for tp, (leader, isr, epoch) in list(self.state.items()):
                replicas = self.topics[tp[0]].partitions[tp[1]]
                if bid not in replicas or tp[0] in self.deletion_started:  # deletion resumes instead (next tick)
                    continue
                move = self.moves.get(tp)
                if (move is None or bid not in move.adding) and self.disk[tp].get(bid, 0.0) < self.size[tp]:
                    self.disk[tp][bid] = float(self.size[tp])  # behind by ingest while down: it catches up
                complete = self.disk[tp].get(bid, 0.0) >= self.size[tp]
                if leader is None and bid in isr:
                    self._set_state(tp, bid, isr, epoch + 1)
                elif complete and bid not in isr and leader is not None:
                    if tp in self.moves:
                        # An ISR change completes a reassignment whose whole target is now in sync (Kafka's
                        # controller re-checks on every ISR change of a moving partition).
                        self._caught_up(self.moves[tp], bid, self.sim_time)
                    else:
                        self._set_state(tp, leader, isr + [bid], epoch)
            # New partitions without a leader get one now if they can (Kafka's triggerOnlinePartitionStateChange).
            for tp in sorted(self.new_partitions):
                if tp[0] not in self.to_delete:
                    self._elect_new_partition(tp)
            log.info("broker %d restarted", bid)

    def _process_commands(self) -> None:
        if not self.zk.exists(COMMANDS_PATH):
            return
        for child in sorted(self.zk.get_children(COMMANDS_PATH)):
            path = f"{COMMANDS_PATH}/{child}"
            try:
                data, _ = self.zk.get(path)
                cmd = json.loads(data)
                op, bid = cmd["op"], int(cmd["broker"])
                if op == "kill-broker":
                    self.kill_broker(bid)
                elif op == "restart-broker":
                    self.restart_broker(bid)
                else:
                    log.warning("unknown simulator command %r", op)
            except (ValueError, KeyError, TypeError, SimulationError) as exc:
                log.warning("bad simulator command %s: %s", child, exc)
            self.zk.delete(path)

    # -- configs -------------------------------------------------------------------------------------------
    def _read_config(self, entity_type: str, name: str) -> dict[str, str]:
        try:
            return kz.read_config(self.zk, entity_type, name)
        except SourceError:
            log.warning("malformed config znode %s", kz.config_path(entity_type, name))  # brokers ignore it too
            return {}

    def _load_configs(self) -> None:
        for entity_type, store in (("brokers", self.broker_config), ("topics", self.topic_config)):
            store.clear()
            path = f"/config/{entity_type}"
            if self.zk.exists(path):
                for name in self.zk.get_children(path):
                    store[name] = self._read_config(entity_type, name)
        changes = self.zk.get_children(kz.CONFIG_CHANGES) if self.zk.exists(kz.CONFIG_CHANGES) else []
        seqs = [int(c[len(kz.CONFIG_CHANGE_PREFIX):]) for c in changes if c.startswith(kz.CONFIG_CHANGE_PREFIX)]
        self._seen_config_change = max(seqs, default=-1)

    def _process_config_changes(self) -> None:
        if not self.zk.exists(kz.CONFIG_CHANGES):
            return
        pending = []
        for c in self.zk.get_children(kz.CONFIG_CHANGES):
            if c.startswith(kz.CONFIG_CHANGE_PREFIX):
                seq = int(c[len(kz.CONFIG_CHANGE_PREFIX):])
                if seq > self._seen_config_change:
                    pending.append((seq, c))
        for seq, child in sorted(pending):
            try:
                data, _ = self.zk.get(f"{kz.CONFIG_CHANGES}/{child}")
                entity_path = json.loads(data)["entity_path"]
                entity_type, _, name = entity_path.partition("/")
            except Exception:
                log.warning("malformed config change notification %s", child)
                self._seen_config_change = seq
                continue
            if entity_type == "brokers":
                self.broker_config[name] = self._read_config("brokers", name)
            elif entity_type == "topics" and name in self.topics:
                self.topic_config[name] = self._read_config("topics", name)
            # (a change to a topic deleted meanwhile changes no log: a broker ignores it, and so does the simulator)
            self._seen_config_change = seq

    def _broker_rate(self, bid: int, key: str) -> float:
        cfg = self.broker_config.get(str(bid), {})
        if key in cfg:
            return _parse_rate(cfg[key])
        default = self.broker_config.get("<default>", {})
        return _parse_rate(default[key]) if key in default else UNLIMITED

    def _throttled(self, topic: str, key: str, partition: int, broker: int) -> bool:
        listed = _parse_throttled(self.topic_config.get(topic, {}).get(key, ""))
        return listed == "*" or (partition, broker) in listed

    # -- topics: creation and deletion ---------------------------------------------------------------------
    def in_metadata(self, topic: str) -> bool:
        """Whether the brokers' metadata lists the topic (Kafka's ZooKeeper-mode ``MetadataCache.contains``): it exists,
        its deletion has not started, and some partition has had a leader elected. Hold ``lock``."""
        if topic not in self.topics or topic in self.deletion_started:
            return False
        return any((topic, p) in self.state for p in self.topics[topic].partitions)

    def settle(self, timeout_s: float = 30.0) -> None:
        """Return once the loop has run a whole tick that started after this call: every step reads ZooKeeper, so
        whatever was written there before the call has been seen and acted on (a command, a config change, a
        reassignment, a deletion). What a test asserts did *not* happen has then had its chance to happen."""
        with self._lock:
            target = self.steps + 2  # the tick in progress may have read ZooKeeper before the write
        if not self.wait_until(lambda: self.steps >= target, timeout_s):
            raise TimeoutError(f"the simulated controller ran no whole tick in {timeout_s:g} s"
                               + (f" (it failed: {self.error!r})" if self.error else ""))

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Poll ``done`` under the lock until it holds (True), ``timeout_s`` passes or the cluster stops (False): the
        purgatory of Kafka's delayed CreateTopics and DeleteTopics. Call it without holding the lock."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if done():
                    return True
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.is_set():
                return False
            self._stop.wait(min(left, max(self.tick, 0.005)))

    def _process_topic_changes(self) -> None:
        """Kafka's TopicChange handler: new children of ``/brokers/topics`` are created, vanished ones forgotten."""
        stat = self.zk.exists(kz.TOPICS)
        if stat is None or stat.cversion == self._topics_cversion:
            return
        names, stat = self.zk.get_children(kz.TOPICS, include_data=True)
        present = set(names)
        for name in sorted(set(self.topics) - present):
            log.warning("topic %s vanished from ZooKeeper without a deletion; forgetting it", name)
            self._forget_topic(name)
        self._ignored_topics &= present
        for name in sorted(present - set(self.topics) - self._ignored_topics):
            self._new_topic(name)
        self._topics_cversion = stat.cversion

    def _new_topic(self, name: str) -> None:
        """Kafka's ``processTopicIds`` then ``onNewPartitionCreation`` for a topic znode the controller has not seen."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(kz.topic_path(name))
        except NoNodeError:
            return  # deleted again meanwhile
        try:
            assignment = kz.parse_topic_znode(data, name)
        except SourceError as exc:
            log.error("ignoring topic %s: %s", name, exc)
            self._ignored_topics.add(name)
            return
        if not assignment.topic_id:  # Kafka 3.x gives a topic id to a topic created without one
            assignment.topic_id = new_topic_id()
            self.zk.set(kz.topic_path(name), kz.encode(kz.topic_znode(assignment)))
        self.topics[name] = assignment
        self.topic_config[name] = self._read_config("topics", name)  # as a broker reads it when creating the log
        for p, replicas in sorted(assignment.partitions.items()):
            tp = (name, p)
            for b in replicas:
                if b not in self.brokers and 0 <= b <= MAX_BROKER_ID:  # never registered: dead until it is
                    self.brokers[b] = Broker(id=b, alive=False)
            self.size[tp] = 0
            self.disk[tp] = {b: 0.0 for b in replicas}
            self._elect_new_partition(tp)
        self._dirty_sizes = True
        log.info("topic %s created (id %s): %s", name, assignment.topic_id, dict(sorted(assignment.partitions.items())))

    def _elect_new_partition(self, tp: TopicPartition) -> None:
        """A new partition's first leader (Kafka's ``initializeLeaderAndIsrForPartitions``): the first live replica,
        the ISR every live replica, leader epoch 0. With no live replica it waits, without a state znode."""
        from kazoo.exceptions import NodeExistsError

        replicas = self.topics[tp[0]].partitions[tp[1]]
        live = [b for b in replicas if b in self.alive]
        if not live:
            if tp not in self.new_partitions:
                log.warning("no leader for new partition %s-%d: none of its replicas %s is alive", *tp, replicas)
            self.new_partitions.add(tp)
            return
        self.new_partitions.discard(tp)
        path = kz.state_path(*tp)
        try:
            self.zk.create(path, kz.encode(kz.state_znode(live[0], live, leader_epoch=0)), makepath=True)
            self.state[tp] = [live[0], list(live), 0]
        except NodeExistsError:
            # Written along with the topic (a tool writing whole clusters): the simulator adopts it where Kafka would
            # leave the partition without a leader.
            data, _ = self.zk.get(path)
            leader, isr, epoch = kz.parse_state_znode(data, *tp)
            self.state[tp] = [leader, isr, epoch]

    def _process_deletions(self) -> None:
        """Kafka's TopicDeletion handler and ``TopicDeletionManager.resumeDeletions``, once per tick."""
        from kazoo.exceptions import NoNodeError

        try:
            marked = set(self.zk.get_children(DELETE_TOPICS))
        except NoNodeError:
            marked = set()
        for name in sorted(marked - self.to_delete):
            if name not in self.topics:
                log.warning("ignoring the deletion of topic %s: it does not exist", name)
                self._delete_if_present(delete_topic_path(name))
                continue
            log.info("topic %s marked for deletion", name)
            self.to_delete.add(name)
        if not self.to_delete:
            return
        moving = {tp[0] for tp in self.moves}
        for name in sorted(self.to_delete):
            if name not in self.topics:  # its znode was removed by hand
                self.to_delete.discard(name)
                self.deletion_started.discard(name)
            elif name in moving:
                continue  # ineligible while a partition is reassigned; resumes when the reassignments complete
            else:
                if name not in self.deletion_started:
                    self._start_deletion(name)
                replicas = {b for r in self.topics[name].partitions.values() for b in r}
                if replicas <= self.alive:
                    self._complete_deletion(name)

    def _start_deletion(self, name: str) -> None:
        """The topic leaves the brokers' metadata; every live replica is deleted, and leaves the ISR as in Kafka's
        OfflineReplica transition (not the last member; the partition loses a leader it was)."""
        self.deletion_started.add(name)
        for p, replicas in sorted(self.topics[name].partitions.items()):
            tp = (name, p)
            self.new_partitions.discard(tp)
            live = [b for b in replicas if b in self.alive]
            for b in live:
                self.disk[tp].pop(b, None)
            if tp not in self.state:
                continue
            leader, isr, epoch = self.state[tp]
            changed = False
            for b in live:
                if b in isr:
                    leader = None if b == leader else leader
                    isr = isr if len(isr) == 1 else [x for x in isr if x != b]
                    epoch, changed = epoch + 1, True
            if changed:
                self._set_state(tp, leader, isr, epoch)
        self._dirty_sizes = True
        log.info("deletion of topic %s started", name)

    def _complete_deletion(self, name: str) -> None:
        """Kafka's ``completeDeleteTopic``: the topic znode with its partitions, its config, then its deletion mark."""
        self._delete_if_present(kz.topic_path(name), recursive=True)
        self._delete_if_present(kz.config_path("topics", name))
        self._delete_if_present(delete_topic_path(name))
        self._forget_topic(name)
        log.info("topic %s deleted", name)

    def _delete_if_present(self, path: str, recursive: bool = False) -> None:
        from kazoo.exceptions import NoNodeError

        try:
            self.zk.delete(path, recursive=recursive)
        except NoNodeError:
            pass

    def _forget_topic(self, name: str) -> None:
        """Drop every trace of the topic from the controller's state (Kafka's ``ControllerContext.removeTopic``)."""
        assignment = self.topics.pop(name, None)
        for p in assignment.partitions if assignment else ():
            tp = (name, p)
            self.state.pop(tp, None)
            self.size.pop(tp, None)
            self.disk.pop(tp, None)
            self.moves.pop(tp, None)
            self.new_partitions.discard(tp)
        self.topic_config.pop(name, None)
        self.to_delete.discard(name)
        self.deletion_started.discard(name)
        self._dirty_sizes = True

    # -- reassignment --------------------------------------------------------------------------------------
    def _process_reassignment(self) -> None:
        stat = self.zk.exists(kz.REASSIGN)
        if stat is None:
            self._reassign_czxid = None
            return
        if stat.czxid == self._reassign_czxid:
            return  # Kafka acts on the znode's creation only; edits to an existing one are ignored
        self._reassign_czxid = stat.czxid
        data, _ = self.zk.get(kz.REASSIGN)
        try:
            wanted = kz.parse_reassignment(data)
        except Exception as exc:
            log.error("rejecting malformed %s: %s", kz.REASSIGN, exc)
            self.zk.delete(kz.REASSIGN)
            return
        finished: list[TopicPartition] = []
        for tp, target in wanted.items():
            if tp in self.moves:
                continue
            topic = self.topics.get(tp[0])
            if topic is None or tp[1] not in topic.partitions:
                log.error("reassignment of %s-%d ignored: no such partition", *tp)
                finished.append(tp)
                continue
            if tp[0] in self.to_delete:
                log.error("reassignment of %s-%d ignored: the topic is being deleted", *tp)
                finished.append(tp)
                continue
            if not target or len(set(target)) != len(target) or any(b not in self.brokers and b < 0 for b in target):
                log.error("reassignment of %s-%d ignored: invalid replica list %s", *tp, target)
                finished.append(tp)
                continue
            current = topic.partitions[tp[1]]
            if target == current:
                finished.append(tp)
                continue
            self._start_move(tp, current, target)
        # Partitions whose replica set is already complete (a reorder only) finish at once.
        for tp, move in list(self.moves.items()):
            if not move.adding:
                self._complete(move)
                finished.append(tp)
        if finished:
            self._remove_from_admin(finished)

    def _start_move(self, tp: TopicPartition, current: list[int], target: list[int], *, via_api: bool = False) -> Move:
        move = Move(tp=tp, original=list(current), target=list(target), started=self.sim_time, via_api=via_api)
        move.adding = [b for b in target if b not in current]
        move.removing = [b for b in current if b not in target]
        for b in move.adding:
            if b not in self.brokers:  # a broker never seen: Kafka would wait for it forever, so do we
                self.brokers[b] = Broker(id=b, alive=False)
            self.disk[tp].setdefault(b, 0.0)
        self.moves[tp] = move
        self._publish_move(move)
        leader, isr, epoch = self.state[tp]
        self._set_state(tp, leader, isr, epoch + 1)
        log.info("reassigning %s-%d %s -> %s", tp[0], tp[1], current, target)
        return move

    def _publish_move(self, move: Move) -> None:
        """The topic znode of a moving partition: replicas target ++ (original -- target), adding and removing."""
        topic = self.topics[move.tp[0]]
        topic.partitions[move.tp[1]] = move.full
        topic.adding[move.tp[1]] = list(move.adding)
        topic.removing[move.tp[1]] = list(move.removing)
        self._write_topic(move.tp[0])

    def set_ingest(self, tp: TopicPartition, bytes_per_s: float) -> None:
        """Producers write ``bytes_per_s`` (simulated seconds) into ``tp`` from now on; 0 stops them."""
        import math

        if not math.isfinite(bytes_per_s) or bytes_per_s < 0:
            raise SimulationError(f"ingest rate must be a finite number >= 0, got {bytes_per_s}")
        with self._lock:
            if tp not in self.state:
                raise SimulationError(f"unknown partition {tp[0]}-{tp[1]}")
            if bytes_per_s:
                self.ingest[tp] = float(bytes_per_s)
            else:
                self.ingest.pop(tp, None)
                self._ingest_carry.pop(tp, None)

    def _produce(self, dt: float) -> None:
        """Grow every partition with ingest by ``dt`` simulated seconds of it: the leader and the in-sync replicas."""
        for tp, rate in list(self.ingest.items()):
            if tp not in self.state:  # deleted meanwhile
                self.ingest.pop(tp, None)
                continue
            leader, isr, _ = self.state[tp]
            if leader is None or leader not in self.alive:
                continue  # no leader: producers get NOT_LEADER and retry
            grow = rate * dt + self._ingest_carry.get(tp, 0.0)
            whole = int(grow)
            self._ingest_carry[tp] = grow - whole
            if not whole:
                continue
            before = self.size[tp]
            self.size[tp] = before + whole
            for b in isr:
                if b in self.alive and self.disk[tp].get(b, 0.0) >= before:
                    self.disk[tp][b] = float(self.size[tp])
            self._dirty_sizes = True

    def _copy(self, dt: float) -> float:
        """Advance every copying replica by ``dt`` simulated seconds, or only until the first copy finishes, as the
        rates are shared anew then (on a busy machine a tick can span seconds: held at the shares of its start, the
        copies left behind a finished one ran slower than Kafka's and a 4 s copy took 10); caught-up replicas join
        the ISR. Returns the simulated seconds advanced."""
        flows: list[_Flow] = []
        for tp, move in self.moves.items():
            leader, isr, _ = self.state[tp]
            if leader is None or leader not in self.alive:
                continue
            for b in move.adding:
                if b in isr or b not in self.alive:
                    continue
                remaining = self.size[tp] - self.disk[tp].get(b, 0.0)
                flows.append(_Flow(tp, leader, b, max(0.0, remaining),
                                   self._throttled(tp[0], LEADER_REPLICAS, tp[1], leader),
                                   self._throttled(tp[0], FOLLOWER_REPLICAS, tp[1], b)))
        if flows:
            nic_out = {b: float(self.brokers[b].network_capacity_bytes_per_s or self.nic) for b in self.brokers}
            leader_cap = {b: self._broker_rate(b, LEADER_RATE) for b in self.brokers}
            follower_cap = {b: self._broker_rate(b, FOLLOWER_RATE) for b in self.brokers}
            # Kafka counts the in-sync followers' fetches of a throttled partition against the rate without
            # throttling them (KIP-73): producer traffic into it leaves the copies only what remains.
            for tp, rate in self.ingest.items():
                leader, isr, _ = self.state[tp]
                if leader is None or leader not in self.alive:
                    continue
                for b in isr:
                    if b == leader or b not in self.alive:
                        continue
                    if self._throttled(tp[0], LEADER_REPLICAS, tp[1], leader):
                        leader_cap[leader] = max(0.0, leader_cap[leader] - rate)
                    if self._throttled(tp[0], FOLLOWER_REPLICAS, tp[1], b):
                        follower_cap[b] = max(0.0, follower_cap[b] - rate)
            allocate_rates(flows, nic_out, dict(nic_out), leader_cap, follower_cap)
        span = dt
        for f in flows:
            if f.rate > 0:
                span = min(span, f.remaining / f.rate)
        for f in flows:
            step = f.rate * span
            move = self.moves[f.tp]
            if f.remaining <= step or (f.rate > 0 and f.remaining / f.rate <= span):
                self.disk[f.tp][f.dst] = float(self.size[f.tp])
                move.bytes_copied += f.remaining
                done_at = self.sim_time + (f.remaining / f.rate if f.rate > 0 else 0.0)
                self._caught_up(move, f.dst, done_at)
            else:
                self.disk[f.tp][f.dst] = self.disk[f.tp].get(f.dst, 0.0) + step
                move.bytes_copied += step
        if flows:
            self._dirty_sizes = True
        return span

    def _caught_up(self, move: Move, broker: int, when: float) -> None:
        tp = move.tp
        leader, isr, epoch = self.state[tp]
        if broker not in isr:
            self._set_state(tp, leader, isr + [broker], epoch)
        if all(b in self.state[tp][1] for b in move.target):
            self._complete(move, when)
            if not move.via_api:
                self._remove_from_admin([tp])

    def _complete(self, move: Move, when: float | None = None) -> None:
        tp = move.tp
        leader, isr, epoch = self.state[tp]
        new_isr = [b for b in isr if b in move.target]
        new_leader = leader
        if leader not in move.target or leader not in self.alive:
            new_leader = next((b for b in move.target if b in new_isr and b in self.alive), None)
        topic = self.topics[tp[0]]
        topic.partitions[tp[1]] = list(move.target)
        topic.adding.pop(tp[1], None)
        topic.removing.pop(tp[1], None)
        self._write_topic(tp[0])
        self._set_state(tp, new_leader, new_isr, epoch + 1)
        for b in move.removing:
            self.disk[tp].pop(b, None)
        self.moves.pop(tp, None)
        finished = self.sim_time if when is None else when
        event = {
            "topic": tp[0], "partition": tp[1], "original": move.original, "target": move.target,
            "started_sim_s": round(move.started, 6), "finished_sim_s": round(finished, 6),
            "bytes_copied": round(move.bytes_copied), "size_bytes": self.size[tp],
        }
        self.completed.append(event)
        if self.state_dir:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            with open(self.state_dir / "events.jsonl", "a") as fh:
                fh.write(json.dumps(event) + "\n")
        self._dirty_sizes = True
        log.info("reassignment of %s-%d complete: %s", tp[0], tp[1], move.target)

    def _remove_from_admin(self, done: Iterable[TopicPartition]) -> None:
        from kazoo.exceptions import NoNodeError

        done = set(done)
        try:
            data, stat = self.zk.get(kz.REASSIGN)
        except NoNodeError:
            return
        if stat.czxid != self._reassign_czxid:
            return
        remaining = {tp: r for tp, r in kz.parse_reassignment(data).items() if tp not in done}
        if remaining:
            body = {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(remaining.items())]}
            self.zk.set(kz.REASSIGN, kz.encode(body), version=stat.version)
        else:
            self.zk.delete(kz.REASSIGN, version=stat.version)
            self._reassign_czxid = None

    # -- the Admin API's reassignment requests (KIP-455, ZooKeeper-mode controller) ------------------------
    def api_reassign(self, tp: TopicPartition, target: Sequence[int]) -> None:
        """AlterPartitionReassignments of one partition to ``target``; raises ``ApiError`` when Kafka refuses it.

        Kafka checks the list (non-empty, no duplicates, ids >= 0, every replica to add on a live broker), then the
        partition. A new move is the same as one through ZooKeeper (replicas ``target ++ (original -- target)``),
        except that ``/admin/reassign_partitions`` is not involved. A partition already moving gets the new target
        against its original replicas: adding replicas no longer wanted are dropped with their partial copy, those
        still wanted keep what they copied; a move started through ZooKeeper leaves its znode (the latest
        reassignment wins). A move whose target is already in the ISR, or adds no replica, completes at once; a
        target equal to the replicas of a partition at rest changes nothing."""
        target = list(target)
        with self._lock:
            move = self.moves.get(tp)
            topic = self.topics.get(tp[0])
            known = topic is not None and tp[1] in topic.partitions
            original = move.original if move else (topic.partitions[tp[1]] if topic and known else [])
            if not target:
                raise ApiError(INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment.")
            if len(set(target)) != len(target):
                raise ApiError(INVALID_REPLICA_ASSIGNMENT,
                               f"Duplicate replica ids in partition reassignment replica list: {target}")
            if any(b < 0 for b in target):
                raise ApiError(INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {target}")
            adding = [b for b in target if b not in original]
            if not set(adding) <= self.alive:
                raise ApiError(INVALID_REPLICA_ASSIGNMENT, "Replica assignment has brokers that are not alive. Replica "
                               f"list: {adding}, live broker list: {sorted(self.alive)}")
            if not known:
                raise ApiError(UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            self._refuse_if_deleting(tp, move)
            if move is None:
                if target == original:
                    return
                move = self._start_move(tp, original, target, via_api=True)
            else:
                if not move.via_api:
                    self._remove_from_admin([tp])
                    move.via_api = True
                self._retarget(move, target)
            if not move.adding or all(b in self.state[tp][1] for b in move.target):
                self._complete(move)

    def _refuse_if_deleting(self, tp: TopicPartition, move: Move | None) -> None:
        """Kafka's controller takes no reassignment (new, changed or cancelled) of a topic queued for deletion. It has
        already taken a ZooKeeper-started move out of ``/admin/reassign_partitions`` by then; the move goes on."""
        if tp[0] not in self.to_delete:
            return
        if move is not None and not move.via_api:
            self._remove_from_admin([tp])
            move.via_api = True
        raise ApiError(UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")

    def _retarget(self, move: Move, target: list[int]) -> None:
        """Point a moving partition at a new target (Kafka's ``updateCurrentReassignment``)."""
        tp = move.tp
        dropped = [b for b in move.full if b not in target and b not in move.original]
        for b in dropped:
            self.disk[tp].pop(b, None)
        move.target = list(target)
        move.adding = [b for b in target if b not in move.original]
        move.removing = [b for b in move.original if b not in target]
        for b in move.adding:
            self.disk[tp].setdefault(b, 0.0)
        self._publish_move(move)
        leader, isr, epoch = self.state[tp]
        isr = [b for b in isr if b not in dropped]
        if leader in dropped:
            leader = next((b for b in move.full if b in isr and b in self.alive), None)
        self._set_state(tp, leader, isr, epoch + 1)
        self._dirty_sizes = True
        log.info("reassignment of %s-%d retargeted: %s -> %s", tp[0], tp[1], move.original, target)

    def api_cancel(self, tp: TopicPartition) -> None:
        """Cancel a reassignment (AlterPartitionReassignments with null replicas); raises ``ApiError`` when there is
        none (NO_REASSIGNMENT_IN_PROGRESS, also for an unknown partition, as Kafka answers).

        As Kafka (ZooKeeper mode) reassigns back to the original replicas, as the full list minus the adding
        replicas (the original set, not always the original order): the adding replicas leave the ISR and lose their partial
        copy, a leader among them hands over to the first live original replica in the ISR, the leader epoch is
        bumped. A move started through ZooKeeper also leaves ``/admin/reassign_partitions``."""
        with self._lock:
            move = self.moves.get(tp)
            if move is None:
                raise ApiError(NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment in progress for {tp[0]}-{tp[1]}.")
            self._refuse_if_deleting(tp, move)
            if not move.via_api:
                self._remove_from_admin([tp])
            del self.moves[tp]
            # As Kafka's controller reverts: the full list without the adding replicas, so in the order of
            # (target ++ original), not the original order (a rollback reorders it back).
            original = [b for b in move.full if b not in move.adding]
            for b in move.full:
                if b not in original:
                    self.disk[tp].pop(b, None)
            topic = self.topics[tp[0]]
            topic.partitions[tp[1]] = list(original)
            topic.adding.pop(tp[1], None)
            topic.removing.pop(tp[1], None)
            self._write_topic(tp[0])
            leader, isr, epoch = self.state[tp]
            isr = [b for b in isr if b in original]
            if leader not in original or leader not in self.alive:
                leader = next((b for b in original if b in isr and b in self.alive), None)
            self._set_state(tp, leader, isr, epoch + 1)
            self._dirty_sizes = True
            log.info("reassignment of %s-%d cancelled: back to %s", tp[0], tp[1], original)

    def ongoing(self) -> dict[TopicPartition, Reassignment]:
        """Every reassignment in flight, started through the API or ZooKeeper (ListPartitionReassignments)."""
        with self._lock:
            return {tp: Reassignment(m.full, list(m.adding), list(m.removing)) for tp, m in self.moves.items()}

    # -- leader election -----------------------------------------------------------------------------------
    def elect_preferred(self, tp: TopicPartition) -> None:
        """Preferred leader election of one partition, at once (ElectLeaders, or the ZooKeeper request).

        Raises ``ApiError``: ELECTION_NOT_NEEDED when the preferred replica (the first of the replica list) leads,
        PREFERRED_LEADER_NOT_AVAILABLE when it is down or out of the ISR, UNKNOWN_TOPIC_OR_PARTITION, and
        INVALID_TOPIC_EXCEPTION for a topic queued for deletion."""
        with self._lock:
            if tp not in self.state:
                raise ApiError(UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
            if tp[0] in self.to_delete:
                raise ApiError(INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
            leader, isr, epoch = self.state[tp]
            preferred = self.topics[tp[0]].partitions[tp[1]][0]
            if preferred == leader:
                raise ApiError(ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            if preferred not in isr or preferred not in self.alive:
                raise ApiError(PREFERRED_LEADER_NOT_AVAILABLE, f"Failed to elect leader for partition {tp[0]}-{tp[1]} "
                               "under strategy PreferredReplicaPartitionLeaderElectionStrategy")
            self._set_state(tp, preferred, isr, epoch + 1)

    def _process_election(self) -> None:
        if not self.zk.exists(kz.PREFERRED_ELECTION):
            return
        data, _ = self.zk.get(kz.PREFERRED_ELECTION)
        try:
            entries = json.loads(data)["partitions"]
            tps = [(str(e["topic"]), int(e["partition"])) for e in entries]
        except Exception:
            log.error("rejecting malformed %s", kz.PREFERRED_ELECTION)
            tps = []
        for tp in tps:
            try:
                self.elect_preferred(tp)
            except ApiError as exc:
                log.debug("preferred election of %s-%d: %s", tp[0], tp[1], exc)
        self.zk.delete(kz.PREFERRED_ELECTION)

    # -- znode writes --------------------------------------------------------------------------------------
    def _set_state(self, tp: TopicPartition, leader: int | None, isr: list[int], epoch: int) -> None:
        self.state[tp] = [leader, list(isr), epoch]
        self.zk.set(kz.state_path(*tp), kz.encode(kz.state_znode(leader, isr, leader_epoch=epoch)))

    def _write_topic(self, topic: str) -> None:
        self.zk.set(kz.topic_path(topic), kz.encode(kz.topic_znode(self.topics[topic])))

    # -- outputs -------------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {
            "sim_time_s": round(self.sim_time, 3),
            "acceleration": self.acceleration,
            "alive": sorted(self.alive),
            "brokers": sorted(self.brokers),
            "in_flight": len(self.moves),
            "completed": len(self.completed),
            "bootstrap": self.bootstrap,
            "wall_time": time.time(),
            "pid": os.getpid(),
        }

    def _publish_status(self) -> None:
        body = kz.encode(self.status())
        if self.zk.exists(STATUS_PATH):
            self.zk.set(STATUS_PATH, body)
        else:
            self.zk.create(STATUS_PATH, body, makepath=True)

    def log_dirs(self) -> dict[str, Any]:
        """Per-replica sizes in ``kafka-log-dirs --describe`` format (live brokers only, as Kafka reports)."""
        per_broker: dict[int, list[dict[str, Any]]] = {b: [] for b in sorted(self.alive)}
        for tp, held in self.disk.items():
            for b, nbytes in held.items():
                if b in per_broker:
                    lag = max(0, int(self.size[tp] - nbytes))
                    per_broker[b].append({"partition": f"{tp[0]}-{tp[1]}", "size": int(nbytes), "offsetLag": lag, "isFuture": False})
        return {
            "version": 1,
            "brokers": [
                {"broker": b, "logDirs": [{"logDir": f"/var/lib/kafka/data-{b}", "error": None, "partitions": parts}]}
                for b, parts in per_broker.items()
            ],
        }

    def _flush_sizes(self, force: bool = False) -> None:
        if self.state_dir is None or not (force or self._dirty_sizes):
            return
        atomic_write_json(self.state_dir / "log-dirs.json", self.log_dirs())
        self._dirty_sizes = False
