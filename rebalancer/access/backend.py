"""The execution backend: the contract every way of reaching a cluster fulfils (``Backend``, with the records it
speaks in: ``ConfigChange``, ``Observation``, the lock's ``Marker``). It imports no backend: the implementations
import it, and ``access.connect`` (the one registry of them) opens one by the source URL's scheme; callers never
branch on the scheme. Two implement the contract:

    zk://     ``ZkBackend``     what ``kafka-reassign-partitions --zookeeper`` does (ZooKeeper-mode clusters)
    kafka://  ``AdminBackend``  the Admin API (KIP-455), any cluster since Kafka 2.4, the only way into KRaft

Errors: a backend raises ``TransientError`` (from ``rebalancer.errors``) when the cluster could not be reached for
a moment (a connection lost, a session expired, the controller moving): the executor retries those and nothing
else, without knowing any client library's exceptions. Everything else is a one-line ``SourceError`` (denied, the
cluster refused a request) or ``InputError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..model import Cluster, Partition, TopicPartition

__all__ = ["Backend", "ConfigChange", "Marker", "MarkerExists", "Observation"]


@dataclass(frozen=True)
class Marker:
    """The cluster lock (``execute.lock``) as the cluster shows it: its id, whether it is being deleted, and its
    owner when recorded."""

    topic_id: str
    deleting: bool = False
    owner: dict[str, Any] | None = None


class MarkerExists(Exception):
    """Raised by a backend's ``create_lock_marker`` when the marker topic exists (``deleting``: marked for deletion)."""

    def __init__(self, deleting: bool = False) -> None:
        super().__init__("exists")
        self.deleting = deleting


class ConfigChange(NamedTuple):
    """One entity's config change (``Backend.alter_many``): set some keys, delete others, keep the rest. ``seen``:
    the keys changed, as the caller just read them (``throttle_configs``), so that a backend that can change keys
    alone need not read them again."""

    entity_type: str   # "brokers" or "topics"
    name: str
    set_: Mapping[str, str]
    delete: Sequence[str] = ()
    seen: Mapping[str, str] | None = None


class Observation(NamedTuple):
    """One look at moving partitions (``Backend.observe``): their reassignments in flight (partition -> target
    replicas, as ``in_flight``), their state (``read_partitions``) and the live brokers."""

    flight: dict[TopicPartition, list[int]]
    partitions: dict[TopicPartition, Partition]
    live: set[int]


@runtime_checkable
class Backend(Protocol):
    """What the executor, the lock, the throttle ledger and verification use of a cluster."""

    name: str          # "zookeeper" or "admin": recorded with the lock
    display: str       # the cluster, for messages (never a secret)
    source: str        # a source URL that reaches the cluster again (no credentials), for hints
    can_cancel: bool   # whether a reassignment in flight can be cancelled (the Admin API can, ZooKeeper cannot;
                       # its cancel raises a one-line SourceError)
    can_add_moves: bool  # whether moves can be submitted while others are in flight (the Admin API can: the
                         # rolling schedule; ZooKeeper's one reassignment znode cannot)

    # -- reading ---------------------------------------------------------------------------------------------
    def read_cluster(self) -> Cluster: ...
    def read_partitions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Partition]: ...
    def in_flight(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, list[int]]: ...
    def live_brokers(self) -> set[int]: ...
    def replica_sizes(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, dict[int, int]] | None:
        """Bytes per replica of these partitions now, or None if this backend cannot see sizes."""
    def observe(self, tps: Iterable[TopicPartition]) -> Observation:
        """``in_flight``, ``read_partitions`` of ``tps`` and ``live_brokers`` in as few requests as the backend can:
        the executor's poll, whose every round trip delays the next move's start."""

    # -- reassignment and election ---------------------------------------------------------------------------
    def submit(self, targets: Mapping[TopicPartition, Iterable[int]]) -> None: ...
    def cancel(self, tps: Iterable[TopicPartition]) -> None: ...
    def elect_preferred(self, tps: Iterable[TopicPartition]) -> None: ...
    def election_running(self) -> bool: ...

    # -- configs (replication throttles) ---------------------------------------------------------------------
    def alter_configs(self, entity_type: str, name: str, set_: Mapping[str, str], delete: Iterable[str] = (),
                      seen: Mapping[str, str] | None = None) -> bool:
        """Set some keys, delete others, keep the rest; whether anything changed. ``seen``: the keys changed, as the
        caller just read them (``throttle_configs``), so that a backend that can change keys alone need not read
        them again."""
    def alter_many(self, changes: Sequence[ConfigChange]) -> int:
        """``alter_configs`` of each change, in as few requests as the backend can (a rolling start throttles the
        topics and brokers of its moves at once); how many entities changed."""
    def throttle_configs(self, entities: Iterable[tuple[str, str]] | None = None
                         ) -> dict[tuple[str, str], dict[str, str]]:
        """The throttle keys set, per (entity type, name): of ``entities`` only (those that exist), or everywhere."""
    def unreachable_brokers(self, brokers: Iterable[int]) -> set[int]: ...

    # -- the cluster lock (execute.lock) ------------------------------------------------------------------
    def lock_marker(self) -> Marker | None: ...
    def create_lock_marker(self, owner: Mapping[str, Any]) -> str: ...
    def delete_lock_marker(self, topic_id: str) -> bool: ...
