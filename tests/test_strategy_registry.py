"""The strategy registry dispatches: every strategy's step resolves, the plan stage calls the step of the strategy
asked for, and a strategy added as one ``Strategy`` object is planned with, offered by the CLI and checked for its
modes (issue 44, Deliver 4)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from rebalancer import strategies
from rebalancer.cli import build_parser
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan import PlanError, make_plan
from rebalancer.plan.pipeline import Placement, PlanRequest, PlanSetup
from rebalancer.strategies import REPLICA_MODES, STRATEGY_REGISTRY, Strategy


def _cluster() -> Cluster:
    brokers = [Broker(i, rack=f"r{i}") for i in range(4)]
    parts = [Partition("t", i, (i % 2, (i + 1) % 2), i % 2, (i % 2, (i + 1) % 2), 100) for i in range(8)]
    return Cluster.build(brokers, parts)


@pytest.mark.parametrize("name", list(STRATEGY_REGISTRY))
def test_every_strategy_step_resolves_to_a_callable(name: str) -> None:
    step = STRATEGY_REGISTRY[name].step()
    assert callable(step)
    assert step.__name__ == STRATEGY_REGISTRY[name].run.partition(":")[2]


def test_a_strategy_added_to_the_registry_is_planned_with(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str, float]] = []

    def one_move(req: PlanRequest, setup: PlanSetup, budget: Any, reserve: float) -> Placement:
        calls.append((req.strategy, setup.strategy, reserve))
        return Placement({("t", 0): (0, 2)}, "one-move")

    module = types.ModuleType("registry_test_strategy")
    module.one_move = one_move  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "registry_test_strategy", module)
    monkeypatch.setitem(STRATEGY_REGISTRY, "one-move",
                        Strategy("one-move", REPLICA_MODES, "moves t-0's follower to broker 2",
                                 "registry_test_strategy:one_move"))

    plan = make_plan(_cluster(), "rebalance", strategy="one-move", balance="counts")
    assert calls and calls[0][:2] == ("one-move", "one-move")
    assert plan.strategy == "one-move"
    # the step's placement is the plan's (the leader flow after it may reorder the replicas)
    assert [(c.topic, c.partition, sorted(c.replicas_after)) for c in plan.changes if c.added] == [("t", 0, [0, 2])]
    args = build_parser().parse_args(["plan", "run", "--mode", "rebalance", "--strategy", "one-move"])
    assert args.strategy == "one-move"
    assert "one-move" in strategies.strategies_for("rebalance")
    with pytest.raises(PlanError, match="strategy one-move serves --mode rebalance or add-brokers or remove-brokers"):
        make_plan(_cluster(), "leaders", strategy="one-move")


def test_auto_runs_the_step_of_the_strategy_it_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    for name in ("flow", "lp"):
        original = STRATEGY_REGISTRY[name]

        def spy(req: PlanRequest, setup: PlanSetup, budget: Any, reserve: float, _o: Strategy = original) -> Placement:
            seen.append(_o.name)
            return _o.step()(req, setup, budget, reserve)

        module = types.ModuleType(f"registry_spy_{name}")
        module.spy = spy  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setitem(STRATEGY_REGISTRY, name, Strategy(name, original.modes, original.description,
                                                              f"{module.__name__}:spy"))
    leaders = make_plan(_cluster(), "leaders")
    counts = make_plan(_cluster(), "rebalance", balance="counts")
    assert seen == ["flow", "lp"]
    assert (leaders.strategy, counts.strategy) == ("flow", "lp")
