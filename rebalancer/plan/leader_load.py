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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypedDict

from ..load import Band, beyond, beyond_columns
from .budget import CHECK_EVERY, Deadline
from .load_greedy import SIZE_PULL, WINDOW
from .load_problem import mean_target, violation_sides, violation_unit

__all__ = ["HandOverStats", "LeaderLoadInput", "leader_load", "leader_loads"]


class HandOverStats(TypedDict):
    """What the hand-overs did: leaders handed over, exchanges, rounds over the stuck brokers, the brokers left
    outside a band, and whether the deadline cut them short."""

    moves: int
    swaps: int
    rounds: int
    outside_bands: list[int]
    cut_short: bool

SWAP_SCAN = 4096  # partitions read for a swap
ROUNDS = 4        # passes over the brokers that were stuck, while the previous pass moved something
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


def leader_loads(inp: LeaderLoadInput, leader: Sequence[int]) -> dict[str, dict[int, float]]:
    """Per leader dimension of ``inp``, each banded broker's leader load when ``leader`` leads."""
    out = {}
    for d, bands in inp.bands.items():
        load = dict.fromkeys(bands, 0.0)
        for i, b in enumerate(leader):
            if b in load:
                load[b] += inp.units[d][i]
        out[d] = load
    return out


def leader_load(inp: LeaderLoadInput, deadline: Deadline | None = None) -> tuple[dict[int, int], HandOverStats]:
    """New leaders (partition index -> broker) for the partitions whose leader changes, and stats."""
    state = _Leadership(inp)
    stats = state.run(deadline or Deadline.never())
    changed = {i: b for i, b in enumerate(state.leader) if b != inp.leader[i]}
    return changed, stats


class _Leadership:
    """One leader pass's state: the leaders being changed, every broker's leader load and counts (per broker and per
    topic), and per broker the partitions it leads and those it could lead, sorted by the main dimension."""

    def __init__(self, inp: LeaderLoadInput) -> None:
        self.inp = inp
        self.dims = dims = [d for d in inp.bands if d in inp.units]
        self.leader = leader = list(inp.leader)
        self.brokers = brokers = sorted({b for c in inp.candidates for b in c} | {b for d in dims for b in inp.bands[d]})
        self.load = load = {d: {b: 0.0 for b in brokers} for d in dims}
        for i, b in enumerate(leader):
            for d in dims:
                load[d][b] = load[d].get(b, 0.0) + inp.units[d][i]
        self.low = {d: {b: float(inp.bands[d][b].floor) if b in inp.bands[d] else -1e300 for b in brokers} for d in dims}
        self.high = {d: {b: float(inp.bands[d][b].ceil) if b in inp.bands[d] else 1e300 for b in brokers} for d in dims}
        self.scale: dict[str, dict[int, float]] = {}
        for d in dims:
            mean = mean_target(inp.bands[d])
            self.scale[d] = {b: violation_unit(inp.bands[d][b].average if b in inp.bands[d] else mean, mean,
                                               inp.weight.get(d, 1.0)) for b in brokers}
        self.zone = {d: (inp.accepted or {}).get(d, {}) for d in dims}
        self.main = max(dims, key=lambda d: inp.weight.get(d, 1.0))
        self._index()

    def _index(self) -> None:
        """Every broker's candidates sorted by load then partition (one numpy sort of every (broker, load, partition)),
        from which ``lists`` builds a broker's sorted lists (those it leads, those it could lead) when a step first
        needs them, and the counts per broker and per topic. Most brokers of a large cluster are never stepped: the
        lists of all 3M candidates took ~5 s at 3M replicas; their content and order are the loop's."""
        import numpy as np

        from ..load import replica_columns

        inp, leader, brokers = self.inp, self.leader, self.brokers
        n = len(leader)
        part, flat, _ = replica_columns(inp.candidates)  # every (partition, candidate)
        units = np.asarray(inp.units[self.main], dtype=float)
        pos = np.searchsorted(np.asarray(brokers, dtype=np.int64), flat)
        order = np.lexsort((part, units[part], pos))  # by broker, then load, then partition
        self._sorted = part[order]
        ends = np.cumsum(np.bincount(pos, minlength=len(brokers))).tolist()
        self._span = {b: (start, end) for b, start, end in zip(brokers, [0, *ends][:-1], ends, strict=True)}
        # the tuples hold the partitions' own load and index objects, as the loop's did (new ones per candidate
        # took ~130 MB more at 3M replicas)
        self._loads, self._ids = inp.units[self.main], list(range(n))
        self.led: dict[int, list[tuple[float, int]]] = {}    # partitions b leads (built by ``lists``)
        self.could: dict[int, list[tuple[float, int]]] = {}  # b could lead and does not
        self.count = {b: 0 for b in self.brokers}
        for b in leader:
            self.count[b] = self.count.get(b, 0) + 1
        self.led_topic: dict[tuple[int, str], set[int]] = {}
        if inp.topics:
            for i, (b, t) in enumerate(zip(leader, inp.topics, strict=True)):
                self.led_topic.setdefault((b, t), set()).add(i)
        # what each broker leads of each topic: counted once, from the sets
        self.per_topic: dict[tuple[str, int], int] = ({(t, b): len(led) for (b, t), led in self.led_topic.items()}
                                                      if inp.topic_band else {})
        self._columns(pos, np.bincount(part, minlength=n))

    def _columns(self, flat_pos: Any, lens: Any) -> None:
        """The state as numpy columns, for ``_whole_pool``: per partition its candidates (broker positions) and
        units; per broker position its bands, zones, count band and, kept by ``move``, its loads and leader count;
        per partition its leader's position."""
        import numpy as np

        inp, brokers, n = self.inp, self.brokers, len(self.leader)
        self._ids_arr = np.asarray(brokers, dtype=np.int64)
        self._pos = {b: k for k, b in enumerate(brokers)}
        self._cand = flat_pos  # candidates' broker positions, partition by partition (``replica_columns``' order)
        self._cand_len = lens  # candidates per partition
        self._cand_start = np.cumsum(lens) - lens
        self._lead_arr = np.fromiter((self._pos[b] for b in self.leader), np.int64, n)
        self._units_arr = {d: np.asarray(inp.units[d], dtype=np.float64) for d in self.dims}
        self._load_arr = {d: np.array([self.load[d][b] for b in brokers], dtype=np.float64) for d in self.dims}
        self._count_arr = np.array([self.count[b] for b in brokers], dtype=np.int64)
        big = np.iinfo(np.int64).max // 4
        band = inp.count_band or {}
        self._cfloor = np.array([band[b].floor if b in band else -big for b in brokers], dtype=np.int64)
        self._cceil = np.array([band[b].ceil if b in band else big for b in brokers], dtype=np.int64)
        self._band_arr = {d: tuple(np.array(v, dtype=np.float64) for v in (
            [self.low[d][b] for b in brokers], [self.high[d][b] for b in brokers], [self.scale[d][b] for b in brokers],
            [self.zone[d][b][0] if b in self.zone[d] else 0.0 for b in brokers],
            [self.zone[d][b][1] if b in self.zone[d] else 0.0 for b in brokers]))
            + (np.array([b in self.zone[d] for b in brokers], dtype=bool),) for d in self.dims}

    def lists(self, b: int) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
        """(the partitions b leads, those it could lead and does not), each sorted by (load, partition): built from
        the leaders as they are when first asked for, then kept exact by ``move``."""
        led = self.led.get(b)
        if led is None:
            start, end = self._span[b]
            leader, loads, ids = self.leader, self._loads, self._ids
            parts = self._sorted[start:end].tolist()
            led = self.led[b] = [(loads[i], ids[i]) for i in parts if leader[i] == b]
            self.could[b] = [(loads[i], ids[i]) for i in parts if leader[i] != b]
        return led, self.could[b]

    def out(self, d: str, b: int, v: float) -> float:
        z = self.zone[d].get(b)
        scale = self.scale[d][b]
        outside_zone = ZONE_WEIGHT * beyond(v, z[0], z[1]) / scale if z else 0.0
        return outside_zone + beyond(v, self.low[d][b], self.high[d][b]) / scale

    def violation(self, b: int) -> float:
        return sum(self.out(d, b, self.load[d][b]) for d in self.dims)

    def above(self, b: int) -> bool:
        """Whether broker b is further above its bands than below them."""
        up, down = violation_sides(b, self.dims, self.load, self.low, self.high, self.scale)
        return up >= down

    def window(self, lst: list[tuple[float, int]], desired: float, width: int = WINDOW) -> list[int]:
        pos = bisect.bisect_right(lst, (desired, len(self.leader)))
        return [i for _, i in lst[max(0, pos - width):pos + width]]

    def count_ok(self, a: int, c: int) -> bool:
        """The hand-over leaves both leader counts in their band (or no further out)."""
        band, count = self.inp.count_band, self.count
        if not band:
            return True
        ba, bc = band.get(a), band.get(c)
        if ba is not None and count[a] - 1 < ba.floor and count[a] - 1 < count[a]:
            return False
        return not (bc is not None and count[c] + 1 > bc.ceil)

    def topic_ok(self, i: int, a: int, c: int) -> bool:
        if not self.count_ok(a, c):
            return False
        if not self.inp.topic_band:
            return True
        t = self.inp.topics[i]
        band = self.inp.topic_band[t]
        na, nc = self.per_topic.get((t, a), 0), self.per_topic.get((t, c), 0)
        before = band.excess(na) + band.deficit(na) + band.excess(nc) + band.deficit(nc)
        after = band.excess(na - 1) + band.deficit(na - 1) + band.excess(nc + 1) + band.deficit(nc + 1)
        return after <= before or self.mends_count_gate(a, c)

    def mends_count_gate(self, a: int, c: int) -> bool:
        """Does handing a leadership from a to c bring a broker outside what the leader gate accepts (``accepted``'s
        leader counts) nearer it? Such a hand-over may take a topic past its band: the count gate is a gate, a
        topic's band is one only where the plan can claim it (a broker holding a few busy partitions, at its band's
        ceiling in every topic it follows, was left 17 leaders under the median: fuzz medium 11)."""
        zone = self.zone.get("leaders")
        if not zone:
            return False
        below = c in zone and self.count[c] < zone[c][0]
        return below or (a in zone and self.count[a] > zone[a][1])

    def delta(self, i: int, a: int, c: int, j: int | None = None) -> float:
        """Violation change when a hands partition i's leadership to c (and, for a swap, c hands j's to a)."""
        change = 0.0
        units, load, out = self.inp.units, self.load, self.out
        for d in self.dims:
            u = units[d][i] - (units[d][j] if j is not None else 0.0)
            if u:
                change += out(d, a, load[d][a] - u) - out(d, a, load[d][a])
                change += out(d, c, load[d][c] + u) - out(d, c, load[d][c])
        return change

    def pairs(self, i: int, x: int, giving: bool) -> list[tuple[int, int]]:
        """(from, to) hand-overs of partition i for broker x: x to each other candidate, or the leader to x."""
        return [(x, c) for c in self.inp.candidates[i] if c != x] if giving else [(self.leader[i], x)]

    def step(self, x: int) -> tuple[int, int, int, int | None] | None:
        """The best single hand-over, else the best swap of two partitions of one topic between x and a partner
        (which keeps every per-topic and per-broker leader count as it is); first in the direction x is further out
        by (giving when above), then in the other: a broker below its network-out band and above its leader-count
        band may take no leadership (its count is at its ceiling), yet handing over a quiet partition helps it."""
        main = self.main
        first = self.above(x)
        led, could = self.lists(x)
        pull = SIZE_PULL / self.scale[main][x]
        for giving in (first, not first):
            gap = (self.load[main][x] - self.high[main][x]) if giving else (self.low[main][x] - self.load[main][x])
            desired = max(gap, 0.0)
            pool = led if giving else could
            best = self._hand_over(x, giving, pool, desired, pull)
            if best is None and self.inp.topics:
                best = self._swap(x, giving, pool, desired, pull)
            if best is not None:
                return best
        return None

    def _hand_over(self, x: int, giving: bool, pool: list[tuple[float, int]], desired: float,
                   pull: float) -> tuple[int, int, int, int | None] | None:
        # Near the desired size first; when nothing there may move (topic and count bands), every partition.
        near = self.window(pool, desired)
        best = self._one_by_one(x, giving, near, desired, pull)
        if best is not None or len(pool) <= len(near):
            return best
        return self._whole_pool(x, giving, pool, desired, pull)

    def _one_by_one(self, x: int, giving: bool, parts: Iterable[int], desired: float,
                    pull: float) -> tuple[int, int, int, int | None] | None:
        """The best hand-over of one of ``parts`` for x (giving: x hands over; else x takes over): allowed by the
        count and topic bands (``topic_ok``), lowering the violation (``delta``), by the least score (violation
        change + ``pull`` x distance from the desired size), the first best in ``parts``' order."""
        units = self.inp.units[self.main]
        best: tuple[float, int, int, int, int | None] | None = None
        for i in parts:
            for a, c in self.pairs(i, x, giving):
                if not self.topic_ok(i, a, c):
                    continue
                dv = self.delta(i, a, c)
                if dv >= -1e-12:
                    continue
                score = dv + pull * abs(units[i] - desired)
                if best is None or score < best[0]:
                    best = (score, i, a, c, None)
        return None if best is None else best[1:]

    def _whole_pool(self, x: int, giving: bool, pool: list[tuple[float, int]], desired: float,
                    pull: float) -> tuple[int, int, int, int | None] | None:
        """``_one_by_one`` over every partition in ``pool``, as numpy columns: the count bands
        (``count_ok``), violation change (``delta``) and score in the same floating-point operations, then the
        topic's band (``topic_ok``) in order of score, ties in the pool's order, so the same choice as a reading one
        by one. That took 10 ms a step on a pool of 1,300 partitions, and 6,500 of 7,000 steps read one whole (fuzz
        medium seed 15, 165k partitions: the hand-overs took 273 s)."""
        import numpy as np

        inp, count = self.inp, self._count_arr
        part = np.fromiter(map(itemgetter(1), pool), np.int64, len(pool))
        at = self._pos[x]
        if giving:  # x hands over to each other candidate, in the candidates' order
            lens = self._cand_len[part]
            row = np.repeat(np.arange(len(part)), lens)
            first = np.repeat(np.cumsum(lens) - lens, lens)
            to = self._cand[self._cand_start[part][row] + np.arange(len(row)) - first]
            keep = to != at
            part, to = part[row][keep], to[keep]
            frm = np.full(len(part), at)
        else:  # the leader hands over to x
            frm, to = self._lead_arr[part], np.full(len(part), at)
        idx = np.flatnonzero(~(count[frm] - 1 < self._cfloor[frm]) & ~(count[to] + 1 > self._cceil[to]))  # count_ok
        part, frm, to = part[idx], frm[idx], to[idx]
        change = np.zeros(len(part))
        for d in self.dims:
            u = self._units_arr[d][part]
            load = self._load_arr[d]
            la, lc = load[frm], load[to]
            change = change + np.where(u != 0, self._out(d, frm, la - u) - self._out(d, frm, la), 0.0)
            change = change + np.where(u != 0, self._out(d, to, lc + u) - self._out(d, to, lc), 0.0)
        better = np.flatnonzero(change < -1e-12)
        score = change[better] + pull * np.abs(self._units_arr[self.main][part[better]] - desired)
        # by score, ties in the pool's order: the first whose topic allows it is the first best
        for k in better[np.argsort(score, kind="stable")].tolist():
            i, a, c = int(part[k]), int(self._ids_arr[frm[k]]), int(self._ids_arr[to[k]])
            if not inp.topic_band or self.topic_ok(i, a, c):
                return i, a, c, None
        return None

    def _out(self, d: str, at: Any, v: Any) -> Any:
        """``out`` over numpy columns: brokers at positions ``at`` with loads ``v``."""
        import numpy as np

        low, high, scale, z0, z1, has_zone = (a[at] for a in self._band_arr[d])
        outside_zone = np.where(has_zone, ZONE_WEIGHT * beyond_columns(v, z0, z1) / scale, 0.0)
        return outside_zone + beyond_columns(v, low, high) / scale

    def _swap(self, x: int, giving: bool, pool: list[tuple[float, int]], desired: float,
              pull: float) -> tuple[int, int, int, int | None] | None:
        """A swap moves the difference of two partitions: any size may pair up, so read wider."""
        inp, units = self.inp, self.inp.units[self.main]
        best: tuple[float, int, int, int, int | None] | None = None
        for i in (i for _, i in pool) if len(pool) <= SWAP_SCAN else self.window(pool, desired, SWAP_SCAN // 2):
            t = inp.topics[i]
            for a, c in self.pairs(i, x, giving):
                for j in self.led_topic.get((c, t), ()):
                    if a not in inp.candidates[j]:
                        continue
                    moved = units[i] - units[j]
                    if moved <= 0:
                        continue
                    dv = self.delta(i, a, c, j)
                    if dv >= -1e-12:
                        continue
                    score = dv + pull * abs(moved - desired)
                    if best is None or score < best[0]:
                        best = (score, i, a, c, j)
        return None if best is None else best[1:]

    def move(self, i: int, a: int, c: int) -> None:
        inp = self.inp
        u = inp.units[self.main][i]
        for broker, lose, gain in ((a, self.led, self.could), (c, self.could, self.led)):
            if broker not in lose:  # not built yet: ``lists`` reads the leaders as they will be
                continue
            lst = lose[broker]
            j = bisect.bisect_left(lst, (u, i))
            if j < len(lst) and lst[j][1] == i:
                del lst[j]
            bisect.insort(gain[broker], (u, i))
        for d in self.dims:
            self.load[d][a] -= inp.units[d][i]
            self.load[d][c] += inp.units[d][i]
        self.leader[i] = c
        self.count[a] -= 1
        self.count[c] = self.count.get(c, 0) + 1
        pa, pc = self._pos[a], self._pos[c]
        self._lead_arr[i] = pc
        self._count_arr[pa], self._count_arr[pc] = self.count[a], self.count[c]
        for d in self.dims:
            self._load_arr[d][pa], self._load_arr[d][pc] = self.load[d][a], self.load[d][c]
        if inp.topics:
            t = inp.topics[i]
            self.per_topic[(t, a)] = self.per_topic.get((t, a), 0) - 1
            self.per_topic[(t, c)] = self.per_topic.get((t, c), 0) + 1
            self.led_topic[(a, t)].discard(i)
            self.led_topic.setdefault((c, t), set()).add(i)

    def run(self, deadline: Deadline) -> HandOverStats:
        """Steps until every broker is inside, no move helps, or the deadline; stuck brokers get ``ROUNDS`` tries."""
        violation = self.violation
        moves = steps = swaps = 0
        cut_short = False
        stuck: set[int] = set()
        heap = [(-violation(b), b) for b in self.brokers if violation(b) > 0]
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
            chosen = self.step(x)
            if chosen is None:
                stuck.add(x)
                continue
            i, a, c, j = chosen
            self.move(i, a, c)
            moves += 1
            if j is not None:
                self.move(j, c, a)
                swaps += 1
            for b in (a, c):
                stuck.discard(b)
                if violation(b) > 0:
                    heapq.heappush(heap, (-violation(b), b))
        outside = sorted(b for b in self.brokers if violation(b) > 1e-12)
        return HandOverStats(moves=moves, swaps=swaps, rounds=rounds, outside_bands=outside, cut_short=cut_short)
