"""Kafka's ZooKeeper-mode metadata layout: paths, znode encodings, and whole-cluster read and write.

The encodings follow Kafka's ``kafka.zk.ZkData`` (3.x):

- ``/brokers/ids/<id>`` (ephemeral): ``{"version":5,"host":..,"port":..,"endpoints":[..],"rack":..,...}``
- ``/brokers/topics/<t>``: ``{"version":3,"topic_id":..,"partitions":{"0":[1,2]},"adding_replicas":{},
  "removing_replicas":{}}``
- ``/brokers/topics/<t>/partitions/<p>/state``: ``{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,
  "isr":[1,2]}``
- ``/admin/reassign_partitions``: ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}``
- ``/admin/preferred_replica_election``: ``{"version":1,"partitions":[{"topic":..,"partition":..}]}``
- ``/config/<brokers|topics>/<name>``: ``{"version":1,"config":{..}}`` plus a persistent sequential
  ``/config/changes/config_change_`` node ``{"version":2,"entity_path":"brokers/1"}``.

ZooKeeper holds no partition sizes; ``read_cluster`` takes them from an optional per-replica size map (for example
``kafka-log-dirs --describe`` output).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import SourceError
from .kafka_names import LOCK_TOPIC
from .model import Broker, Cluster, Partition, TopicPartition
from .zkclient import ZkTarget

__all__ = [
    "BROKER_IDS",
    "TOPICS",
    "REASSIGN",
    "PREFERRED_ELECTION",
    "CONFIG_CHANGES",
    "CONTROLLER",
    "broker_path",
    "topic_path",
    "state_path",
    "config_path",
    "encode",
    "decode",
    "broker_znode",
    "topic_znode",
    "state_znode",
    "TopicAssignment",
    "parse_topic_znode",
    "parse_state_znode",
    "parse_reassignment",
    "read_config",
    "read_cluster",
    "write_cluster",
]

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
REASSIGN = "/admin/reassign_partitions"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
DELETE_TOPICS = "/admin/delete_topics"

# Paths Kafka's ZooKeeper-mode brokers create at start (KafkaZkClient.createTopLevelPaths).
PERSISTENT_PATHS = (
    "/consumers",
    "/admin/delete_topics",
    BROKER_IDS,
    TOPICS,
    "/brokers/seqid",
    CONFIG_CHANGES,
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(entity_type: str, name: str | int) -> str:
    return f"/config/{entity_type}/{name}"


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def decode(data: bytes | None, where: str) -> Any:
    if not data:
        raise SourceError(f"ZooKeeper node {where} is empty")
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"ZooKeeper node {where} holds malformed JSON: {exc}") from None


# -- znode bodies -------------------------------------------------------------------------------------------
def broker_znode(broker: Broker, *, host: str = "localhost", port: int = 9092) -> dict[str, Any]:
    host = broker.host or host
    port = broker.port or port
    body: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://{host}:{port}"],
        "jmx_port": -1,
        "host": host,
        "port": port,
        "timestamp": str(int(time.time() * 1000)),
        "version": 5,
    }
    if broker.rack is not None:
        body["rack"] = broker.rack
    return body


@dataclass
class TopicAssignment:
    """The body of ``/brokers/topics/<t>``: replicas per partition and any reassignment in progress."""

    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)
    topic_id: str | None = None


def topic_znode(assignment: TopicAssignment) -> dict[str, Any]:
    return {
        "version": 3,
        "topic_id": assignment.topic_id or _topic_id(),
        "partitions": {str(p): r for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): r for p, r in sorted(assignment.adding.items()) if r},
        "removing_replicas": {str(p): r for p, r in sorted(assignment.removing.items()) if r},
    }


def _topic_id() -> str:
    # Kafka's topic ids are base64url UUIDs without padding.
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def state_znode(leader: int | None, isr: Sequence[int], *, leader_epoch: int = 0, controller_epoch: int = 1) -> dict[str, Any]:
    return {
        "controller_epoch": controller_epoch,
        "leader": -1 if leader is None else leader,
        "version": 1,
        "leader_epoch": leader_epoch,
        "isr": list(isr),
    }


def parse_topic_znode(data: bytes | None, topic: str) -> TopicAssignment:
    where = topic_path(topic)
    doc = decode(data, where)
    try:
        parts = {int(p): [int(b) for b in r] for p, r in doc["partitions"].items()}
        adding = {int(p): [int(b) for b in r] for p, r in (doc.get("adding_replicas") or {}).items()}
        removing = {int(p): [int(b) for b in r] for p, r in (doc.get("removing_replicas") or {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SourceError(f"ZooKeeper node {where} is not a Kafka topic assignment: {exc!r}") from None
    return TopicAssignment(parts, adding, removing, doc.get("topic_id"))


def parse_state_znode(data: bytes | None, topic: str, partition: int) -> tuple[int | None, list[int], int]:
    """(leader or None, isr, leader_epoch) from a partition state znode."""
    where = state_path(topic, partition)
    doc = decode(data, where)
    try:
        leader = int(doc["leader"])
        isr = [int(b) for b in doc["isr"]]
        epoch = int(doc.get("leader_epoch", 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"ZooKeeper node {where} is not a Kafka partition state: {exc!r}") from None
    return (None if leader < 0 else leader), isr, epoch


def read_config(zk: Any, entity_type: str, name: str | int) -> dict[str, str]:
    """The dynamic config of ``/config/<entity_type>/<name>`` ({} when absent); SourceError when malformed."""
    from kazoo.exceptions import NoNodeError

    path = config_path(entity_type, name)
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return {}
    try:
        return {str(k): str(v) for k, v in (json.loads(data).get("config") or {}).items()}
    except (ValueError, AttributeError):
        raise SourceError(f"ZooKeeper node {path} is not a Kafka config") from None


def parse_reassignment(data: bytes | None, where: str = REASSIGN) -> dict[TopicPartition, list[int]]:
    doc = decode(data, where)
    try:
        return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]] for e in doc["partitions"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"ZooKeeper node {where} is not a reassignment document: {exc!r}") from None


# -- whole cluster ------------------------------------------------------------------------------------------
def _size_of(sizes: Mapping[int, int] | None, leader: int | None) -> int:
    if not sizes:
        return 0
    if leader is not None and leader in sizes:
        return sizes[leader]
    return max(sizes.values())


def read_cluster(  # noqa: C901
    zk: Any,
    *,
    display: str,
    sizes: Mapping[TopicPartition, Mapping[int, int]] | None = None,
    target: ZkTarget | None = None,
    readers: int | None = None,
    timeout: float = 10.0,
) -> Cluster:
    """Read brokers, topics, partition states and any in-flight reassignment from a ZooKeeper-mode cluster.

    Brokers that appear in a replica list without a ``/brokers/ids`` registration are included as dead
    (``alive=False``, rack unknown). Reads are pipelined with async gets, so large clusters read quickly; with
    the session's ``target``, the partition states of a large cluster are read by ``readers`` processes
    (``zk_readers``; by default from ``zk_readers.PARALLEL_FROM`` partitions).
    """
    from kazoo.exceptions import NoNodeError

    from . import zk_readers

    if not zk.exists(BROKER_IDS) or not zk.exists(TOPICS):
        raise SourceError(f"no Kafka metadata at {display}: {BROKER_IDS} or {TOPICS} is missing (wrong chroot?)")

    broker_ids = sorted(int(b) for b in zk.get_children(BROKER_IDS) if b.isdigit())
    broker_futs = [(b, zk.get_async(broker_path(b))) for b in broker_ids]
    brokers: dict[int, Broker] = {}
    for bid, fut in broker_futs:
        try:
            data, _ = fut.get()
        except NoNodeError:
            continue  # deregistered between list and get: treated as dead below
        doc = decode(data, broker_path(bid))
        rack = doc.get("rack")
        brokers[bid] = Broker(id=bid, rack=rack if isinstance(rack, str) and rack else None, alive=True,
                              host=doc.get("host") or None, port=doc.get("port") if isinstance(doc.get("port"), int) and doc.get("port") > 0 else None)

    topics = sorted(t for t in zk.get_children(TOPICS) if t != LOCK_TOPIC)  # the cluster lock is not data
    topic_futs = [(t, zk.get_async(topic_path(t))) for t in topics]
    assignments: dict[str, TopicAssignment] = {}
    for t, fut in topic_futs:
        try:
            data, _ = fut.get()
        except NoNodeError:
            continue  # deleted while reading
        assignments[t] = parse_topic_znode(data, t)

    # Topic overrides of retention.ms and min.insync.replicas (ZooKeeper holds no broker defaults: the load model
    # and the failover figures assume Kafka's).
    config_futs = [(t, zk.get_async(config_path("topics", t))) for t in assignments]
    retention: dict[str, int] = {}
    min_isr: dict[str, int] = {}
    for t, fut in config_futs:
        try:
            data, _ = fut.get()
            config = json.loads(data).get("config") or {}
            for key, into in (("retention.ms", retention), ("min.insync.replicas", min_isr)):
                if config.get(key) is not None:
                    into[t] = int(config[key])
        except NoNodeError:
            continue
        except (ValueError, TypeError, AttributeError):
            raise SourceError(f"ZooKeeper node {config_path('topics', t)} is not a Kafka topic config") from None

    # The partition states, zk_readers.WINDOW gets in flight at a time (a million partitions never hold a million
    # pending requests at once); many partitions and the session's target known: reader processes in parallel.
    keys = [(t, p) for t, a in assignments.items() for p in a.partitions]
    paths = [state_path(t, p) for t, p in keys]
    workers = 1 if target is None else (readers if readers is not None else zk_readers.readers(len(keys)))
    if workers > 1 and target is not None:
        datas: Iterable[bytes | None] = zk_readers.read_many(target, paths, workers, timeout)
    else:
        datas = zk_readers.read_in_session(zk, paths)
    states: dict[TopicPartition, tuple[int | None, list[int], int]] = {}
    for (t, p), data in zip(keys, datas, strict=True):
        if data is not None:  # None: created but no leader elected yet
            states[(t, p)] = parse_state_znode(data, t, p)

    in_flight: list[dict[str, Any]] = []
    try:
        data, _ = zk.get(REASSIGN)  # no exists() first: the controller may delete it at any moment
    except NoNodeError:
        data = None
    if data is not None:
        for (t, p), moving_to in sorted(parse_reassignment(data).items()):
            in_flight.append({"topic": t, "partition": p, "replicas": moving_to})

    partitions: list[Partition] = []
    for t, a in assignments.items():
        for p, replicas in a.partitions.items():
            leader, isr, _epoch = states.get((t, p), (None, [], 0))
            # A replica list can name brokers that are down: keep them, as Kafka does.
            for b in replicas:
                if b not in brokers:
                    brokers[b] = Broker(id=b, alive=False)
            size = _size_of(sizes.get((t, p)) if sizes else None, leader)
            partitions.append(
                Partition(
                    topic=t,
                    partition=p,
                    replicas=tuple(replicas),
                    leader=leader if leader in replicas else None,
                    isr=tuple(b for b in isr if b in replicas),
                    size_bytes=size,
                    adding=tuple(a.adding.get(p, ())),
                    removing=tuple(a.removing.get(p, ())),
                )
            )
    meta: dict[str, Any] = {"source": display, "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if in_flight:
        meta["reassignment_in_progress"] = in_flight
    meta["sizes_known"] = bool(sizes)
    if retention:
        meta["topic_retention_ms"] = retention
    if min_isr:
        meta["topic_min_insync_replicas"] = min_isr
    return Cluster.build(brokers.values(), partitions, meta)


WRITE_BATCH = 1000  # creates per ZooKeeper multi-operation (well under jute.maxbuffer's 1 MiB per request)
WRITE_WINDOW = 8  # batches in flight


def write_cluster(zk: Any, cluster: Cluster, *, register_brokers: bool = True, ephemeral: bool = True) -> None:
    """Write a cluster's metadata in Kafka's layout (what a controller and brokers would have written).

    Existing topics of the same name are overwritten. Dead brokers (``alive=False``) are not registered.
    """
    for path in PERSISTENT_PATHS:
        zk.ensure_path(path)
    if not zk.exists(CLUSTER_ID):
        zk.create(CLUSTER_ID, encode({"version": "1", "id": _topic_id()}), makepath=True)
    if register_brokers:
        for b in cluster.brokers:
            if b.alive:
                path = broker_path(b.id)
                if zk.exists(path):
                    zk.delete(path)
                zk.create(path, encode(broker_znode(b, port=9092 + b.id)), ephemeral=ephemeral)
    by_topic: dict[str, list[Partition]] = {}
    for p in cluster.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    existing = set(zk.get_children(TOPICS))
    # Every znode below in multi-operations of WRITE_BATCH creates, a window of them in flight: one ZooKeeper
    # transaction (and one log sync) per batch instead of per znode. A million partitions (three million znodes)
    # are written in about a minute; one create at a time took 18 s per 20,000 partitions.
    ops: list[tuple[str, bytes]] = []
    for topic, parts in by_topic.items():
        if topic in existing:
            zk.delete(topic_path(topic), recursive=True)
        body = topic_znode(
            TopicAssignment(
                partitions={p.partition: list(p.replicas) for p in parts},
                adding={p.partition: list(p.adding) for p in parts if p.adding},
                removing={p.partition: list(p.removing) for p in parts if p.removing},
            )
        )
        ops += [(topic_path(topic), encode(body)), (f"{topic_path(topic)}/partitions", b"")]
        for p in parts:
            ops += [(f"{topic_path(topic)}/partitions/{p.partition}", b""),
                    (state_path(p.topic, p.partition), encode(state_znode(p.leader, p.isr)))]
    in_flight: list[Any] = []
    for start in range(0, len(ops), WRITE_BATCH):
        txn = zk.transaction()
        for path, data in ops[start:start + WRITE_BATCH]:
            txn.create(path, data)
        in_flight.append((start, txn.commit_async()))
        if len(in_flight) >= WRITE_WINDOW:
            _committed(*in_flight.pop(0))
    for start, fut in in_flight:
        _committed(start, fut)


def _committed(start: int, fut: Any) -> None:
    """Wait for one batch of ``write_cluster``; a create that failed fails the write, naming it."""
    results = fut.get()
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise SourceError(f"writing the cluster to ZooKeeper: {type(failed[0]).__name__} in the batch of znodes "
                          f"from #{start}")
