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

The 0/1 programs are limited in *work* as well (``Work``, ``Budget.work``): HiGHS's LP iterations, the same on any
machine, with a fixed charge per program for what its iterations do not count. The limit is ``WORK_SHARE`` of the time
limit at ``ITERATIONS_PER_SECOND``: on a quiet machine the programs end by their work in about that share of the time,
so a machine half as fast still ends there and plans the same (the deadline stays, as a safety net that says when it
cut). The searches that run programs in rounds (the neighbourhoods, the relaxation's trims) start no program once the
work is spent; ``Work.stopped_in`` names the first phase that left one unrun for it.

``Budget.to_dict()`` is what the plan records (``plan.solver["budget"]``): per phase the seconds spent, the seconds
allotted (None: not interruptible) and whether it was cut short; ``expired_in``, the first phase that was cut short or
ended past the deadline; the stage's seconds and how far past the limit it ended. The clock is injectable, so tests
drive it by hand.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Clock", "Deadline", "PhaseRecord", "Budget", "Work", "default_time_limit", "DEFAULT_MIN_SECONDS",
           "SECONDS_PER_REPLICA", "CHECK_EVERY", "ITERATIONS_PER_SECOND", "PROGRAM_ITERATIONS", "VARIABLES_PER_ITERATION",
           "WORK_SHARE"]

Clock = Callable[[], float]

# The limit when none is given: generous, so that no cluster the benchmarks cover is cut short (600k replicas plan in
# minutes on 2 cores), and growing with the cluster above that; a limit is for operators who want an answer sooner.
# 10 minutes: the programs' work limit (``WORK_SHARE`` of it, 1.5M LP iterations) is then what the heaviest small
# clusters of the fuzz benchmark do in 3-4 minutes here (seeds 61, 144: 1.1M, all they ask; 157: stopped at it);
# at 5 minutes the phases' clocks ended 157 instead, and the plan depended on how busy the machine was.
DEFAULT_MIN_SECONDS = 600.0
SECONDS_PER_REPLICA = 0.001
# The local searches (greedy, load greedy, the leader hand-overs) ask their deadline every so many steps, the first
# included: a step costs far more than reading the clock, and a search stops within that many steps of its deadline.
CHECK_EVERY = 32
# The programs' work limit (``Work``): HiGHS's LP iterations on one thread, 4,600-14,000 a second on the neighbourhood
# programs of fuzz small seeds 61, 144 and 157 here (1,000-3,100 variables); each program is charged
# ``PROGRAM_ITERATIONS`` more for building it, handing it to HiGHS, presolve and the root's cuts (1-3 s each there).
ITERATIONS_PER_SECOND = 5_000
PROGRAM_ITERATIONS = 7_500
# An iteration costs more on a larger program (the simplex prices every column): 2,600-3,100 a second on the exact
# ladder of fuzz small seed 167 (10,064 variables), against 6,000-15,000 on neighbourhood programs of 500-2,000.
# A program past ``VARIABLES_PER_ITERATION`` variables (above the programs the rate above was measured on) is
# charged its iterations x sqrt(variables / it), which brings that ladder to the same rate; below, as they come.
VARIABLES_PER_ITERATION = 4_000
WORK_SHARE = 0.5  # of the time limit: a machine half as fast as a quiet one still ends by the work, not the clock


def default_time_limit(replicas: int) -> float:
    """The plan stage's time limit when none is given: 10 minutes, or 1 s per 1,000 replicas when that is more
    (3M replicas: 50 minutes)."""
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


class Work:
    """The plan's programs' work limit: LP iterations, spent by ``charge`` (a solve's ``lp_iterations``, scaled up
    on a large program, plus ``PROGRAM_ITERATIONS``), asked by ``allows`` before a program a search may leave unrun.
    Unlike a deadline it reads no clock: the same snapshot and options spend it the same way on any machine."""

    __slots__ = ("limit", "spent", "programs", "last", "cap", "phase", "stopped_in")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.spent = 0
        self.programs = 0
        self.last = 0  # the last program's charge: what a search's next program of its kind is expected to take
        self.cap = math.inf  # what a phase may spend up to (``share``), under the limit
        self.phase: str | None = None  # the budget's phase running (``Budget.phase`` sets it)
        self.stopped_in: str | None = None

    @classmethod
    def of_seconds(cls, seconds: float) -> Work:
        """The work a quiet machine does in ``WORK_SHARE`` of ``seconds`` (inf: no limit)."""
        return cls(seconds * WORK_SHARE * ITERATIONS_PER_SECOND)

    @staticmethod
    def iterations(stats: Mapping[str, Any]) -> int:
        """A solved program's LP iterations (``highs.SolveResult``), scaled by its size past
        ``VARIABLES_PER_ITERATION`` variables (``stats["variables"]``): what ``charge`` counts, less the fixed
        charge."""
        scale = math.sqrt(max(1.0, (stats.get("variables") or 0) / VARIABLES_PER_ITERATION))
        return int((stats.get("lp_iterations") or 0) * scale)

    def charge(self, stats: Mapping[str, Any]) -> None:
        """One program solved: its ``iterations`` and the fixed charge."""
        self.last = self.iterations(stats) + PROGRAM_ITERATIONS
        self.spent += self.last
        self.programs += 1

    def left(self) -> float:
        """What the programs may still spend (the limit, or the phase's share when lower)."""
        return max(0.0, min(self.limit, self.cap) - self.spent)

    def allows(self, expected: float = 0.0) -> bool:
        """Checkpoint: may another program run, one expected to take ``expected`` (a search whose programs are alike
        passes ``last``: a program started just short of the limit would overrun it by a whole program, and
        a long one then ends by the phase's clock)? No records the phase running as where the work ran out (the
        first phase it said no in)."""
        if self.spent + expected < min(self.limit, self.cap):
            return True
        self.stopped_in = self.stopped_in or self.phase or "the plan stage"
        return False

    @contextmanager
    def share(self, fraction: float) -> Iterator[None]:
        """Within: the programs may spend ``fraction`` of the limit more, no further (a phase's share of the work,
        as it has a share of the time: work its clock could not finish on a machine half as fast is not started)."""
        outer, self.cap = self.cap, min(self.cap, self.spent + fraction * self.limit)
        try:
            yield
        finally:
            self.cap = outer

    def to_dict(self) -> dict[str, Any]:
        return {"limit": None if math.isinf(self.limit) else int(self.limit), "spent": self.spent,
                "programs": self.programs, "stopped_in": self.stopped_in}


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
        self.work = Work.of_seconds(self.limit)
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
        self.work = Work.of_seconds(self.limit)

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
        outer, self.work.phase = self.work.phase, name
        try:
            yield deadline
        finally:
            self.work.phase = outer
            end = self.clock()
            self._ended = end
            self.phases[name] = PhaseRecord(end - start, allotted, deadline.cut_short)
            if self.expired_in is None and (deadline.cut_short or end >= self.deadline.ends):
                self.expired_in = name

    def to_dict(self) -> dict[str, Any]:
        seconds = self._ended - self.started
        return {"limit": self.limit, "seconds": round(seconds, 3), "over_by": round(max(0.0, seconds - self.limit), 3),
                "expired_in": self.expired_in, "work": self.work.to_dict(),
                "phases": {name: rec.to_dict() for name, rec in self.phases.items()}}
