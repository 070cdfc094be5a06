"""The Admin-API backend: what ``kafka-reassign-partitions --bootstrap-server`` and ``kafka-configs`` do (KIP-455).

- reassignment: AlterPartitionReassignments (the controller starts each move at once; unlike ZooKeeper mode a move
  in flight can be cancelled, which rollback uses); ListPartitionReassignments for what is in flight;
- throttles: IncrementalAlterConfigs (SET/DELETE of single keys, every other key kept) on brokers and topics;
  DescribeConfigs to find them again;
- preferred leader election: ElectLeaders (synchronous);
- partition state: Metadata for just the moving topics.

One execution per cluster: the Admin API has no lock primitive, so the lock is an exclusive ``flock`` on
``$REBALANCER_LOCK_DIR/<cluster id>.lock`` (default: the system temp dir), which the kernel releases if the process
dies. It serializes executions from one host (the Airflow worker, an operator's shell); the foreign-reassignment
check covers other hosts, and Airflow runs one DAG run per cluster at a time.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .. import kafka_admin as ka
from ..errors import SourceError
from ..model import Cluster, Partition, TopicPartition
from .throttle import THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS

__all__ = ["AdminBackend"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class AdminBackend:
    name = "admin"
    can_cancel = True

    def __init__(self, admin: Any, display: str, *, patience: float = 60.0) -> None:
        self.admin = admin
        self.display = display
        self.patience = patience
        self._lock_fh: Any = None

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one Admin call, retrying while the cluster cannot be reached for a moment (a broker or the controller
        restarting): every request this backend sends is idempotent (a reassignment to the same target, a config
        SET/DELETE, an election, reads). Past ``patience`` seconds it raises ``TransientKafkaError``."""
        import kafka.errors as ke

        deadline = time.monotonic() + self.patience
        while True:
            try:
                return fn()
            except ka.kafka_errors() as exc:
                # kafka-python keeps sending controller-bound requests to the controller it knew and addresses
                # brokers from cached metadata: forget both, so a retry finds the new controller and a returned broker.
                self.admin._controller_id = None  # noqa: SLF001
                self.admin._manager.cluster.request_update()  # noqa: SLF001
                if time.monotonic() > deadline:
                    raise ka.TransientKafkaError(f"Kafka at {self.display}: {type(exc).__name__} while {what}") from None
                log.warning("Kafka %s while %s; retrying", type(exc).__name__, what)
                time.sleep(0.5)
            except ke.AuthorizationError as exc:
                raise SourceError(f"Kafka at {self.display} denied {what} ({type(exc).__name__})") from None
            except ke.KafkaError as exc:
                raise SourceError(f"Kafka at {self.display}: {what} failed: {type(exc).__name__} {exc}") from None

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

    def in_flight(self) -> dict[TopicPartition, list[int]]:
        """Partition -> target replicas of every reassignment in flight (target = full list minus removing)."""
        return {tp: [b for b in v["replicas"] if b not in v["removing_replicas"]]
                for tp, v in self.in_flight_detail().items()}

    def live_brokers(self) -> set[int]:
        meta = self._call("reading brokers", lambda: ka.metadata(self.admin, []))
        return {b["node_id"] for b in meta["brokers"]}

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
        """Dynamic (modified) configs of many entities in one DescribeConfigs per broker plus one for all topics."""
        if not entities:
            return {}
        res = self._call("describing configs", lambda: self.admin.describe_configs(
            [self._resource(t, n, None) for t, n in entities], config_filter="modified"))
        kinds = {"broker": "brokers", "topic": "topics"}
        out: dict[tuple[str, str], dict[str, str]] = {}
        for rtype, by_name in res.items():
            for name, entries in by_name.items():
                out[(kinds.get(rtype, rtype), name)] = {k: v.get("value") for k, v in entries.items()
                                                        if v.get("value") is not None}
        return out

    def _config(self, entity_type: str, name: str) -> dict[str, str]:
        return self._configs([(entity_type, name)]).get((entity_type, name), {})

    def alter_configs(self, entity_type: str, name: str, set_: Mapping[str, str], delete: Iterable[str] = ()) -> bool:
        """Incremental change of one entity's config (SET some keys, DELETE others). Returns whether anything changed."""
        from kafka.admin import AlterConfigOp

        current = self._config(entity_type, name)
        ops: dict[str, Any] = {k: (AlterConfigOp.SET, str(v)) for k, v in set_.items() if current.get(k) != str(v)}
        ops.update({k: (AlterConfigOp.DELETE, None) for k in delete if k in current and k not in set_})
        if not ops:
            return False
        res = self._call(f"altering {entity_type}/{name}", lambda: self.admin.alter_configs(
            [self._resource(entity_type, name, ops)], raise_on_unknown=False))
        for by_name in res.values():
            for outcome in by_name.values():
                if outcome != "OK":
                    raise SourceError(f"Kafka refused the config change on {entity_type}/{name}: {outcome}")
        return True

    def throttle_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        """Every throttle key set on a live broker or a topic.

        The cluster-wide broker default cannot be described through kafka-python (it only addresses brokers by
        id), and a dead broker cannot be asked: the executor never sets either."""
        meta = self._call("listing topics and brokers", lambda: ka.metadata(self.admin))
        entities = [("brokers", str(b["node_id"])) for b in meta["brokers"]]
        entities += [("topics", t["name"]) for t in meta["topics"] if not t.get("error_code")]
        out: dict[tuple[str, str], dict[str, str]] = {}
        for (entity_type, name), config in self._configs(entities).items():
            keys = THROTTLE_BROKER_KEYS if entity_type == "brokers" else THROTTLE_TOPIC_KEYS
            found = {k: v for k, v in config.items() if k in keys}
            if found:
                out[(entity_type, name)] = found
        return out

    # -- lock ----------------------------------------------------------------------------------------------
    def _lock_path(self) -> Path:
        meta = self._call("reading the cluster id", lambda: ka.metadata(self.admin, []))
        cluster = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(meta.get("cluster_id") or self.display))
        base = Path(os.environ.get("REBALANCER_LOCK_DIR") or Path(tempfile.gettempdir()) / "kafka-rebalancer-locks")
        base.mkdir(parents=True, exist_ok=True)
        return base / f"{cluster}.lock"

    def acquire_lock(self, owner: str) -> None:
        path = self._lock_path()
        fh = open(path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            try:
                holder = json.loads(fh.read() or "{}").get("run_dir", "?")
            except json.JSONDecodeError:
                holder = "?"
            fh.close()
            raise SourceError(f"another execution holds the cluster lock ({holder}); one execution per cluster") from None
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"run_dir": owner, "host": socket.gethostname(), "pid": os.getpid()}))
        fh.flush()
        self._lock_fh = fh

    def release_lock(self) -> None:
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None
