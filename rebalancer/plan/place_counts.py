"""Replica placement on counts (``--balance counts``): Wix's greedy (``greedy``), then under strategy ``lp`` the
Sqooba program (``lp``) warm-started from it; the better valid placement is kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import Cluster
from .bounds import replica_move_bound
from .budget import Budget
from .greedy import GreedyInput, greedy_balance
from .lp import lp_balance
from .pipeline import GREEDY_BEFORE_LP_SHARE, GREEDY_SHARE, LEADERS_RESERVE, LP_SHARE, Key, PlanRequest, PlanSetup
from .targets import Targets

__all__ = ["place_on_counts"]


def _cost(cluster: Cluster, changed: Mapping[Key, tuple[int, ...]], objective: str) -> int:
    total = 0
    for p in cluster.partitions:
        new = changed.get(p.tp)
        if new is not None:
            added = sum(1 for b in new if b not in p.replicas)
            total += added * (p.size_bytes if objective == "bytes" else 1)
    return total


def _worse(cluster: Cluster, lp: Mapping[Key, tuple[int, ...]], greedy: Mapping[Key, tuple[int, ...]],
           objective: str, gstats: Mapping[str, Any]) -> bool:
    """Is the program's placement worse than the greedy one (greedy balanced and cheaper)?"""
    if gstats.get("unmet_excess") or gstats.get("unmet_deficit"):
        return False
    return _cost(cluster, greedy, objective) < _cost(cluster, lp, objective)


def _band_violation(cluster: Cluster, changed: Mapping[Key, tuple[int, ...]], targets: Targets) -> int:
    """Replicas still above a giver's ceiling plus replicas still missing below a receiver's floor."""
    counts: dict[int, int] = {b: 0 for b in cluster.broker_ids}
    for p in cluster.partitions:
        for b in changed.get(p.tp, p.replicas):
            counts[b] += 1
    rb = replica_move_bound(counts, targets)
    return rb["excess"] + rb["deficit"]


def place_on_counts(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float,
                    program: bool) -> dict[Key, tuple[int, ...]]:
    """Replica placement on counts: Wix's greedy, then (``program``: strategy ``lp``) the Sqooba program warm-started
    from it; the better valid placement is kept (a program cut short or decomposed can end above greedy)."""
    cluster, targets, solver, objective = req.cluster, setup.targets, setup.solver, req.objective
    replicas = {p.tp: p.replicas for p in cluster.partitions}
    sizes = {p.tp: p.size_bytes for p in cluster.partitions}
    rack = {b.id: b.rack for b in cluster.brokers}
    with budget.phase("greedy", GREEDY_BEFORE_LP_SHARE if program else GREEDY_SHARE,
                      reserve) as deadline:
        ginp = GreedyInput(replicas=replicas, sizes=sizes, rack=rack, floor=targets.replicas.floor,
                           ceil=targets.replicas.ceil, receivers=targets.receivers, givers=targets.givers,
                           removed=targets.removed,
                           max_changes=setup.max_changes if setup.max_changes is not None else 10**9,
                           keep_racks=targets.keep_racks, prefer_small=objective == "bytes",
                           disk={b.id: b.disk_capacity_bytes for b in cluster.brokers if b.disk_capacity_bytes} or None,
                           network={b.id: float(b.network_capacity_bytes_per_s) for b in cluster.brokers
                                    if b.network_capacity_bytes_per_s} or None,
                           rates={p.tp: p.bytes_in_per_s or 0.0 for p in cluster.partitions})
        greedy_changed, gstats = greedy_balance(ginp, deadline)
    solver["greedy"] = {**gstats, "seconds": round(budget.phases["greedy"].seconds, 3)}
    if not program:
        solver["state"] = solver["status"] = ("Heuristic" if gstats["unmet_excess"] or gstats["unmet_deficit"]
                                              else "Balanced")
        return dict(greedy_changed)
    disk = {b.id: b.disk_capacity_bytes for b in cluster.brokers if b.disk_capacity_bytes and b.id in targets.eligible}
    net = {b.id: float(b.network_capacity_bytes_per_s) for b in cluster.brokers
           if b.network_capacity_bytes_per_s and b.id in targets.eligible}
    rates = {p.tp: p.bytes_in_per_s or 0.0 for p in cluster.partitions} if net else None
    warm = {k: greedy_changed.get(k, v) for k, v in replicas.items()}
    # As on load: the leader flow keeps its time whatever the program takes (PuLP handing a large model to HiGHS
    # can overrun the program's share on a loaded machine, and left the leaders a second or two).
    with budget.phase("lp", LP_SHARE, reserve + LEADERS_RESERVE * budget.limit) as deadline:
        changed, lstats = lp_balance(
            replicas, sizes, rack, eligible=targets.eligible, receivers=targets.receivers, givers=targets.givers,
            removed=targets.removed, floor=targets.replicas.floor, ceil=targets.replicas.ceil,
            leader_floor=targets.leaders.floor, leader_ceil=targets.leaders.ceil, max_changes=setup.max_changes,
            keep_racks=targets.keep_racks, objective=objective, warm_start=warm,
            disk=disk or None, network=net or None, rates=rates, write_lp=req.write_lp, deadline=deadline)
    solver["lp"] = lstats
    solver["status"] = lstats.get("status")
    solver["state"] = {"optimal": "Optimal", "time_limit": "Time limit reached"}.get(lstats["outcome"], "Feasible")
    solver["gap"] = lstats.get("gap")
    if lstats["cut_short"]:
        # Groups the program did not reach kept their replicas: keep whichever valid placement is more balanced,
        # then cheaper.
        lp_key = (_band_violation(cluster, changed, targets), _cost(cluster, changed, objective))
        greedy_key = (_band_violation(cluster, greedy_changed, targets), _cost(cluster, greedy_changed, objective))
        if greedy_key < lp_key:
            solver["placement_used"] = "greedy"
            return dict(greedy_changed)
    elif _worse(cluster, changed, greedy_changed, objective, gstats):
        # A time-limited or decomposed program can end above the greedy plan: never hand out the worse.
        solver["status"] = f"{lstats.get('status')}; greedy placement kept (balanced, fewer moves)"
        solver["state"] = "Balanced"
        solver["placement_used"] = "greedy"
        return dict(greedy_changed)
    return dict(changed)
