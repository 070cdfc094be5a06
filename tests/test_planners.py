"""Planners: exactness of the leader flow, the articles' examples, infeasible requests, and invariants of every
plan of every strategy (hypothesis)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rebalancer.formats import write_cluster_json
from rebalancer.load import load_model
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan import PlanError, content_hash, load_plan, make_plan, plan_run_dir
from rebalancer.plan.leader_pass import KEPT
from rebalancer.plan.leaders import LeaderItem, balance_leaders, leader_objective
from rebalancer.plan.pinterest import pinterest_leaders
from rebalancer.sim.scenarios import build_scenario


# -- the leader flow is exact ---------------------------------------------------------------------------------
@st.composite
def leader_instances(draw):
    nb = draw(st.integers(2, 6))
    n = draw(st.integers(1, 7))
    topics = draw(st.integers(1, 3))
    items = []
    for i in range(n):
        rf = draw(st.integers(1, min(3, nb)))
        reps = draw(st.permutations(range(nb)))[:rf]
        keep = draw(st.lists(st.booleans(), min_size=rf, max_size=rf))
        cands = tuple(b for b, k in zip(reps, keep, strict=True) if k) or (reps[0],)
        items.append(LeaderItem((f"t{draw(st.integers(0, topics - 1))}", i), cands, reps[0]))
    return items, frozenset(range(nb))


def _brute(items, brokers, order):
    best = None
    for choice in itertools.product(*[it.candidates for it in items]):
        tv, wv, ch, cv = leader_objective({it.key: b for it, b in zip(items, choice, strict=True)}, items, brokers)
        obj = (tv, wv, ch, cv) if order == "changes" else (tv, wv, cv, ch)
        best = obj if best is None or obj < best else best
    return best


@settings(max_examples=examples(150), deadline=None)
@given(leader_instances(), st.sampled_from(["changes", "balance"]))
def test_leader_flow_equals_brute_force_optimum(instance, priority):
    items, brokers = instance
    res = balance_leaders(items, brokers, priority=priority)
    got = (res.topic_violation, res.tolerance_violation, res.changes, res.cluster_violation)
    if priority == "balance":
        got = (res.topic_violation, res.tolerance_violation, res.cluster_violation, res.changes)
    assert got == _brute(items, brokers, priority)
    assert all(res.leaders[it.key] in it.candidates for it in items)


@settings(max_examples=examples(150), deadline=None)
@given(leader_instances())
def test_flow_never_needs_more_changes_than_pinterest(instance):
    items, brokers = instance
    pin = pinterest_leaders(items)
    flow = balance_leaders(items, brokers)
    p_tv, p_wv, p_changes, _ = leader_objective(pin, items, brokers)
    # The flow reaches the bands wherever any choice can, so it is never less balanced...
    assert (flow.topic_violation, flow.tolerance_violation) <= (p_tv, p_wv)
    # ...and whenever Pinterest's answer is as balanced, the flow used no more changes.
    if (p_tv, p_wv) == (flow.topic_violation, flow.tolerance_violation):
        assert flow.changes <= p_changes


def test_pinterest_scenario_flow_meets_the_bound_and_beats_pinterest():
    cluster = build_scenario("pinterest")
    flow = make_plan(cluster, "leaders", strategy="flow")
    pin = make_plan(cluster, "leaders", strategy="pinterest")
    assert flow.summary["leader_changes"] == flow.summary["lower_bounds"]["leader_changes"]
    assert flow.summary["leader_changes"] <= pin.summary["leader_changes"]
    assert flow.summary["topic_leader_spread"]["after"] <= 1
    assert flow.summary["replica_moves"] == 0
    for c in flow.changes:  # leaders only: same replica sets, reordered
        assert sorted(c.replicas_after) == sorted(c.replicas_before)


# -- the articles' examples -----------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["auto", "lp", "greedy"])
def test_sqooba_remove_broker_19_is_one_change(strategy: str):
    cluster = build_scenario("sqooba")
    plan = make_plan(cluster, "remove-brokers", brokers=[19], strategy=strategy)
    assert plan.summary["replica_moves"] == 1
    assert [(c.topic, c.partition) for c in plan.changes] == [("x.y.z.t", 1)]
    (change,) = plan.changes
    assert change.replicas_before == (8, 19)
    assert 19 not in change.replicas_after and change.replicas_after[0] == 8  # leader kept
    rack = {b.id: b.rack for b in cluster.brokers}
    assert {rack[b] for b in change.replicas_after} == {"a", "b"}  # racks respected


def test_add_brokers_moves_only_onto_new_brokers_and_balances():
    cluster = build_scenario("new-brokers")
    plan = make_plan(cluster, "add-brokers", brokers=[12, 13, 14, 15], balance="counts")
    new = {12, 13, 14, 15}
    for c in plan.changes:
        assert set(c.added) <= new
        assert not set(c.removed) & new
    s = plan.summary
    assert s["replica_spread"]["after"] <= 1
    assert s["replica_moves"] <= 1.05 * s["lower_bounds"]["replica_moves"]


# -- infeasible requests fail before anything is written -----------------------------------------------------
def _two_rack_cluster() -> Cluster:
    brokers = [Broker(i, "ab"[i % 2], disk_capacity_bytes=10**6) for i in range(4)]
    parts = [Partition("t", i, (i % 4, (i + 1) % 4), i % 4, (i % 4, (i + 1) % 4), 1000) for i in range(8)]
    return Cluster.build(brokers, parts)


@pytest.mark.parametrize(
    ("mode", "brokers", "message"),
    [
        ("remove-brokers", [0, 1, 2, 3], "leaves no broker"),
        ("remove-brokers", [0, 1, 2], "replication factor 2 but only 1 eligible brokers remain"),
        ("remove-brokers", [1, 3], "spans 2 racks but the eligible brokers are in only 1"),
        ("add-brokers", [9], "broker(s) 9 not in the snapshot"),
        ("add-brokers", None, "needs --brokers"),
        ("rebalance", [1], "--brokers is only for add-brokers and remove-brokers"),
        ("sideways", None, "unknown mode 'sideways'"),
    ],
)
def test_infeasible_requests_fail_before_writing(tmp_path: Path, mode, brokers, message):
    write_cluster_json(_two_rack_cluster(), tmp_path / "snapshot.json")
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_run_dir(tmp_path, mode, brokers=brokers)
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "reassignment.json").exists()


def test_capacity_exceeded_is_infeasible():
    brokers = [Broker(i, disk_capacity_bytes=1000) for i in range(3)]
    parts = [Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (i % 3, (i + 1) % 3), 900) for i in range(3)]
    with pytest.raises(PlanError, match="need 5400 bytes but the eligible brokers' disks hold 3000"):
        make_plan(Cluster.build(brokers, parts), "rebalance")


def test_lp_respects_disk_capacity():
    # Broker 3 is new and small: it can take at most one 400-byte replica, so balance by count is impossible
    # without breaking its disk; the program must keep within capacity.
    brokers = [Broker(0, disk_capacity_bytes=10**6), Broker(1, disk_capacity_bytes=10**6),
               Broker(2, disk_capacity_bytes=10**6), Broker(3, disk_capacity_bytes=500)]
    parts = [Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (i % 3, (i + 1) % 3), 400) for i in range(6)]
    plan = make_plan(Cluster.build(brokers, parts), "add-brokers", brokers=[3], strategy="lp")
    on3 = sum(1 for c in plan.changes if 3 in c.replicas_after)
    assert on3 * 400 <= 500


def test_hash_covers_the_changes(tmp_path: Path):
    write_cluster_json(build_scenario("sqooba"), tmp_path / "snapshot.json")
    plan = plan_run_dir(tmp_path, "remove-brokers", brokers=[19])
    again = load_plan(tmp_path)
    assert again.hash == plan.hash == content_hash(again.changes)
    doc = json.loads((tmp_path / "plan.json").read_text())
    after = doc["changes"][0]["replicas_after"]
    doc["changes"][0]["replicas_after"] = [after[0], next(b for b in range(19) if b not in after)]
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    assert content_hash(load_plan(tmp_path).changes) != plan.hash


def test_balanced_cluster_gives_an_empty_plan():
    brokers = [Broker(i, "abc"[i % 3]) for i in range(3)]
    parts = [Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (i % 3, (i + 1) % 3), 1) for i in range(3)]
    for mode in ("rebalance", "leaders"):
        plan = make_plan(Cluster.build(brokers, parts), mode)
        assert plan.changes == () and plan.summary["replica_moves"] == 0


def _applied(cluster: Cluster, plan) -> Cluster:
    """The cluster as the plan leaves it: every change's replica list, its first replica leading, all in sync."""
    after = {(c.topic, c.partition): tuple(c.replicas_after) for c in plan.changes}
    return Cluster.build(list(cluster.brokers), [
        dataclasses.replace(p, replicas=after.get(p.tp, p.replicas), isr=after.get(p.tp, p.replicas),
                            leader=after.get(p.tp, p.replicas)[0]) for p in cluster.partitions])


@pytest.mark.parametrize("balance", ["load", "counts"])
def test_a_plan_of_its_own_result_changes_nothing(balance: str) -> None:
    """The weekly run after a rebalance: the cluster as the plan left it needs no change. The leaders the plan chose
    pass every gate, so none is handed over (the leader flow, balancing after every plan, and the network-out
    hand-overs traded 56, then 9 leaders back and forth on every run: elections clients see, for nothing)."""
    cluster = build_scenario("wix")
    first = make_plan(cluster, "rebalance", balance=balance)
    assert first.summary["replica_moves"] and first.summary["leader_changes"]
    again = make_plan(_applied(cluster, first), "rebalance", balance=balance)
    assert again.changes == (), [c.to_dict() for c in again.changes][:3]
    assert again.solver["leaders"]["algorithm"] == KEPT


def test_leaders_outside_the_gate_change_the_fewest_when_no_replica_moves() -> None:
    """A balanced cluster whose leaders fail the gate: only leaders change, and the flow puts the fewest changes
    before cluster-wide flatness (the plan changes nothing else)."""
    first = make_plan(build_scenario("wix"), "rebalance", balance="counts")
    cluster = _applied(build_scenario("wix"), first)
    led = [p for p in cluster.partitions if p.replicas[0] == 0]
    moved = {p.tp for p in led[: len(led) // 2]}  # broker 0 hands half its leaders to its second replicas
    skewed = Cluster.build(list(cluster.brokers), [
        dataclasses.replace(p, replicas=(p.replicas[1], p.replicas[0], *p.replicas[2:]), leader=p.replicas[1])
        if p.tp in moved else p for p in cluster.partitions])
    plan = make_plan(skewed, "rebalance", balance="counts")
    assert plan.summary["replica_moves"] == 0 and plan.solver["leaders"]["priority"].startswith(
        "topic band, cluster tolerance band, changes")
    assert 0 < plan.summary["leader_changes"] <= len(moved)
    assert make_plan(_applied(skewed, plan), "rebalance", balance="counts").changes == ()


def test_leaders_no_nearer_the_gates_are_not_handed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to move and leaders outside the gate that no hand-over can mend (the fuzz clusters whose network out
    cannot be met traded ~100 leaders on every run): a pass whose leaders come no nearer the gates is dropped."""
    from rebalancer.plan import leader_pass

    first = make_plan(build_scenario("wix"), "rebalance", balance="counts")
    cluster = _applied(build_scenario("wix"), first)
    led = [p for p in cluster.partitions if p.replicas[0] == 0]
    moved = {p.tp for p in led[: len(led) // 2]}
    skewed = Cluster.build(list(cluster.brokers), [
        dataclasses.replace(p, replicas=(p.replicas[1], p.replicas[0], *p.replicas[2:]), leader=p.replicas[1])
        if p.tp in moved else p for p in cluster.partitions])

    def churn(req, setup, assignment, budget, reserve, moved) -> None:  # one leader each way: the counts as they were
        a, b = (p for p in req.cluster.partitions if p.replicas[0] == 5 and 6 in p.replicas[1:]), \
            (p for p in req.cluster.partitions if p.replicas[0] == 6 and 5 in p.replicas[1:])
        for p in (next(a), next(b)):
            assignment[p.tp] = (p.replicas[1] if p.replicas[1] in (5, 6) else p.replicas[2],
                                *(x for x in p.replicas if x not in (5, 6)), p.replicas[0])
        setup.solver["leaders"] = {"algorithm": "churn"}

    monkeypatch.setattr(leader_pass, "_choose_leaders", churn)
    plan = make_plan(skewed, "rebalance", balance="counts")
    assert plan.changes == ()
    assert plan.solver["leaders"]["algorithm"] == KEPT
    assert plan.solver["leaders"]["discarded"] == "churn chose 2 leader change(s) no nearer the gates"


# -- invariants of every plan of every strategy ---------------------------------------------------------------
@st.composite
def clusters(draw):
    n_brokers = draw(st.integers(3, 8))
    n_racks = draw(st.integers(1, 3))
    brokers = [Broker(i, f"r{i % n_racks}") for i in range(n_brokers)]
    n_empty = draw(st.integers(0, 2))
    holders = list(range(n_brokers - n_empty))
    rf = draw(st.integers(1, min(3, len(holders))))
    parts = []
    for t in range(draw(st.integers(1, 3))):
        for p in range(draw(st.integers(1, 12))):
            reps = tuple(draw(st.permutations(holders))[:rf])
            size = draw(st.integers(0, 10**6))
            parts.append(Partition(f"t{t}", p, reps, reps[0], reps, size))
    return Cluster.build(brokers, parts), list(range(n_brokers - n_empty, n_brokers))


def _check_invariants(cluster: Cluster, plan, mode: str, named: list[int], tmp_path: Path) -> None:
    rack = {b.id: b.rack for b in cluster.brokers}
    alive = {b.id for b in cluster.brokers if b.alive}
    cap = plan.params["max_changes_per_partition"]
    final = {p.tp: p.replicas for p in cluster.partitions}
    for c in plan.changes:
        before = cluster.partition(c.topic, c.partition)
        assert c.replicas_before == before.replicas
        assert len(c.replicas_after) == len(c.replicas_before), "RF changed"
        assert len(set(c.replicas_after)) == len(c.replicas_after), "duplicate broker"
        assert set(c.replicas_after) <= alive, "ineligible broker"
        if mode == "remove-brokers":
            assert not set(c.replicas_after) & set(named)
        if mode == "add-brokers":
            assert set(c.added) <= set(named)
        if mode == "leaders":
            assert sorted(c.replicas_after) == sorted(c.replicas_before)
        if cap is not None:
            assert len(c.added) <= cap
        if len(set(rack.values())) > 1:
            assert len({rack[b] for b in c.replicas_after}) >= len({rack[b] for b in c.replicas_before}), "racks reduced"
        final[(c.topic, c.partition)] = c.replicas_after
    if mode == "remove-brokers":
        assert not any(set(r) & set(named) for r in final.values())
    # rollback.json restores the snapshot exactly
    from rebalancer.plan import write_plan

    write_plan(plan, tmp_path)
    rollback = json.loads((tmp_path / "rollback.json").read_text())
    reassignment = json.loads((tmp_path / "reassignment.json").read_text())
    assert {(e["topic"], e["partition"]) for e in rollback["partitions"]} == {(c.topic, c.partition) for c in plan.changes}
    applied = dict(final)
    for e in reassignment["partitions"]:
        assert tuple(e["replicas"]) == final[(e["topic"], e["partition"])]
    for e in rollback["partitions"]:
        applied[(e["topic"], e["partition"])] = tuple(e["replicas"])
    assert applied == {p.tp: p.replicas for p in cluster.partitions}


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(clusters(), st.sampled_from([(m, s) for m in ("rebalance", "add-brokers", "remove-brokers") for s in ("lp", "greedy")]
                                    + [("leaders", "flow"), ("leaders", "pinterest")]))
def test_every_plan_keeps_the_invariants(tmp_path: Path, case, mode_strategy) -> None:
    cluster, empty = case
    mode, strategy = mode_strategy
    named: list[int] = []
    if mode == "add-brokers":
        assume(empty)
        named = empty
    if mode == "remove-brokers":
        named = [0]
    try:
        plan = make_plan(cluster, mode, brokers=named or None, strategy=strategy, time_limit=20)
    except PlanError as exc:
        # Only the documented reasons are acceptable refusals.
        assert any(s in str(exc) for s in ("eligible brokers remain", "spans", "replicas on removed brokers",
                                           "leaves no broker", "cannot all hold", "cannot empty broker")), str(exc)
        return
    _check_invariants(cluster, plan, mode, named, tmp_path)
    if mode != "leaders":
        # The lower bound is valid: a plan that reaches the band never needs fewer moves than it.
        from rebalancer.plan.targets import make_targets

        band = make_targets(cluster, mode, named or None).replicas
        after = {b["broker"]: b["replicas_after"] for b in plan.summary["brokers"] if b["eligible"]}
        if all(band.floor <= v <= band.ceil for v in after.values()):
            assert plan.summary["replica_moves"] >= plan.summary["lower_bounds"]["replica_moves"]


def test_flow_equals_the_ilp_optimum_on_the_pinterest_topics():
    """Larger than brute force allows: the flow's lexicographic optimum equals a staged 0/1 program's."""
    from rebalancer.plan.leader_ilp import leader_ilp

    cluster = build_scenario("pinterest")
    for topic in ("logging.pinterest.a", "logging.pinterest.b"):
        items = [LeaderItem(p.tp, tuple(b for b in p.replicas if b in p.isr), p.replicas[0])
                 for p in cluster.partitions if p.topic == topic]
        brokers = frozenset(b for it in items for b in it.candidates)
        flow = balance_leaders(items, brokers)
        assert (flow.topic_violation, flow.tolerance_violation, flow.changes, flow.cluster_violation) == \
            leader_ilp(items, brokers)


def test_leaders_mode_is_exact_on_a_generated_2000_partition_cluster():
    """Leaders mode is Pareto-exact up to ``WHOLE_MAX`` partitions: no reorder-only plan is as flat (per topic, then
    within the leader gate's tolerance) with fewer leader changes. Per topic group of 1,500 partitions (as it was
    above 1,500) the flow made 497 changes here where the staged 0/1 program's optimum is 440."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    from load_cases import production

    from rebalancer.plan.leader_ilp import leader_ilp
    from rebalancer.plan.leaders import leader_objective

    cluster = production(48, 6, 6_000, 3, seed=7)
    assert len(cluster.partitions) == 2_000
    plan = make_plan(cluster, "leaders")
    assert plan.solver["leaders"]["algorithm"] == "min-cost flow (network simplex), exact"
    leaders = {p.tp: p.replicas[0] for p in cluster.partitions}
    leaders.update({(c.topic, c.partition): c.replicas_after[0] for c in plan.changes})
    items = [LeaderItem(p.tp, tuple(p.replicas), p.replicas[0]) for p in cluster.partitions]
    brokers = frozenset(cluster.broker_ids)
    tv, wv, changes, cv = leader_objective(leaders, items, brokers)
    assert (tv, wv, changes) == leader_ilp(items, brokers)[:3]
    assert plan.summary["leader_changes"] == changes


@pytest.mark.parametrize("strategy", ["greedy", "lp"])
def test_both_placements_respect_disk_capacity(strategy: str):
    brokers = [Broker(0, disk_capacity_bytes=10**6), Broker(1, disk_capacity_bytes=10**6),
               Broker(2, disk_capacity_bytes=10**6), Broker(3, disk_capacity_bytes=900)]
    parts = [Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (i % 3, (i + 1) % 3), 400) for i in range(6)]
    plan = make_plan(Cluster.build(brokers, parts), "add-brokers", brokers=[3], strategy=strategy, balance="counts")
    assert sum(400 for c in plan.changes if 3 in c.replicas_after) <= 900
    assert sum(1 for c in plan.changes if 3 in c.replicas_after) == 2  # as many as fit
    # On load, the capacity threshold (85 % of the disk: 765 bytes) is the hard limit, and broker 3's share of the
    # capacity (and so its target) is tiny: at most one 400-byte replica, never two.
    plan = make_plan(Cluster.build(brokers, parts), "add-brokers", brokers=[3], strategy=strategy, balance="load")
    assert sum(1 for c in plan.changes if 3 in c.replicas_after) <= 1


def test_no_change_is_a_follower_only_reshuffle():
    for case, mode, brokers in (("new-brokers", "add-brokers", [12, 13, 14, 15]), ("sqooba", "remove-brokers", [19]),
                                ("pinterest", "leaders", None)):
        for strategy in (("flow", "pinterest") if mode == "leaders" else ("lp", "greedy")):
            plan = make_plan(build_scenario(case), mode, brokers=brokers, strategy=strategy)
            for c in plan.changes:
                assert c.added or c.leader_change, (case, strategy, c)


@pytest.mark.parametrize("strategy", ["greedy", "lp"])
def test_remove_broker_empties_it_even_past_the_band(strategy: str):
    """Found by hypothesis: 12 partitions on brokers (0, 1), racks r0/r1; removing broker 0 leaves only two rack-safe
    receivers, which must then go above the ceiling rather than leave replicas on the removed broker."""
    brokers = [Broker(i, f"r{i % 2}") for i in range(6)]
    parts = [Partition("t0", i, (0, 1), 0, (0, 1), 0) for i in range(12)]
    plan = make_plan(Cluster.build(brokers, parts), "remove-brokers", brokers=[0], strategy=strategy)
    final = {c.partition: c.replicas_after for c in plan.changes}
    assert len(final) == 12 and all(0 not in r for r in final.values())
    assert all({b % 2 for b in r} == {0, 1} for r in final.values())  # racks kept


def test_a_leader_flow_cut_short_has_solved_the_most_imbalanced_topics_first() -> None:
    """Groups are solved most-imbalanced first: a deadline that allows one group leaves the balanced topic, listed
    first, as it was, and balances the skewed one."""
    from rebalancer.plan.budget import Deadline

    balanced = [LeaderItem(("a-balanced", p), (p % 2, 1 - p % 2), p % 2) for p in range(10)]
    skewed = [LeaderItem(("z-skewed", p), (0, 1), 0) for p in range(10)]
    ticks = itertools.count()
    deadline = Deadline(1.5, clock=lambda: float(next(ticks)))  # each reading of the clock is a second later
    res = balance_leaders(balanced + skewed, frozenset({0, 1}), chunk=10, deadline=deadline)
    assert res.cut_short and (res.groups, res.groups_solved) == (2, 1)
    assert {k[0] for k in res.leaders} == {"z-skewed"}
    assert sorted(res.leaders.values()).count(1) == 5  # the skewed topic's leaders split 5/5


def test_leader_groups_solved_in_waves_give_the_same_leaders_with_or_without_a_pool(monkeypatch) -> None:
    """Waves of topic groups solved side by side in processes: the pool sets the speed, never the result (the waves
    are a constant, not the core count), every topic stays in its band as with one group after another, and the
    gate's cluster band still holds, the last group absorbing what the waves before it left."""
    import random

    from rebalancer.plan import leaders as lf

    rng = random.Random(5)
    items = []
    for t in range(24):
        for p in range(rng.randint(20, 60)):
            cands = tuple(rng.sample(range(12), 3))
            items.append(LeaderItem((f"t{t:02d}", p), cands, cands[0] if rng.random() < 0.6 else rng.choice((0, 1))))
    brokers = frozenset(range(12))
    monkeypatch.setattr(lf, "PARALLEL_FROM", 0)
    in_pool = balance_leaders(items, brokers, priority="balance", chunk=150, wave=3)
    monkeypatch.setattr(lf, "_pool", lambda waves: None)
    in_process = balance_leaders(items, brokers, priority="balance", chunk=150, wave=3)
    one_by_one = balance_leaders(items, brokers, priority="balance", chunk=150, wave=1)
    assert in_pool.groups >= 5 and in_pool.groups_solved == in_pool.groups and not in_pool.cut_short
    assert in_pool.leaders == in_process.leaders
    assert set(in_pool.leaders) == {it.key for it in items}
    assert all(in_pool.leaders[it.key] in it.candidates for it in items)
    assert in_pool.topic_violation == one_by_one.topic_violation
    # The gate's band (the tolerance) holds; within it, a wave's groups cannot trade leaders as one after another
    # can: at most one leader per broker further from the tight band.
    assert in_pool.tolerance_violation == one_by_one.tolerance_violation == 0
    assert in_pool.cluster_violation <= one_by_one.cluster_violation + len(brokers)


def _disk_between_bands() -> Cluster:
    """Ten brokers of ten single-replica partitions, broker 0's 4.91 % above the disk target: inside the gate's 5 %,
    outside the 4.75 % the placement aims at."""
    parts = [Partition(f"t{k}", b, (b,), b, (b,), (1049 if b == 0 else 995 if (b * 10 + k) % 20 < 11 else 994) * 10**6)
             for b in range(10) for k in range(10)]
    return Cluster.build([Broker(i, None) for i in range(10)], parts)


def test_a_cluster_inside_every_gate_has_nothing_placed() -> None:
    """The placement's margins say where a plan goes once it must move, not whether it must: a cluster its own plan
    left between the two was planned again with more moves (fuzz small seed 125: 22, balanced both times)."""
    from rebalancer.plan.settled import SETTLED, outside_gates
    from rebalancer.plan.targets import make_targets

    cluster = _disk_between_bands()
    plan = make_plan(cluster, "rebalance")
    assert plan.changes == () and plan.solver["placement_needed"] == SETTLED
    assert plan.summary["load"]["dimensions"]["disk"]["max_deviation_pct_after"] == 4.91
    model = load_model(cluster)
    heavier = Cluster.build(list(cluster.brokers), [dataclasses.replace(p, size_bytes=1_200_000_000)
                                                    if p.tp == ("t0", 0) else p for p in cluster.partitions])
    assert outside_gates(heavier, make_targets(heavier, "rebalance"), load_model(heavier), on_load=True) == \
        "disk outside its band (brokers 0)"
    moved = make_plan(heavier, "rebalance")
    assert moved.changes and moved.solver["placement_needed"] == "disk outside its band (brokers 0)"
    crowded = Cluster.build(list(cluster.brokers), [*cluster.partitions, *(
        Partition("extra", k, (0,), 0, (0,), 1) for k in range(3))])
    assert outside_gates(crowded, make_targets(crowded, "rebalance"), model, on_load=False) == \
        "replica counts outside their gate (brokers 0)"
