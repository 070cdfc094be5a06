"""Who leads, over the placed replica sets: the exact leader flow (``leaders``) or Pinterest's (``pinterest``);
on load, then the network-out hand-overs (``leader_load``) and, on a cluster small enough, every leader at once
(``leader_exact``). Leaders change by reordering replicas, never by moving data."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Required, TypedDict, cast

from ..balance import counts_excess
from ..load import DIMENSIONS, Band, LoadModel, accepted_range, load_bands, replica_table
from ..model import Cluster, Partition
from .bounds import leader_change_bound
from .budget import Budget, Deadline
from .leader_exact import (
    BAND_MAX_PARTITIONS,
    EXACT_MAX_PARTITIONS,
    ExactLeaderStats,
    GateRows,
    band_leaders,
    band_relaxation,
    even_leaders,
    exact_leaders,
    topic_violation,
)
from .leader_load import LeaderLoadInput, leader_load, leader_loads
from .leaders import LeaderItem, balance_leaders, topic_bands
from .load_problem import COUNT_MARGIN, count_gate_band, median_safe_band
from .pinterest import pinterest_leaders
from .pipeline import LEADERS_SHARE, Key, Placement, PlanRequest, PlanSetup
from .settled import gate_distance
from .targets import Targets

__all__ = ["place_leaders", "leader_items", "leader_pass", "lead_by_flow", "lead_by_pinterest", "LeaderPassStats", "NetworkOutStats",
           "LEADER_FLOW_MAX_PARTITIONS"]

KEPT = "kept: no replica moved, and no leader change brings the leaders nearer the leader gates"
LEADER_FLOW_SHARE = 0.8       # on load, of the leaders' time: the rest is for the network-out hand-overs
LEADER_FLOW_MAX_PARTITIONS = 100_000  # on load, above this the hand-overs balance leader counts too (the flow: minutes)
EVEN_STEP_PCT = 1.0  # ``_most_even``: its program only where a fractional choice brings the furthest broker this near
EVEN_MAX_PARTITIONS = 1_000  # and only up to this many partitions (fuzz small seed 127, 397: 8 s; 157, 2,308: its
#                               minimax program still at its root after 60 s, which cut the plan short)


class NetworkOutStats(TypedDict, total=False):
    """The network-out hand-overs' record (``solver["leaders"]["network_out"]``; the whole leader record above
    ``LEADER_FLOW_MAX_PARTITIONS``, where they balance the counts too and say so in ``algorithm``): the hand-overs'
    stats, the program over every leader where it ran (``exact``) and the topic bands it left, the seconds; or why
    they were skipped."""

    moves: Required[int]
    swaps: int
    rounds: int
    outside_bands: list[int]
    cut_short: bool
    skipped: str
    exact: ExactLeaderStats
    in_bands: ExactLeaderStats
    in_gate_rows: ExactLeaderStats
    even: ExactLeaderStats
    topic_band_violation_after: int
    seconds: float
    algorithm: str
    partitions_without_eligible_leader: int
    leader_bound: int | None


class LeaderPassStats(TypedDict, total=False):
    """The leader pass's record (``solver["leaders"]``): the algorithm; for the flow, its priorities, what it left
    outside each band and its topic groups; whether the deadline cut it, its seconds, the partitions no eligible
    broker could lead, the bound on leader changes; on load, the network-out hand-overs after it."""

    algorithm: Required[str]
    priority: str
    topic_band_violation: int
    tolerance_band_violation: int
    cluster_band_violation: int
    groups: int
    groups_solved: int
    slowest_group_seconds: float
    cut_short: bool
    seconds: float
    partitions_without_eligible_leader: int
    leader_bound: int
    network_out: NetworkOutStats
    discarded: str  # ``KEPT``: why the leaders stay as they are (what the pass chose and why it was not taken)


def leader_items(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], eligible: frozenset[int],
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


def leader_pass(cluster: Cluster, assignment: dict[Key, tuple[int, ...]], targets: Targets, strategy: str,
                 replicas_moved: bool, deadline: Deadline) -> LeaderPassStats:
    items = leader_items(cluster, assignment, targets.eligible, replicas_moved)
    usable = [it for it in items if it.candidates]
    stranded = len(items) - len(usable)
    started = time.monotonic()
    if strategy == "pinterest":
        leaders = pinterest_leaders(usable, deadline)
        info = LeaderPassStats(algorithm="pinterest (max-flow-min-cost, residue nodes, pruning)")
    else:
        res = balance_leaders(usable, targets.eligible, priority="balance" if replicas_moved else "changes",
                              deadline=deadline, kept={k: reps[0] for k, reps in assignment.items()})
        leaders = res.leaders
        info = LeaderPassStats(
            algorithm="min-cost flow (network simplex), exact" if res.groups == 1 else
            f"min-cost flow (network simplex) over {res.groups} topic groups, each exact",
            priority=("topic band, cluster tolerance band, cluster band, changes" if replicas_moved else
                      "topic band, cluster tolerance band, changes, cluster band"),
            topic_band_violation=res.topic_violation, tolerance_band_violation=res.tolerance_violation,
            cluster_band_violation=res.cluster_violation, groups=res.groups, groups_solved=res.groups_solved,
            slowest_group_seconds=round(res.slowest_group_seconds, 3))
    info["cut_short"] = deadline.cut_short
    info["seconds"] = round(time.monotonic() - started, 3)
    info["partitions_without_eligible_leader"] = stranded
    info["leader_bound"] = leader_change_bound(usable)
    _apply_leaders(assignment, cluster, leaders)
    return info


def _leaders_on_load(cluster: Cluster, assignment: dict[Key, tuple[int, ...]], targets: Targets, model: LoadModel,
                     deadline: Deadline, counts_too: bool = False) -> NetworkOutStats:
    """Leadership moved (``leader_load``) until network out is within its band, leader counts kept in theirs.
    ``counts_too`` (no leader flow ran before): leader counts are a dimension too (below network out), brought
    within two thirds of their band while never leaving five sixths of it."""
    started = time.monotonic()
    items = leader_items(cluster, assignment, targets.eligible, replicas_moved=True)
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
        return NetworkOutStats(moves=0, skipped="no partition has a known bytes-in rate")
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
    inp = LeaderLoadInput(current, cands, units, bands, weight, count_band=counts, topics=[p.topic for p in parts],
                          topic_band=topic_band, accepted=accepted)
    handed, handed_stats = leader_load(inp if counts_too else _counts_as_dimension(inp, counts), deadline)
    stats = cast(NetworkOutStats, dict(handed_stats))  # the hand-overs' record, the rest added below
    handed = _all_at_once(cluster, inp, handed, targets, model, deadline, stats, counts)
    _apply_leaders(assignment, cluster, {parts[i].tp: b for i, b in handed.items()})
    stats["seconds"] = round(time.monotonic() - started, 3)
    if counts_too:
        stats["algorithm"] = ("load hand-overs: network out, then leader counts (no exact flow above "
                              f"{LEADER_FLOW_MAX_PARTITIONS} partitions)")
        stats["cut_short"] = deadline.cut_short or handed_stats["cut_short"]
        stats["partitions_without_eligible_leader"] = stranded
        stats["leader_bound"] = bound
    elif handed:  # a hand-over may take a topic past its band to mend the count gate (so may the exact program)
        stats["topic_band_violation_after"] = _topic_violation_after(inp, handed)
    return stats


def _topic_violation_after(inp: LeaderLoadInput, handed: Mapping[int, int]) -> int:
    """Leaders outside their topic's band once ``handed`` (partition index -> new leader) is applied."""
    led = _applied(inp.leader, handed)
    return topic_violation(led, inp.topics, inp.candidates, inp.topic_band or {})


def _counts_as_dimension(inp: LeaderLoadInput, counts: Mapping[int, Band]) -> LeaderLoadInput:
    """After the flow: a count the flow left outside the median-safe band (it balances counts around the average,
    per topic group where it is not solved whole) is a dimension the hand-overs bring inside, weighed as the gate it
    is (its accepted range is the band): only "no further out" let the hand-overs fill the band's top, so the
    median rose past a broker the flow had left 10 below the average (fuzz medium 11: 75 leaders against a median of
    89, outside the leader gate)."""
    return dataclasses.replace(
        inp, units={**inp.units, "leaders": [1.0] * len(inp.leader)}, bands={**inp.bands, "leaders": counts},
        weight={**inp.weight, "leaders": DIMENSIONS["leaders"].priority},
        accepted={**(inp.accepted or {}), "leaders": {b: (float(x.floor), float(x.ceil)) for b, x in counts.items()}})


def _every_leader_at_once(cluster: Cluster, inp: LeaderLoadInput, changed: dict[int, int], targets: Targets,
                          model: LoadModel, deadline: Deadline, stats: NetworkOutStats) -> dict[int, int]:
    """Small enough for every leader at once (``leader_exact``): used where it scores better than the hand-overs
    (``changed``, the leaders they changed). Leader counts within the gate's band around the average; where the
    result fails the gate, which measures from the median, again within a band any counts inside of pass it
    (``median_safe_band``). Records ``stats["exact"]``; returns the leaders changed from ``inp.leader``."""
    parts = cluster.partitions
    current = inp.leader
    handed = _applied(current, changed)
    original = [p.replicas[0] for p in parts]
    exact: dict[int, int] | None = None
    exact_stats = ExactLeaderStats(status="not run", seconds=0.0)
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
    if exact is None:
        return changed
    for i, b in exact.items():
        handed[i] = b
    stats["topic_band_violation_after"] = topic_violation(handed, inp.topics, inp.candidates, inp.topic_band or {})
    return {i: b for i, b in enumerate(handed) if b != current[i]}


def _all_at_once(cluster: Cluster, inp: LeaderLoadInput, handed: dict[int, int], targets: Targets, model: LoadModel,
                 deadline: Deadline, stats: NetworkOutStats, counts: Mapping[int, Band]) -> dict[int, int]:
    """After the hand-overs (``handed``: the leaders they changed), every leader at once where that is affordable:
    the exact program up to ``EXACT_MAX_PARTITIONS`` partitions; then, where a broker is left outside a band, the
    bands as rows, over every leader up to ``BAND_MAX_PARTITIONS`` partitions and beyond over the leaders of the
    partitions those brokers may lead. Returns the leaders changed from ``inp.leader``."""
    if deadline.cut_short:
        return handed
    if len(inp.leader) <= EXACT_MAX_PARTITIONS:
        handed = _every_leader_at_once(cluster, inp, handed, targets, model, deadline, stats)
        # it weighs each topic's leader band above network out's band, which no gate measures unless the plan
        # claims it (fuzz small seeds 12, 16, 23: 18-34 % off the mean); where it left a broker outside, the bands
        # as rows
        led = _applied(inp.leader, handed)
        stats["outside_bands"] = sorted(_outside(dataclasses.replace(inp, leader=led)))
    if stats["outside_bands"] and not deadline.cut_short:
        gate = GateRows(model.band["leaders"], frozenset(targets.eligible), to_use=True)
        return _leaders_in_bands(inp, handed, counts, deadline, stats, gate)
    return handed


def _leaders_in_bands(inp: LeaderLoadInput, changed: dict[int, int], counts: Mapping[int, Band], deadline: Deadline,
                      stats: NetworkOutStats, gate: GateRows) -> dict[int, int]:
    """Where the hand-overs left a broker outside a band on a cluster too large for ``leader_exact``'s program:
    every leader at once with the bands as rows (``band_leaders``; leader counts in ``counts``, one the hand-overs
    never left), used whenever it finds leaders (they meet every band). Above ``BAND_MAX_PARTITIONS`` partitions
    only the leaders of the partitions a broker outside a leader-load band may lead are chosen, the others kept,
    and the leader-load bands alone are rows (the 3M production-shaped plan: one broker 0.01 % above network out's
    band, which no single hand-over within every topic's band could mend). Where ``counts`` make the program
    infeasible, again with the leader gate itself relaxed to rows (``gate``), kept when its leaders pass the gate:
    ``counts`` is narrower than the gate, so that any counts inside it pass whatever the median (fuzz small seed
    196: no leaders within it, and 13 % off network out's mean, where the gate's rows allow 10 %). Records
    ``stats["in_bands"]`` (and ``stats["in_gate_rows"]``); returns the leaders changed from ``inp.leader``."""
    handed = _applied(inp.leader, changed)
    loads = [d for d in inp.bands if d != "leaders"]  # the leader-count dimension (above the flow's size) aside
    whole = len(inp.leader) <= BAND_MAX_PARTITIONS
    sub = dataclasses.replace(inp, leader=handed, units={d: inp.units[d] for d in loads},
                              bands={d: inp.bands[d] for d in loads})
    if whole and any(band_relaxation(inp.units[d], inp.candidates, inp.bands[d]) is False for d in loads):
        # not even split leaderships meet a band (a flow, a second): the program would only prove it again, slower
        # (fuzz medium seed 19: 19 s)
        stats["in_bands"] = ExactLeaderStats(status="skipped: no choice of leaders, even a fractional one, meets the "
                                                    "bands", seconds=0.0)
        return _most_even(inp, sub, changed, gate, deadline, stats)
    if not whole:
        outside = _outside(sub)
        if not outside:  # only a count outside its (narrower) band: not this program's
            return changed
        sub = dataclasses.replace(sub, candidates=[c if any(b in outside for b in c) else (handed[i],)
                                                   for i, c in enumerate(inp.candidates)])
    found, stats["in_bands"] = band_leaders(sub, counts, seconds=deadline.remaining())
    if stats["in_bands"].get("outcome") == "infeasible" and deadline.remaining() > 0:
        found, stats["in_gate_rows"] = band_leaders(sub, gate, seconds=deadline.remaining())
        if found is not None and not _count_gate_met(_applied(handed, found), gate.brokers, gate.band):
            found, stats["in_gate_rows"]["status"] = None, "leaders found fail the leader gate: not used"
    if stats["in_bands"].get("cut_by_safety_net") or stats.get("in_gate_rows", {}).get("cut_by_safety_net"):
        deadline.cut_short = True
    if found is None:
        return _most_even(inp, sub, changed, gate, deadline, stats) if whole else changed
    for i, b in found.items():
        handed[i] = b
    stats["outside_bands"] = sorted(_outside(dataclasses.replace(inp, leader=handed)))
    return {i: b for i, b in enumerate(handed) if b != inp.leader[i]}


def _most_even(inp: LeaderLoadInput, sub: LeaderLoadInput, changed: dict[int, int], gate: GateRows,
               deadline: Deadline, stats: NetworkOutStats) -> dict[int, int]:
    """No leaders put every broker within its bands: the leaders that bring the furthest broker nearest its target
    (``even_leaders``, the leader gate as rows), used where that broker ends nearer than after the hand-overs (fuzz
    small seed 127: a hot partition puts network out's band out of reach, and the hand-overs stopped at 62 % off
    the mean). ``sub``: ``inp`` with the hand-overs' leaders and its leader-load dimensions alone. Records
    ``stats["even"]``; returns the leaders changed from ``inp.leader``."""
    if deadline.remaining() <= 0 or len(sub.leader) > EVEN_MAX_PARTITIONS:
        return changed
    before = _furthest(sub, sub.leader)
    nearer = before - EVEN_STEP_PCT
    if any(band_relaxation(sub.units[d], sub.candidates, {
            b: Band(math.ceil(x.average * (1 - nearer / 100)), math.floor(x.average * (1 + nearer / 100)), x.average)
            for b, x in sub.bands[d].items()}) is False for d in sub.bands):
        # a flow, not the program: where a hot partition pins the furthest broker (fuzz medium seed 13: 104 %, and
        # 46 s of program for nothing)
        stats["even"] = ExactLeaderStats(status=f"skipped: no choice of leaders, even a fractional one, brings the "
                                                f"furthest broker {EVEN_STEP_PCT:g} point(s) nearer", seconds=0.0)
        return changed
    found, even = even_leaders(sub, gate, seconds=deadline.remaining())
    stats["even"] = even
    deadline.cut_short |= bool(even.get("cut_by_safety_net"))
    if found is None:
        return changed
    led = _applied(sub.leader, found)
    after = _furthest(sub, led)
    even["deviation_pct_before"], even["deviation_pct_after"] = round(before, 2), round(after, 2)
    if after >= before or not _count_gate_met(led, gate.brokers, gate.band):
        even["status"] += ": not used (no nearer, or a leader count outside its gate)"
        return changed
    stats["outside_bands"] = sorted(_outside(dataclasses.replace(inp, leader=led)))
    return {i: b for i, b in enumerate(led) if b != inp.leader[i]}


def _furthest(inp: LeaderLoadInput, leader: Sequence[int]) -> float:
    """The largest deviation, in percent of its target, of any broker's leader load in any dimension of ``inp``."""
    loads = leader_loads(inp, leader)
    return max((abs(loads[d][b] - x.average) / x.average * 100 for d, bands in inp.bands.items()
                for b, x in bands.items() if x.average > 0), default=0.0)


def _applied(leader: Sequence[int], changed: Mapping[int, int]) -> list[int]:
    """Each partition's leader once ``changed`` (partition index -> new leader) is applied to ``leader``."""
    led = list(leader)
    for i, b in changed.items():
        led[i] = b
    return led


def _outside(inp: LeaderLoadInput) -> set[int]:
    """The brokers whose leader load (``inp.leader``'s) lies outside a band of ``inp``."""
    loads = leader_loads(inp, inp.leader)
    return {b for d, bands in inp.bands.items() for b, x in bands.items() if not x.floor <= loads[d][b] <= x.ceil}


def _count_gate_met(leaders: Sequence[int], eligible: Iterable[int], band: float) -> bool:
    """Do these leaders pass the leader gate?"""
    count = dict.fromkeys(eligible, 0)
    for b in leaders:
        if b in count:
            count[b] += 1
    return all(x <= 1e-9 for x in counts_excess(count, band).values())


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


def lead_by_flow(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Strategy ``flow`` (leaders mode): the exact min-cost flow over the replica sets as they are."""
    return _leaders_only(req, setup, budget, reserve, "flow")


def lead_by_pinterest(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float) -> Placement:
    """Strategy ``pinterest`` (leaders mode): Pinterest's max-flow-min-cost over the replica sets as they are."""
    return _leaders_only(req, setup, budget, reserve, "pinterest")


def _leaders_only(req: PlanRequest, setup: PlanSetup, budget: Budget, reserve: float, algorithm: str) -> Placement:
    assignment: dict[Key, tuple[int, ...]] = {}
    with budget.phase("leaders", LEADERS_SHARE, reserve) as deadline:
        setup.solver["leaders"] = leader_pass(req.cluster, assignment, setup.targets, algorithm, replicas_moved=False,
                                              deadline=deadline)
    setup.solver["state"] = setup.solver["status"] = "Optimal" if algorithm == "flow" else "Heuristic"
    return Placement(assignment, algorithm)


def place_leaders(req: PlanRequest, setup: PlanSetup, placement: Placement, budget: Budget, reserve: float) -> None:
    """Who leads, over the placed replica sets (reorders ``placement.assignment`` in place): in leaders mode the
    strategy's own step chose them (``lead_by_flow``, ``lead_by_pinterest``); in the replica modes the exact flow,
    then on load the network-out hand-overs (above ``LEADER_FLOW_MAX_PARTITIONS`` partitions the hand-overs balance
    leader counts too, instead of the flow)."""
    if req.mode != "leaders":
        _leaders_after_placement(req, setup, placement.assignment, budget, reserve)
    setup.bounds["leader_changes"] = setup.solver["leaders"]["leader_bound"]


def _leaders_after_placement(req: PlanRequest, setup: PlanSetup, assignment: dict[Key, tuple[int, ...]],
                             budget: Budget, reserve: float) -> None:
    """Who leads after the placement. Where it moved no replica, leaders change only to come nearer the leader
    gates: a plan of a balanced cluster (its own result, say) hands over none, and one whose gates cannot be met
    keeps its leaders unless the pass brings them nearer; each hand-over is an election clients see, and the flow
    and the network-out hand-overs would otherwise trade leaders back and forth on every run. (A placement's order
    is not a choice of leaders: the count program's may reorder freely.)"""
    cluster, targets, solver = req.cluster, setup.targets, setup.solver
    moved = _replicas_moved(cluster, assignment)
    on_load = setup.balanced == "load"
    before = None
    if not moved:
        assignment.clear()
        before = _gate_excess(cluster, {}, targets, req.model, on_load)
        if not any(before):
            solver["leaders"] = _kept("none needed: they pass every leader gate")
            return
    _choose_leaders(req, setup, assignment, budget, reserve, moved)
    if before is not None and _gate_excess(cluster, assignment, targets, req.model, on_load) >= before:
        tried = solver["leaders"]
        changes = sum(1 for tp, reps in assignment.items() if reps[0] != cluster.partition(*tp).replicas[0])
        assignment.clear()
        solver["leaders"] = _kept(f"{tried['algorithm']} chose {changes} leader change(s) no nearer the gates")


def _kept(why: str) -> LeaderPassStats:
    return LeaderPassStats(algorithm=KEPT, discarded=why, cut_short=False, seconds=0.0,
                           partitions_without_eligible_leader=0, leader_bound=0)


def _choose_leaders(req: PlanRequest, setup: PlanSetup, assignment: dict[Key, tuple[int, ...]], budget: Budget,
                    reserve: float, moved: bool) -> None:
    """The exact flow, then on load the network-out hand-overs (above ``LEADER_FLOW_MAX_PARTITIONS`` partitions
    the hand-overs alone, leader counts a dimension of theirs)."""
    cluster, targets, solver = req.cluster, setup.targets, setup.solver
    if setup.balanced == "load" and len(cluster.partitions) > LEADER_FLOW_MAX_PARTITIONS:
        with budget.phase("leaders", LEADERS_SHARE, reserve) as deadline:
            solver["leaders"] = _leaders_on_load(cluster, assignment, targets, req.model, deadline, counts_too=True)
        return
    share = LEADER_FLOW_SHARE if setup.balanced == "load" else LEADERS_SHARE
    with budget.phase("leaders", share, reserve) as deadline:
        solver["leaders"] = leader_pass(cluster, assignment, targets, "flow", replicas_moved=moved, deadline=deadline)
    if setup.balanced == "load":
        with budget.phase("leaders_load", LEADERS_SHARE, reserve) as deadline:
            solver["leaders"]["network_out"] = _leaders_on_load(cluster, assignment, targets, req.model, deadline)
        after = solver["leaders"]["network_out"].get("topic_band_violation_after")
        if after is not None:  # the exact program traded topic balance for network out: claim what holds
            solver["leaders"]["topic_band_violation"] = after


def _replicas_moved(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]]) -> bool:
    """Does the placement change any partition's replica set (not only its order)?"""
    return any(set(reps) != set(cluster.partition(*tp).replicas) for tp, reps in assignment.items())


def _gate_excess(cluster: Cluster, assignment: Mapping[Key, tuple[int, ...]], targets: Targets, model: LoadModel,
                 on_load: bool) -> tuple[int, float, float]:
    """How far the preferred leaders of ``assignment`` (over the cluster's replica sets) lie outside the gates on
    leaders, worst first: partitions led by a broker that may not lead them (ineligible, out of sync) though one
    may; leaders past the count gate, summed over brokers; and on load, network out outside what its gate accepts
    (``settled.gate_distance``: the band widened by the busiest partition the broker leads), in units of the
    broker's target, summed. (0, 0, 0): they pass every one."""
    items = leader_items(cluster, {}, targets.eligible, replicas_moved=False)
    leaders = [assignment.get(it.key, cluster.partition(*it.key).replicas)[0] for it in items]
    stranded = sum(1 for b, it in zip(leaders, items, strict=True) if it.candidates and b not in it.candidates)
    count = dict.fromkeys(targets.eligible, 0)
    for b in leaders:
        if b in count:
            count[b] += 1
    counts = sum(counts_excess(count, model.band["leaders"]).values())
    if not on_load:
        return stranded, counts, 0.0
    out = gate_distance(cluster, model, targets.eligible, ["nw_out"], assignment or None)
    return stranded, counts, sum(out["nw_out"].values())
