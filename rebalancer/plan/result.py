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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..balance import max_abs_deviation
from ..errors import InputError
from ..formats import atomic_write_json, read_json, reassignment_json
from ..model import Cluster

__all__ = ["Change", "Plan", "content_hash", "build_plan", "write_plan", "load_plan", "PLAN_FILE",
           "REASSIGNMENT_FILE", "ROLLBACK_FILE"]

PLAN_FILE = "plan.json"
REASSIGNMENT_FILE = "reassignment.json"
ROLLBACK_FILE = "rollback.json"
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


@dataclass
class Plan:
    mode: str
    strategy: str
    changes: tuple[Change, ...]
    summary: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    solver: dict[str, Any] = field(default_factory=dict)
    hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": 1,
            "mode": self.mode,
            "strategy": self.strategy,
            "params": self.params,
            "solver": self.solver,
            "content_hash": self.hash,
            "summary": self.summary,
            "changes": [c.to_dict() for c in self.changes],
        }


def _loads(cluster: Cluster, assignment: Mapping[tuple[str, int], tuple[int, ...]]) -> dict[int, dict[str, int]]:
    per = {b.id: {"replicas": 0, "leaders": 0, "bytes": 0} for b in cluster.brokers}
    for p in cluster.partitions:
        reps = assignment.get(p.tp, p.replicas)
        for b in reps:
            per[b]["replicas"] += 1
            per[b]["bytes"] += p.size_bytes
        per[reps[0]]["leaders"] += 1
    return per


def _max_dev(values: list[int]) -> float:
    return round(max_abs_deviation(values), 3)


def _topic_spread(cluster: Cluster, assignment: Mapping[tuple[str, int], tuple[int, ...]], eligible: frozenset[int]) -> int:
    """Largest per-topic (max - min) preferred-leader count over the eligible brokers hosting the topic."""
    hosts: dict[str, set[int]] = {}
    leaders: dict[tuple[str, int], int] = {}
    for p in cluster.partitions:
        reps = assignment.get(p.tp, p.replicas)
        hosts.setdefault(p.topic, set()).update(b for b in reps if b in eligible)
        leaders[(p.topic, reps[0])] = leaders.get((p.topic, reps[0]), 0) + 1
    worst = 0
    for t, bs in hosts.items():
        if bs:
            counts = [leaders.get((t, b), 0) for b in bs]
            worst = max(worst, max(counts) - min(counts))
    return worst


def build_plan(cluster: Cluster, assignment: Mapping[tuple[str, int], tuple[int, ...]], *, mode: str, strategy: str,
               eligible: frozenset[int], params: dict[str, Any], solver: dict[str, Any],
               bounds: dict[str, Any]) -> Plan:
    """Turn a new assignment (changed partitions only, or all) into a Plan with its summary and hash."""
    changes = []
    for p in cluster.partitions:
        after = assignment.get(p.tp)
        if after is not None and tuple(after) != p.replicas:
            changes.append(Change(p.topic, p.partition, p.replicas, tuple(after), p.leader, p.size_bytes))
    changes_t = tuple(changes)
    before = _loads(cluster, {})
    after_l = _loads(cluster, assignment)
    elig = sorted(eligible)
    moves = sum(c.replica_moves for c in changes_t)
    leader_changes = sum(1 for c in changes_t if c.leader_change)
    rb = bounds.get("replica_moves", 0)
    lb = bounds.get("leader_changes", 0)

    def ratio(value: int, bound: int) -> float | None:
        if bound == 0:
            return 1.0 if value == 0 else None
        return round(value / bound, 4)

    summary = {
        "replica_moves": moves,
        "partitions_changed": len(changes_t),
        "leader_changes": leader_changes,
        "bytes_moved": sum(c.bytes_to_copy for c in changes_t),
        "max_changes_in_a_partition": max((c.replica_moves for c in changes_t), default=0),
        "lower_bounds": bounds,
        "moves_to_bound": ratio(moves, rb),
        "leader_changes_to_bound": ratio(leader_changes, lb),
        "max_deviation_pct": {
            "replicas_before": _max_dev([before[b]["replicas"] for b in elig]),
            "replicas_after": _max_dev([after_l[b]["replicas"] for b in elig]),
            "leaders_before": _max_dev([before[b]["leaders"] for b in elig]),
            "leaders_after": _max_dev([after_l[b]["leaders"] for b in elig]),
            "bytes_before": _max_dev([before[b]["bytes"] for b in elig]),
            "bytes_after": _max_dev([after_l[b]["bytes"] for b in elig]),
        },
        "replica_spread": {
            "before": max(before[b]["replicas"] for b in elig) - min(before[b]["replicas"] for b in elig),
            "after": max(after_l[b]["replicas"] for b in elig) - min(after_l[b]["replicas"] for b in elig),
        },
        "topic_leader_spread": {
            "before": _topic_spread(cluster, {}, eligible),
            "after": _topic_spread(cluster, assignment, eligible),
        },
        "partitions_not_led_by_preferred": sum(1 for p in cluster.partitions if p.leader != p.replicas[0]),
        "eligible_brokers": elig,
        "brokers": [
            {"broker": b.id, "rack": b.rack, "alive": b.alive, "eligible": b.id in eligible,
             "replicas_before": before[b.id]["replicas"], "replicas_after": after_l[b.id]["replicas"],
             "leaders_before": before[b.id]["leaders"], "leaders_after": after_l[b.id]["leaders"],
             "bytes_before": before[b.id]["bytes"], "bytes_after": after_l[b.id]["bytes"]}
            for b in cluster.brokers
        ],
    }
    return Plan(mode=mode, strategy=strategy, changes=changes_t, summary=summary, params=params, solver=solver,
                hash=content_hash(changes_t))


def write_plan(plan: Plan, run_dir: str | Path) -> None:
    out = Path(run_dir)
    atomic_write_json(out / PLAN_FILE, plan.to_dict())
    atomic_write_json(out / REASSIGNMENT_FILE, reassignment_json((c.topic, c.partition, c.replicas_after) for c in plan.changes))
    atomic_write_json(out / ROLLBACK_FILE, reassignment_json((c.topic, c.partition, c.replicas_before) for c in plan.changes))


def load_plan(run_dir: str | Path) -> Plan:
    path = Path(run_dir) / PLAN_FILE
    if not path.exists():
        raise InputError(f"{path}: no plan in this run directory (run 'rebalancer plan' first)")
    doc = read_json(path)
    try:
        if doc.get("format") != PLAN_FORMAT:
            raise InputError(f"{path}: not a plan file")
        changes = tuple(
            Change(c["topic"], int(c["partition"]), tuple(c["replicas_before"]), tuple(c["replicas_after"]),
                   c.get("leader_before"), int(c.get("size_bytes", 0)))
            for c in doc["changes"]
        )
        return Plan(mode=doc["mode"], strategy=doc["strategy"], changes=changes, summary=doc["summary"],
                    params=doc.get("params", {}), solver=doc.get("solver", {}), hash=doc["content_hash"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: malformed plan ({exc!r})") from None
