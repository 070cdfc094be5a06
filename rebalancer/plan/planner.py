"""The plan stage: pick a strategy, place replicas, balance leaders exactly, measure against the bounds.

``make_plan(cluster, mode, ...)`` returns a ``Plan``; ``plan_run_dir`` reads ``RUN_DIR/snapshot.json`` and writes
the plan files. Replica modes run in two steps: placement (``lp`` or ``greedy``), then the exact leader flow over
the new replica sets (leaders change by reordering, never by moving data). ``auto`` picks:

- ``leaders`` mode: ``flow``;
- replica modes: ``lp`` while the model stays small (at most ``LP_AUTO_MAX_REPLICAS`` replicas), else ``greedy``.

Infeasible requests fail in ``make_targets`` before anything is computed or written.

Time limit: ``time_limit`` bounds the whole stage, not just a solver; without one, ``budget.default_time_limit`` (5
minutes, or 1 s per 1,000 replicas when more) lets every cluster the benchmarks cover finish. One ``Budget`` (see ``budget``) runs the
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

import dataclasses
import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..balance import count_excess
from ..bulk import collector_paused
from ..formats import check_writable
from ..load import (
    DIMENSIONS,
    Band,
    LoadModel,
    accepted_range,
    load_bands,
    load_model,
    read_capacity_file,
    read_history,
    replica_table,
)
from ..model import Cluster, Partition
from ..snapshot import load_snapshot
from ..strategies import BALANCES, STRATEGIES, STRATEGY_REGISTRY, strategies_for
from .bounds import BOUND_DEFINITIONS, leader_change_bound, replica_move_bound
from .budget import Budget, Deadline, default_time_limit
from .greedy import GreedyInput, greedy_balance
from .highs import timed_out
from .leader_exact import EXACT_MAX_PARTITIONS, exact_leaders, topic_violation
from .leader_load import LeaderLoadInput, leader_load
from .leaders import LeaderItem, balance_leaders, topic_bands
from .load_greedy import GreedyStats, load_greedy
from .load_problem import COUNT_MARGIN, LoadInput, count_gate_band, evaluate, load_input, median_safe_band
from .load_summary import bytes_bound, load_summary
from .lp import lp_balance
from .lp_load import COUNTS, lp_load
from .neighbourhoods import TRIM_ENOUGH, repair_neighbourhoods
from .pinterest import pinterest_leaders
from .result import Plan, build_plan, write_plan
from .split import GROUP_REPLICAS, MIN_GROUP_REPLICAS_PER_BROKER, SplitStats, split_greedy
from .sum_proofs import explain_network_out, fewest_leaders, network_out_proof, one_way, sum_proof
from .targets import PlanError, Targets, make_targets

__all__ = ["STRATEGIES", "BALANCES", "LP_AUTO_MAX_REPLICAS", "make_plan", "plan_run_dir", "choose_strategy",
           "choose_balance"]


LP_AUTO_MAX_REPLICAS = 20_000
Key = tuple[str, int]

# Shares of the time left when a phase starts (after the summary's reserve). Placement comes first: replica balance
# is what a replica mode is for, and leaders can be rebalanced later without moving data (--mode leaders).
GREEDY_SHARE = 0.6            # greedy is the placement; the leader flow gets the rest
GREEDY_BEFORE_LP_SHARE = 0.2  # greedy is only the program's warm start and fallback
LP_SHARE = 0.75               # of what greedy left; the leader flow gets the rest
LEADERS_SHARE = 1.0           # the last phase that can stop takes all that is left
SUMMARY_RESERVE = 0.1         # of the limit, kept for building the summary (which cannot be interrupted)
LP_NODE_LIMIT = 500          # the load programs' branch-and-bound nodes: work, so a plan is the same on any machine
# The exact program's steps, in turn: (load bands widened this many times, a one-way broker judged as the gates judge it)
# the bytes bound's source when the exact program proved a tighter one: no placement within the bands, the change
# cap, racks and thresholds copies less (its dual bound counts whole partitions; the sum over brokers splits them)
BYTES_PROOF_BY = "the exact program's dual bound"
BYTES_PROOF_BY_RELAXATION = "the exact program's linear relaxation"
BAND_STEPS = ((1.0, False), (1.0, True), (1.5, True), (2.0, True), (3.0, True), (5.0, True), (10.0, True))
LP_EXACT_MAX_REPLICAS = 600  # the exact program's size: its root alone took a minute on 1,167 replicas x 25 brokers
RELAX_MAX_REPLICAS = 10_000  # auto's linear relaxation (a proof, a bound) up to this size: 20 s at 6,924 (78k
#                               variables), over 7 minutes at 23k replicas
LP_SAFETY_SECONDS = 60.0      # auto's programs: a wall-clock safety net only (lp: its whole share), said when it cuts
LEADER_FLOW_SHARE = 0.8       # on load, of the leaders' time: the rest is for the network-out hand-overs
LEADER_FLOW_MAX_PARTITIONS = 100_000  # on load, above this the hand-overs balance leader counts too (the flow: minutes)
LEADERS_RESERVE = 0.1         # of the limit, kept for the leader passes after the load program
SPLIT_MIN_REPLICAS = 5_000_000  # on load, from this many replicas the placement is split in groups run as Spark tasks
#                                 (one pass places 3M replicas in 24 s and 1.3 GB here, nearer the bytes bound)
SPLIT_MASTER = "local[*]"     # their Spark master when --master is not given


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
    if strategy not in STRATEGIES:
        raise PlanError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
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


def _leader_items(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], eligible: frozenset[int],
                  replicas_moved: bool) -> list[LeaderItem]:
    may_lead = {b.id for b in cluster.brokers if b.alive and b.id in eligible}
    everyone = len(may_lead) == len(cluster.brokers)  # then a partition in sync, as it is, may be led by any replica
    items: list[LeaderItem] = []
    append = items.append
    for p in cluster.partitions:
        tp = (p.topic, p.partition)
        replicas = p.replicas
        reps = assignment.get(tp, replicas)
        if reps is replicas or reps == replicas:
            cands = replicas if everyone and p.isr == replicas else tuple(b for b in reps if b in may_lead and b in p.isr)
        elif replicas_moved:
            # New replicas will be in sync once their move completes.
            cands = tuple(b for b in reps if b in may_lead and (b in p.isr or b not in replicas))
        else:
            cands = tuple(b for b in reps if b in may_lead and b in p.isr)
        append(LeaderItem(tp, cands, replicas[0]))
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
    """Each of ``leaders``' partitions led by its new leader in ``assignment`` (the leader first, the others in
    their order); only those partitions are visited (a few thousand of a million on load)."""
    for tp, new in leaders.items():
        if not cluster.has_partition(*tp):
            continue
        reps = assignment.get(tp) or cluster.partition(*tp).replicas
        if new is None or new == reps[0]:
            continue
        assignment[tp] = (new, *(b for b in reps if b != new))


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


def split_plan(replicas: int, brokers: int, groups: int | None, master: str | None) -> tuple[int, str | None]:
    """(groups, Spark master) of a load placement: ``groups`` as given (1: one pass), else one pass below
    ``SPLIT_MIN_REPLICAS`` replicas and from there a group per ``GROUP_REPLICAS``, each with at least
    ``split.MIN_GROUP_REPLICAS_PER_BROKER`` replicas per broker (thinner groups cannot meet their bands); the groups
    run in process without a master, on ``master`` when given, on ``SPLIT_MASTER`` when the size chose the split."""
    if groups is None:
        if replicas < SPLIT_MIN_REPLICAS and master is None:
            return 1, None
        k = min(math.ceil(replicas / GROUP_REPLICAS), replicas // (MIN_GROUP_REPLICAS_PER_BROKER * max(1, brokers)))
        return max(2, k), master or (SPLIT_MASTER if replicas >= SPLIT_MIN_REPLICAS else None)
    return groups, (master if groups > 1 else None)


def _place_on_load(req: PlanRequest, setup: PlanSetup, budget: Budget,
                   reserve: float) -> tuple[dict[Key, tuple[int, ...]], str]:
    """Replica placement on load: ``load_greedy`` (split in groups run as Spark tasks on a large cluster:
    ``split_plan``), then the program (``lp_load``, warm-started from it) when ``lp`` was chosen, or under ``auto``
    when greedy left a broker outside a band of a cluster small enough for the program. The better placement (fewer
    units outside the bands, then fewer bytes) is kept. Returns the changed partitions' new replicas and the
    strategy that made them."""
    cluster, model, targets, solver = req.cluster, req.model, setup.targets, setup.solver
    chosen, requested, write_lp = setup.strategy, req.strategy, req.write_lp
    run_lp = chosen == "lp"
    groups, master = split_plan(cluster.replica_count, len(cluster.brokers), req.groups, req.master)
    with budget.phase("greedy", GREEDY_BEFORE_LP_SHARE if run_lp else GREEDY_SHARE, reserve) as deadline:
        problem = load_input(cluster, model, targets, setup.max_changes)
        stats: GreedyStats | SplitStats
        if groups > 1:
            by_index, stats = _split_on(problem, deadline, groups, master)
        else:
            by_index, stats = load_greedy(problem, deadline)
    solver["greedy"] = {"algorithm": "load greedy: disk, network in, then counts, each within its band; fewest bytes"
                        + (f"; {groups} groups of topics planned apart{f' as Spark tasks ({master})' if master else ''}"
                           ", merged and repaired" if groups > 1 else ""),
                        "dimensions": list(problem.bands), **stats, "seconds": round(budget.phases["greedy"].seconds, 3)}
    used = "greedy"
    # a sum that proves the disk bands out of reach at any size (``sum_proofs``): only where greedy fell short
    by_sum = sum_proof(problem) if stats["outside_bands"] else None
    exact_size = cluster.replica_count <= LP_EXACT_MAX_REPLICAS
    if not run_lp and requested == "auto" and not exact_size and by_sum is None and budget.remaining() > 0:
        # too large for the whole program: the program a neighbourhood at a time around the brokers greedy left out,
        # then around those that receive most, for fewer bytes
        bound = bytes_bound(cluster, model, targets)
        by_index, hood = _neighbourhoods(problem, by_index, budget, reserve, bound,
                                         solver, "the load program on the worst broker and its complements, in "
                                                 "turn; then on the brokers receiving most, for fewer bytes")
        stats["outside_bands"] = hood["outside_bands"]
        if cluster.replica_count <= RELAX_MAX_REPLICAS and budget.remaining() > 0 and (
                hood["outside_bands"] or evaluate(problem, by_index, gates=True)[1] > TRIM_ENOUGH * bound):
            _relaxation_proof(problem, solver, budget, reserve)
    # auto: the exact program only where greedy left a broker outside a band the gates measure (greedy aims inside
    # them), on a cluster small enough for it: above, the weighted program's nodes take minutes, and a clock would
    # make the plan depend on how busy the machine is (``--strategy lp`` runs it against the time limit)
    # A count inside greedy's band around the average may still fail its gate, which measures from the median
    # (fuzz small seed 135: 16 replicas against a median of 13.5): that sends a small cluster to the program too.
    counts_fail = exact_size and _gate_key(problem, by_index, req.model.band["replicas"])[0] > 0
    if (not run_lp and requested == "auto" and exact_size and (counts_fail or (
            stats["outside_bands"] and evaluate(problem, by_index, gates=True)[0] > 0))):
        run_lp = True
        solver["strategy_reason"] += (f"; greedy left broker(s) {stats['outside_bands'][:8]} outside a band: the program"
                                      if stats["outside_bands"] else
                                      "; greedy left replica counts outside their gate (from the median): the program")
    if run_lp and budget.remaining() > 0:
        # The leader passes come after the program: keep them their time whatever the program takes.
        with budget.phase("lp", LP_SHARE, reserve + LEADERS_RESERVE * budget.limit) as deadline:
            def clock() -> float:
                """One program's wall clock: under auto its node limit decides and this is only the safety net (each
                program its own: a net shared along the ladder cut the next step at whatever a busy machine had left
                of it, and the plan then depended on the load: fuzz small seeds 111, 167); ``lp``: the phase's time."""
                return deadline.remaining() if chosen == "lp" else min(LP_SAFETY_SECONDS, deadline.remaining())

            # First the gates' bands as constraints and the fewest bytes: a solution meets every band (and says how
            # near the fewest bytes it is); "Infeasible" proves that no placement does.
            exact: dict[int, tuple[int, ...]] | None = None
            hstats: dict[str, Any] = {}
            steps: list[dict[str, Any]] = []
            proven = by_sum is not None
            for widen, lenient in BAND_STEPS if exact_size else ():
                # Strictly inside every band first; then as the gates judge a broker the mode lets move one way only;
                # then, where even that is proven impossible (by these programs, or at once by a sum: skipped), the
                # load bands widened step by step: the first placement found meets the counts' gates and the
                # narrowest load band the ladder proves reachable.
                if proven and widen == 1.0:
                    continue
                if deadline.expired():
                    break
                exact, hstats = lp_load(problem, clock(), write_lp=write_lp if not steps else None, hard=True,
                                        widen=widen, lenient=lenient, node_limit=LP_NODE_LIMIT)
                steps.append({"widen": widen, "one_way_no_worse": lenient, "status": hstats["status"],
                              "seconds": round(hstats["seconds"] + hstats.get("build_seconds", 0.0), 3),
                              **({"bytes_lower_bound": hstats["bytes_lower_bound"]}
                                 if "bytes_lower_bound" in hstats else {})})
                deadline.cut_short |= timed_out(hstats)
                if exact is not None or "infeasible" not in str(hstats["status"]).lower():
                    break
            if exact_size and steps:
                solver["bands_proof"] = _bands_proof(steps, exact is not None, by_sum=proven)
            if (least := max((st.get("bytes_lower_bound", 0) for st in steps), default=0)) > 0:
                solver["bytes_proof"] = {"bytes": least, "by": BYTES_PROOF_BY}
            changed, lstats = exact, hstats
            if exact is None and not deadline.expired():
                # No step settled within its nodes: the weighted program, which brings the brokers as near their
                # bands as it can (the priorities' order), then the fewest bytes.
                changed, lstats = lp_load(problem, clock(), warm_start=by_index, node_limit=LP_NODE_LIMIT)
                deadline.cut_short |= timed_out(lstats)
        solver["lp"] = lstats
        solver["gap"] = lstats.get("gap")
        if changed is not None and _gate_key(problem, changed, req.model.band["replicas"]) <= _gate_key(
                problem, by_index, req.model.band["replicas"]):
            by_index, used = changed, "lp"
        else:
            solver["placement_used"] = "greedy"
        gap = lstats.get("gap")
        if (used == "lp" and requested == "auto" and isinstance(gap, float) and gap > TRIM_ENOUGH - 1
                and budget.remaining() > 0):
            # The program stopped at its node limit far from its bound (fuzz small seed 75: a placement meeting every
            # band at 1.86x the bytes bound, gap 46 %): the neighbourhoods' bytes trimming, balance kept.
            by_index, _ = _neighbourhoods(problem, by_index, budget, reserve,
                                          max(bytes_bound(cluster, model, targets),
                                              int(lstats.get("bytes_lower_bound") or 0)),
                                          solver, "the load program on the brokers receiving most, for fewer bytes "
                                                  "(the exact program stopped short of its bound)")
    if budget.remaining() > 0 and _counts_outside_gate_of(problem, by_index, req.model.band["replicas"]) > 0:
        with budget.phase("count_repair", LP_SHARE, reserve + LEADERS_RESERVE * budget.limit) as deadline:
            by_index = _count_repair(problem, by_index, req.model.band["replicas"], deadline, solver)
    if stats["outside_bands"]:
        _prove_by_sums(problem, solver, by_sum)
    parts = cluster.partitions
    return {parts[i].tp: reps for i, reps in by_index.items()}, used


def _count_repair(problem: LoadInput, placed: dict[int, tuple[int, ...]], count_band: float, deadline: Deadline,
                  solver: dict[str, Any]) -> dict[int, tuple[int, ...]]:
    """Replica counts the gate fails, repaired: the gate measures from the median, and counts the planner held to its
    band around the average can split at the band's edges (fuzz small seed 37: 9 brokers at 45 and 9 at 57 around
    51, median 49, and 57 is 16.3 % above it). Only then, ``load_greedy`` goes on from the placement with the counts
    held to the band any counts inside of pass the gate (``median_safe_band``), the load bands as they were; kept
    when every count then passes its gate and the loads stand no further outside the gates' bands (``_gate_key``).
    Recorded as ``solver["count_repair"]``."""
    safe = (problem.safe_bands or {}).get("replicas")
    before = _gate_key(problem, placed, count_band)
    if not safe or "replicas" not in problem.bands or before[0] <= 0:
        return placed
    narrow = {b: Band(max(m.floor, safe[b].floor), min(m.ceil, safe[b].ceil), m.average)
              if b in safe and max(m.floor, safe[b].floor) <= min(m.ceil, safe[b].ceil) else m
              for b, m in problem.bands["replicas"].items()}
    start = [placed.get(i, reps) for i, reps in enumerate(problem.replicas)]
    changed, stats = load_greedy(dataclasses.replace(problem, replicas=start, origin=problem.replicas,
                                                     bands={**problem.bands, "replicas": narrow}), deadline)
    repaired = {i: reps for i, reps in ((i, changed.get(i, r)) for i, r in enumerate(start))
                if reps != tuple(problem.replicas[i])}
    after = _gate_key(problem, repaired, count_band)
    # only a repair: every count inside its gate, the loads no further outside theirs (a partial one traded 1.5x the
    # bytes for a count or two on a cluster proven out of reach: fuzz small seed 70)
    kept = after[0] == 0 and after[1] <= before[1]
    solver["count_repair"] = {"algorithm": "load greedy from the placement, counts held to the band that passes "
                                           "their gate from any median", "moves": stats["moves"],
                              "kept": kept, "counts_outside_before": before[0], "counts_outside_after": after[0]}
    return repaired if kept else placed


def _neighbourhoods(problem: LoadInput, placed: dict[int, tuple[int, ...]], budget: Budget, reserve: float,
                    bound: int, solver: dict[str, Any], algorithm: str
                    ) -> tuple[dict[int, tuple[int, ...]], dict[str, Any]]:
    """The neighbourhood phase (``repair_neighbourhoods``) on ``placed``, trimming bytes down to ``TRIM_ENOUGH`` x
    ``bound``; its stats recorded as ``solver["neighbourhoods"]``."""
    with budget.phase("neighbourhoods", LP_SHARE, reserve + LEADERS_RESERVE * budget.limit) as deadline:
        placed, hood = repair_neighbourhoods(problem, placed, deadline, node_limit=LP_NODE_LIMIT,
                                             bytes_enough=TRIM_ENOUGH * bound)
        deadline.cut_short |= bool(hood["cut_short"])  # a program stopped by its safety net, not its nodes: said
    solver["neighbourhoods"] = {"algorithm": algorithm, **hood}
    return placed, dict(hood)


def _relaxation_proof(problem: LoadInput, solver: dict[str, Any], budget: Budget, reserve: float) -> None:
    """Above the exact program's size, where the neighbourhoods left a broker outside a band or the plan copies
    more than ``TRIM_ENOUGH`` x the sum's bound: the linear relaxation of the exact program on the load bands (as
    the gates judge one-way brokers; counts aside, whose median-safe bands are stricter than their gate). Infeasible:
    no placement meets every load band (``bands_proof``, fuzz small seed 5: network in, proven in 3 s). Else its
    optimum bounds the bytes of any plan that meets them (``bytes_proof``, where tighter than the sum's)."""
    loads = dataclasses.replace(problem, bands={d: b for d, b in problem.bands.items() if d not in COUNTS},
                                gate_bands={d: b for d, b in (problem.gate_bands or problem.bands).items()
                                            if d not in COUNTS})
    with budget.phase("relaxation", LP_SHARE, reserve + LEADERS_RESERVE * budget.limit) as deadline:
        _, stats = lp_load(loads, min(LP_SAFETY_SECONDS, deadline.remaining()), hard=True, lenient=True, relax=True)
        deadline.cut_short |= timed_out(stats)
    step = {"widen": 1.0, "one_way_no_worse": True, "relaxed": True, "status": stats["status"],
            "seconds": round(stats["seconds"] + stats.get("build_seconds", 0.0), 3)}
    solver["relaxation"] = step
    if "infeasible" in str(stats["status"]).lower():
        solver["bands_proof"] = {"feasible": False, "by_relaxation": True, "steps": [step], "reachable_widen": None}
    elif stats.get("bytes_lower_bound"):
        solver["bytes_proof"] = {"bytes": stats["bytes_lower_bound"], "by": BYTES_PROOF_BY_RELAXATION}


def _prove_by_sums(problem: LoadInput, solver: dict[str, Any], found: dict[str, Any] | None) -> None:
    """``found``, a sum of ``sum_proofs``, proves the disk bands out of reach at any size (a replica too large, the
    mode lets brokers only give or only take, or racks pin the bytes): ``bands_proof`` then says infeasible and
    names the binding brokers (``by_sum``); ``one_way`` lists the brokers no placement brings inside their band. A
    placement the program found meeting the bands would contradict a sum: the program's word stands, the sum is kept
    beside it."""
    stuck = one_way(problem)
    proof = solver.get("bands_proof") or {"feasible": None, "steps": []}
    if stuck:  # no placement meets every band strictly
        proof = {**proof, "one_way": stuck, **({"strict": False} if proof.get("feasible") else {})}
    if found is not None:
        proof = {**proof, "sum_disagrees": found} if proof.get("feasible") is True else {
            **proof, "feasible": False, "by_sum": found}
    if stuck or found is not None:
        solver["bands_proof"] = proof


def _gate_key(problem: LoadInput, placement: Mapping[int, tuple[int, ...]],
              count_band: float) -> tuple[float, float, float]:
    """How a placement stands against the gates, to compare two: (replica counts outside their gate, the load
    outside the gates' bands weighted by priority, bytes moved). The counts come first as in the program
    (``lp_load.GATE_WEIGHT``): the Wix gate is the one a plan may not trade away for disk."""
    load, moved = evaluate(problem, placement, gates=True)
    return round(_counts_outside_gate_of(problem, placement, count_band), 9), round(load, 9), moved


def _counts_outside_gate_of(problem: LoadInput, placement: Mapping[int, tuple[int, ...]], count_band: float) -> float:
    """How far the placement's replica counts lie outside their gate, summed, as the gate measures them
    (``rebalancer.validate``: from the median, max(band x median, 1) allowed); 0 without a count dimension. The
    counts before planning in columns (numpy), then the changed partitions: cheap at millions of replicas."""
    import numpy as np

    from ..load import replica_columns

    band = (problem.gate_bands or {}).get("replicas")
    if not band or "replicas" not in problem.units:
        return 0.0
    units = problem.units["replicas"]
    part, flat, _ = replica_columns(problem.replicas)
    ids = np.asarray(sorted(set(flat.tolist()) | set(band)), dtype=np.int64)
    held = np.bincount(np.searchsorted(ids, flat), weights=np.asarray(units, dtype=float)[part], minlength=len(ids))
    count = dict(zip(ids.tolist(), held.tolist(), strict=True))
    for i, reps in placement.items():
        for b in problem.replicas[i]:
            count[b] -= units[i]
        for b in reps:
            count[b] = count.get(b, 0.0) + units[i]
    return sum(_count_gate_excess({b: count[b] for b in band}, count_band).values())


def _bands_proof(steps: Sequence[Mapping[str, Any]], found: bool, by_sum: bool = False) -> dict[str, Any]:
    """What the exact programs (``BAND_STEPS``: the gates' bands as constraints, then the load bands widened)
    established: ``feasible`` True (a placement meets every band as the gates judge it; ``strict``: with no one-way
    broker left further outside than it started), False (HiGHS proved that none does; then ``reachable_widen``: the
    narrowest widening a placement was found for, None when none), or None (not settled within the nodes); ``steps``:
    each program's widening, status and seconds. ``by_sum``: a sum proved the bands out of reach (``sum_proofs``),
    and the ladder started at the first widening."""
    gate_steps = [st for st in steps if st["widen"] == 1.0]
    last = steps[-1] if steps else None
    if found and last is not None and last["widen"] == 1.0:
        feasible: bool | None = True
    elif by_sum or gate_steps and all("infeasible" in str(st["status"]).lower() for st in gate_steps) and (
            len(gate_steps) == sum(1 for w, _ in BAND_STEPS if w == 1.0)):
        feasible = False
    else:
        feasible = None
    out: dict[str, Any] = {"feasible": feasible, "steps": list(steps)}
    if feasible:
        out["strict"] = last is not None and not last["one_way_no_worse"]
    if feasible is False:
        out["reachable_widen"] = last["widen"] if found and last is not None else None
    return out


def _split_on(problem: LoadInput, deadline: Deadline, groups: int,
              master: str | None) -> tuple[dict[int, tuple[int, ...]], SplitStats]:
    if master is None:
        return split_greedy(problem, deadline, groups=groups)
    from .spark_tasks import spark_map

    with spark_map(master) as on_spark:
        return split_greedy(problem, deadline, groups=groups, map_fn=on_spark)


def _leaders_on_load(cluster: Cluster, assignment: dict[Key, tuple[int, ...]], targets: Targets, model: LoadModel,
                     deadline: Deadline, counts_too: bool = False) -> dict[str, Any]:
    """Leadership moved (``leader_load``) until network out is within its band, leader counts kept in theirs.
    ``counts_too`` (no leader flow ran before): leader counts are a dimension too (below network out), brought
    within two thirds of their band while never leaving five sixths of it."""
    started = time.monotonic()
    items = _leader_items(cluster, assignment, targets.eligible, replicas_moved=True)
    parts = cluster.partitions
    current = [assignment.get(p.tp, p.replicas)[0] for p in parts]
    cands = [it.candidates if current[i] in it.candidates else (current[i],) for i, it in enumerate(items)]
    # the leader's network out per partition (Dimension.replica, vectorised by the table)
    units = {"nw_out": replica_table(cluster, model.loads, dimensions=["nw_out"]).per_partition["nw_out"][0]
             .astype(float).tolist()}
    weight = {"nw_out": DIMENSIONS["nw_out"].priority}
    bands = {}
    accepted = {}
    if any(units["nw_out"]):
        bands["nw_out"] = model.bands("nw_out", int(sum(units["nw_out"])), targets.eligible)
        accepted["nw_out"] = _accepted(parts, units["nw_out"], bands["nw_out"], model.band["nw_out"])
    elif not counts_too:
        return {"moves": 0, "skipped": "no partition has a known bytes-in rate"}
    if counts_too:
        units["leaders"] = [1.0] * len(parts)
        bands["leaders"] = load_bands("leaders", len(parts), targets.eligible, band=model.band["leaders"] * COUNT_MARGIN)
        weight["leaders"] = DIMENSIONS["leaders"].priority
    # After the flow, no hand-over takes a leader count out of a band any counts inside of pass the leader gate, which
    # measures from the median after the plan (``median_safe_band``): one around the mean let six brokers end at 21
    # leaders and nine at 27, a median of 25 and six brokers failing the gate. Without the flow (``counts_too``) the
    # counts are a dimension pulled to the mean, and the narrower median-safe band left 14 of 300 brokers outside
    # the network-out band instead of 1 (600k replicas): there the band around the mean stays.
    if counts_too:
        counts = load_bands("leaders", len(parts), targets.eligible,
                            band=model.band["leaders"] * (1 + COUNT_MARGIN) / 2)
    else:
        counts = median_safe_band(len(parts), targets.eligible, model.band["leaders"])
    tbands = topic_bands(items)
    topic_band = {t: b for t, (b, _) in tbands.items()}
    usable = [it for it in items if it.candidates]
    # the bound counts from the leaders before the plan; the items and the topics' broker sets (~300 MB at 3M
    # replicas) are let go before the pass
    bound = leader_change_bound(usable, tbands if len(usable) == len(items) else None) if counts_too else None
    stranded = len(items) - len(usable)
    del tbands, items, usable
    topics = [p.topic for p in parts]
    inp = LeaderLoadInput(current, cands, units, bands, weight, count_band=counts, topics=topics,
                          topic_band=topic_band, accepted=accepted)
    handing = inp
    if not counts_too:
        # A count the flow left outside the median-safe band (it balances counts around the average, per topic
        # group where it is not solved whole) is a dimension the hand-overs bring inside, weighed as the gate it is
        # (its accepted range is the band): only "no further out" let the hand-overs fill the band's top, so the
        # median rose past a broker the flow had left 10 below the average (fuzz medium 11: 75 leaders against a
        # median of 89, outside the leader gate).
        handing = dataclasses.replace(
            inp, units={**units, "leaders": [1.0] * len(parts)}, bands={**bands, "leaders": counts},
            weight={**weight, "leaders": DIMENSIONS["leaders"].priority},
            accepted={**accepted, "leaders": {b: (float(x.floor), float(x.ceil)) for b, x in counts.items()}})
    changed, stats = leader_load(handing, deadline)
    if len(parts) <= EXACT_MAX_PARTITIONS and not deadline.cut_short:
        # Small enough for every leader at once (leader_exact): used where it scores better than the hand-overs.
        handed = list(current)
        for i, b in changed.items():
            handed[i] = b
        # Leader counts within the gate's band around the average; where the result fails the gate, which measures
        # from the median, again within a band any counts inside of pass it (``median_safe_band``).
        original = [p.replicas[0] for p in parts]
        exact: dict[int, int] | None = None
        exact_stats: dict[str, Any] = {}
        for count_band in (count_gate_band(len(parts), targets.eligible, model.band["leaders"]),
                           median_safe_band(len(parts), targets.eligible, model.band["leaders"])):
            exact, exact_stats = exact_leaders(dataclasses.replace(inp, leader=handed, count_band=count_band),
                                               original, seconds=deadline.remaining())
            chosen = [exact.get(i, b) for i, b in enumerate(handed)] if exact is not None else handed
            if _count_gate_met(chosen, targets.eligible, model.band["leaders"]):
                break
        stats["exact"] = exact_stats
        if exact_stats.get("cut_by_safety_net"):
            deadline.cut_short = True
        if exact is not None:
            for i, b in exact.items():
                handed[i] = b
            changed = {i: b for i, b in enumerate(handed) if b != current[i]}
            stats["topic_band_violation_after"] = topic_violation(handed, topics, cands, topic_band)
    _apply_leaders(assignment, cluster, {parts[i].tp: b for i, b in changed.items()})
    info = {**stats, "seconds": round(time.monotonic() - started, 3)}
    if counts_too:
        info = {"algorithm": "load hand-overs: network out, then leader counts (no exact flow above "
                             f"{LEADER_FLOW_MAX_PARTITIONS} partitions)", **info,
                "cut_short": deadline.cut_short or bool(stats.get("cut_short")),
                "partitions_without_eligible_leader": stranded,
                "leader_bound": bound}
    return info


def _count_gate_excess(counts: Mapping[int, float], band: float) -> dict[int, float]:
    """Per broker, how far its count lies beyond what the count gates accept (``rebalancer.validate``: within
    max(band x median, 1) of the median); 0 inside."""
    if not counts:
        return {}
    med = statistics.median(counts.values())
    return {b: count_excess(n, med, band) for b, n in counts.items()}


def _count_gate_met(leaders: Sequence[int], eligible: Iterable[int], band: float) -> bool:
    """Do these leaders pass the leader gate?"""
    count = dict.fromkeys(eligible, 0)
    for b in leaders:
        if b in count:
            count[b] += 1
    return all(x <= 1e-9 for x in _count_gate_excess(count, band).values())


def _accepted(parts: Sequence[Partition], units: Sequence[float], bands: Mapping[int, Band],
              band: float) -> dict[int, tuple[float, float]]:
    """Per eligible broker, what the network gate accepts (``accepted_range``): its band widened by the busiest
    partition it led before the plan (the gate takes the busiest before or after: this range lies inside the gate's),
    or no further from its target than it was before the plan."""
    before: dict[int, float] = {}
    busiest: dict[int, float] = {}
    for p, u in zip(parts, units, strict=True):
        if p.replicas:
            b = p.replicas[0]
            before[b] = before.get(b, 0.0) + u
            busiest[b] = max(busiest.get(b, 0.0), u)
    return {b: accepted_range(x.average, band, before.get(b, 0.0), busiest.get(b, 0.0), not_worse=True)
            for b, x in bands.items()}


def _network_out_proof(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], targets: Targets,
                       model: LoadModel, plan: Plan) -> dict[str, Any] | None:
    """Where a broker ends outside the network-out band: a partition whose network out proves the band out of reach
    for whichever broker leads it, given the fewest leaders the leader gate lets a broker keep
    (``sum_proofs.network_out_proof``). Only where every partition's replicas are eligible brokers after the plan
    (then the eligible brokers' leader counts sum to the partitions)."""
    nw_out = plan.summary["load"]["dimensions"].get("nw_out") or {}
    if not nw_out.get("outside_after"):
        return None
    parts = cluster.partitions
    if any(b not in targets.eligible for p in parts for b in assignment.get(p.tp, p.replicas)):
        return None
    units = replica_table(cluster, model.loads, dimensions=["nw_out"]).per_partition["nw_out"][0].astype(float).tolist()
    bands = model.bands("nw_out", int(sum(units)), targets.eligible)
    fewest = fewest_leaders(len(parts), len(targets.eligible), model.band["leaders"])
    return network_out_proof(units, bands, fewest, names=[p.name for p in parts])


def _load_status(plan: Plan, model: LoadModel, nw_out_proof: Mapping[str, Any] | None = None) -> None:
    """A load plan is Balanced when every broker ends inside every band of the summary and every count passes its
    gate (which measures from the median after the plan: a count inside its band around the average may not);
    otherwise it says which brokers stay outside which band, and why (``nw_out_proof``: network out's band proved
    out of reach, ``_network_out_proof``)."""
    outside = {name: d["outside_after"] for name, d in plan.summary["load"]["dimensions"].items()
               if d.get("outside_after")}
    for dim, brokers in _counts_outside_gate(plan, model).items():
        outside[dim] = sorted(set(outside.get(dim, [])) | set(brokers))
    if not outside:
        plan.solver["status"] = "Balanced"
        return
    plan.solver["status"] = "Heuristic"
    plan.solver["outside_bands"] = outside
    why = []
    if set(outside) - ({"nw_out"} if nw_out_proof else set()):
        why.append("no further move keeps every partition's racks, the change cap and the capacity thresholds while "
                   "bringing these brokers closer without pushing another broker out of a band of the same or higher "
                   "priority (the band may be narrower than the partition sizes allow: widen it with --band, or allow "
                   "more changes)")
    if nw_out_proof:
        plan.solver["network_out_proof"] = dict(nw_out_proof)
        why.append(explain_network_out(nw_out_proof))
    plan.solver["outside_why"] = "; ".join(why)


@dataclass(frozen=True)
class PlanRequest:
    """What was asked, checked (the pipeline's input): the cluster and its load model, the mode and its options."""

    cluster: Cluster
    mode: str
    brokers: tuple[int, ...]
    strategy: str             # as requested (``auto`` included)
    balance: str              # as requested
    objective: str
    max_changes_per_partition: int | None  # as given (None: the mode's default, ``PlanSetup.max_changes``)
    model: LoadModel
    write_lp: str | None
    limit_given: bool
    groups: int | None = None  # load placement split in this many groups (None: ``split_plan``'s choice)
    master: str | None = None  # Spark master running the groups (None: in process, or SPLIT_MASTER when large)


@dataclass
class PlanSetup:
    """The targets step's result: bands, the balance and strategy chosen, the lower bounds known before placement,
    and the solver record the later steps add to."""

    targets: Targets
    balanced: str             # load or counts
    strategy: str             # chosen
    max_changes: int | None
    dead_replicas: int
    solver: dict[str, Any]
    bounds: dict[str, Any]


@dataclass
class Placement:
    """The placement step's result: the new replicas of the partitions it changed, and the strategy that made them;
    the leaders step reorders them in place."""

    assignment: dict[Key, tuple[int, ...]]
    strategy: str


def make_plan(
    cluster: Cluster,
    mode: str,
    *,
    brokers: Iterable[int] | None = None,
    strategy: str = "auto",
    max_changes_per_partition: int | None = None,
    time_limit: float | None = None,
    objective: str = "replicas",
    write_lp: str | None = None,
    budget: Budget | None = None,
    load: LoadModel | None = None,
    balance: str = "auto",
    groups: int | None = None,
    master: str | None = None,
) -> Plan:
    """Plan ``mode`` for ``cluster`` within ``time_limit`` seconds (see the module doc; None: ``default_time_limit``
    of the cluster's replicas, generous enough that no cluster the benchmarks cover is cut short).

    The stage is a pipeline, each step once: request (checked inputs) -> setup (targets, choices, bounds; phase
    ``targets``) -> placement (``greedy``, ``lp``) -> leaders (``leaders``, ``leaders_load``) -> result
    (``summary``). ``budget``: the stage's budget when the caller started it earlier (``plan_run_dir`` starts it before
    loading the snapshot); its limit must be ``time_limit`` when one is given. ``load``: the cluster's load model
    (``rebalancer.load``; built from the snapshot alone when not given): the summary reports every dimension's bands
    before and after, and bytes moved against their bound. ``balance``: what a replica mode balances
    (``choose_balance``): ``load`` places replicas by ``load_greedy`` (disk, network in, counts, the fewest bytes),
    ``counts`` by replica counts alone. ``groups`` / ``master``: the load placement split in groups of topics
    planned as Spark tasks (``split_plan``; by default from ``SPLIT_MIN_REPLICAS`` replicas, on ``SPLIT_MASTER``).
    """
    if time_limit is not None and not time_limit > 0:
        raise PlanError(f"--time-limit must be positive, not {time_limit}")
    if budget is None:
        budget = Budget(time_limit if time_limit is not None else default_time_limit(cluster.replica_count))
    elif time_limit is not None and budget.limit != time_limit:
        raise ValueError(f"time_limit {time_limit} differs from the budget's limit {budget.limit}")
    started = time.monotonic()
    if groups is not None and groups < 1:
        raise PlanError(f"--groups must be at least 1, not {groups}")
    request = PlanRequest(cluster, mode, tuple(sorted(int(b) for b in (brokers or ()))), strategy, balance, objective,
                          max_changes_per_partition, load if load is not None else load_model(cluster), write_lp,
                          limit_given=time_limit is not None, groups=groups, master=master)
    with budget.phase("targets"):
        setup = _setup(request, brokers)
    if budget.remaining() == 0.0:
        raise _out_of_time(budget, "before any change was planned")
    reserve = SUMMARY_RESERVE * budget.limit
    placement = _placement(request, setup, budget, reserve)
    _leaders(request, setup, placement, budget, reserve)
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


def _placement(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Where the replicas go: nowhere new in leaders mode; by load (``_place_on_load``) or by counts
    (``_place_on_counts``) in the replica modes."""
    if req.mode == "leaders":
        return Placement({}, setup.strategy)
    if setup.balanced == "load":
        assignment, used = _place_on_load(req, setup, budget, reserve)
        return Placement(assignment, used)
    return Placement(_place_on_counts(req, setup, budget, reserve), setup.strategy)


def _place_on_counts(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> dict[Key, tuple[int, ...]]:
    """Replica placement on counts: Wix's greedy, then (strategy ``lp``) the Sqooba program warm-started from it; the
    better valid placement is kept (a program cut short or decomposed can end above greedy)."""
    cluster, targets, solver, objective = req.cluster, setup.targets, setup.solver, req.objective
    replicas = {p.tp: p.replicas for p in cluster.partitions}
    sizes = {p.tp: p.size_bytes for p in cluster.partitions}
    rack = {b.id: b.rack for b in cluster.brokers}
    with budget.phase("greedy", GREEDY_SHARE if setup.strategy == "greedy" else GREEDY_BEFORE_LP_SHARE,
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
    if setup.strategy == "greedy":
        solver["status"] = "Heuristic" if gstats["unmet_excess"] or gstats["unmet_deficit"] else "Balanced"
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
        solver["placement_used"] = "greedy"
        return dict(greedy_changed)
    return dict(changed)


def _leaders(req: PlanRequest, setup: PlanSetup, placement: Placement, budget: Budget, reserve: float) -> None:
    """Who leads, over the placed replica sets (reorders ``placement.assignment`` in place): the chosen leader
    strategy in leaders mode; in the replica modes the exact flow, then on load the network-out hand-overs (above
    ``LEADER_FLOW_MAX_PARTITIONS`` partitions the hand-overs balance leader counts too, instead of the flow)."""
    cluster, targets, solver, bounds = req.cluster, setup.targets, setup.solver, setup.bounds
    assignment = placement.assignment
    if req.mode == "leaders":
        with budget.phase("leaders", LEADERS_SHARE, reserve) as deadline:
            solver["leaders"] = _leader_pass(cluster, assignment, targets, setup.strategy, replicas_moved=False,
                                             deadline=deadline)
        solver["status"] = "Optimal" if setup.strategy == "flow" else "Heuristic"
    elif setup.balanced == "load" and len(cluster.partitions) > LEADER_FLOW_MAX_PARTITIONS:
        with budget.phase("leaders", LEADERS_SHARE, reserve) as deadline:
            solver["leaders"] = _leaders_on_load(cluster, assignment, targets, req.model, deadline, counts_too=True)
    else:
        share = LEADER_FLOW_SHARE if setup.balanced == "load" else LEADERS_SHARE
        with budget.phase("leaders", share, reserve) as deadline:
            solver["leaders"] = _leader_pass(cluster, assignment, targets, "flow", replicas_moved=True,
                                             deadline=deadline)
        if setup.balanced == "load":
            with budget.phase("leaders_load", LEADERS_SHARE, reserve) as deadline:
                solver["leaders"]["network_out"] = _leaders_on_load(cluster, assignment, targets, req.model, deadline)
            after = solver["leaders"]["network_out"].get("topic_band_violation_after")
            if after is not None:  # the exact program traded topic balance for network out: claim what holds
                solver["leaders"]["topic_band_violation"] = after
    bounds["leader_changes"] = solver["leaders"]["leader_bound"]


def _result(req: PlanRequest, setup: PlanSetup, placement: Placement, budget: Budget, started: float) -> Plan:
    """The plan: each change in Kafka's order (the leader first, kept followers in place), checked (removed brokers
    empty, something planned when the time was cut), its summary, load and status."""
    cluster, targets, solver, bounds, model = req.cluster, setup.targets, setup.solver, setup.bounds, req.model
    with budget.phase("summary"):
        by_tp = {p.tp: p.replicas for p in cluster.partitions}
        assignment = {k: v for k, v in ((k, canonical_order(by_tp[k], v)) for k, v in placement.assignment.items())
                      if v != by_tp[k]}
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
        if setup.balanced == "load" and req.mode != "leaders":
            _load_status(plan, model, _network_out_proof(cluster, assignment, targets, model, plan))
    solver["budget"] = budget.to_dict()
    if budget.cut_short:
        _mark_cut_short(plan, budget)
    return plan


def _counts_outside_gate(plan: Plan, model: LoadModel) -> dict[str, list[int]]:
    """Per count ("replicas", "leaders"), the eligible brokers whose count after the plan is outside the count
    gate's band (the validation measure: |count - median| <= max(band x median, 1)); counts with none left out."""
    rows = [b for b in plan.summary["brokers"] if b["eligible"]]
    out: dict[str, list[int]] = {}
    for dim, after in (("replicas", {r["broker"]: r["replicas_after"] for r in rows}),
                       ("leaders", {r["broker"]: r["leaders_after"] for r in rows})):
        if brokers := sorted(b for b, x in _count_gate_excess(after, model.band[dim]).items() if x > 1e-9):
            out[dim] = brokers
    return out


@collector_paused()  # millions of long-lived objects: rebalancer.bulk
def plan_run_dir(run_dir: str | Path, mode: str, *, time_limit: float | None = None, capacity: str | Path | None = None,
                 fanout: Mapping[str, float] | None = None, bands: Mapping[str, float] | None = None,
                 thresholds: Mapping[str, float] | None = None, throttle: str | None = None,
                 max_moves_per_broker: int | None = None, max_moves: int | None = None, schedule: str = "batches",
                 **kwargs: Any) -> Plan:
    """Read ``RUN_DIR/snapshot.json``, plan, and write plan.json, reassignment.json and rollback.json.

    ``capacity`` (a Cruise Control capacity file), ``fanout`` (topic -> consumer bytes out / bytes in, ``*`` for
    every topic), ``bands`` and ``thresholds`` (dimension -> fraction) shape the load model (``rebalancer.load``),
    with the Spark stage's p95 rates (``analysis/partition_load.parquet``) where the analysis had a load history.
    The time limit starts before the snapshot is read: loading counts against it (it cannot be interrupted). None:
    ``default_time_limit`` of the snapshot's replicas, fixed once it is read. ``throttle`` (default
    ``DEFAULT_THROTTLE``), ``schedule`` ("batches" or "rolling"), ``max_moves_per_broker`` (None: the schedule's
    default), ``max_moves``: the execution the summary's estimate assumes (``summary.execution``:
    ``rebalancer.execute.estimate``).
    """
    from ..execute.batches import TOTAL
    from ..execute.estimate import DEFAULT_THROTTLE, estimate
    from ..execute.throttle import parse_rate

    rate = parse_rate(throttle or DEFAULT_THROTTLE)  # a bad throttle fails before anything is read
    if time_limit is not None and not time_limit > 0:
        raise PlanError(f"--time-limit must be positive, not {time_limit}")
    if capacity is not None:
        read_capacity_file(capacity)  # a bad file fails before the snapshot is read
    if Path(run_dir).is_dir():
        check_writable(run_dir)  # a read-only run directory fails now, not after planning
    budget = Budget(time_limit if time_limit is not None else math.inf)
    with budget.phase("load"):
        cluster = load_snapshot(run_dir)
        if time_limit is None:
            budget.set_limit(default_time_limit(cluster.replica_count))
        fan = dict(fanout or {})
        default_fanout = fan.pop("*", 1.0)
        model = load_model(cluster, capacity_file=capacity, fanout=fan, default_fanout=default_fanout, band=bands,
                           threshold=thresholds, history=read_history(run_dir))
    plan = make_plan(cluster, mode, time_limit=time_limit, budget=budget, load=model, **kwargs)
    plan.summary["execution"] = estimate(plan.changes, rate, schedule=schedule, per_broker=max_moves_per_broker,
                                         total=max_moves or TOTAL).to_dict()
    write_plan(plan, run_dir)
    return plan
