"""Replica placement on load (``--balance load``, strategy ``greedy``): every broker's disk, network in and replica
count into its band, moving the fewest bytes it can.

The input is plain data (``load_problem.LoadInput``): each partition's replicas and what one of its replicas weighs in each
placement dimension (those a follower carries: disk bytes, bytes in per second, the replica count; leader-only
dimensions are the leader pass's job), and each eligible broker's ``Band`` per dimension (``rebalancer.load``).

A broker's *violation* is the sum over dimensions of how far it is outside its band, in units of its target
(``(load - high) / target`` above, ``(low - load) / target`` below); a removed broker's band is [0, 0] with a weight
of ``REMOVED_WEIGHT``, so emptying it comes first. A move replaces one replica of a partition on a giver by a
receiver that keeps the partition's rack count, has room under every capacity limit and has not reached the change
cap; it is taken only if it lowers the total violation. Each step takes the broker furthest outside its bands and
makes its best move:

- a broker above a band gives to the receivers that need most (below their bands first, then those with most
  room), a broker below one takes from the givers with most to spare;
- the partition is chosen near a *desired size*: what the broker still needs in its most violated dimension,
  divided by the replicas it still needs to gain or shed to reach its count band (at least one). A broker 10 GB
  over with its count in band gives one partition as close to 10 GB as fits; a new broker takes partitions of the
  size that reaches its disk band and its count band together. Moving exactly what the bands need is what keeps
  bytes moved at the bound (``bounds.bytes_moved_bound``): a move between a broker above its band and one below it
  wastes nothing, however large;
- score = violation change + ``SIZE_PULL`` x distance from the desired size (in target units): the pull makes the
  desired size the best choice among moves that all remove the same violation per byte.

Where a broker has no improving move, an *exchange* is sought (Cruise Control's swap action): one of its
replicas and a replica of unlike size on a partner that may also give and take trade brokers, which moves their
difference in load and keeps both counts; the pair is chosen near the difference the broker needs, preferring the
pair that copies the fewest bytes beyond it. Where that finds nothing either, the broker may be stuck between two
dimensions (disk at the top of its band and network in short of it, say: whatever would bring network in brings
disk over): ``cross_swap`` trades one of its replicas of the least network in per byte for a partner's of the
most, of about the same disk, so network in moves and disk stays inside both bands (and the reverse), at no more
bytes per violation removed than a waste-free move of an average replica.

Candidates are read from each broker's partitions sorted by the dimension that drives the step, around the desired
size (``WINDOW`` usable entries on each side), against the ``FAN`` most needy partners. A broker with no improving
move or exchange is set aside until another move changes the loads. The loop ends when no broker is outside a band, when every
broker outside is set aside, or at the ``Deadline`` (asked every ``CHECK_EVERY`` steps); every move is whole and
valid on its own, so a cut-short placement is valid and less balanced.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Sequence
from typing import TypedDict

from ..load import beyond
from .budget import CHECK_EVERY, Deadline
from .load_problem import REMOVED_WEIGHT, LoadInput, add_fixed, mean_target, violation_sides, violation_unit
from .racks import keeps_racks

__all__ = ["GreedyStats", "load_greedy"]

SIZE_PULL = 3.0          # > 2: a waste-free move lowers the violation by 2 x its size; the pull must outweigh that
WINDOW = 12              # usable candidate partitions read on each side of the desired size
FAN = 4                  # partners tried per step
WIDEN = 4                # ... and so many times as many more, in turn, while none of them has a move
NO_LIMIT = 1e300          # a band's edge or hard limit where it has none
# a move between two brokers in one dimension (``_Placement.pair``): the partitions' units, the giver's and the
# receiver's load, band (low, high) and violation unit each, how far outside its band each is now, the dimension's
# priority
Pair = tuple[Sequence[float], float, float, float, float, float, float, float, float, float, float, float]


class GreedyStats(TypedDict):
    """What load_greedy did: moves made, brokers it left outside a band, brokers it could not improve, whether its
    deadline cut it short, and its steps."""

    moves: int
    swaps: int
    outside_bands: list[int]
    stuck_brokers: list[int]
    cut_short: bool
    steps: int


def load_greedy(inp: LoadInput, deadline: Deadline | None = None) -> tuple[dict[int, tuple[int, ...]], GreedyStats]:
    """New replicas for the partitions that change (by index), and stats."""
    placement = _Placement(inp)
    stats = placement.run(deadline or Deadline.never())
    changed = {i: tuple(reps) for i, reps in enumerate(placement.assign) if tuple(reps) != tuple(inp.replicas[i])}
    return changed, stats


class _Placement:
    """One greedy placement's state: the assignment being changed, every broker's load and violation, and per broker
    its movable partitions sorted by each dimension (built when first needed and kept exact as moves are made)."""

    def __init__(self, inp: LoadInput) -> None:
        self.inp = inp
        self.dims = dims = [d for d in inp.bands if d in inp.units]
        if not dims:
            raise ValueError("no placement dimension has both units and bands")
        self.units = {d: inp.units[d] for d in dims}
        self.n = len(inp.replicas)
        self.assign = [list(r) for r in inp.replicas]
        self.brokers = sorted(set(inp.rack))
        self.movers = inp.givers | inp.receivers | inp.removed
        self._count_loads()
        self._limits()
        # Cached per broker: how far above its bands, how far below (summed over dimensions, in target units).
        self.above: dict[int, float] = {}
        self.below: dict[int, float] = {}
        for b in self.brokers:
            self.refresh(b)
        # what the change cap counts against: a replica this plan added may move on (the plan still adds it once)
        self.origin = origin = inp.origin if inp.origin is not None else inp.replicas
        if origin is not None:
            self.changes = [sum(1 for b in reps if b not in origin[i]) for i, reps in enumerate(self.assign)]
        else:
            self.changes = [0] * self.n
        self.holding = {b: len(self.holders[b]) for b in self.brokers}
        self.sorted_on: dict[str, dict[int, list[tuple[float, int]]]] = {d: {} for d in dims}
        self.priority = {d: inp.weight.get(d, 1.0) for d in dims}
        self.undo = inp.givers & inp.receivers  # brokers that may move back what a move overshoots
        self.swaps = 0
        self.bytes = inp.units["disk"] if "disk" in inp.units else inp.units[dims[0]]  # what an exchange copies
        self._by_ratio: dict[int, dict[tuple[str, str], list[tuple[float, int]]]] = {}  # b -> (d1, d2) -> ``by_ratio``
        self._bytes_per: dict[str, float] = {}
        self.receivers = sorted(r for r in inp.receivers if r not in inp.removed)
        self.givers = sorted(inp.givers | inp.removed)
        self._order_partners()

    def _order_partners(self) -> None:
        """Per dimension, the receivers and the givers in the order ``partners`` reads them (neediest first, ties in
        broker order), kept sorted as ``refresh`` changes a broker: a step reads the first few instead of ranking
        every broker (``heapq.nsmallest`` over 1,000-2,600 brokers was a third of a step)."""
        from sortedcontainers import SortedList

        self._taker_pos = {r: k for k, r in enumerate(self.receivers)}
        self._giver_pos = {g: k for k, g in enumerate(self.givers)}
        # each broker's key as it stands in the lists (its loads change before ``refresh`` moves it)
        self._keys = {(d, side, b): key(d, b) for d in self.dims
                      for side, key, ids in ((0, self._taker_key, self.receivers), (1, self._giver_key, self.givers))
                      for b in ids}
        self._takers = {d: SortedList(self._keys[(d, 0, r)] for r in self.receivers) for d in self.dims}
        self._givers = {d: SortedList(self._keys[(d, 1, g)] for g in self.givers) for d in self.dims}

    def _taker_key(self, d: str, r: int) -> tuple[float, float, int, int]:
        return -self.below[r], self.load[d][r] / self.scale[d][r], self._taker_pos[r], r

    def _giver_key(self, d: str, g: int) -> tuple[float, float, int, int]:
        return -self.above[g], -(self.load[d][g] - self.low[d][g]) / self.scale[d][g], self._giver_pos[g], g

    def _count_loads(self) -> None:
        """Every broker's load per dimension, the partitions it holds (ascending) and its replicas per topic, in
        columns (numpy): a loop over 3M replicas and five dimensions took 3-4 s of the plan. The sums are the loop's
        to the bit: ``bincount`` adds each broker's units in the same order, in the same double precision."""
        import numpy as np

        from ..load import replica_columns

        inp, dims, brokers = self.inp, self.dims, self.brokers
        part, flat, _ = replica_columns(self.assign)
        ids = np.asarray(brokers, dtype=np.int64)
        pos = np.searchsorted(ids, flat)
        if flat.size and (pos.max() >= ids.size or not np.array_equal(ids[pos], flat)):
            raise ValueError("a replica on a broker without a rack entry")
        self.load = {d: dict(zip(brokers, np.bincount(pos, weights=np.asarray(self.units[d], dtype=float)[part],
                                                      minlength=ids.size).tolist(), strict=True)) for d in dims}
        add_fixed(inp, self.load)
        order = np.argsort(pos, kind="stable")  # by broker, each broker's partitions ascending
        ends = np.cumsum(np.bincount(pos, minlength=ids.size)).tolist()
        held = part[order].tolist()
        self.holders: dict[int, list[int]] = {b: held[start:end] for b, start, end in
                                              zip(brokers, [0, *ends][:-1], ends, strict=True)}
        index = {t: k for k, t in enumerate(dict.fromkeys(inp.topics))}
        self.topic_of = [index[t] for t in inp.topics]  # per partition: its topic's number
        self.topics_n = len(index)
        tid = np.asarray(self.topic_of, dtype=np.int64)
        keys, counts = np.unique(flat * self.topics_n + tid[part], return_counts=True)
        self.topic_count: dict[int, int] = dict(zip(keys.tolist(), counts.tolist(), strict=True))  # b x topics + t

    def _limits(self) -> None:
        """Per dimension and broker: low, high, hard limit, scale (its target, never 0)."""
        inp = self.inp
        self.low: dict[str, dict[int, float]] = {d: {} for d in self.dims}
        self.high: dict[str, dict[int, float]] = {d: {} for d in self.dims}
        self.hard: dict[str, dict[int, float]] = {d: {} for d in self.dims}
        self.scale: dict[str, dict[int, float]] = {d: {} for d in self.dims}
        for d in self.dims:
            low, high, hard, scale = self.low[d], self.high[d], self.hard[d], self.scale[d]
            mean = mean_target(inp.bands[d])
            for b in self.brokers:
                band = inp.bands[d].get(b)
                if b in inp.removed:
                    low[b], high[b], hard[b], scale[b] = 0.0, 0.0, 0.0, mean / REMOVED_WEIGHT
                elif band is None or b not in self.movers:  # not eligible (down) or not part of this plan: as it is
                    low[b], high[b], hard[b], scale[b] = -NO_LIMIT, NO_LIMIT, NO_LIMIT, mean
                else:
                    low[b], high[b] = float(band.floor), float(band.ceil)
                    hard[b] = float(band.limit) if band.limit is not None else NO_LIMIT
                    scale[b] = violation_unit(band.average, mean, inp.weight.get(d, 1.0))

    def out_of_band(self, d: str, b: int, value: float) -> float:
        return beyond(value, self.low[d][b], self.high[d][b]) / self.scale[d][b]

    def refresh(self, b: int) -> float:
        """Broker b's violation above and below its bands, after its load changed (its partner order kept)."""
        ordered = hasattr(self, "_takers")
        if ordered:  # out of the partner order under its old key, back in under its new one
            for d in self.dims:
                if b in self._taker_pos:
                    self._takers[d].remove(self._keys[(d, 0, b)])
                if b in self._giver_pos:
                    self._givers[d].remove(self._keys[(d, 1, b)])
        up, down = violation_sides(b, self.dims, self.load, self.low, self.high, self.scale)
        self.above[b], self.below[b] = up, down
        if ordered:
            for d in self.dims:
                if b in self._taker_pos:
                    self._keys[(d, 0, b)] = key = self._taker_key(d, b)
                    self._takers[d].add(key)
                if b in self._giver_pos:
                    self._keys[(d, 1, b)] = key = self._giver_key(d, b)
                    self._givers[d].add(key)
        return up + down

    def violation(self, b: int) -> float:
        return self.above[b] + self.below[b]

    def listing(self, d: str, b: int) -> list[tuple[float, int]]:
        got = self.sorted_on[d].get(b)
        if got is None:
            assign, changes, origin, cap, units = self.assign, self.changes, self.origin, self.inp.max_changes, self.units[d]
            # a set: a replica that left b and came back is in ``holders[b]`` twice, and a second entry would outlive
            # ``forget`` once it leaves again (a move offered from a broker that no longer holds it)
            got = sorted({(units[i], i) for i in self.holders[b]
                          if b in assign[i] and (changes[i] < cap or (origin is not None and b not in origin[i]))})
            self.sorted_on[d][b] = got
        return got

    def forget(self, i: int, b: int) -> None:
        for d in self.dims:
            lst = self.sorted_on[d].get(b)
            if lst:
                j = bisect.bisect_left(lst, (self.units[d][i], i))
                if j < len(lst) and lst[j][1] == i:
                    del lst[j]

    def may_join(self, i: int, giver: int, receiver: int) -> bool:
        """May partition i's replica go from giver to receiver: not there yet, racks kept (limits aside)?"""
        reps = self.assign[i]
        if receiver in reps:
            return False
        return not self.inp.keep_racks or keeps_racks(self.inp.rack, reps, giver, receiver)

    def pair(self, giver: int, receiver: int) -> tuple[list[Pair], list[tuple[Sequence[float], float, float]]]:
        """What a move from giver to receiver is measured against, per dimension (``Pair``), and the receiver's hard
        limits (units, load, limit; the dimensions it has one in): read once for all of a step's candidates between
        the two (the loads do not change while a step chooses)."""
        load, low, high, scale, hard = self.load, self.low, self.high, self.scale, self.hard
        rows = [(self.units[d], load[d][giver], load[d][receiver], low[d][giver], high[d][giver], scale[d][giver],
                 low[d][receiver], high[d][receiver], scale[d][receiver], self.out_of_band(d, giver, load[d][giver]),
                 self.out_of_band(d, receiver, load[d][receiver]), self.priority[d])
                for d in self.dims]
        return rows, [(self.units[d], load[d][receiver], hard[d][receiver]) for d in self.dims
                      if hard[d][receiver] < NO_LIMIT]

    def placeable(self, i: int, giver: int, receiver: int,
                  limits: list[tuple[Sequence[float], float, float]]) -> bool:
        for units, lr, limit in limits:
            if lr + units[i] > limit:
                return False
        return self.may_join(i, giver, receiver)

    def delta(self, i: int, giver: int, receiver: int, pair: list[Pair]) -> float | None:
        """The change of the total violation, or None when the move is not allowed. A broker may end further out
        of a band only in a dimension of lower priority than the best the move improves, or in one the move
        improves overall when that broker can undo it later (it may both give and take): shifting excess from one
        broker to another is no progress, and a giver that may not take (add-brokers) stays below its band. Each
        broker's distance from its band as ``out_of_band`` measures it: ``load.beyond`` written out (a call costs
        this loop 2.4x: 131 against 55 ns a dimension, and millions of moves are weighed), on the pair's loads and
        bands read once (``pair``)."""
        change = 0.0
        top = 0.0
        worse: list[tuple[float, float, bool]] = []
        for units, lg, lr, low_g, high_g, scale_g, low_r, high_r, scale_r, now_g, now_r, priority in pair:
            u = units[i]
            if u == 0:
                continue
            v, w = lg - u, lr + u
            dg = ((v - high_g) / scale_g if v > high_g else (low_g - v) / scale_g if v < low_g else 0.0) - now_g
            dr = ((w - high_r) / scale_r if w > high_r else (low_r - w) / scale_r if w < low_r else 0.0) - now_r
            net = dg + dr
            change += net
            if net < -1e-12:
                top = max(top, priority)
            # Worse = further below the band for the giver, further above it for the receiver (a giver crossing
            # its whole band from above is worse too, though its violation may shrink).
            if v < low_g and min(lg, high_g) - u < low_g and v < min(lg, low_g):
                worse.append((priority, net, giver in self.undo))
            if w > high_r and w > max(lr, high_r):
                worse.append((priority, net, receiver in self.undo))
        for priority, net, can_undo in worse:
            if priority >= top and not (can_undo and net < -1e-12):
                return None
        return change

    def need(self, b: int, giving: bool) -> tuple[str, float]:
        """The dimension that drives broker b's step and the load it should give (or take) per move."""
        dims, load, low, high = self.dims, self.load, self.low, self.high
        worst, amount, worst_v = dims[0], 0.0, -1.0
        for d in dims:
            if d == "replicas" and len(dims) > 1:
                continue
            lv = load[d][b]
            gap = (lv - high[d][b]) if giving else (low[d][b] - lv)
            v = gap / self.scale[d][b]
            if v > worst_v:
                worst, amount, worst_v = d, max(gap, 0.0), v
        if "replicas" in load:
            c = load["replicas"][b]
            count_gap = (c - high["replicas"][b]) if giving else (low["replicas"][b] - c)
            if worst_v <= 0 and count_gap > 0:
                return worst, 0.0  # only the count is off: the lightest partitions
            if count_gap > 1:
                return worst, amount / count_gap
        return worst, amount

    def candidates(self, d: str, b: int, desired: float) -> list[int]:
        """Up to WINDOW partitions of b on each side of ``desired`` in dimension d."""
        lst = self.listing(d, b)
        pos = bisect.bisect_right(lst, (desired, self.n))
        return [i for _, i in lst[max(0, pos - WINDOW):pos + WINDOW]]

    def role(self, b: int) -> str | None:
        """'give' or 'take': what broker b's next step does about its violation (None: it may do neither)."""
        inp = self.inp
        if b in inp.removed:
            return "give" if self.holding[b] else None
        up, down = self.above[b], self.below[b]
        if up > 0 and b in inp.givers and (up >= down or b not in inp.receivers):
            return "give"
        if down > 0 and b in inp.receivers:
            return "take"
        return None

    def partners(self, x: int, d: str, giving: bool, fan: int) -> list[tuple[int, int]]:
        """(giver, receiver) pairs for broker x's step: the ``fan`` most needy brokers on the other side."""
        if giving:
            takers = itertools.islice((key[-1] for key in self._takers[d] if key[-1] != x), fan)
            return [(x, r) for r in takers]
        holding = self.holding
        givers = itertools.islice((key[-1] for key in self._givers[d] if key[-1] != x and holding[key[-1]]), fan)
        return [(g, x) for g in givers]

    def best_move(self, x: int, giving: bool, fan: int, skip: int = 0) -> tuple[int, int, int] | None:
        """Broker x's best move with its ``fan`` neediest partners, the first ``skip`` of them aside."""
        d, desired = self.need(x, giving)
        s = self.scale[d][x]
        units, topic_count, n_topics = self.units[d], self.topic_count, self.topics_n
        topic_of = self.topic_of
        best: tuple[float, int, int, int, int] | None = None
        found: dict[int, list[int]] = {}
        for g, r in self.partners(x, d, giving, fan)[skip:]:
            cands = found.get(g)
            if cands is None:
                cands = found[g] = self.candidates(d, g, desired)
            pair, limits = self.pair(g, r)
            for i in cands:
                if not self.placeable(i, g, r, limits):
                    continue
                dv = self.delta(i, g, r, pair)
                if dv is None or dv >= -1e-12:
                    continue
                score = dv + SIZE_PULL * abs(units[i] - desired) / s
                # Per-topic spread breaks ties: move the topic the giver holds most of relative to the receiver.
                t = topic_of[i]
                spread = topic_count.get(r * n_topics + t, 0) - topic_count.get(g * n_topics + t, 0)
                if best is None or (score, spread) < (best[0], best[1]):
                    best = (score, spread, i, g, r)
        return None if best is None else best[2:]

    def widening_move(self, x: int, giving: bool) -> tuple[int, int, int] | None:
        """Broker x's best move among its neediest partners: the first ``FAN``, else the next ones, ``WIDEN`` times
        as many each time, up to every broker. A step that ranked every broker as soon as its first ``FAN`` had no
        move spent 90 ms on each at 1,000 brokers, 99 % of the placement's time (fuzz-shaped, 60k replicas); almost
        all of them found one, near the front."""
        fan, skip = FAN, 0
        while True:
            move = self.best_move(x, giving, fan, skip)
            if move is not None or fan >= len(self.brokers):
                return move
            fan, skip = fan * WIDEN, fan

    def swap_delta(self, out: int, into: int, x: int, y: int) -> float | None:
        """The change of the total violation when partition ``out`` moves its replica from x to y and ``into`` its
        replica from y to x (counts unchanged), or None when a broker ends further outside a band in a dimension of
        at least the priority of the best the exchange improves without that dimension improving overall."""
        change = top = 0.0
        worse: list[tuple[str, float]] = []
        for d in self.dims:
            du = self.units[d][into] - self.units[d][out]  # x gains du, y loses it
            if du == 0:
                continue
            lx, ly = self.load[d][x], self.load[d][y]
            if lx + du > self.hard[d][x] or ly - du > self.hard[d][y]:
                return None
            net = (self.out_of_band(d, x, lx + du) - self.out_of_band(d, x, lx)
                   + self.out_of_band(d, y, ly - du) - self.out_of_band(d, y, ly))
            change += net
            if net < -1e-12:
                top = max(top, self.priority[d])
            for b, before, after in ((x, lx, lx + du), (y, ly, ly - du)):
                if (after > self.high[d][b] and after > max(before, self.high[d][b])) or (
                        after < self.low[d][b] and after < min(before, self.low[d][b])):
                    worse.append((d, net))
        for d, net in worse:
            if self.priority[d] >= top and net >= -1e-12:
                return None
        return change

    def exchange_need(self, x: int, giving: bool, fan: int) -> tuple[str, float, list[int]] | None:
        """What an exchange of broker x works on: the dimension ``need`` picks, how far x is past its band there,
        and its ``fan`` neediest partners that may both give and take; None when x may not exchange or is not past
        that band."""
        if x not in self.undo:
            return None
        d, _ = self.need(x, giving)
        lx = self.load[d][x]
        gap = (lx - self.high[d][x]) if giving else (self.low[d][x] - lx)
        if gap <= 0:
            return None
        pairs = self.partners(x, d, giving, len(self.brokers))
        return d, gap, [r if giving else g for g, r in pairs if (r if giving else g) in self.undo][:fan]

    def best_swap(self, x: int, giving: bool, fan: int) -> tuple[int, int, int] | None:
        """Broker x's best exchange with a broker that may both give and take: (partition leaving x, partition
        coming to x, partner). Two replicas of unlike size trade brokers (Cruise Control's swap actions): the
        difference of their sizes moves while every count stays, which is what a broker stuck between its load band
        and its count band needs. Sought near the difference x needs, among ``fan`` partners, preferring the
        exchange that copies the fewest bytes besides the difference."""
        need = self.exchange_need(x, giving, fan)
        if need is None:
            return None
        d, gap, partners = need
        s = self.scale[d][x]
        units = self.units[d]
        best: tuple[float, int, int, int] | None = None
        mine = self.listing(d, x)
        for y in partners:
            theirs = self.listing(d, y)
            if not mine or not theirs:
                continue
            # x gives ``big`` and takes ``small`` (giving), or the reverse: the pair differs by about ``gap``
            bigs, smalls = (mine, theirs) if giving else (theirs, mine)
            start = bisect.bisect_left(bigs, (gap, -1))
            for _, big in bigs[max(0, start - WINDOW):start + WINDOW]:
                want = units[big] - gap
                k = bisect.bisect_left(smalls, (want, -1))
                for _, small in smalls[max(0, k - 2):k + 2]:
                    out, into = (big, small) if giving else (small, big)
                    if out == into or not (self.may_join(out, x, y) and self.may_join(into, y, x)):
                        continue
                    dv = self.swap_delta(out, into, x, y)
                    if dv is None or dv >= -1e-12:
                        continue
                    diff = units[big] - units[small]
                    score = dv + SIZE_PULL * abs(diff - gap) / s + 2 * units[small] / s  # bytes copied beyond diff
                    if best is None or score < best[0]:
                        best = (score, out, into, y)
        return None if best is None else best[1:]

    def exchange(self, x: int, giving: bool) -> tuple[int, int, int] | None:
        """Broker x's exchange where it has no move: ``best_swap``, else ``cross_swap`` (stuck between two
        dimensions). Among the 2 x FAN neediest partners only: a search over every broker, per stuck broker and
        retry, would cost seconds on hundreds of brokers."""
        return self.best_swap(x, giving, 2 * FAN) or self.cross_swap(x, giving, 2 * FAN)

    def by_ratio(self, d1: str, d2: str, b: int) -> list[tuple[float, int]]:
        """Broker b's movable partitions that carry load in d1 or d2, ascending by the ratio of their d1 to their d2
        (those with no d2 last), built when first needed and dropped when a move changes b."""
        cached = self._by_ratio.setdefault(b, {})
        got = cached.get((d1, d2))
        if got is None:
            u1, u2 = self.units[d1], self.units[d2]
            got = sorted((u1[i] / u2[i] if u2[i] > 0 else float("inf"), i) for _, i in self.listing(d1, b)
                         if u1[i] > 0 or u2[i] > 0)
            cached[(d1, d2)] = got
        return got

    def bytes_per(self, d: str) -> float:
        """The cluster's bytes per unit of d over all partitions (computed once per dimension)."""
        got = self._bytes_per.get(d)
        if got is None:
            got = self._bytes_per[d] = sum(self.bytes) / max(sum(self.units[d]), 1e-300)
        return got

    def room(self, d: str, b: int) -> tuple[float, float]:
        """How much broker b may lose (as a negative number) and gain in d without ending further outside its band
        than it is: [0, 0] on the side it is already past."""
        lv = self.load[d][b]
        return min(0.0, self.low[d][b] - lv), max(0.0, min(self.high[d][b], self.hard[d][b]) - lv)

    def cross_swap(self, x: int, giving: bool, fan: int) -> tuple[int, int, int] | None:
        """Broker x's best exchange where it is stuck between two dimensions: outside its band in d1 (the one
        ``need`` picks) while at the edge of another, d2, so every replica that would close the d1 gap pushes it out
        of d2 (disk full and network in short, say). x gives the replicas of the least d1 per d2 it holds and takes a
        partner's of the most (the reverse when it must shed d1), of about the same d2: d1 moves, d2 stays inside
        both brokers' bands. Read 2 x ``WINDOW`` partitions from the end of x's ratio order that fits its need and,
        for each, the 2 x ``WINDOW`` of the partner's nearest it in d2 within that room (``matching``), among ``fan``
        partners; the exchange that removes the most violation per byte copied wins. Tried only where neither a move
        nor ``best_swap`` helps x, and only at a price: no more bytes per violation removed than a waste-free move of
        a replica of the cluster's mean d1 per byte (an exchange copies both replicas while only their difference
        moves d1: one that removes a sliver of violation for many bytes waits for the repair)."""
        need = self.exchange_need(x, giving, fan)
        if need is None:
            return None
        d1, _, partners = need
        cap = self.bytes_per(d1) * self.scale[d1][x] / 2
        best: tuple[float, int, int, int] | None = None
        for d2 in self.dims:
            if d2 in (d1, "replicas"):
                continue
            for y in partners:
                found = self.cross_pair(x, y, (d1, d2), giving, cap)
                if found is not None and (best is None or found[0] < best[0]):
                    best = (*found, y)
        return None if best is None else best[1:]

    def cross_pair(self, x: int, y: int, dims: tuple[str, str], giving: bool,
                   cap: float) -> tuple[float, int, int] | None:
        """(bytes copied per violation removed, partition leaving x, partition coming to x): the best exchange
        between x and y that moves d1 the way x needs while x gains in d2 no more than both bands leave room for,
        at no more than ``cap`` bytes per violation removed."""
        d1, d2 = dims
        ox, oy = self.room(d2, x), self.room(d2, y)
        lo, hi = max(ox[0], -oy[1]), min(ox[1], -oy[0])  # x's change in d2; y's is its negative
        if lo > hi:
            return None
        mine, theirs = self.by_ratio(d1, d2, x), self.listing(d2, y)
        # shedding d1: give the most d1 per d2; gaining it: the least
        outs = mine[-2 * WINDOW:] if giving else mine[:2 * WINDOW]
        u1, u2, size = self.units[d1], self.units[d2], self.bytes
        best: tuple[float, int, int] | None = None
        for _, out in outs:
            if not self.may_join(out, x, y):
                continue
            for into in self.matching(theirs, u2[out], lo, hi):
                if (u1[into] - u1[out] > 0) == giving or out == into or not self.may_join(into, y, x):
                    continue
                dv = self.swap_delta(out, into, x, y)
                if dv is None or dv >= -1e-12:
                    continue
                score = (size[out] + size[into]) / -dv
                if score <= cap and (best is None or score < best[0]):
                    best = (score, out, into)
        return best

    def matching(self, lst: list[tuple[float, int]], size: float, lo: float, hi: float) -> list[int]:
        """Up to 2 x WINDOW partitions of ``lst`` (sorted by a dimension) within [size + lo, size + hi] in it,
        those nearest to ``size`` (clamped into the range) first."""
        first = bisect.bisect_left(lst, (size + lo, -1))
        last = bisect.bisect_right(lst, (size + hi, self.n))
        mid = bisect.bisect_left(lst, (min(max(size, size + lo), size + hi), -1), first, last)
        start = max(first, min(mid - WINDOW, last - 2 * WINDOW))
        return [i for _, i in lst[start:min(last, start + 2 * WINDOW)]]

    def apply(self, i: int, g: int, r: int) -> None:
        inp, origin, changes = self.inp, self.origin, self.changes
        reps = self.assign[i]
        reps[reps.index(g)] = r
        if origin is None:
            changes[i] += 1
        else:
            changes[i] = sum(1 for b in reps if b not in origin[i])
        self.holding[g] -= 1
        self.holding[r] += 1
        for d in self.dims:
            self.load[d][g] -= self.units[d][i]
            self.load[d][r] += self.units[d][i]
        t = self.topic_of[i]
        self.topic_count[g * self.topics_n + t] -= 1
        self.topic_count[r * self.topics_n + t] = self.topic_count.get(r * self.topics_n + t, 0) + 1
        self.forget(i, g)
        self._by_ratio.pop(g, None)
        self._by_ratio.pop(r, None)
        if changes[i] < inp.max_changes or origin is not None:  # it may move again: a candidate on its new broker
            self.holders[r].append(i)
            for d in self.dims:
                if r in self.sorted_on[d]:
                    bisect.insort(self.sorted_on[d][r], (self.units[d][i], i))
        if changes[i] >= inp.max_changes:  # its replicas may not move again (a repair: those it had at first)
            for b in reps:
                if b != r and (origin is None or b in origin[i]):
                    self.forget(i, b)

    def run(self, deadline: Deadline) -> GreedyStats:
        """Steps until no broker is outside a band, every broker outside is set aside, or the deadline."""
        moves = steps = 0
        cut_short = False
        stuck: set[int] = set()
        moved_since_retry = False
        heap = [(-self.violation(b), b) for b in self.brokers if b in self.movers and self.violation(b) > 0]
        heapq.heapify(heap)
        while True:
            while heap:
                steps += 1
                if steps % CHECK_EVERY == 1 and deadline.expired():
                    cut_short = True
                    break
                v, x = heapq.heappop(heap)
                current = self.violation(x)
                if current <= 0 or x in stuck or -v != current:
                    continue  # in band, set aside, or a stale entry (a fresher one was pushed when it changed)
                what = self.role(x)
                move = None
                if what:
                    move = self.widening_move(x, what == "give")
                if move is None and what:
                    swap = self.exchange(x, what == "give")
                    if swap is not None:
                        out, into, y = swap
                        self.apply(out, x, y)
                        self.apply(into, y, x)
                        moves += 2
                        self.swaps += 1
                        moved_since_retry = True
                        for b in (x, y):
                            vb = self.refresh(b)
                            if vb > 0 and b not in stuck:
                                heapq.heappush(heap, (-vb, b))
                        continue
                if move is None:
                    stuck.add(x)
                    continue
                i, g, r = move
                self.apply(i, g, r)
                moves += 1
                moved_since_retry = True
                for b in (g, r):
                    vb = self.refresh(b)
                    if vb > 0 and b not in stuck:
                        heapq.heappush(heap, (-vb, b))
            if cut_short or not stuck or not moved_since_retry:
                break
            # Moves since these brokers were set aside changed the loads: give each another try.
            moved_since_retry = False
            heap = [(-self.violation(b), b) for b in stuck]
            heapq.heapify(heap)
            stuck.clear()
        outside = sorted(b for b in self.brokers if b in self.movers and self.violation(b) > 1e-12)
        return {"moves": moves, "swaps": self.swaps, "outside_bands": outside, "stuck_brokers": sorted(stuck),
                "cut_short": cut_short, "steps": steps}
