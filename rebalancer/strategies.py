"""The planning choices, in one registry: the modes, the strategies and the balances; the CLI's choices, the DAG
params and the planner all read it.

Each strategy names the modes it serves; ``auto`` serves every mode and picks one of the others (see
``rebalancer.plan.planner.choose_strategy``). Balances say what a replica mode evens out. Kept free of heavy imports:
the CLI parser and the DAG files read it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Strategy", "STRATEGY_REGISTRY", "STRATEGIES", "BALANCES", "MODES", "REPLICA_MODES", "strategies_for"]

REPLICA_MODES = ("rebalance", "add-brokers", "remove-brokers")
MODES = ("leaders", *REPLICA_MODES)  # what a plan may do: move leaders only, or replicas (and leaders)


@dataclass(frozen=True)
class Strategy:
    name: str
    modes: tuple[str, ...]
    description: str


STRATEGY_REGISTRY: dict[str, Strategy] = {s.name: s for s in (
    Strategy("auto", MODES,
             "flow for leaders; for load: the greedy placement, then the 0/1 program where greedy stays above the "
             "bytes bound on a small cluster; for counts: the program up to 20,000 replicas, greedy above"),
    Strategy("flow", ("leaders",), "exact min-cost flow over the replica sets (leaders only)"),
    Strategy("pinterest", ("leaders",), "Pinterest's max-flow-min-cost with residue nodes (leaders only)"),
    Strategy("lp", REPLICA_MODES, "0/1 program (HiGHS), decomposed by topic groups, warm-started from greedy"),
    Strategy("greedy", REPLICA_MODES, "near-linear greedy moves, measured against the lower bounds"),
)}
STRATEGIES = tuple(STRATEGY_REGISTRY)

BALANCES = {
    "auto": "load when the snapshot has partition sizes, else counts",
    "load": "disk, network in and out (utilisation of each broker's capacity), then replica and leader counts, "
            "with the fewest bytes moved",
    "counts": "replica and leader counts only, with the fewest replicas (or bytes) moved",
}


def strategies_for(mode: str) -> list[str]:
    return [s.name for s in STRATEGY_REGISTRY.values() if mode in s.modes]
