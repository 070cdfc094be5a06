"""Replica counts into their gate at the least load cost: the pass after every other placement phase, where counts
still fail the gate.

The load search (``load_greedy``) takes a move only where it brings the loads nearer their bands, and the counts'
repair in ``place_load`` runs that search again with the counts held tighter. Both find nothing where a load band
is out of reach: a replica larger than any broker's share (fuzz small seed 101: one topic's 7-10 GB partitions
against a 5.7 GB disk ceiling) leaves every other broker below its floor, where a move between two of them brings
neither nearer, and greedy had traded the counts for the one broker it could bring down: 5-50 replicas per broker
before, 3-51 after, around a median of 26. The count gate (the Wix gate: within 15 % of the median) is the one a
plan may not trade away for disk, and it is within reach there.

So this pass moves replicas for the counts alone. Each step takes the broker furthest outside the gate (from the
counts' median as they stand, ``balance.counts_excess``) and moves one replica off it (above) or onto it (below),
to or from a broker the move leaves inside the gate, choosing among the candidates the move that puts the loads
least further outside the gates' bands (``load_problem.broker_violation``'s measure) and then copies the fewest
bytes: the lightest replicas, where loads are out of reach anyway. Where the change cap holds every candidate, a
partition's one change is re-routed (the plan's y -> z undone, the broker's own replica moved instead); where no
partner can take or give at all (racks that pin the counts), the median is moved one toward the broker, by a move
between two brokers inside the gate. Moves keep the racks, the mode's one-way brokers, every capacity limit and
the change cap, as the load search's do (``load_greedy``'s placement state). The caller judges the result against
the gates (``place_load._count_fix``).
"""

from __future__ import annotations

import bisect
import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from typing import TypedDict

from ..balance import count_allowance, counts_excess
from .budget import CHECK_EVERY, Deadline
from .load_greedy import WINDOW, _Placement
from .load_problem import LoadInput
from .racks import keeps_racks

__all__ = ["CountFixStats", "count_fix"]

Move = tuple[int, int, int]  # partition index, giver, receiver
PARTNERS = 64  # brokers on the other side weighed per step (nearest the median's far side first)


class CountFixStats(TypedDict):
    moves: int
    reroutes: int
    steps: int
    stuck_brokers: list[int]
    cut_short: bool
    worst_before: float  # the furthest a count lay beyond the gate, before the pass and after it
    worst_after: float


def count_fix(inp: LoadInput, band: float, deadline: Deadline | None = None,
              ) -> tuple[dict[int, tuple[int, ...]], CountFixStats]:
    """New replicas (by partition index, those that differ from ``inp.replicas``) that bring the replica counts
    within ``band`` (a fraction) of their median, as near as single moves can, and stats. The loads are judged on
    ``inp.gate_bands`` where given (the bands the gates measure)."""
    loads = {d: b for d, b in (inp.gate_bands or inp.bands).items() if d in inp.units and d != "replicas"}
    state = _CountFix(dataclasses.replace(inp, bands={**loads, "replicas": inp.bands["replicas"]}), band)
    stats = state.fix(deadline or Deadline.never())
    changed = {i: tuple(reps) for i, reps in enumerate(state.assign) if tuple(reps) != tuple(inp.replicas[i])}
    return changed, stats


class _CountFix(_Placement):
    """The load search's placement state, stepped on the counts' gate instead of the bands."""

    def __init__(self, inp: LoadInput, band: float) -> None:
        super().__init__(inp)
        self.band = band
        self.gated = sorted(inp.bands["replicas"])
        self.disk = inp.units["disk"] if "disk" in inp.units else [0.0] * self.n

    def counts(self) -> dict[int, float]:
        return {b: self.load["replicas"][b] for b in self.gated}

    def fix(self, deadline: Deadline) -> CountFixStats:
        moves = steps = reroutes = 0
        stuck: set[int] = set()
        cut_short = False
        first = self.counts()
        worst_before = max(counts_excess(first, self.band).values(), default=0.0)
        med = statistics.median(first.values()) if first else 0.0
        cap = sum(abs(c - med) for c in first.values()) + len(first)  # every count to the median, and some
        while moves < cap:
            counts = self.counts()
            excess = counts_excess(counts, self.band)
            worst = [b for b in sorted(excess, key=lambda b: (-excess[b], b)) if excess[b] > 0 and b not in stuck]
            if not worst:
                break
            steps += 1
            if steps % CHECK_EVERY == 0 and deadline.expired():
                cut_short = True
                break
            x = worst[0]
            med = statistics.median(counts.values())
            move = self.step(x, counts, med) or self.shift(x, counts, med)
            if move is None:
                stuck.add(x)
                continue
            for one in move:
                self.apply(*one)
            moves += 1
            reroutes += len(move) > 1
            stuck.clear()  # the median and the partners changed: every broker may have a move again
        return {"moves": moves, "reroutes": reroutes, "steps": steps, "stuck_brokers": sorted(stuck),
                "cut_short": cut_short, "worst_before": worst_before,
                "worst_after": max(counts_excess(self.counts(), self.band).values(), default=0.0)}

    def step(self, x: int, counts: dict[int, float], med: float) -> list[Move] | None:
        """Broker x's step toward the median: one move (partition, giver, receiver) whose partner the move leaves
        inside the gate, the least load put outside the bands, then the fewest bytes copied. Where the change cap
        holds every candidate, a *re-route*: a partition whose change the plan made elsewhere (y -> z) has it undone
        and makes x's instead, two moves for one change (z -> y, then x's replica out, or a replica in to x)."""
        allowed = count_allowance(med, self.band)
        lo, hi = med - allowed - 1e-9, med + allowed + 1e-9
        if counts[x] > med:
            pairs = [(x, r) for r in sorted((r for r in self.receivers if r != x and counts.get(r, 0.0) + 1 <= hi),
                                            key=lambda r: (counts.get(r, 0.0), r))[:PARTNERS]]
            pairs = pairs if x in self.inp.givers or x in self.inp.removed else []
        else:
            pairs = [(g, x) for g in sorted((g for g in self.givers if g != x and counts.get(g, 0.0) - 1 >= lo),
                                            key=lambda g: (-counts.get(g, 0.0), g))[:PARTNERS]]
            pairs = pairs if x in self.inp.receivers else []
        best = self.cheapest(pairs)
        if best is None:
            capped: dict[int, list[Move]] = {}
            for g, r in pairs:
                for i, z, y in capped.setdefault(g, self.capped(g)):
                    if counts.get(y, 0.0) + 1 <= hi and counts.get(z, 0.0) - 1 >= lo and self.rerouted(i, z, y, g, r):
                        best = self.better(best, [(i, z, y), (i, g, r)])
        return None if best is None else best[2]

    def shift(self, x: int, counts: dict[int, float], med: float) -> list[Move] | None:
        """Where broker x has no move, the median moved one toward it: a broker in the middle of the counts gives
        to one above it (x below) or takes from one below it (x above), both inside the gate about the median one
        nearer x. Racks that pin the counts need it (fuzz small seed 87: RF 3 on racks of 5, 4 and 4 brokers, 26-27
        replicas on the first rack's brokers, 32-35 on the others, median 32; 26-34 around a median of 30 passes)."""
        ids = sorted(counts, key=lambda b: (counts[b], b))
        middle = {counts[ids[(len(ids) - 1) // 2]], counts[ids[len(ids) // 2]]}
        down = counts[x] < med
        nearer = med - 1 if down else med + 1
        allowed = count_allowance(nearer, self.band)
        lo, hi = nearer - allowed - 1e-9, nearer + allowed + 1e-9
        if down:
            pairs = [(g, r) for g in self.givers if counts.get(g) in middle
                     for r in self.receivers if r in counts and counts[g] < counts[r] and counts[r] + 1 <= hi]
        else:
            pairs = [(g, r) for r in self.receivers if counts.get(r) in middle
                     for g in self.givers if g in counts and counts[r] > counts[g] and counts[g] - 1 >= lo]
        best = self.cheapest(sorted(pairs, key=lambda p: (abs(counts[p[0]] - counts[p[1]]), p))[:PARTNERS])
        return None if best is None else best[2]

    def cheapest(self, pairs: Iterable[tuple[int, int]]) -> tuple[float, float, list[Move]] | None:
        """The cheapest single move (``better``'s order) of a giver's weighed partitions (``lightest``) to its
        receiver, over the (giver, receiver) pairs; None where none may go."""
        best: tuple[float, float, list[Move]] | None = None
        for g, r in pairs:
            _, limits = self.pair(g, r)
            for i in self.lightest(g):
                if self.placeable(i, g, r, limits):
                    best = self.better(best, [(i, g, r)])
        return best

    def better(self, best: tuple[float, float, list[Move]] | None,
               moves: list[Move]) -> tuple[float, float, list[Move]]:
        """The cheaper of ``best`` and ``moves``: the least load outside the bands, the fewest bytes, the lowest
        partition and brokers (deterministic)."""
        cost = (round(self.load_cost(moves), 9), sum(self.copied(*m) for m in moves), moves)
        return cost if best is None or cost < best else best

    def capped(self, g: int) -> list[Move]:
        """Broker g's replicas the change cap holds, in partitions the plan changed once elsewhere (y -> z): (the
        partition, z, y) for the 2 x WINDOW lightest."""
        found = []
        for i in sorted(set(self.holders[g])):
            reps, origin = self.assign[i], self.origin[i]
            if g not in reps or g not in origin or self.changes[i] < self.inp.max_changes:
                continue
            added, gone = [b for b in reps if b not in origin], [b for b in origin if b not in reps]
            if len(added) == 1 and len(gone) == 1:
                found.append((self.disk[i], i, added[0], gone[0]))
        return [(i, z, y) for _, i, z, y in sorted(found)[:2 * WINDOW]]

    def rerouted(self, i: int, z: int, y: int, g: int, r: int) -> bool:
        """May partition i's change go back (z -> y) and move g's replica to r instead: the mode lets each broker
        give or take so, racks kept at each move, room under every hard limit."""
        inp = self.inp
        if z not in inp.givers and z not in inp.removed or y not in inp.receivers or y in inp.removed:
            return False
        back = [y if b == z else b for b in self.assign[i]]
        if r in back or (inp.keep_racks and not (keeps_racks(inp.rack, self.assign[i], z, y)
                                                  and keeps_racks(inp.rack, back, g, r))):
            return False
        return all(self.load[d][b] + self.units[d][i] <= self.hard[d][b] for d in self.dims for b in (y, r))

    def lightest(self, g: int) -> Iterable[int]:
        """Broker g's movable partitions worth weighing: the 2 x WINDOW lightest in each load dimension, and as many
        around how far g lies above its band there (a giver above a band sheds load by giving)."""
        seen: dict[int, None] = {}
        for d in self.dims:
            if d == "replicas":
                continue
            lst = self.listing(d, g)
            seen.update((i, None) for _, i in lst[:2 * WINDOW])
            over = self.load[d][g] - self.high[d][g]
            if over > 0:
                k = bisect.bisect_left(lst, (over, -1))
                seen.update((i, None) for _, i in lst[max(0, k - WINDOW):k + WINDOW])
        if not seen:  # counts alone: any of them
            seen.update((i, None) for _, i in self.listing("replicas", g)[:2 * WINDOW])
        return seen

    def load_cost(self, moves: list[Move]) -> float:
        """How much further outside their load bands the brokers the moves touch end (in target units, as the search
        measures)."""
        change: dict[tuple[str, int], float] = {}
        for i, g, r in moves:
            for d in self.dims:
                if d != "replicas" and self.units[d][i]:
                    change[(d, g)] = change.get((d, g), 0.0) - self.units[d][i]
                    change[(d, r)] = change.get((d, r), 0.0) + self.units[d][i]
        return sum(self.out_of_band(d, b, self.load[d][b] + x) - self.out_of_band(d, b, self.load[d][b])
                   for (d, b), x in change.items())

    def copied(self, i: int, g: int, r: int) -> float:
        """The bytes the plan copies more (or less, a replica going back where it started) by this move."""
        origin: Sequence[int] = self.origin[i]
        return self.disk[i] * ((r not in origin) - (g not in origin))
