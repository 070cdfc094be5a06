"""Every plan reports how it leaves the load (rebalancer.plan.load_summary): each dimension's brokers against
their bands before and after, and bytes moved against the fewest any plan meeting the bands must move. The summary
is checked against its own rows (a broker is listed outside exactly when its value after the plan is outside its
band), for a count plan and a load plan of the main job's add-brokers case."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rebalancer.load import load_model
from rebalancer.model import Cluster
from rebalancer.plan.planner import make_plan
from rebalancer.plan.summary import format_plan_summary
from rebalancer.sim.scenarios import ScenarioParams, build_scenario


def new_brokers() -> tuple[Cluster, list[int]]:
    c = build_scenario("new-brokers", ScenarioParams())
    return c, sorted(c.meta["new_brokers"])


@pytest.mark.parametrize("balance", ["counts", "load"])
def test_the_plan_reports_its_load_and_the_bytes_bound(balance: str) -> None:
    cluster, new = new_brokers()
    plan = make_plan(cluster, "add-brokers", brokers=new, balance=balance)
    load = plan.summary["load"]
    rows = {row["broker"]: row for row in load["brokers"]}
    for name, dim in load["dimensions"].items():
        # Each dimension's lists and worst deviation are what its rows say, before and after.
        for when in ("before", "after"):
            outside = sorted(b for b, r in rows.items() if not r[name]["low"] <= r[name][when] <= r[name]["high"])
            assert dim[f"outside_{when}"] == outside, (name, when)
            worst = max(abs(r[name][when] - r[name]["target"]) / r[name]["target"] * 100 for r in rows.values())
            assert dim[f"max_deviation_pct_{when}"] == pytest.approx(worst, abs=0.01), (name, when)
        assert sum(r[name]["after"] for r in rows.values()) == sum(r[name]["before"] for r in rows.values())
    disk = load["dimensions"]["disk"]
    assert disk["max_deviation_pct_before"] == 100.0  # the new brokers start empty
    # A load plan brings every broker's disk into +-5 %; a count plan makes counts exact and bytes follow only
    # roughly. Both keep replica counts inside their band.
    assert load["dimensions"]["replicas"]["outside_after"] == []
    if balance == "load":
        assert disk["outside_after"] == [] and disk["max_deviation_pct_after"] <= 5.0
    # The bound is the new brokers' disk deficit (in add-brokers mode only they receive), never above what moved.
    assert load["bytes_bound_by"] == "disk" and 0 < load["bytes_bound"] <= load["bytes_moved"]
    assert load["bytes_moved"] == plan.summary["bytes_moved"] and plan.summary["lower_bounds"]["bytes_moved"] == load["bytes_bound"]
    assert sum(r["disk"]["after"] for r in rows.values()) == disk["total"]
    text = format_plan_summary(plan)
    assert "bytes moved" in text and "(disk), ratio" in text and "disk within +-5% of target" in text


def test_bands_follow_capacity_and_the_rates_say_where_they_came_from(tmp_path) -> None:
    cluster, new = new_brokers()
    # The new brokers have twice the disk: their targets are twice the others'.
    big = set(new)
    cluster = Cluster.build([replace(b, disk_capacity_bytes=(2 if b.id in big else 1) * 10**13) for b in cluster.brokers],
                            cluster.partitions, {**cluster.meta, "topic_retention_ms": {cluster.partitions[0].topic: 86_400_000}})
    model = load_model(cluster)
    assert model.rate_sources["topic retention"] == sum(1 for p in cluster.partitions if p.topic == cluster.partitions[0].topic)
    plan = make_plan(cluster, "add-brokers", brokers=new, load=model)
    rows = {row["broker"]: row["disk"] for row in plan.summary["load"]["brokers"]}
    assert abs(rows[new[0]]["target"] - 2 * rows[0]["target"]) <= 2 and rows[0]["capacity"] == 10**13
    assert plan.summary["load"]["dimensions"]["disk"]["by_capacity"] is True
    assert plan.summary["load"]["dimensions"]["replicas"]["by_capacity"] is False
