"""Exact leader balancing as one min-cost flow (strategy ``flow``).

Leaders move without data movement: a partition's preferred leader (its first replica) can become any replica
that is alive and in sync; a preferred-leader election then makes it lead. The flow chooses a preferred leader for
every partition, lexicographically minimising

1. the per-topic band violation: for each topic, every broker that can lead it should lead between
   floor and ceil of the topic's average (partitions / brokers hosting the topic), summed as units outside the band;
2. the cluster-wide *tolerance* violation: units of a broker's total leader count outside the band widened by the
   validation gate's tolerance (max(1, 15% of the average)), so that a plan passes the leader gate wherever the
   replica sets allow it;
3. the number of leader changes (partitions whose preferred leader changes);
4. the cluster-wide band violation of every eligible broker's total leader count ([floor, ceil] of the average).

With ``priority="balance"`` (used after replica moves, where leader changes are cheap next to the data being
copied) objectives 3 and 4 swap: cluster-wide balance first, then the fewest changes.

Scale: networkx's network simplex grows superlinearly (production-shaped, 3 replicas each: 2,000 partitions
0.7 s, 6,000 3.5 s, 12,000 11 s, 20,000 28 s; 88k: ~170 s). With ``priority="changes"`` (leaders mode, where the
changes are the plan: each one an election clients see) the flow is solved whole up to ``WHOLE_MAX`` partitions, and
so exactly, whenever the time left holds it at that pace (``whole_seconds``, twice the measured time): per topic
group it made a fifth more leader changes and left more leaders outside the tolerance band for the same topic bands
(12,000 partitions: 3,139 changes against 2,543; 20,000: 5,830 against 4,697). Otherwise (after replica moves the
leader hand-overs go on from the flow's leaders, and a whole flow tripled the plan's time on 20,000 partitions for
no better gate), or above, or when time is short, the topics are split into groups of about ``CHUNK`` partitions (a
topic is never split, so its band is still met exactly), the most imbalanced topics first (``topic_change_bounds``:
a cut leaves the least imbalance): 20,000 partitions then take 4 s. Each group's cluster band is the remaining
global target pro rata (the global band minus the leaders earlier groups gave each broker, scaled by the group's
share of the partitions left), so the last group absorbs the residue. From ``PARALLEL_FROM`` partitions the groups
are solved ``WAVE`` at a time in a process pool, each group of a wave with its share of the band the waves before
it left; the last group is solved alone. Each group is solved exactly;
the whole is then optimal per topic and balanced cluster-wide, and its change count is reported against the lower
bound.

Time limit: a ``Deadline`` (see ``budget``) is asked before each wave whether the wave still fits at the pace of
the waves solved so far (the first starts whenever any time is left: there is no pace yet; a running network
simplex is not interrupted, so the flow can end up to one wave's solve past the deadline). On "stop" the groups
left keep their preferred leaders: they are absent from ``LeaderResult.leaders``, and the result says
``cut_short`` with the number of groups solved.

Graph: ``s -> partition`` (1 unit each) ``-> (broker, topic)`` (cost: one change unless it is the current preferred
leader) ``-> broker -> t``; the ``(broker, topic) -> broker`` and ``broker -> t`` arcs are tiered (up to floor:
reward, floor..ceil: free, beyond ceil: penalty), which makes the band violation convex and exact. Integer costs
with weights M1 >> CHANGE >> 1 make the three objectives lexicographic. Min-cost flow with integer data has an
integral optimum, so the result is the exact optimum of the integer problem.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a flow is solved: about a second, which every CLI command would pay
    from concurrent.futures import ProcessPoolExecutor

    import networkx as nx

from .budget import Deadline
from .targets import Band, band

__all__ = ["LeaderItem", "LeaderResult", "balance_leaders", "topic_bands", "topic_change_bounds", "leader_objective", "CHUNK",
           "WHOLE_MAX", "whole_seconds"]

CHUNK = 1_500       # partitions per topic group where the flow is not solved whole
WHOLE_MAX = 20_000  # leaders mode: partitions solved as one flow (exact) when the time left holds it
WHOLE_PACE_S = 28.0  # seconds a whole flow of WHOLE_MAX partitions took (production-shaped, 300 brokers)
WAVE = 4  # groups solved side by side (a constant, not the core count: the plan is the same on every machine)
PARALLEL_FROM = 12_000  # partitions; below, a pool's start-up (a second per process) costs more than it saves
TOLERANCE_PCT = 15.0  # the leader gate's default (rebalancer.validate)


@dataclass(frozen=True)
class LeaderItem:
    """One partition for leader balancing: its candidates (eligible leaders, in replica order) and current leader."""

    key: tuple[str, int]
    candidates: tuple[int, ...]
    current: int  # current preferred leader (may be absent from candidates: then it must change)


@dataclass(frozen=True)
class LeaderResult:
    leaders: dict[tuple[str, int], int]
    changes: int
    topic_violation: int
    cluster_violation: int
    tolerance_violation: int = 0
    groups: int = 1  # >1: solved per topic group (each exact), see the module doc
    groups_solved: int = 1  # < groups: the deadline stopped the flow; the other groups' partitions are not in leaders
    cut_short: bool = False
    slowest_group_seconds: float = 0.0  # the slowest wave: how far one uninterruptible solve can run past the deadline


def topic_bands(items: Sequence[LeaderItem]) -> dict[str, tuple[Band, frozenset[int]]]:
    """Per topic: the leader band over the brokers that can lead any of its partitions, and those brokers."""
    topics = [it.key[0] for it in items]
    counts = Counter(topics)
    brokers: dict[str, set[int]] = {t: set() for t in counts}
    last, into = None, set()
    for t, it in zip(topics, items, strict=True):
        if t != last:  # a cluster's items come topic by topic: one lookup per run
            last, into = t, brokers[t]
        into.update(it.candidates)
    return {t: (band(counts[t], len(brokers[t])) if brokers[t] else Band(0, 0, 0.0), frozenset(brokers[t])) for t in counts}


def topic_change_bounds(items: Sequence[LeaderItem],
                        bands: Mapping[str, tuple[Band, frozenset[int]]] | None = None) -> dict[str, int]:
    """Per topic, the fewest leader changes that bring it into its band: max(leaders above the ceiling plus leaders on
    brokers that cannot lead, leaders missing below the floor). Their sum is the leader-change lower bound
    (``bounds.leader_change_bound``); each is also how much imbalance the topic carries. ``bands``:
    ``topic_bands(items)`` when the caller has it."""
    if bands is None:
        bands = topic_bands(items)
    per = Counter((it.key[0], it.current) for it in items)
    # Per topic: leaders on brokers that cannot lead (dead, removed, out of sync), which must all change, and the
    # counts of the brokers that can lead it and do (the others that can lead it count zero).
    stranded: dict[str, int] = {}
    leading: dict[str, list[int]] = {}
    for (topic, b), c in per.items():
        if b in bands[topic][1]:
            leading.setdefault(topic, []).append(c)
        else:
            stranded[topic] = stranded.get(topic, 0) + c
    out: dict[str, int] = {}
    for topic, (tb, brokers) in bands.items():
        counts = leading.get(topic, [])
        idle = len(brokers) - len(counts)
        excess = sum(tb.excess(c) for c in counts) + idle * tb.excess(0)
        deficit = sum(tb.deficit(c) for c in counts) + idle * tb.deficit(0)
        out[topic] = max(excess + stranded.get(topic, 0), deficit)
    return out


def _violation(count: int, b: Band) -> int:
    return b.deficit(count) + b.excess(count)


def tolerance_band(b: Band, pct: float = TOLERANCE_PCT) -> Band:
    """The band widened by the gate's tolerance: max(1, pct% of the average) leaders either side."""
    slack = max(1, int(math.floor(pct / 100.0 * b.average)))
    return Band(max(0, b.floor - slack), b.ceil + slack, b.average)


def leader_objective(leaders: Mapping[tuple[str, int], int], items: Sequence[LeaderItem],
                     cluster_brokers: frozenset[int]) -> tuple[int, int, int, int]:
    """(topic violation, tolerance violation, changes, cluster violation) of a leader choice."""
    bands = topic_bands(items)
    per_topic: dict[tuple[str, int], int] = {}
    per_broker: dict[int, int] = {b: 0 for b in cluster_brokers}
    changes = 0
    for it in items:
        b = leaders[it.key]
        per_topic[(it.key[0], b)] = per_topic.get((it.key[0], b), 0) + 1
        per_broker[b] = per_broker.get(b, 0) + 1
        changes += b != it.current
    tv = 0
    for t, (tb, brokers) in bands.items():
        tv += sum(_violation(per_topic.get((t, b), 0), tb) for b in brokers)
    cb = band(len(items), len(cluster_brokers)) if cluster_brokers else Band(0, 0, 0.0)
    wide = tolerance_band(cb)
    cv = sum(_violation(per_broker.get(b, 0), cb) for b in cluster_brokers)
    wv = sum(_violation(per_broker.get(b, 0), wide) for b in cluster_brokers)
    return tv, wv, changes, cv


def _tiers(g: nx.MultiDiGraph[Any], u: object, v: object, b: Band, weight: int, room: int) -> None:
    """Tiered arcs u -> v: reward ``weight`` per unit up to floor, free to ceil, penalty beyond."""
    if b.floor:
        g.add_edge(u, v, capacity=b.floor, weight=-weight)
    if b.ceil > b.floor:
        g.add_edge(u, v, capacity=b.ceil - b.floor, weight=0)
    if room > b.ceil:
        g.add_edge(u, v, capacity=room - b.ceil, weight=weight)


def _tiers2(g: nx.MultiDiGraph[Any], u: object, v: object, tight: Band, wide: Band, w_tight: int, w_wide: int,
            room: int) -> None:
    """Two nested bands as convex tiers: marginal costs -(w_wide+w_tight), -w_tight, 0, +w_tight, +(w_wide+w_tight)."""
    cuts = [0, wide.floor, tight.floor, tight.ceil, wide.ceil, max(room, wide.ceil)]
    costs = [-(w_wide + w_tight), -w_tight, 0, w_tight, w_wide + w_tight]
    for lo, hi, cost in zip(cuts, cuts[1:], costs, strict=False):
        lo, hi = min(lo, room), min(hi, room)
        if hi > lo:
            g.add_edge(u, v, capacity=hi - lo, weight=cost)


def build_graph(items: Sequence[LeaderItem], cluster_brokers: frozenset[int],
                priority: str = "changes", cluster_bands: Mapping[int, Band] | None = None) -> tuple[nx.MultiDiGraph[Any], int, int]:
    n = len(items)
    # Integer weights that make the objectives lexicographic: each level outweighs the whole range of those below.
    if priority == "changes":
        cluster_w = 1
        change = 2 * n * cluster_w + 1
    elif priority == "balance":
        change = 1
        cluster_w = n * change + 1
    else:
        raise ValueError(f"priority must be 'changes' or 'balance', not {priority!r}")
    wide_w = 2 * n * cluster_w + n * change + 1
    m1 = 2 * n * (wide_w + cluster_w) + n * change + 1
    import networkx as nx

    g: nx.MultiDiGraph[Any] = nx.MultiDiGraph()
    g.add_node("s", demand=-n)
    g.add_node("t", demand=n)
    bands = topic_bands(items)
    topic_room: dict[tuple[str, int], int] = {}
    for it in items:
        g.add_edge("s", ("p", it.key), capacity=1, weight=0)
        for b in it.candidates:
            g.add_edge(("p", it.key), ("bt", b, it.key[0]), capacity=1, weight=0 if b == it.current else change)
            topic_room[(it.key[0], b)] = topic_room.get((it.key[0], b), 0) + 1
    broker_room: dict[int, int] = {}
    for (topic, b), room in topic_room.items():
        _tiers(g, ("bt", b, topic), ("b", b), bands[topic][0], m1, room)
        broker_room[b] = broker_room.get(b, 0) + room
    cb = band(n, len(cluster_brokers)) if cluster_brokers else Band(0, 0, 0.0)
    for b, room in broker_room.items():
        if b in cluster_brokers:
            tight = cluster_bands.get(b, cb) if cluster_bands else cb
            _tiers2(g, ("b", b), "t", tight, tolerance_band(tight), cluster_w, wide_w, room)
        else:
            g.add_edge(("b", b), "t", capacity=room, weight=0)
    return g, change, m1


def _solve(items: Sequence[LeaderItem], cluster_brokers: frozenset[int], priority: str,
           cluster_bands: Mapping[int, Band] | None = None) -> dict[tuple[str, int], int]:
    import networkx as nx

    g, _change, _m1 = build_graph(items, cluster_brokers, priority, cluster_bands)
    _cost, flow = nx.network_simplex(g)
    leaders: dict[tuple[str, int], int] = {}
    for it in items:
        for node, arcs in flow[("p", it.key)].items():
            if any(v > 0 for v in arcs.values()):
                leaders[it.key] = node[1]
                break
    return leaders


def _groups(items: Sequence[LeaderItem], size: int) -> list[list[LeaderItem]]:
    """Topics packed into groups of about ``size`` partitions, the most imbalanced first: the topics needing the
    most leader changes (``topic_change_bounds``), then the largest. A deadline that stops the flow between groups
    then leaves the groups with the least imbalance unsolved."""
    by_topic: dict[str, list[LeaderItem]] = {}
    for it in items:
        by_topic.setdefault(it.key[0], []).append(it)
    need = topic_change_bounds(items)
    order = sorted(by_topic, key=lambda t: (-need[t], -len(by_topic[t]), t))
    groups: list[list[LeaderItem]] = [[]]
    for topic in order:
        topic_items = by_topic[topic]
        if groups[-1] and len(groups[-1]) + len(topic_items) > size:
            groups.append([])
        groups[-1].extend(topic_items)
    return groups


def _group_bands(cluster_brokers: frozenset[int], target: Band, assigned: Mapping[int, int], share: float) -> dict[int, Band]:
    """A group's cluster band: its share of what the global band still leaves each broker (the global band minus the
    leaders earlier groups gave it)."""
    bands: dict[int, Band] = {}
    for b in cluster_brokers:
        lo = max(0, target.floor - assigned[b]) * share
        hi = max(0, target.ceil - assigned[b]) * share
        bands[b] = Band(int(math.floor(lo)), max(int(math.floor(lo)), int(math.ceil(hi))), hi)
    return bands


def _waves(groups: list[list[LeaderItem]], wave: int) -> list[list[list[LeaderItem]]]:
    """Groups in waves of up to ``wave`` solved side by side; the last group alone, so that it absorbs the residue of
    every group before it."""
    head, last = groups[:-1], groups[-1:]
    return [head[i:i + wave] for i in range(0, len(head), wave)] + [last]


def _pool(waves: list[list[list[LeaderItem]]]) -> ProcessPoolExecutor | None:
    """A process pool for waves of several groups when this machine has more than one core, else None. Its size
    only sets the speed: the waves, and so the result, are the same on every machine."""
    import os

    width = max(len(w) for w in waves)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if width < 2 or cores < 2:
        return None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: a fresh process, not a fork of this one (the Airflow task and the CLI may run threads).
    return ProcessPoolExecutor(min(width, cores), mp_context=multiprocessing.get_context("forkserver"))


def whole_seconds(partitions: int) -> float:
    """The time a whole flow of ``partitions`` may take, with room to spare: twice the pace measured (module doc),
    which grows as partitions^1.75 (12,000 -> 20,000 partitions: 11 s -> 28 s)."""
    return 2 * WHOLE_PACE_S * float((partitions / WHOLE_MAX) ** 1.75)


def balance_leaders(items: Sequence[LeaderItem], cluster_brokers: frozenset[int],
                    priority: str = "changes", chunk: int | None = None, deadline: Deadline | None = None,
                    kept: Mapping[tuple[str, int], int] | None = None, wave: int = WAVE) -> LeaderResult:
    """Solve exactly: with ``priority="changes"`` the whole flow up to ``WHOLE_MAX`` partitions when the deadline
    leaves ``whole_seconds`` for it, else per topic group of about ``CHUNK`` partitions (``chunk``: per group of that
    many above it, always); every item needs at least one candidate.

    Above ``PARALLEL_FROM`` partitions the groups are solved ``wave`` at a time in a process pool (each group of a
    wave gets its share of the same remaining band); below it, or with ``wave=1``, one after another.

    With a ``deadline`` the flow may stop between waves: the result then covers the groups solved, and its
    objective counts the other partitions at the leader they keep: ``kept[key]`` where given (the first replica of a
    replica set that changed), else their current preferred leader.
    """
    if not items:
        return LeaderResult({}, 0, 0, 0)
    for it in items:
        if not it.candidates:
            raise ValueError(f"partition {it.key[0]}-{it.key[1]} has no eligible leader")
    deadline = deadline or Deadline.never()
    if chunk is None:  # whole where it fits: the time left is only read (a busy machine's plan is still exact)
        whole = (priority == "changes" and len(items) <= WHOLE_MAX
                 and deadline.remaining() >= whole_seconds(len(items)))
        chunk = len(items) if whole else CHUNK
    grouped = len(items) > chunk
    groups = _groups(items, chunk) if grouped else [list(items)]
    waves = _waves(groups, wave if len(items) >= PARALLEL_FROM else 1)
    leaders, n_solved, slowest = _solve_waves(waves, cluster_brokers, priority, grouped, len(items), deadline)
    cut_short = n_solved < len(groups)
    keep = kept or {}
    judged = {**{it.key: keep.get(it.key, it.current) for it in items}, **leaders} if cut_short else leaders
    tv, wv, changes, cv = leader_objective(judged, items, cluster_brokers)
    return LeaderResult(leaders, changes, tv, cv, wv, len(groups), n_solved, cut_short, slowest)


def _solve_waves(waves: list[list[list[LeaderItem]]], cluster_brokers: frozenset[int], priority: str, grouped: bool,
                 partitions: int, deadline: Deadline) -> tuple[dict[tuple[str, int], int], int, float]:
    """The groups solved a wave at a time (in a process pool where a wave has several), each group of a wave with
    its share of the band the cluster has left, while the deadline allows the next wave at the pace so far: (the
    leaders chosen, groups solved, the slowest wave's seconds)."""
    target = band(partitions, len(cluster_brokers))
    assigned = {b: 0 for b in cluster_brokers}
    remaining = partitions
    leaders: dict[tuple[str, int], int] = {}
    n_solved = done = 0  # groups and partitions solved
    spent = slowest = 0.0
    pool = _pool(waves)
    try:
        for groups_now in waves:
            size = sum(len(g) for g in groups_now)
            # Does the wave fit at the pace so far? (Network simplex is superlinear, but groups are of similar size.)
            if not deadline.allows(spent / done * size if done else 0.0):
                break
            started = deadline.clock()
            jobs = [(g, cluster_brokers, priority,
                     _group_bands(cluster_brokers, target, assigned, len(g) / remaining) if grouped else None)
                    for g in groups_now]
            if pool is not None and len(jobs) > 1:
                parts = [f.result() for f in [pool.submit(_solve, *job) for job in jobs]]
            else:
                parts = [_solve(*job) for job in jobs]
            for part in parts:
                for b in part.values():
                    if b in assigned:
                        assigned[b] += 1
                leaders.update(part)
            remaining -= size
            took = deadline.clock() - started
            spent += took
            slowest = max(slowest, took)
            done += size
            n_solved += len(groups_now)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return leaders, n_solved, slowest
