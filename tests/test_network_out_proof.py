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
