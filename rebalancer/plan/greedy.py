"""Min-change greedy replica balancing (strategy ``greedy``): the Wix method, made exact where it can be.

Like the Wix article, it takes replicas from the most loaded brokers to the least loaded ones, at most N changes per
partition (default 1), never touching a partition beyond that, rack-safe, near-linear in the number of replicas.
Unlike a naive version, every move goes from a broker above its target to one below it, in two phases:

1. while some giver is above ``ceil`` (or is being removed): move from the fullest such giver to the emptiest
   receiver below ``floor`` if any, else below ``ceil`` (a removed broker, failing both, to any rack-safe receiver:
   emptying it comes before balance);
2. while some receiver is below ``floor``: move to it from the fullest giver above ``floor``.

Each move lowers an excess or fills a deficit, so when a valid partition is always found the number of moves equals
the lower bound ``max(sum excess over ceil, sum deficit under floor)``. A move replaces the giver by the receiver
in place (the preferred leader stays unless the giver was it), only when the receiver's rack keeps the partition's
rack count and the receiver has disk (and network) room for it. Among a giver's partitions it prefers the topics the giver holds most of relative to the receiver
(per-topic balance), then followers over leaders, then fewer bytes. Leaders are balanced afterwards by the exact
leader flow.

Inputs are plain data, so the function is a pure sub-problem. A ``Deadline`` (see ``budget``) may cut it short: it
is asked every ``CHECK_EVERY`` moves, and on "stop" the moves made so far are the result. Each move is whole and
valid on its own (rack count, change cap, capacity), so a greedy cut short is a valid, less balanced placement that
leaves the partitions it did not reach unchanged; ``cut_short`` in the stats says so.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from ..model import TopicPartition
from .budget import CHECK_EVERY, Deadline
from .racks import keeps_racks

__all__ = ["GreedyInput", "GreedyState", "CountGreedyStats", "build", "solve", "extract", "greedy_balance"]

Key = TopicPartition  # the partition's coordinates everywhere in the plan (``model``)


@dataclass(frozen=True)
class GreedyInput:
    replicas: Mapping[Key, tuple[int, ...]]
    sizes: Mapping[Key, int]
    rack: Mapping[int, str | None]
    floor: int
    ceil: int
    receivers: frozenset[int]
    givers: frozenset[int]
    removed: frozenset[int]
    max_changes: int = 1
    keep_racks: bool = True
    prefer_small: bool = True
    scan: int = 64  # candidate partitions examined per move
    disk: Mapping[int, int] | None = None        # broker -> disk capacity (bytes), where known
    network: Mapping[int, float] | None = None   # broker -> network capacity (bytes/s), where known
    rates: Mapping[Key, float] | None = None     # partition -> bytes-in rate


class CountGreedyStats(TypedDict):
    """What the count greedy did (``solver["greedy"]`` of a counts plan): moves, the replica excess and deficit it
    left outside the band, the brokers it could not improve, and whether its deadline cut it short."""

    moves: int
    unmet_excess: int
    unmet_deficit: int
    stuck_brokers: list[int]
    cut_short: bool


class _Moves(TypedDict):
    moves: int
    stuck_brokers: list[int]
    cut_short: bool


@dataclass
class GreedyState:
    """The placement as the greedy moves it: replicas, per-broker counts, partitions and topic counts, disk and
    network in use, changes per partition, and each giver's scan position (its partitions sorted once)."""

    assign: dict[Key, list[int]]
    count: dict[int, int]
    on: dict[int, list[Key]]
    topic_count: dict[tuple[int, str], int]
    cursor: dict[int, int]
    changes: dict[Key, int]
    disk_used: dict[int, int]
    net_used: dict[int, float]


def build(inp: GreedyInput) -> GreedyState:
    assign: dict[Key, list[int]] = {k: list(v) for k, v in inp.replicas.items()}
    count: dict[int, int] = {b: 0 for b in inp.rack}
    on: dict[int, list[Key]] = {b: [] for b in inp.rack}
    topic_count: dict[tuple[int, str], int] = {}
    for k, reps in assign.items():
        for b in reps:
            count[b] = count.get(b, 0) + 1
            on.setdefault(b, []).append(k)
            topic_count[(b, k[0])] = topic_count.get((b, k[0]), 0) + 1
    # Givers scan followers first, then smaller partitions: sort once.
    for b, keys in on.items():
        keys.sort(key=lambda k: (assign[k][0] == b, inp.sizes.get(k, 0) if inp.prefer_small else 0))
    disk_used: dict[int, int] = {b: 0 for b in inp.rack}
    net_used: dict[int, float] = {b: 0.0 for b in inp.rack}
    rates = inp.rates or {}
    for k, reps in assign.items():
        for b in reps:
            disk_used[b] = disk_used.get(b, 0) + inp.sizes.get(k, 0)
            net_used[b] = net_used.get(b, 0.0) + rates.get(k, 0.0)
    return GreedyState(assign, count, on, topic_count, {b: 0 for b in on}, {}, disk_used, net_used)


def _target_ceil(inp: GreedyInput, b: int) -> int:
    return 0 if b in inp.removed else inp.ceil


def extract(state: GreedyState, inp: GreedyInput) -> tuple[dict[Key, tuple[int, ...]], int, int]:
    """The partitions whose replicas changed, and the replica excess and deficit left outside the band."""
    changed = {k: tuple(v) for k, v in state.assign.items() if tuple(v) != tuple(inp.replicas[k])}
    excess = sum(max(0, state.count[b] - _target_ceil(inp, b)) for b in inp.givers)
    deficit = sum(max(0, inp.floor - state.count[b]) for b in inp.receivers if b not in inp.removed)
    return changed, excess, deficit


def greedy_balance(inp: GreedyInput,
                   deadline: Deadline | None = None) -> tuple[dict[Key, tuple[int, ...]], CountGreedyStats]:
    """New replica lists for the partitions that change, and stats (moves, unmet excess/deficit, cut short):
    ``build``, ``solve``, ``extract``."""
    state = build(inp)
    stats = solve(state, inp, deadline or Deadline.never())
    changed, excess, deficit = extract(state, inp)
    return changed, CountGreedyStats(moves=stats["moves"], unmet_excess=excess, unmet_deficit=deficit,
                                     stuck_brokers=stats["stuck_brokers"], cut_short=stats["cut_short"])


def solve(state: GreedyState, inp: GreedyInput, deadline: Deadline) -> _Moves:
    """Phase 1 empties every giver down to its ceiling, phase 2 fills every receiver up to its floor (see the module
    doc); moves ``state`` in place."""
    search = _Search(state, inp, deadline)
    search.empty_givers()
    search.fill_receivers()
    return _Moves(moves=search.moves, stuck_brokers=sorted(search.stuck), cut_short=search.cut_short)


class _Search:
    """``solve``'s moves on ``state``: the checks a move must pass, the choice of the next one, the two phases."""

    def __init__(self, state: GreedyState, inp: GreedyInput, deadline: Deadline) -> None:
        self.state, self.inp, self.deadline = state, inp, deadline
        self.rates = inp.rates or {}
        self.moves = 0
        self.steps = 0
        self.cut_short = False
        self.stuck: set[int] = set()

    def room(self, k: Key, receiver: int) -> bool:
        """Whether ``receiver`` has disk (and network) capacity for ``k``, where capacities are known."""
        inp, st = self.inp, self.state
        if inp.disk and receiver in inp.disk and st.disk_used[receiver] + inp.sizes.get(k, 0) > inp.disk[receiver]:
            return False
        return not (inp.network and receiver in inp.network
                    and st.net_used[receiver] + self.rates.get(k, 0.0) > inp.network[receiver])

    def rack_ok(self, k: Key, giver: int, receiver: int) -> bool:
        reps = self.state.assign[k]
        if receiver in reps or not self.room(k, receiver):
            return False
        return not self.inp.keep_racks or keeps_racks(self.inp.rack, reps, giver, receiver)

    def usable(self, k: Key, giver: int) -> bool:
        return giver in self.state.assign[k] and self.state.changes.get(k, 0) < self.inp.max_changes

    def pick(self, giver: int, receivers_sorted: Sequence[int]) -> tuple[Key, int] | None:
        """Best (partition, receiver) for a move off ``giver``, among its next ``scan`` usable partitions: the
        partition's first receiver (in the order given) that keeps its racks, ranked by per-topic balance, then
        followers before leaders, then fewer bytes."""
        st, inp = self.state, self.inp
        keys, cursor = st.on[giver], st.cursor
        while cursor[giver] < len(keys) and not self.usable(keys[cursor[giver]], giver):
            cursor[giver] += 1  # moved away or already changed: never usable again
        best: tuple[tuple[int, int, int], Key, int] | None = None
        examined = 0
        for i in range(cursor[giver], len(keys)):
            if examined >= inp.scan:
                break
            k = keys[i]
            if not self.usable(k, giver):
                continue
            examined += 1
            r = next((r for r in receivers_sorted if self.rack_ok(k, giver, r)), None)
            if r is None:
                continue
            score = (-(st.topic_count.get((giver, k[0]), 0) - st.topic_count.get((r, k[0]), 0)),
                     1 if st.assign[k][0] == giver else 0,
                     inp.sizes.get(k, 0) if inp.prefer_small else 0)
            if best is None or score < best[0]:
                best = (score, k, r)
        return None if best is None else (best[1], best[2])

    def move(self, k: Key, giver: int, receiver: int) -> None:
        st, size, rate = self.state, self.inp.sizes.get(k, 0), self.rates.get(k, 0.0)
        reps = st.assign[k]
        reps[reps.index(giver)] = receiver
        st.count[giver] -= 1
        st.count[receiver] += 1
        st.disk_used[giver] -= size
        st.disk_used[receiver] += size
        st.net_used[giver] -= rate
        st.net_used[receiver] += rate
        st.on[receiver].append(k)
        st.topic_count[(giver, k[0])] -= 1
        st.topic_count[(receiver, k[0])] = st.topic_count.get((receiver, k[0]), 0) + 1
        st.changes[k] = st.changes.get(k, 0) + 1
        self.moves += 1

    def stop(self) -> bool:
        """The checkpoint: every ``CHECK_EVERY`` steps (the first included), ask the deadline."""
        self.steps += 1
        if self.steps % CHECK_EVERY == 1 and self.deadline.expired():
            self.cut_short = True
        return self.cut_short

    def _receivers(self, g: int, below: int | None) -> list[int]:
        """The receivers other than ``g`` (not removed) with fewer than ``below`` replicas (any: None), emptiest
        first."""
        count = self.state.count
        return sorted((r for r in self.inp.receivers
                       if r != g and r not in self.inp.removed and (below is None or count[r] < below)),
                      key=count.__getitem__)

    def empty_givers(self) -> None:
        """Phase 1: no giver above its ceiling."""
        inp, count = self.inp, self.state.count
        heap = [(-(count[b] - _target_ceil(inp, b)), b) for b in inp.givers if count.get(b, 0) > _target_ceil(inp, b)]
        heapq.heapify(heap)
        while heap and not self.stop():
            _, g = heapq.heappop(heap)
            if count[g] <= _target_ceil(inp, g):
                continue
            below_floor = self._receivers(g, inp.floor)
            choice = self.pick(g, below_floor) if below_floor else None
            if choice is None:
                choice = self.pick(g, self._receivers(g, inp.ceil))
            if choice is None and g in inp.removed:
                # Emptying a removed broker comes first: any receiver that keeps the racks will do, above its
                # ceiling if it must (the balance gates then show the cost).
                choice = self.pick(g, self._receivers(g, None))
            if choice is None:
                self.stuck.add(g)
                continue
            self.move(choice[0], g, choice[1])
            if count[g] > _target_ceil(inp, g):
                heapq.heappush(heap, (-(count[g] - _target_ceil(inp, g)), g))

    def fill_receivers(self) -> None:
        """Phase 2: no receiver below its floor, each filled from the fullest giver that has a partition for it."""
        inp, count = self.inp, self.state.count
        heap = [(count[r], r) for r in inp.receivers if count.get(r, 0) < inp.floor and r not in inp.removed]
        heapq.heapify(heap)
        while heap and not self.stop():
            _, r = heapq.heappop(heap)
            if count[r] >= inp.floor:
                continue
            givers = sorted((g for g in inp.givers if g != r and count[g] > (0 if g in inp.removed else inp.floor)),
                            key=lambda g: -count[g])
            found = next(((g, c[0]) for g in givers if (c := self.pick(g, [r])) is not None), None)
            if found is None:
                self.stuck.add(r)
                continue
            self.move(found[1], found[0], r)
            if count[r] < inp.floor:
                heapq.heappush(heap, (count[r], r))
