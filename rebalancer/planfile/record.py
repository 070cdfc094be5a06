"""What the plan stage did, as a typed, frozen record: ``SolverRecord``, the ``solver`` of a ``Plan``.

Its typed fields are what code reads to decide: ``state`` (a ``PlanState``), ``cut_in`` (the phase the time limit ran
out in, None when it did not), ``cut_short`` (every phase it cut), ``placement_used`` and ``seconds``. ``status`` is
the line people read ("Time limit reached in lp (cut short: lp); moves/bound 1.2, ..."); nothing decides on its
words. Each step's own record (``greedy``, ``lp``, ``leaders``, ``bands_proof``, ``budget``, ...) stays as the step
wrote it, in ``details``.

It is a read-only mapping too, over exactly the keys ``plan.json`` has always had under ``"solver"`` plus ``state``
and ``cut_in``: a reader of an older file still reads it, and ``from_dict`` reads an older file (one written before
``state`` existed gets its state from the first words of its status, the only place that file kept it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

__all__ = ["PlanState", "SolverRecord", "STATES"]

# Optimal: proven (the leader flow, a count program solved to optimality); Feasible: a program's solution, not proven
# optimal; Balanced: every broker inside every band and gate the plan aims at; Heuristic: some broker left outside
# (``outside_bands`` says which, ``outside_why`` why); Time limit reached: the time limit cut a phase short.
PlanState = Literal["Optimal", "Feasible", "Balanced", "Heuristic", "Time limit reached"]
STATES: tuple[str, ...] = get_args(PlanState)
_TYPED = ("state", "status", "cut_in", "placement_used", "seconds")


@dataclass(frozen=True)
class SolverRecord(Mapping[str, Any]):
    state: PlanState
    status: str
    cut_in: str | None = None
    cut_short: tuple[str, ...] = ()
    placement_used: str | None = None        # set where a placement other than the strategy's own was kept
    seconds: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SolverRecord:
        """The record of a ``plan.json``'s ``solver`` object (or of a step's dict while planning)."""
        status = str(doc.get("status") or "")
        state = doc.get("state")
        if state not in STATES:
            state = next((s for s in STATES if status.startswith(s)), "Heuristic")
        state = cast(PlanState, state)
        budget = doc.get("budget") or {}
        phases = budget.get("phases") or {}
        cut = tuple(name for name, rec in phases.items() if isinstance(rec, Mapping) and rec.get("cut_short"))
        seconds = doc.get("seconds")
        return cls(state=state, status=status, cut_in=doc.get("cut_in", budget.get("expired_in")), cut_short=cut,
                   placement_used=doc.get("placement_used"),
                   seconds=None if seconds is None else float(seconds),
                   details={k: v for k, v in doc.items() if k not in _TYPED})

    def to_dict(self) -> dict[str, Any]:
        """``plan.json``'s ``solver``: the keys it has always had, ``state`` and ``cut_in`` beside them."""
        out: dict[str, Any] = {"state": self.state, "status": self.status, "cut_in": self.cut_in}
        if self.placement_used is not None:
            out["placement_used"] = self.placement_used
        if self.seconds is not None:
            out["seconds"] = self.seconds
        return {**out, **self.details}

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())
