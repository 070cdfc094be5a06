"""The fluid model of Kafka's replication throttles (issue 43): each throttle (a broker's replication in, or out:
``batches.step_loads``) carries at most ``throttle`` bytes/s, shared max-min fairly among the copies through it, and
every copy runs at the rate its tightest throttle allows. ``fair_rates`` is the sharing rule; ``Copies`` the copies
in flight; ``simulate_batches`` runs batches one after another (each after the previous one's slowest move) and
``schedule.simulate`` the rolling schedule in the same model. Neither counts the executor's polling or Kafka's own
overheads: they compare orders, ``estimate`` the clock. Pure functions of plain data, no cluster and no clock."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

Throttled = tuple[int, str]  # a broker's replication throttle in one direction: (broker, "in" or "out")


class Copy(Protocol):
    """What the model reads of a move (``batches.Step``): its partition, the brokers it copies to, its leader's
    broker, its size; hashable."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def before(self) -> tuple[int, ...]: ...
    @property
    def added(self) -> tuple[int, ...]: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def leader_only(self) -> bool: ...
    def __hash__(self) -> int: ...


Step = TypeVar("Step", bound=Copy)

__all__ = ["Copies", "Simulation", "fair_rates", "simulate_batches"]


def fair_rates(flows: Sequence[Sequence[Throttled]], capacity: float) -> list[float]:
    """Max-min fair rates (progressive filling) of copies each through the throttles listed, every throttle carrying
    at most ``capacity`` bytes/s."""
    rate = [0.0] * len(flows)
    members: dict[Throttled, list[int]] = {}
    for i, ts in enumerate(flows):
        for t in ts:
            members.setdefault(t, []).append(i)
    room = dict.fromkeys(members, capacity)
    active = set(range(len(flows)))
    while active:
        share = min(room[t] / n for t, ms in members.items() if (n := sum(1 for i in ms if i in active)))
        for i in active:
            rate[i] += share
        full: set[int] = set()
        for t, ms in members.items():
            n = sum(1 for i in ms if i in active)
            if n:
                room[t] -= share * n
                if room[t] <= 1e-9 * capacity:
                    full.update(ms)
        active -= full
    return rate


@dataclass
class Simulation(Generic[Step]):
    makespan: float                                   # seconds from the first start to the last finish
    starts: list[tuple[float, Step]] = field(default_factory=list)
    finishes: list[tuple[float, Step]] = field(default_factory=list)
    peak_in_flight: dict[int, int] = field(default_factory=dict)   # broker -> most moves in flight at once
    stuck: str | None = None  # why the schedule stopped with steps left (no disk room anywhere they go)


class Copies(Generic[Step]):
    """The copies in flight: per step, each (throttles, bytes left) of its new replicas."""

    def __init__(self) -> None:
        self.left: dict[Step, list[tuple[tuple[Throttled, ...], float]]] = {}

    def add(self, s: Step) -> None:
        self.left[s] = [(((b, "in"), (s.before[0], "out")), float(s.size_bytes)) for b in s.added]

    def advance(self, throttle: float, until: float = float("inf")) -> tuple[float, list[Step]]:
        """Run until the next copy ends, or ``until`` seconds: (seconds, the steps whose every copy ended)."""
        flat = [(s, k, ts, x) for s, cs in self.left.items() for k, (ts, x) in enumerate(cs)]
        rates = fair_rates([ts for _, _, ts, _ in flat], throttle)
        dt = min(until, min(x / r for (_, _, _, x), r in zip(flat, rates, strict=True) if r > 0))
        for (s, k, ts, x), r in zip(flat, rates, strict=True):
            rest = x - r * dt
            self.left[s][k] = (ts, 0.0 if rest <= 1e-6 * max(1.0, x) else rest)
        done = [s for s, cs in self.left.items() if all(x == 0.0 for _, x in cs)]
        for s in done:
            del self.left[s]
        return dt, sorted(done, key=lambda s: (s.topic, s.partition, s.seq))


def simulate_batches(batches: Iterable[Iterable[Step]], throttle: float) -> Simulation[Step]:
    """Batches one after another in the same model: each starts when the previous one's slowest move ends."""
    sim: Simulation[Step] = Simulation(0.0)
    now = 0.0
    for batch in batches:
        copies: Copies[Step] = Copies()
        for s in batch:
            if not s.leader_only:
                copies.add(s)
                sim.starts.append((now, s))
        while copies.left:
            dt, done = copies.advance(throttle)
            now += dt
            sim.finishes.extend((now, s) for s in done)
    sim.makespan = now
    return sim
