"""The plan's solver record is typed (issue 44): code decides on ``state``, ``cut_in`` and ``cut_short``, never on
the words of ``status``; ``plan.json`` keeps every key it had, and a file written before the record existed still
reads."""

from __future__ import annotations

import sys
from pathlib import Path

from rebalancer.plan import make_plan
from rebalancer.plan.budget import Budget
from rebalancer.planfile.record import STATES, SolverRecord
from rebalancer.planfile.result import load_plan, write_plan
from rebalancer.sim.scenarios import ScenarioParams, build_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from load_cases import heavy_tailed  # noqa: E402


class FakeClock:
    """A clock that advances ``tick`` seconds at every reading (``tests/test_plan_budget.py``'s)."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 1000.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now - self.tick


def test_a_plan_s_record_is_typed_and_its_file_keeps_the_old_keys(tmp_path: Path) -> None:
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=48))
    plan = make_plan(cluster, "add-brokers", brokers=sorted(cluster.meta["new_brokers"]))
    record = plan.solver
    assert isinstance(record, SolverRecord) and record.state in STATES
    assert record.cut_in is None and record.cut_short == ()
    doc = plan.to_dict()["solver"]
    # the keys plan.json has always had under "solver" are all there, beside the typed ones
    assert {"status", "strategy_reason", "balance", "greedy", "leaders", "budget", "seconds"} <= set(doc)
    assert doc["state"] == record.state and doc["status"] == record.status and doc["cut_in"] is None
    write_plan(plan, tmp_path)
    again = load_plan(tmp_path)
    assert again.solver == record  # read back, the same typed record


def test_a_plan_the_time_limit_cut_says_where_in_typed_fields() -> None:
    # the greedy asks its clock every 32 steps: each reading a second, it is cut after about 150 of 180 moves
    cluster = heavy_tailed(build_scenario("wix", ScenarioParams(brokers=12, racks=3, partitions=3000, topics=6)))
    budget = Budget(12.0, clock=FakeClock(tick=1.0))
    plan = make_plan(cluster, "rebalance", strategy="greedy", time_limit=12.0, budget=budget, balance="load")
    assert plan.solver.state == "Time limit reached"
    assert plan.solver.cut_in == "greedy" and "greedy" in plan.solver.cut_short


def test_a_file_written_before_the_record_existed_still_reads() -> None:
    old = {"status": "Time limit reached in lp (cut short: lp); moves/bound 1.200, leader changes/bound 1.000",
           "placement_used": "greedy", "seconds": 3.5, "gap": 0.1,
           "budget": {"limit": 10.0, "expired_in": "lp", "phases": {"greedy": {"cut_short": False},
                                                                   "lp": {"cut_short": True}}}}
    record = SolverRecord.from_dict(old)
    assert (record.state, record.cut_in, record.cut_short) == ("Time limit reached", "lp", ("lp",))
    assert record.placement_used == "greedy" and record["gap"] == 0.1 and record.get("missing") is None
    assert {k: record[k] for k in old} == old  # every old key reads as it was
