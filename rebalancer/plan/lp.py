"""Replica placement as a 0/1 program (strategy ``lp``): the Sqooba model plus the bin-packing constraints.

Variables, for each partition p and each candidate broker b (its current eligible brokers and the brokers that may
receive): ``x[p,b]`` = replica of p on b, ``l[p,b]`` = p's leader on b. Constraints (each named in the model):

- ``rf``: sum_b x[p,b] = RF(p); ``one_leader``: sum_b l[p,b] = 1; ``lead_in``: l[p,b] <= x[p,b]
- ``replicas_lo/hi``: each broker's replica count within its band (cluster-wide [floor, ceil]), with a slack whose
  penalty outweighs everything else: hard wherever it can hold, yet a capacity limit (hard) or a decomposed
  sub-problem that cannot reach it alone still gets the most balanced plan instead of none
- ``leaders_lo/hi``: each broker's leader count within the leader band (soft; a unit costs a fifth of a move,
  since the exact leader flow afterwards fixes leader skew by reordering)
- ``rack``: at most one replica per rack for partitions that had one per rack; otherwise never fewer racks
  (``rack_cover``) than before
- ``changes``: at most N brokers added per partition
- ``disk`` / ``network``: sum of sizes (bytes-in rates) on a broker within its capacity, where given
- excluded (removed, dead) brokers have no variables, so they end empty

Objective (minimise): 100 x (replicas added, or their size in MiB with ``objective="bytes"``) + 1 x per-topic
replica band violation (a tie-breaker: per-topic balance where it costs no extra move) + penalties on the soft
bands. Leaders are then chosen exactly by the leader flow; the ``l`` variables here only guarantee that a balanced
leader choice exists for the placement.

``solve_lp`` is a pure function of plain data (``LpInput`` -> placement and ``SubProblemStats``), so sub-problems can
be shipped anywhere. ``lp_balance`` decomposes by groups of topics when the model would be large: each group is
solved with the per-broker bands shifted by the counts of the rest of the cluster, groups in turn (rolling horizon),
each warm started from the greedy plan.

Time limit: ``lp_balance`` takes a ``Deadline`` (see ``budget``); each group's HiGHS limit is its share of the time
left (time left / groups left). Before a group it asks the deadline; on "stop", or when HiGHS reaches its limit
without any solution, the groups left keep their current replicas (each solved group's bands and disk room were
computed with those, so the whole stays valid) and the stats say ``cut_short`` with the groups solved.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..model import TopicPartition
from . import highs
from .budget import Deadline
from .program import add_change_cap, add_racks, add_rf, in_place
from .targets import PlanError

__all__ = ["LpInput", "CountProgram", "CountProgramStats", "SubProblemStats", "build", "solve", "extract",
           "solve_lp", "lp_balance"]

Key = TopicPartition  # the partition's coordinates everywhere in the plan (``model``)
MiB = 1024 * 1024
W_MOVE = 100
W_LEADER_SLACK = 20  # below a move: leader skew is fixed by reordering, rarely worth a copy
W_COUNT_SLACK = 100_000
MIN_SOLVE_SECONDS = 1.0  # HiGHS gets at least this (when the deadline has it) for a group it starts


@dataclass(frozen=True)
class LpInput:
    replicas: Mapping[Key, tuple[int, ...]]
    sizes: Mapping[Key, int]
    rack: Mapping[int, str | None]
    candidates: frozenset[int]            # brokers that may receive replicas of these partitions
    keep: frozenset[int]                  # brokers whose existing replicas may stay (eligible)
    count_lo: Mapping[int, int]           # per broker, bounds on this sub-problem's replica count
    count_hi: Mapping[int, int]
    leader_lo: Mapping[int, int]
    leader_hi: Mapping[int, int]
    soft_counts: bool = False
    rates: Mapping[Key, float] = field(default_factory=dict)
    disk_room: Mapping[int, int] = field(default_factory=dict)
    net_room: Mapping[int, float] = field(default_factory=dict)
    max_changes: int | None = 1
    keep_racks: bool = True
    objective: str = "replicas"
    topic_balance: bool = True
    time_limit: float = 60.0
    warm_start: Mapping[Key, tuple[int, ...]] | None = None
    write_lp: str | None = None


class SubProblemStats(TypedDict):
    """One sub-problem's (topic group's) program, as solved (``solve_lp``)."""
    partitions: int
    status: str
    outcome: highs.Outcome
    objective: float | None
    dual_bound: float | None
    gap: float | None
    seconds: float
    variables: int
    constraints: int
    count_slack: int


class CountProgramStats(TypedDict):
    """``lp_balance``'s record (``solver["lp"]`` of a counts plan): its groups, each group's program, whether the
    deadline cut it short, and the overall status, outcome and gap (``_overall_status``)."""
    groups: int
    sub_problems: list[SubProblemStats]
    decomposed: bool
    receivers_restricted: bool
    cut_short: bool
    groups_solved: int
    status: str
    outcome: highs.Outcome
    gap: float | None


@dataclass
class CountProgram:
    """The count program of one sub-problem as ``build`` made it: the problem, its replica (``x``) and leader
    (``lv``) variables, each partition's candidate brokers, and the replica-count slacks."""

    prob: Any
    x: dict[tuple[Key, int], Any]
    lv: dict[tuple[Key, int], Any]
    cand: dict[Key, list[int]]
    parts: list[Key]
    slack_vars: list[Any]


def build(inp: LpInput) -> CountProgram:
    """The 0/1 program of ``inp`` (see the module doc), with the warm start's values set."""
    import pulp

    prob = pulp.LpProblem("replica_placement", pulp.LpMinimize)
    parts = sorted(inp.replicas)
    x: dict[tuple[Key, int], Any] = {}
    lv: dict[tuple[Key, int], Any] = {}
    cand: dict[Key, list[int]] = {}
    for k in parts:
        current = inp.replicas[k]
        brokers = [b for b in current if b in inp.keep] + sorted(b for b in inp.candidates if b not in current)
        cand[k] = brokers
        for b in brokers:
            x[(k, b)] = prob.add_variable(f"x_{k[0]}_{k[1]}_{b}", cat="Binary")
            lv[(k, b)] = prob.add_variable(f"l_{k[0]}_{k[1]}_{b}", cat="Binary")
    program = CountProgram(prob, x, lv, cand, parts, [])
    objective: list[Any] = []
    for k in parts:
        _partition_rows(program, inp, k, objective)
    by_broker: dict[int, list[tuple[Key, int]]] = {}
    for (k, b) in x:
        by_broker.setdefault(b, []).append((k, b))
    for b, keys in sorted(by_broker.items()):
        _broker_rows(program, inp, b, keys, objective)
    objective += [W_COUNT_SLACK * s for s in program.slack_vars]
    if inp.topic_balance:
        _topic_rows(program, inp, sorted(by_broker), objective)
    prob += pulp.lpSum(objective), "objective"
    if inp.warm_start is not None:
        for k in parts:
            reps = inp.warm_start.get(k, inp.replicas[k]) if inp.warm_start else inp.replicas[k]
            for b in cand[k]:
                x[(k, b)].setInitialValue(1 if b in reps else 0)
                lv[(k, b)].setInitialValue(1 if reps and b == reps[0] else 0)
    return program


def _partition_rows(program: CountProgram, inp: LpInput, k: Key, objective: list[Any]) -> None:
    """Partition ``k``'s rules (``program``: RF, the change cap, racks), one leader among its replicas, and its moves
    in the objective."""
    import pulp

    prob, x, lv, cand = program.prob, program.x, program.lv, program.cand
    current = inp.replicas[k]
    rf = len(current)
    tag = f"{k[0]}_{k[1]}"
    add_rf(prob, (x[(k, b)] for b in cand[k]), rf, tag)
    prob += pulp.lpSum(lv[(k, b)] for b in cand[k]) == 1, f"one_leader_{tag}"
    for b in cand[k]:
        prob += lv[(k, b)] <= x[(k, b)], f"lead_in_{tag}_{b}"
    added = [x[(k, b)] for b in cand[k] if b not in current]
    add_change_cap(prob, added, inp.max_changes, tag)
    unit = max(1, round(inp.sizes.get(k, 0) / MiB)) if inp.objective == "bytes" else 1
    objective.extend(W_MOVE * unit * v for v in added)
    if inp.keep_racks:
        by_rack: dict[str | None, list[Any]] = {}
        for b in cand[k]:
            by_rack.setdefault(inp.rack.get(b), []).append(x[(k, b)])
        add_racks(prob, by_rack, len({inp.rack.get(b) for b in current}), rf, tag)


def _broker_rows(program: CountProgram, inp: LpInput, b: int, keys: list[tuple[Key, int]],
                 objective: list[Any]) -> None:
    """Broker ``b``'s replica count within its band (with slacks when ``soft_counts``), its leader count within the
    leader band (soft), its bytes and bytes-in rate within its capacities."""
    import pulp

    prob, x, lv = program.prob, program.x, program.lv
    count = pulp.lpSum(x[kb] for kb in keys)
    lo, hi = inp.count_lo.get(b, 0), inp.count_hi.get(b, len(keys))
    if inp.soft_counts:
        s_lo = prob.add_variable(f"slack_lo_{b}", lowBound=0)
        s_hi = prob.add_variable(f"slack_hi_{b}", lowBound=0)
        program.slack_vars += [s_lo, s_hi]
        prob += count + s_lo >= lo, f"replicas_lo_{b}"
        prob += count - s_hi <= hi, f"replicas_hi_{b}"
    else:
        prob += count >= lo, f"replicas_lo_{b}"
        prob += count <= hi, f"replicas_hi_{b}"
    leaders = pulp.lpSum(lv[kb] for kb in keys)
    ls_lo = prob.add_variable(f"lslack_lo_{b}", lowBound=0)
    ls_hi = prob.add_variable(f"lslack_hi_{b}", lowBound=0)
    prob += leaders + ls_lo >= inp.leader_lo.get(b, 0), f"leaders_lo_{b}"
    prob += leaders - ls_hi <= inp.leader_hi.get(b, len(keys)), f"leaders_hi_{b}"
    objective += [W_LEADER_SLACK * ls_lo, W_LEADER_SLACK * ls_hi]
    if b in inp.disk_room:
        prob += pulp.lpSum(inp.sizes.get(k, 0) * x[(k, bb)] for (k, bb) in keys) <= inp.disk_room[b], f"disk_{b}"
    if b in inp.net_room:
        prob += pulp.lpSum(inp.rates.get(k, 0.0) * x[(k, bb)] for (k, bb) in keys) <= inp.net_room[b], f"network_{b}"


def _topic_rows(program: CountProgram, inp: LpInput, brokers_all: list[int], objective: list[Any]) -> None:
    """Per topic and broker, its replicas within the topic's even share, with slacks costing 1 each: a tie-breaker
    (per-topic balance where it costs no extra move)."""
    import pulp

    prob, x = program.prob, program.x
    topics: dict[str, list[Key]] = {}
    for k in program.parts:
        topics.setdefault(k[0], []).append(k)
    n_eligible = len([b for b in brokers_all if inp.count_hi.get(b, 1) > 0])
    for t, topic_keys in topics.items():
        total = sum(len(inp.replicas[k]) for k in topic_keys)
        if n_eligible == 0:
            continue
        lo_t, hi_t = total // n_eligible, math.ceil(total / n_eligible)
        for b in brokers_all:
            members = [x[(k, b)] for k in topic_keys if (k, b) in x]
            if not members or inp.count_hi.get(b, 1) == 0:
                continue
            over = prob.add_variable(f"tover_{t}_{b}", lowBound=0)
            under = prob.add_variable(f"tunder_{t}_{b}", lowBound=0)
            prob += pulp.lpSum(members) - over <= hi_t, f"topic_hi_{t}_{b}"
            prob += pulp.lpSum(members) + under >= lo_t, f"topic_lo_{t}_{b}"
            objective += [over, under]


def solve(program: CountProgram, time_limit: float, warm: bool, write_lp: str | None = None
          ) -> tuple[str, highs.Outcome, bool, float | None, float | None]:
    """HiGHS (CBC where HiGHS is missing), time-limited, in a child process killed past its limit (``highs.solve``:
    HiGHS overruns it): (status, outcome, a solution at hand, dual bound, gap)."""
    result = highs.solve(program.prob, time_limit, warm=warm, write_to=write_lp)
    return result["status"], result["outcome"], result["have_solution"], result["dual_bound"], result["gap"]


def extract(program: CountProgram, inp: LpInput) -> tuple[dict[Key, tuple[int, ...]], int]:
    """Every partition's replicas from the solution (survivors in their old order, new brokers where the removed
    ones were, the leader first) and the replica-count slack used."""
    x, lv, cand = program.x, program.lv, program.cand
    assignment: dict[Key, tuple[int, ...]] = {}
    for k in program.parts:
        chosen = [b for b in cand[k] if (x[(k, b)].varValue or 0) > 0.5]
        leader = next((b for b in cand[k] if (lv[(k, b)].varValue or 0) > 0.5 and b in chosen), chosen[0] if chosen else None)
        current = inp.replicas[k]
        kept = [b for b in current if b in chosen]
        new = [b for b in chosen if b not in current]
        order = in_place(current, chosen, new)
        if leader is not None and leader in order:
            order.remove(leader)
            order.insert(0, leader)
        assignment[k] = tuple(order) if len(order) == len(current) else tuple(kept + new)
    return assignment, sum(int(round(s.varValue or 0)) for s in program.slack_vars)


def solve_lp(inp: LpInput) -> tuple[dict[Key, tuple[int, ...]], SubProblemStats]:
    """Build, solve, extract one sub-problem: every partition's replicas, leader first (empty without a solution),
    and the program's stats."""
    import pulp

    started = time.monotonic()
    program = build(inp)
    status, outcome, have_solution, dual_bound, gap = solve(program, inp.time_limit, inp.warm_start is not None,
                                                            inp.write_lp)
    assignment, slack = extract(program, inp) if have_solution else ({}, 0)
    value = pulp.value(program.prob.objective) if have_solution else None
    return assignment, SubProblemStats(
        partitions=len(inp.replicas), status=status, outcome=outcome, objective=None if value is None else float(value),
        dual_bound=dual_bound, gap=gap, seconds=round(time.monotonic() - started, 3),
        variables=len(program.x) + len(program.lv), constraints=program.prob.numConstraints(), count_slack=slack)


def lp_balance(
    replicas: Mapping[Key, tuple[int, ...]],
    sizes: Mapping[Key, int],
    rack: Mapping[int, str | None],
    *,
    eligible: frozenset[int],
    receivers: frozenset[int],
    givers: frozenset[int],
    removed: frozenset[int],
    floor: int,
    ceil: int,
    leader_floor: int,
    leader_ceil: int,
    max_changes: int | None,
    keep_racks: bool,
    objective: str = "replicas",
    time_limit: float = 60.0,
    max_variables: int = 60_000,
    warm_start: Mapping[Key, tuple[int, ...]] | None = None,
    disk: Mapping[int, int] | None = None,
    network: Mapping[int, float] | None = None,
    rates: Mapping[Key, float] | None = None,
    write_lp: str | None = None,
    deadline: Deadline | None = None,
) -> tuple[dict[Key, tuple[int, ...]], CountProgramStats]:
    """Whole-cluster placement; decomposed by topic groups when the model would exceed ``max_variables``: set up
    the cluster's bands, then per group (in turn) build its sub-problem, solve it, apply its placement. ``deadline``
    bounds the whole call (default: ``time_limit`` seconds from now)."""
    if deadline is None:
        deadline = Deadline(time.monotonic() + time_limit)
    state = _Rolling(replicas, sizes, rack)
    limits = _CountLimits.of(state.counts, rack, eligible, receivers, givers, removed, floor, ceil)
    groups, restrict = _plan_groups(replicas, receivers, state, limits, max_variables)
    whole_leaders = Counter(reps[0] for reps in replicas.values())
    whole = _Whole(sizes, rack, eligible, receivers - removed, limits, restrict, len(groups) > 1,
                   {b: (leader_floor if b in eligible else 0) for b in rack},
                   {b: (leader_ceil if b in eligible else whole_leaders.get(b, 0)) for b in rack},
                   dict(rates or {}), dict(disk or {}), dict(network or {}), max_changes, keep_racks, objective,
                   warm_start, write_lp)
    solved: list[SubProblemStats] = []  # of ``tried``: the groups whose placement was taken
    tried: list[SubProblemStats] = []
    cut_short = False
    for gi, keys in enumerate(groups):
        if deadline.expired():
            cut_short = True
            break
        left = deadline.remaining()
        share = min(left, max(MIN_SOLVE_SECONDS, left / (len(groups) - gi)))  # the group's HiGHS limit
        placed, sub_stats = solve_lp(whole.group_input(state, keys, share))
        tried.append(sub_stats)
        if not _take(state, keys, placed, sub_stats, deadline):
            cut_short = True
            break
        solved.append(sub_stats)
    status, outcome, gap = _overall_status(solved, len(groups))
    stats = CountProgramStats(groups=len(groups), sub_problems=tried, decomposed=whole.decomposed,
                              receivers_restricted=restrict, cut_short=cut_short, groups_solved=len(solved),
                              status=status, outcome=outcome, gap=gap)
    changed = {k: v for k, v in state.assignment.items() if v != tuple(replicas[k])}
    return changed, stats


def _plan_groups(replicas: Mapping[Key, tuple[int, ...]], receivers: frozenset[int], state: _Rolling,
                 limits: _CountLimits, max_variables: int) -> tuple[list[list[Key]], bool]:
    """The topic groups solved in turn, and whether receivers are restricted: in large models only brokers with room
    below their ceiling receive (a full broker would have to give one replica to take another: never fewer moves);
    small models keep every receiver, so they stay exact."""
    restrict = len(replicas) * 2 * (len(receivers) + 3) > max_variables
    n_recv = len([b for b in receivers if state.counts[b] < limits.hi[b]]) if restrict else len(receivers)
    return _topic_groups(replicas, 2 * (n_recv + 3), max_variables), restrict


def _take(state: _Rolling, keys: list[Key], placed: Mapping[Key, tuple[int, ...]], stats: SubProblemStats,
          deadline: Deadline) -> bool:
    """A group's solution taken into the rolling placement; False (the program was cut short) when the group's
    share ran out without one: this group and those after it keep their replicas. A group the solver proved
    unsolvable (infeasible) has no plan to fall back on: ``PlanError``."""
    cut = stats["outcome"] == "time_limit"
    if cut:
        deadline.cut_short = True  # HiGHS stopped at the group's share: a solution, not proven optimal (or none)
    if not placed:
        if cut or deadline.remaining() == 0.0:
            deadline.cut_short = True
            return False
        raise PlanError(f"the 0/1 program is {stats['status']}: the constraints cannot all hold "
                        "(try --max-changes-per-partition 2, or --strategy greedy)")
    state.take(keys, placed)
    return True


@dataclass(frozen=True)
class _Whole:
    """What every group's sub-problem reads of the whole cluster (``lp_balance``'s arguments and limits);
    ``leader_lo``/``leader_hi``: the cluster's leader band, used as it is when the program is not decomposed."""

    sizes: Mapping[Key, int]
    rack: Mapping[int, str | None]
    eligible: frozenset[int]
    receivers: frozenset[int]        # removed brokers taken out
    limits: _CountLimits
    restrict: bool                   # only receivers with room below their ceiling receive
    decomposed: bool
    leader_lo: dict[int, int]
    leader_hi: dict[int, int]
    rates: dict[Key, float]
    disk: dict[int, int]
    network: dict[int, float]
    max_changes: int | None
    keep_racks: bool
    objective: str
    warm_start: Mapping[Key, tuple[int, ...]] | None
    write_lp: str | None

    def group_input(self, state: _Rolling, keys: list[Key], time_limit: float) -> LpInput:
        """The sub-problem of the partitions ``keys``: the per-broker count bands shifted by the counts of the rest
        of the cluster, the disk room left by it; decomposed, the group's own leader band (groups balanced one by one
        add up to a balanced cluster)."""
        rack, eligible, limits = self.rack, self.eligible, self.limits
        group_counts, group_leaders, group_bytes = state.group_totals(keys)
        rest = {b: state.counts[b] - group_counts[b] for b in rack}
        leader_lo, leader_hi = self.leader_lo, self.leader_hi
        if self.decomposed:
            n_el = max(1, len(eligible))
            g_floor, g_ceil = len(keys) // n_el, -(-len(keys) // n_el)
            leader_lo = {b: (g_floor if b in eligible else 0) for b in rack}
            leader_hi = {b: (g_ceil if b in eligible else group_leaders[b]) for b in rack}
        room = (frozenset(b for b in self.receivers if state.counts[b] < limits.hi[b]) if self.restrict
                else self.receivers)
        warm = self.warm_start
        return LpInput(
            replicas={k: state.assignment[k] for k in keys}, sizes={k: self.sizes.get(k, 0) for k in keys},
            rack=rack, candidates=room, keep=frozenset(eligible | limits.dead),
            count_lo={b: max(0, limits.lo[b] - rest[b]) for b in rack},
            count_hi={b: max(0, limits.hi[b] - rest[b]) for b in rack},
            leader_lo=leader_lo, leader_hi=leader_hi, soft_counts=True,
            rates={k: self.rates.get(k, 0.0) for k in keys},
            disk_room={b: d - (state.disk_used[b] - group_bytes[b]) for b, d in self.disk.items()},
            net_room=dict(self.network), max_changes=self.max_changes, keep_racks=self.keep_racks,
            objective=self.objective, time_limit=time_limit,
            warm_start={k: warm[k] for k in keys if k in warm} if warm else None,
            write_lp=self.write_lp if not self.decomposed else None)


@dataclass(frozen=True)
class _CountLimits:
    """Per broker, the replica count the whole plan may leave: removed brokers empty; brokers that are down but
    not being removed keep what they hold (moving off them is not this plan's job); receivers reach the floor,
    givers come down to the ceiling, the others are not pushed further from the band."""
    lo: dict[int, int]
    hi: dict[int, int]
    dead: frozenset[int]

    @classmethod
    def of(cls, counts: Mapping[int, int], rack: Mapping[int, str | None], eligible: frozenset[int],
           receivers: frozenset[int], givers: frozenset[int], removed: frozenset[int], floor: int,
           ceil: int) -> _CountLimits:
        dead = frozenset(b for b in rack if b not in eligible and b not in removed)
        lo = {b: counts[b] if b in dead else (floor if b in receivers else min(floor, counts[b])) for b in rack}
        hi = {b: 0 if b in removed else counts[b] if b in dead else (ceil if b in givers else max(ceil, counts[b]))
              for b in rack}
        return cls(lo, hi, dead)


class _Rolling:
    """The cluster while its groups are solved in turn: the placement so far, and per broker its replica count and
    bytes (kept as each group's placement is taken, so every group sees the groups before it)."""

    def __init__(self, replicas: Mapping[Key, tuple[int, ...]], sizes: Mapping[Key, int],
                 rack: Mapping[int, str | None]) -> None:
        self.sizes = sizes
        self.assignment = {k: tuple(v) for k, v in replicas.items()}
        self.counts = {b: 0 for b in rack}
        self.disk_used = {b: 0 for b in rack}
        for k, reps in self.assignment.items():
            for b in reps:
                self.counts[b] = self.counts.get(b, 0) + 1
                self.disk_used[b] = self.disk_used.get(b, 0) + sizes.get(k, 0)

    def group_totals(self, keys: list[Key]) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        """The group's replicas, preferred leaders and bytes per broker."""
        counts = dict.fromkeys(self.counts, 0)
        leaders = dict.fromkeys(self.counts, 0)
        bytes_ = dict.fromkeys(self.counts, 0)
        for k in keys:
            reps = self.assignment[k]
            for b in reps:
                counts[b] += 1
                bytes_[b] += self.sizes.get(k, 0)
            leaders[reps[0]] += 1
        return counts, leaders, bytes_

    def take(self, keys: list[Key], placed: Mapping[Key, tuple[int, ...]]) -> None:
        for k in keys:
            size = self.sizes.get(k, 0)
            for b in self.assignment[k]:
                self.counts[b] -= 1
                self.disk_used[b] -= size
            new = placed[k]
            for b in new:
                self.counts[b] += 1
                self.disk_used[b] += size
            self.assignment[k] = new


def _topic_groups(replicas: Mapping[Key, tuple[int, ...]], per_partition: int, max_variables: int) -> list[list[Key]]:
    """Whole topics packed in order into groups of at most ``max_variables`` variables (``per_partition`` each)."""
    by_topic: dict[str, list[Key]] = {}
    for k in sorted(replicas):
        by_topic.setdefault(k[0], []).append(k)
    groups: list[list[Key]] = [[]]
    for keys in by_topic.values():
        if groups[-1] and (len(groups[-1]) + len(keys)) * per_partition > max_variables:
            groups.append([])
        groups[-1].extend(keys)
    return groups


def _overall_status(solved: list[SubProblemStats], groups: int) -> tuple[str, highs.Outcome, float | None]:
    """The decomposed program's status, outcome and gap from its solved groups' (optimal only when every group is)."""
    if not solved:
        return "Time limit reached", "time_limit", None  # before any group had a solution
    gap = max((s["gap"] or 0.0) for s in solved)
    if groups == 1:
        return solved[0]["status"], solved[0]["outcome"], gap
    if len(solved) == groups and all(s["outcome"] == "optimal" for s in solved):
        return "Optimal", "optimal", gap
    return "Feasible", "feasible", gap
