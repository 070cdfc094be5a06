"""How long executing a plan takes at a throttle: the physical bound and the expected duration (issue 43).

The throttle caps each broker's replication traffic in (``follower.replication.throttled.rate``: the new replicas it
fetches) and out (``leader.replication.throttled.rate``: what it serves as the partition's leader), so no order of
moves ends before the busiest broker has received, or sent, all of its bytes:

    bound = max over brokers b of max(bytes into b, bytes out of b) / throttle

Bytes into b: the size of every replica a step adds on b. Bytes out of b: the size of every replica added by a step
whose source is b, the step's first replica (the leader the new replicas fetch from, as ``Step.brokers`` counts it).
A change that adds k replicas is k steps (``steps_of``), so a replica added by an earlier step of a partition can be
the source of a later one.

Expected: the executor submits batches (``make_batches`` with the run's caps) one after another, each waiting for its
slowest move, so it cannot beat the sum over batches of each batch's own bound (the floor). Within a batch the moves
share their brokers' throttles, which the floor does not see: the batches run in the fluid model of the throttles
(``fluid.simulate_batches``: each throttle's rate shared max-min fairly among the copies through it), 1-4 % above
the floor on the heavy-tailed bench plans; above ``MODEL_STEPS`` steps (about 6 s of modelling, beside the plan's
own minutes) the floor stands in for it. Real Kafka's quota lets a copy run at ``RATE_FACTOR`` of that (1.08-1.18x
measured by ``bench/bench_execute.py --real``), and each batch costs ``BATCH_OVERHEAD_S`` on top (seeing it done at
the poll interval, the preferred-leader election, the next batch's submit and state writes). Leader-only batches
copy nothing and cost only the overhead.

Rolling (``schedule="rolling"``, ``execute --schedule rolling``): no batches to wait for, but the executor's loop
between a finish and the moves it lets start: seen half a poll late on average (``POLL_S``), then a round of
starts' Admin API calls (``START_COST_S``) before they copy. ``schedule.simulate`` runs the rolling schedule with that
loop at the real copy rate (the throttle / ``RATE_FACTOR``); one election at the end (``BATCH_OVERHEAD_S``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .batches import PER_BROKER, TOTAL, Step, Throttled, batch_floor, make_batches, step_loads, steps_of
from .fluid import Simulation, simulate_batches
from .schedule import ROLLING_PER_BROKER, DiskRoom, per_broker_of, simulate

__all__ = ["DEFAULT_THROTTLE", "ExecutionEstimate", "estimate", "batch_cost", "transfer", "describe", "duration", "rate"]

DEFAULT_THROTTLE = "50MB/s"  # the throttle an estimate assumes when none is given (execute's default)
RATE_FACTOR = 1.1        # a throttled copy on real Kafka takes 1.08-1.18x its bytes / throttle (bench_execute --real)
BATCH_OVERHEAD_S = 3.0   # per batch: the poll that sees it done, the election, the next submit (about 1 + 1 + 1 s)
MODEL_STEPS = 20_000     # the most steps run through the fluid model (11,000 take about 3 s)
POLL_S = 1.0             # the executor's poll (``ExecOptions.poll``'s default: one of BATCH_OVERHEAD_S) ...
START_COST_S = 0.75      # ... rolling: a round of starts' Admin API calls (0.5-1 s measured, most of it DescribeConfigs)
SCHEDULES = ("batches", "rolling")  # what an estimate models (an execution may ask for "auto": ``strategies``)


@dataclass(frozen=True)
class ExecutionEstimate:
    throttle_bytes_per_s: int
    bound_seconds: float          # no order of the moves finishes sooner
    bound_broker: int | None      # the broker that sets it (None: nothing to copy)
    bound_direction: str          # "in" (it receives bound_bytes) or "out" (it sends them)
    bound_bytes: int
    batch_floor_seconds: float    # the sum over the executor's batches of each batch's own bound
    expected_seconds: float       # what the executor is expected to take: the modelled batches, the quota, the
                                  # overheads
    batches: int
    moves: int
    per_broker: int = PER_BROKER  # the caps the batches were made with (the validation's transient-disk gate reads
    total: int = TOTAL            # them: the executor batches the same way)
    modelled_seconds: float = 0.0  # the schedule in the fluid model of the throttles (``fluid.simulate_batches``,
                                   # ``schedule.simulate``), no overheads
    schedule: str = "batches"     # the schedule estimated: "batches" or "rolling" (batches: its rounds of starts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def transfer(steps: Iterable[Step]) -> dict[int, tuple[int, int]]:
    """Bytes each broker receives and sends over these steps (``batches.step_loads``): broker -> (in, out)."""
    held: dict[Throttled, int] = {}
    for s in steps:
        for t, x in step_loads(s).items():
            held[t] = held.get(t, 0) + x
    return {b: (held.get((b, "in"), 0), held.get((b, "out"), 0)) for b in sorted({b for b, _ in held})}


def _busiest(steps: Iterable[Step]) -> tuple[int | None, str, int]:
    per = transfer(steps)
    if not per:
        return None, "in", 0
    b = max(per, key=lambda k: (max(per[k]), per[k][0] >= per[k][1], -k))
    into, out = per[b]
    return b, ("in" if into >= out else "out"), max(into, out)


def batch_cost(throttle: float, poll: float = POLL_S) -> int:
    """The bytes one more batch costs at ``throttle``: what the throttle copies (at the real copy rate,
    ``RATE_FACTOR``) in the time ``estimate`` adds per batch, so a batch split in two (``batches.untangle``) where
    its halves copy faster by more is expected to end sooner."""
    return int(throttle * _batch_seconds(poll) / RATE_FACTOR)


def _batch_seconds(poll: float) -> float:
    """What each batch adds to the expected time with the executor polling every ``poll`` s."""
    return BATCH_OVERHEAD_S - POLL_S + poll


def estimate(changes: Iterable[Any], throttle: int, *, schedule: str = "batches", per_broker: int | None = None,
             total: int = TOTAL, max_bytes: int | None = None, order: str = "bound",
             poll: float = POLL_S) -> ExecutionEstimate:
    """The bound and the expected duration of executing ``changes`` (objects with ``topic``, ``partition``,
    ``replicas_before``, ``replicas_after``, ``size_bytes``: a plan's) at ``throttle`` bytes/s per broker, with the
    executor's schedule, caps and poll (``ExecOptions``' schedule, per_broker (None: the schedule's default), total,
    max_batch_bytes, order, poll)."""
    if throttle < 1:
        raise ValueError("throttle must be at least 1 byte/s")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {schedule!r}")
    steps = [s for c in changes
             for s in steps_of(c.topic, c.partition, tuple(c.replicas_before), tuple(c.replicas_after), c.size_bytes)]
    broker, direction, most = _busiest(steps)
    if schedule == "rolling":
        return _rolling(steps, throttle, per_broker_of(schedule, per_broker), total, (broker, direction, most), poll)
    per_broker = per_broker_of(schedule, per_broker)
    batches = make_batches(steps, per_broker=per_broker, total=total, max_bytes=max_bytes, order=order,
                           batch_cost=batch_cost(throttle, poll))
    floor = batch_floor(batches) / throttle
    modelled = max(floor, simulate_batches(batches, float(throttle)).makespan if len(steps) <= MODEL_STEPS else 0.0)
    expected = modelled * RATE_FACTOR + _batch_seconds(poll) * len(batches)
    return ExecutionEstimate(throttle, most / throttle, broker, direction, most, round(floor, 3),
                             round(expected, 3), len(batches), len(steps), per_broker, total,
                             round(modelled, 3))


def rolling_run(steps: Iterable[Step], throttle: int, per_broker: int = ROLLING_PER_BROKER, total: int = TOTAL,
                poll: float = POLL_S, room: DiskRoom | None = None) -> Simulation[Step]:
    """The rolling schedule as the executor is expected to run it: its fluid model at the rate a real copy runs
    (the throttle / ``RATE_FACTOR``) with the executor's loop (``poll``, ``START_COST_S``), moves waiting for disk
    room (``room``) as the executor's do."""
    return simulate(steps, throttle / RATE_FACTOR, per_broker=per_broker, total=total, poll=poll,
                    start_cost=START_COST_S, room=room)


def _rolling(steps: list[Step], throttle: int, per_broker: int, total: int,
             busiest: tuple[int | None, str, int], poll: float) -> ExecutionEstimate:
    """The rolling schedule's estimate: its fluid model (``schedule.simulate``) at the rate a real copy runs
    (``RATE_FACTOR``) with the executor's loop (``POLL_S``, ``START_COST_S``), then one election at the end
    (``BATCH_OVERHEAD_S``). Its "batches" are its rounds of starts, as ``execution/state.json`` records them; above
    ``MODEL_STEPS`` steps the bound at that rate stands in for the model."""
    broker, direction, most = busiest
    moving = [s for s in steps if not s.leader_only]
    if len(moving) <= MODEL_STEPS:
        modelled = simulate(moving, float(throttle), per_broker=per_broker, total=total).makespan
        sim = rolling_run(moving, throttle, per_broker, total, poll)
        rounds, copying = len({t for t, _ in sim.starts}), sim.makespan
    else:
        modelled, rounds, copying = most / throttle, len(moving), most / throttle * RATE_FACTOR
    expected = copying + BATCH_OVERHEAD_S - POLL_S + poll
    return ExecutionEstimate(throttle, most / throttle, broker, direction, most, round(most / throttle, 3),
                             round(expected, 3), rounds, len(steps), per_broker, total, round(modelled, 3),
                             schedule="rolling")


def duration(seconds: float) -> str:
    """``42 s``, ``22 min``, ``3 h 05 min``."""
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def rate(bytes_per_s: int) -> str:
    """A throttle as an operator typed it: ``50 MB/s``, ``20 MiB/s``, else bytes/s."""
    for unit, size in (("GB", 10**9), ("GiB", 2**30), ("MB", 10**6), ("MiB", 2**20), ("kB", 10**3), ("KiB", 2**10)):
        if bytes_per_s >= size and bytes_per_s % size == 0:
            return f"{bytes_per_s // size} {unit}/s"
    return f"{bytes_per_s} B/s"


def describe(e: ExecutionEstimate | dict[str, Any]) -> str:
    """One line: ``at 50 MB/s: at least 22 min, broker 17 receives 61.5 GiB; expected 24 min (31 batches)``."""
    from ..balance import human_bytes

    d = e.to_dict() if isinstance(e, ExecutionEstimate) else e
    if d.get("bound_broker") is None:
        return f"at {rate(int(d['throttle_bytes_per_s']))}: nothing to copy; expected {duration(d['expected_seconds'])}"
    verb = "receives" if d["bound_direction"] == "in" else "sends"
    return (f"at {rate(int(d['throttle_bytes_per_s']))}: at least {duration(d['bound_seconds'])}, broker "
            f"{d['bound_broker']} {verb} {human_bytes(d['bound_bytes'])}; expected {duration(d['expected_seconds'])} "
            + ("(rolling)" if d.get("schedule") == "rolling" else
               f"({d['batches']} batch{'' if d['batches'] == 1 else 'es'})"))
