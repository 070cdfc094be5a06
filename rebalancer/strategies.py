"""The planning choices, in one registry: the modes, the strategies and the balances; the CLI's choices, the DAG
params and the planner all read it, and the plan stage dispatches through it. The execution's schedules too
(``EXECUTION_SCHEDULES``, ``resolve_schedule``): the plan's estimate assumes one, the DAG form offers them.

Each strategy names the modes it serves and its step: a callable of one signature, ``(PlanRequest, PlanSetup,
Budget, reserve) -> Placement`` (``rebalancer.plan.pipeline``), that the plan stage calls for the strategy asked
for. ``auto`` serves every mode: ``rebalancer.plan.planner.choose_strategy`` picks one of the others (and says why),
and auto's step runs that one's step the way auto runs it. Adding a strategy is one new ``Strategy`` here. A step is
named as ``module:function`` and imported when first called: the CLI parser and the DAG files read the registry at
start-up and must not load the planner. Balances say what a replica mode evens out.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .options import option

__all__ = ["Strategy", "Step", "STRATEGY_REGISTRY", "STRATEGIES", "BALANCES", "MODES", "REPLICA_MODES",
           "strategies_for", "EXECUTION_SCHEDULES", "DEFAULT_SCHEDULE", "resolve_schedule",
           "schedule_option"]

REPLICA_MODES = ("rebalance", "add-brokers", "remove-brokers")
MODES = ("leaders", *REPLICA_MODES)  # what a plan may do: move leaders only, or replicas (and leaders)

# a strategy's step, ``(PlanRequest, PlanSetup, Budget, reserve) -> Placement``: typed where those live
# (``plan.pipeline.Step``), so this registry, below the plan stage, names none of them
Step = Callable[..., Any]


@dataclass(frozen=True)
class Strategy:
    """A planning strategy: its name, the modes it serves, what it does (the CLI's and the DAG form's words), and its
    step (``run``: ``module:function``)."""

    name: str
    modes: tuple[str, ...]
    description: str
    run: str

    def step(self) -> Step:
        """The strategy's step, imported on first use."""
        module, _, name = self.run.partition(":")
        step: Step = getattr(importlib.import_module(module), name)
        return step


STRATEGY_REGISTRY: dict[str, Strategy] = {s.name: s for s in (
    Strategy("auto", MODES,
             "flow for leaders; for load: the greedy placement, then the 0/1 program where greedy stays above the "
             "bytes bound on a small cluster; for counts: the program up to 20,000 replicas, greedy above",
             "rebalancer.plan.planner:place_auto"),
    Strategy("flow", ("leaders",), "exact min-cost flow over the replica sets (leaders only)",
             "rebalancer.plan.leader_pass:lead_by_flow"),
    Strategy("pinterest", ("leaders",), "Pinterest's max-flow-min-cost with residue nodes (leaders only)",
             "rebalancer.plan.leader_pass:lead_by_pinterest"),
    Strategy("lp", REPLICA_MODES, "0/1 program (HiGHS), decomposed by topic groups, warm-started from greedy",
             "rebalancer.plan.planner:place_lp"),
    Strategy("greedy", REPLICA_MODES, "near-linear greedy moves, measured against the lower bounds",
             "rebalancer.plan.planner:place_greedy"),
)}
STRATEGIES = tuple(STRATEGY_REGISTRY)  # the names as the registry stood at import (read the registry for choices)

BALANCES = {
    "auto": "load when the snapshot has partition sizes, else counts",
    "load": "disk, network in and out (utilisation of each broker's capacity), then replica and leader counts, "
            "with the fewest bytes moved",
    "counts": "replica and leader counts only, with the fewest replicas (or bytes) moved",
}


def strategies_for(mode: str) -> list[str]:
    return [s.name for s in STRATEGY_REGISTRY.values() if mode in s.modes]


# How an execution orders its moves (``rebalancer.execute``): "batches", each batch after the previous one's slowest
# move; "rolling", a move starts as soon as its brokers have room (only where moves can be added to those in flight:
# the Admin API); "auto", the default: rolling where it can run, batches otherwise.
EXECUTION_SCHEDULES = ("auto", "rolling", "batches")
DEFAULT_SCHEDULE = "auto"


def resolve_schedule(schedule: str, adds_moves: bool) -> str:
    """The schedule ``schedule`` means on a cluster reached through an access that can (``adds_moves``: the Admin API,
    kafka://) or cannot (ZooKeeper) add moves to those in flight: ``auto`` is rolling on the first and batches on the
    second; any other is itself. The one place ``auto`` is decided: the executor asks its backend, the plan's
    estimate the snapshot's source, the DAGs their connection."""
    if schedule == "auto":
        return "rolling" if adds_moves else "batches"
    return schedule


def schedule_option() -> Any:
    """The execution's schedule as an option (``rebalancer.options``): the execution's and the plan estimate's."""
    return option(DEFAULT_SCHEDULE, choices=EXECUTION_SCHEDULES, param="execution_schedule",
                  help="auto: rolling where the source can add moves to those in flight (kafka://), batches "
                       "otherwise (zk://); batches: each batch after the previous one's slowest move; rolling: a "
                       "move starts as soon as its brokers have room (kafka:// only)",
                  title="Execution schedule", section="Execution")
