"""The racks' repair (``--repair-racks``, ``rebalancer.plan.rack_repair``, issue 46): partitions leaning on one rack
spread over the racks so that a rack's failure leaves none under min.insync.replicas where the racks allow it; the
change cap holds, partitions already even are not touched, and the placement balances around the repair."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.formats import write_cluster_json
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan import plan_run_dir
from rebalancer.plan.planner import make_plan
from rebalancer.plan.rack_repair import rack_excess, repair_racks
from rebalancer.plan.summary import format_plan_summary
from rebalancer.plan.targets import make_targets
from rebalancer.sim.scenarios import build_scenario
from rebalancer.validate import GateFailure, Thresholds, validate_run_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from bench_racks import lean  # noqa: E402

MIN_ISR = 2


def _leaning(seed: int, brokers: int = 9, racks: int = 3, topics: int = 6, parts: int = 12,
             share: float = 0.3) -> Cluster:
    """RF 3 over ``racks`` racks, min.insync.replicas 2, topics of alike partitions (lognormal sizes per topic);
    about ``share`` of the partitions hold two replicas on one rack (one rack's failure leaves them one replica)."""
    rng = random.Random(seed)
    rack_of = {b: b % racks for b in range(brokers)}
    parts_out = []
    for t in range(topics):
        size = int(rng.lognormvariate(20, 1))
        for k in range(parts):
            if rng.random() < share:
                r = rng.randrange(racks)
                reps = [*rng.sample([b for b in range(brokers) if rack_of[b] == r], 2),
                        rng.choice([b for b in range(brokers) if rack_of[b] != r])]
            else:
                reps = [rng.choice([b for b in range(brokers) if rack_of[b] == r]) for r in rng.sample(range(racks), 3)]
            rng.shuffle(reps)
            parts_out.append(Partition(f"t{t}", k, tuple(reps), reps[0], tuple(reps), size_bytes=size))
    return Cluster.build([Broker(id=b, rack=f"r{rack_of[b]}") for b in range(brokers)], parts_out,
                         {"topic_min_insync_replicas": {f"t{t}": MIN_ISR for t in range(topics)}})


def _under_min_isr_after_rack(cluster: Cluster, final: dict[Any, tuple[int, ...]]) -> int:
    """Partitions some single rack's failure leaves with fewer live replicas than min.insync.replicas, simulated."""
    rack = {b.id: b.rack for b in cluster.brokers}
    under = 0
    for p in cluster.partitions:
        reps = final.get(p.tp, p.replicas)
        under += any(sum(1 for b in reps if rack[b] != r) < MIN_ISR for r in set(rack.values()))
    return under


def test_rack_down_case_fixed_by_the_plan() -> None:
    """Before: a rack's failure leaves partitions under min.insync.replicas; the plan with the repair leaves none,
    adds at most one replica per partition (the default cap), is balanced, and says so in its summary; without the
    repair the plan leaves some (so the repair, not the balancing, fixes them)."""
    cluster = _leaning(0)
    before = _under_min_isr_after_rack(cluster, {})
    assert before > 0
    plain = make_plan(cluster, "rebalance")
    assert _under_min_isr_after_rack(cluster, {(c.topic, c.partition): c.replicas_after for c in plain.changes}) > 0
    plan = make_plan(cluster, "rebalance", repair_racks=True)
    final = {(c.topic, c.partition): c.replicas_after for c in plan.changes}
    assert _under_min_isr_after_rack(cluster, final) == 0
    assert all(len(c.added) <= 1 for c in plan.changes)
    assert plan.summary["failover"]["after"]["worst_rack"]["under_min_isr"] == 0
    assert plan.summary["failover"]["before"]["worst_rack"]["under_min_isr"] > 0
    record = plan.solver["rack_repair"]
    assert record["uneven_before"] == before and record["repaired"] == before and record["left"] == 0
    assert plan.solver["state"] == "Balanced"
    assert plan.summary["load"]["bytes_moved"] >= record["bytes"]
    text = format_plan_summary(plan)
    assert f"racks: {before} partition(s) leaned on one rack; {before} spread evenly" in text
    assert "--repair-racks spreads them" in format_plan_summary(plain)


def test_counts_balance_keeps_the_cap() -> None:
    """On counts (whose placement does not know the repair's changes) a placement change that would pass the cap on
    a repaired partition is taken back: no partition adds more replicas than the cap."""
    cluster = _leaning(5, share=0.5)
    plan = make_plan(cluster, "rebalance", repair_racks=True, balance="counts")
    assert plan.solver["rack_repair"]["placement_changes_dropped"] > 0  # the case this test is for
    assert all(len(c.added) <= 1 for c in plan.changes)
    assert _under_min_isr_after_rack(cluster, {(c.topic, c.partition): c.replicas_after for c in plan.changes}) == 0


@st.composite
def _clusters(draw: Any) -> tuple[Cluster, int | None]:
    n = draw(st.integers(3, 9))
    racks = draw(st.integers(2, min(4, n)))
    brokers = [Broker(id=b, rack=f"r{b % racks}") for b in range(n)]
    parts = []
    for k in range(draw(st.integers(1, 25))):
        rf = draw(st.integers(1, min(4, n)))
        reps = tuple(draw(st.permutations(range(n)))[:rf])
        parts.append(Partition("t", k, reps, reps[0], reps, size_bytes=draw(st.integers(0, 10**6))))
    return Cluster.build(brokers, parts), draw(st.sampled_from([None, 1, 2]))


@given(_clusters())
@settings(max_examples=150, deadline=None)
def test_repair_properties(case: tuple[Cluster, int | None]) -> None:
    """Replica counts per partition kept, no broker twice, at most ``cap`` replicas added, partitions already even
    untouched, every partition changed strictly more even, and even unless the cap stopped it."""
    cluster, cap = case
    targets = make_targets(cluster, "rebalance")
    repair = repair_racks(cluster, targets, cap)
    rack = {b.id: b.rack for b in cluster.brokers}
    n_racks = len({b.rack for b in cluster.brokers})
    for p in cluster.partitions:
        reps = repair.assignment.get(p.tp)
        if reps is None:
            assert not rack_excess(p.replicas, rack, n_racks) or p.name in repair.left
            continue
        assert len(reps) == len(set(reps)) == len(p.replicas)
        added = sum(1 for b in reps if b not in p.replicas)
        assert cap is None or added <= cap
        assert rack_excess(reps, rack, n_racks) < rack_excess(p.replicas, rack, n_racks)
        assert not rack_excess(reps, rack, n_racks) or (cap is not None and added == cap) or p.name in repair.left
    assert repair.bytes == sum(p.size_bytes * sum(1 for b in repair.assignment[p.tp] if b not in p.replicas)
                               for p in cluster.partitions if p.tp in repair.assignment)


def test_a_repaired_plan_passes_the_gates(tmp_path: Path) -> None:
    """Validated from its run directory, a plan with the repair passes every gate: the change cap, the racks and the
    bytes gate, whose bound (recomputed from the snapshot) counts what the spread needs: the balance alone bounds
    the bytes at about half of what this plan must copy."""
    cluster = _leaning(0)
    write_cluster_json(cluster, tmp_path / "snapshot.json")
    plan = plan_run_dir(tmp_path, "rebalance", repair_racks=True)
    assert plan.summary["load"]["bytes_bound_by"].startswith("the replicas that spreading")
    try:
        result = validate_run_dir(tmp_path, Thresholds())
    except GateFailure:
        result = json.loads((tmp_path / "validation" / "result.json").read_text())
    failed = [g["name"] for g in result["gates"] if not g["passed"]]
    assert not failed
    assert {"bytes-vs-bound", "rack-diversity", "max-changes-per-partition"} <= {g["name"] for g in result["gates"]}


def test_the_placement_counts_the_repair_against_the_cap() -> None:
    """The load placement's phases (greedy, the neighbourhoods, the counts' repair) count changes from the cluster as
    it is (``LoadInput.baseline``), the repair's included: on the simulator's new-brokers scenario made to lean,
    add-brokers (cap 1) takes back none of their changes and ends Balanced; before, the neighbourhoods counted from
    the repaired cluster and 11 changes were taken back, the plan Heuristic."""
    cluster, _ = lean(build_scenario("new-brokers"), 0.15)
    plan = make_plan(cluster, "add-brokers", brokers=[12, 13, 14, 15], repair_racks=True)
    record = plan.solver["rack_repair"]
    assert record["repaired"] > 0 and record["placement_changes_dropped"] == 0
    assert plan.solver["state"] == "Balanced"
    assert all(len(c.added) <= 1 for c in plan.changes)
    assert plan.summary["failover"]["after"]["worst_rack"]["offline"] == 0
