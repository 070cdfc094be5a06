"""One time limit for the whole plan stage (``--time-limit``), shared out among its phases.

The limit is a deadline ``limit`` seconds after the stage started; loading the snapshot counts. The stage runs in
phases, in order, each inside ``Budget.phase``::

    load      read the snapshot (plan_run_dir)                 cannot be interrupted: measured
    targets   bands, lower bounds, feasibility                 cannot be interrupted: nothing is planned without them
    greedy    placement, move by move                          stops between two moves
    lp        the 0/1 program, topic group by topic group      stops between groups; HiGHS gets the group's share
    leaders   the exact leader flow, topic group by group      stops between groups (one group is not interrupted)
    summary   before/after, bounds, hash                       cannot be interrupted: measured

A phase that can stop gets a *share* of the time still left when it starts (less a ``reserve`` kept for the phases
after it), so an early phase never starves the later ones and time it leaves unused passes on. It receives a
``Deadline`` and asks it at cheap checkpoints (``expired()``, or ``allows(seconds)`` before a step of known pace);
a "stop" answer marks the deadline ``cut_short``. The phase then leaves its remaining work undone in a way that keeps
the plan valid (partitions it did not reach stay as they are). A phase that cannot stop gets the whole deadline and
is only measured.

``Budget.to_dict()`` is what the plan records (``plan.solver["budget"]``): per phase the seconds spent, the seconds
allotted (None: not interruptible) and whether it was cut short; ``expired_in``, the first phase that was cut short or
ended past the deadline; the stage's seconds and how far past the limit it ended. The clock is injectable, so tests
drive it by hand.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Clock", "Deadline", "PhaseRecord", "Budget", "default_time_limit", "DEFAULT_MIN_SECONDS",
           "SECONDS_PER_REPLICA", "CHECK_EVERY"]

Clock = Callable[[], float]

# The limit when none is given: generous, so that no cluster the benchmarks cover is cut short (600k replicas plan in
# minutes on 2 cores), and growing with the cluster above that; a limit is for operators who want an answer sooner.
DEFAULT_MIN_SECONDS = 300.0
SECONDS_PER_REPLICA = 0.001
# The local searches (greedy, load greedy, the leader hand-overs) ask their deadline every so many steps, the first
# included: a step costs far more than reading the clock, and a search stops within that many steps of its deadline.
CHECK_EVERY = 32


def default_time_limit(replicas: int) -> float:
    """The plan stage's time limit when none is given: 5 minutes, or 1 s per 1,000 replicas when that is more
    (600k replicas: 10 minutes; 3M: 50 minutes)."""
    return max(DEFAULT_MIN_SECONDS, replicas * SECONDS_PER_REPLICA)


class Deadline:
    """A moment on a monotonic clock that one phase must stop by. Its checkpoints decide; reading does not.

    ``expired()`` and ``allows(seconds)`` are checkpoints: when they say stop, the deadline remembers it
    (``cut_short``), because the phase is about to leave work undone. ``remaining()`` only reads.
    """

    __slots__ = ("ends", "clock", "cut_short")

    def __init__(self, ends: float, clock: Clock = time.monotonic) -> None:
        self.ends = ends
        self.clock = clock
        self.cut_short = False

    @classmethod
    def never(cls) -> Deadline:
        """No limit (for calling a phase on its own, outside a plan stage)."""
        return cls(math.inf)

    def remaining(self) -> float:
        return max(0.0, self.ends - self.clock())

    def allows(self, seconds: float) -> bool:
        """Checkpoint: is there time for ``seconds`` more work? No marks the phase cut short."""
        if self.clock() + seconds < self.ends:
            return True
        self.cut_short = True
        return False

    def expired(self) -> bool:
        """Checkpoint: has the time run out? Yes marks the phase cut short."""
        return not self.allows(0.0)


@dataclass(frozen=True)
class PhaseRecord:
    seconds: float
    allotted: float | None  # None: the phase cannot be interrupted (it is measured, not stopped)
    cut_short: bool

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3),
                "allotted": None if self.allotted is None else round(self.allotted, 3),
                "cut_short": self.cut_short}


class Budget:
    """The plan stage's deadline (``limit`` seconds from now) and the record of its phases, in order."""

    def __init__(self, limit: float, *, clock: Clock = time.monotonic) -> None:
        """``limit`` may be ``math.inf`` until ``set_limit`` fixes it."""
        if not limit > 0:
            raise ValueError(f"the time limit must be positive, not {limit!r}")
        self.limit = float(limit)
        self.clock = clock
        self.started = clock()
        self.deadline = Deadline(self.started + self.limit, clock)
        self.phases: dict[str, PhaseRecord] = {}
        self.expired_in: str | None = None
        self._ended = self.started

    def set_limit(self, limit: float) -> None:
        """Fix the limit (from the stage's start) once the problem's size is known: before any phase that can stop
        (``plan_run_dir`` reads the snapshot first when no limit was given)."""
        if not limit > 0 or not math.isfinite(limit):
            raise ValueError(f"the time limit must be positive, not {limit!r}")
        self.limit = float(limit)
        self.deadline = Deadline(self.started + self.limit, self.clock)

    def remaining(self) -> float:
        return self.deadline.remaining()

    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def cut_short(self) -> list[str]:
        """The phases that stopped early, in order."""
        return [name for name, rec in self.phases.items() if rec.cut_short]

    @contextmanager
    def phase(self, name: str, share: float | None = None, reserve: float = 0.0) -> Iterator[Deadline]:
        """Run one phase. ``share``: the fraction of the time left, less ``reserve`` seconds kept for the phases after
        it, that this phase may use; ``None``: the phase cannot be interrupted (it gets the whole deadline)."""
        start = self.clock()
        if share is None:
            allotted = None
            deadline = Deadline(self.deadline.ends, self.clock)
        else:
            allotted = share * max(0.0, self.deadline.ends - start - reserve)
            deadline = Deadline(min(self.deadline.ends, start + allotted), self.clock)
        try:
            yield deadline
        finally:
            end = self.clock()
            self._ended = end
            self.phases[name] = PhaseRecord(end - start, allotted, deadline.cut_short)
            if self.expired_in is None and (deadline.cut_short or end >= self.deadline.ends):
                self.expired_in = name

    def to_dict(self) -> dict[str, Any]:
        seconds = self._ended - self.started
        return {"limit": self.limit, "seconds": round(seconds, 3), "over_by": round(max(0.0, seconds - self.limit), 3),
                "expired_in": self.expired_in, "phases": {name: rec.to_dict() for name, rec in self.phases.items()}}
