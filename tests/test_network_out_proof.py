"""The leader gate's floor on every broker's leader count (``sum_proofs.fewest_leaders``), checked against every
count vector of small clusters, and the network-out proof built on it (``sum_proofs.network_out_proof``)."""

from __future__ import annotations

import itertools
import statistics
import sys
from pathlib import Path

from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.load import load_bands
from rebalancer.plan.sum_proofs import explain_network_out, fewest_leaders, network_out_proof


def _gate_passes(counts: tuple[int, ...], band: float) -> bool:
    # as rebalancer.validate measures a count: |count - median| <= max(band x median, 1)
    med = statistics.median(counts)
    return all(round(max(0.0, abs(c - med) - max(band * med, 1.0)), 6) == 0 for c in counts)


@settings(max_examples=examples(200), deadline=None)
@given(brokers=st.integers(1, 6), total=st.integers(0, 24), band=st.sampled_from([0.0, 0.1, 0.15, 0.3, 0.5]))
def test_fewest_leaders_is_the_least_any_passing_counts_have(brokers: int, total: int, band: float) -> None:
    least = min((min(c) for c in itertools.combinations_with_replacement(range(total + 1), brokers)
                 if sum(c) == total and _gate_passes(c, band)), default=None)
    assert least is not None  # an even spread always passes
    assert fewest_leaders(total, brokers, band) == least


def test_the_main_jobs_hot_partition_puts_network_out_out_of_reach() -> None:
    # 48 partitions over 8 brokers (the main job): the leader gate keeps at least 5 leaders on every broker; one
    # partition carries 180 of the 1,250 in all (115 % of a broker's 156 target), the smallest others 2, 2, 3 and 4.
    outs = [180.0, 2.0, 2.0, 3.0, 4.0] + [25.0] * 43
    total = sum(outs)
    bands = load_bands("nw_out", int(total), range(8), band=0.10)
    fewest = fewest_leaders(len(outs), 8, 0.15)
    assert fewest == 5
    found = network_out_proof(outs, bands, fewest, names=[f"t-{i}" for i in range(len(outs))])
    assert found is not None and found["partition"] == "t-0" and found["least"] == 191
    assert found["above_pct"] == round(100 * (191 - total / 8) / (total / 8), 1)
    assert "t-0" in explain_network_out(found) and "at least 5 leader(s)" in explain_network_out(found)
    # even a broker leading that one partition alone would end 15 % above its target, outside a 10 % band
    assert network_out_proof(outs, bands, 1, None)["least"] == 180
    # a partition inside the band proves nothing
    even = [25.0] * 48
    assert network_out_proof(even, load_bands("nw_out", int(sum(even)), range(8), band=0.10), fewest) is None


def test_a_plan_of_the_main_jobs_shape_says_why_network_out_is_outside() -> None:
    # The main job's shape (bench/load_cases.main_job): one partition carries 115 % of a broker's network-out target.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import load_cases

    from rebalancer.plan.planner import make_plan

    cluster = load_cases.main_job(1)
    plan = make_plan(cluster, "add-brokers", brokers=cluster.meta["new_brokers"])
    proof = plan.solver["network_out_proof"]
    assert proof["partition"] == "orders.v0-2" and proof["fewest_leaders"] == 5 and proof["above_pct"] > 20
    nw_out = plan.summary["load"]["dimensions"]["nw_out"]
    assert nw_out["outside_after"] and nw_out["max_deviation_pct_after"] >= proof["above_pct"]  # never below the floor
    assert plan.solver["outside_why"] == explain_network_out(proof)  # nothing else is outside


def _fractional_leaders_exist(units: list[int], candidates: list[tuple[int, ...]], low: dict[int, float],
                              high: dict[int, float]) -> bool:
    """The oracle: the leader choice's linear relaxation as a linear program (scipy's HiGHS), every broker within
    [low, high]."""
    import numpy as np
    from scipy.optimize import linprog

    cols = [(i, b) for i, c in enumerate(candidates) for b in dict.fromkeys(c)]
    a_eq = np.zeros((len(units), len(cols)))
    a_ub = np.zeros((2 * len(low), len(cols)))
    brokers = sorted(low)
    for k, (i, b) in enumerate(cols):
        a_eq[i, k] = 1.0
        if b in low:
            r = brokers.index(b)
            a_ub[r, k], a_ub[len(brokers) + r, k] = units[i], -units[i]
    b_ub = [high[b] for b in brokers] + [-low[b] for b in brokers]
    result = linprog(np.zeros(len(cols)), A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.ones(len(units)),
                     bounds=(0, 1), method="highs")
    return bool(result.status == 0)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data(), brokers=st.integers(1, 5), partitions=st.integers(1, 9))
def test_the_leaders_relaxation_is_the_linear_program_with_its_bands_widened(data: st.DataObject, brokers: int,
                                                                             partitions: int) -> None:
    """``leader_exact.band_relaxation`` (a flow) answers as the leader choice's linear program does once each
    broker's band is widened by one unit per partition it may lead (the rounding allowance: whole units here, so
    nothing is rounded); so its "no" is a proof for the band itself."""
    from rebalancer.load import Band
    from rebalancer.plan.leader_exact import band_relaxation

    units = data.draw(st.lists(st.integers(0, 60), min_size=partitions, max_size=partitions))
    candidates = [tuple(data.draw(st.lists(st.integers(0, brokers), min_size=1, max_size=3, unique=True)))
                  for _ in range(partitions)]  # broker ``brokers`` has no band: its load goes anywhere
    bands = {}
    for b in range(brokers):
        floor = data.draw(st.integers(0, 80))
        bands[b] = Band(floor, floor + data.draw(st.integers(0, 40)), floor + 10.0)
    may_lead = {b: sum(1 for c in candidates if b in c) for b in bands}
    low = {b: max(0, bands[b].floor - may_lead[b]) for b in bands}
    high = {b: bands[b].ceil + may_lead[b] for b in bands}
    answer = band_relaxation([float(u) for u in units], candidates, bands)
    assert answer == _fractional_leaders_exist(units, candidates, low, high)
    if not answer:  # a proof for the band itself
        assert not _fractional_leaders_exist(units, candidates, {b: x.floor for b, x in bands.items()},
                                             {b: x.ceil for b, x in bands.items()})


def test_a_hot_partition_no_fractional_choice_can_spread_is_proven_out_of_reach() -> None:
    """Two brokers with a 90-110 band; broker 0 is the only one that may lead a partition of 150: no choice of the
    other leaders helps (False), where the same partition with a second candidate could be split (True, which proves
    nothing of whole leaders)."""
    from rebalancer.load import Band
    from rebalancer.plan.leader_exact import band_relaxation

    bands = {0: Band(90, 110, 100.0), 1: Band(90, 110, 100.0)}
    assert band_relaxation([150.0, 50.0], [(0,), (0, 1)], bands) is False
    assert band_relaxation([150.0, 50.0], [(0, 1), (0, 1)], bands) is True
    assert band_relaxation([10.0, 10.0], [(0, 1), (0, 1)], bands) is False  # too little to lift both floors
    assert band_relaxation([10.0, 10.0], [(), (0, 1)], bands) is None
    assert "splitting a partition's leadership" in explain_network_out({"by": "linear relaxation", "brokers": [0]})
