"""The plan stage: pick a strategy, place replicas, balance leaders exactly, measure against the bounds.

``make_plan(cluster, mode, ...)`` returns a ``Plan``; ``plan_run_dir`` reads ``RUN_DIR/snapshot.json`` and writes
the plan files. Replica modes run in two steps: placement (``lp`` or ``greedy``), then the exact leader flow over
the new replica sets (leaders change by reordering, never by moving data). ``auto`` picks:

- ``leaders`` mode: ``flow``;
- replica modes: ``lp`` while the model stays small (at most ``LP_AUTO_MAX_REPLICAS`` replicas), else ``greedy``.

Infeasible requests fail in ``make_targets`` before anything is computed or written.

Time limit: ``time_limit`` bounds the whole stage, not just a solver. One ``Budget`` (see ``budget``) runs the
phases in order: ``load`` (in ``plan_run_dir``) and ``targets`` are measured; ``greedy``, ``lp`` and ``leaders``
each get a share of the time left (the ``*_SHARE`` constants), after ``SUMMARY_RESERVE`` of the limit is kept for
``summary``, which is measured. When the time runs out the stage returns the best valid plan it has: a greedy cut
short leaves the partitions it did not reach as they are, a program cut short keeps the groups it solved (or the
greedy placement if that is more balanced, then cheaper), a leader flow cut short leaves the other groups'
leaders as they are. ``solver["status"]`` then starts with "Time limit reached in <phase>" and gives the ratios to
the lower bounds; ``solver["budget"]`` has every phase's seconds, allotment and cut. If no change was planned
before the time ran out, or removed brokers are not empty yet, it raises a one-line ``PlanError`` naming the phase
instead (an empty plan would read as "already balanced").
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..model import Cluster
from ..snapshot import load_snapshot
from .bounds import BOUND_DEFINITIONS, leader_change_bound, replica_move_bound
from .budget import Budget, Deadline
from .greedy import GreedyInput, greedy_balance
from ..load import LoadModel, load_model
from .leaders import LeaderItem, balance_leaders
from .load_summary import load_summary
from .lp import lp_balance
from .pinterest import pinterest_leaders
from .result import Plan, build_plan, write_plan
from .targets import PlanError, Targets, make_targets

__all__ = ["STRATEGIES", "LP_AUTO_MAX_REPLICAS", "make_plan", "plan_run_dir", "choose_strategy"]

STRATEGIES = ("auto", "flow", "pinterest", "lp", "greedy")
LP_AUTO_MAX_REPLICAS = 20_000
Key = tuple[str, int]

# Shares of the time left when a phase starts (after the summary's reserve). Placement comes first: replica balance
# is what a replica mode is for, and leaders can be rebalanced later without moving data (--mode leaders).
GREEDY_SHARE = 0.6            # greedy is the placement; the leader flow gets the rest
GREEDY_BEFORE_LP_SHARE = 0.2  # greedy is only the program's warm start and fallback
LP_SHARE = 0.75               # of what greedy left; the leader flow gets the rest
LEADERS_SHARE = 1.0           # the last phase that can stop takes all that is left
SUMMARY_RESERVE = 0.1         # of the limit, kept for building the summary (which cannot be interrupted)


def choose_strategy(cluster: Cluster, mode: str, strategy: str) -> tuple[str, str]:
    """(strategy, reason)."""
    if strategy not in STRATEGIES:
        raise PlanError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if mode == "leaders":
        if strategy in ("lp", "greedy"):
            raise PlanError(f"strategy {strategy} places replicas; --mode leaders takes flow or pinterest")
        return ("flow", "auto: leaders mode uses the exact min-cost flow") if strategy == "auto" else (strategy, "requested")
    if strategy in ("flow", "pinterest"):
        raise PlanError(f"strategy {strategy} only reorders leaders; --mode {mode} takes lp or greedy")
    if strategy != "auto":
        return strategy, "requested"
    n = cluster.replica_count
    if n <= LP_AUTO_MAX_REPLICAS:
        return "lp", f"auto: {n} replicas <= {LP_AUTO_MAX_REPLICAS}, exact 0/1 program"
    return "greedy", f"auto: {n} replicas > {LP_AUTO_MAX_REPLICAS}, near-linear greedy with its gap to the bound"


def _leader_items(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], eligible: frozenset[int],
                  replicas_moved: bool) -> list[LeaderItem]:
    alive = {b.id for b in cluster.brokers if b.alive}
    items = []
    for p in cluster.partitions:
        reps = assignment.get(p.tp, p.replicas)
        if replicas_moved and reps != p.replicas:
            # New replicas will be in sync once their move completes.
            cands = tuple(b for b in reps if b in eligible and b in alive and (b in p.isr or b not in p.replicas))
        else:
            cands = tuple(b for b in reps if b in eligible and b in alive and b in p.isr)
        items.append(LeaderItem(p.tp, cands, p.replicas[0]))
    return items


def canonical_order(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    """``after``'s leader first, then surviving followers in their old order, then the new replicas.

    Kafka only gives meaning to the first replica (the preferred leader); keeping the rest stable means a plan never
    contains a follower-only reshuffle, which would be a reassignment that moves nothing.
    """
    leader = after[0]
    kept = [b for b in before if b in after and b != leader]
    new = [b for b in after[1:] if b not in before]
    return (leader, *kept, *new)


def _apply_leaders(assignment: dict[Key, tuple[int, ...]], cluster: Cluster, leaders: Mapping[Key, int]) -> None:
    for p in cluster.partitions:
        reps = assignment.get(p.tp, p.replicas)
        new = leaders.get(p.tp)
        if new is None or new == reps[0]:
            continue
        order = [new] + [b for b in reps if b != new]
        assignment[p.tp] = tuple(order)


def _leader_pass(cluster: Cluster, assignment: dict[Key, tuple[int, ...]], targets: Targets, strategy: str,
                 replicas_moved: bool, deadline: Deadline) -> dict[str, Any]:
    items = _leader_items(cluster, assignment, targets.eligible, replicas_moved)
    usable = [it for it in items if it.candidates]
    stranded = len(items) - len(usable)
    started = time.monotonic()
    if strategy == "pinterest":
        leaders = pinterest_leaders(usable, deadline)
        info: dict[str, Any] = {"algorithm": "pinterest (max-flow-min-cost, residue nodes, pruning)"}
    else:
        res = balance_leaders(usable, targets.eligible, priority="balance" if replicas_moved else "changes",
                              deadline=deadline, kept={k: reps[0] for k, reps in assignment.items()})
        leaders = res.leaders
        info = {"algorithm": "min-cost flow (network simplex), exact" if res.groups == 1 else
                f"min-cost flow (network simplex) over {res.groups} topic groups, each exact",
                "priority": ("topic band, cluster tolerance band, cluster band, changes" if replicas_moved else
                             "topic band, cluster tolerance band, changes, cluster band"),
                "topic_band_violation": res.topic_violation,
                "tolerance_band_violation": res.tolerance_violation,
                "cluster_band_violation": res.cluster_violation,
                "groups": res.groups,
                "groups_solved": res.groups_solved,
                "slowest_group_seconds": round(res.slowest_group_seconds, 3)}
    info["cut_short"] = deadline.cut_short
    info["seconds"] = round(time.monotonic() - started, 3)
    info["partitions_without_eligible_leader"] = stranded
    info["leader_bound"] = leader_change_bound(usable)
    _apply_leaders(assignment, cluster, leaders)
    return info


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


def _out_of_time(budget: Budget, what: str) -> PlanError:
    phase = budget.expired_in or "the plan stage"
    suggest = math.ceil(2 * max(budget.limit, budget.elapsed()))
    return PlanError(f"the time limit ({budget.limit:g} s) ran out in {phase} after {budget.elapsed():.1f} s {what}: "
                     f"give it more time (e.g. --time-limit {suggest})")


def _mark_cut_short(plan: Plan, budget: Budget) -> None:
    """Status of a plan the time limit cut short: where, what was cut, and how far it is from the lower bounds."""
    s = plan.summary

    def ratio(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    kept = "; greedy placement kept" if plan.solver.get("placement_used") == "greedy" else ""
    plan.solver["status"] = (f"Time limit reached in {budget.expired_in} (cut short: {', '.join(budget.cut_short)}){kept}; "
                             f"moves/bound {ratio(s['moves_to_bound'])}, "
                             f"leader changes/bound {ratio(s['leader_changes_to_bound'])}")


def make_plan(
    cluster: Cluster,
    mode: str,
    *,
    brokers: Iterable[int] | None = None,
    strategy: str = "auto",
    max_changes_per_partition: int | None = None,
    time_limit: float = 60.0,
    objective: str = "replicas",
    write_lp: str | None = None,
    budget: Budget | None = None,
    load: LoadModel | None = None,
) -> Plan:
    """Plan ``mode`` for ``cluster`` within ``time_limit`` seconds (see the module doc).

    ``budget``: the stage's budget when the caller started it earlier (``plan_run_dir`` starts it before loading the
    snapshot); its limit must be ``time_limit``. ``load``: the cluster's load model (``rebalancer.load``; built from
    the snapshot alone when not given): the summary reports every dimension's bands before and after, and bytes
    moved against their bound.
    """
    if budget is None:
        if not time_limit > 0:
            raise PlanError(f"--time-limit must be positive, not {time_limit}")
        budget = Budget(time_limit)
    elif budget.limit != time_limit:
        raise ValueError(f"time_limit {time_limit} differs from the budget's limit {budget.limit}")
    started = time.monotonic()
    with budget.phase("targets"):
        targets = make_targets(cluster, mode, brokers)
        model = load if load is not None else load_model(cluster)
        chosen, reason = choose_strategy(cluster, mode, strategy)
        if objective not in ("replicas", "bytes"):
            raise PlanError(f"unknown objective {objective!r}: replicas or bytes")
        if max_changes_per_partition is None:
            max_changes = None if mode == "remove-brokers" else 1
        else:
            if max_changes_per_partition < 1:
                raise PlanError("--max-changes-per-partition must be at least 1")
            max_changes = max_changes_per_partition
        counts: dict[int, int] = {b: 0 for b in cluster.broker_ids}
        for p in cluster.partitions:
            for b in p.replicas:
                counts[b] += 1
        # Partitions holding more replicas on removed brokers than the change cap allows cannot be planned.
        if mode == "remove-brokers" and max_changes is not None:
            for p in cluster.partitions:
                n = sum(1 for b in p.replicas if b in targets.removed)
                if n > max_changes:
                    raise PlanError(f"partition {p.name} has {n} replicas on removed brokers but "
                                    f"--max-changes-per-partition is {max_changes}")
        dead_replicas = [p.name for p in cluster.partitions for b in p.replicas if b not in targets.eligible and b not in targets.removed]
        solver: dict[str, Any] = {"strategy_reason": reason}
        bounds: dict[str, Any] = {"definitions": BOUND_DEFINITIONS}
        if mode != "leaders":
            rb = replica_move_bound(counts, targets)
            bounds["replica_moves"] = rb["bound"]
            bounds["replica_excess"] = rb["excess"]
            bounds["replica_deficit"] = rb["deficit"]
    if budget.remaining() == 0.0:
        raise _out_of_time(budget, "before any change was planned")
    reserve = SUMMARY_RESERVE * budget.limit
    assignment: dict[Key, tuple[int, ...]] = {}
    if mode == "leaders":
        bounds["replica_moves"] = 0
        with budget.phase("leaders", LEADERS_SHARE, reserve) as deadline:
            solver["leaders"] = _leader_pass(cluster, assignment, targets, chosen, replicas_moved=False, deadline=deadline)
        bounds["leader_changes"] = solver["leaders"]["leader_bound"]
        solver["status"] = "Optimal" if chosen == "flow" else "Heuristic"
    else:
        replicas = {p.tp: p.replicas for p in cluster.partitions}
        sizes = {p.tp: p.size_bytes for p in cluster.partitions}
        rack = {b.id: b.rack for b in cluster.brokers}
        with budget.phase("greedy", GREEDY_SHARE if chosen == "greedy" else GREEDY_BEFORE_LP_SHARE, reserve) as deadline:
            ginp = GreedyInput(replicas=replicas, sizes=sizes, rack=rack, floor=targets.replicas.floor,
                               ceil=targets.replicas.ceil, receivers=targets.receivers, givers=targets.givers,
                               removed=targets.removed,
                               max_changes=max_changes if max_changes is not None else 10**9, keep_racks=targets.keep_racks,
                               prefer_small=objective == "bytes",
                               disk={b.id: b.disk_capacity_bytes for b in cluster.brokers if b.disk_capacity_bytes} or None,
                               network={b.id: float(b.network_capacity_bytes_per_s) for b in cluster.brokers
                                        if b.network_capacity_bytes_per_s} or None,
                               rates={p.tp: p.bytes_in_per_s or 0.0 for p in cluster.partitions})
            greedy_changed, gstats = greedy_balance(ginp, deadline)
        solver["greedy"] = {**gstats, "seconds": round(budget.phases["greedy"].seconds, 3)}
        if chosen == "greedy":
            assignment = dict(greedy_changed)
            solver["status"] = "Heuristic" if gstats["unmet_excess"] or gstats["unmet_deficit"] else "Balanced"
        else:
            disk = {b.id: b.disk_capacity_bytes for b in cluster.brokers if b.disk_capacity_bytes and b.id in targets.eligible}
            net = {b.id: float(b.network_capacity_bytes_per_s) for b in cluster.brokers
                   if b.network_capacity_bytes_per_s and b.id in targets.eligible}
            rates = {p.tp: p.bytes_in_per_s or 0.0 for p in cluster.partitions} if net else None
            warm = {k: greedy_changed.get(k, v) for k, v in replicas.items()}
            with budget.phase("lp", LP_SHARE, reserve) as deadline:
                changed, lstats = lp_balance(
                    replicas, sizes, rack, eligible=targets.eligible, receivers=targets.receivers, givers=targets.givers,
                    removed=targets.removed, floor=targets.replicas.floor, ceil=targets.replicas.ceil,
                    leader_floor=targets.leaders.floor, leader_ceil=targets.leaders.ceil, max_changes=max_changes,
                    keep_racks=targets.keep_racks, objective=objective, warm_start=warm,
                    disk=disk or None, network=net or None, rates=rates, write_lp=write_lp, deadline=deadline)
            solver["lp"] = lstats
            if lstats.get("failed"):
                raise PlanError(f"the 0/1 program is {lstats.get('status')}: the constraints cannot all hold "
                                "(try --max-changes-per-partition 2, or --strategy greedy)")
            solver["status"] = lstats.get("status")
            solver["gap"] = lstats.get("gap")
            assignment = dict(changed)
            if lstats["cut_short"]:
                # Groups the program did not reach kept their replicas: keep whichever valid placement is more
                # balanced, then cheaper.
                lp_key = (_band_violation(cluster, changed, targets), _cost(cluster, changed, objective))
                greedy_key = (_band_violation(cluster, greedy_changed, targets), _cost(cluster, greedy_changed, objective))
                if greedy_key < lp_key:
                    assignment = dict(greedy_changed)
                    solver["placement_used"] = "greedy"
            elif _worse(cluster, changed, greedy_changed, objective, gstats):
                # A time-limited or decomposed program can end above the greedy plan: never hand out the worse.
                assignment = dict(greedy_changed)
                solver["status"] = f"{lstats.get('status')}; greedy placement kept (balanced, fewer moves)"
                solver["placement_used"] = "greedy"
        with budget.phase("leaders", LEADERS_SHARE, reserve) as deadline:
            solver["leaders"] = _leader_pass(cluster, assignment, targets, "flow", replicas_moved=True, deadline=deadline)
        bounds["leader_changes"] = solver["leaders"]["leader_bound"]
    with budget.phase("summary"):
        by_tp = {p.tp: p.replicas for p in cluster.partitions}
        assignment = {k: v for k, v in ((k, canonical_order(by_tp[k], v)) for k, v in assignment.items()) if v != by_tp[k]}
        if targets.removed:
            left = [(p.name, b) for p in cluster.partitions for b in assignment.get(p.tp, p.replicas) if b in targets.removed]
            if left and budget.cut_short:
                raise _out_of_time(budget, f"with {len(left)} replica(s) still on the removed broker(s)")
            if left:
                name, b = left[0]
                raise PlanError(f"cannot empty broker {b}: {len(left)} replica(s) (e.g. {name}) have no receiver that keeps "
                                "their rack count, capacity and change cap (add brokers in that rack, or raise "
                                "--max-changes-per-partition)")
        if not assignment and budget.cut_short:
            raise _out_of_time(budget, "before any change was planned")
        if dead_replicas:
            solver["replicas_on_dead_brokers"] = len(dead_replicas)
        solver["seconds"] = round(time.monotonic() - started, 3)
        params = {"mode": mode, "brokers": sorted(int(b) for b in (brokers or ())), "strategy_requested": strategy,
                  "max_changes_per_partition": max_changes, "time_limit": time_limit, "objective": objective}
        plan = build_plan(cluster, assignment, mode=mode, strategy=chosen, eligible=targets.eligible, params=params,
                          solver=solver, bounds=bounds)
        plan.summary["load"] = load_summary(cluster, assignment, targets, model, plan.summary["bytes_moved"])
        bounds["bytes_moved"] = plan.summary["load"]["bytes_bound"]
    solver["budget"] = budget.to_dict()
    if budget.cut_short:
        _mark_cut_short(plan, budget)
    return plan


def plan_run_dir(run_dir: str | Path, mode: str, *, time_limit: float = 60.0, **kwargs: Any) -> Plan:
    """Read ``RUN_DIR/snapshot.json``, plan, and write plan.json, reassignment.json and rollback.json.

    The time limit starts before the snapshot is read: loading counts against it (it cannot be interrupted).
    """
    if not time_limit > 0:
        raise PlanError(f"--time-limit must be positive, not {time_limit}")
    budget = Budget(time_limit)
    with budget.phase("load"):
        cluster = load_snapshot(run_dir)
    plan = make_plan(cluster, mode, time_limit=time_limit, budget=budget, **kwargs)
    write_plan(plan, run_dir)
    return plan
