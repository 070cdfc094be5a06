"""Leaders chosen exactly with network out in view, where the cluster is small enough for a 0/1 program.

The hand-overs of ``leader_load`` move one leadership (or swap two of a topic) at a time and stop where no single
step helps: on a small cluster whose partitions differ in size they leave network out 30-90 % off the mean (the main
job's 48 partitions), where a choice of all leaders at once, over the same replica sets, comes within the band. The
same input (``LeaderLoadInput``), three steps:

- ``build``: ``y[i,b]`` = broker b leads partition i, for each candidate b (a replica that may lead); partitions with
  one candidate are constants. ``one_i``: one leader each. ``count_b``: each broker's leader count within
  ``count_band`` (the leader gate's band with the planners' margin), softly (``gc_lo/gc_hi``) so that a start
  outside it still has a solution. Per leader dimension (network out) and broker: the range the network gate
  accepts (``accepted``) and the band, each with its slack; per (topic, broker): the topic's leader band.
- ``solve``: HiGHS (``highs.solve``, in a child process), warm-started from the hand-overs' leaders, a node limit
  (the same leaders on any machine however busy; a wall-clock limit only as a safety net, reported when it cut).
- ``extract``: the new leader of each partition whose leader changes.

Objective, lexicographic by weights far apart (each level's worst total stays below one unit of the level above on
the clusters this runs on): first what the gates check, leader counts outside their band (``W_COUNT`` per leader) >
network out beyond what its gate accepts (``W_GATE`` per target) > a topic's leaders outside the topic's band
(``W_TOPIC`` per leader: the flow's per-topic balance, which the topic-leader gate checks where the plan claims it);
then network out outside its band (``W_BAND`` per target) > leader changes from the leaders before the plan
(``W_CHANGE``).
The result is used only where it is no worse than the hand-overs' by that same objective (``score``).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Required, TypedDict

from ..load import Band
from . import highs
from .leader_load import LeaderLoadInput, leader_loads

__all__ = ["EXACT_MAX_PARTITIONS", "NODE_LIMIT", "BAND_MAX_PARTITIONS", "ExactLeaderStats", "GateRows", "band_leaders",
           "band_relaxation", "even_leaders", "exact_leaders", "score"]

EXACT_MAX_PARTITIONS = 300    # above this the hand-overs' result stands (the program would take too long)
NODE_LIMIT = 200              # branch-and-bound nodes: a work limit, the same leaders on any machine
SAFETY_SECONDS = 60.0         # wall-clock safety net only; the status says when it cut
BAND_SAFETY_SECONDS = 180.0   # ``band_leaders``' (fuzz medium seed 0: 21 s on a quiet machine, 7 of them PuLP's)
BAND_MAX_PARTITIONS = 100_000  # ``band_leaders`` up to this many partitions (64k: 6 s), the leader flow's limit too
BAND_NODE_LIMIT = 500          # its branch-and-bound nodes (work: the same leaders on any machine)
BAND_GAP = 0.5                 # and the gap it stops at: at most twice the fewest changes (fuzz medium 9: 132
#                                changes in 35 s; at 5 %, 111 in 83 s)
EVEN_GAP = 0.05                # ``even_leaders`` stops within 5 % of the least deviation
EVEN_CHANGES = 1e-3            # and all its leader changes together weigh this much deviation (0.1 %)
W_COUNT = 1e9
W_GATE = 1e7
W_TOPIC = 1e3
W_BAND = 10.0
W_CHANGE = 1e-3


def _terms(inp: LeaderLoadInput) -> tuple[list[str], list[int]]:
    dims = [d for d in inp.bands if d in inp.units]
    brokers = sorted({b for c in inp.candidates for b in c} | {b for d in dims for b in inp.bands[d]})
    return dims, brokers


def score(inp: LeaderLoadInput, leader: Sequence[int], original: Sequence[int]) -> float:
    """The program's objective for a leader choice: how two choices compare."""
    dims, brokers = _terms(inp)
    count = {b: 0 for b in brokers}
    load = {d: {b: 0.0 for b in brokers} for d in dims}
    by_topic: dict[tuple[str, int], int] = {}
    for i, b in enumerate(leader):
        count[b] = count.get(b, 0) + 1
        for d in dims:
            load[d][b] = load[d].get(b, 0.0) + inp.units[d][i]
        if inp.topics:
            key = (inp.topics[i], b)
            by_topic[key] = by_topic.get(key, 0) + 1
    busiest = {d: {b: 0.0 for b in brokers} for d in dims}
    for i, b in enumerate(leader):
        for d in dims:
            busiest[d][b] = max(busiest[d].get(b, 0.0), inp.units[d][i])
    total = 0.0
    for b, band in (inp.count_band or {}).items():
        total += W_COUNT * (band.deficit(count.get(b, 0)) + band.excess(count.get(b, 0)))
    for d in dims:
        for b, band in inp.bands[d].items():
            x, scale = load[d].get(b, 0.0), max(band.average, 1e-9)
            lo, hi = _widened((inp.accepted or {}).get(d, {}).get(b, (-1e300, 1e300)), band, busiest[d].get(b, 0.0))
            total += W_GATE * (max(0.0, lo - x) + max(0.0, x - hi)) / scale
            total += W_BAND * (max(0.0, band.floor - x) + max(0.0, x - band.ceil)) / scale
    if inp.topics and inp.topic_band:
        hosts: dict[str, set[int]] = {}
        for i, cands in enumerate(inp.candidates):
            hosts.setdefault(inp.topics[i], set()).update(cands or (leader[i],))
        for t, bs in hosts.items():
            tb = inp.topic_band.get(t)
            if tb is not None:
                total += W_TOPIC * sum(tb.deficit(by_topic.get((t, b), 0)) + tb.excess(by_topic.get((t, b), 0))
                                       for b in bs)
    total += W_CHANGE * sum(1 for a, b in zip(leader, original, strict=True) if a != b)
    return total


def _widened(accepted: tuple[float, float], band: Band, busiest_after: float) -> tuple[float, float]:
    """What the network gate accepts once the broker leads a partition of ``busiest_after``: the gate widens the band
    by the busiest partition a broker carries before or after the plan (``accepted`` holds the before)."""
    lo, hi = accepted
    return min(lo, band.floor - busiest_after), max(hi, band.ceil + busiest_after)


@dataclass
class _Program:
    """The exact leader program as ``exact_leaders`` builds it: the problem, its leader variables (``y``, per
    partition index and broker that may lead it), what cannot move (counts and loads of partitions with one
    choice, per broker and per (topic, broker)), the variables per broker and per (topic, broker), the objective."""

    prob: Any
    y: dict[tuple[int, int], Any] = field(default_factory=dict)
    fixed_count: dict[int, int] = field(default_factory=dict)
    fixed_load: dict[str, dict[int, float]] = field(default_factory=dict)
    fixed_topic: dict[tuple[str, int], int] = field(default_factory=dict)
    by_broker: dict[int, list[tuple[int, Any]]] = field(default_factory=dict)
    by_topic: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    objective: list[Any] = field(default_factory=list)

    def soft(self, name: str, expr: Any, low: float, high: float, weight: float, start: float) -> None:
        """``low <= expr <= high`` with a slack on each side costing ``weight``, started at ``start``'s values."""
        lo = self.prob.add_variable(f"{name}_lo", lowBound=0)
        hi = self.prob.add_variable(f"{name}_hi", lowBound=0)
        lo.setInitialValue(max(0.0, low - start))
        hi.setInitialValue(max(0.0, start - high))
        self.prob.addConstraint(expr + lo >= low, f"{name}_low")
        self.prob.addConstraint(expr - hi <= high, f"{name}_high")
        self.objective.extend((weight * lo, weight * hi))


class ExactLeaderStats(TypedDict, total=False):
    """The program over every leader, as solved: its solve (status, ``highs.Outcome``, gap), size and node limit,
    whether its safety net cut it, (with a solution) the score before and after, and its seconds; only the status
    and the seconds where there was nothing to choose."""

    algorithm: str
    status: Required[str]
    outcome: highs.Outcome
    variables: int
    gap: float | None
    node_limit: int
    cut_by_safety_net: bool
    score_before: float
    score_after: float
    max_deviation_pct: float
    deviation_pct_before: float
    deviation_pct_after: float
    seconds: Required[float]


def exact_leaders(inp: LeaderLoadInput, original: Sequence[int], node_limit: int = NODE_LIMIT,
                  seconds: float = SAFETY_SECONDS) -> tuple[dict[int, int] | None, ExactLeaderStats]:
    """(new leader per partition index whose leader differs from ``inp.leader``, or None when the program found
    nothing better; stats). ``original``: each partition's leader before the plan (changes are counted from it);
    ``seconds``: the wall-clock safety net (the plan stage's time left), reported when it cut."""
    import pulp

    started = time.monotonic()
    dims, brokers = _terms(inp)
    pg = _Program(pulp.LpProblem("leaders_on_load", pulp.LpMinimize),
                  fixed_count={b: 0 for b in brokers}, fixed_load={d: {b: 0.0 for b in brokers} for d in dims})
    _leader_variables(pg, inp, dims, original)
    start_count = {b: pg.fixed_count.get(b, 0) + sum(1 for i, _ in pg.by_broker.get(b, ()) if inp.leader[i] == b)
                   for b in brokers}
    for b, band in (inp.count_band or {}).items():
        if pg.by_broker.get(b):
            pg.soft(f"count_{b}", pulp.lpSum(v for _, v in pg.by_broker[b]) + pg.fixed_count.get(b, 0), band.floor,
                    band.ceil, W_COUNT, start_count.get(b, 0))
    for d in dims:
        for b, band in inp.bands[d].items():
            _load_rows(pg, inp, d, b, band)
    if inp.topic_band:
        for (t, b), vs in pg.by_topic.items():
            tband = inp.topic_band.get(t)
            if tband is None:
                continue
            start = pg.fixed_topic.get((t, b), 0) + sum(1 for v in vs if (v.varValue or 0) > 0.5)
            pg.soft(f"topic_{len(pg.objective)}", pulp.lpSum(vs) + pg.fixed_topic.get((t, b), 0), tband.floor,
                    tband.ceil, W_TOPIC, start)
    if not pg.y:
        return None, ExactLeaderStats(status="nothing to choose", seconds=round(time.monotonic() - started, 3))
    pg.prob += pulp.lpSum(pg.objective), "objective"
    return _solve(pg, inp, original, node_limit, seconds, started)


def _leader_variables(pg: _Program, inp: LeaderLoadInput, dims: Sequence[str], original: Sequence[int]) -> None:
    """A binary per partition and broker that may lead it (started at the hand-overs' leader), exactly one per
    partition, each change from ``original`` costing ``W_CHANGE``; a partition with one choice is fixed load."""
    import pulp

    prob = pg.prob
    for i, cands in enumerate(inp.candidates):
        options = [b for b in dict.fromkeys(cands)] or [inp.leader[i]]
        if inp.leader[i] not in options:
            options = [inp.leader[i]]  # a leader the flow kept though it may not lead: left as it is
        topic = inp.topics[i] if inp.topics else None
        if len(options) == 1:
            b = options[0]
            pg.fixed_count[b] = pg.fixed_count.get(b, 0) + 1
            for d in dims:
                pg.fixed_load[d][b] = pg.fixed_load[d].get(b, 0.0) + inp.units[d][i]
            if topic is not None:
                pg.fixed_topic[(topic, b)] = pg.fixed_topic.get((topic, b), 0) + 1
            continue
        for b in options:
            v = prob.add_variable(f"y_{i}_{b}", cat="Binary")
            v.setInitialValue(1 if b == inp.leader[i] else 0)
            pg.y[(i, b)] = v
            pg.by_broker.setdefault(b, []).append((i, v))
            if topic is not None:
                pg.by_topic.setdefault((topic, b), []).append(v)
            if b != original[i]:
                pg.objective.append(W_CHANGE * v)
        prob += pulp.lpSum(pg.y[(i, b)] for b in options) == 1, f"one_{i}"


def _load_rows(pg: _Program, inp: LeaderLoadInput, d: str, b: int, band: Band) -> None:
    """Broker ``b``'s leader load in ``d``: within what its gate accepts (``accepted``; the gate's slack is the
    busiest partition led before or after: leading partition i widens the range by what i adds beyond it, ``w``
    the one partition whose size counts, at most one, led by b), then within its band."""
    import pulp

    prob, by_broker = pg.prob, pg.by_broker
    terms = [inp.units[d][i] * v for i, v in by_broker.get(b, ()) if inp.units[d][i]]
    if not terms:
        return
    expr = pulp.lpSum(terms) + pg.fixed_load[d].get(b, 0.0)
    start = pg.fixed_load[d].get(b, 0.0) + sum(inp.units[d][i] for i, _ in by_broker.get(b, ()) if inp.leader[i] == b)
    scale = max(band.average, 1e-9)
    lo, hi = (inp.accepted or {}).get(d, {}).get(b, (None, None))
    if lo is not None and hi is not None:
        wide = []
        for i, v in by_broker.get(b, ()):
            w_lo, w_hi = _widened((lo, hi), band, inp.units[d][i])
            if w_hi > hi or w_lo < lo:
                w = prob.add_variable(f"w_{d}_{i}_{b}", cat="Binary")
                w.setInitialValue(0)
                prob.addConstraint(w <= v, f"wlead_{d}_{i}_{b}")
                wide.append((w, lo - w_lo, w_hi - hi))
        if wide:
            prob.addConstraint(pulp.lpSum(w for w, _, _ in wide) <= 1, f"wone_{d}_{b}")
            g_lo = prob.add_variable(f"gate_{d}_{b}_lo", lowBound=0)
            g_hi = prob.add_variable(f"gate_{d}_{b}_hi", lowBound=0)
            g_lo.setInitialValue(max(0.0, lo - start))
            g_hi.setInitialValue(max(0.0, start - hi))
            prob.addConstraint(expr + g_lo + pulp.lpSum(x * w for w, x, _ in wide) >= lo, f"gate_{d}_{b}_low")
            prob.addConstraint(expr - g_hi - pulp.lpSum(x * w for w, _, x in wide) <= hi, f"gate_{d}_{b}_high")
            pg.objective.extend((W_GATE / scale * g_lo, W_GATE / scale * g_hi))
        else:
            pg.soft(f"gate_{d}_{b}", expr, lo, hi, W_GATE / scale, start)
    pg.soft(f"band_{d}_{b}", expr, band.floor, band.ceil, W_BAND / scale, start)


def _solve(pg: _Program, inp: LeaderLoadInput, original: Sequence[int], node_limit: int, seconds: float,
           started: float) -> tuple[dict[int, int] | None, ExactLeaderStats]:
    """HiGHS in a child process killed past the safety net (``highs.solve``; its branch and bound is deterministic
    with a fixed seed); the leaders it chose, kept only where they score better than the hand-overs'."""
    result = highs.solve(pg.prob, max(0.1, min(SAFETY_SECONDS, seconds)), warm=True, gap=1e-9,
                         options={"mip_max_nodes": int(node_limit), "random_seed": 0})
    status, have, gap = result["status"], result["have_solution"], result["gap"]
    stats = ExactLeaderStats(algorithm="0/1 program over every leader (HiGHS)", status=status,
                             outcome=result["outcome"], variables=len(pg.y), gap=gap, node_limit=node_limit,
                             cut_by_safety_net=highs.timed_out(result), seconds=0.0)
    if not have:
        stats["seconds"] = round(time.monotonic() - started, 3)
        return None, stats
    leader = list(inp.leader)
    for (i, b), v in pg.y.items():
        if (v.varValue or 0) > 0.5:
            leader[i] = b
    before, after = score(inp, inp.leader, original), score(inp, leader, original)
    stats["score_before"], stats["score_after"] = round(before, 6), round(after, 6)
    stats["seconds"] = round(time.monotonic() - started, 3)
    if after >= before - 1e-9:
        return None, stats
    return {i: b for i, b in enumerate(leader) if b != inp.leader[i]}, stats


@dataclass(frozen=True)
class GateRows:
    """The leader gate as rows (``band_leaders``; the gate: every count within max(band x median, 1) of the counts'
    median). Relaxed (``to_use`` False): every eligible broker's leader count within ``band`` x a median the program
    chooses, plus one, so that every leader choice the gate passes satisfies them and a program they make infeasible
    proves that no choice the gate passes meets the load bands."""

    band: float
    brokers: frozenset[int]
    # True: rows every solution of which passes the gate, and the fewest leaders changed: leaders to use. The median
    # is bracketed, [low, high], by more than half the counts on each side (then the counts' median lies within
    # it) and every count lies within the allowance of both ends (``count_allowance``, at the lower end's).
    to_use: bool = False


def band_leaders(inp: LeaderLoadInput, count_band: Mapping[int, Band] | GateRows, node_limit: int = BAND_NODE_LIMIT,
                 seconds: float = BAND_SAFETY_SECONDS) -> tuple[dict[int, int] | None, ExactLeaderStats]:
    """Every leader at once with the bands as hard rows, on a cluster too large for ``exact_leaders`` (whose slack and
    per-topic rows take minutes there): each broker's leader load within its band in every leader dimension (network
    out), its leader count within ``count_band`` (one any counts inside of pass the leader gate), and the fewest
    leaders changed from ``inp.leader`` (the hand-overs', on the flow's per-topic balance: kept wherever the bands
    allow). Where the hand-overs stop, a leadership that helps one broker pushes its other candidate out of the band;
    all at once, the choice goes round (fuzz medium seed 0, 32k partitions at RF 2: network out 78 % off the mean
    after the hand-overs, 10 % after this, 77 leaders changed from theirs). (New leader per partition index whose
    leader differs from ``inp.leader``, or None: no solution within the node limit, or the bands cannot all hold at
    once with these counts; stats.) With ``GateRows`` the program asks only whether any choice does (no objective):
    "infeasible" is then a proof that no leaders the leader gate passes put every broker within its bands; with
    ``GateRows.to_use``, the leaders it finds pass the gate."""
    import pulp

    started = time.monotonic()
    pg, dims = _every_leader("leaders_in_bands", inp, count_band)
    if not pg.y:
        return None, ExactLeaderStats(status="nothing to choose", seconds=round(time.monotonic() - started, 3))
    for d in dims:
        for b, band in inp.bands[d].items():
            expr, k = _scaled_load(pg, inp, d, b, band)
            pg.prob.addConstraint(expr >= band.floor * k, f"band_{d}_{b}_low")
            pg.prob.addConstraint(expr <= band.ceil * k, f"band_{d}_{b}_high")
    proof_only = isinstance(count_band, GateRows) and not count_band.to_use
    pg.prob += pulp.lpSum([] if proof_only else pg.objective), "objective"
    return _chosen(pg, inp, started, node_limit, seconds, BAND_GAP, False,
                   "0/1 program over every leader, the bands as rows (HiGHS)")


def even_leaders(inp: LeaderLoadInput, count_band: Mapping[int, Band] | GateRows, node_limit: int = BAND_NODE_LIMIT,
                 seconds: float = BAND_SAFETY_SECONDS) -> tuple[dict[int, int] | None, ExactLeaderStats]:
    """Where no choice of leaders puts every broker within its bands (``band_leaders`` infeasible, or not even a
    fractional choice does: ``band_relaxation``): the choice that brings the furthest broker nearest its target,
    as even as the replica sets allow. The same program as ``band_leaders``, the bands replaced by one deviation
    ``z`` every broker's leader load stays within (in each leader dimension, as a share of its target), minimised,
    and no topic's leaders further outside its band than ``inp.leader`` leaves them (``inp.topic_band``: the main
    job's plans claim every topic's band, and the hand-overs keep it; without these rows, seeds 0-5 lost it for
    network out 2.5 points nearer its target), and no broker beyond what its network gate accepts
    (``inp.accepted``) where it was within, nor further beyond where it was not (the furthest broker nearer at the
    cost of another's gate: an add-brokers plan whose broker 0 went from 33 % to 73 % below its target, past it);
    then the fewest leaders changed from ``inp.leader``, all of them together weighing less than ``EVEN_CHANGES`` of
    ``z``. Stops within ``EVEN_GAP`` of the least ``z`` or at its nodes. (New leader per partition index whose
    leader differs from ``inp.leader``, or None; stats, with ``max_deviation_pct``: ``z`` found.)"""
    import pulp

    started = time.monotonic()
    pg, dims = _every_leader("even_leaders", inp, count_band, topics=True)
    if not pg.y:
        return None, ExactLeaderStats(status="nothing to choose", seconds=round(time.monotonic() - started, 3))
    z = pg.prob.add_variable("deviation", lowBound=0)
    start = leader_loads(inp, inp.leader)
    for d in dims:
        now = start[d]
        for b, band in inp.bands[d].items():
            expr, k = _scaled_load(pg, inp, d, b, band)
            pg.prob.addConstraint(expr - z <= band.average * k, f"even_{d}_{b}_high")
            pg.prob.addConstraint(expr + z >= band.average * k, f"even_{d}_{b}_low")
            if (accepted := (inp.accepted or {}).get(d, {}).get(b)) is not None:
                pg.prob.addConstraint(expr >= min(accepted[0], now[b]) * k, f"gate_{d}_{b}_low")
                pg.prob.addConstraint(expr <= max(accepted[1], now[b]) * k, f"gate_{d}_{b}_high")
    per_change = EVEN_CHANGES / max(1, len(pg.objective)) / W_CHANGE
    pg.prob += z + per_change * pulp.lpSum(pg.objective), "objective"
    found, stats = _chosen(pg, inp, started, node_limit, seconds, EVEN_GAP, True,
                           "0/1 program over every leader, the largest deviation from the targets least (HiGHS)")
    if found is not None:
        stats["max_deviation_pct"] = round(100.0 * (z.varValue or 0.0), 2)
    return found, stats


def _every_leader(name: str, inp: LeaderLoadInput, count_band: Mapping[int, Band] | GateRows,
                  topics: bool = False) -> tuple[_Program, list[str]]:
    """``band_leaders``' and ``even_leaders``' program so far: a variable per partition and broker that may lead it,
    leader counts within ``count_band``; with ``topics``, no topic's leaders on a broker further outside the topic's
    band than ``inp.leader`` leaves them (so the topic-leader gate, where the plan claims it, still holds); and the
    leader dimensions."""
    import pulp

    dims, brokers = _terms(inp)
    pg = _Program(pulp.LpProblem(name, pulp.LpMinimize),
                  fixed_count={b: 0 for b in brokers}, fixed_load={d: {b: 0.0 for b in brokers} for d in dims})
    _leader_variables(pg, inp if topics else dataclasses.replace(inp, topics=()), dims, inp.leader)
    if pg.y:
        _count_rows(pg, count_band)
    topic_band = (inp.topic_band or {}) if topics else {}
    for k, ((t, b), vs) in enumerate(pg.by_topic.items()):
        if (band := topic_band.get(t)) is not None:
            now = pg.fixed_topic.get((t, b), 0) + sum(1 for v in vs if (v.varValue or 0) > 0.5)  # started at inp.leader
            expr = pulp.lpSum(vs) + pg.fixed_topic.get((t, b), 0)
            pg.prob.addConstraint(expr <= max(band.ceil, now), f"topic_{k}_high")
            pg.prob.addConstraint(expr >= min(band.floor, now), f"topic_{k}_low")
    return pg, dims


def _scaled_load(pg: _Program, inp: LeaderLoadInput, d: str, b: int, band: Band) -> tuple[Any, float]:
    """Broker ``b``'s leader load in ``d`` in units of its target (bytes beside counts leave HiGHS badly scaled),
    and that unit's factor."""
    import pulp

    k = 1.0 / max(band.average, 1e-9)
    expr = pulp.lpSum(inp.units[d][i] * k * v for i, v in pg.by_broker.get(b, ()) if inp.units[d][i])
    return expr + pg.fixed_load[d].get(b, 0.0) * k, k


def _chosen(pg: _Program, inp: LeaderLoadInput, started: float, node_limit: int, seconds: float, gap: float,
            warm: bool, algorithm: str) -> tuple[dict[int, int] | None, ExactLeaderStats]:
    """Solve (``highs.solve``: ``node_limit`` nodes, ``seconds`` only a safety net) and read the new leaders."""
    result = highs.solve(pg.prob, max(0.1, min(BAND_SAFETY_SECONDS, seconds)), warm=warm, gap=gap,
                         options={"mip_max_nodes": int(node_limit), "random_seed": 0})
    stats = ExactLeaderStats(algorithm=algorithm, status=result["status"], outcome=result["outcome"],
                             variables=len(pg.y), gap=result["gap"], node_limit=node_limit,
                             cut_by_safety_net=highs.timed_out(result), seconds=round(time.monotonic() - started, 3))
    if not result["have_solution"]:
        return None, stats
    chosen = {i: b for (i, b), v in pg.y.items() if (v.varValue or 0) > 0.5}
    return {i: b for i, b in chosen.items() if b != inp.leader[i]}, stats


def _count_rows(pg: _Program, counts: Mapping[int, Band] | GateRows) -> None:
    """Each broker's leader count within its band, or within the leader gate's relaxed rows (``GateRows``)."""
    import pulp

    def count(b: int) -> Any:
        return pulp.lpSum(v for _, v in pg.by_broker.get(b, ())) + pg.fixed_count.get(b, 0)

    if isinstance(counts, GateRows) and counts.to_use:
        _median_rows(pg, counts, count)
        return
    if isinstance(counts, GateRows):
        median = pg.prob.add_variable("median", lowBound=0)
        for b in sorted(counts.brokers):
            pg.prob.addConstraint(count(b) - (1 + counts.band) * median <= 1, f"gate_{b}_high")
            pg.prob.addConstraint(count(b) - (1 - counts.band) * median >= -1, f"gate_{b}_low")
        return
    for b, band in counts.items():
        pg.prob.addConstraint(count(b) >= band.floor, f"count_{b}_low")
        pg.prob.addConstraint(count(b) <= band.ceil, f"count_{b}_high")


def _median_rows(pg: _Program, gate: GateRows, count: Callable[[int], Any]) -> None:
    """``GateRows.to_use``: the median within [low, high] (more than half the counts at most ``high``, more than
    half at least ``low``: ``below_b``/``above_b`` say which), every count within ``allow`` of both ends, ``allow`` at
    most max(band x low, 1) (``one`` says which term), so at most the allowance at the counts' median."""
    import pulp

    brokers = sorted(gate.brokers)
    big = sum(len(v) for v in pg.by_broker.values()) + sum(pg.fixed_count.values()) + 1.0  # above any count
    low, high, allow = (pg.prob.add_variable(n, lowBound=0) for n in ("median_low", "median_high", "allow"))
    one = pg.prob.add_variable("allow_one", cat="Binary")
    pg.prob.addConstraint(low <= high, "median_order")
    pg.prob.addConstraint(allow <= gate.band * low + big * one, "allow_band")
    pg.prob.addConstraint(allow <= 1 + big * (1 - one), "allow_at_most_one")
    below = {b: pg.prob.add_variable(f"below_{b}", cat="Binary") for b in brokers}
    above = {b: pg.prob.add_variable(f"above_{b}", cat="Binary") for b in brokers}
    more_than_half = len(brokers) // 2 + 1
    pg.prob.addConstraint(pulp.lpSum(below.values()) >= more_than_half, "half_below")
    pg.prob.addConstraint(pulp.lpSum(above.values()) >= more_than_half, "half_above")
    for b in brokers:
        pg.prob.addConstraint(count(b) - high <= big * (1 - below[b]), f"below_{b}")
        pg.prob.addConstraint(low - count(b) <= big * (1 - above[b]), f"above_{b}")
        pg.prob.addConstraint(count(b) - low <= allow, f"gate_{b}_high")
        pg.prob.addConstraint(high - count(b) <= allow, f"gate_{b}_low")


def band_relaxation(units: Sequence[float], candidates: Sequence[Sequence[int]], bands: Mapping[int, Band], *,
                    whole: bool = False) -> bool | None:
    """Whether some choice of leaders puts every broker's leader load (``units``: each partition's when it leads)
    within its band (``bands``: the brokers that have one), even a choice that splits a partition's leadership among
    its ``candidates`` (the linear relaxation): False proves the bands out of reach for whole leaders too, whatever
    the leader pass does with these replica sets; True proves nothing of whole leaders; None: a partition has no
    candidate. ``whole``: the bands as they are where nothing is rounded (loads of whole units, a quantum of 1): the
    answer is then exact for whole leaders too, as a flow of whole units has a whole maximum (leader counts:
    ``failover.order_floor``).

    The relaxation is a flow: each partition sends its load to its candidates, each broker passes on between its
    band's floor and ceiling; feasible when a maximum flow (scipy's Dinic, in C) saturates the lower bounds, after
    the usual reduction of lower bounds to a second source and sink. Its capacities are whole multiples of a quantum
    (scipy's flow reads 32-bit integers); where that rounds a load, each broker's band is widened by one quantum per
    partition it may lead, more than the rounding can add, so the rounded flow is itself a relaxation and its "no" a
    proof."""
    import numpy as np
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow

    sizes = np.fromiter((len(c) for c in candidates), dtype=np.int64, count=len(candidates))
    if not sizes.all():
        return None
    if not bands:
        return True
    n, ids = len(units), np.asarray(sorted(bands), dtype=np.int64)
    s, t, s2, t2 = n + len(ids), n + len(ids) + 1, n + len(ids) + 2, n + len(ids) + 3
    part = np.repeat(np.arange(n, dtype=np.int64), sizes)
    lead = np.fromiter(itertools.chain.from_iterable(candidates), dtype=np.int64, count=int(sizes.sum()))
    at = np.minimum(np.searchsorted(ids, lead), len(ids) - 1)
    banded = ids[at] == lead
    head = np.where(banded, n + at, t)  # a candidate without a band: its load goes straight through
    may_lead = np.bincount(at[banded], minlength=len(ids))  # a broker named twice for a partition: wider, still sound
    floor = np.asarray([bands[b].floor for b in ids.tolist()], dtype=float)
    ceil = np.maximum(np.asarray([bands[b].ceil for b in ids.tolist()], dtype=float), 0.0)
    x = np.asarray(units, dtype=float)
    quantum = max(1.0, 8 * float(x.sum() + ceil.sum() + may_lead.sum()) / 2**31)  # the whole flow below 2**28
    load = np.rint(x / quantum).astype(np.int64)
    if whole and quantum == 1.0 and np.array_equal(load, x):  # nothing rounded: the bands as they are
        may_lead = np.zeros_like(may_lead)
    low = np.maximum(0, np.floor(floor / quantum).astype(np.int64) - may_lead)
    high = np.ceil(ceil / quantum).astype(np.int64) + may_lead
    total, floors = int(load.sum()), int(low.sum())
    broker_nodes = n + np.arange(len(ids), dtype=np.int64)
    tail = np.concatenate([np.full(n, s2), part, broker_nodes, broker_nodes, [s, s2, t]])
    head = np.concatenate([np.arange(n), head, np.full(len(ids), t), np.full(len(ids), t2), [t2, t, s]])
    cap = np.concatenate([load, load[part], high - low, low, [total, floors, total + floors]])
    graph = csr_array((cap.astype(np.int32), (tail, head)), shape=(t2 + 1, t2 + 1))
    graph.sum_duplicates()
    return bool(maximum_flow(graph, s2, t2).flow_value == total + floors)


def topic_violation(leader: Sequence[int], topics: Sequence[str], candidates: Sequence[tuple[int, ...]],
                    topic_band: Mapping[str, Band]) -> int:
    """Leaders outside their topic's band, over the brokers that could lead the topic (as the flow counts it)."""
    count: dict[tuple[str, int], int] = {}
    hosts: dict[str, set[int]] = {}
    for i, b in enumerate(leader):
        count[(topics[i], b)] = count.get((topics[i], b), 0) + 1
        hosts.setdefault(topics[i], set()).update(candidates[i] or (b,))
    return sum(topic_band[t].deficit(count.get((t, b), 0)) + topic_band[t].excess(count.get((t, b), 0))
               for t, bs in hosts.items() if t in topic_band for b in bs)
