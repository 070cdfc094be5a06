"""The ZooKeeper backend: what ``kafka-reassign-partitions --zookeeper`` and ``kafka-configs --zookeeper`` do.

- reassignment: create ``/admin/reassign_partitions`` (Kafka acts on its creation; it cannot be edited or cancelled
  while in flight, so one batch is one znode);
- throttles: write ``/config/brokers/<id>`` and ``/config/topics/<t>`` (merging with the keys already there) and a
  ``/config/changes/config_change_`` notification for each, which is how brokers learn of them;
- preferred leader election: create ``/admin/preferred_replica_election``;
- one execution per cluster: the marker topic of ``rebalancer.lock``, created as Kafka's admin code creates a
  topic (``/config/topics/<t>``, then ``/brokers/topics/<t>`` with a fresh topic id), deleted through
  ``/admin/delete_topics/<t>``; its owner is recorded under ``/rebalancer/locks/<topic id>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .. import kafka_zk as kz
from ..errors import SourceError
from ..lock import LOCK_TOPIC, Marker, MarkerExists, new_topic_id, owner_json
from ..model import Cluster, Partition, TopicPartition
from .throttle import THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS

__all__ = ["ZkBackend", "LOCK_OWNERS"]

LOCK_OWNERS = "/rebalancer/locks"


class ZkBackend:
    name = "zookeeper"
    can_cancel = False  # a reassignment znode cannot be edited or cancelled while in flight

    def __init__(self, zk: Any, display: str) -> None:
        self.zk = zk
        self.display = display
        self.source = display  # zk://HOSTS/chroot, without credentials

    # -- reading -------------------------------------------------------------------------------------------
    def read_cluster(self) -> Cluster:
        return kz.read_cluster(self.zk, display=self.display)

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

    def in_flight(self) -> dict[TopicPartition, list[int]]:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(kz.REASSIGN)
        except NoNodeError:
            return {}
        return kz.parse_reassignment(data)

    def live_brokers(self) -> set[int]:
        return {int(b) for b in self.zk.get_children(kz.BROKER_IDS) if b.isdigit()}

    # -- reassignment and election --------------------------------------------------------------------------
    def submit(self, targets: Mapping[TopicPartition, Iterable[int]]) -> None:
        from kazoo.exceptions import NodeExistsError

        body = {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                             for (t, p), r in sorted(targets.items())]}
        try:
            self.zk.create(kz.REASSIGN, kz.encode(body), makepath=True)
        except NodeExistsError:
            raise SourceError("a reassignment appeared while submitting (another tool is running one)") from None

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

    def alter_configs(self, entity_type: str, name: str, set_: Mapping[str, str], delete: Iterable[str] = ()) -> bool:
        """Incremental change of one entity's config: set some keys, delete others, keep the rest.

        Returns whether anything changed (nothing is written, and no notification sent, otherwise)."""
        current = self._config(entity_type, name)
        new = {k: v for k, v in current.items() if k not in set(delete)}
        new.update(set_)
        if new != current:
            self._write_config(entity_type, name, new)
            return True
        return False

    def unreachable_brokers(self, brokers: Iterable[int]) -> set[int]:
        return set()  # every broker's config is a znode, whether the broker is up or not

    def throttle_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        """Every throttle key set anywhere: {(entity_type, name): {key: value}}."""
        out: dict[tuple[str, str], dict[str, str]] = {}
        for entity_type, keys in (("brokers", THROTTLE_BROKER_KEYS), ("topics", THROTTLE_TOPIC_KEYS)):
            path = f"/config/{entity_type}"
            if not self.zk.exists(path):
                continue
            for name in self.zk.get_children(path):
                found = {k: v for k, v in self._config(entity_type, name).items() if k in keys}
                if found:
                    out[(entity_type, name)] = found
        return out

    # -- the cluster lock (rebalancer.lock): the marker topic, created as Kafka's admin code creates topics --------
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
        self.zk.create(f"{LOCK_OWNERS}/{topic_id}", owner_json(dict(owner)), makepath=True)
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
