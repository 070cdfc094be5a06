"""The ZooKeeper backend: what ``kafka-reassign-partitions --zookeeper`` and ``kafka-configs --zookeeper`` do.

- reassignment: create ``/admin/reassign_partitions`` (Kafka acts on its creation; it cannot be edited or cancelled
  while in flight, so one batch is one znode);
- throttles: write ``/config/brokers/<id>`` and ``/config/topics/<t>`` (merging with the keys already there) and a
  ``/config/changes/config_change_`` notification for each, which is how brokers learn of them;
- preferred leader election: create ``/admin/preferred_replica_election``;
- one execution per cluster: the marker topic of ``execute.lock``, created as Kafka's admin code creates a
  topic (``/config/topics/<t>``, then ``/brokers/topics/<t>`` with a fresh topic id), deleted through
  ``/admin/delete_topics/<t>``; its owner is recorded under ``/rebalancer/locks/<topic id>``.

What is in flight: the reassignment znode (what ``--zookeeper`` tools start) and, in the topic znodes, the
``adding_replicas``/``removing_replicas`` of every partition the controller is moving: a reassignment started
through the Admin API (the Kafka tool since 2.4, Cruise Control) shows only there.

Refused: a cluster migrating to KRaft (``/migration``, or a KRaft controller in ``/controller``), whose KRaft
controller ignores the admin znodes. With ``zookeeper.set.acl=true`` every node this backend creates carries the
ACL Kafka gave the cluster's own nodes (read from ``/brokers/ids``), so the controller may delete the reassignment
and election znodes; a NoAuth is one line naming the node.

Errors: kazoo's connection loss and session expiry become ``TransientError`` (the executor retries them), anything
else from ZooKeeper one-line ``SourceError`` naming the operation.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from .. import kafka_zk as kz
from ..errors import SourceError, TransientError
from ..kafka_names import LOCK_TOPIC, THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS, new_topic_id
from ..model import Cluster, Partition, TopicPartition
from ..zkclient import ZkTarget
from .backend import ConfigChange, Marker, MarkerExists, Observation

__all__ = ["ZkBackend", "LOCK_OWNERS"]

LOCK_OWNERS = "/rebalancer/locks"
MIGRATION = "/migration"
F = TypeVar("F", bound=Callable[..., Any])


def _translated(fn: F) -> F:
    """kazoo's exceptions out of a public method become the project's: transient (retried) or one line."""
    what = fn.__name__.strip("_").replace("_", " ")

    @functools.wraps(fn)
    def wrapper(self: ZkBackend, *args: Any, **kwargs: Any) -> Any:
        from kazoo.exceptions import (
            ConnectionClosedError,
            ConnectionLoss,
            KazooException,
            NoAuthError,
            OperationTimeoutError,
            SessionExpiredError,
        )
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            return fn(self, *args, **kwargs)
        except (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError,
                KazooTimeoutError) as exc:
            raise TransientError(f"ZooKeeper at {self.display}: {type(exc).__name__} while {what}") from None
        except NoAuthError:
            raise SourceError(f"ZooKeeper at {self.display} denied {what} (NoAuth): the ZooKeeper user of this URL "
                              "lacks the ACL of Kafka's nodes (zookeeper.set.acl); use the brokers' ZooKeeper "
                              "identity") from None
        except KazooException as exc:
            raise SourceError(f"ZooKeeper at {self.display}: {type(exc).__name__} while {what}") from None

    return cast(F, wrapper)  # functools.wraps keeps fn's signature


def _public_translated(cls: type) -> type:
    for name, member in list(vars(cls).items()):
        if callable(member) and not name.startswith("_") and name != "open":
            setattr(cls, name, _translated(member))
    return cls


def migration_problem(zk: Any) -> str | None:
    """Why the ZooKeeper backend must not act on this cluster (it is migrating to KRaft), or None."""
    from kazoo.exceptions import NoNodeError

    if zk.exists(MIGRATION) is not None:
        return f"it is migrating to KRaft ({MIGRATION} exists)"
    try:
        data, _ = zk.get(kz.CONTROLLER)
    except NoNodeError:
        return None
    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return None
    # Kafka 3.9's own ZooKeeper-mode controller writes kraftControllerEpoch -1: only an epoch >= 0 is a KRaft one.
    epoch = doc.get("kraftControllerEpoch", -1) if isinstance(doc, dict) else -1
    if isinstance(epoch, int) and epoch >= 0:
        return f"a KRaft controller (node {doc.get('brokerid')}) is its controller ({kz.CONTROLLER})"
    return None


def cluster_acl(zk: Any) -> list[Any] | None:
    """The ACL Kafka gave its own nodes when it is not open to all (``zookeeper.set.acl=true``), else None."""
    from kazoo.security import OPEN_ACL_UNSAFE

    acl, _ = zk.get_acls(kz.BROKER_IDS)
    return None if list(acl) == list(OPEN_ACL_UNSAFE) else list(acl)


@_public_translated
class ZkBackend:
    name = "zookeeper"
    can_cancel = False  # a reassignment znode cannot be edited or cancelled while in flight
    can_add_moves = False  # nor added to

    def __init__(self, zk: Any, display: str, target: ZkTarget | None = None, timeout: float = 10.0) -> None:
        self.zk = zk
        self.display = display
        self.source = display  # zk://HOSTS/chroot, without credentials
        self.target = target  # for the reader processes of a large snapshot (rebalancer.zk_readers)
        self.timeout = timeout

    @classmethod
    @contextmanager
    def open(cls, source: str, *, timeout: float = 10.0) -> Iterator[ZkBackend]:
        """Connected to the Kafka cluster of a ``zk://`` URL; refused (one line) if it is migrating to KRaft."""
        from kazoo.exceptions import KazooException, NoAuthError

        from ..zkclient import parse_zk_url, zk_session

        target = parse_zk_url(source)
        with zk_session(target, timeout=timeout, expect_kafka=True) as zk:
            try:
                problem = migration_problem(zk)
                acl = cluster_acl(zk)
            except NoAuthError:
                raise SourceError(f"ZooKeeper at {target.display} denied reading Kafka's metadata (NoAuth)") from None
            except KazooException as exc:
                raise SourceError(f"ZooKeeper at {target.display}: {type(exc).__name__} while opening") from None
            if problem:
                raise SourceError(f"{target.display}: {problem}, so its controller ignores the ZooKeeper admin "
                                  "znodes; use kafka://BOOTSTRAP for this cluster")
            if acl and any(a.id.scheme == "digest" and a.id.id.endswith(":x") for a in acl):
                # ZooKeeper masks a digest it does not authenticate this session as: not the brokers' identity,
                # so every write would be refused (and a copied, masked ACL would lock everyone out). Nothing written.
                raise SourceError(f"ZooKeeper at {target.display}: Kafka's nodes carry an ACL (zookeeper.set.acl) "
                                  "that this URL's user is not in (NoAuth for every write); use the brokers' ZooKeeper "
                                  "identity, zk://USER:PASSWORD@HOST/chroot")
            if acl:
                zk.default_acl = acl  # every create() below carries the cluster's ACL
            yield cls(zk, target.display, target, timeout)

    # -- reading -------------------------------------------------------------------------------------------
    def read_cluster(self) -> Cluster:
        return kz.read_cluster(self.zk, display=self.display, target=self.target, timeout=self.timeout)

    def read_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Partition]:
        """Replicas, leader and ISR of just these partitions (two znode reads per topic and partition)."""
        from kazoo.exceptions import NoNodeError

        wanted = set(tps)
        topics = {t for t, _ in wanted}
        topic_futs = {t: self.zk.get_async(kz.topic_path(t)) for t in topics}
        state_futs = {tp: self.zk.get_async(kz.state_path(*tp)) for tp in wanted}
        out: dict[TopicPartition, Partition] = {}
        assignments = {}
        for t, fut in topic_futs.items():
            try:
                assignments[t] = kz.parse_topic_znode(fut.get()[0], t)
            except NoNodeError:
                continue
        for tp, fut in state_futs.items():
            a = assignments.get(tp[0])
            if a is None or tp[1] not in a.partitions:
                continue
            try:
                leader, isr, _ = kz.parse_state_znode(fut.get()[0], *tp)
            except NoNodeError:
                leader, isr = None, []
            replicas = tuple(a.partitions[tp[1]])
            out[tp] = Partition(tp[0], tp[1], replicas, leader if leader in replicas else None,
                                tuple(b for b in isr if b in replicas), 0,
                                adding=tuple(a.adding.get(tp[1], ())), removing=tuple(a.removing.get(tp[1], ())))
        return out

    def in_flight(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, list[int]]:
        """Partition -> target replicas of every reassignment in flight (of ``tps`` only, when given): the
        reassignment znode's, and every partition whose topic znode lists adding or removing replicas (the
        Admin API's, which never appear in the znode); target = replicas minus removing, in Kafka's order."""
        from kazoo.exceptions import NoNodeError

        wanted = None if tps is None else set(tps)
        out: dict[TopicPartition, list[int]] = {}
        topics = (sorted({t for t, _ in wanted}) if wanted is not None
                  else self.zk.get_children(kz.TOPICS) if self.zk.exists(kz.TOPICS) else [])
        futures = {t: self.zk.get_async(kz.topic_path(t)) for t in topics}
        for t, fut in futures.items():
            try:
                a = kz.parse_topic_znode(fut.get()[0], t)
            except NoNodeError:
                continue
            for p in sorted(set(a.adding) | set(a.removing)):
                if (a.adding.get(p) or a.removing.get(p)) and p in a.partitions:
                    removing = set(a.removing.get(p, ()))
                    out[(t, p)] = [b for b in a.partitions[p] if b not in removing]
        try:
            data, _ = self.zk.get(kz.REASSIGN)
        except NoNodeError:
            data = None
        if data is not None:
            out.update(kz.parse_reassignment(data))  # the znode names the target exactly
        return out if wanted is None else {tp: r for tp, r in out.items() if tp in wanted}

    def replica_sizes(self, tps: Iterable[TopicPartition]) -> None:
        return None  # ZooKeeper holds no sizes: a copy's progress is not visible through this backend

    def live_brokers(self) -> set[int]:
        return {int(b) for b in self.zk.get_children(kz.BROKER_IDS) if b.isdigit()}

    def observe(self, tps: Iterable[TopicPartition]) -> Observation:
        wanted = set(tps)
        return Observation(self.in_flight(wanted), self.read_partitions(wanted), self.live_brokers())

    # -- reassignment and election --------------------------------------------------------------------------
    def submit(self, targets: Mapping[TopicPartition, Iterable[int]]) -> None:
        from kazoo.exceptions import NodeExistsError

        body = {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                             for (t, p), r in sorted(targets.items())]}
        try:
            self.zk.create(kz.REASSIGN, kz.encode(body), makepath=True)
        except NodeExistsError:
            raise SourceError("a reassignment appeared while submitting (another tool is running one)") from None

    def cancel(self, tps: Iterable[TopicPartition]) -> None:
        raise SourceError(f"{self.display}: ZooKeeper mode cannot cancel a reassignment in flight; wait for it, or "
                          "cancel it through kafka://BOOTSTRAP")

    def elect_preferred(self, tps: Iterable[TopicPartition]) -> None:
        from kazoo.exceptions import NodeExistsError

        body = {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(tps)]}
        try:
            self.zk.create(kz.PREFERRED_ELECTION, kz.encode(body), makepath=True)
        except NodeExistsError:
            raise SourceError("a preferred leader election is already running") from None

    def election_running(self) -> bool:
        return self.zk.exists(kz.PREFERRED_ELECTION) is not None

    # -- configs -------------------------------------------------------------------------------------------
    def _config(self, entity_type: str, name: str) -> dict[str, str]:
        return kz.read_config(self.zk, entity_type, name)

    def _write_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        path = kz.config_path(entity_type, name)
        body = kz.encode({"version": 1, "config": dict(config)})
        if self.zk.exists(path):
            self.zk.set(path, body)
        else:
            self.zk.create(path, body, makepath=True)
        self.zk.create(f"{kz.CONFIG_CHANGES}/{kz.CONFIG_CHANGE_PREFIX}",
                       kz.encode({"version": 2, "entity_path": f"{entity_type}/{name}"}), sequence=True, makepath=True)

    def alter_configs(self, entity_type: str, name: str, set_: Mapping[str, str], delete: Iterable[str] = (),
                      seen: Mapping[str, str] | None = None) -> bool:
        """Incremental change of one entity's config: set some keys, delete others, keep the rest.

        Returns whether anything changed (nothing is written, and no notification sent, otherwise). ``seen`` is not
        enough here: the znode holds the whole config, read to be written back."""
        current = self._config(entity_type, name)
        new = {k: v for k, v in current.items() if k not in set(delete)}
        new.update(set_)
        if new != current:
            self._write_config(entity_type, name, new)
            return True
        return False

    def alter_many(self, changes: Sequence[ConfigChange]) -> int:
        """Each change a znode write and its notification: ZooKeeper has no batch of them."""
        return sum(self.alter_configs(c.entity_type, c.name, c.set_, c.delete) for c in changes)

    def unreachable_brokers(self, brokers: Iterable[int]) -> set[int]:
        return set()  # every broker's config is a znode, whether the broker is up or not

    def throttle_configs(self, entities: Iterable[tuple[str, str]] | None = None
                         ) -> dict[tuple[str, str], dict[str, str]]:
        """Every throttle key set anywhere (of ``entities`` only, when given): {(entity_type, name): {key: value}}."""
        out: dict[tuple[str, str], dict[str, str]] = {}
        wanted = None if entities is None else set(entities)
        for entity_type, keys in (("brokers", THROTTLE_BROKER_KEYS), ("topics", THROTTLE_TOPIC_KEYS)):
            path = f"/config/{entity_type}"
            if wanted is not None:
                names = sorted(n for k, n in wanted if k == entity_type)
            elif self.zk.exists(path):
                names = self.zk.get_children(path)
            else:
                continue
            for name in names:
                found = {k: v for k, v in self._config(entity_type, name).items() if k in keys}
                if found:
                    out[(entity_type, name)] = found
        return out

    # -- the cluster lock (execute.lock): the marker topic, created as Kafka's admin code creates topics --------
    def lock_marker(self) -> Marker | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(kz.topic_path(LOCK_TOPIC))
        except NoNodeError:
            return None
        topic_id = str(kz.decode(data, kz.topic_path(LOCK_TOPIC)).get("topic_id") or "")
        deleting = self.zk.exists(f"{kz.DELETE_TOPICS}/{LOCK_TOPIC}") is not None
        owner = None
        if topic_id:
            try:
                owner = json.loads(self.zk.get(f"{LOCK_OWNERS}/{topic_id}")[0])
            except (NoNodeError, ValueError):
                owner = None
        return Marker(topic_id or "(no id)", deleting, owner)

    def create_lock_marker(self, owner: Mapping[str, Any]) -> str:
        """Config znode, then the topic znode with a fresh topic id (atomic: exactly one creator wins)."""
        from kazoo.exceptions import NodeExistsError

        topic = kz.topic_path(LOCK_TOPIC)
        if self.zk.exists(topic):
            raise MarkerExists(self.zk.exists(f"{kz.DELETE_TOPICS}/{LOCK_TOPIC}") is not None)
        live = sorted(self.live_brokers())
        if not live:
            raise SourceError(f"{self.display}: no live broker to hold the cluster lock topic {LOCK_TOPIC}")
        topic_id = new_topic_id()
        self.zk.create(f"{LOCK_OWNERS}/{topic_id}", json.dumps(dict(owner), sort_keys=True).encode(), makepath=True)
        try:
            self.zk.create(kz.config_path("topics", LOCK_TOPIC), kz.encode({"version": 1, "config": {}}), makepath=True)
        except NodeExistsError:
            pass
        try:
            self.zk.create(topic, kz.encode({"version": 3, "topic_id": topic_id, "partitions": {"0": [live[0]]},
                                             "adding_replicas": {}, "removing_replicas": {}}), makepath=True)
        except NodeExistsError:
            self.zk.delete(f"{LOCK_OWNERS}/{topic_id}")
            raise MarkerExists(self.zk.exists(f"{kz.DELETE_TOPICS}/{LOCK_TOPIC}") is not None) from None
        return topic_id

    def delete_lock_marker(self, topic_id: str) -> bool:
        """Mark the marker topic for deletion if its id is ``topic_id`` (Kafka's controller deletes it)."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        marker = self.lock_marker()
        try:
            self.zk.delete(f"{LOCK_OWNERS}/{topic_id}")
        except NoNodeError:
            pass
        if marker is None or marker.topic_id != topic_id:
            return False
        if not marker.deleting:
            try:
                self.zk.create(f"{kz.DELETE_TOPICS}/{LOCK_TOPIC}", b"", makepath=True)
            except NodeExistsError:
                pass
        return True
