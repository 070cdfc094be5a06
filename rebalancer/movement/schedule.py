"""The rolling schedule (issue 43): a move starts as soon as its brokers have room, not in batches that each wait
for their slowest move. Pure functions of plain data, no cluster and no clock.

Batches one after another cannot beat the sum over batches of each batch's busiest throttle (``batches.batch_floor``):
1.5-3x the busiest broker's bytes over the whole plan on weekly rebalances (``bench/bench_batches.py``). Over the
Admin API, AlterPartitionReassignments adds moves to those in flight, so a slot that frees can be refilled at once.

``Scheduler`` decides what starts: each partition's steps in order, one at a time; at most ``per_broker`` moves in
flight through any throttle (a broker's in, as a destination, and its out, as the source leader, apart, as Kafka
throttles them: ``batches.step_loads``) and ``total`` in all. One move alone fills a throttle, and moves sharing a
throttle share its rate, so more at once only dilutes the critical broker's moves among the others through their
sources: on a heavy-tailed add-brokers plan the rolling schedule takes 1.000-1.001x the bound at 1-3 moves per
broker, 1.05x at 5, 1.16-1.22x at 10-100 (fluid model, ``bench/bench_batches.py``); counted per broker, in and out
together, a broker's few moves out held its moves in back (a heavy-tailed weekly rebalance: 1.018 -> 1.000).
``ROLLING_PER_BROKER`` (2) keeps one move to spare while the next is submitted, and a throttle with less than
``min_bytes`` still to copy (twice what it moves while the executor reacts to a finish) takes more (once every
throttle has had its count; such moves share the total cap a move per throttle in turn): what is left of
each move in flight is read off the clock (``rate``: each copies at its max-min fair share of its throttles), not
counted whole until the move is seen to finish. When room frees, the ready steps (each partition's next) start in
order of the bytes left on their busiest throttle (a broker's in or out: ``batches.step_loads``), the critical
brokers' first, and on equal footing the largest first (longest processing time first): the broker that sets the
bound is never kept waiting by a smaller one's moves. Leader-only
steps copy nothing and are left to the executor's election at the end (``ready`` skips them).

``simulate`` runs a schedule under the fluid model of Kafka's throttles (``fluid``: each throttle's rate shared
max-min fairly among the copies through it, a broker's in and out apart); it returns the makespan (first start to
last finish) and each move's start and end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .batches import PER_BROKER, TOTAL, DiskRoom, Step, Throttled, step_loads
from .fluid import Copies, Simulation, fair_rates

__all__ = ["ROLLING_PER_BROKER", "DiskRoom", "Scheduler", "simulate", "rolling_peak_disk", "per_broker_of"]

ROLLING_PER_BROKER = 2  # moves in flight per broker, in and out apart (module doc)


def per_broker_of(schedule: str | None, given: int | None = None) -> int:
    """The moves at once per broker a schedule runs with: ``given``, else its own default (``ROLLING_PER_BROKER``
    rolling, ``batches.PER_BROKER`` in batches)."""
    return given or (ROLLING_PER_BROKER if schedule == "rolling" else PER_BROKER)


class Scheduler:
    """What to start next, given what is in flight (module doc). ``ready()`` lists the steps to start now and marks
    them in flight; ``finish(step)`` marks one done. Deterministic: ties broken by topic, partition and step."""

    def __init__(self, steps: Iterable[Step], *, per_broker: int = ROLLING_PER_BROKER, total: int = TOTAL,
                 min_bytes: int = 0, room: DiskRoom | None = None, rate: float = 0.0) -> None:
        if per_broker < 1 or total < 1:
            raise ValueError("per_broker and total must be at least 1")
        self.per_broker, self.total = per_broker, total
        # Disk (``room``): each broker's bytes as the moves started and finished so far leave it (a move fills its
        # new replicas' brokers from its start and frees its old ones at its finish), and the most it may hold: a
        # step waits until its destinations have room for it. ``disk_peak``: the most each broker held.
        self.disk: dict[int, int] = dict(room.held) if room else {}
        self.disk_limit: dict[int, int] = dict(room.limit) if room else {}
        self.disk_peak: dict[int, int] = dict(self.disk)
        # A broker with fewer than min_bytes in flight (its steps' bytes through it, as ``step_loads`` counts them)
        # takes more than per_broker moves: what it has must outlast the executor's reaction to a finish
        # (``set_min_bytes``). 0: the count alone, as the fluid model runs it.
        self.min_bytes = min_bytes
        self.flying_bytes: dict[Throttled, int] = {}
        # Bytes still to copy through each throttle, as far as the clock tells (``rate``: the throttle, bytes/s; 0:
        # unknown, every byte in flight counts until its move finishes). Of a big move started a minute ago little
        # may be left: counted whole, it kept its broker "full" to its end, and the next move started only once the
        # executor saw it finish, the broker idle meanwhile (a fifth of a heavy-tailed weekly rebalance's run in the
        # fluid model with the executor's loop). Each move submitted copies at its max-min fair share of the
        # throttles it passes through (``fair_rates``, as ``simulate`` runs them), so a broker whose moves wait on
        # their sources is not taken for drained. ``_rem``: step -> bytes left per copy, as of ``_now``.
        self.rate = rate
        self._rem: dict[int, float] = {}
        self._left_at: dict[Throttled, float] = {}  # bytes left through each throttle (``_rem`` summed)
        self._rates: dict[int, float] | None = {}
        self._held: set[int] = set()  # started, not yet copying (``ready(copying=False)`` until ``copying``)
        self._now: float | None = None
        self._was_full: set[Throttled] = set()
        # steps by index (hashing a Step hashes its tuples: the simulation asks millions of times)
        self._steps = sorted((s for s in steps if not s.leader_only), key=lambda s: (s.topic, s.partition, s.seq))
        self._index = {s: i for i, s in enumerate(self._steps)}
        self._loads = [step_loads(s) for s in self._steps]
        self._brokers = [tuple(s.brokers()) for s in self._steps]
        self._tie = [(-s.bytes, s.topic, s.partition) for s in self._steps]
        self._queues: dict[tuple[str, int], list[int]] = {}
        self._throttles = [tuple(loads) for loads in self._loads]
        for i, s in enumerate(self._steps):
            self._queues.setdefault(s.tp, []).append(i)
        self._next = dict.fromkeys(self._queues, 0)
        self.left: dict[Throttled, int] = {}
        for loads in self._loads:
            for t, x in loads.items():
                self.left[t] = self.left.get(t, 0) + x
        self.flying: dict[Throttled, int] = {}   # a broker's throttle in or out -> moves in flight through it
        self.in_flight: set[tuple[str, int]] = set()
        # Steps by broker, and the brokers whose room grew since ``ready`` last ran (None: look at every step).
        # Whatever ``ready`` left waiting did not fit; it can fit later only through a broker that gained room
        # (or the total cap, which ``ready`` then reports by leaving ``_dirty`` None).
        self._by_broker: dict[int, list[int]] = {}
        for i, bs in enumerate(self._brokers):
            for b in bs:
                self._by_broker.setdefault(b, []).append(i)
        self._dirty: set[int] | None = None

    @property
    def done(self) -> bool:
        return not self._next and not self.in_flight

    def _waiting(self) -> list[int]:
        return [self._queues[tp][i] for tp, i in self._next.items() if tp not in self.in_flight]

    def _candidates(self) -> list[int]:
        """The waiting steps that may fit now (``_dirty``): all of them, or those through a broker with new room."""
        if self._dirty is None:
            return self._waiting()
        out: set[int] = set()
        for b in self._dirty:
            for i in self._by_broker.get(b, ()):
                s = self._steps[i]
                if s.tp not in self.in_flight and (k := self._next.get(s.tp)) is not None and self._queues[s.tp][k] == i:
                    out.add(i)
        return list(out)

    def _full(self, t: Throttled) -> bool:
        return self.flying.get(t, 0) >= self.per_broker and self.left_bytes(t) >= self.min_bytes

    def left_bytes(self, t: Throttled) -> float:
        """The bytes still to copy through throttle ``t`` as of the last clock reading (``__init__``)."""
        held = self.flying_bytes.get(t, 0)
        return held if self._now is None else min(held, self._left_at.get(t, 0.0))

    def _fair(self) -> dict[int, float]:
        if self._rates is None:
            flows = [i for i, x in self._rem.items() if x > 0 and i not in self._held]  # copied: no share
            self._rates = dict(zip(flows, fair_rates([self._throttles[i] for i in flows], self.rate), strict=True))
        return self._rates

    def _tick(self, now: float | None) -> None:
        """Every move's bytes left at ``now``: what it had, less its fair share of its throttles since."""
        if not self.rate or now is None:
            return
        if self._now is not None and now > self._now and self._rem:
            rates, dt = self._fair(), now - self._now
            copying = sum(1 for x in self._rem.values() if x > 0)
            self._rem = {i: max(0.0, x - rates.get(i, 0.0) * dt) for i, x in self._rem.items()}
            if sum(1 for x in self._rem.values() if x > 0) < copying:
                self._rates = None  # a move copied all it had: the others share its throttles
            self._left_at = {}
            for i, x in self._rem.items():
                share = _fraction(x, self._steps[i].size_bytes)
                for t, y in self._loads[i].items():
                    self._left_at[t] = self._left_at.get(t, 0.0) + y * share
        self._now = now if self._now is None else max(now, self._now)

    def wake(self) -> float | None:
        """When the first broker kept full only by its bytes left drains below ``min_bytes``, at the rates of now
        (None: none will before a move starts or finishes): a fluid simulation looks again then, as the executor's
        next poll would."""
        if self._now is None or not self._rem:
            return None
        rates = self._fair()
        left: dict[Throttled, float] = {}
        speed: dict[Throttled, float] = {}
        for i, x in self._rem.items():
            size = self._steps[i].size_bytes
            for t, y in self._loads[i].items():
                left[t] = left.get(t, 0.0) + y * _fraction(x, size)
                speed[t] = speed.get(t, 0.0) + y * _fraction(rates.get(i, 0.0), size)
        times = [self._now + (x - self.min_bytes) / speed[t] for t, x in left.items()
                 if self.flying.get(t, 0) >= self.per_broker and x > self.min_bytes and speed[t] > 0]
        return min(times, default=None)

    def _fits(self, i: int) -> bool:
        return (len(self.in_flight) < self.total and not any(self._full(t) for t in self._throttles[i])
                and self._has_room(self._steps[i]))

    def _has_room(self, s: Step) -> bool:
        limit, disk = self.disk_limit, self.disk
        return all(b not in limit or disk.get(b, 0) + s.size_bytes <= limit[b] for b in s.added)

    def set_min_bytes(self, min_bytes: int) -> None:
        """A new floor on the bytes in flight per broker (``__init__``); raised, every waiting step is looked at."""
        if min_bytes > self.min_bytes:
            self._dirty = None
        self.min_bytes = min_bytes

    def ready(self, now: float | None = None, copying: bool = True) -> list[Step]:
        """The steps to start ``now`` (in the order to submit them), marked in flight. ``now``: the clock (seconds),
        with ``rate``: a broker's moves in flight count by their bytes left (``__init__``). ``copying`` False: they
        hold their bytes whole until ``copying`` says they copy (the executor submits them a moment later, after
        their throttles and the state are written: drained from their choice, a flood of small moves started)."""
        started: list[Step] = []
        self._tick(now)
        if len(self.in_flight) >= self.total:
            self._dirty = None  # what waits may fit once the total frees, through any broker
            return started
        left = self.left
        full = {t for t in self.flying if self._full(t)}
        if self._dirty is not None:  # drained below the floor since: room, as a finish would make
            self._dirty.update(b for b, _ in self._was_full - full)
        waiting = [i for i in self._candidates() if full.isdisjoint(self._throttles[i])]
        waiting.sort(key=lambda i: (-max(left[t] for t in self._loads[i]), self._tie[i]))
        self._dirty = set()

        def start(i: int) -> None:
            s = self._steps[i]
            started.append(s)
            self.in_flight.add(s.tp)
            self._fly(i, 1)
            if not copying and self._now is not None:
                self._held.add(i)

        # First every throttle up to its count, in the order above; then the moves past the count of throttles
        # short of min_bytes, a move per throttle in turn (the throttle each is chosen for: its busiest): a critical
        # broker's many small moves took the whole total cap at once and left another critical broker idle until
        # they finished (4 s of a 74 s run on the simulator's heavy-tailed add-brokers plan).
        extra: dict[Throttled, list[int]] = {}
        for i in waiting:
            if len(self.in_flight) >= self.total:
                break
            if all(self.flying.get(t, 0) < self.per_broker for t in self._throttles[i]):
                if self._fits(i):
                    start(i)
            else:
                extra.setdefault(max(self._loads[i], key=lambda t: (left[t], t)), []).append(i)
        turns = [q[::-1] for q in extra.values()]
        while turns and len(self.in_flight) < self.total:
            for q in turns:
                while q and len(self.in_flight) < self.total:
                    if self._fits(i := q.pop()):  # a move that does not fit now will not in this call
                        start(i)
                        break
            turns = [q for q in turns if q]
        if len(self.in_flight) >= self.total:
            self._dirty = None  # what waits may fit once the total frees, through any broker
        self._was_full = {t for t in self.flying if self._full(t)}
        return started

    def _fly(self, i: int, sign: int) -> None:
        for t, x in self._loads[i].items():
            self.flying[t] = self.flying.get(t, 0) + sign
            self.flying_bytes[t] = self.flying_bytes.get(t, 0) + sign * x
        s = self._steps[i]
        if self._now is not None:  # the moves in flight changed: so do their shares
            self._rates = None
            self._held.discard(i)
            share = 1.0 if sign > 0 else _fraction(self._rem.pop(i, 0.0), s.size_bytes)
            if sign > 0:
                self._rem[i] = float(s.size_bytes)
            for t, x in self._loads[i].items():
                self._left_at[t] = max(0.0, self._left_at.get(t, 0.0) + sign * x * share)
        if sign > 0:  # started: its new replicas take their room now
            for b in s.added:
                self.disk[b] = self.disk.get(b, 0) + s.size_bytes
                self.disk_peak[b] = max(self.disk_peak.get(b, 0), self.disk[b])
        else:  # finished: the replicas it replaced are deleted
            for b in s.before:
                if b not in s.after:
                    self.disk[b] = self.disk.get(b, 0) - s.size_bytes

    def upcoming(self, depth: int = 1) -> list[Step]:
        """What starts next as room frees: per throttle, the first ``per_broker`` waiting steps through it in the
        order ``ready`` tries them (the executor throttles them ahead, so they start without a settle wait);
        ``depth`` times as many, and as many bytes, to look further ahead."""
        left = self.left
        waiting = sorted(self._waiting(), key=lambda i: (-max(left[t] for t in self._loads[i]), self._tie[i]))
        taken: dict[Throttled, int] = {}
        taken_bytes: dict[Throttled, int] = {}
        out: list[Step] = []
        for i in waiting:
            if any(taken.get(t, 0) < depth * self.per_broker or taken_bytes.get(t, 0) < depth * self.min_bytes
                   for t in self._throttles[i]):
                out.append(self._steps[i])
                for t, x in self._loads[i].items():
                    taken[t] = taken.get(t, 0) + 1
                    taken_bytes[t] = taken_bytes.get(t, 0) + x
        return out

    def copying(self, steps: Iterable[Step], now: float | None = None) -> None:
        """These steps (started with ``ready(copying=False)``) copy from ``now`` on."""
        self._tick(now)
        for s in steps:
            i = self._index.get(s)
            if i is not None and i in self._held:
                self._held.discard(i)
                self._rates = None

    def start(self, s: Step, now: float | None = None) -> None:
        """Mark ``s`` in flight without ``ready`` choosing it: a resumed execution's moves already submitted."""
        self._tick(now)
        i = self._index.get(s)
        if (i is None or s.tp in self.in_flight or s.tp not in self._next
                or self._queues[s.tp][self._next[s.tp]] != i):
            raise ValueError(f"{s.topic}-{s.partition} step {s.seq} is not its partition's next step")
        self.in_flight.add(s.tp)
        self._fly(i, 1)

    def finish(self, s: Step, now: float | None = None) -> None:
        """``s`` is done (its new replicas in sync): its brokers' room and its partition's next step free up."""
        self._tick(now)
        if s.tp not in self.in_flight:
            raise ValueError(f"{s.topic}-{s.partition} has no step in flight")
        i = self._index[s]
        self.in_flight.discard(s.tp)
        self._fly(i, -1)
        if self._dirty is not None:
            # Room on its brokers. Its partition's next step reads from one of them (the leader it leaves, or the
            # replica that replaced it: ``steps_of``), so that step is looked at too; and disk room where the
            # replica it replaced was deleted.
            self._dirty.update(self._brokers[i])
            self._dirty.update(b for b in s.before if b not in s.after)
        for t, x in self._loads[i].items():
            self.left[t] -= x
        self._next[s.tp] += 1
        if self._next[s.tp] == len(self._queues[s.tp]):
            del self._next[s.tp]

    def stuck(self) -> str | None:
        """Why nothing can start while nothing is in flight and steps wait (None: not stuck): the first waiting
        step and the broker without disk room for it (the caps always let a step start on an idle cluster)."""
        if self.in_flight or not self._next:
            return None
        for i in sorted(self._waiting(), key=lambda i: self._tie[i]):
            s = self._steps[i]
            for b in s.added:
                if b in self.disk_limit and self.disk.get(b, 0) + s.size_bytes > self.disk_limit[b]:
                    return (f"{s.topic}-{s.partition} cannot start: broker {b} holds {self.disk.get(b, 0)} bytes and "
                            f"would hold {self.disk[b] + s.size_bytes}, above its limit of {self.disk_limit[b]}, "
                            f"and no move in flight frees room on it")
        return None

    def idle_with_work(self) -> list[int]:
        """Brokers with nothing in flight though a waiting step of theirs would fit now: never, after ``ready``."""
        return sorted({t[0] for i in self._waiting() if self._fits(i) for t in self._throttles[i]
                       if not self.flying.get(t)})


def _fraction(x: float, size: int) -> float:
    """``x`` bytes of a move of ``size`` (an empty partition's move: nothing, it has no bytes to share)."""
    return x / size if size else 0.0


def simulate(steps: Iterable[Step], throttle: float, *, per_broker: int = ROLLING_PER_BROKER,
             total: int = TOTAL, poll: float = 0.0, start_cost: float = 0.0, room: DiskRoom | None = None,
             drain: bool = True) -> Simulation[Step]:
    """The rolling schedule (``Scheduler``) under the fluid model of the throttles (module doc). With the executor's
    loop (``poll``, ``start_cost``: the seconds between its checks, and a round of starts' Admin API calls; 0: an
    instant loop), a finish is seen half a poll late on average and the moves it lets start begin copying
    ``start_cost`` after that; each broker keeps twice what its throttle moves in a poll and a start in flight, as
    the executor does (``Scheduler.min_bytes``). ``room``: steps wait for disk room as the executor's do; where
    none can start, the simulation stops there (``Simulation.stuck`` says why)."""
    reaction = poll + start_cost
    sched = Scheduler(steps, per_broker=per_broker, total=total, min_bytes=int(2 * throttle * reaction), room=room,
                      rate=throttle if drain else 0.0)
    delay = poll / 2 + start_cost
    sim: Simulation[Step] = Simulation(0.0)
    copies: Copies[Step] = Copies()
    pending: list[tuple[float, Step]] = []  # started, copying from then
    now = 0.0

    def start(wait: float = delay) -> None:
        for s in sched.ready(now, copying=not wait):
            sim.starts.append((now, s))
            if wait:
                pending.append((now + wait, s))
            else:
                copies.add(s)
        for (b, _), n in sched.flying.items():
            sim.peak_in_flight[b] = max(sim.peak_in_flight.get(b, 0), n)

    start(start_cost)  # the first round: no finish to see
    while copies.left or pending:
        due = min((t for t, _ in pending), default=float("inf"))
        wake = sched.wake()
        nxt = min(due, wake if wake is not None and wake > now else float("inf"))
        if copies.left:
            dt, done = copies.advance(throttle, nxt - now)
        else:
            dt, done = due - now, []
        now += dt
        for s in done:
            sched.finish(s, now)
            sim.finishes.append((now, s))
        if pending and now >= due - 1e-9:
            due_now = [s for t, s in pending if t <= now + 1e-9]
            sched.copying(due_now, now)
            for s in due_now:
                copies.add(s)
            pending = [p for p in pending if p[0] > now + 1e-9]
        if done or (wake is not None and now >= wake - 1e-9):
            start()
    sim.makespan = now
    sim.stuck = sched.stuck()
    return sim


def rolling_peak_disk(sim: Simulation[Step], held: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """Per broker, the most bytes it holds at any moment of a simulated rolling schedule, and the round of starts
    (0-based; -1: before the first) where: a move fills its new replicas' brokers from its start while its old
    replicas hold theirs until it finishes (Kafka deletes them once the new ones are in sync), as
    ``batches.peak_disk`` counts a batch. A finish frees its bytes before a start at the same moment takes room (the
    executor sees a move done before it starts the next). ``held``: each broker's bytes before the plan."""
    events = sorted([(t, 0, k, s) for k, (t, s) in enumerate(sim.finishes)]
                    + [(t, 1, k, s) for k, (t, s) in enumerate(sim.starts)], key=lambda e: e[:3])
    now = dict(held)
    peak = {b: (x, -1) for b, x in now.items()}
    rounds: dict[float, int] = {}
    for t, kind, _, s in events:
        if kind == 0:
            for b in s.before:
                if b not in s.after:
                    now[b] = now.get(b, 0) - s.size_bytes
            continue
        r = rounds.setdefault(t, len(rounds))
        for b in s.added:
            now[b] = now.get(b, 0) + s.size_bytes
            if now[b] > peak.get(b, (-1, -1))[0]:
                peak[b] = (now[b], r)
    return peak
