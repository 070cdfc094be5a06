"""The lower bound on bytes moved (rebalancer.plan.bounds.bytes_moved_bound) is never above what the best plan
moves: checked by brute force over every placement of tiny clusters, and by hand on a small one."""

from __future__ import annotations

import itertools

import pytest
from conftest import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rebalancer.load import dimension_loads, load_bands, partition_loads
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan.bounds import bytes_moved_bound
from rebalancer.plan.targets import make_targets

DIMS = ("disk", "nw_in", "replicas")


def build(sizes: list[int], rates: list[float], placements: list[tuple[int, ...]], brokers: int) -> Cluster:
    parts = [Partition("t", i, r, r[0], r, size_bytes=s, bytes_in_per_s=rate)
             for i, (s, rate, r) in enumerate(zip(sizes, rates, placements, strict=True))]
    return Cluster.build([Broker(b) for b in range(brokers)], parts)


def bands_for(cluster: Cluster, loads, half: float):
    totals = dimension_loads(cluster, loads, dimensions=DIMS)
    return {d: load_bands(d, sum(totals[d].values()), cluster.broker_ids, band=half) for d in DIMS}


def test_add_brokers_by_hand() -> None:
    # Brokers 0 and 1 hold 300 bytes each; broker 2 is new. Disk band +-0: each should hold 200.
    c = build([100, 100, 100], [1.0, 1.0, 1.0], [(0, 1), (0, 1), (0, 1)], 3)
    loads = partition_loads(c)
    bands = {"disk": load_bands("disk", 600, [0, 1, 2], band=0.0)}
    result = bytes_moved_bound(c, loads, bands, make_targets(c, "add-brokers", [2]))
    assert result == {"bound": 200, "by": "disk", "per_dimension": {"disk": {"leaving": 200, "arriving": 200}}}


def test_network_in_prefers_the_replicas_with_the_most_rate_per_byte() -> None:
    # Broker 0 holds a hot small partition (10 B, 5 B/s) and a cold big one (1000 B, 1 B/s); broker 1 is empty.
    c = build([10, 1000], [5.0, 1.0], [(0,), (0,)], 2)
    loads = partition_loads(c)
    bands = {"nw_in": load_bands("nw_in", 6, [0, 1], band=0.0)}  # 3 B/s each: 3 units must leave broker 0
    result = bytes_moved_bound(c, loads, bands, make_targets(c, "rebalance"))
    assert result["per_dimension"]["nw_in"] == {"leaving": 6, "arriving": 6}  # 3/5 of the hot 10-byte partition
    assert result["by"] == "nw_in"


def test_each_broker_counts_its_most_demanding_dimension() -> None:
    # Broker 0 holds too many bytes (60 for a target of 30), broker 1 too much network in (30 B/s for 10) on a small
    # hot partition, broker 2 too little of both. Disk alone needs 30 bytes to leave broker 0 and network in alone
    # 20/30 of broker 1's 10-byte partition; they leave different brokers, so at least 30 + 6.67 bytes move.
    c = build([60, 10, 20], [0.0, 30.0, 0.0], [(0,), (1,), (2,)], 3)
    loads = partition_loads(c)
    bands = {"disk": load_bands("disk", 90, [0, 1, 2], band=0.0), "nw_in": load_bands("nw_in", 30, [0, 1, 2], band=0.0)}
    result = bytes_moved_bound(c, loads, bands, make_targets(c, "rebalance"))
    assert result["per_dimension"] == {"disk": {"leaving": 30, "arriving": 30}, "nw_in": {"leaving": 6, "arriving": 6}}
    assert result["bound"] == 36 and result["by"] == "disk+nw_in"


@settings(max_examples=examples(120), deadline=None)
@given(data=st.data(), brokers=st.integers(2, 4), n=st.integers(1, 4), rf=st.integers(1, 2),
       half=st.sampled_from([0.0, 0.1, 0.3, 0.6]))
def test_never_above_the_best_plan(data: st.DataObject, brokers: int, n: int, rf: int, half: float) -> None:
    assume(rf <= brokers)
    sizes = data.draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))
    rates = data.draw(st.lists(st.integers(0, 20).map(float), min_size=n, max_size=n))
    sets = list(itertools.permutations(range(brokers), rf))
    start = data.draw(st.lists(st.sampled_from(sets), min_size=n, max_size=n))
    c = build(sizes, rates, start, brokers)
    loads = partition_loads(c)
    bands = bands_for(c, loads, half)
    bound = bytes_moved_bound(c, loads, bands, make_targets(c, "rebalance"))["bound"]
    best = None
    choices = [sorted({tuple(sorted(s)) for s in sets}) for _ in range(n)]
    for combo in itertools.product(*choices):
        # Leadership is free (no bytes): the leader stays where it was if it can, which no dimension here prices.
        plan = {("t", i): tuple(sorted(r, key=lambda b: b != start[i][0])) for i, r in enumerate(combo)}
        per = dimension_loads(c, loads, plan, dimensions=DIMS)
        if all(bands[d][b].contains(per[d][b]) for d in DIMS for b in c.broker_ids):
            moved = sum(sizes[i] * len(set(combo[i]) - set(start[i])) for i in range(n))
            best = moved if best is None else min(best, moved)
    assume(best is not None)  # the bands can be out of reach of tiny clusters
    assert bound <= best, (bound, best)


def test_a_removed_broker_sends_everything() -> None:
    c = build([100, 40], [1.0, 1.0], [(0, 1), (1, 2)], 3)
    loads = partition_loads(c)
    targets = make_targets(c, "remove-brokers", [1])
    totals = dimension_loads(c, loads, dimensions=["disk"])
    bands = {"disk": load_bands("disk", sum(totals["disk"].values()), targets.eligible, band=0.5)}
    result = bytes_moved_bound(c, loads, bands, targets)
    assert result["per_dimension"]["disk"]["leaving"] == 140 and result["bound"] == 140
    with pytest.raises(KeyError):
        bands["disk"][1]  # the removed broker has no band
