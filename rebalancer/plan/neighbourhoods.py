"""Exact repair a few brokers at a time (a large neighbourhood search) for the brokers ``load_greedy`` leaves
outside a band on a cluster too large for the whole 0/1 program (``lp_load``).

Greedy makes one move (or one exchange) at a time, each lowering the total violation on its own. A broker that
holds two of the cluster's largest partitions and a sixth of the median replica count needs a large partition out
and dozens of small ones in: every first step of that pushes some broker further out of its disk band, so greedy
stops there. The exact program finds such plans, but its root alone takes a minute at a thousand replicas.

So the program runs on a *neighbourhood*: the broker furthest outside the gates' bands; the brokers that share the
changes of its largest partitions whose change cap is used (``LINKED``: moving such a replica off it needs the
earlier change undone or moved on); and the brokers whose deviations best complement its own (above where it is
below, in each dimension, by priority), at least ``PARTNERS`` and as many more as it takes for their room inside
their bands to hold ``ROOM`` times what the centre is outside by (a neighbourhood's total load stays in it). Up to
``CANDIDATES`` of their partitions (a spread over each broker's sizes) are free to move among them, everything else
stays where it is, counted as fixed load. The program is ``lp_load``'s weighted one (counts beyond their gate band
first, then each dimension's band by priority, then the fewest bytes), with the changes made so far counted against
the change cap (a replica the plan added may move on, or back) and a node limit: work, so the placement is the same
on any machine. Its wall clock is only a safety net; a program it cuts is not kept (the cut depends on the machine)
and the stats say so. A neighbourhood's new placement is kept when it brings its brokers nearer their gate bands
(replica counts, then the load bands, then the planner's narrower bands), or as near with fewer bytes moved.

Rounds go on, the worst broker not yet tried first, until no broker is outside a gate band, every broker outside has
been tried since the last gain on the gates' bands, ``MAX_ROUNDS``, the plan's work limit (``budget.Work``: the
programs' LP iterations, which every program here is charged), or the deadline. A broker the mode keeps outside whatever the
placement (``sum_proofs.one_way``) is not a neighbourhood's centre. Every kept placement is whole and valid (racks,
change cap and capacity limits are the program's constraints), so a cut-short repair is valid too.

Then the bytes: up to ``TRIM_ROUNDS`` neighbourhoods, each around the broker that receives most (not yet tried)
with the brokers its replicas came from, where undoing a move or moving a replica on from where it was can carry
fewer bytes for the same balance; kept only when the brokers end as near their bands as before. It stops after
``TRIM_PATIENCE`` programs in a row kept nothing, or once the plan copies at most ``TRIM_ENOUGH`` times the bytes
bound (``bounds.bytes_moved_bound``, which the planner passes): a second a program is not worth less than that;
or, as the repair, at the work limit.
A trimming program stops at ``TRIM_NODE_LIMIT`` nodes: what it finds, it finds early from its start.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Mapping, Sequence
from typing import TypedDict

from ..load import Band
from .budget import Deadline, Work
from .highs import timed_out
from .load_problem import LoadInput, add_fixed, broker_violation, mean_target, median_gate_band, violation_unit
from .lp_load import COUNTS, lp_load
from .sum_proofs import one_way

__all__ = ["NeighbourhoodStats", "repair_neighbourhoods", "PARTNERS", "MAX_PARTNERS", "CANDIDATES", "MAX_ROUNDS",
           "TRIM_ENOUGH"]

PARTNERS = 5         # brokers beside the centre in one neighbourhood, at least
MAX_PARTNERS = 15    # and at most
LINKED = 3           # the centre's largest partitions whose change cap is used: their changes' brokers join it
ROOM = 2.0           # their room within their bands, at least this many times what the centre is outside its own by
CANDIDATES = 240     # partitions a neighbourhood may move, shared among its brokers (a spread over the sizes)
MAX_ROUNDS = 30      # programs per repair (work: a few seconds each at most, well inside the plan's time)
TRIM_ROUNDS = 20     # programs after it, for fewer bytes
TRIM_ENOUGH = 1.02   # ... until the plan copies at most this many times the bytes bound
TRIM_NODE_LIMIT = 50  # ... each stopping at this many nodes: it starts from a placement inside its bands and only
#                       looks for fewer bytes; at the repair's 500 such programs ran 17-27 s each without beating
#                       their start (fuzz small seed 61) until the phase's clock cut the plan short
TRIM_PATIENCE = 5    # ... or this many in a row kept nothing
GAP = 0.05           # a neighbourhood's program stops this near its optimum: the bands come first, then the bytes
SOLVE_SECONDS = 60.0  # one program's wall-clock safety net (its node limit decides first): twice the slowest seen,
#                       27 s (fuzz small seeds 61 and 157, 500 nodes or a trim's 50), where 30 s had cut programs
#                       on a busy machine and dropped them: the plan then depended on the load
SHORTCUT_WINDOW = 8  # arrivals of about a departure's size tried against it (``_shortcuts``), on each side
SHORTCUT_PASSES = 4  # passes over the brokers, while the last found one
Key = tuple[float, float, float]


class NeighbourhoodStats(TypedDict):
    """What the repair did: programs solved, placements kept for balance and for fewer bytes, moves cut short
    (``_shortcuts``) and the bytes that saved, brokers left outside a gate band, whether the deadline or a
    program's safety net cut it short, and its seconds."""

    rounds: int
    kept: int
    trimmed: int
    shortcuts: int
    shortcut_bytes: int
    outside_bands: list[int]
    cut_short: bool
    work_spent: bool
    lp_iterations: int
    seconds: float


class _State:
    """The placement being repaired and every broker's load per dimension."""

    def __init__(self, inp: LoadInput, placed: Mapping[int, tuple[int, ...]], work: Work | None = None) -> None:
        self.inp = inp
        self.work = work or Work(math.inf)  # the plan's programs' work limit (``budget.Work``), charged by each
        self.dims = [d for d in inp.bands if d in inp.units]
        self.assign: list[tuple[int, ...]] = [tuple(placed.get(i, reps)) for i, reps in enumerate(inp.replicas)]
        self.origin = inp.baseline  # what changes and bytes count from (``LoadInput.origin``)
        brokers = sorted(set(inp.rack))
        self.load = {d: dict.fromkeys(brokers, 0.0) for d in self.dims}
        self.before = {d: dict.fromkeys(brokers, 0.0) for d in self.dims}
        add_fixed(inp, self.load)
        add_fixed(inp, self.before)
        self.holders: dict[int, set[int]] = {b: set() for b in brokers}
        for i, (reps, now) in enumerate(zip(inp.replicas, self.assign, strict=True)):
            for d in self.dims:
                u = inp.units[d][i]
                for b in now:
                    self.load[d][b] += u
                for b in reps:
                    self.before[d][b] += u
            for b in now:
                self.holders[b].add(i)
        gate = inp.gate_bands or inp.bands
        self.mean = {d: mean_target(gate[d]) for d in self.dims}
        self._gate: dict[str, Mapping[int, Band]] | None = None
        self.movers = sorted((inp.givers | inp.receivers) - inp.removed)
        self.mover_set = frozenset(self.movers)
        self.size = inp.units["disk"] if "disk" in inp.units else inp.units[self.dims[0]]  # what orders partitions
        self.lp_iterations = 0  # the programs' work so far (``highs.SolveResult``)

    def changed(self) -> None:
        """The placement changed: the counts' median may have moved."""
        self._gate = None

    def gate(self) -> Mapping[str, Mapping[int, Band]]:
        """The bands the gates measure; counts at the placement's current median (``median_gate_band``) where the
        input says how their gate measures (a band around the average lets a count pass that the median fails:
        fuzz small seed 151 ended at 30 replicas for an average of 26.6 and a median of 26)."""
        if self._gate is None:
            base = self.inp.gate_bands or self.inp.bands
            self._gate = dict(base)
            for d, band in (self.inp.count_gate or {}).items():
                if d in base and d in self.load:
                    self._gate[d] = median_gate_band({b: self.load[d][b] for b in base[d]}, band)
        return self._gate

    def used_cap(self, i: int) -> bool:
        """Has partition i as many replicas outside its original list as the change cap allows?"""
        return sum(1 for b in self.assign[i] if b not in self.origin[i]) >= self.inp.max_changes

    def key(self, brokers: Sequence[int], load: Mapping[str, Mapping[int, float]]) -> Key:
        """How these brokers stand (lower is better): replica counts outside their gate band, the load outside
        the gates' bands by priority (one-way brokers as the gates judge them), outside the planner's bands."""
        inp = self.inp
        gate = self.gate()
        counts = loads = planner = 0.0
        for d in self.dims:
            for b in brokers:
                v = load[d][b]
                g = gate[d].get(b)
                if g is not None:
                    if d in COUNTS:
                        counts += max(0.0, v - g.ceil) + max(0.0, g.floor - v)
                    else:
                        loads += broker_violation(inp, d, b, g, self.mean[d], v, self.before[d][b])
                p = inp.bands[d].get(b)
                if p is not None:
                    planner += broker_violation(inp, d, b, p, self.mean[d], v)
        return round(counts, 9), round(loads, 9), round(planner, 9)

    def deviation(self, b: int) -> dict[str, float]:
        """Broker b's signed distance from its target per dimension, in target units, weighted by priority."""
        inp = self.inp
        out = {}
        for d in self.dims:
            band = self.gate()[d].get(b)
            if band is not None:
                out[d] = inp.weight.get(d, 1.0) * (self.load[d][b] - band.average) / violation_unit(band.average,
                                                                                                   self.mean[d])
        return out


def _partners(state: _State, x: int) -> list[int]:
    """The brokers whose deviations best complement x's (opposite signs, large) and that may trade with x (x only
    gives: they must take; x only takes: they must give), at least ``PARTNERS`` and as many more (up to
    ``MAX_PARTNERS``) as it takes for their room inside their planner bands to hold what x is outside its own by, in
    every dimension: a neighbourhood's total load stays in it, so its brokers can only all end inside together."""
    inp = state.inp
    dx = state.deviation(x)
    scored = []
    for y in state.movers:
        if y == x:
            continue
        if x not in inp.receivers and y not in inp.receivers or x not in inp.givers and y not in inp.givers:
            continue
        dy = state.deviation(y)
        scored.append((-sum(-dx[d] * dy.get(d, 0.0) for d in dx), y))
    scored.sort()
    # per dimension: how far x is outside its planner band (+ above, - below); the room the partners offer
    need = {}
    for d in state.dims:
        band = inp.bands[d].get(x)
        if band is not None:
            v = state.load[d][x]
            need[d] = max(0.0, v - band.ceil) - max(0.0, band.floor - v)
    room = dict.fromkeys(need, 0.0)
    out: list[int] = []

    def join(y: int) -> None:
        out.append(y)
        for d, n in need.items():
            band = inp.bands[d].get(y)
            if band is not None and n:
                v = state.load[d][y]
                room[d] += max(0.0, band.ceil - v) if n > 0 else max(0.0, v - band.floor)

    # First the brokers that share the changes of x's largest partitions whose change cap is used: moving such a
    # replica off x needs the plan's earlier change to it undone or moved on, inside the neighbourhood.
    size = state.size
    pinned = sorted(((size[i], i) for i in state.holders[x] if state.used_cap(i)), reverse=True)[:LINKED]
    for _, i in pinned:
        for y in sorted(set(state.origin[i]).symmetric_difference(state.assign[i])):
            if y != x and y not in out and y in state.mover_set:
                join(y)
    for _, y in scored:
        if len(out) >= MAX_PARTNERS or len(out) >= PARTNERS and all(
                room[d] >= ROOM * abs(n) for d, n in need.items()):
            break
        if y not in out:
            join(y)
    return out


def _candidates(state: _State, hood: Sequence[int]) -> list[int]:
    """The partitions a neighbourhood may move: those on its brokers, up to ``CANDIDATES`` in all, shared among the
    brokers. On each, first (up to half its share, largest first) the replicas the plan brought there: they are what
    undoing or redirecting a move needs; then the rest spread evenly over its sizes. Changes the plan made so far
    count against the change cap (``LoadInput.origin``): a replica it added may move on, or back."""
    size = state.size
    chosen: set[int] = set()
    each = max(2, CANDIDATES // len(hood))
    for b in hood:
        held = sorted((size[i], i) for i in state.holders[b])
        brought = [i for _, i in reversed(held) if b not in state.origin[i]][:each // 2]
        chosen.update(brought)
        rest = [(u, i) for u, i in held if i not in chosen]
        share = each - len(brought)
        if len(rest) > share:
            step = (len(rest) - 1) / max(1, share - 1)
            rest = [rest[round(k * step)] for k in range(share)]
        chosen.update(i for _, i in rest)
    return sorted(chosen)


def _solve(state: _State, hood: Sequence[int], parts: Sequence[int], seconds: float,
           node_limit: int) -> tuple[dict[int, tuple[int, ...]] | None, bool]:
    """The program on one neighbourhood: (new replicas of ``parts`` by partition, or None; whether its safety net
    cut it)."""
    inp, assign, dims = state.inp, state.assign, state.dims
    inside = frozenset(hood)
    fixed = {d: {b: state.load[d][b] for b in hood} for d in dims}  # what stays on them: all but the candidates
    for i in parts:
        for b in assign[i]:
            if b in inside:
                for d in dims:
                    fixed[d][b] -= inp.units[d][i]
    sub = LoadInput(
        replicas=[assign[i] for i in parts], topics=[inp.topics[i] for i in parts],
        units={d: [inp.units[d][i] for i in parts] for d in inp.units}, bands=inp.bands, rack=inp.rack,
        receivers=inp.receivers & inside, givers=inp.givers & inside, removed=frozenset(),
        max_changes=inp.max_changes, keep_racks=inp.keep_racks, weight=inp.weight, gate_bands=state.gate(),
        safe_bands=inp.safe_bands, fixed=fixed, origin=[state.origin[i] for i in parts])
    changed, stats = lp_load(sub, seconds, warm_start={}, node_limit=node_limit, gap=GAP, work=state.work)
    state.lp_iterations += stats["lp_iterations"] or 0
    cut = timed_out(stats)
    if changed is None or cut:  # what a clock cut depends on the machine: not kept, so the plan does not
        return None, cut
    return {i: changed.get(k, assign[i]) for k, i in enumerate(parts)}, cut


def _round(state: _State, hood: Sequence[int], deadline: Deadline, node_limit: int) -> tuple[int, bool]:
    """Solve one neighbourhood and keep its placement when it is better: (0 not kept, 1 kept for the planner's bands
    or the bytes alone, 2 kept nearer the gates' bands; whether a clock cut the program)."""
    inp = state.inp
    parts = _candidates(state, hood)
    if not parts:
        return 0, False
    new, cut = _solve(state, hood, parts, min(SOLVE_SECONDS, deadline.remaining()), node_limit)
    if new is None:
        return 0, cut
    load = {d: {b: state.load[d][b] for b in hood} for d in state.dims}
    for i, reps in new.items():
        for d in state.dims:
            u = inp.units[d][i]
            for b in state.assign[i]:
                if b in load[d]:  # a broker outside the neighbourhood keeps its replicas
                    load[d][b] -= u
            for b in reps:
                if b in load[d]:
                    load[d][b] += u
    moved_now = sum(_copied(inp, i, state.assign[i]) for i in new)
    moved_new = sum(_copied(inp, i, reps) for i, reps in new.items())
    old_key = (*state.key(hood, state.load), round(moved_now, 3))
    new_key = (*state.key(hood, load), round(moved_new, 3))
    if new_key >= old_key:
        return 0, cut
    for i, reps in new.items():
        for b in state.assign[i]:
            state.holders[b].discard(i)
        for b in reps:
            state.holders[b].add(i)
        state.assign[i] = reps
    for d in state.dims:
        state.load[d].update(load[d])
    state.changed()
    return (2 if new_key[:2] < old_key[:2] else 1), cut


def _arrivals(state: _State) -> dict[int, dict[int, float]]:
    """Per broker, the bytes the plan so far brings onto it, by the broker each replica came from."""
    size = state.size
    out: dict[int, dict[int, float]] = {}
    for i, now in enumerate(state.assign):
        reps = state.origin[i]
        if now == tuple(reps):
            continue
        added = [b for b in now if b not in reps]
        left = [b for b in reps if b not in now]
        for k, b in enumerate(added):
            src = out.setdefault(b, {})
            g = left[k] if k < len(left) else -1
            src[g] = src.get(g, 0.0) + size[i]
    return out


def _moves(inp: LoadInput, i: int, now: Sequence[int]) -> list[tuple[int, int]]:
    """Partition i's moves so far as (from, to) pairs: the brokers it left and those it joined, paired in order."""
    reps = inp.baseline[i]
    left = [b for b in reps if b not in now]
    added = [b for b in now if b not in reps]
    return list(zip(left, added, strict=True))  # a move keeps the replica count


def _shortcuts(state: _State) -> tuple[int, float]:
    """Moves that pass through a broker, cut short: where replica i arrived on b (from g) and replica j left b (for
    h), i may go to h at once and j stay on b. Only b and h change, by the difference of the two replicas, and their
    replica counts stay; kept when both stand as near their bands as before (``_State.key``), racks no fewer and no
    capacity limit passed. It copies j's bytes less (both i's and j's when h is g: each is back where it was). Topics
    whose partitions are alike make such pairs common: greedy, one move at a time, sends one broker's surplus on
    through another (fuzz medium seed 11: 290 GB both into and out of the same brokers, 18 % of what it copied).
    Each departure is paired with the arrivals nearest its size (``SHORTCUT_WINDOW`` on each side), brokers in
    order, until a pass finds none. Returns (shortcuts taken, bytes saved)."""
    inp, assign, size = state.inp, state.assign, state.size
    taken, saved = 0, 0.0
    for _ in range(SHORTCUT_PASSES):
        found = 0
        arrivals: dict[int, list[tuple[float, int, int]]] = {}   # b -> (size, i, from g)
        departures: dict[int, list[tuple[float, int, int]]] = {}  # b -> (size, j, to h)
        for i, now in enumerate(assign):
            if now != tuple(state.origin[i]):
                for g, r in _moves(inp, i, now):
                    arrivals.setdefault(r, []).append((size[i], i, g))
                    departures.setdefault(g, []).append((size[i], i, r))
        for b in state.movers:
            arr, dep = sorted(arrivals.get(b, ())), sorted(departures.get(b, ()), reverse=True)
            if not arr or not dep:
                continue
            used: set[int] = set()
            for sj, j, h in dep:
                if j in used or b in assign[j] or h not in assign[j]:
                    continue
                k = bisect.bisect_left(arr, (sj, -1, -1))
                for _, i, g in arr[max(0, k - SHORTCUT_WINDOW):k + SHORTCUT_WINDOW]:
                    if i == j or i in used or b not in assign[i] or (h != g and h in assign[i]):
                        continue
                    gain = _shortcut(state, b, h, i, j)
                    if gain is not None:
                        used.update((i, j))
                        found += 1
                        saved += gain
                        break
        taken += found
        if not found:
            break
    if taken:
        state.changed()
    return taken, saved


def _shortcut(state: _State, b: int, h: int, i: int, j: int) -> float | None:
    """Send i (arrived on b) to h instead and keep j (sent from b to h) on b, when the rule of ``_shortcuts`` allows:
    the bytes saved, or None (nothing changed)."""
    inp, assign = state.inp, state.assign
    new_i = tuple(h if x == b else x for x in assign[i])
    new_j = tuple(b if x == h else x for x in assign[j])
    if inp.keep_racks:
        racks = inp.rack
        for old, new in ((assign[i], new_i), (assign[j], new_j)):
            if len({racks.get(x) for x in new}) < len({racks.get(x) for x in old}):
                return None
    load = {d: {b: state.load[d][b], h: state.load[d][h]} for d in state.dims}
    for d in state.dims:
        du = inp.units[d][j] - inp.units[d][i]
        load[d][b] += du
        load[d][h] -= du
        for x in (b, h):
            band = inp.bands[d].get(x)
            if du and band is not None and band.limit is not None and load[d][x] > max(band.limit, state.load[d][x]):
                return None
    if state.key([b, h], load) > state.key([b, h], state.load):
        return None
    before = _copied(inp, i, assign[i]) + _copied(inp, j, assign[j])
    for x in assign[i]:
        state.holders[x].discard(i)
    for x in assign[j]:
        state.holders[x].discard(j)
    assign[i], assign[j] = new_i, new_j
    for x in new_i:
        state.holders[x].add(i)
    for x in new_j:
        state.holders[x].add(j)
    for d in state.dims:
        state.load[d].update(load[d])
    return before - _copied(inp, i, new_i) - _copied(inp, j, new_j)


def _copied(inp: LoadInput, i: int, now: Sequence[int]) -> float:
    """The bytes partition i copies when placed on ``now``: its size for each replica not where it was."""
    size = inp.units["disk"][i] if "disk" in inp.units else 0.0
    return size * sum(1 for b in now if b not in inp.baseline[i])


def repair_neighbourhoods(inp: LoadInput, placed: Mapping[int, tuple[int, ...]], deadline: Deadline | None = None,
                          *, node_limit: int, bytes_enough: float = 0.0, work: Work | None = None,
                          ) -> tuple[dict[int, tuple[int, ...]], NeighbourhoodStats]:
    """The placement ``placed`` (changed partitions by index) repaired neighbourhood by neighbourhood, then trimmed
    of bytes the same way until it copies at most ``bytes_enough``, and stats. ``work``: the plan's programs' work
    limit (``budget.Work``): no program starts once it is spent."""
    started = time.monotonic()
    deadline = deadline or Deadline.never()
    state = _State(inp, placed, work)
    rounds, kept, cut_short = _repair(state, deadline, node_limit)
    # Bytes: first the moves that pass through a broker, cut short (no program: a pass over the moves); then the
    # brokers that receive most, each with the brokers its replicas came from (undoing a move, or moving a replica
    # on from where it was, may carry less for the same balance), kept only as near the bands as before.
    shortcuts, shortcut_bytes = _shortcuts(state)
    trim_rounds, trimmed, trim_cut = _trim(state, deadline, node_limit, bytes_enough)
    out = sorted(b for _, b in _outside(state))
    changed = {i: reps for i, reps in enumerate(state.assign) if reps != tuple(inp.replicas[i])}
    return changed, {"rounds": rounds + trim_rounds, "kept": kept, "trimmed": trimmed, "shortcuts": shortcuts,
                     "shortcut_bytes": int(shortcut_bytes), "outside_bands": out,
                     "cut_short": cut_short or trim_cut, "work_spent": state.work.stopped_in is not None,
                     "lp_iterations": state.lp_iterations,
                     "seconds": round(time.monotonic() - started, 3)}


def _outside(state: _State) -> list[tuple[float, int]]:
    """The brokers outside a band, worst first (by the counts outside their gate, then the load outside)."""
    worst = []
    for b in state.movers:
        k = state.key([b], state.load)
        if k[0] > 0 or k[1] > 1e-12:
            worst.append((-(k[0] * 1e6 + k[1]), b))
    return sorted(worst)


def _repair(state: _State, deadline: Deadline, node_limit: int) -> tuple[int, int, bool]:
    """The worst broker outside a band with its partners, in turn, each neighbourhood a program (``_round``); a
    broker that cannot move one way (``one_way``) is not tried. (rounds, rounds kept, cut short)."""
    stuck = {b for bs in one_way(state.inp).values() for b in bs}
    rounds = kept = 0
    cut_short = False
    tried: set[int] = set()
    while rounds < MAX_ROUNDS:
        todo = [b for _, b in _outside(state) if b not in tried and b not in stuck]
        if not todo or not state.work.allows():
            break
        if not deadline.allows(1.0):
            cut_short = True
            break
        x = todo[0]
        tried.add(x)
        rounds += 1
        better, cut = _round(state, [x, *_partners(state, x)], deadline, node_limit)
        cut_short |= cut
        kept += better > 0
        if better == 2:
            tried.clear()  # nearer the gates' bands: every broker outside may be tried again
    return rounds, kept, cut_short


def _trim(state: _State, deadline: Deadline, node_limit: int, bytes_enough: float) -> tuple[int, int, bool]:
    """The brokers receiving most, in turn, each with the brokers its replicas came from, until the plan copies at
    most ``bytes_enough`` or ``TRIM_PATIENCE`` rounds in a row keep nothing. (rounds, rounds kept, cut short)."""
    tried: set[int] = set()
    rounds = trimmed = misses = 0
    cut_short = False
    for _ in range(TRIM_ROUNDS):
        if misses >= TRIM_PATIENCE:
            break
        arrivals = _arrivals(state)
        if sum(sum(src.values()) for src in arrivals.values()) <= bytes_enough:
            break
        most = sorted((-sum(src.values()), b) for b, src in arrivals.items() if b not in tried and b in state.mover_set)
        if not most or not state.work.allows():
            break
        if not deadline.allows(1.0):
            cut_short = True
            break
        x = most[0][1]
        tried.add(x)
        sources = [g for _, g in sorted((-v, g) for g, v in arrivals[x].items() if g in state.mover_set and g != x)]
        hood = [x, *sources[:MAX_PARTNERS]]
        if len(hood) < PARTNERS + 1:
            hood += [y for y in _partners(state, x) if y not in hood][:PARTNERS + 1 - len(hood)]
        rounds += 1
        better, cut = _round(state, hood, deadline, min(node_limit, TRIM_NODE_LIMIT))
        cut_short |= cut
        trimmed += better > 0
        misses = 0 if better else misses + 1
    return rounds, trimmed, cut_short
