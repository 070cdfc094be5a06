"""The Admin-API backend: what ``kafka-reassign-partitions --bootstrap-server`` and ``kafka-configs`` do (KIP-455).

- reassignment: AlterPartitionReassignments (the controller starts each move at once; unlike ZooKeeper mode a move
  in flight can be cancelled, which rollback uses); ListPartitionReassignments for what is in flight;
- throttles: IncrementalAlterConfigs (SET/DELETE of single keys, every other key kept) on brokers and topics;
  DescribeConfigs to find them again;
- preferred leader election: ElectLeaders (synchronous);
- partition state: Metadata for just the moving topics.

One execution per cluster: the marker topic of ``execute.lock``, created with CreateTopics and deleted with
DeleteTopics by its topic id, so it is the same lock a ``zk://`` execution of the cluster takes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from .. import kafka_admin as ka
from ..errors import SourceError
from ..kafka_names import LOCK_TOPIC, THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS, kafka_uuid, uuid_of
from ..model import Cluster, Partition, TopicPartition
from ..retry import poll as poll_until
from ..retry import retry_call
from .backend import ConfigChange, Marker, MarkerExists, Observation

__all__ = ["AdminBackend"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Unreachable(Exception):
    """One Admin call that could not reach the cluster (its Kafka error the cause): tried again (``_call``)."""


class AdminBackend:
    name = "admin"
    can_cancel = True
    can_add_moves = True

    def __init__(self, admin: Any, display: str, *, patience: float = 60.0, source: str | None = None) -> None:
        self.admin = admin
        self.display = display
        self.source = source or display  # one bootstrap broker is enough to reach the cluster again
        self.patience = patience

    @classmethod
    @contextmanager
    def open(cls, source: str, *, timeout: float = 10.0, kafka_config: Mapping[str, Any] | None = None,
             kafka_config_file: str | None = None) -> Iterator[AdminBackend]:
        """Connected to the cluster of a ``kafka://`` URL (client config from the URL, a file or a mapping)."""
        target = ka.parse_kafka_url(source, config_file=kafka_config_file, config=kafka_config)
        with ka.admin_session(target, timeout=timeout) as admin:
            yield cls(admin, target.display, source=f"kafka://{target.bootstrap[0]}")

    def _call(self, what: str, fn: Callable[[], T], brokers: Collection[int] = ()) -> T:
        """Run one Admin call, retrying while the cluster cannot be reached for a moment (a broker or the controller
        restarting): every request this backend sends is idempotent (a reassignment to the same target, a config
        SET/DELETE, an election, reads). Past ``patience`` seconds it raises ``TransientKafkaError``; at once when
        the call addresses ``brokers`` (their own configs) and one of them is no longer registered."""
        import kafka.errors as ke

        def attempt() -> T:
            try:
                return fn()
            except ka.kafka_errors() as exc:
                # kafka-python keeps sending controller-bound requests to the controller it knew and addresses
                # brokers from cached metadata: forget both, so a retry finds the new controller and a returned broker.
                self.admin._controller_id = None  # noqa: SLF001
                self.admin._manager.cluster.request_update()  # noqa: SLF001
                if brokers and (down := set(brokers) - (self._registered() or set(brokers))):
                    raise ka.TransientKafkaError(f"Kafka at {self.display}: broker {min(down)} is down "
                                                 f"({type(exc).__name__} while {what})") from None
                raise _Unreachable(exc) from exc
            except ke.AuthorizationError as exc:
                raise SourceError(f"Kafka at {self.display} denied {what} ({type(exc).__name__})") from None
            except ke.KafkaError as exc:
                raise SourceError(f"Kafka at {self.display}: {what} failed: {type(exc).__name__} {exc}") from None

        try:
            return retry_call(attempt, on=_Unreachable, patience=self.patience, before_retry=lambda exc: log.warning(
                "Kafka %s while %s; retrying", type(exc.__cause__).__name__, what))
        except _Unreachable as exc:
            raise ka.TransientKafkaError(f"Kafka at {self.display}: {type(exc.__cause__).__name__} while {what}"
                                         ) from None

    def _registered(self) -> set[int] | None:
        """The brokers the cluster lists now (None when even that cannot be read)."""
        try:
            return {b["node_id"] for b in ka.metadata(self.admin, [])["brokers"]}
        except ka.kafka_errors():
            return None

    # -- reading -------------------------------------------------------------------------------------------
    def read_cluster(self) -> Cluster:
        return self._call("reading the cluster", lambda: ka.read_cluster(self.admin, display=self.display, raw=True))

    def read_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Partition]:
        wanted = set(tps)
        meta = self._call("reading partitions", lambda: ka.metadata(self.admin, sorted({t for t, _ in wanted})))
        flight = self.in_flight_detail()
        return {p.tp: p for p in ka.partitions_of(meta, flight, wanted=wanted)}

    def in_flight_detail(self) -> dict[TopicPartition, dict[str, list[int]]]:
        return self._call("listing reassignments", lambda: ka.in_flight(self.admin))

    def in_flight(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, list[int]]:
        """Partition -> target replicas of every reassignment in flight (of ``tps`` only, when given); target =
        full list minus removing. Reassignments started through ZooKeeper are listed too (the controller keeps
        both in the same partition state)."""
        return _targets(self.in_flight_detail(), None if tps is None else set(tps))

    def replica_sizes(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, dict[int, int]]:
        """Bytes each replica of these partitions holds now (DescribeLogDirs on the live brokers, these partitions
        only): how a copy progresses."""
        wanted = set(tps)
        if not wanted:
            return {}
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(wanted):
            by_topic.setdefault(t, []).append(p)

        def read() -> dict[TopicPartition, dict[int, int]]:
            live = sorted(b["node_id"] for b in ka.metadata(self.admin, [])["brokers"])
            return ka.log_dir_sizes(self.admin, live, by_topic)

        return {tp: v for tp, v in self._call("reading replica sizes", read).items() if tp in wanted}

    def live_brokers(self) -> set[int]:
        meta = self._call("reading brokers", lambda: ka.metadata(self.admin, []))
        return {b["node_id"] for b in meta["brokers"]}

    def observe(self, tps: Iterable[TopicPartition]) -> Observation:
        """Two requests, not four: the reassignments in flight, then one Metadata of the moving topics, whose
        broker list is the live brokers' (``live_brokers`` reads the same list)."""
        wanted = set(tps)
        flight = self.in_flight_detail()
        meta = self._call("reading partitions", lambda: ka.metadata(self.admin, sorted({t for t, _ in wanted})))
        return Observation(_targets(flight, wanted), {p.tp: p for p in ka.partitions_of(meta, flight, wanted=wanted)},
                           {b["node_id"] for b in meta["brokers"]})

    # -- reassignment and election --------------------------------------------------------------------------
    def _alter(self, body: Mapping[TopicPartition, list[int] | None], what: str, ignore: tuple[str, ...] = ()) -> None:
        from kafka import TopicPartition as KTP

        results = self._call(what, lambda: self.admin.alter_partition_reassignments(
            {KTP(t, p): (list(r) if r is not None else None) for (t, p), r in body.items()}))
        errors = {(tp.topic, tp.partition): err for tp, err in results.items()
                  if err is not None and getattr(err, "__name__", "") not in ignore}
        if errors:
            (t, p), err = sorted(errors.items())[0]
            raise SourceError(f"Kafka refused {what} for {len(errors)} partition(s), e.g. {t}-{p}: "
                              f"{getattr(err, '__name__', err)}")

    def submit(self, targets: Mapping[TopicPartition, Iterable[int]]) -> None:
        self._alter({tp: list(r) for tp, r in targets.items()}, "submitting the reassignment")

    def cancel(self, tps: Iterable[TopicPartition]) -> None:
        """Cancel in-flight moves: Kafka reverts each partition to its original replicas and drops partial copies.

        A move that finished between listing and cancelling (NO_REASSIGNMENT_IN_PROGRESS) is not an error: the
        caller reverts finished moves by reassignment anyway."""
        tps = sorted(set(tps))
        if tps:
            self._alter({tp: None for tp in tps}, "cancelling the reassignment", ignore=("NoReassignmentInProgressError",))

    def elect_preferred(self, tps: Iterable[TopicPartition]) -> None:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            by_topic.setdefault(t, []).append(p)
        resp = self._call("electing preferred leaders",
                          lambda: self.admin.elect_leaders(0, by_topic, raise_errors=False))
        for result in getattr(resp, "replica_election_results", []):
            for part in result.partition_result:
                if part.error_code not in (0, 84):  # 84: ELECTION_NOT_NEEDED
                    log.warning("preferred leader election of %s-%d: error %d %s", result.topic, part.partition_id,
                                part.error_code, part.error_message or "")

    def election_running(self) -> bool:
        return False  # ElectLeaders answers when the election is done

    # -- configs -------------------------------------------------------------------------------------------
    @staticmethod
    def _resource(entity_type: str, name: str, configs: Mapping[str, Any] | None) -> Any:
        from kafka.admin import ConfigResource, ConfigResourceType

        rtype = ConfigResourceType.BROKER if entity_type == "brokers" else ConfigResourceType.TOPIC
        return ConfigResource(rtype, name, configs=None if configs is None else dict(configs))

    def _configs(self, entities: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
        brokers = [int(n) for t, n in entities if t == "brokers"]
        return self._call("describing configs", lambda: self._describe(entities),
                          brokers=brokers if len(entities) == 1 else ())

    def _describe(self, entities: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
        """Dynamic (modified) configs of many entities in one DescribeConfigs per broker plus one for all topics
        (``kafka_admin.describe_configs``: its errors, a resource's own included, are raised for ``_call`` to retry
        or to turn into one line)."""
        if not entities:
            return {}
        res = ka.describe_configs(self.admin, [self._resource(t, n, None) for t, n in entities])
        kinds = {"broker": "brokers", "topic": "topics"}
        out: dict[tuple[str, str], dict[str, str]] = {}
        for rtype, by_name in res.items():
            for name, entries in by_name.items():
                out[(kinds.get(rtype, rtype), name)] = {k: v.get("value") for k, v in entries.items()
                                                        if v.get("value") is not None}
        return out

    def _config(self, entity_type: str, name: str) -> dict[str, str]:
        return self._configs([(entity_type, name)]).get((entity_type, name), {})

    def alter_configs(self, entity_type: str, name: str, set_: Mapping[str, str], delete: Iterable[str] = (),
                      seen: Mapping[str, str] | None = None) -> bool:
        """Incremental change of one entity's config (SET some keys, DELETE others). Returns whether anything changed.
        ``seen``: those keys as just read (a rolling start throttles its moves with one read for all of them)."""
        return self.alter_many([ConfigChange(entity_type, name, set_, tuple(delete), seen)]) > 0

    def alter_many(self, changes: Sequence[ConfigChange]) -> int:
        """Many entities' changes in one IncrementalAlterConfigs per broker addressed plus one for all topics
        (kafka-python groups them so); how many entities changed."""
        from kafka.admin import AlterConfigOp

        resources, names, brokers = [], [], []
        expect: dict[tuple[str, str], tuple[dict[str, str], dict[str, str]]] = {}  # (set, deleted: value it had)
        for c in changes:
            current = self._config(c.entity_type, c.name) if c.seen is None else c.seen
            ops: dict[str, Any] = {k: (AlterConfigOp.SET, str(v)) for k, v in c.set_.items()
                                   if current.get(k) != str(v)}
            ops.update({k: (AlterConfigOp.DELETE, None) for k in c.delete if k in current and k not in c.set_})
            if ops:
                resources.append(self._resource(c.entity_type, c.name, ops))
                names.append(f"{c.entity_type}/{c.name}")
                if c.entity_type == "brokers":
                    brokers.append(int(c.name))
                expect[(c.entity_type, c.name)] = ({k: str(v) for k, v in c.set_.items() if k in ops},
                                                   {k: current[k] for k in ops if k not in c.set_})
        if not resources:
            return 0
        what = f"altering {names[0]}" + (f" and {len(names) - 1} other config(s)" if len(names) > 1 else "")
        res = self._call(what, lambda: self.admin.alter_configs(resources, raise_on_unknown=False),
                         brokers=brokers)
        kinds = {"broker": "brokers", "topic": "topics"}
        for rtype, by_name in res.items():
            for name, outcome in by_name.items():
                if outcome != "OK":
                    raise SourceError(f"Kafka refused the config change on {kinds.get(rtype, rtype)}/{name}: "
                                      f"{outcome}")
        self._until_shown(expect, brokers)
        return len(resources)

    def _until_shown(self, expect: Mapping[tuple[str, str], tuple[Mapping[str, str], Mapping[str, str]]],
                     brokers: Collection[int]) -> None:
        """Wait until DescribeConfigs shows these changes (keys set to their values; keys deleted gone, or back to
        another layer's value), so that the next read is of this change: a broker answers for its own config from
        memory, updated a moment after the change is stored (ZooKeeper notification, KRaft metadata). Read before
        that, a rate this run just deleted looks like someone else's, and the next batch's ledger records it as the
        value to restore (a rollback put a deleted 2 MB/s throttle back that way, on real Kafka 3.9)."""
        def late(now: Mapping[tuple[str, str], Mapping[str, str]]) -> list[str]:
            out = []
            for e, (set_, gone) in expect.items():
                seen = now.get(e, {})
                if any(seen.get(k) != v for k, v in set_.items()) or any(seen.get(k) == v for k, v in gone.items()):
                    out.append(f"{e[0]}/{e[1]}")
            return out

        if not expect:
            return
        entities = sorted(expect)
        now, done = poll_until(lambda: self._call("reading the config change back", lambda: self._describe(entities),
                                                  brokers=brokers),
                               lambda now: not late(now), timeout=self.patience, interval=0.1)
        if not done:
            raise ka.TransientKafkaError(f"Kafka at {self.display}: {', '.join(late(now))} still not showing the "
                                         f"config change {self.patience:g} s after it was made")

    def unreachable_brokers(self, brokers: Iterable[int]) -> set[int]:
        """Brokers whose config cannot be read or changed now: kafka-python addresses each broker's own, so a dead
        broker's throttle waits until it is back."""
        return set(brokers) - self.live_brokers()

    def throttle_configs(self, entities: Iterable[tuple[str, str]] | None = None
                         ) -> dict[tuple[str, str], dict[str, str]]:
        """Every throttle key set on a live broker or a topic (of ``entities`` only, when given: a start of the
        rolling schedule reads the few it writes, not every topic of the cluster).

        The cluster-wide broker default cannot be described through kafka-python (it only addresses brokers by
        id), and a dead broker cannot be asked: the executor never sets either."""
        wanted = None if entities is None else set(entities)

        def read() -> dict[tuple[str, str], dict[str, str]]:
            # The entities are listed again on every retry: a broker that died meanwhile is no longer asked.
            topics = None if wanted is None else sorted(n for k, n in wanted if k == "topics")
            meta = ka.metadata(self.admin, topics)  # [] lists no topic, None every one
            listed = [("brokers", str(b["node_id"])) for b in meta["brokers"]]
            listed += [("topics", t["name"]) for t in meta["topics"] if not t.get("error_code")]
            return self._describe(listed if wanted is None else [e for e in listed if e in wanted])

        out: dict[tuple[str, str], dict[str, str]] = {}
        for (entity_type, name), config in self._call("describing throttle configs", read).items():
            keys = THROTTLE_BROKER_KEYS if entity_type == "brokers" else THROTTLE_TOPIC_KEYS
            found = {k: v for k, v in config.items() if k in keys}
            if found:
                out[(entity_type, name)] = found
        return out

    def throttle_views(self) -> dict[int, dict[tuple[str, str], dict[str, str]]]:
        """Each live broker's own view of the throttles: its own broker config and every topic's, asked of that
        broker. A change reaches the brokers a moment after it is made (KRaft metadata, ZooKeeper notifications),
        so the views differ until then; ``rebalancer.execute.consistency.until_agreed`` waits for them to agree."""
        def read() -> dict[int, dict[tuple[str, str], dict[str, str]]]:
            meta = ka.metadata(self.admin)
            topics = [t["name"] for t in meta["topics"] if not t.get("error_code")]
            views: dict[int, dict[tuple[str, str], dict[str, str]]] = {}
            for b in sorted(x["node_id"] for x in meta["brokers"]):
                entities = [("brokers", str(b))] + [("topics", t) for t in topics]
                seen = ka.configs_seen_by(self.admin, b, [self._resource(k, n, None) for k, n in entities])
                kinds = {"broker": "brokers", "topic": "topics"}
                view: dict[tuple[str, str], dict[str, str]] = {}
                for rtype, by_name in seen.items():
                    keys = THROTTLE_BROKER_KEYS if kinds.get(rtype) == "brokers" else THROTTLE_TOPIC_KEYS
                    for name, entries in by_name.items():
                        found = {k: v.get("value") for k, v in entries.items() if k in keys and v.get("value") is not None}
                        if found:
                            view[(kinds.get(rtype, rtype), name)] = found
                views[b] = view
            return views

        return self._call("describing throttle configs on every broker", read)

    # -- the cluster lock (execute.lock): the marker topic, through CreateTopics and DeleteTopics by id --------
    def lock_marker(self) -> Marker | None:
        # kafka-python's Metadata request sets allow_auto_topic_creation=false: asking never creates the topic.
        meta = self._call("reading the cluster lock", lambda: ka.metadata(self.admin, [LOCK_TOPIC]))
        for t in meta["topics"]:
            if t["name"] == LOCK_TOPIC and not t.get("error_code"):
                tid = t.get("topic_id")
                return Marker(kafka_uuid(tid) if tid and tid != uuid.UUID(int=0) else "(no id)")
        return None

    def create_lock_marker(self, owner: Mapping[str, Any]) -> str:
        import kafka.errors as ke

        live = sorted(self.live_brokers())
        if not live:
            raise SourceError(f"{self.display}: no live broker to hold the cluster lock topic {LOCK_TOPIC}")
        res = self._call("creating the cluster lock topic", lambda: self.admin.create_topics(
            {LOCK_TOPIC: {"assignments": {0: [live[0]]}}}, raise_errors=False))
        result = next(t for t in res["topics"] if t["name"] == LOCK_TOPIC)
        code, message = result.get("error_code", 0), result.get("error_message") or ""
        if code == ke.TopicAlreadyExistsError.errno:
            raise MarkerExists(deleting="marked for deletion" in message)
        if code:
            raise SourceError(f"Kafka at {self.display} refused to create the cluster lock topic {LOCK_TOPIC}: "
                              f"{ke.for_code(code).__name__} {message}".rstrip())
        tid = result.get("topic_id")
        if tid and tid != uuid.UUID(int=0):
            return kafka_uuid(tid)
        marker = self.lock_marker()  # a CreateTopics older than v7 does not return the id
        if marker is None:
            raise SourceError(f"Kafka at {self.display} created the cluster lock topic {LOCK_TOPIC} but does not list it")
        return marker.topic_id

    def delete_lock_marker(self, topic_id: str) -> bool:
        """Delete the marker topic by its id (DeleteTopics v6): never a marker created by anyone else."""
        import kafka.errors as ke

        marker = self.lock_marker()
        if marker is None or marker.topic_id != topic_id:
            return False
        res = self._call("deleting the cluster lock topic", lambda: self.admin.delete_topics(
            [uuid_of(topic_id)], raise_errors=False))
        first: dict[str, Any] = next(iter(res["topics"]), {})
        code = first.get("error_code", 0)
        if code in (0, ke.RequestTimedOutError.errno):  # timed out: marked for deletion, the controller finishes it
            return True
        if code in (ke.UnknownTopicOrPartitionError.errno, ke.UnknownTopicIdError.errno):
            return False
        if code == ke.TopicDeletionDisabledError.errno:
            raise SourceError(f"Kafka at {self.display} cannot delete topics (delete.topic.enable=false), so the "
                              f"cluster lock {topic_id} cannot be released: delete topic {LOCK_TOPIC} by hand")
        raise SourceError(f"Kafka at {self.display} refused to delete the cluster lock topic {LOCK_TOPIC}: "
                          f"{ke.for_code(code).__name__}")


def _targets(flight: Mapping[TopicPartition, Mapping[str, list[int]]], wanted: set[TopicPartition] | None
             ) -> dict[TopicPartition, list[int]]:
    """Partition -> target replicas (full list minus removing) of the reassignments listed (of ``wanted`` only)."""
    return {tp: [b for b in v["replicas"] if b not in v["removing_replicas"]]
            for tp, v in flight.items() if wanted is None or tp in wanted}
