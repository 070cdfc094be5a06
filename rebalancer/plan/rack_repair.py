"""Partitions spread over the racks as evenly as the eligible brokers' racks allow (``--repair-racks``).

The planner never leaves a partition on fewer racks than before (``Targets.keep_racks``), but it does not spread a
partition that already leans on one rack: replicas placed before the brokers had racks, a rack added later, or an
earlier tool that ignored racks. Such a partition loses more than one replica when that rack fails; with
``min.insync.replicas`` 2 and RF 3, two replicas on one rack leave it refusing acks=all writes (``plan.failover``
counts these). Cruise Control's rack-aware goals hold every partition to this as a hard goal.

A partition of RF replicas over R racks is *even* when no rack holds more than ceil(RF / R) of them. Before the
placement, each uneven partition (largest first) moves replicas from the rack holding most to the rack holding
fewest, one at a time, until it is even or the change cap (``--max-changes-per-partition``) is used: from the broker
of that rack furthest above its share (a follower before the leader), to the broker of the other rack furthest below
(replica count and disk, each against the eligible brokers' mean), any eligible broker (a repair is a safety fix, as
a move off a dead broker is: in add-brokers mode an old broker may receive one). The placement then balances the
cluster the repair left (``Cluster.with_replicas``), never spreading a partition over fewer racks than that, and
``merge`` takes its changes back where they would pass the change cap or undo a repair.

Not repaired: partitions holding a replica on a broker that cannot keep it (dead, or being removed): the placement
must move those and chooses where. Nothing is done where some broker has no rack (no rack rules then).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Cluster, Partition, TopicPartition
from .targets import Targets

__all__ = ["RackRepair", "repair_racks", "rack_excess", "merge", "spread_bytes", "SPREAD_BY"]

SPREAD_BY = "the replicas that spreading partitions over the racks needs"  # the bytes bound's source (``spread_bytes``)


def eligible_racks(cluster: Cluster, eligible: frozenset[int]) -> int:
    """The racks "even" is counted over: the eligible brokers' racks (0 where one has none: no rack rules)."""
    racks = {cluster.broker(b).rack for b in eligible}
    return 0 if None in racks else len(racks)


def spread_bytes(cluster: Cluster, assignment: Mapping[TopicPartition, tuple[int, ...]],
                 eligible: frozenset[int]) -> int:
    """A lower bound on the bytes any plan copies that spreads the partitions as evenly over the racks as
    ``assignment`` does: a move takes one replica off one rack and onto another, so it lowers a partition's
    ``rack_excess`` by one at most; each unit it went down is one replica copied, at the partition's size. The plan's
    bytes bound is at least this (``load_summary``, and the validation's bytes gate recomputing it), so that a plan
    asked to repair the racks is measured against what the repair needs, not the balance alone."""
    n_racks = eligible_racks(cluster, eligible)
    if n_racks < 2:
        return 0
    rack = {b.id: b.rack for b in cluster.brokers}
    total = 0
    for tp, reps in assignment.items():
        p = cluster.partition(*tp)
        total += p.size_bytes * max(0, rack_excess(p.replicas, rack, n_racks) - rack_excess(reps, rack, n_racks))
    return total


def rack_excess(replicas: Sequence[int], rack: Mapping[int, str | None], racks: int) -> int:
    """How many replicas lie beyond an even spread over ``racks`` racks: the sum, over the racks, of what each holds
    past ceil(RF / racks). 0 for an even partition."""
    if racks < 2:
        return 0
    most = math.ceil(len(replicas) / racks)
    held: dict[str | None, int] = {}
    for b in replicas:
        held[rack[b]] = held.get(rack[b], 0) + 1
    return sum(max(0, n - most) for n in held.values())


@dataclass(frozen=True)
class RackRepair:
    """What the repair did: the uneven partitions' new replicas (those it changed), and how many partitions were
    uneven, repaired whole, left uneven (the cap, or no broker in the racks they lack), skipped (a replica on a
    broker that cannot keep it, or a reassignment in flight), the replicas moved and the bytes they copy."""

    assignment: dict[TopicPartition, tuple[int, ...]]
    racks: int = 0               # the eligible brokers' racks: what "even" is counted over
    uneven: int = 0
    repaired: int = 0
    left: tuple[str, ...] = ()
    skipped: int = 0
    moves: int = 0
    bytes: int = 0
    why_none: str | None = None  # why nothing could be repaired at all (no racks)

    def record(self) -> dict[str, Any]:
        """``solver["rack_repair"]`` in plan.json."""
        out: dict[str, Any] = {"uneven_before": self.uneven, "repaired": self.repaired, "left": len(self.left),
                               "left_examples": list(self.left[:5]), "skipped": self.skipped, "moves": self.moves,
                               "bytes": self.bytes}
        if self.why_none:
            out["why_none"] = self.why_none
        return out


class _Loads:
    """Replica counts and disk per eligible broker, against their means: who is furthest above or below."""

    def __init__(self, cluster: Cluster, eligible: frozenset[int]) -> None:
        self.count = dict.fromkeys(eligible, 0)
        self.disk = dict.fromkeys(eligible, 0)
        for p in cluster.partitions:
            for b in p.replicas:
                if b in self.count:
                    self.count[b] += 1
                    self.disk[b] += p.size_bytes
        n = max(1, len(eligible))
        self.mean_count = max(1e-9, sum(self.count.values()) / n)
        self.mean_disk = sum(self.disk.values()) / n

    def score(self, b: int) -> float:
        """Broker b's load against the mean: its count's share plus its disk's (where sizes are known)."""
        s = self.count[b] / self.mean_count
        return s + self.disk[b] / self.mean_disk if self.mean_disk > 0 else s

    def move(self, size: int, src: int, dst: int) -> None:
        self.count[src] -= 1
        self.disk[src] -= size
        self.count[dst] += 1
        self.disk[dst] += size


def repair_racks(cluster: Cluster, targets: Targets, max_changes: int | None) -> RackRepair:
    """Every uneven partition spread as the module doc says; partitions already even are left alone."""
    rack = {b.id: b.rack for b in cluster.brokers}
    if not targets.keep_racks:
        return RackRepair({}, why_none="some broker has no rack: no rack rules apply")
    eligible = targets.eligible
    by_rack: dict[str, list[int]] = {}
    for b in sorted(eligible):
        by_rack.setdefault(str(rack[b]), []).append(b)
    n_racks = eligible_racks(cluster, eligible)
    uneven = [p for p in cluster.partitions if rack_excess(p.replicas, rack, n_racks)]
    if not uneven:
        return RackRepair({}, racks=n_racks)
    loads = _Loads(cluster, eligible)
    out: dict[TopicPartition, tuple[int, ...]] = {}
    left: list[str] = []
    skipped = moves = copied = repaired = 0
    for p in sorted(uneven, key=lambda q: (-q.size_bytes, q.tp)):
        if p.adding or p.removing or any(b not in eligible for b in p.replicas):
            skipped += 1
            continue
        reps = _spread(p, rack, by_rack, n_racks, loads, max_changes)
        even = not rack_excess(reps, rack, n_racks)
        if not even:
            left.append(p.name)
        if reps != p.replicas:
            out[p.tp] = reps
            repaired += even
            added = sum(1 for b in reps if b not in p.replicas)
            moves += added
            copied += added * p.size_bytes
    return RackRepair(out, racks=n_racks, uneven=len(uneven), repaired=repaired, left=tuple(left), skipped=skipped,
                      moves=moves, bytes=copied)


def _spread(p: Partition, rack: Mapping[int, str | None], by_rack: Mapping[str, list[int]], n_racks: int,
            loads: _Loads, max_changes: int | None) -> tuple[int, ...]:
    """Partition p's replicas moved one at a time from its fullest rack to its emptiest (brokers chosen by
    ``_Loads``), while uneven and the cap allows."""
    reps = list(p.replicas)
    made = 0
    while rack_excess(reps, rack, n_racks) and (max_changes is None or made < max_changes):
        held = {r: [b for b in reps if str(rack[b]) == r] for r in by_rack}
        full = max(sorted(held), key=lambda r: len(held[r]))
        # the emptiest racks with a broker free to take it; the least loaded such broker
        options = [(len(held[r]), loads.score(b), b) for r in sorted(held) if len(held[r]) < len(held[full]) - 1
                   for b in by_rack[r] if b not in reps]
        if not options:
            break
        _, _, dst = min(options)
        src = max(held[full], key=lambda b: (b != p.leader, loads.score(b), -b))
        reps[reps.index(src)] = dst
        loads.move(p.size_bytes, src, dst)
        made += 1
    return tuple(reps)


def merge(repair: RackRepair, origin: Cluster, placed: Mapping[TopicPartition, tuple[int, ...]],
          max_changes: int | None) -> tuple[dict[TopicPartition, tuple[int, ...]], int]:
    """The placement's changes (made on the repaired cluster) over the repair's: a repaired partition the placement
    changed keeps the placement's replicas only where they stay within the change cap counted from the cluster as it
    is and as even as the repair left it; otherwise the repair's. Returns (every changed partition's replicas, the
    placement changes taken back)."""
    rack = {b.id: b.rack for b in origin.brokers}
    n_racks = repair.racks
    out = dict(repair.assignment)
    dropped = 0
    for tp, reps in placed.items():
        fixed = repair.assignment.get(tp)
        if fixed is not None:
            before = origin.partition(*tp).replicas
            added = sum(1 for b in reps if b not in before)
            if (max_changes is not None and added > max_changes
                    or rack_excess(reps, rack, n_racks) > rack_excess(fixed, rack, n_racks)):
                dropped += 1
                continue
        out[tp] = reps
    return out, dropped
