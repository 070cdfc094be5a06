"""A plan as data: its changes, its summary (before/after, bounds, solver), its content hash, and its files.

``RUN_DIR/plan.json``          everything below, read back by validation, approval, execution and the report
``RUN_DIR/reassignment.json``  Kafka's reassignment JSON of the changed partitions (leader-only = reordered list)
``RUN_DIR/rollback.json``      the original replicas of exactly those partitions

The content hash is SHA-256 over the canonical JSON of the sorted (topic, partition, replicas before, replicas
after) tuples: approving a plan approves exactly these changes, and any edit to them changes the hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict, cast

import msgspec

from ..balance import max_abs_deviation
from ..errors import InputError
from ..formats import StagedFiles, atomic_write_json, read_decoded, reassignment_json
from ..model import INT32_MAX, INT64_MAX, Cluster, Partition, topic_name_problem
from ..rundir import PLAN_FILE, REASSIGNMENT_FILE, ROLLBACK_FILE
from .load_types import LoadSummary
from .record import SolverRecord

__all__ = ["Change", "Plan", "PlanSummary", "BrokerSummary", "content_hash", "build_plan", "write_plan", "load_plan", "PLAN_FILE",
           "REASSIGNMENT_FILE", "ROLLBACK_FILE"]

PLAN_FORMAT = "kafka-rebalancer/plan"


@dataclass(frozen=True, slots=True)
class Change:
    topic: str
    partition: int
    replicas_before: tuple[int, ...]
    replicas_after: tuple[int, ...]
    leader_before: int | None  # the broker leading now
    size_bytes: int

    @property
    def leader_after(self) -> int:
        return self.replicas_after[0]

    @property
    def added(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas_after if b not in self.replicas_before)

    @property
    def removed(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas_before if b not in self.replicas_after)

    @property
    def replica_moves(self) -> int:
        return len(self.added)

    @property
    def bytes_to_copy(self) -> int:
        return self.size_bytes * len(self.added)

    @property
    def leader_change(self) -> bool:
        return self.replicas_after[0] != self.replicas_before[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas_before": list(self.replicas_before),
            "replicas_after": list(self.replicas_after),
            "leader_before": self.leader_before,
            "leader_after": self.leader_after,
            "added": list(self.added),
            "removed": list(self.removed),
            "size_bytes": self.size_bytes,
            "bytes_to_copy": self.bytes_to_copy,
        }


def content_hash(changes: Iterable[Change]) -> str:
    canon = sorted((c.topic, c.partition, list(c.replicas_before), list(c.replicas_after)) for c in changes)
    return hashlib.sha256(json.dumps(canon, separators=(",", ":")).encode()).hexdigest()


class MaxDeviation(TypedDict):
    """Largest |value - median| / median over the eligible brokers, in percent, before and after the plan."""
    replicas_before: float
    replicas_after: float
    leaders_before: float
    leaders_after: float
    bytes_before: float
    bytes_after: float


class BeforeAfter(TypedDict):
    before: int
    after: int


class BrokerSummary(TypedDict):
    """One broker's counts and bytes before and after the plan (``summary.brokers``)."""
    broker: int
    rack: str | None
    alive: bool
    eligible: bool
    replicas_before: int
    replicas_after: int
    leaders_before: int
    leaders_after: int
    bytes_before: int
    bytes_after: int


class PlanSummary(TypedDict):
    """plan.json's ``summary``: what the plan changes, against the lower bounds, and the cluster before and after.
    ``load`` (``plan.load_summary``) is added once the load model has measured the plan; ``execution`` by
    ``plan_run_dir``."""
    replica_moves: int
    partitions_changed: int
    leader_changes: int
    bytes_moved: int
    max_changes_in_a_partition: int
    lower_bounds: dict[str, Any]
    moves_to_bound: float | None
    leader_changes_to_bound: float | None
    max_deviation_pct: MaxDeviation
    replica_spread: BeforeAfter
    topic_leader_spread: BeforeAfter
    partitions_not_led_by_preferred: int
    eligible_brokers: list[int]
    brokers: list[BrokerSummary]
    load: NotRequired[LoadSummary]
    execution: NotRequired[dict[str, Any]]  # the time to execute it at a throttle (``movement.estimate``, plan_run_dir)
    failover: NotRequired[dict[str, Any]]  # each broker and rack failing, before and after (``plan.failover``)


@dataclass
class Plan:
    mode: str
    strategy: str
    changes: tuple[Change, ...]
    summary: PlanSummary
    params: dict[str, Any] = field(default_factory=dict)
    solver: SolverRecord = field(default_factory=lambda: SolverRecord.from_dict({}))
    hash: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.solver, SolverRecord):  # a step's dict, or a plan.json's object
            self.solver = SolverRecord.from_dict(self.solver)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": 1,
            "mode": self.mode,
            "strategy": self.strategy,
            "params": self.params,
            "solver": self.solver.to_dict(),
            "content_hash": self.hash,
            "summary": self.summary,
            "changes": [c.to_dict() for c in self.changes],
        }


class _Tally:
    """Per broker: replicas, preferred leaders and bytes; per (topic, broker): replicas and preferred leaders, for the
    snapshot or with an assignment applied. Counted as numpy columns over every replica (millions of them: a Python
    dict per (topic, broker) took 12 s at 3M replicas)."""

    def __init__(self, cluster: Cluster, assignment: Mapping[tuple[str, int], tuple[int, ...]] | None = None) -> None:
        import numpy as np

        from ..load import partition_sizes, placement_columns

        parts = cluster.partitions
        partition, brokers, leads = placement_columns(cluster, assignment)  # the snapshot's: kept by the cluster
        self.ids = np.array(sorted(cluster.broker_ids), dtype=np.int64)
        where = np.searchsorted(self.ids, brokers)
        known = self.ids[where.clip(max=len(self.ids) - 1)] == brokers if len(self.ids) else brokers != brokers
        if not known.all():
            raise KeyError(f"broker {int(brokers[~known][0])} is not in the cluster")
        lead = where[leads]  # per partition, in order: each has one first replica
        n = len(self.ids)
        replicas, leaders, bytes_ = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        np.add.at(replicas, where, 1)
        np.add.at(leaders, lead, 1)
        np.add.at(bytes_, where, partition_sizes(cluster)[partition])  # int64: exact, as the dicts were
        self.replicas = {int(b): int(v) for b, v in zip(self.ids, replicas, strict=True)}
        self.leaders = {int(b): int(v) for b, v in zip(self.ids, leaders, strict=True)}
        self.bytes = {int(b): int(v) for b, v in zip(self.ids, bytes_, strict=True)}
        # (topic, broker) as one key: topic number x brokers + broker index
        topic = cluster.cached("topic-numbers", lambda: _topic_numbers(parts))
        self._hosted, _ = _distinct(topic[partition] * n + where)
        self._led_keys, self._led = _distinct(topic * n + lead)
        self._n = n

    def topic_spread(self, eligible: frozenset[int]) -> int:
        """Largest per-topic (max - min) preferred-leader count over the eligible brokers hosting the topic."""
        import numpy as np

        hosted = self._hosted[np.isin(self.ids[self._hosted % self._n], np.fromiter(eligible, np.int64, len(eligible)))]
        if not len(hosted):
            return 0
        at = np.searchsorted(self._led_keys, hosted).clip(max=len(self._led_keys) - 1)
        led = np.where(self._led_keys[at] == hosted, self._led[at], 0) if len(self._led_keys) else np.zeros(len(hosted), np.int64)
        topic = hosted // self._n
        starts = np.flatnonzero(np.concatenate(([True], topic[1:] != topic[:-1])))
        return int((np.maximum.reduceat(led, starts) - np.minimum.reduceat(led, starts)).max())


def _topic_numbers(parts: Sequence[Partition]) -> Any:
    """Each partition's topic as a number (the order topics first appear in)."""
    import numpy as np

    codes: dict[str, int] = {}
    numbers = np.fromiter((codes.setdefault(p.topic, len(codes)) for p in parts), np.int64, len(parts))
    numbers.flags.writeable = False  # kept by the cluster (Cluster.cached)
    return numbers


def _distinct(keys: Any) -> tuple[Any, Any]:
    """The distinct keys, sorted, and how often each occurs (a sort: numpy's hashed ``unique`` took 2.5 s on 3M)."""
    import numpy as np

    ordered = np.sort(keys)
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))) if len(ordered) else np.zeros(0, np.int64)
    return ordered[starts], np.diff(np.append(starts, len(ordered)))


def _max_dev(values: list[int]) -> float:
    return round(max_abs_deviation(values), 3)


def _max_deviations(before: _Tally, after: _Tally, elig: list[int]) -> MaxDeviation:
    """The largest |deviation from the median| over the eligible brokers, before and after, per count and bytes."""
    return {
        "replicas_before": _max_dev([before.replicas[b] for b in elig]),
        "replicas_after": _max_dev([after.replicas[b] for b in elig]),
        "leaders_before": _max_dev([before.leaders[b] for b in elig]),
        "leaders_after": _max_dev([after.leaders[b] for b in elig]),
        "bytes_before": _max_dev([before.bytes[b] for b in elig]),
        "bytes_after": _max_dev([after.bytes[b] for b in elig]),
    }


def build_plan(cluster: Cluster, assignment: Mapping[tuple[str, int], tuple[int, ...]], *, mode: str, strategy: str,
               eligible: frozenset[int], params: dict[str, Any], solver: Mapping[str, Any],
               bounds: dict[str, Any]) -> Plan:
    """Turn a new assignment (changed partitions only, or all) into a Plan with its summary and hash."""
    changes = []
    for p in cluster.partitions:
        new = assignment.get(p.tp)
        if new is not None and tuple(new) != p.replicas:
            changes.append(Change(p.topic, p.partition, p.replicas, tuple(new), p.leader, p.size_bytes))
    changes_t = tuple(changes)
    before = _Tally(cluster)
    after = _Tally(cluster, {(c.topic, c.partition): c.replicas_after for c in changes_t})
    elig = sorted(eligible)
    moves = sum(c.replica_moves for c in changes_t)
    leader_changes = sum(1 for c in changes_t if c.leader_change)
    rb = bounds.get("replica_moves", 0)
    lb = bounds.get("leader_changes", 0)

    def ratio(value: int, bound: int) -> float | None:
        if bound == 0:
            return 1.0 if value == 0 else None
        return round(value / bound, 4)

    summary: PlanSummary = {
        "replica_moves": moves,
        "partitions_changed": len(changes_t),
        "leader_changes": leader_changes,
        "bytes_moved": sum(c.bytes_to_copy for c in changes_t),
        "max_changes_in_a_partition": max((c.replica_moves for c in changes_t), default=0),
        "lower_bounds": bounds,
        "moves_to_bound": ratio(moves, rb),
        "leader_changes_to_bound": ratio(leader_changes, lb),
        "max_deviation_pct": _max_deviations(before, after, elig),
        "replica_spread": {
            "before": max(before.replicas[b] for b in elig) - min(before.replicas[b] for b in elig),
            "after": max(after.replicas[b] for b in elig) - min(after.replicas[b] for b in elig),
        },
        "topic_leader_spread": {
            "before": before.topic_spread(eligible),
            "after": after.topic_spread(eligible),
        },
        "partitions_not_led_by_preferred": sum(1 for p in cluster.partitions if p.leader != p.replicas[0]),
        "eligible_brokers": elig,
        "brokers": [
            {"broker": b.id, "rack": b.rack, "alive": b.alive, "eligible": b.id in eligible,
             "replicas_before": before.replicas[b.id], "replicas_after": after.replicas[b.id],
             "leaders_before": before.leaders[b.id], "leaders_after": after.leaders[b.id],
             "bytes_before": before.bytes[b.id], "bytes_after": after.bytes[b.id]}
            for b in cluster.brokers
        ],
    }
    return Plan(mode=mode, strategy=strategy, changes=changes_t, summary=summary, params=params,
                solver=SolverRecord.from_dict(solver),
                hash=content_hash(changes_t))


def write_plan(plan: Plan, run_dir: str | Path) -> None:
    """The three files or none (a full disk must not leave a new reassignment.json beside an old plan.json)."""
    with StagedFiles(run_dir) as stage:
        atomic_write_json(stage.path(REASSIGNMENT_FILE),
                          reassignment_json((c.topic, c.partition, c.replicas_after) for c in plan.changes))
        atomic_write_json(stage.path(ROLLBACK_FILE),
                          reassignment_json((c.topic, c.partition, c.replicas_before) for c in plan.changes))
        atomic_write_json(stage.path(PLAN_FILE), plan.to_dict())


def _ids(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or any(
            isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= INT32_MAX for b in value):
        raise ValueError(f"{what} must be a non-empty list of broker ids")
    return tuple(value)  # a broker named twice is the validation gates' to report (and execution refuses it)


def _change(c: Any, i: int) -> Change:
    if not isinstance(c, dict):
        raise ValueError(f"changes[{i}] is not an object")
    topic, partition, size = c.get("topic"), c.get("partition"), c.get("size_bytes", 0)
    if topic_name_problem(topic):
        raise ValueError(f"changes[{i}]: topic name {topic_name_problem(topic)}")
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT32_MAX:
        raise ValueError(f"changes[{i}]: partition is not an integer from 0 to {INT32_MAX}")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= INT64_MAX:
        raise ValueError(f"changes[{i}]: size_bytes is not an integer from 0 to {INT64_MAX}")
    before = _ids(c.get("replicas_before"), f"changes[{i}].replicas_before")
    after = _ids(c.get("replicas_after"), f"changes[{i}].replicas_after")
    leader = c.get("leader_before")
    if leader is not None and (isinstance(leader, bool) or not isinstance(leader, int)):
        raise ValueError(f"changes[{i}]: leader_before is not a broker id")
    return Change(str(topic), partition, before, after, leader, size)  # topic_name_problem: a str


_Broker = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
_Brokers = Annotated[list[_Broker], msgspec.Meta(min_length=1)]


class _PlainChange(msgspec.Struct):
    """A plan's change as ``write_plan`` writes it (the fields the executor relies on; the rest are derived)."""

    topic: str
    partition: _Broker
    replicas_before: _Brokers
    replicas_after: _Brokers
    leader_before: int | None = None
    size_bytes: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)] = 0


class _PlainPlan(msgspec.Struct):
    format: str
    mode: str
    strategy: str
    content_hash: str
    summary: dict[str, Any]
    changes: list[_PlainChange]
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    solver: dict[str, Any] = msgspec.field(default_factory=dict)


_PLAIN = msgspec.json.Decoder(_PlainPlan)


def _plain_plan(data: bytes) -> Plan | None:
    """plan.json decoded and validated by msgspec in C, when it is as ``write_plan`` writes it; None for anything
    else (malformed JSON, another format, a field of another type, a bad topic name), which ``_plan_of`` then
    reads field by field for its one-line error."""
    try:
        doc = _PLAIN.decode(data)
    except (ValueError, RecursionError):  # msgspec's DecodeError and ValidationError; UnicodeDecodeError in a string
        return None
    if doc.format != PLAN_FORMAT or any(topic_name_problem(t) is not None for t in {c.topic for c in doc.changes}):
        return None
    changes = tuple(Change(c.topic, c.partition, tuple(c.replicas_before), tuple(c.replicas_after), c.leader_before,
                           c.size_bytes) for c in doc.changes)
    return Plan(mode=doc.mode, strategy=doc.strategy, changes=changes, summary=cast(PlanSummary, doc.summary),
                params=doc.params, solver=SolverRecord.from_dict(doc.solver), hash=doc.content_hash)


def _plan_of(doc: Any, path: Path) -> Plan:
    """A parsed plan.json read field by field: every field the executor relies on checked, a hand-edited file a
    named error."""
    if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
        raise InputError(f"{path}: not a plan file")
    try:
        if not isinstance(doc.get("changes"), list):
            raise ValueError("'changes' is not a list")
        changes = tuple(_change(c, i) for i, c in enumerate(doc["changes"]))
        for key, kind in (("mode", str), ("strategy", str), ("content_hash", str), ("summary", dict)):
            if not isinstance(doc.get(key), kind):
                raise ValueError(f"{key!r} is missing or not a {kind.__name__}")
        params, solver = doc.get("params", {}), doc.get("solver", {})
        if not isinstance(params, dict) or not isinstance(solver, dict):
            raise ValueError("'params' and 'solver' must be objects")
    except ValueError as exc:
        raise InputError(f"{path}: malformed plan: {exc}") from None
    return Plan(mode=doc["mode"], strategy=doc["strategy"], changes=changes,
                summary=cast(PlanSummary, doc["summary"]), params=params,
                solver=SolverRecord.from_dict(solver), hash=doc["content_hash"])


def load_plan(run_dir: str | Path) -> Plan:
    """Read plan.json, checking every field the executor relies on (``_plain_plan``, else ``_plan_of``)."""
    path = Path(run_dir) / PLAN_FILE
    if not path.exists():
        raise InputError(f"{path}: no plan in this run directory (run 'rebalancer plan' first)")
    return read_decoded(path, _plain_plan, lambda doc: _plan_of(doc, path))
