"""Turning a plan into steps and batches (pure functions of plain data).

A *step* moves one partition from one replica list to the next. A change that adds k >= 2 replicas becomes k steps,
each replacing one replica, so a partition never holds more than RF + 1 replicas at once (Kafka keeps the old and
the new replicas until the new ones are in sync). A leader-only change (a reorder) is one step that copies nothing.

A *batch* is a set of steps submitted together: at most ``per_broker`` moves touching any broker (as the source
leader or the destination), at most ``total`` moves, at most ``max_bytes`` bytes (a single larger step still gets
a batch of its own), one step per partition, and a partition's steps in order across batches. Each batch waits for
its slowest move, so the batches take at least the sum of each one's busiest broker's bytes (``batch_floor``) at
the throttle, which no order brings below the busiest broker's bytes over the whole plan (``movement.estimate``).
``order="bound"`` (the default) forms the batches to come near that: the critical broker (most bytes left) kept
busy, largest first (``_bound_batches``), or the largest steps first, whichever floor is lower, then shortened by
local search (``refine``: steps moved or traded between batches); ``"smallest"`` and
``"largest"`` put those steps first. Given what a batch boundary costs (``make_batches``' ``batch_cost``), a batch
whose moves hold each other back (the fluid model: ``fluid``) is split in two where that pays (``untangle``). Leader-only steps are batched apart from data moves, as one reorder plus one
preferred leader election per batch.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from sortedcontainers import SortedList

from .fluid import Throttled, simulate_batches

__all__ = ["PER_BROKER", "TOTAL", "DiskRoom", "Step", "Throttled", "steps_of", "step_loads", "make_batches",
           "batch_floor", "peak_disk", "fit_room", "untangle", "NoRoom"]

PER_BROKER, TOTAL = 5, 50  # the executor's default caps: moves at once per broker, and in a batch
REFINE_WORK = 400_000  # the most candidates ``refine`` looks at (``make_batches``' bound order)
UNTANGLE_WORK = 2_000_000  # the most (copies in a batch) squared ``untangle`` runs through the fluid model


@dataclass(frozen=True)
class Step:
    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    size_bytes: int
    seq: int = 0  # position among this partition's steps

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    # Read millions of times while batches are formed (a 3M-replica plan's 467,000 steps): computed once. A frozen
    # dataclass's fields cannot change, so neither can these; equality and hashing see the fields alone.
    @cached_property
    def added(self) -> tuple[int, ...]:
        return tuple(b for b in self.after if b not in self.before)

    @cached_property
    def bytes(self) -> int:
        return self.size_bytes * len(self.added)

    @property
    def leader_only(self) -> bool:
        return not self.added

    def brokers(self) -> set[int]:
        """Brokers the step loads: destinations, and the source (the current leader, first replica)."""
        return set(self.added) | ({self.before[0]} if self.added else set())

    def to_dict(self) -> dict[str, object]:
        return {"topic": self.topic, "partition": self.partition, "from": list(self.before), "to": list(self.after),
                "size_bytes": self.size_bytes, "bytes": self.bytes, "seq": self.seq}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        return cls(str(d["topic"]), int(d["partition"]), tuple(d["from"]), tuple(d["to"]), int(d["size_bytes"]),
                   int(d.get("seq", 0)))


@dataclass(frozen=True)
class DiskRoom:
    """Each broker's bytes before the plan (``held``) and the most it may hold at any moment (``limit``: its disk
    capacity times the capacity threshold; a broker without one is not limited)."""

    held: Mapping[int, int]
    limit: Mapping[int, int]

    @classmethod
    def of_plan(cls, summary: Mapping[str, Any]) -> DiskRoom | None:
        """From a plan's summary (``load``: each broker's disk before and capacity, the disk threshold), or None
        where the plan knows no disk capacities."""
        load = summary.get("load") or {}
        disk = (load.get("dimensions") or {}).get("disk") or {}
        if not disk.get("by_capacity") or disk.get("threshold_pct") is None:
            return None
        held, limit = {}, {}
        for row in load.get("brokers") or []:
            d = row.get("disk") or {}
            held[int(row["broker"])] = int(d.get("before") or 0)
            if d.get("capacity"):
                limit[int(row["broker"])] = int(d["capacity"] * float(disk["threshold_pct"]) / 100)
        return cls(held, limit) if limit else None

    def after(self, steps: Iterable[Step]) -> DiskRoom:
        """The room once these steps are done (a resumed execution's)."""
        held = dict(self.held)
        for s in steps:
            for b in s.added:
                held[b] = held.get(b, 0) + s.size_bytes
            for b in s.before:
                if b not in s.after:
                    held[b] = held.get(b, 0) - s.size_bytes
        return DiskRoom(held, self.limit)


def steps_of(topic: str, partition: int, before: tuple[int, ...], after: tuple[int, ...], size_bytes: int) -> list[Step]:
    """The steps of one change: one replica replaced per step, the final order (preferred leader) on the last."""
    added = [b for b in after if b not in before]
    removed = [b for b in before if b not in after]
    if len(added) <= 1:
        return [Step(topic, partition, before, after, size_bytes, 0)]
    steps = []
    current = list(before)
    for i, (gone, new) in enumerate(zip(removed, added, strict=False)):
        nxt = [new if b == gone else b for b in current]
        if i == len(added) - 1:
            nxt = list(after)
        steps.append(Step(topic, partition, tuple(current), tuple(nxt), size_bytes, i))
        current = nxt
    return steps




def step_loads(s: Step) -> dict[Throttled, int]:
    """The bytes a step puts through each throttle: into each destination, out of the source (the leader the new
    replicas fetch from, ``Step.brokers``). Kafka throttles a broker's replication in and out apart
    (``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``), so a broker that sends and
    receives at once is busy for the larger of the two, not their sum."""
    if not s.added:
        return {}
    out: dict[Throttled, int] = {(b, "in"): s.size_bytes for b in s.added}
    out[(s.before[0], "out")] = s.bytes
    return out


def batch_floor(batches: Iterable[Iterable[Step]]) -> int:
    """What batches one after another cannot beat, in bytes at the throttle: the sum over batches of the bytes through
    each batch's busiest throttle (each waits for its slowest move)."""
    out = 0
    for batch in batches:
        held: dict[Throttled, int] = {}
        for s in batch:
            for b, x in step_loads(s).items():
                held[b] = held.get(b, 0) + x
        out += max(held.values(), default=0)
    return out


def peak_disk(batches: Iterable[Iterable[Step]], held: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """Per broker, the most bytes it holds at any moment while the batches run one after another, and the batch
    (0-based; -1: before the first) where. A move fills its new replicas' brokers while its old replicas still hold
    theirs (Kafka deletes them once the new ones are in sync), and a batch's moves run at once, so within a batch a
    broker may hold what it held before plus everything the batch adds on it; the replicas leaving free their bytes
    when the batch ends. ``held``: each broker's bytes before the plan."""
    now = dict(held)
    peak = {b: (x, -1) for b, x in now.items()}
    for k, batch in enumerate(batches):
        added: dict[int, int] = {}
        freed: dict[int, int] = {}
        for s in batch:
            for b in s.added:
                added[b] = added.get(b, 0) + s.size_bytes
            for b in s.before:
                if b not in s.after:
                    freed[b] = freed.get(b, 0) + s.size_bytes
        for b, x in added.items():
            top = now.get(b, 0) + x
            if top > peak.get(b, (-1, -1))[0]:
                peak[b] = (top, k)
        for b in set(added) | set(freed):
            now[b] = now.get(b, 0) + added.get(b, 0) - freed.get(b, 0)
    return peak


def make_batches(steps: Iterable[Step], *, per_broker: int = PER_BROKER, total: int = TOTAL, max_bytes: int | None = None,
                 order: str = "bound", room: DiskRoom | None = None, batch_cost: int | None = None) -> list[list[Step]]:
    """The batches (module doc); ``room``: each within its brokers' disk room (``fit_room``; ``NoRoom`` where no
    order fits); ``batch_cost``: the bytes one more batch costs at the throttle (``estimate.batch_cost``), where
    given the data batches are split where the fluid model says a batch's moves hold each other back by more
    (``untangle``)."""
    if per_broker < 1 or total < 1:
        raise ValueError("per_broker and total must be at least 1")
    steps = list(steps)
    if room is not None:
        unfitted = make_batches([s for s in steps if not s.leader_only], per_broker=per_broker, total=total,
                                max_bytes=max_bytes, order=order, batch_cost=batch_cost)
        return (fit_room(unfitted, room, per_broker, total, max_bytes)
                + _leader_batches(sorted((s for s in steps if s.leader_only),
                                         key=lambda s: (s.topic, s.partition, s.seq)), total))
    if order == "bound":
        # Two ways to form the batches, the one whose batches add up to less time kept: keeping the critical broker
        # busy (``_bound_batches``), or every batch's largest steps first (better where one broker's few huge steps
        # dwarf the rest)
        pending = sorted(steps, key=lambda s: (s.topic, s.partition, s.seq))
        data = [s for s in pending if not s.leader_only]
        best = min((_bound_batches(data, per_broker, total, max_bytes),
                    make_batches(data, per_broker=per_broker, total=total, max_bytes=max_bytes, order="largest")),
                   key=batch_floor)
        formed = refine(best, per_broker, total, max_bytes)
        leaders = [s for s in pending if s.leader_only]
    else:
        pending = sorted(steps, key=lambda s: ((s.bytes if order == "smallest" else -s.bytes), s.topic, s.partition,
                                               s.seq))
        formed = _first_fit([s for s in pending if not s.leader_only], per_broker, total, max_bytes)
        leaders = [s for s in pending if s.leader_only]
    if batch_cost is not None:
        formed = untangle(formed, batch_cost)
    return formed + _leader_batches(leaders, total)


def _first_fit(data: list[Step], per_broker: int, total: int, max_bytes: int | None) -> list[list[Step]]:
    """Batches filled in ``data``'s order: each takes every step, in that order, that fits its caps and is its
    partition's next, until full. The steps left wait in their order as a linked list (``after``), so a batch reads
    from the first step left and a step taken leaves the list at once (copying what was left after each batch took
    minutes at 467,000 steps)."""
    batches: list[list[Step]] = []
    next_seq = dict.fromkeys((s.tp for s in data), 0)
    head = len(data)  # after[head]: the first step left; -1 ends the list
    after = [*range(1, len(data)), -1, 0 if data else -1]
    left = len(data)
    while left:
        batch: list[Step] = []
        load: dict[int, int] = {}
        size = 0
        in_batch: set[tuple[str, int]] = set()
        prev, k = head, after[head]
        while k != -1 and len(batch) < total:  # full: nothing further fits
            s = data[k]
            if (s.seq == next_seq[s.tp] and s.tp not in in_batch
                    and all(load.get(b, 0) < per_broker for b in s.brokers())
                    and (max_bytes is None or not batch or size + s.bytes <= max_bytes)):
                batch.append(s)
                in_batch.add(s.tp)
                size += s.bytes
                for b in s.brokers():
                    load[b] = load.get(b, 0) + 1
                after[prev] = after[k]
                left -= 1
            else:
                prev = k
            k = after[k]
        for s in batch:
            next_seq[s.tp] += 1
        batches.append(batch)
    return batches


def _leader_batches(leaders: list[Step], total: int) -> list[list[Step]]:
    return [leaders[i:i + total] for i in range(0, len(leaders), total)]


class _Batch:
    """One batch being formed: its steps, and per broker its moves and the bytes through its throttle."""

    def __init__(self, per_broker: int, total: int, max_bytes: int | None) -> None:
        self.per_broker, self.total, self.max_bytes = per_broker, total, max_bytes
        self.steps: list[Step] = []
        self.held: dict[int, int] = {}
        self.count: dict[int, int] = {}
        self.size = 0

    def fits(self, s: Step, load: Mapping[int, int], length: int | None = None) -> bool:
        """Within the caps, and (``length``) adding no broker's bytes beyond it. ``load``: the step's bytes per
        broker it loads (its keys are ``s.brokers()``)."""
        count, held = self.count, self.held
        return (len(self.steps) < self.total and all(count.get(b, 0) < self.per_broker for b in load)
                and (self.max_bytes is None or not self.steps or self.size + s.bytes <= self.max_bytes)
                and (length is None or all(held.get(b, 0) + x <= length for b, x in load.items())))

    def take(self, s: Step, load: Mapping[int, int]) -> None:
        self.steps.append(s)
        self.size += s.bytes
        for b in load:
            self.count[b] = self.count.get(b, 0) + 1
        for b, x in load.items():
            self.held[b] = self.held.get(b, 0) + x


def _per_broker(load: Mapping[Throttled, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for (b, _), x in load.items():
        out[b] = out.get(b, 0) + x
    return out


Entry = tuple[tuple[int, str, int], int, Step]  # a step in a broker's ready list: ((-bytes, topic, partition), id, step)


class _Ready:
    """The steps ready (each partition's next) per broker, largest first (then topic, partition), and the brokers
    holding any, most bytes left first (then the lower id), kept as they change (reading every broker's bytes left
    for each batch took minutes at 2,600 brokers and 9,000 batches). A broker's list is two: the steps that load it
    with their whole bytes (``full``: it is their source, or their one destination) and the rest (``part``: one
    destination of a step adding several replicas, loaded by one replica's size)."""

    def __init__(self, loads: Mapping[int, Mapping[int, int]], left: dict[int, int]) -> None:
        self.loads, self.left = loads, left
        self.full: dict[int, list[Entry]] = {}
        self.part: dict[int, list[Entry]] = {}
        self.busiest = SortedList()

    def __bool__(self) -> bool:
        return bool(self.busiest)

    def _list(self, b: int, s: Step) -> list[Entry]:
        lists = self.full if self.loads[id(s)][b] == s.bytes else self.part
        return lists.setdefault(b, [])

    def add(self, s: Step) -> None:
        for b in self.loads[id(s)]:
            if b not in self.full and b not in self.part:
                self.busiest.add((-self.left[b], b))
            bisect.insort(self._list(b, s), ((-s.bytes, s.topic, s.partition), id(s), s))

    def remove(self, s: Step) -> None:
        for b in self.loads[id(s)]:
            lst = self._list(b, s)
            del lst[bisect.bisect_left(lst, ((-s.bytes, s.topic, s.partition), id(s)))]
            for lists in (self.full, self.part):
                if not lists.get(b, True):
                    del lists[b]
            if b not in self.full and b not in self.part:
                self.busiest.remove((-self.left[b], b))

    def spend(self, steps: Iterable[Step]) -> None:
        """These steps' bytes no longer left on their brokers."""
        moved = {b for s in steps for b in self.loads[id(s)]}
        held = [b for b in moved if b in self.full or b in self.part]
        for b in held:
            self.busiest.remove((-self.left[b], b))
        for s in steps:
            for b, x in self.loads[id(s)].items():
                self.left[b] -= x
        for b in held:
            self.busiest.add((-self.left[b], b))

    def of(self, b: int, length: int | None = None) -> Iterable[Entry]:
        """Broker b's ready steps in their order; with ``length``, only those no larger (a step's whole bytes load
        its source, so a larger one fits nowhere under it)."""
        lists = [lst for lst in (self.full.get(b), self.part.get(b)) if lst]
        if length is not None:
            lists = [itertools.islice(lst, bisect.bisect_left(lst, ((-length,),)), None) for lst in lists]  # type: ignore[misc]
        return lists[0] if len(lists) == 1 else heapq.merge(*lists)

    def fitting(self, b: int, batch: _Batch, length: int) -> Iterator[Entry]:
        """``of(b, length)``, also passing over the steps that load b with their whole bytes beyond what b has left
        under ``length`` in ``batch`` (read at each step: it shrinks as the batch takes steps on b), which cannot fit
        either: a batch's choices on one broker without reading the many it cannot take."""
        full, part = self.full.get(b, []), self.part.get(b, [])
        i, j = 0, bisect.bisect_left(part, ((-length,),))
        while True:
            i = bisect.bisect_left(full, ((-(length - batch.held.get(b, 0)),),), i)
            if i < len(full) and (j >= len(part) or full[i] < part[j]):
                yield full[i]
                i += 1
            elif j < len(part):
                yield part[j]
                j += 1
            else:
                return


def _bound_batches(data: list[Step], per_broker: int, total: int, max_bytes: int | None) -> list[list[Step]]:
    """Batches that keep the critical broker busy. Each batch waits for its busiest broker, so the run takes the sum
    over batches of each batch's busiest broker's bytes; it cannot beat the busiest broker's bytes over the whole
    plan. A batch starts on the broker with the most bytes left (the critical one), its largest steps first (longest
    processing time first); that sets the batch's length, and the batch is filled with other steps, those of the
    brokers with the most bytes left first and largest first, wherever they fit under that length on every broker
    they load (the caps on moves per broker, moves and bytes per batch hold). ``data``: in (topic, partition, seq)
    order; a partition's steps go one per batch, in order.

    The steps ready (each partition's next) are kept per broker, largest first (``_Ready``), so that a batch reads
    only the lists it can still take from: it stops once full, skips a broker at its cap (every step in its list
    loads it) and steps too large for what a broker has left under the length. A batch's choices are those of
    reading every ready step in the order above (60,000 steps: minutes otherwise)."""
    # Formed on each broker's bytes in and out added up, although the throttles are apart (``step_loads``): measured
    # on the simulator's weekly rebalance, batches so formed come nearer the bound (floor 1.27x) than batches formed
    # per throttle (1.33x), and as near or nearer on 31 small fuzz plans.
    loads = {id(s): _per_broker(step_loads(s)) for s in data}
    if not all(loads.values()):
        raise ValueError("a step that copies data adds no replica")
    left: dict[int, int] = {}
    for s in data:
        for b, x in loads[id(s)].items():
            left[b] = left.get(b, 0) + x
    queues: dict[tuple[str, int], list[Step]] = {}
    for s in data:
        queues.setdefault(s.tp, []).append(s)
    heads = dict.fromkeys(queues, 0)
    ready = _Ready(loads, left)
    for tp in queues:
        ready.add(queues[tp][0])
    batches: list[list[Step]] = []
    while ready:
        critical = ready.busiest[0][1]
        batch = _Batch(per_broker, total, max_bytes)
        for _, _, s in ready.of(critical):
            if len(batch.steps) >= total or batch.count.get(critical, 0) >= per_broker:
                break
            if batch.fits(s, loads[id(s)]):
                batch.take(s, loads[id(s)])
        _fill(batch, ready, per_broker, total)
        ready.spend(batch.steps)
        for s in batch.steps:
            ready.remove(s)
            heads[s.tp] += 1
            if heads[s.tp] == len(queues[s.tp]):
                del heads[s.tp]
            else:
                ready.add(queues[s.tp][heads[s.tp]])
        batches.append(batch.steps)
    return batches


def _fill(batch: _Batch, ready: _Ready, per_broker: int, total: int) -> None:
    """The rest of a batch begun on the critical broker, by (most bytes left on any of its brokers, largest, topic,
    partition): broker by broker in the order of their bytes left, each step where its most-loaded broker comes
    (equal bytes left: their lists merged), wherever it fits under the batch's length."""
    loads, left = ready.loads, ready.left
    length = max(batch.held.values(), default=0)
    taken = {id(s) for s in batch.steps}
    for negative, same in itertools.groupby(ready.busiest, key=operator.itemgetter(0)):
        if len(batch.steps) >= total:
            break
        value = -negative
        group = [b for _, b in same if batch.count.get(b, 0) < per_broker]
        if not group:
            continue  # every broker of the group at its cap: nothing in their lists fits
        merged = (ready.fitting(group[0], batch, length) if len(group) == 1
                  else heapq.merge(*(ready.of(b, length) for b in group)))
        for _, key, s in merged:
            if len(batch.steps) >= total:
                break
            if key in taken or max(left[b] for b in loads[key]) != value:
                continue  # taken first, or read where its most-loaded broker came
            if batch.fits(s, loads[key], length):
                batch.take(s, loads[key])
                taken.add(key)
                if all(batch.count.get(b, 0) >= per_broker for b in group):
                    break  # the rest of the group's lists cannot fit


class _Refine:
    """Batches made nearer the bound by local search (``refine``): per batch its steps, the bytes through each
    throttle, the moves per broker, its bytes and partitions, and where each step is."""

    def __init__(self, batches: list[list[Step]], per_broker: int, total: int, max_bytes: int | None) -> None:
        self.per_broker, self.total, self.max_bytes = per_broker, total, max_bytes
        self.batches = [list(b) for b in batches]
        self.loads = {s: step_loads(s) for b in batches for s in b}
        self.held: list[dict[Throttled, int]] = []
        self.count: list[dict[int, int]] = []
        self.size: list[int] = []
        self.tps: list[set[tuple[str, int]]] = []
        self.where: dict[tuple[str, int, int], int] = {}
        for i, b in enumerate(self.batches):
            held: dict[Throttled, int] = {}
            count: dict[int, int] = {}
            for s in b:
                for t, x in self.loads[s].items():
                    held[t] = held.get(t, 0) + x
                for br in s.brokers():
                    count[br] = count.get(br, 0) + 1
                self.where[(s.topic, s.partition, s.seq)] = i
            self.held.append(held)
            self.count.append(count)
            self.size.append(sum(s.bytes for s in b))
            self.tps.append({s.tp for s in b})
        self.length = [max(h.values(), default=0) for h in self.held]

    def window(self, s: Step) -> tuple[int, int]:
        """The batches ``s`` may go to lie strictly between these (its partition's previous and next steps')."""
        return (self.where.get((s.topic, s.partition, s.seq - 1), -1),
                self.where.get((s.topic, s.partition, s.seq + 1), len(self.batches)))

    def length_after(self, i: int, out: Step | None, into: Step | None) -> int:
        """Batch ``i``'s busiest throttle with ``out`` taken out and ``into`` put in."""
        held = self.held[i]
        change: dict[Throttled, int] = {}
        for s, sign in ((out, -1), (into, 1)):
            if s is not None:
                for t, x in self.loads[s].items():
                    change[t] = change.get(t, held.get(t, 0)) + sign * x
        top = max(change.values(), default=0)
        if any(held.get(t, 0) == self.length[i] and v < self.length[i] for t, v in change.items()):
            return max(top, max((v for t, v in held.items() if t not in change), default=0))
        return max(top, self.length[i])

    def fits(self, j: int, out: Step | None, into: Step) -> bool:
        """Batch ``j`` within its caps with ``out`` taken out and ``into`` put in."""
        if len(self.batches[j]) - (out is not None) >= self.total or (into.tp in self.tps[j] and (
                out is None or out.tp != into.tp)):
            return False
        if self.max_bytes is not None and self.size[j] - (out.bytes if out else 0) + into.bytes > self.max_bytes:
            return False
        freed = out.brokers() if out is not None else set()
        return all(self.count[j].get(b, 0) - (b in freed) < self.per_broker for b in into.brokers())

    def move(self, s: Step, i: int, j: int) -> None:
        self.batches[i].remove(s)
        self.batches[j].append(s)
        for k, sign in ((i, -1), (j, 1)):
            for t, x in self.loads[s].items():
                self.held[k][t] = self.held[k].get(t, 0) + sign * x
            for b in s.brokers():
                self.count[k][b] = self.count[k].get(b, 0) + sign
            self.size[k] += sign * s.bytes
            self.length[k] = max(self.held[k].values(), default=0)
        self.tps[i].discard(s.tp)
        self.tps[j].add(s.tp)
        self.where[(s.topic, s.partition, s.seq)] = j


def refine(batches: list[list[Step]], per_broker: int, total: int, max_bytes: int | None,
           work: int | None = None) -> list[list[Step]]:
    """Batches whose floor (``batch_floor``) is lower, by local search: the longest batch first, a step through its
    busiest throttle (largest first) moves to another batch, or trades places with a smaller step through that
    throttle in another batch, wherever the sum of the two batches' lengths drops; until nothing improves or
    ``work`` candidates were looked at (default 40 per step, at most ``REFINE_WORK``: a few seconds at 60,000
    steps): deterministic, not timed. Every rule of a batch holds
    (caps, one step per partition, a partition's steps in order); empty batches are dropped. Data batches only."""
    r = _Refine(batches, per_broker, total, max_bytes)
    budget = min(40 * sum(len(b) for b in batches), REFINE_WORK) if work is None else work
    through: dict[Throttled, list[Step]] = {}  # per throttle, its steps smallest first
    for s in sorted(r.loads, key=lambda s: (s.bytes, s.topic, s.partition, s.seq)):
        for t in r.loads[s]:
            through.setdefault(t, []).append(s)
    spent = 0

    def shorten(i: int) -> bool:
        nonlocal spent
        held = r.held[i]
        top = max(held, key=lambda t: (held[t], t))
        for s in sorted((s for s in r.batches[i] if top in r.loads[s]),
                        key=lambda s: (-s.bytes, s.topic, s.partition, s.seq)):
            lo, hi = r.window(s)
            alone = r.length[i] - r.length_after(i, s, None)
            best, choice = 0, cast("tuple[int, Step | None] | None", None)
            for j in range(lo + 1, hi):
                spent += 1
                if j != i and r.fits(j, None, s):
                    gain = alone - (r.length_after(j, None, s) - r.length[j])
                    if gain > best:
                        best, choice = gain, (j, None)
            for other in through[top]:
                if other.bytes >= s.bytes:
                    break
                j = r.where[(other.topic, other.partition, other.seq)]
                if j == i or not lo < j < hi:
                    continue
                lo2, hi2 = r.window(other)
                spent += 1
                if not lo2 < i < hi2 or not r.fits(j, other, s) or not r.fits(i, s, other):
                    continue
                gain = (r.length[i] - r.length_after(i, s, other)) + (r.length[j] - r.length_after(j, other, s))
                if gain > best:
                    best, choice = gain, (j, other)
            if choice is not None:
                j, traded = choice
                r.move(s, i, j)
                if traded is not None:
                    r.move(traded, j, i)
                return True
        return False

    improved = True
    while improved and spent < budget:
        improved = False
        for i in sorted(range(len(r.batches)), key=lambda i: (-r.length[i], i)):
            while r.batches[i] and spent < budget and shorten(i):
                improved = True
    return [b for b in r.batches if b]


def untangle(batches: list[list[Step]], batch_cost: int, work: int | None = None) -> list[list[Step]]:
    """Batches split where their moves hold each other back. Within a batch the copies through a throttle share its
    rate (``fluid``), so a copy through two busy throttles gets the smaller share of each and the batch outlasts its
    busiest throttle's bytes (``batch_floor``): on a heavy-tailed add-brokers plan (25 moves per broker), the first
    batch's two largest moves, from one source to two new brokers each taking 24 smaller ones, held the batch to
    1.44x its busiest throttle. A batch whose length in the fluid model passes its floor is split in two (``_halves``:
    each throttle's bytes spread over both) where the halves' lengths plus ``batch_cost`` (the bytes the throttle
    moves in the time a batch boundary costs) come below the batch's, and each half is tried again. The longest
    batches first, until ``work`` (the copies of each batch run, squared; default ``UNTANGLE_WORK``, seconds at
    500,000 steps) is spent: deterministic, not timed. A split keeps every rule (caps, one step per partition, a
    partition's steps in order: the halves run one after the other where the batch ran) and no broker's peak disk
    rises (``peak_disk``: the second half adds only after the first one's moves have freed their bytes). Data
    batches only."""
    budget = UNTANGLE_WORK if work is None else work
    spent = 0
    out: list[list[list[Step]]] = [[b] for b in batches]
    floors = [batch_floor([b]) for b in batches]
    for i in sorted(range(len(batches)), key=lambda i: (-floors[i], i)):
        pieces: list[list[Step]] = []
        todo = [batches[i]]
        while todo:
            batch = todo.pop()
            copies = sum(len(s.added) for s in batch)
            if len(batch) < 2 or spent + 2 * copies * copies > budget:
                pieces.append(batch)
                continue
            spent += copies * copies
            length = simulate_batches([batch], 1.0).makespan
            if length <= batch_floor([batch]) * (1 + 1e-9):
                pieces.append(batch)
                continue
            first, second = _halves(batch)
            spent += copies * copies
            if simulate_batches([first], 1.0).makespan + simulate_batches([second], 1.0).makespan + batch_cost < length:
                todo += [second, first]
            else:
                pieces.append(batch)
        out[i] = pieces
    return [b for pieces in out for b in pieces]


def _halves(batch: list[Step]) -> tuple[list[Step], list[Step]]:
    """A batch in two, its steps largest first each where the busiest of its throttles is lower then (on equal
    footing, the half with fewer bytes; then the first): every throttle's bytes spread over both, so a source's two
    large moves go one to each."""
    halves: tuple[list[Step], list[Step]] = ([], [])
    held: tuple[dict[Throttled, int], dict[Throttled, int]] = ({}, {})
    size = [0, 0]
    for s in sorted(batch, key=lambda s: (-s.bytes, s.topic, s.partition, s.seq)):
        loads = step_loads(s)
        k = min((0, 1), key=lambda k: (max(held[k].get(t, 0) + x for t, x in loads.items()), size[k], k))
        halves[k].append(s)
        size[k] += s.bytes
        for t, x in loads.items():
            held[k][t] = held[k].get(t, 0) + x
    return halves


class NoRoom(ValueError):
    """No order of the remaining steps lets one start without a broker's disk passing its limit (one line)."""


def fit_room(batches: list[list[Step]], room: DiskRoom, per_broker: int, total: int,
             max_bytes: int | None = None) -> list[list[Step]]:
    """The batches, each within the disk room its brokers have when it starts (``room``: before the plan; a batch
    fills its new replicas' brokers at its start and frees the replaced ones when it ends, as ``peak_disk`` counts):
    a step that would take a broker past its limit waits for a later batch, ahead of that batch's own steps (the caps
    kept; a partition's steps in order, one a batch). Batches that fit are kept as they are. Raises ``NoRoom`` naming
    the broker where a batch could take no step at all."""
    now = dict(room.held)
    waiting: list[Step] = []
    done: dict[tuple[str, int], int] = {}
    first: dict[tuple[str, int], int] = {}
    for given in batches:
        for s in given:
            first[s.tp] = min(first.get(s.tp, s.seq), s.seq)
    out: list[list[Step]] = []
    queue = [list(given) for given in batches]
    while queue or waiting:
        candidates = waiting + (queue.pop(0) if queue else [])
        batch = _Batch(per_broker, total, max_bytes)
        adding: dict[int, int] = {}
        taken: set[tuple[str, int]] = set()
        waiting = []
        for s in candidates:
            load = _per_broker(step_loads(s))
            ready = s.seq == done.get(s.tp, first[s.tp]) and s.tp not in taken
            fits_disk = all(b not in room.limit or now.get(b, 0) + adding.get(b, 0) + s.size_bytes <= room.limit[b]
                            for b in s.added)
            if ready and fits_disk and batch.fits(s, load):
                batch.take(s, load)
                taken.add(s.tp)
                for b in s.added:
                    adding[b] = adding.get(b, 0) + s.size_bytes
            else:
                waiting.append(s)
        if not batch.steps:
            if queue:  # nothing of this batch fits yet: its steps wait with the next batch's
                continue
            s = next(s for s in waiting if s.seq == done.get(s.tp, first[s.tp]))
            b = next(b for b in s.added if b in room.limit and now.get(b, 0) + s.size_bytes > room.limit[b])
            raise NoRoom(f"{s.topic}-{s.partition} cannot move: broker {b} holds {now.get(b, 0)} bytes and would hold "
                         f"{now.get(b, 0) + s.size_bytes}, above its limit of {room.limit[b]}, and no other move "
                         f"frees room on it first")
        now = dict(DiskRoom(now, room.limit).after(batch.steps).held)
        for s in batch.steps:
            done[s.tp] = s.seq + 1
        out.append(batch.steps)
    return out
