"""Leaders chosen with network out in view (``--balance load``): after the exact leader flow has balanced leader
counts, move leadership (replica order only, never data) until every broker's network out is within its band.

Network out is a leader-only dimension (``rebalancer.load``): the leader sends the partition's bytes to its
followers and consumers, so the leader flow's count balance can leave a broker leading the busiest partitions (+50 %
on a cluster whose sizes vary). A *move* hands a partition's leadership to another of its replicas that may lead
(eligible, alive, in sync or about to be); it is taken when it lowers the violation of network out, counted as in
``load_greedy``, keeps both brokers' leader counts within their band (``count_band``), and only if it leaves the
topic's per-broker leader counts no further outside the topic's band than they were (the flow's per-topic balance,
which the validation gates check, is kept). Each step takes the broker furthest outside a band: above, it hands over
the partition whose network out is nearest what it must shed; below, it takes over the one nearest what it lacks.
The loop ends when every broker is inside, when no move helps, or at the ``Deadline``. Where a band cannot be met (a
few partitions carry the load), the range the network gate accepts (``accepted``: the band widened by the broker's
busiest partition, or no further from its target than before the plan) weighs far more than the band, so that no
hand-over trades a broker out of it. Where no single hand-over is allowed, a *swap* of two partitions of one topic
between the two brokers (each leads the other's) moves network out and leaves every leader count as it was.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..load import Band
from .budget import Deadline

__all__ = ["LeaderLoadInput", "leader_load"]

SIZE_PULL = 3.0
WINDOW = 12
SWAP_SCAN = 4096  # partitions read for a swap
ROUNDS = 4        # passes over the brokers that were stuck, while the previous pass moved something
CHECK_EVERY = 64
ZONE_WEIGHT = 1000.0  # a broker beyond what its gate accepts, against one outside its (narrower) band


@dataclass(frozen=True)
class LeaderLoadInput:
    leader: Sequence[int]                          # per partition index: the leader after the flow
    candidates: Sequence[tuple[int, ...]]          # per partition index: replicas that may lead
    units: Mapping[str, Sequence[float]]           # leader dimension -> per partition: the leader's load
    bands: Mapping[str, Mapping[int, Band]]        # leader dimension -> eligible broker -> band
    weight: Mapping[str, float]                    # dimension -> priority
    count_band: Mapping[int, Band] | None = None   # broker -> leader count band no hand-over may leave
    topics: Sequence[str] = ()                     # per partition index (empty: no per-topic band)
    topic_band: Mapping[str, Band] | None = None   # topic -> its leader band, which no move may make worse
    accepted: Mapping[str, Mapping[int, tuple[float, float]]] | None = None  # dimension -> broker -> the range the
    #                                              gate accepts (``load.accepted_range``); beyond it weighs ZONE_WEIGHT


def leader_load(inp: LeaderLoadInput, deadline: Deadline | None = None) -> tuple[dict[int, int], dict[str, object]]:
    """New leaders (partition index -> broker) for the partitions whose leader changes, and stats."""
    deadline = deadline or Deadline.never()
    dims = [d for d in inp.bands if d in inp.units]
    leader = list(inp.leader)
    brokers = sorted({b for c in inp.candidates for b in c} | {b for d in dims for b in inp.bands[d]})
    load = {d: {b: 0.0 for b in brokers} for d in dims}
    for i, b in enumerate(leader):
        for d in dims:
            load[d][b] = load[d].get(b, 0.0) + inp.units[d][i]
    low = {d: {b: float(inp.bands[d][b].floor) if b in inp.bands[d] else -1e300 for b in brokers} for d in dims}
    high = {d: {b: float(inp.bands[d][b].ceil) if b in inp.bands[d] else 1e300 for b in brokers} for d in dims}
    scale = {}
    for d in dims:
        mean = max(1e-9, sum(x.average for x in inp.bands[d].values()) / max(1, len(inp.bands[d])))
        scale[d] = {b: max(inp.bands[d][b].average if b in inp.bands[d] else mean, mean * 1e-3) / inp.weight.get(d, 1.0)
                    for b in brokers}

    zone = {d: (inp.accepted or {}).get(d, {}) for d in dims}

    def out(d: str, b: int, v: float) -> float:
        z = zone[d].get(b)
        beyond = ZONE_WEIGHT * max(0.0, z[0] - v, v - z[1]) / scale[d][b] if z else 0.0
        if v > high[d][b]:
            return beyond + (v - high[d][b]) / scale[d][b]
        if v < low[d][b]:
            return beyond + (low[d][b] - v) / scale[d][b]
        return beyond

    def violation(b: int) -> float:
        return sum(out(d, b, load[d][b]) for d in dims)

    def above(b: int) -> bool:
        return sum(max(0.0, load[d][b] - high[d][b]) / scale[d][b] for d in dims) >= \
            sum(max(0.0, low[d][b] - load[d][b]) / scale[d][b] for d in dims)

    main = max(dims, key=lambda d: inp.weight.get(d, 1.0))
    led: dict[int, list[tuple[float, int]]] = {b: [] for b in brokers}     # partitions b leads, by main units
    could: dict[int, list[tuple[float, int]]] = {b: [] for b in brokers}   # partitions b could lead and does not
    for i, cands in enumerate(inp.candidates):
        for b in cands:
            (led if b == leader[i] else could)[b].append((inp.units[main][i], i))
    for lst in (*led.values(), *could.values()):
        lst.sort()

    def window(lst: list[tuple[float, int]], desired: float, width: int = WINDOW) -> list[int]:
        pos = bisect.bisect_right(lst, (desired, len(leader)))
        return [i for _, i in lst[max(0, pos - width):pos + width]]

    per_topic: dict[tuple[str, int], int] = {}
    if inp.topic_band:
        for i, b in enumerate(leader):
            per_topic[(inp.topics[i], b)] = per_topic.get((inp.topics[i], b), 0) + 1

    count = {b: 0 for b in brokers}
    for b in leader:
        count[b] = count.get(b, 0) + 1

    def count_ok(a: int, c: int) -> bool:
        """The hand-over leaves both leader counts in their band (or no further out)."""
        if not inp.count_band:
            return True
        ba, bc = inp.count_band.get(a), inp.count_band.get(c)
        if ba is not None and count[a] - 1 < ba.floor and count[a] - 1 < count[a]:
            return False
        return not (bc is not None and count[c] + 1 > bc.ceil)

    def topic_ok(i: int, a: int, c: int) -> bool:
        if not count_ok(a, c):
            return False
        if not inp.topic_band:
            return True
        t = inp.topics[i]
        band = inp.topic_band[t]
        na, nc = per_topic.get((t, a), 0), per_topic.get((t, c), 0)
        before = band.excess(na) + band.deficit(na) + band.excess(nc) + band.deficit(nc)
        after = band.excess(na - 1) + band.deficit(na - 1) + band.excess(nc + 1) + band.deficit(nc + 1)
        return after <= before

    led_topic: dict[tuple[int, str], set[int]] = {}
    if inp.topics:
        for i, b in enumerate(leader):
            led_topic.setdefault((b, inp.topics[i]), set()).add(i)

    def delta(i: int, a: int, c: int, j: int | None = None) -> float:
        """Violation change when a hands partition i's leadership to c (and, for a swap, c hands j's to a)."""
        change = 0.0
        for d in dims:
            u = inp.units[d][i] - (inp.units[d][j] if j is not None else 0.0)
            if u:
                change += out(d, a, load[d][a] - u) - out(d, a, load[d][a])
                change += out(d, c, load[d][c] + u) - out(d, c, load[d][c])
        return change

    def step(x: int) -> tuple[int, int, int, int | None] | None:
        """The best single hand-over, else the best swap of two partitions of one topic between x and a partner
        (which keeps every per-topic and per-broker leader count as it is)."""
        giving = above(x)
        gap = (load[main][x] - high[main][x]) if giving else (low[main][x] - load[main][x])
        desired = max(gap, 0.0)
        pull = SIZE_PULL / scale[main][x]
        best: tuple[float, int, int, int, int | None] | None = None
        pool = led[x] if giving else could[x]
        near = window(pool, desired)
        # Near the desired size first; when nothing there may move (topic and count bands), every partition.
        for cands in (near, [i for _, i in pool] if len(pool) > len(near) else []):
            for i in cands:
                pairs = [(x, c) for c in inp.candidates[i] if c != x] if giving else [(leader[i], x)]
                for a, c in pairs:
                    if not topic_ok(i, a, c):
                        continue
                    dv = delta(i, a, c)
                    if dv >= -1e-12:
                        continue
                    score = dv + pull * abs(inp.units[main][i] - desired)
                    if best is None or score < best[0]:
                        best = (score, i, a, c, None)
            if best is not None:
                break
        if best is not None or not inp.topics:
            return None if best is None else best[1:]
        # A swap moves the difference of two partitions: any size may pair up, so read wider.
        for i in (i for _, i in pool) if len(pool) <= SWAP_SCAN else window(pool, desired, SWAP_SCAN // 2):
            t = inp.topics[i]
            pairs = [(x, c) for c in inp.candidates[i] if c != x] if giving else [(leader[i], x)]
            for a, c in pairs:
                for j in led_topic.get((c, t), ()):
                    if a not in inp.candidates[j]:
                        continue
                    moved = inp.units[main][i] - inp.units[main][j]
                    if moved <= 0:
                        continue
                    dv = delta(i, a, c, j)
                    if dv >= -1e-12:
                        continue
                    score = dv + pull * abs(moved - desired)
                    if best is None or score < best[0]:
                        best = (score, i, a, c, j)
        return None if best is None else best[1:]

    def move(i: int, a: int, c: int) -> None:
        u = inp.units[main][i]
        for lst, b in ((led[a], i), (could[c], i)):
            j = bisect.bisect_left(lst, (u, b))
            if j < len(lst) and lst[j][1] == b:
                del lst[j]
        bisect.insort(led[c], (u, i))
        bisect.insort(could[a], (u, i))
        for d in dims:
            load[d][a] -= inp.units[d][i]
            load[d][c] += inp.units[d][i]
        leader[i] = c
        count[a] -= 1
        count[c] = count.get(c, 0) + 1
        if inp.topics:
            t = inp.topics[i]
            per_topic[(t, a)] = per_topic.get((t, a), 0) - 1
            per_topic[(t, c)] = per_topic.get((t, c), 0) + 1
            led_topic[(a, t)].discard(i)
            led_topic.setdefault((c, t), set()).add(i)

    moves = steps = swaps = 0
    cut_short = False
    stuck: set[int] = set()
    heap = [(-violation(b), b) for b in brokers if violation(b) > 0]
    heapq.heapify(heap)
    rounds, moves_at_round = 1, 0
    while heap or (stuck and rounds < ROUNDS and moves > moves_at_round and not cut_short):
        if not heap:  # another broker's moves may have opened a way for the stuck ones
            rounds, moves_at_round = rounds + 1, moves
            heap = [(-violation(b), b) for b in stuck if violation(b) > 0]
            heapq.heapify(heap)
            stuck.clear()
            continue
        steps += 1
        if steps % CHECK_EVERY == 1 and deadline.expired():
            cut_short = True
            break
        v, x = heapq.heappop(heap)
        if x in stuck or violation(x) <= 0 or -v != violation(x):
            continue
        chosen = step(x)
        if chosen is None:
            stuck.add(x)
            continue
        i, a, c, j = chosen
        move(i, a, c)
        moves += 1
        if j is not None:
            move(j, c, a)
            swaps += 1
        for b in (a, c):
            stuck.discard(b)
            if violation(b) > 0:
                heapq.heappush(heap, (-violation(b), b))
    changed = {i: b for i, b in enumerate(leader) if b != inp.leader[i]}
    outside = sorted(b for b in brokers if violation(b) > 1e-12)
    return changed, {"moves": moves, "swaps": swaps, "rounds": rounds, "outside_bands": outside, "cut_short": cut_short}
