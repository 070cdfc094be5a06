"""What a plan aims at: which brokers may hold replicas, and the [floor, ceil] band each count must reach.

Every mode balances replica counts over the *eligible* brokers (alive and not being removed):

- ``rebalance``: every eligible broker may give and receive.
- ``add-brokers``: only the named new brokers receive; only the others give.
- ``remove-brokers``: the named brokers give everything; the rest receive.
- ``leaders``: no replica moves; only leaders (replica order) change.

Infeasible requests raise ``PlanError`` (an ``InputError``) before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..errors import PlanError
from ..load import Band
from ..model import Cluster
from ..strategies import MODES

__all__ = ["MODES", "PlanError", "Band", "band", "Targets", "make_targets"]


def band(total: int, n: int) -> Band:
    if n <= 0:
        raise PlanError("no eligible brokers")
    q, r = divmod(total, n)
    return Band(q, q + (1 if r else 0), total / n)


@dataclass(frozen=True)
class Targets:
    mode: str
    eligible: frozenset[int]          # may hold replicas after the plan
    receivers: frozenset[int]         # may gain replicas
    givers: frozenset[int]            # may lose replicas
    removed: frozenset[int]           # must end with no replicas
    replicas: Band                    # per eligible broker, cluster-wide
    leaders: Band                     # per eligible broker, cluster-wide (preferred leaders)
    keep_racks: bool                  # at most one replica per rack per partition (racks >= RF)


def _parse_ids(brokers: Iterable[int] | None) -> frozenset[int]:
    return frozenset(int(b) for b in (brokers or ()))


def make_targets(cluster: Cluster, mode: str, brokers: Iterable[int] | None = None) -> Targets:
    """Eligibility and bands for ``mode``; raises ``PlanError`` for requests that cannot be met."""
    if mode not in MODES:
        raise PlanError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    named = _parse_ids(brokers)
    alive = _check_named(cluster, mode, named)
    removed = named if mode == "remove-brokers" else frozenset()
    eligible = frozenset(alive - removed)
    if not eligible:
        raise PlanError("removing these brokers leaves no broker to hold the replicas")
    max_rf = max(len(p.replicas) for p in cluster.partitions)
    if mode != "leaders" and max_rf > len(eligible):
        worst = max(cluster.partitions, key=lambda p: len(p.replicas))
        raise PlanError(f"partition {worst.name} has replication factor {max_rf} but only {len(eligible)} eligible brokers remain")

    if mode == "add-brokers":
        receivers, givers = frozenset(named), frozenset(eligible - named)
    elif mode == "remove-brokers":
        receivers, givers = eligible, frozenset(eligible | removed)
    elif mode == "rebalance":
        receivers = givers = eligible
    else:
        receivers = givers = frozenset()

    racks = {b.id: b.rack for b in cluster.brokers}
    # Rack rules apply when every broker that holds or may hold a replica has a rack.
    keep_racks = all(racks[b] is not None for b in eligible | removed)
    if mode != "leaders":
        _check_room(cluster, eligible, racks, keep_racks)
    total_replicas = cluster.replica_count
    return Targets(
        mode=mode,
        eligible=eligible,
        receivers=receivers,
        givers=givers,
        removed=removed,
        replicas=band(total_replicas, len(eligible)),
        leaders=band(len(cluster.partitions), len(eligible)),
        keep_racks=keep_racks,
    )


def _check_named(cluster: Cluster, mode: str, named: frozenset[int]) -> set[int]:
    """The brokers named fit the mode and the snapshot (and it has partitions); returns the alive brokers."""
    known = set(cluster.broker_ids)
    unknown = sorted(named - known)
    if unknown:
        raise PlanError(f"broker(s) {','.join(map(str, unknown))} not in the snapshot (known: {min(known)}..{max(known)})"
                        if known else "the snapshot has no brokers")
    if not cluster.partitions:
        raise PlanError("the snapshot has no partitions: nothing to plan")
    alive = {b.id for b in cluster.brokers if b.alive}
    if mode in ("add-brokers", "remove-brokers") and not named:
        raise PlanError(f"--mode {mode} needs --brokers (the broker ids to {'add' if mode == 'add-brokers' else 'remove'})")
    if mode in ("leaders", "rebalance") and named:
        raise PlanError(f"--brokers is only for add-brokers and remove-brokers, not {mode}")
    dead_named = sorted(named - alive)
    if mode == "add-brokers" and dead_named:
        raise PlanError(f"new broker(s) {','.join(map(str, dead_named))} are not registered (alive) in the snapshot")
    return alive


def _check_room(cluster: Cluster, eligible: frozenset[int], racks: Mapping[int, str | None], keep_racks: bool) -> None:
    """The eligible brokers can hold the replicas: as many racks as any partition spans (never fewer racks than
    before: a partition spread over k racks needs k racks among eligible brokers), and disks that hold every
    replica, where every disk's capacity is known."""
    eligible_racks = {racks[b] for b in eligible}
    if keep_racks:
        for p in cluster.partitions:
            before = len({racks[b] for b in p.replicas})
            if before > len(eligible_racks):
                raise PlanError(f"partition {p.name} spans {before} racks but the eligible brokers are in only "
                                f"{len(eligible_racks)} ({', '.join(sorted(map(str, eligible_racks)))})")
    disk = [b.disk_capacity_bytes for b in cluster.brokers if b.id in eligible]
    if disk and all(d is not None for d in disk):
        need = sum(p.size_bytes * len(p.replicas) for p in cluster.partitions)
        have = sum(d for d in disk if d is not None)
        if need > have:
            raise PlanError(f"the replicas need {need} bytes but the eligible brokers' disks hold {have}")
