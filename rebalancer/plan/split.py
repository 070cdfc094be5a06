"""Load placement split into independent groups of topics, then merged and repaired: the shape that lets a cluster
of millions of replicas be planned as parallel tasks (issue 26), each task a pure function of plain data.

1. **Groups.** Whole topics are packed into ``groups`` sets of about equal replica counts (largest topic first, into
   the lightest group); a topic larger than a group's share is cut into runs of partitions.
2. **Targets per group** (a transportation problem, solved in closed form). For each placement dimension, broker
   b's surplus ``s_b`` must leave it and its deficit arrive: what lies beyond the inner band (``TRANSPORT_INNER``
   of the band's half-widths around the target; a removed broker's target is 0), the side with the smaller total
   making up the difference from what its brokers hold between the inner band and the target (``_transport``), so
   a broker already near its target keeps its load, as the single pass would leave it.
   Group g sheds from every broker above its target in proportion to what g holds there
   (``x_gb = s_b * load_gb / load_b``, never more than g holds), and the ``r_g = sum_b x_gb`` it shed arrives at the
   brokers below their target in proportion to their deficit (``y_gb = deficit_b * r_g / sum of deficits``). Each
   group's targets sum to its own load (nothing is created or lost), and, summed over the groups, every broker's
   target is the cluster's. A group's load band around its target is the cluster band's width scaled by the square
   root of the group's share of the broker's target (x ``GROUP_BAND_SHARE``): the groups' independent deviations
   partly cancel, and the repair pass moves the rest; its count band is scaled by the share itself (x
   ``COUNT_BAND_SHARE``); the hard capacity limit is shared out in proportion.
3. **Plan each group** with ``load_greedy`` on its own ``LoadInput`` (``GroupTask``: plain data, picklable, no
   reference to the cluster), through ``map_fn``: the builtin ``map`` in process; a Spark ``map`` over the tasks
   on a cluster.
4. **Merge and repair.** The groups' new replicas are put together; each group stops at its own band edge, so a
   broker can end just outside the cluster's band (at 3M replicas in 7 groups, half the brokers: the groups'
   deviations add up). The repair is a second round of the groups, in parallel too: the brokers are dealt out so
   that each belongs to exactly one group (``repair_shares``), and group g moves its own partitions only between
   the brokers of its share, against the cluster's bands, the other groups' load on them counted as ``fixed``
   (``repair_tasks``). No two groups touch one broker, so what each group reaches is the cluster's balance there,
   exactly. It starts from the merged placement with ``origin`` = the replicas before planning, so a replica a
   group added may move on (the plan still adds it once) and the change cap counts against the original. Only
   where that leaves a broker outside a band (a move it needed had its two brokers in different shares) does one
   ``load_greedy`` pass over the whole problem finish the repair; with fewer than
   ``REPAIR_SHARE_MIN_BROKERS`` brokers a share, that pass is the repair.
   Before it, ``undo_overshoot`` takes back moves off a broker that may give but not take (an old broker when
   brokers are added): the groups each shed their part of its surplus, and their sum can leave it below its band,
   which no move of the repair could mend.

Balance is measured, like everywhere else, by ``load_problem.evaluate`` on the whole problem; the bytes moved against
``bounds.bytes_moved_bound``.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from ..bulk import collector_paused
from ..load import Band, beyond
from .budget import Deadline
from .load_greedy import GreedyStats, load_greedy
from .load_problem import LoadInput, broker_violation, mean_target
from .racks import keeps_racks

__all__ = ["GroupTask", "SplitStats", "split_groups", "group_tasks", "plan_group", "placement_loads", "repair_shares",
           "repair_tasks", "outside_bands", "undo_overshoot", "split_greedy", "GROUP_REPLICAS"]

GROUP_REPLICAS = 250_000  # replicas per group when the caller does not say how many groups
MIN_GROUP_REPLICAS_PER_BROKER = 150  # a thinner group (a few dozen replicas per broker) cannot meet its bands
# A group's band around its target: the cluster band's width x sqrt(the group's share of the target) x this. The
# groups' deviations are independent, so their sum grows like the square root of their number: bands scaled by
# the share itself (their widths adding up to the cluster's) made every group fit a band narrower than its own
# granularity, and moved up to 34% more bytes than the bound at 3M replicas; the repair pass, which sees the whole
# cluster, moves only between a broker above its band and one below it, which wastes nothing.
GROUP_BAND_SHARE = 0.5
# Counts have no tail: a count band scaled by the share itself (their widths adding up to 80% of the cluster's) keeps
# every group shedding its part of a broker's surplus replicas. Wider, a heavy broker's groups stop at their disk
# floors with its count still above the band, where no single move helps it.
COUNT_BAND_SHARE = 0.8
# The transportation moves only what lies beyond this fraction of each band's half-width around the target (below).
TRANSPORT_INNER = 0.5
COUNT_DIMENSIONS = frozenset({"replicas", "leaders"})
# The repair's second round of groups needs this many brokers in each group's share: with fewer, the pairs a share
# offers are too few to move the right sizes (6 brokers a share moved 12% more bytes than the pass over the whole
# problem; 20 and more: within 1.5% either way, measured from 40 to 2,600 brokers), and the whole pass is cheap there.
REPAIR_SHARE_MIN_BROKERS = 20


def split_groups(replicas: Sequence[tuple[int, ...]], topics: Sequence[str], groups: int) -> list[list[int]]:
    """Partition indices in ``groups`` groups of whole topics (a topic above a group's share is cut into runs of
    partitions), about equal in replicas. Deterministic: the same input gives the same groups."""
    groups = max(1, min(groups, len(replicas)))
    by_topic: dict[str, list[int]] = {}
    for i, t in enumerate(topics):
        by_topic.setdefault(t, []).append(i)
    total = sum(len(r) for r in replicas)
    share = math.ceil(total / groups)
    pieces: list[tuple[int, str, list[int]]] = []  # (replicas, topic, partition indices)
    for t, idx in by_topic.items():
        run: list[int] = []
        weight = 0
        for i in idx:
            run.append(i)
            weight += len(replicas[i])
            if weight >= share:
                pieces.append((weight, t, run))
                run, weight = [], 0
        if run:
            pieces.append((weight, t, run))
    pieces.sort(key=lambda p: (-p[0], p[1], p[2][0]))
    heap = [(0, g) for g in range(groups)]
    out: list[list[int]] = [[] for _ in range(groups)]
    for weight, _, run in pieces:
        held, g = heapq.heappop(heap)
        out[g].extend(run)
        heapq.heappush(heap, (held + weight, g))
    return [sorted(g) for g in out if g]


@dataclass(frozen=True)
class GroupTask:
    """One group's placement problem: its partitions' global indices, its ``LoadInput`` (bands = the group's share
    of the cluster's), and the seconds it may take. Plain data: it can be shipped to another process."""
    index: int
    partitions: tuple[int, ...]
    problem: LoadInput
    seconds: float


def _group_band(band: Band, target: float, cluster_target: float, held: float, cluster_held: float, groups: int,
                count: bool) -> Band:
    if cluster_target > 0:
        share = target / cluster_target
    else:
        share = held / cluster_held if cluster_held > 0 else 1.0 / groups
    width = share * COUNT_BAND_SHARE if count else min(1.0, math.sqrt(max(share, 0.0))) * GROUP_BAND_SHARE
    floor = math.floor(target - (band.average - band.floor) * width)
    ceil = math.ceil(target + (band.ceil - band.average) * width)
    limit = None if band.limit is None else max(0, math.floor(target + (band.limit - band.average) * share))
    return Band(max(0, floor), max(max(0, floor), ceil if limit is None else min(ceil, limit)), target, limit)


def _transport(load: dict[int, float], bands: dict[int, Band], removed: Sequence[int]) -> tuple[dict[int, float], dict[int, float]]:
    """What leaves each broker above its target and arrives at each below it (one dimension): only what lies beyond
    the inner band (``TRANSPORT_INNER`` of the band's half-widths around the target; a removed broker's target and
    band are 0), and, where one side's total beyond it is the larger, the other side makes it up in proportion to
    what it holds between the inner band and the target. A broker inside its inner band keeps its load unless the
    other side needs it, so the groups do not move a near-balanced cluster the whole way to its targets (2 groups on
    40 near-balanced brokers moved 1.54 x the bytes bound against the single pass's 1.06)."""
    beyond_out: dict[int, float] = {}
    inside_out: dict[int, float] = {}
    beyond_in: dict[int, float] = {}
    inside_in: dict[int, float] = {}
    for b in removed:
        if load[b] > 0:
            beyond_out[b], inside_out[b] = load[b], 0.0
    for b, band in bands.items():
        x, goal = load[b], band.average
        if x > goal:
            high = goal + (band.ceil - goal) * TRANSPORT_INNER
            beyond_out[b] = beyond(x, goal, high)
            inside_out[b] = x - goal - beyond_out[b]
        elif x < goal:
            low = goal - (goal - band.floor) * TRANSPORT_INNER
            beyond_in[b] = beyond(x, low, goal)
            inside_in[b] = goal - x - beyond_in[b]
    moving = max(sum(beyond_out.values()), sum(beyond_in.values()))

    def share(beyond: dict[int, float], inside: dict[int, float]) -> dict[int, float]:
        extra, room = moving - sum(beyond.values()), sum(inside.values())
        fill = min(1.0, extra / room) if room > 0 else 0.0
        return {b: beyond[b] + inside[b] * fill for b in beyond if beyond[b] + inside[b] * fill > 0}

    return share(beyond_out, inside_out), share(beyond_in, inside_in)


def group_tasks(inp: LoadInput, groups: Sequence[Sequence[int]], seconds: float) -> list[GroupTask]:
    """Each group's ``LoadInput``, its bands from the transportation of every broker's surplus to the deficits."""
    dims = [d for d in inp.bands if d in inp.units]
    brokers = sorted(set(inp.rack))
    n_groups = len(groups)
    held: list[dict[str, dict[int, float]]] = []
    for idx in groups:
        per = {d: dict.fromkeys(brokers, 0.0) for d in dims}
        for i in idx:
            for b in inp.replicas[i]:
                for d in dims:
                    per[d][b] += inp.units[d][i]
        held.append(per)
    # targets[g][d][b]
    targets: list[dict[str, dict[int, float]]] = [{d: {} for d in dims} for _ in groups]
    for d in dims:
        bands = inp.bands[d]
        load = {b: sum(h[d][b] for h in held) for b in brokers}
        # Brokers left as they are (down, not part of this plan): every group keeps its load there.
        planned = [b for b in brokers if b in inp.removed or (b in bands and b in inp.givers | inp.receivers)]
        surplus, deficit = _transport(load, {b: bands[b] for b in planned if b not in inp.removed},
                                      [b for b in planned if b in inp.removed])
        missing = sum(deficit.values())
        for g, h in enumerate(held):
            shed = {b: s * h[d][b] / load[b] for b, s in surplus.items() if load[b] > 0}
            moving = sum(shed.values())
            for b in brokers:
                t = h[d][b] - shed.get(b, 0.0)
                if b in deficit and missing > 0:
                    t += deficit[b] * moving / missing
                targets[g][d][b] = t
    tasks = []
    for g, idx in enumerate(groups):
        bands_g: dict[str, dict[int, Band]] = {}
        for d in dims:
            cluster_bands = inp.bands[d]
            bands_g[d] = {b: _group_band(band, targets[g][d][b], band.average, held[g][d][b],
                                         sum(h[d][b] for h in held), n_groups, d in COUNT_DIMENSIONS)
                          for b, band in cluster_bands.items()}
        problem = replace(inp, replicas=[inp.replicas[i] for i in idx], topics=[inp.topics[i] for i in idx],
                          units={d: [inp.units[d][i] for i in idx] for d in inp.units}, bands=bands_g,
                          gate_bands=None, origin=None)
        tasks.append(GroupTask(g, tuple(idx), problem, seconds))
    return tasks


Loads = dict[str, dict[int, float]]  # dimension -> broker -> load


def placement_loads(inp: LoadInput, placed: Sequence[Sequence[int]]) -> Loads:
    """Every broker's load per placement dimension when ``inp``'s partitions are on ``placed`` (``inp.fixed`` not
    included): numpy sums, a group's share of the cluster's totals."""
    import numpy as np

    from ..load import replica_columns

    brokers = sorted(inp.rack)
    ids = np.asarray(brokers, dtype=np.int64)
    part, flat, _ = replica_columns(placed)
    pos = np.searchsorted(ids, flat)
    return {d: dict(zip(brokers, np.bincount(pos, weights=np.asarray(inp.units[d], dtype=float)[part],
                                             minlength=ids.size).tolist(), strict=True))
            for d in inp.bands if d in inp.units}


@collector_paused()  # on a Spark worker too: its group's hundreds of thousands of objects (rebalancer.bulk)
def plan_group(task: GroupTask) -> tuple[int, dict[int, tuple[int, ...]], GreedyStats, float, Loads]:
    """Plan one group (a pure function of its task): (group, new replicas by global index, stats, seconds, the
    group's load on every broker afterwards)."""
    started = time.monotonic()
    inp = task.problem
    changed, stats = load_greedy(inp, Deadline(started + task.seconds))
    loads = placement_loads(inp, [changed.get(i, reps) for i, reps in enumerate(inp.replicas)])
    return (task.index, {task.partitions[i]: reps for i, reps in changed.items()}, stats, time.monotonic() - started,
            loads)


def repair_shares(inp: LoadInput, load: Loads, groups: int) -> list[frozenset[int]]:
    """The brokers each group may repair on (the second round): every broker of the plan in exactly one group, so
    a group's moves change no other group's brokers and a broker's band is the cluster's, exact. Brokers are dealt
    in snake order of how far above (then below) their bands they are, so every group gets as much surplus as
    deficit, and the brokers inside their bands between (room on both sides)."""
    dims = [d for d in inp.bands if d in inp.units]
    planned = sorted((inp.givers | inp.receivers) - inp.removed)

    def key(b: int) -> tuple[float, float, int]:
        off = 0.0
        for d in dims:
            band = inp.bands[d].get(b)
            if band is None:
                continue
            scale = max(band.average, 1e-9)
            off += inp.weight.get(d, 1.0) * (max(0.0, load[d][b] - band.ceil) - max(0.0, band.floor - load[d][b])) / scale
        d0 = dims[0]
        band0 = inp.bands[d0].get(b)
        rel = (load[d0][b] - band0.average) / max(band0.average, 1e-9) if band0 is not None else 0.0
        return (-off, -rel, b)

    shares: list[list[int]] = [[] for _ in range(groups)]
    for n, b in enumerate(sorted(planned, key=key)):
        lap, at = divmod(n, groups)
        shares[at if lap % 2 == 0 else groups - 1 - at].append(b)
    return [frozenset(s) for s in shares]


def repair_tasks(inp: LoadInput, tasks: Sequence[GroupTask], merged: Sequence[tuple[int, ...]],
                 held: Sequence[Loads], seconds: float) -> list[GroupTask]:
    """The second round: group g repairs its own partitions (from their merged placement; ``origin`` = as they were
    before planning) on its share of the brokers only (``repair_shares``), against the cluster's bands, with the
    other groups' load there ``fixed``. A removed broker is every group's to empty."""
    dims = [d for d in inp.bands if d in inp.units]
    total = {d: {b: sum(h[d][b] for h in held) for b in inp.rack} for d in dims}
    shares = repair_shares(inp, total, len(tasks))
    out = []
    for task, share, mine in zip(tasks, shares, held, strict=True):
        brokers = share | inp.removed
        fixed = {d: {b: total[d][b] - mine[d][b] for b in brokers} for d in dims}
        problem = replace(task.problem, replicas=[merged[i] for i in task.partitions], origin=task.problem.baseline,
                          bands=inp.bands, givers=inp.givers & share, receivers=inp.receivers & share, fixed=fixed)
        out.append(GroupTask(task.index, task.partitions, problem, seconds))
    return out


def outside_bands(inp: LoadInput, load: Loads) -> list[int]:
    """The brokers of the plan outside a band of ``inp`` at ``load`` (a removed broker: not yet empty)."""
    dims = [d for d in inp.bands if d in inp.units]
    out = set()
    for b in inp.givers | inp.receivers | inp.removed:
        for d in dims:
            band = inp.bands[d].get(b)
            x = load[d][b]
            slack = 1e-9 * max(1.0, abs(x))
            if (b in inp.removed and x > slack) or (band is not None and b not in inp.removed
                                                    and not band.floor - slack <= x <= band.ceil + slack):
                out.add(b)
    return sorted(out)


class SplitStats(TypedDict):
    """What split_greedy did: the groups, each group's moves and seconds, the repair (its second round of groups
    and, where that left a broker outside a band, the pass over the whole problem), and the totals in the shape of
    ``GreedyStats``."""
    groups: int
    group_moves: list[int]
    group_seconds: list[float]
    group_outside: list[int]
    undone_moves: int
    repair_moves: int
    repair_group_moves: list[int]
    repair_group_seconds: list[float]
    repair_outside: list[int]
    whole_repair_moves: int | None
    moves: int
    outside_bands: list[int]
    stuck_brokers: list[int]
    cut_short: bool
    steps: int


def undo_overshoot(inp: LoadInput, merged: list[tuple[int, ...]]) -> int:
    """Put back, in ``merged`` (in place), replicas the groups moved off a broker that may give but not take and that
    they left below a band: each step returns the replica whose return lowers the violation (``evaluate``'s measure,
    over the giver and the broker it came back from) the most, from a broker that may give it back and keeping the
    racks. Returns the moves undone."""
    dims = [d for d in inp.bands if d in inp.units]
    keep = inp.givers - inp.receivers - inp.removed
    if not dims or not keep:
        return 0
    load = placement_loads(inp, merged)
    mean = {d: mean_target(inp.bands[d]) for d in dims}

    def off(d: str, b: int, v: float) -> float:  # ``evaluate``'s measure (``broker_violation``)
        band = inp.bands[d].get(b)
        return 0.0 if band is None else broker_violation(inp, d, b, band, mean[d], v)

    def below(b: int) -> bool:
        return any(b in inp.bands[d] and load[d][b] < inp.bands[d][b].floor for d in dims)

    left = {b: [i for i, reps in enumerate(merged) if b in inp.replicas[i] and b not in reps]
            for b in sorted(keep) if below(b)}
    undone = 0
    for b, moved in left.items():
        while below(b):
            best: tuple[float, int, int] | None = None
            for i in moved:
                reps = merged[i]
                if b in reps:
                    continue
                # the replica that took b's place: the one at b's position that was not there before
                pos = inp.replicas[i].index(b)
                r = reps[pos] if pos < len(reps) and reps[pos] not in inp.replicas[i] else None
                if r is None or r not in inp.givers | inp.receivers | inp.removed:  # a broker outside the plan keeps it
                    continue
                if inp.keep_racks and not keeps_racks(inp.rack, reps, r, b):
                    continue
                change = 0.0
                for d in dims:
                    u = inp.units[d][i]
                    change += (off(d, b, load[d][b] + u) - off(d, b, load[d][b])
                               + off(d, r, load[d][r] - u) - off(d, r, load[d][r]))
                if change < -1e-12 and (best is None or change < best[0]):
                    best = (change, i, r)
            if best is None:
                break
            _, i, r = best
            merged[i] = tuple(b if x == r else x for x in merged[i])
            for d in dims:
                load[d][b] += inp.units[d][i]
                load[d][r] -= inp.units[d][i]
            undone += 1
    return undone


MapFn = Callable[[Callable[[GroupTask], Any], Iterable[GroupTask]], Iterator[Any] | list[Any]]


def _whole_repair(inp: LoadInput, merged: list[tuple[int, ...]], deadline: Deadline) -> GreedyStats:
    """One ``load_greedy`` pass over the whole problem from ``merged`` (updated in place), counting changes from the
    replicas before the plan."""
    repaired, rstats = load_greedy(replace(inp, replicas=merged, origin=inp.baseline), deadline)
    for i, reps in repaired.items():
        merged[i] = reps
    return rstats


def split_greedy(inp: LoadInput, deadline: Deadline | None = None, *, groups: int | None = None,
                 map_fn: MapFn = map, repair_share: float = 0.3) -> tuple[dict[int, tuple[int, ...]], SplitStats]:
    """``load_greedy``'s result (new replicas of the partitions that change, by index) planned group by group
    through ``map_fn``, merged, then repaired: a second round of the groups through ``map_fn``, each on its own
    share of the brokers (``repair_tasks``), then, only where that left a broker outside a band, one pass over the
    whole problem. ``repair_share``: the part of the time left kept for the repair."""
    deadline = deadline or Deadline.never()
    n_replicas = sum(len(r) for r in inp.replicas)
    k = groups if groups is not None else max(1, math.ceil(n_replicas / GROUP_REPLICAS))
    parts = split_groups(inp.replicas, inp.topics, k)
    left = deadline.remaining()
    seconds = left * (1 - repair_share) if math.isfinite(left) else 1e9
    tasks = group_tasks(inp, parts, seconds)
    merged = [tuple(r) for r in inp.replicas]
    group_moves, group_outside, group_seconds = [0] * len(tasks), [0] * len(tasks), [0.0] * len(tasks)
    held: list[Loads] = [{} for _ in tasks]
    cut = False
    steps = 0
    for g, changed, stats, took, loads in map_fn(plan_group, tasks):
        for i, reps in changed.items():
            merged[i] = reps
        group_moves[g], group_seconds[g], held[g] = stats["moves"], round(took, 3), loads
        group_outside[g] = len(stats["outside_bands"])
        cut |= stats["cut_short"]
        steps += stats["steps"]
    undone = undo_overshoot(inp, merged)
    if undone:  # the groups' loads as they are now
        held = [placement_loads(t.problem, [merged[i] for i in t.partitions]) for t in tasks]
    left = deadline.remaining()
    seconds = left * (1 - repair_share) if math.isfinite(left) else 1e9
    planned = len((inp.givers | inp.receivers) - inp.removed)
    rounds = len(tasks) > 1 and planned >= REPAIR_SHARE_MIN_BROKERS * len(tasks)
    repair_moves = [0] * len(tasks) if rounds else []
    repair_seconds = [0.0] * len(tasks) if rounds else []
    stuck: set[int] = set()
    for g, changed, stats, took, loads in map_fn(plan_group, repair_tasks(inp, tasks, merged, held, seconds)
                                                  if rounds else []):
        for i, reps in changed.items():
            merged[i] = reps
        repair_moves[g], repair_seconds[g], held[g] = stats["moves"], round(took, 3), loads
        cut |= stats["cut_short"]
        steps += stats["steps"]
        stuck.update(stats["stuck_brokers"])
    dims = [d for d in inp.bands if d in inp.units]
    outside = repair_outside = outside_bands(inp, {d: {b: sum(h[d][b] for h in held) for b in inp.rack} for d in dims})
    whole_moves = None
    if outside:  # what the groups could not mend on their own brokers: one pass that sees every broker
        rstats = _whole_repair(inp, merged, deadline)
        whole_moves, outside, stuck = rstats["moves"], rstats["outside_bands"], set(rstats["stuck_brokers"])
        cut |= rstats["cut_short"]
        steps += rstats["steps"]
    changed_all = {i: reps for i, reps in enumerate(merged) if reps != tuple(inp.replicas[i])}
    repaired_n = sum(repair_moves) + (whole_moves or 0)
    return changed_all, SplitStats(
        groups=len(tasks), group_moves=group_moves, group_seconds=group_seconds, group_outside=group_outside,
        undone_moves=undone, repair_moves=repaired_n, repair_group_moves=repair_moves,
        repair_group_seconds=repair_seconds, repair_outside=repair_outside, whole_repair_moves=whole_moves,
        moves=sum(group_moves) - undone + repaired_n, outside_bands=outside, stuck_brokers=sorted(stuck),
        cut_short=cut, steps=steps)
