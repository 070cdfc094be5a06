"""The cluster model: brokers, partitions and the cluster that holds them.

Immutable and validated on construction. Every invariant violation raises ``ModelError`` naming the topic,
partition or broker at fault, so a bad snapshot is rejected before any planner sees it.

A partition's ``replicas`` are ordered: the first replica is the preferred leader, as in Kafka. ``leader`` is the
broker currently leading (``None`` when the partition is offline). During a reassignment ``replicas`` is the full
replica set Kafka reports (target followed by the replicas being removed) and ``adding``/``removing`` name the
brokers joining and leaving.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .errors import ModelError

_T = TypeVar("_T")

__all__ = ["Broker", "Partition", "Cluster", "TopicPartition", "INT32_MAX", "INT64_MAX", "topic_name_problem"]

TopicPartition = tuple[str, int]

# Kafka's own limits: broker ids and partition numbers are Java ints, sizes and rates Java longs, and topic names
# follow org.apache.kafka.common.internals.Topic.validate.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
TOPIC_MAX_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: object) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, or None. The reason never repeats a long name in full."""
    if not isinstance(name, str) or not name:
        return "is empty or not a string"
    if len(name) > TOPIC_MAX_LENGTH:
        return f"is {len(name)} characters long (Kafka allows at most {TOPIC_MAX_LENGTH})"
    return _short_name_problem(name)  # a cluster's partitions name few topics: each is checked once


@functools.lru_cache(maxsize=65536)  # names of at most 249 characters: a few MiB at the most
def _short_name_problem(name: str) -> str | None:
    if name in (".", ".."):
        return "cannot be '.' or '..'"
    if not _TOPIC_CHARS.fullmatch(name):
        bad = next(c for c in name if not _TOPIC_CHARS.fullmatch(c))
        return f"contains {bad!r} (Kafka allows only ASCII letters, digits, '.', '_' and '-')"
    return None


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX


@dataclass(frozen=True, slots=True)
class Broker:
    """A broker: its id, rack, optional capacities, and whether it is registered (alive)."""

    id: int
    rack: str | None = None
    disk_capacity_bytes: int | None = None
    network_capacity_bytes_per_s: int | None = None
    alive: bool = True
    host: str | None = None
    port: int | None = None

    def __post_init__(self) -> None:
        if not _is_id(self.id):
            raise ModelError(f"broker id {_shown(self.id)} is not a Kafka broker id (an integer from 0 to {INT32_MAX})")
        if self.rack is not None and (not isinstance(self.rack, str) or not self.rack):
            raise ModelError(f"broker {self.id}: rack {self.rack!r} is not a non-empty string")
        for name in ("disk_capacity_bytes", "network_capacity_bytes_per_s"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= INT64_MAX):
                raise ModelError(f"broker {self.id}: {name} {_shown(value)} is not a positive integer up to {INT64_MAX}")


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition: ordered replicas (preferred leader first), leader, ISR, size and optional load."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int | None
    isr: tuple[int, ...]
    size_bytes: int = 0
    bytes_in_per_s: float | None = None
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def validate(self, broker_ids: Mapping[int, Any] | set[int] | frozenset[int]) -> None:
        """Check every invariant of this partition against the known broker ids (each a valid id: ``Broker``
        checks its own)."""
        if self._plain(broker_ids):
            return
        problem = topic_name_problem(self.topic)
        if problem:
            raise ModelError(f"topic name {_shown(self.topic)} {problem}")
        if not _is_id(self.partition):
            raise ModelError(f"topic {self.topic}: partition number {_shown(self.partition)} is not an integer from 0 "
                             f"to {INT32_MAX}")
        where = f"partition {self.topic}-{self.partition}"
        if not self.replicas:
            raise ModelError(f"{where}: empty replica list")
        seen: set[int] = set()
        for b in self.replicas:
            if not _is_id(b):
                raise ModelError(f"{where}: replica {_shown(b)} is not a broker id")
            if b in seen:
                raise ModelError(f"{where}: duplicate replica on broker {b} in {list(self.replicas)}")
            seen.add(b)
            if b not in broker_ids:
                raise ModelError(f"{where}: replica on unknown broker {b}")
        if self.leader is not None and self.leader not in seen:
            raise ModelError(f"{where}: leader {self.leader} is not one of its replicas {list(self.replicas)}")
        if len(set(self.isr)) != len(self.isr):
            raise ModelError(f"{where}: duplicate broker in ISR {list(self.isr)}")
        for b in self.isr:
            if b not in seen:
                raise ModelError(f"{where}: ISR broker {b} is not one of its replicas {list(self.replicas)}")
        if self.leader is not None and self.isr and self.leader not in self.isr:
            raise ModelError(f"{where}: leader {self.leader} is not in the ISR {list(self.isr)}")
        if not isinstance(self.size_bytes, int) or isinstance(self.size_bytes, bool) or not 0 <= self.size_bytes <= INT64_MAX:
            raise ModelError(f"{where}: size_bytes {_shown(self.size_bytes)} is not an integer from 0 to {INT64_MAX}")
        if self.bytes_in_per_s is not None and not (0 <= self.bytes_in_per_s <= INT64_MAX and math.isfinite(self.bytes_in_per_s)):
            raise ModelError(f"{where}: bytes_in_per_s {_shown(self.bytes_in_per_s)} is not a finite rate >= 0")
        for label, group in (("adding", self.adding), ("removing", self.removing)):
            for b in group:
                if b not in seen:
                    raise ModelError(f"{where}: {label} replica {b} is not one of its replicas")

    def _plain(self, broker_ids: Mapping[int, Any] | set[int] | frozenset[int]) -> bool:
        """The common case, checked in a few operations (``validate`` takes a second or two less per million
        partitions): replicas distinct integers on known brokers, in sync, led by one of them, a valid size and
        rate, no reassignment in flight. False sends ``validate`` through every check, for its one-line error."""
        replicas, part, size, rate = self.replicas, self.partition, self.size_bytes, self.bytes_in_per_s
        return (type(part) is int and 0 <= part <= INT32_MAX and type(size) is int and 0 <= size <= INT64_MAX
                and (rate is None or (type(rate) in (float, int) and 0 <= rate <= INT64_MAX and math.isfinite(rate)))
                and not self.adding and not self.removing and topic_name_problem(self.topic) is None
                and type(replicas) is tuple and self.isr == replicas
                and all(type(b) is int and b in broker_ids for b in replicas)  # known ids are valid ids
                and len(replicas) == len(set(replicas)) > 0
                and (self.leader is None or self.leader in replicas))


@dataclass(frozen=True)
class Cluster:
    """Brokers and partitions, validated together. Build with ``Cluster.build``.

    ``brokers`` is sorted by id and ``partitions`` by (topic, partition); ``meta`` carries provenance (source,
    time taken, in-flight reassignment) and the topic settings a snapshot read (``topic_retention_ms``: the load
    model's network in; ``topic_min_insync_replicas``: the failover figures), never where replicas may go.
    """

    brokers: tuple[Broker, ...]
    partitions: tuple[Partition, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)
    _broker_index: dict[int, Broker] = field(init=False, repr=False, compare=False)
    _partition_index: dict[TopicPartition, Partition] = field(init=False, repr=False, compare=False)
    # Values derived from this (immutable) cluster that its users compute once and keep (``cached``).
    _derived: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[int, Broker] = {}
        for b in self.brokers:
            if b.id in index:
                raise ModelError(f"duplicate broker id {b.id}")
            index[b.id] = b
        pindex: dict[TopicPartition, Partition] = {}
        for p in self.partitions:
            p.validate(index)
            if p.tp in pindex:
                raise ModelError(f"duplicate partition {p.topic}-{p.partition}")
            pindex[p.tp] = p
        object.__setattr__(self, "_broker_index", index)
        object.__setattr__(self, "_partition_index", pindex)
        object.__setattr__(self, "_derived", {})

    @classmethod
    def build(
        cls,
        brokers: Iterable[Broker],
        partitions: Iterable[Partition],
        meta: Mapping[str, Any] | None = None,
    ) -> Cluster:
        return cls(
            brokers=tuple(sorted(brokers, key=lambda b: b.id)),
            partitions=tuple(sorted(partitions, key=lambda p: (p.topic, p.partition))),
            meta=dict(meta or {}),
        )

    def cached(self, key: str, build: Callable[[], _T]) -> _T:
        """``build()``'s value, built the first time ``key`` is asked for and kept as long as the cluster: what is
        derived from the cluster alone and read many times per plan (``rebalancer.load.replica_table``'s columns
        over millions of replicas). The value must not be changed by its users."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]  # type: ignore[no-any-return]

    # -- lookups ---------------------------------------------------------------------------------------------
    def broker(self, broker_id: int) -> Broker:
        try:
            return self._broker_index[broker_id]
        except KeyError:
            raise ModelError(f"unknown broker {broker_id}") from None

    def partition(self, topic: str, partition: int) -> Partition:
        try:
            return self._partition_index[(topic, partition)]
        except KeyError:
            raise ModelError(f"unknown partition {topic}-{partition}") from None

    def has_partition(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._partition_index

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.brokers)

    @property
    def topics(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for p in self.partitions:
            seen.setdefault(p.topic, None)
        return tuple(seen)

    @property
    def replica_count(self) -> int:
        return self.cached("replica-count", lambda: sum(len(p.replicas) for p in self.partitions))

    @property
    def racks(self) -> tuple[str, ...]:
        return tuple(sorted({b.rack for b in self.brokers if b.rack is not None}))

    def iter_replicas(self) -> Iterator[tuple[Partition, int, int]]:
        """Yield (partition, position, broker) for every replica."""
        for p in self.partitions:
            for pos, b in enumerate(p.replicas):
                yield p, pos, b

    def with_meta(self, **updates: Any) -> Cluster:
        meta = dict(self.meta)
        meta.update(updates)
        return self._validated(self.partitions, meta, self._partition_index)

    def with_sizes(self, sizes: Mapping[TopicPartition, int], **meta: Any) -> Cluster:
        """This cluster with the partitions of ``sizes`` at those sizes (each checked: an integer from 0 to
        ``INT64_MAX``) and ``meta`` added; nothing else is validated again (a million partitions: seconds, not the
        half-minute of a new ``Cluster``)."""
        parts = []
        for p in self.partitions:
            size = sizes.get(p.tp)
            if size is not None and size != p.size_bytes:
                if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= INT64_MAX:
                    raise ModelError(f"partition {p.topic}-{p.partition}: size_bytes {_shown(size)} is not an "
                                     f"integer from 0 to {INT64_MAX}")
                p = replace(p, size_bytes=size)
            parts.append(p)
        return self._validated(tuple(parts), {**self.meta, **meta}, None)

    def with_replicas(self, replicas: Mapping[TopicPartition, tuple[int, ...]]) -> Cluster:
        """This cluster as it would stand once the partitions of ``replicas`` had moved there, every replica in
        sync, each led by its leader where it stays, else by its first replica (a plan's step applied, for what is
        planned after it); each changed partition is checked against the brokers."""
        parts = []
        for p in self.partitions:
            reps = replicas.get(p.tp)
            if reps is not None and reps != p.replicas:
                p = replace(p, replicas=tuple(reps), isr=tuple(reps), adding=(), removing=(),
                            leader=p.leader if p.leader in reps else reps[0])
                p.validate(self._broker_index)
            parts.append(p)
        return self._validated(tuple(parts), self.meta, None)

    def _validated(self, partitions: tuple[Partition, ...], meta: Mapping[str, Any],
                   index: dict[TopicPartition, Partition] | None) -> Cluster:
        """A cluster of this one's brokers and ``partitions`` already validated against them (same keys, same
        order), without checking them again."""
        new = object.__new__(Cluster)
        object.__setattr__(new, "brokers", self.brokers)
        object.__setattr__(new, "partitions", partitions)
        object.__setattr__(new, "meta", dict(meta))
        object.__setattr__(new, "_broker_index", self._broker_index)
        object.__setattr__(new, "_partition_index", index if index is not None else {p.tp: p for p in partitions})
        object.__setattr__(new, "_derived", {})
        return new
