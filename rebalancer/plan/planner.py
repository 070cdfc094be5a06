"""The plan stage: pick a strategy, place replicas, balance leaders exactly, measure against the bounds.

``make_plan(cluster, mode, ...)`` returns a ``Plan``; ``plan_run_dir`` reads ``RUN_DIR/snapshot.json`` and writes
the plan files. The stage is a pipeline (``pipeline``): request -> setup (targets, the balance and strategy chosen,
the bounds known before placement; here) -> placement (``place_counts`` or ``place_load``) -> leaders
(``leader_pass``: leaders change by reordering, never by moving data) -> result (the plan, its summary and status;
here). ``auto`` picks:

- ``leaders`` mode: ``flow``;
- replica modes on counts: ``lp`` while the model stays small (at most ``LP_AUTO_MAX_REPLICAS`` replicas), else
  ``greedy``; on load: ``greedy``, with the programs where ``place_load`` finds them affordable.

Infeasible requests fail in ``make_targets`` before anything is computed or written.

Time limit: ``time_limit`` bounds the whole stage, not just a solver; without one, ``budget.default_time_limit`` (10
minutes, or 1 s per 1,000 replicas when more) lets every cluster the benchmarks cover finish. One ``Budget`` (see
``budget``) runs the phases in order: ``load`` (in ``plan_run_dir``) and ``targets`` are measured; ``greedy``,
``lp`` and ``leaders`` each get a share of the time left (``pipeline``'s ``*_SHARE`` constants), after
``SUMMARY_RESERVE`` of the limit is kept for ``summary``, which is measured. When the time runs out the stage returns
the best valid plan it has: a greedy cut short leaves the partitions it did not reach as they are, a program cut
short keeps the groups it solved (or the greedy placement if that is more balanced, then cheaper), a leader flow cut
short leaves the other groups' leaders as they are. ``solver["status"]`` then starts with "Time limit reached in
<phase>" and gives the ratios to the lower bounds; ``solver["budget"]`` has every phase's seconds, allotment and cut.
If no change was planned before the time ran out, or removed brokers are not empty yet, it raises a one-line
``PlanError`` naming the phase instead (an empty plan would read as "already balanced").
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..balance import counts_excess
from ..bulk import collector_paused
from ..errors import InputError
from ..formats import check_writable
from ..load import (
    LoadModel,
    load_bands,
    load_model,
    read_capacity_file,
    read_history,
    replica_table,
)
from ..model import Cluster
from ..planfile.record import SolverRecord
from ..planfile.result import Plan, build_plan, write_plan
from ..snapshot import load_snapshot
from ..strategies import BALANCES, STRATEGIES, STRATEGY_REGISTRY, resolve_schedule, strategies_for
from ..urls import source_scheme
from .bounds import BOUND_DEFINITIONS, replica_move_bound
from .budget import ITERATIONS_PER_SECOND, WORK_SHARE, Budget, Work, default_time_limit
from .failover import failover_figures, leader_weights, order_floors, order_followers
from .highs import milp_worker
from .leader_exact import BAND_MAX_PARTITIONS, GateRows, band_leaders, band_relaxation
from .leader_load import LeaderLoadInput
from .leader_pass import leader_items, place_leaders
from .load_summary import load_summary
from .options import PlanOptions
from .pipeline import SUMMARY_RESERVE, Key, Placement, PlanRequest, PlanSetup, Step
from .place_counts import place_on_counts
from .place_load import place_on_load
from .rack_repair import RackRepair, merge, repair_racks
from .settled import SETTLED, outside_gates
from .sum_proofs import explain_network_out, fewest_leaders, network_out_proof, why_counts_out_of_reach
from .targets import PlanError, Targets, make_targets

__all__ = ["STRATEGIES", "BALANCES", "LP_AUTO_MAX_REPLICAS", "make_plan", "plan_run_dir", "choose_strategy",
           "choose_balance", "place_auto", "place_greedy", "place_lp"]

RELAXATION_MAX_PARTITIONS = 1_000_000  # the leaders' relaxation, a flow: 6 s at a million partitions


LP_AUTO_MAX_REPLICAS = 20_000


def choose_balance(cluster: Cluster, balance: str) -> str:
    """``load`` (disk, network, then counts) or ``counts`` (replica and leader counts only); ``auto``: load when the
    snapshot knows partition sizes."""
    if balance not in BALANCES:
        raise PlanError(f"unknown balance {balance!r}: choose one of {', '.join(BALANCES)}")
    if balance != "auto":
        return balance
    return "load" if any(p.size_bytes for p in cluster.partitions) else "counts"


def choose_strategy(cluster: Cluster, mode: str, strategy: str, balance: str = "counts") -> tuple[str, str]:
    """(strategy, reason)."""
    if strategy not in STRATEGY_REGISTRY:
        raise PlanError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGY_REGISTRY)}")
    if mode not in STRATEGY_REGISTRY[strategy].modes:  # the registry says which modes a strategy serves
        named = [s for s in strategies_for(mode) if s != "auto"]
        raise PlanError(f"strategy {strategy} serves --mode {' or '.join(STRATEGY_REGISTRY[strategy].modes)}; "
                        f"--mode {mode} takes {' or '.join(named)}")
    if strategy != "auto":
        return strategy, "requested"
    if mode == "leaders":
        return "flow", "auto: leaders mode uses the exact min-cost flow"
    n = cluster.replica_count
    if balance == "load":
        return "greedy", f"auto: load balance by the greedy placement ({n} replicas), measured against the bytes bound"
    if n <= LP_AUTO_MAX_REPLICAS:
        return "lp", f"auto: {n} replicas <= {LP_AUTO_MAX_REPLICAS}, exact 0/1 program"
    return "greedy", f"auto: {n} replicas > {LP_AUTO_MAX_REPLICAS}, near-linear greedy with its gap to the bound"


def canonical_order(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    """``after``'s leader first, then surviving followers in their old order, then the new replicas.

    Kafka only gives meaning to the first replica (the preferred leader); keeping the rest stable means a plan never
    contains a follower-only reshuffle, which would be a reassignment that moves nothing.
    """
    leader = after[0]
    kept = [b for b in before if b in after and b != leader]
    new = [b for b in after[1:] if b not in before]
    return (leader, *kept, *new)


def _out_of_time(budget: Budget, what: str) -> PlanError:
    phase = budget.expired_in or "the plan stage"
    suggest = math.ceil(2 * max(budget.limit, budget.elapsed()))
    return PlanError(f"the time limit ({budget.limit:g} s) ran out in {phase} after {budget.elapsed():.1f} s {what}: "
                     f"give it more time (e.g. --time-limit {suggest})")


def _mark_cut_short(plan: Plan, solver: dict[str, Any], budget: Budget) -> None:
    """Status of a plan the time limit cut short: where, what was cut, and how far it is from the lower bounds."""
    s = plan.summary

    def ratio(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    kept = "; greedy placement kept" if solver.get("placement_used") == "greedy" else ""
    solver["state"], solver["cut_in"] = "Time limit reached", budget.expired_in
    solver["status"] = (f"Time limit reached in {budget.expired_in} (cut short: {', '.join(budget.cut_short)}){kept}; "
                        f"moves/bound {ratio(s['moves_to_bound'])}, "
                        f"leader changes/bound {ratio(s['leader_changes_to_bound'])}")


def _network_out_proof(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], targets: Targets,
                       model: LoadModel, plan: Plan, seconds: float) -> dict[str, Any] | None:
    """Where a broker ends outside the network-out band: a partition whose network out proves the band out of reach
    for whichever broker leads it, given the fewest leaders the leader gate lets a broker keep
    (``sum_proofs.network_out_proof``); else, up to ``RELAXATION_MAX_PARTITIONS``, the linear relaxation of the
    leader choice over the plan's replica sets finding no choice, even a fractional one, that puts every broker
    within its band (``leader_exact.band_relaxation``); else, up to ``BAND_MAX_PARTITIONS`` and within ``seconds``,
    the 0/1 program over every leader finding no choice of whole leaders that does while passing the leader gate
    (``leader_exact.band_leaders`` with ``GateRows``: fuzz small seeds 12, 16, 23, where a broker leads 14-18
    partitions of unlike size). Only where every partition's replicas are eligible brokers after the plan (then the
    eligible brokers' leader counts sum to the partitions)."""
    nw_out = plan.summary["load"]["dimensions"].get("nw_out") or {}
    if not nw_out.get("outside_after"):
        return None
    parts = cluster.partitions
    if any(b not in targets.eligible for p in parts for b in assignment.get(p.tp, p.replicas)):
        return None
    units = replica_table(cluster, model.loads, dimensions=["nw_out"]).per_partition["nw_out"][0].astype(float).tolist()
    bands = model.bands("nw_out", int(sum(units)), targets.eligible)
    fewest = fewest_leaders(len(parts), len(targets.eligible), model.band["leaders"])
    found = network_out_proof(units, bands, fewest, names=[p.name for p in parts])
    if found is not None or len(parts) > RELAXATION_MAX_PARTITIONS:
        return found
    candidates = [item.candidates for item in leader_items(cluster, assignment, targets.eligible, replicas_moved=True)]
    outside = list(nw_out["outside_after"])
    if band_relaxation(units, candidates, bands) is False:
        return {"by": "linear relaxation", "brokers": outside}
    if len(parts) > BAND_MAX_PARTITIONS or seconds < 1.0:
        return None
    leaders = [assignment.get(p.tp, p.replicas)[0] for p in parts]
    inp = LeaderLoadInput(leaders, candidates, {"nw_out": units}, {"nw_out": bands}, {"nw_out": 1.0})
    _, stats = band_leaders(inp, GateRows(model.band["leaders"], targets.eligible), seconds=seconds)
    return {"by": "0/1 program", "brokers": outside} if stats.get("outcome") == "infeasible" else None


def _load_status(plan: Plan, solver: dict[str, Any], model: LoadModel,
                 nw_out_proof: Mapping[str, Any] | None = None, work: Work | None = None) -> None:
    """A load plan is Balanced when every broker ends inside every band of the summary and every count passes its
    gate (which measures from the median after the plan: a count inside its band around the average may not);
    otherwise it says which brokers stay outside which band, and why (``nw_out_proof``: network out's band proved
    out of reach, ``_network_out_proof``; ``work``: the programs' work limit, where it left a program unrun)."""
    outside = {name: d["outside_after"] for name, d in plan.summary["load"]["dimensions"].items()
               if d.get("outside_after")}
    for dim, brokers in _counts_outside_gate(plan, model).items():
        outside[dim] = sorted(set(outside.get(dim, [])) | set(brokers))
    if not outside:
        solver["state"] = solver["status"] = "Balanced"
        return
    solver["state"] = solver["status"] = "Heuristic"
    solver["outside_bands"] = outside
    why = []
    if set(outside) - ({"nw_out"} if nw_out_proof else set()):
        why.append("no further move keeps every partition's racks, the change cap and the capacity thresholds while "
                   "bringing these brokers closer without pushing another broker out of a band of the same or higher "
                   "priority (the band may be narrower than the partition sizes allow: widen it with --band, or allow "
                   "more changes)")
    if work is not None and work.stopped_in:
        why.append(f"the 0/1 programs' work limit ({work.limit:,.0f} LP iterations: {WORK_SHARE:.0%} of the time "
                   f"limit at {ITERATIONS_PER_SECOND:,} a second) ran out in {work.stopped_in}: a longer --time-limit "
                   "gives them more")
    if nw_out_proof:
        solver["network_out_proof"] = dict(nw_out_proof)
        why.append(explain_network_out(nw_out_proof))
    counted = why_counts_out_of_reach(solver.get("bands_proof") or {}) if "replicas" in outside else None
    if counted:  # the count gate's own sum (``sum_proofs.count_proof``)
        why.append(counted)
    solver["outside_why"] = "; ".join(why)


def make_plan(
    cluster: Cluster,
    mode: str,
    *,
    brokers: Iterable[int] | None = None,
    budget: Budget | None = None,
    load: LoadModel | None = None,
    options: PlanOptions | None = None,
    **settings: Any,
) -> Plan:
    """Plan ``mode`` for ``cluster`` (``brokers``: the new ones, or those to empty) as ``options`` say
    (``PlanOptions``; or its fields as keywords, ``settings``): within ``time_limit`` seconds (see the module doc;
    None: ``default_time_limit`` of the cluster's replicas, generous enough that no cluster the benchmarks cover is
    cut short).

    The stage is a pipeline, each step once: request (checked inputs) -> setup (targets, choices, bounds; phase
    ``targets``) -> placement (``greedy``, ``lp``) -> leaders (``leaders``, ``leaders_load``) -> result
    (``summary``). ``budget``: the stage's budget when the caller started it earlier (``plan_run_dir`` starts it before
    loading the snapshot); its limit must be ``time_limit`` when one is given. ``load``: the cluster's load model
    (``rebalancer.load``; built from the snapshot alone when not given): the summary reports every dimension's bands
    before and after, and bytes moved against their bound. ``balance``: what a replica mode balances
    (``choose_balance``): ``load`` places replicas by ``load_greedy`` (disk, network in, counts, the fewest bytes),
    ``counts`` by replica counts alone. ``groups`` / ``master``: the load placement split in groups of topics
    planned as Spark tasks (``split_plan``; by default from ``SPLIT_MIN_REPLICAS`` replicas, on ``SPLIT_MASTER``).
    ``failover_order``: each partition's followers ordered so that the leadership of a failed broker spreads evenly
    (``failover.order_followers``; leaders, replica sets and bytes unchanged, a partition whose order alone changes
    becomes a change that copies nothing). ``failover_when_balanced``: the same, only where the plan would change
    nothing else (the weekly runbook's default: a balanced cluster gets its followers ordered, then nothing more).
    """
    if options is not None and settings:
        raise TypeError("make_plan takes options or their fields as keywords, not both")
    opts = options if options is not None else PlanOptions(**settings)
    time_limit, groups = opts.time_limit, opts.groups
    if time_limit is not None and not time_limit > 0:
        raise PlanError(f"--time-limit must be positive, not {time_limit}")
    if budget is None:
        budget = Budget(time_limit if time_limit is not None else default_time_limit(cluster.replica_count))
    elif time_limit is not None and budget.limit != time_limit:
        raise ValueError(f"time_limit {time_limit} differs from the budget's limit {budget.limit}")
    started = time.monotonic()
    if groups is not None and groups < 1:
        raise PlanError(f"--groups must be at least 1, not {groups}")
    request = PlanRequest(cluster, mode, tuple(sorted(int(b) for b in (brokers or ()))), opts.strategy, opts.balance,
                          opts.objective, opts.max_changes_per_partition,
                          load if load is not None else load_model(cluster), opts.write_lp,
                          limit_given=time_limit is not None, groups=groups, master=opts.master,
                          failover_order=opts.failover_order, failover_when_balanced=opts.failover_when_balanced,
                          repair_racks=opts.repair_racks)
    with budget.phase("targets"):
        setup = _setup(request, brokers)
        request, repair = _repair_racks(request, setup)
    if budget.remaining() == 0.0:
        raise _out_of_time(budget, "before any change was planned")
    reserve = SUMMARY_RESERVE * budget.limit
    placement = _placement(request, setup, budget, reserve)
    if repair is not None and repair.assignment:
        _merge_repair(repair, request, setup, placement)
    place_leaders(request, setup, placement, budget, reserve)
    plan = _result(request, setup, placement, budget, started)
    return plan


def _setup(req: PlanRequest, brokers: Iterable[int] | None) -> PlanSetup:
    """Targets and bands, the balance and strategy (and why), the change cap, and the lower bounds on replica moves;
    every infeasible request fails here, before anything is placed."""
    cluster, mode, model = req.cluster, req.mode, req.model
    targets = make_targets(cluster, mode, brokers)
    balanced = choose_balance(cluster, req.balance) if mode != "leaders" else "counts"
    chosen, reason = choose_strategy(cluster, mode, req.strategy, balanced)
    if req.objective not in ("replicas", "bytes"):
        raise PlanError(f"unknown objective {req.objective!r}: replicas or bytes")
    if req.max_changes_per_partition is None:
        max_changes = None if mode == "remove-brokers" else 1
    else:
        if req.max_changes_per_partition < 1:
            raise PlanError("--max-changes-per-partition must be at least 1")
        max_changes = req.max_changes_per_partition
    # Partitions holding more replicas on removed brokers than the change cap allows cannot be planned.
    if mode == "remove-brokers" and max_changes is not None:
        for p in cluster.partitions:
            n = sum(1 for b in p.replicas if b in targets.removed)
            if n > max_changes:
                raise PlanError(f"partition {p.name} has {n} replicas on removed brokers but "
                                f"--max-changes-per-partition is {max_changes}")
    dead = sum(1 for p in cluster.partitions for b in p.replicas if b not in targets.eligible and b not in targets.removed)
    bounds: dict[str, Any] = {"definitions": BOUND_DEFINITIONS}
    if mode == "leaders":
        bounds["replica_moves"] = 0
    else:
        counts: dict[int, int] = {b: 0 for b in cluster.broker_ids}
        for p in cluster.partitions:
            for b in p.replicas:
                counts[b] += 1
        # On load, counts need only reach the gate's band (around the mean): bound the moves against that.
        count_targets = targets if balanced == "counts" else dataclasses.replace(
            targets, replicas=next(iter(load_bands("replicas", cluster.replica_count, targets.eligible,
                                                   band=model.band["replicas"]).values())))
        rb = replica_move_bound(counts, count_targets)
        bounds.update(replica_moves=rb["bound"], replica_excess=rb["excess"], replica_deficit=rb["deficit"])
    return PlanSetup(targets, balanced, chosen, max_changes, dead, {"strategy_reason": reason, "balance": balanced},
                     bounds)


def _repair_racks(req: PlanRequest, setup: PlanSetup) -> tuple[PlanRequest, RackRepair | None]:
    """The uneven partitions spread over the racks (``rack_repair``) where asked and replicas may move, recorded
    as ``solver["rack_repair"]``: the request the placement then plans (on the repaired cluster, its changes
    counted from ``origin``, the cluster as it is) and the repair (None where not asked)."""
    if not req.repair_racks or req.mode == "leaders":
        return req, None
    repair = repair_racks(req.cluster, setup.targets, setup.max_changes)
    setup.solver["rack_repair"] = repair.record()
    if repair.assignment:
        req = dataclasses.replace(req, cluster=req.cluster.with_replicas(repair.assignment), origin=req.cluster)
    return req, repair


def _merge_repair(repair: RackRepair, req: PlanRequest, setup: PlanSetup, placement: Placement) -> None:
    """The placement's changes over the repair's (``rack_repair.merge``), in place; the placement's changes taken
    back recorded."""
    placement.assignment, dropped = merge(repair, req.base, placement.assignment, setup.max_changes)
    setup.solver["rack_repair"]["placement_changes_dropped"] = dropped


def _placement(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Where the replicas go (in leaders mode: who leads): the step of the strategy asked for, from the registry
    (``rebalancer.strategies``). On load, nowhere new where every broker already lies inside what the gates accept
    (``settled``): the placement's margins say where a plan goes once it must move, not whether it must. Where a
    partition has two followers or more, the failover programs' child (``highs.milp_worker``: the order's exact
    step, and the summary's load floor of every plan, ``failover.order_floor``) starts first: its interpreter's
    start overlaps the placement (0.4 s a plan of the simulator's scenarios paid at the end otherwise)."""
    if any(len(p.replicas) > 2 for p in req.cluster.partitions):
        milp_worker().start()
    if req.mode != "leaders" and setup.balanced == "load":
        why = outside_gates(req.cluster, setup.targets, req.model, on_load=True)
        setup.solver["placement_needed"] = why or SETTLED
        if why is None:
            setup.solver["state"] = setup.solver["status"] = "Balanced"
            return Placement({}, setup.strategy)
    return _step(req.strategy)(req, setup, budget, reserve)


def _step(name: str) -> Step:
    step: Step = STRATEGY_REGISTRY[name].step()
    return step


def place_auto(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Strategy ``auto``: the step of the strategy ``choose_strategy`` picked, run as auto runs it (on load the
    programs run where ``place_load`` finds them needed and affordable)."""
    return _step(setup.strategy)(req, setup, budget, reserve)


def place_greedy(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Strategy ``greedy``: the greedy placement of the balance chosen (``load_greedy`` or Wix's count greedy)."""
    return _place_replicas(req, setup, budget, reserve, program=False)


def place_lp(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Strategy ``lp``: the greedy placement, then the 0/1 program warm-started from it, against the time limit."""
    return _place_replicas(req, setup, budget, reserve, program=True)


def _place_replicas(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float, program: bool) -> Placement:
    if setup.balanced == "load":
        assignment, used = place_on_load(req, setup, budget, reserve, program)
        return Placement(assignment, used)
    return Placement(place_on_counts(req, setup, budget, reserve, program), "lp" if program else "greedy")


def _result(req: PlanRequest, setup: PlanSetup, placement: Placement, budget: Budget, started: float) -> Plan:
    """The plan: each change in Kafka's order (the leader first, kept followers in place), checked (removed brokers
    empty, something planned when the time was cut), its summary, load and status."""
    cluster, targets, solver, bounds, model = req.base, setup.targets, setup.solver, setup.bounds, req.model
    if req.origin is not None:  # a bound proved on the repaired cluster bounds what follows the repair, not the
        solver.pop("bytes_proof", None)  # plan (whose bound counts the spread: ``rack_repair.spread_bytes``)
    with budget.phase("summary"):
        by_tp = {p.tp: p.replicas for p in cluster.partitions}
        assignment = {k: v for k, v in ((k, canonical_order(by_tp[k], v)) for k, v in placement.assignment.items())
                      if v != by_tp[k]}
        weights, weighted_by = leader_weights(cluster, model)
        if req.failover_order or (req.failover_when_balanced and not assignment and not budget.cut_short):
            _order_for_failover(cluster, assignment, targets, weights, solver,
                                "asked" if req.failover_order else "nothing else to change")
        placement.assignment = assignment
        if targets.removed:
            left = [(p.name, b) for p in cluster.partitions for b in assignment.get(p.tp, p.replicas)
                    if b in targets.removed]
            if left and budget.cut_short:
                raise _out_of_time(budget, f"with {len(left)} replica(s) still on the removed broker(s)")
            if left:
                name, b = left[0]
                raise PlanError(f"cannot empty broker {b}: {len(left)} replica(s) (e.g. {name}) have no receiver that "
                                "keeps their rack count, capacity and change cap (add brokers in that rack, or raise "
                                "--max-changes-per-partition)")
        if not assignment and budget.cut_short:
            raise _out_of_time(budget, "before any change was planned")
        if setup.dead_replicas:
            solver["replicas_on_dead_brokers"] = setup.dead_replicas
        solver["seconds"] = round(time.monotonic() - started, 3)
        params = {"mode": req.mode, "brokers": list(req.brokers), "strategy_requested": req.strategy,
                  "max_changes_per_partition": setup.max_changes, "time_limit": budget.limit,
                  "time_limit_given": req.limit_given, "objective": req.objective,
                  "balance": setup.balanced, "load": model.params()}
        plan = build_plan(cluster, assignment, mode=req.mode, strategy=placement.strategy, eligible=targets.eligible,
                          params=params, solver=solver, bounds=bounds)
        plan.summary["load"] = load_summary(cluster, assignment, targets, model, plan.summary["bytes_moved"],
                                            proof=solver.get("bytes_proof"))
        bounds["bytes_moved"] = plan.summary["load"]["bytes_bound"]
        plan.summary["failover"] = _failover_summary(cluster, assignment, targets, weights, weighted_by)
        if setup.balanced == "load" and req.mode != "leaders":
            _load_status(plan, solver, model,
                         _network_out_proof(cluster, assignment, targets, model, plan, budget.remaining()), budget.work)
    solver["budget"] = budget.to_dict()
    if budget.cut_short:
        _mark_cut_short(plan, solver, budget)
    plan.solver = SolverRecord.from_dict(solver)  # the record, frozen once every step has written its part
    return plan


def _order_for_failover(cluster: Cluster, assignment: dict[Key, tuple[int, ...]], targets: Targets,
                        weights: list[float], solver: dict[str, Any], why: str) -> None:
    """Followers reordered for failover (``failover.order_followers``), in place: a partition the plan did not
    change and whose order alone changes joins the assignment (a change that copies nothing). ``why``: "asked"
    (``failover_order``) or "nothing else to change" (``failover_when_balanced``)."""
    started = time.monotonic()
    parts = cluster.partitions
    final = [assignment.get(p.tp, p.replicas) for p in parts]
    reordered = order_followers(final, sorted(targets.eligible), weights, {b.id: b.rack for b in cluster.brokers})
    for i, reps in reordered.items():
        assignment[parts[i].tp] = reps
    solver["failover"] = {"reordered": len(reordered),  # of them, the partitions the plan changes for this alone:
                          "order_only": sum(1 for i in reordered if final[i] == parts[i].replicas), "why": why,
                          "seconds": round(time.monotonic() - started, 3)}


def _failover_summary(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], targets: Targets,
                      weights: list[float], weighted_by: str) -> dict[str, Any]:
    """plan.json's ``summary.failover``: every single broker's and rack's failure, before the plan and after it
    (``failover.failover_figures``), over the brokers the plan keeps; and ``order_floor``, how far the worst single
    failure after it could be evened by an order of followers alone (``failover.order_floors``)."""
    rack = {b.id: b.rack for b in cluster.brokers}
    alive = sorted(targets.eligible)
    topic_min = cluster.meta.get("topic_min_insync_replicas") or {}
    min_isr = [int(topic_min.get(p.topic, 1)) for p in cluster.partitions]
    before = failover_figures([p.replicas for p in cluster.partitions], alive, rack, weights, weighted_by, min_isr)
    final = [assignment.get(p.tp, p.replicas) for p in cluster.partitions]
    after = failover_figures(final, alive, rack, weights, weighted_by, min_isr)
    return {"weighted_by": weighted_by, "before": before, "after": after,
            "order_floor": order_floors(final, alive, after, weights),
            "min_insync_replicas_known": bool(topic_min)}


def _counts_outside_gate(plan: Plan, model: LoadModel) -> dict[str, list[int]]:
    """Per count ("replicas", "leaders"), the eligible brokers whose count after the plan is outside the count
    gate's band (the validation measure: |count - median| <= max(band x median, 1)); counts with none left out."""
    rows = [b for b in plan.summary["brokers"] if b["eligible"]]
    out: dict[str, list[int]] = {}
    for dim, after in (("replicas", {r["broker"]: r["replicas_after"] for r in rows}),
                       ("leaders", {r["broker"]: r["leaders_after"] for r in rows})):
        if brokers := sorted(b for b, x in counts_excess(after, model.band[dim]).items() if x > 1e-9):
            out[dim] = brokers
    return out


def _through_admin(cluster: Cluster) -> bool:
    """Whether the snapshot was read through the Admin API (kafka://), as the execution then is by default."""
    try:
        return source_scheme(str(cluster.meta.get("source") or "")) == "kafka"
    except InputError:
        return False


@collector_paused()  # millions of long-lived objects: rebalancer.bulk
def plan_run_dir(run_dir: str | Path, mode: str, *, brokers: Iterable[int] | None = None,
                 options: PlanOptions | None = None, **given: Any) -> Plan:
    """Read ``RUN_DIR/snapshot.json``, plan ``mode`` (``brokers``: the new ones, or those to empty) as ``options``
    say (``PlanOptions``; or as an operator gives them, by field name: ``given``, read by
    ``PlanOptions.from_input``), and write plan.json, reassignment.json and rollback.json.

    ``capacity`` (a Cruise Control capacity file), ``fanout`` (topic -> consumer bytes out / bytes in, ``*`` for
    every topic), ``bands`` and ``thresholds`` (dimension -> fraction) shape the load model (``rebalancer.load``),
    with the Spark stage's p95 rates (``analysis/partition_load.parquet``) where the analysis had a load history.
    The time limit starts before the snapshot is read: loading counts against it (it cannot be interrupted). None:
    ``default_time_limit`` of the snapshot's replicas, fixed once it is read. ``throttle``, ``schedule`` ("auto": as
    the snapshot's source resolves it, rolling through kafka://, batches otherwise), ``per_broker``, ``total``: the
    execution the summary's estimate assumes (``summary.execution``: ``rebalancer.movement.estimate``).
    """
    from ..movement.estimate import estimate

    if options is not None and given:
        raise TypeError("plan_run_dir takes options or their fields as keywords, not both")
    opts = options if options is not None else PlanOptions.from_input(given)  # bad text fails before anything is read
    time_limit = opts.time_limit
    if time_limit is not None and not time_limit > 0:
        raise PlanError(f"--time-limit must be positive, not {time_limit}")
    if opts.capacity is not None:
        read_capacity_file(opts.capacity)  # a bad file fails before the snapshot is read
    if Path(run_dir).is_dir():
        check_writable(run_dir)  # a read-only run directory fails now, not after planning
    budget = Budget(time_limit if time_limit is not None else math.inf)
    with budget.phase("load"):
        cluster = load_snapshot(run_dir)
        if time_limit is None:
            budget.set_limit(default_time_limit(cluster.replica_count))
        fan = dict(opts.fanout or {})
        default_fanout = fan.pop("*", 1.0)
        model = load_model(cluster, capacity_file=opts.capacity, fanout=fan, default_fanout=default_fanout,
                           band=opts.bands, threshold=opts.thresholds, history=read_history(run_dir))
    plan = make_plan(cluster, mode, brokers=brokers, budget=budget, load=model, options=opts)
    with collector_paused():  # its steps and batches are many long-lived objects and no cycles (``rebalancer.bulk``)
        plan.summary["execution"] = estimate(plan.changes, opts.throttle,
                                             schedule=resolve_schedule(opts.schedule, _through_admin(cluster)),
                                             per_broker=opts.per_broker, total=opts.total).to_dict()
    write_plan(plan, run_dir)
    return plan
