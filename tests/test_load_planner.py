"""Plans on load (``--balance load``, issue 13): disk, network and counts within their bands, the fewest bytes.

The main job's own add-brokers case, heavy-tailed sizes, mixed hardware, a network-hot topic, infeasible capacity
and bands, the CLI options, and properties of every load plan (hypothesis): RF, racks, change cap and capacity
kept, removed brokers emptied, bytes moved never below the bound.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rebalancer.errors import InputError
from rebalancer.formats import write_cluster_json
from rebalancer.load import CapacityError, dimension_loads, load_model
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan import PlanError, make_plan, plan_run_dir
from rebalancer.sim.scenarios import ScenarioParams, build_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from load_cases import heavy_tailed, mixed_hardware, network_hot  # noqa: E402
from test_plan_budget import _assert_valid  # noqa: E402


def _after(cluster: Cluster, plan) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(c.topic, c.partition): c.replicas_after for c in plan.changes}


def _within(plan, dimension: str) -> bool:
    return plan.summary["load"]["dimensions"][dimension]["outside_after"] == []


def test_main_job_add_brokers_meets_the_disk_band_near_the_bound() -> None:
    """The issue's first case: the simulated main job (12 loaded brokers + 4 new) and the real-Kafka one (6 + 2)."""
    for params, new in ((None, [12, 13, 14, 15]),
                        (ScenarioParams(brokers=6, racks=3, new_brokers=2, partitions=48, topics=4, rf=3), [6, 7])):
        cluster = build_scenario("new-brokers", params)
        plan = make_plan(cluster, "add-brokers", brokers=new)
        load = plan.summary["load"]
        assert plan.solver["balance"] == "load"
        if params is None:  # 16 brokers: every band met, network out included
            assert plan.solver["status"] == "Balanced", plan.solver.get("outside_bands")
        assert _within(plan, "disk") and load["dimensions"]["disk"]["max_deviation_pct_after"] <= 5.0
        assert load["bytes_to_bound"] <= 1.10, load["bytes_to_bound"]
        assert _within(plan, "replicas") and _within(plan, "leaders") and _within(plan, "nw_in")
        assert plan.summary["max_changes_in_a_partition"] <= 1
        for c in plan.changes:
            assert set(c.added) <= set(new)
        # The count plan on the same cluster leaves brokers outside the disk band (the issue's complaint).
        counts = make_plan(cluster, "add-brokers", brokers=new, balance="counts")
        assert counts.summary["load"]["dimensions"]["disk"]["outside_after"]


def test_heavy_tailed_rebalance_reaches_the_band_within_one_change() -> None:
    cluster = heavy_tailed(build_scenario("wix", ScenarioParams(brokers=20, racks=4, partitions=6000, topics=40)))
    sizes = sorted(p.size_bytes for p in cluster.partitions)
    assert sizes[-1] > 100 * sizes[len(sizes) // 2]  # a few partitions over 100x the median
    plan = make_plan(cluster, "rebalance", strategy="greedy")
    _assert_valid(cluster, plan, "rebalance", [])
    load = plan.summary["load"]
    assert _within(plan, "disk") and _within(plan, "nw_in") and _within(plan, "replicas")
    assert 1.0 <= load["bytes_to_bound"] <= 1.15


def test_mixed_hardware_balances_utilisation_not_bytes(tmp_path: Path) -> None:
    cluster = heavy_tailed(build_scenario("wix", ScenarioParams(brokers=16, racks=4, partitions=4000, topics=20)))
    path = mixed_hardware(cluster, tmp_path / "capacity.json")
    big = {b["brokerId"] for b in json.loads(path.read_text())["brokerCapacities"]} - {"-1"}
    model = load_model(cluster, capacity_file=path)
    plan = make_plan(cluster, "rebalance", load=model)
    assert _within(plan, "disk")
    rows = {r["broker"]: r["disk"] for r in plan.summary["load"]["brokers"]}
    util = {b: r["after"] / r["capacity"] for b, r in rows.items()}
    # Every broker's utilisation within +-5 % of the mean utilisation; the big brokers hold about twice the bytes.
    mean = sum(r["after"] for r in rows.values()) / sum(r["capacity"] for r in rows.values())
    assert all(abs(u / mean - 1) <= 0.0501 for u in util.values()), util
    small_bytes = [rows[b]["after"] for b in rows if str(b) not in big]
    big_bytes = [rows[b]["after"] for b in rows if str(b) in big]
    assert min(big_bytes) > 1.8 * max(small_bytes) * 0.95


def test_a_network_hot_topic_spreads_within_the_network_bands() -> None:
    base = heavy_tailed(build_scenario("wix", ScenarioParams(brokers=12, racks=3, partitions=3000, topics=20)))
    cluster = network_hot(base, partitions=6, factor=20.0)
    hot_topic = cluster.partitions[0].topic
    # Crowd the hot partitions onto brokers 0-2 first, as a bad history would leave them.
    parts = [replace(p, replicas=(0, 1, 2)[: len(p.replicas)], isr=(0, 1, 2)[: len(p.replicas)], leader=0)
             if p.topic == hot_topic and p.bytes_in_per_s and p.bytes_in_per_s > 10 * p.size_bytes / 604800 else p
             for p in cluster.partitions]
    brokers = [replace(b, rack=None) for b in cluster.brokers]
    cluster = Cluster.build(brokers, parts, dict(cluster.meta))
    plan = make_plan(cluster, "rebalance", max_changes_per_partition=3)
    load = plan.summary["load"]["dimensions"]
    assert load["nw_in"]["outside_before"] and _within(plan, "nw_in") and _within(plan, "nw_out"), load["nw_out"]
    assert _within(plan, "disk")


def test_capacity_that_cannot_hold_the_data_is_one_line_before_any_file(tmp_path: Path) -> None:
    cluster = build_scenario("new-brokers")
    write_cluster_json(cluster, tmp_path / "snapshot.json")
    cap = tmp_path / "capacity.json"
    cap.write_text(json.dumps({"brokerCapacities": [{"brokerId": "-1", "capacity": {"DISK": "1000"}}]}))
    with pytest.raises(CapacityError) as err:
        plan_run_dir(tmp_path, "add-brokers", brokers=[12, 13, 14, 15], capacity=cap)
    assert "\n" not in str(err.value) and "disk" in str(err.value) and "85%" in str(err.value)
    assert not (tmp_path / "plan.json").exists() and not (tmp_path / "reassignment.json").exists()


def test_a_band_that_cannot_be_met_names_the_brokers_left_outside() -> None:
    # One partition 100x the others: a +-1 % disk band cannot hold on every broker; the plan says which stay out.
    brokers = [Broker(i, None) for i in range(4)]
    parts = [Partition("t", i, (i % 4,), i % 4, (i % 4,), 100 if i else 10_000) for i in range(40)]
    cluster = Cluster.build(brokers, parts)
    plan = make_plan(cluster, "rebalance", load=load_model(cluster, band={"disk": 0.01}), balance="load")
    assert plan.solver["status"] == "Heuristic"
    outside = plan.solver["greedy"]["outside_bands"]
    assert outside and plan.summary["load"]["dimensions"]["disk"]["outside_after"]


def test_counts_stay_available_and_load_is_the_default_only_with_sizes() -> None:
    sized = build_scenario("new-brokers")
    assert make_plan(sized, "add-brokers", brokers=[12, 13, 14, 15]).solver["balance"] == "load"
    unsized = Cluster.build(list(sized.brokers), [replace(p, size_bytes=0) for p in sized.partitions])
    assert make_plan(unsized, "add-brokers", brokers=[12, 13, 14, 15]).solver["balance"] == "counts"
    with pytest.raises(PlanError, match="unknown balance"):
        make_plan(sized, "rebalance", balance="bytes")


# -- properties of every load plan ---------------------------------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn) -> tuple[Cluster, str, list[int]]:
    n_brokers = draw(st.integers(3, 8))
    n_racks = draw(st.integers(0, 3))
    brokers = [Broker(i, None if n_racks == 0 else f"r{i % n_racks}",
                      disk_capacity_bytes=draw(st.sampled_from([None, 10**7, 3 * 10**6]))) for i in range(n_brokers)]
    if any(b.disk_capacity_bytes is None for b in brokers):
        brokers = [replace(b, disk_capacity_bytes=None) for b in brokers]
    rf = draw(st.integers(1, min(3, n_brokers - 1)))
    n = draw(st.integers(4, 40))
    parts = []
    for i in range(n):
        reps = tuple(draw(st.permutations(range(n_brokers)))[:rf])
        size = draw(st.one_of(st.integers(1, 5000), st.integers(5000, 200_000)))
        parts.append(Partition(f"t{i % 3}", i, reps, reps[0], reps, size))
    mode = draw(st.sampled_from(["rebalance", "add-brokers", "remove-brokers"]))
    named = [n_brokers - 1] if mode != "rebalance" else []
    if mode == "add-brokers":
        parts = [p if named[0] not in p.replicas else replace(
            p, replicas=tuple(b if b != named[0] else next(x for x in range(n_brokers - 1) if x not in p.replicas)
                              for b in p.replicas)) for p in parts]
        parts = [replace(p, isr=p.replicas, leader=p.replicas[0]) for p in parts]
    return Cluster.build(brokers, parts), mode, named


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(), band=st.sampled_from([0.05, 0.2, 0.5]))
def test_every_load_plan_keeps_the_hard_rules_and_never_beats_the_bound(case, band) -> None:
    cluster, mode, named = case
    try:
        model = load_model(cluster, band={"disk": band})
        plan = make_plan(cluster, mode, brokers=named or None, strategy="greedy", load=model)
    except InputError:
        assume(False)  # infeasible by construction (racks, capacity): the one-line refusals are tested above
        return
    _assert_valid(cluster, plan, mode, named)
    load = plan.summary["load"]
    met = all(not d.get("outside_after") for d in load["dimensions"].values())
    # The bound holds for every plan that meets the bands (integer sizes can put them out of reach of any plan).
    assert not met or load["bytes_moved"] >= load["bytes_bound"]
    # Capacity: no broker ends above its threshold unless it already was (and then it only lost load).
    if "disk" in model.capacity:
        before = dimension_loads(cluster, model.loads, dimensions=["disk"])["disk"]
        after = dimension_loads(cluster, model.loads, _after(cluster, plan), dimensions=["disk"])["disk"]
        for b, cap in model.capacity["disk"].items():
            limit = model.threshold["disk"] * cap
            assert after[b] <= limit or after[b] <= before[b], (b, after[b], limit)


def test_the_load_program_keeps_the_time_limit_when_highs_overruns_it() -> None:
    """HiGHS 1.15 ran on for 13 minutes past a 36 s time limit on this program (16 brokers, the new ones with twice
    the disk: after a sub-MIP its search stops checking the clock). The program runs in a child process that is
    killed past the limit, so the plan stage keeps its own limit and falls back to the greedy placement."""
    import time

    cluster = build_scenario("new-brokers", ScenarioParams())
    new = set(cluster.meta["new_brokers"])
    cluster = Cluster.build([replace(b, disk_capacity_bytes=(2 if b.id in new else 1) * 10**13) for b in cluster.brokers],
                            cluster.partitions, {**cluster.meta, "topic_retention_ms": {cluster.partitions[0].topic: 86_400_000}})
    started = time.monotonic()
    plan = make_plan(cluster, "add-brokers", brokers=sorted(new), strategy="lp", time_limit=40)
    elapsed = time.monotonic() - started
    assert elapsed < 40 + 5, elapsed
    assert plan.solver["budget"]["over_by"] < 5
    _assert_valid(cluster, plan, "add-brokers", sorted(new))


def test_auto_keeps_the_load_plan_and_proves_where_the_bands_cannot_hold() -> None:
    """48 partitions on 16 brokers (9 replicas each): in add-brokers the old brokers only give, and the disk band
    cannot be met together with the count gates. ``auto`` used to retreat to a counts plan (disk far outside, no
    disk gate run: green over red). Now the load plan stands: the exact program proves that no placement meets every
    band (both steps at the gates' own bands infeasible), the plan meets the count gates with the narrowest load
    band its ladder reaches, and its status names the brokers outside and why."""
    from rebalancer.plan.planner import _counts_outside_gate

    cluster = build_scenario("new-brokers", ScenarioParams(partitions=48))
    new = sorted(cluster.meta["new_brokers"])
    auto = make_plan(cluster, "add-brokers", brokers=new)
    assert auto.solver["balance"] == "load" and auto.params["balance"] == "load"
    assert "counts planned instead" not in auto.solver["strategy_reason"]
    proof = auto.solver["bands_proof"]
    assert proof["feasible"] is False and proof["reachable_widen"] is not None
    assert [st["outcome"] for st in proof["steps"] if st["widen"] == 1.0] == ["infeasible", "infeasible"]
    assert auto.solver["status"] == "Heuristic" and auto.solver["outside_bands"]["disk"] and auto.solver["outside_why"]
    assert _counts_outside_gate(auto, auto_model := load_model(cluster)) == {}, auto_model.band


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_main_jobs_cluster_meets_every_disk_band_at_the_bytes_bound(seed: int) -> None:
    """The main job's cluster with a real run's size noise: the greedy placement leaves the new brokers outside the
    disk band, and the program, the gates' bands as constraints, meets them all at the fewest bytes (the demo once
    ended with bytes 39 % off target behind a green report)."""
    from load_cases import main_job

    plan = make_plan(main_job(seed), "add-brokers", brokers=[6, 7])
    assert plan.solver["bands_proof"]["feasible"] is True
    assert _within(plan, "disk") and _within(plan, "replicas")
    assert plan.summary["load"]["bytes_to_bound"] <= 1.02


def test_a_plan_is_the_same_on_a_busy_machine(tmp_path: Path) -> None:
    """Work limits, not clocks: the main job's cluster planned alone and beside two CPU-burning processes gives one
    content hash (the program's 10 s wall-clock cap made the plan depend on how busy the machine was)."""
    import subprocess

    from load_cases import main_job

    cluster = main_job(5)
    quiet = make_plan(cluster, "add-brokers", brokers=[6, 7])
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = make_plan(cluster, "add-brokers", brokers=[6, 7])
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    assert busy.hash == quiet.hash
    assert busy.solver["bands_proof"] == {**quiet.solver["bands_proof"], "steps": [
        {**st, "seconds": b["seconds"]} for st, b in zip(quiet.solver["bands_proof"]["steps"],
                                                         busy.solver["bands_proof"]["steps"], strict=True)]}


def test_a_plan_above_the_exact_programs_size_is_the_same_on_a_busy_machine() -> None:
    """A production-shaped rebalance of 1,412 replicas (fuzz seed 38), where greedy leaves brokers outside a band and
    the exact program does not run: planned alone and beside two CPU-burning processes, one content hash. (auto's
    weighted program stopped at a 10 s clock here, so the plan depended on how busy the machine was.)"""
    import subprocess

    from load_cases import family

    from rebalancer.plan.place_load import LP_EXACT_MAX_REPLICAS

    cluster, mode, new = family("small", 38)
    assert cluster.replica_count > LP_EXACT_MAX_REPLICAS and not new
    quiet = make_plan(cluster, mode)
    assert quiet.solver["outside_bands"]
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        busy = make_plan(cluster, mode)
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    assert busy.hash == quiet.hash


def test_each_program_of_the_ladder_has_its_own_safety_net(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact program's steps and the weighted program stop at their node limits; the wall clock is each one's
    own safety net. It was one net shared along the ladder: a step that took 48 s left the next 12 s, which cut it
    at whatever a busy machine had reached, and the plan depended on the load (fuzz small seeds 111, 167). Here each
    step says it took 55 s; every program still gets the whole net."""
    from rebalancer.plan import place_load as planner

    real = planner.lp_load
    limits: list[float] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        limits.append(args[1])
        changed, stats = real(*args, **kwargs)
        return changed, {**stats, "seconds": 55.0}

    monkeypatch.setattr(planner, "lp_load", slow)
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=48))
    plan = make_plan(cluster, "add-brokers", brokers=sorted(cluster.meta["new_brokers"]))
    steps = plan.solver["bands_proof"]["steps"]
    assert len(steps) >= 3 and len(limits) >= len(steps), steps  # both steps at the gates' bands, then widened
    assert all(limit == pytest.approx(planner.LP_SAFETY_SECONDS, abs=1.0) for limit in limits), limits
    assert plan.solver.cut_short == (), plan.solver.status


def test_the_exact_ladder_ends_by_the_plans_work_limit_not_a_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster above, whose ladder proves its first steps infeasible and goes on widening, with each program
    charged 60 % of the plan's work limit: the ladder stops after its first step, as a second like it would pass the
    limit, and no program follows it in the phase (neither a widened step nor the weighted program, of the ladder's
    size); the work limit says it ended the phase and no phase is cut by its clock. The ladder asked only its phase's
    clock between steps, so a step past the work limit was started and cut by that clock, and the plan depended on
    the load (fuzz small seed 167: three hashes, 1.08-1.28x the bytes bound, in three runs on one quiet machine)."""
    from rebalancer.plan import place_load as planner

    real = planner.lp_load
    phases: list[str | None] = []

    def heavy(*args: Any, **kwargs: Any) -> Any:
        work = kwargs["work"]
        phases.append(work.phase)
        changed, stats = real(*args, **kwargs)
        work.last = int(0.6 * work.limit)  # as if this one program had taken 60 % of it
        work.spent += work.last
        return changed, stats

    monkeypatch.setattr(planner, "lp_load", heavy)
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=48))
    new = sorted(cluster.meta["new_brokers"])
    plan = make_plan(cluster, "add-brokers", brokers=new)
    steps = plan.solver["bands_proof"]["steps"]
    assert len(steps) == 1 and steps[0]["outcome"] == "infeasible", steps
    assert phases.count("lp") == 1, phases
    record = plan.solver["budget"]
    assert record["work"]["stopped_in"] == "lp" and record["expired_in"] is None, record
    _assert_valid(cluster, plan, "add-brokers", new)


@pytest.mark.parametrize("mode", ["rebalance", "add-brokers"])
def test_the_ladder_runs_its_one_way_step_only_where_a_broker_moves_one_way(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ladder's second step ("one way no worse") relaxes only brokers the mode lets give or take alone (add-
    brokers: the old ones give, the new take). In a rebalance every broker does both, the program is the first
    step's again, and the ladder records the first step's answer for it instead of solving it twice (fuzz small seed
    167: 64 s and 300k of the plan's work for the same "Infeasible"). Here every exact program says "Infeasible"."""
    from rebalancer.plan import place_load as planner

    real = planner.lp_load
    exact: list[tuple[float, bool]] = []

    def proved(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("hard"):
            return real(*args, **kwargs)
        exact.append((kwargs["widen"], kwargs["lenient"]))
        return None, {"status": "Infeasible", "outcome": "infeasible", "have_solution": False, "objective": None,
                      "dual_bound": None, "gap": None, "seconds": 0.5, "lp_iterations": 0, "nodes": 0,
                      "variables": 1, "constraints": 1}

    monkeypatch.setattr(planner, "lp_load", proved)
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=48))
    new = sorted(cluster.meta["new_brokers"]) if mode == "add-brokers" else []
    plan = make_plan(cluster, mode, brokers=new or None, balance="load", strategy="lp")
    steps = plan.solver["bands_proof"]["steps"]
    assert [(st["widen"], st["one_way_no_worse"]) for st in steps[:2]] == [(1.0, False), (1.0, True)], steps
    if mode == "rebalance":
        assert (1.0, True) not in exact and exact[0] == (1.0, False), exact
        assert steps[1]["same_as_strict"] and steps[1]["status"] == "Infeasible" and steps[1]["seconds"] == 0.0
    else:
        assert exact[:2] == [(1.0, False), (1.0, True)] and "same_as_strict" not in steps[1], exact
    assert plan.solver["bands_proof"]["feasible"] is False  # both steps at the gates' bands said "Infeasible"
    _assert_valid(cluster, plan, mode, new)


@pytest.mark.slow
def test_greedys_placement_no_program_betters_is_repaired_by_the_neighbourhoods(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fuzz family small, seed 28 (102 replicas, add-brokers), every whole-cluster program saying "Infeasible" (as the
    ladder proves on seed 167, where the work then refused the weighted program): the plan keeps greedy's placement,
    and the neighbourhoods (their own programs, a few brokers at a time) bring it nearer the gates' bands, as they do
    above the program's size. Greedy's placement went out as it was, plus the counts' repair (seed 167: disk 22 %
    off its target, where the neighbourhoods reach 5.3 %)."""
    import load_cases

    from rebalancer.plan import place_load as planner

    def proved(*args: Any, **kwargs: Any) -> Any:
        return None, {"status": "Infeasible", "outcome": "infeasible", "have_solution": False, "objective": None,
                      "dual_bound": None, "gap": None, "seconds": 0.5, "lp_iterations": 0, "nodes": 0,
                      "variables": 1, "constraints": 1}

    real = planner._trim_kept
    judged: list[tuple[Any, Any]] = []

    def spy(req: Any, problem: Any, placed: Any, trimmed: Any, *args: Any) -> Any:
        kept = real(req, problem, placed, trimmed, *args)
        band = req.model.band["replicas"]
        judged.append((planner._gate_key(problem, placed, band), planner._gate_key(problem, kept, band)))
        return kept

    monkeypatch.setattr(planner, "lp_load", proved)
    monkeypatch.setattr(planner, "_trim_kept", spy)
    cluster, mode, new = load_cases.family("small", 28)
    plan = make_plan(cluster, mode, brokers=new or None)
    assert plan.solver["placement_used"] == "greedy" and plan.solver["neighbourhoods"]["kept"] > 0
    assert len(judged) == 1, judged
    (greedys, kept) = judged[0]
    assert kept[:2] < greedys[:2], judged  # nearer the gates: the counts first, then the loads
    _assert_valid(cluster, plan, mode, new)


def test_a_program_its_safety_net_stopped_says_so_in_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a program's wall clock stops it before its node limit, the placement depends on how busy the machine
    was: the plan says so (the phase cut short, in its status and its approval request), and stays valid."""
    from rebalancer.plan import place_load as planner

    monkeypatch.setattr(planner, "LP_SAFETY_SECONDS", 0.01)
    cluster = build_scenario("new-brokers", ScenarioParams(partitions=48))
    new = sorted(cluster.meta["new_brokers"])
    plan = make_plan(cluster, "add-brokers", brokers=new)
    assert (plan.solver.state, plan.solver.cut_in) == ("Time limit reached", "lp"), plan.solver.status
    assert "lp" in plan.solver.cut_short
    assert plan.solver["budget"]["phases"]["lp"]["cut_short"] is True
    _assert_valid(cluster, plan, "add-brokers", new)


def test_a_broker_short_of_network_out_and_over_its_leader_count_hands_over() -> None:
    """Broker 0 leads six quiet partitions: below its network-out band, one leader above its count band (at the
    ceiling no hand-over may take it past). Taking a busy partition is refused; handing over a quiet one brings its
    count into the band, and the pass does that (the 600k production-shaped plan failed the leader gate on one such
    broker: 765 leaders for a median of 662)."""
    from rebalancer.load import Band
    from rebalancer.plan.leader_load import LeaderLoadInput, leader_load

    leader = [0] * 6 + [1, 1, 2, 2]
    units = [1.0] * 6 + [10.0] * 4
    cands = [(0, 1, 2)] * 10
    nw_out = {b: Band(13, 18, 46 / 3) for b in (0, 1, 2)}
    counts = {b: Band(2, 5, 10 / 3) for b in (0, 1, 2)}
    inp = LeaderLoadInput(leader, cands, {"nw_out": units, "leaders": [1.0] * 10}, {"nw_out": nw_out, "leaders": counts},
                          {"nw_out": 1.0, "leaders": 1.0}, count_band=counts)
    changed, stats = leader_load(inp)
    after = [changed.get(i, b) for i, b in enumerate(leader)]
    assert after.count(0) == 5, (after, stats)
    assert all(2 <= after.count(b) <= 5 for b in (0, 1, 2))


def test_a_leader_count_the_flow_left_below_the_gates_band_is_brought_inside() -> None:
    """Six brokers, one topic of 600 partitions (RF 3, above the exact program's size): broker 0 leads 75
    partitions of 1.4 bytes/s, the others 105 of 1.0, so every broker's network out is the same (its band 30 %
    wide) and no hand-over helps it. A count band any counts inside of pass the leader gate is 92-105: broker 0's
    75 is 30 below the median of 105, which fails the gate (fuzz medium 11: the flow per topic group left a broker
    at 75 leaders, and the hand-overs, which only kept it no further out, filled the band's top to a median of
    89). The hand-overs bring it inside."""
    from rebalancer.balance import counts_excess as _count_gate_excess
    from rebalancer.plan.budget import Deadline
    from rebalancer.plan.leader_exact import EXACT_MAX_PARTITIONS
    from rebalancer.plan.leader_pass import _leaders_on_load
    from rebalancer.plan.load_problem import median_safe_band
    from rebalancer.plan.targets import make_targets

    leads = [0] * 75 + [b for b in range(1, 6) for _ in range(105)]
    assert len(leads) > EXACT_MAX_PARTITIONS
    parts = [Partition("t", i, (b, (b + 1) % 6, (b + 2) % 6), b, (b, (b + 1) % 6, (b + 2) % 6), size_bytes=100,
                       bytes_in_per_s=1.4 if b == 0 else 1.0) for i, b in enumerate(leads)]
    cluster = Cluster([Broker(b) for b in range(6)], parts)
    model = load_model(cluster, band={"nw_out": 0.3})
    safe = median_safe_band(len(parts), range(6), model.band["leaders"])[0]
    assert (safe.floor, safe.ceil) == (92, 105)
    before = {b: leads.count(b) for b in range(6)}
    assert [b for b, x in _count_gate_excess(before, model.band["leaders"]).items() if x] == [0]
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    _leaders_on_load(cluster, assignment, make_targets(cluster, "rebalance"), model, Deadline.never())
    after = {b: 0 for b in range(6)}
    for p in parts:
        after[assignment.get(p.tp, p.replicas)[0]] += 1
    assert all(safe.floor <= n <= safe.ceil for n in after.values()), after
    assert not any(_count_gate_excess(after, model.band["leaders"]).values()), after


def test_a_leader_count_outside_its_gate_is_mended_past_a_topic_band() -> None:
    """Six brokers; topic "a" (300 partitions) lives on brokers 1-5 only, topic "b" (300) on all six, broker 0 in
    half of b's. Broker 0 can lead b alone, and leads its band's ceiling of it (50), so it stands 60 leaders under
    the median of 110, outside the leader gate, and no hand-over that keeps b within its band can help (fuzz medium
    11: a broker holding a few busy partitions, at its band's ceiling in every topic it followed, was left 17
    leaders under the median). The count gate is a gate, a topic's band only where the plan can claim it: the
    hand-overs take b past its band to bring every count inside, and say how far past."""
    from rebalancer.balance import counts_excess as _count_gate_excess
    from rebalancer.plan.budget import Deadline
    from rebalancer.plan.leader_exact import EXACT_MAX_PARTITIONS
    from rebalancer.plan.leader_pass import _leaders_on_load
    from rebalancer.plan.targets import make_targets

    parts = [Partition("a", i, reps, reps[0], reps, size_bytes=100, bytes_in_per_s=1.0)
             for i, reps in enumerate((1 + k % 5, 1 + (k + 1) % 5, 1 + (k + 2) % 5) for k in range(300))]
    parts += [Partition("b", i, reps, reps[0], reps, size_bytes=100, bytes_in_per_s=1.0)
              for i, reps in enumerate((k % 6, (k + 1) % 6, (k + 2) % 6) for k in range(300))]
    assert len(parts) > EXACT_MAX_PARTITIONS
    cluster = Cluster([Broker(b) for b in range(6)], parts)
    model = load_model(cluster, band={"nw_out": 0.3})
    before = {b: sum(p.replicas[0] == b for p in parts) for b in range(6)}
    assert before == {0: 50, 1: 110, 2: 110, 3: 110, 4: 110, 5: 110}
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    stats = _leaders_on_load(cluster, assignment, make_targets(cluster, "rebalance"), model, Deadline.never())
    after = {b: 0 for b in range(6)}
    for p in parts:
        after[assignment.get(p.tp, p.replicas)[0]] += 1
    assert not any(_count_gate_excess(after, model.band["leaders"]).values()), after
    assert stats["topic_band_violation_after"] > 0  # b past its band, and said


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_leader_pass_indexes_every_candidate_as_the_loop_would(data: st.DataObject) -> None:
    """The leader pass's per-broker lists (partitions it leads, those it could lead, each sorted by load then
    partition) and per-topic counts are built in columns; they hold what a loop over every candidate holds, ties on
    load included."""
    from rebalancer.load import Band
    from rebalancer.plan.leader_load import LeaderLoadInput, _Leadership

    brokers = data.draw(st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True))
    n = data.draw(st.integers(0, 30))
    cands = [tuple(data.draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=3, unique=True))) for _ in range(n)]
    leader = [data.draw(st.sampled_from(c)) for c in cands]
    units = [float(data.draw(st.integers(0, 3))) for _ in range(n)]  # few values: ties
    topics = [data.draw(st.sampled_from(["a", "b", "c"])) for _ in range(n)]
    band = {b: Band(0, 10, 5.0) for b in brokers}
    inp = LeaderLoadInput(leader, cands, {"nw_out": units}, {"nw_out": band}, {"nw_out": 1.0}, topics=topics,
                          topic_band={t: Band(0, 5, 1.0) for t in "abc"})
    state = _Leadership(inp)

    def loop(now: list[int]) -> tuple[dict[int, list[tuple[float, int]]], dict[int, list[tuple[float, int]]]]:
        led: dict[int, list[tuple[float, int]]] = {b: [] for b in state.brokers}
        could: dict[int, list[tuple[float, int]]] = {b: [] for b in state.brokers}
        for i, cs in enumerate(cands):
            for b in cs:
                (led if b == now[i] else could)[b].append((units[i], i))
        return {b: sorted(x) for b, x in led.items()}, {b: sorted(x) for b, x in could.items()}

    per_topic: dict[tuple[str, int], int] = {}
    for t, b in zip(topics, leader, strict=True):
        per_topic[(t, b)] = per_topic.get((t, b), 0) + 1
    assert state.per_topic == per_topic
    # The lists are built when a broker's are first asked for, some before hand-overs, the others after: either
    # way they hold what the loop over the leaders as they are then holds.
    early = data.draw(st.lists(st.sampled_from(state.brokers), max_size=4))
    for b in early:
        state.lists(b)
    movable = [i for i in range(n) if len(cands[i]) > 1]
    for i in data.draw(st.lists(st.sampled_from(movable), max_size=6)) if movable else []:
        a = state.leader[i]
        state.move(i, a, data.draw(st.sampled_from([c for c in cands[i] if c != a])))
    led, could = loop(state.leader)
    assert {b: state.lists(b) for b in state.brokers} == {b: (led[b], could[b]) for b in state.brokers}


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_leader_items_topic_bands_and_the_leader_bound_are_the_loops(data: st.DataObject) -> None:
    """The leader pass's inputs have fast paths (a partition in sync, all brokers eligible: its replicas are its
    candidates; topic bands counted run by run; the bound from bands computed once): on clusters with dead or
    ineligible brokers, shrunk ISRs, moved replicas and topics in any order they equal the plain loops."""
    from rebalancer.load import Band
    from rebalancer.plan.bounds import leader_change_bound
    from rebalancer.plan.leader_pass import leader_items
    from rebalancer.plan.leaders import LeaderItem, band, topic_bands

    n_brokers = data.draw(st.integers(3, 6))
    dead = set(data.draw(st.lists(st.integers(0, n_brokers - 1), max_size=1)))
    brokers = [Broker(b, rack=None, alive=b not in dead) for b in range(n_brokers)]
    parts = []
    for k in range(data.draw(st.integers(1, 25))):
        reps = tuple(data.draw(st.permutations(range(n_brokers)))[:3])
        isr = tuple(b for b in reps if b == reps[0] or data.draw(st.booleans()))
        parts.append(Partition(data.draw(st.sampled_from(["a", "b", "c"])), k, reps, isr=isr, leader=reps[0]))
    cluster = Cluster.build(brokers, parts)
    moved = {}
    for p in cluster.partitions:
        if data.draw(st.booleans()):
            free = [b for b in range(n_brokers) if b not in p.replicas]
            if free:
                moved[p.tp] = (data.draw(st.sampled_from(free)), *p.replicas[1:])
    everyone = frozenset(range(n_brokers))
    eligible = data.draw(st.one_of(st.just(everyone), st.frozensets(st.sampled_from(sorted(everyone)), min_size=1)))
    for replicas_moved in (True, False):
        may_lead = {b.id for b in cluster.brokers if b.alive and b.id in eligible}
        expected = []
        for p in cluster.partitions:
            reps = moved.get(p.tp, p.replicas)
            if replicas_moved and reps != p.replicas:
                cands = tuple(b for b in reps if b in may_lead and (b in p.isr or b not in p.replicas))
            else:
                cands = tuple(b for b in reps if b in may_lead and b in p.isr)
            expected.append(LeaderItem(p.tp, cands, p.replicas[0]))
        assert leader_items(cluster, moved, eligible, replicas_moved) == expected
    items = data.draw(st.permutations(expected))  # topics interleaved
    counts: dict[str, int] = {}
    hosts: dict[str, set[int]] = {}
    for it in items:
        counts[it.key[0]] = counts.get(it.key[0], 0) + 1
        hosts.setdefault(it.key[0], set()).update(it.candidates)
    bands = topic_bands(items)
    assert bands == {t: (band(counts[t], len(hosts[t])) if hosts[t] else Band(0, 0, 0.0), frozenset(hosts[t]))
                     for t in counts}
    assert leader_change_bound(items, bands) == leader_change_bound(items)


@settings(max_examples=examples(400), deadline=None)
@given(st.integers(2, 40), st.integers(0, 80), st.sampled_from([0.05, 0.1, 0.15, 0.3]), st.data())
def test_counts_inside_the_median_safe_band_pass_the_count_gate(n: int, per: int, band: float, data) -> None:
    """The count gates measure from the median (|count - median| <= max(band x median, 1)): a band around the average
    does not promise that (counts 14-18 around 15.6 have a median of 15, and 18 fails). Any counts inside
    ``median_safe_band`` pass, and the band holds the average (counts summing to the total fit)."""
    import statistics

    from rebalancer.plan.load_problem import median_safe_band

    total = n * per + data.draw(st.integers(0, n - 1))
    b = median_safe_band(total, range(n), band)[0]
    assert b.floor * n <= total <= b.ceil * n
    counts = data.draw(st.lists(st.integers(b.floor, b.ceil), min_size=n, max_size=n))
    med = statistics.median(counts)
    assert all(abs(c - med) <= max(band * med, 1.0) + 1e-9 for c in counts)


def _two_brokers(big: int, small: int, n: int) -> tuple[object, list[float]]:
    """Broker 0 holds ``n`` partitions of ``big`` bytes, broker 1 ``n`` of ``small`` (RF 1, one rack each, a
    rebalance: both may give and take)."""
    from rebalancer.load import Band
    from rebalancer.plan.load_problem import LoadInput, count_gate_band

    sizes = [float(big)] * n + [float(small)] * n
    total = sum(sizes)
    disk = {b: Band(int(total / 2 * 0.95), int(total / 2 * 1.05), total / 2) for b in (0, 1)}
    counts = {b: Band(n, n, float(n)) for b in (0, 1)}
    inp = LoadInput(replicas=[(0,)] * n + [(1,)] * n, topics=["t"] * (2 * n),
                    units={"disk": sizes, "replicas": [1.0] * (2 * n)}, bands={"disk": disk, "replicas": counts},
                    rack={0: "a", 1: "b"}, receivers=frozenset({0, 1}), givers=frozenset({0, 1}),
                    removed=frozenset(), weight={"disk": 100.0, "replicas": 1.0},
                    gate_bands={"disk": disk, "replicas": count_gate_band(2 * n, [0, 1], 0.15)})
    return inp, sizes


def test_greedy_trades_unlike_replicas_where_no_single_move_helps() -> None:
    """Cruise Control's swap: two 30 GB partitions on one broker, two of 20 GB on the other, bands 47.5-52.5 GB. Any
    one move overshoots (30/70 or 80/20); trading a 30 for a 20 moves their 10 GB difference: 50/50, counts kept."""
    from rebalancer.plan.load_greedy import load_greedy
    from rebalancer.plan.load_problem import evaluate

    inp, sizes = _two_brokers(30, 20, 2)
    changed, stats = load_greedy(inp)
    placement = [changed.get(i, r) for i, r in enumerate(inp.replicas)]
    disk = {b: sum(s for s, reps in zip(sizes, placement, strict=True) if b in reps) for b in (0, 1)}
    count = {b: sum(1 for reps in placement if b in reps) for b in (0, 1)}
    assert disk == {0: 50, 1: 50} and count == {0: 2, 1: 2}, (disk, count, stats)
    assert stats["swaps"] == 1 and stats["moves"] == 2 and stats["outside_bands"] == []
    assert evaluate(inp, changed, gates=True) == (0.0, 50.0)


def test_add_brokers_proves_by_a_sum_that_old_brokers_cannot_shed_their_excess() -> None:
    """Broker 0 holds 600 of 800 one-MiB partitions; add-brokers may only move them onto new broker 3, whose band ends
    at 210: 390 MiB must leave broker 0 and 210 fit. The plan says so at a size the exact program does not take
    (800 replicas): infeasible by the mode's sum, broker 0 binding; brokers 1 and 2 (100 each, below a band they may
    not take into) are out of reach whatever the placement."""
    from rebalancer.plan.place_load import LP_EXACT_MAX_REPLICAS

    mib = 1024 * 1024
    brokers = [Broker(id=b, rack=r) for b, r in ((0, "a"), (1, "b"), (2, "c"), (3, "d"))]
    holders = [0] * 600 + [1] * 100 + [2] * 100
    parts = [Partition(topic=f"t{i // 100}", partition=i % 100, replicas=(b,), leader=b, isr=(b,), size_bytes=mib)
             for i, b in enumerate(holders)]
    cluster = Cluster.build(brokers, parts)
    assert cluster.replica_count > LP_EXACT_MAX_REPLICAS
    plan = make_plan(cluster, "add-brokers", brokers=[3])
    proof = plan.solver["bands_proof"]
    assert proof["feasible"] is False, proof
    assert proof["by_sum"]["by"] == "mode" and proof["by_sum"]["givers"] == [0] and proof["by_sum"]["takers"] == [3]
    assert proof["by_sum"]["must_leave"] > proof["by_sum"]["room"] > 0
    assert proof["one_way"]["disk"] == [1, 2]
    # The counts too: brokers 1 and 2 keep at most 100 replicas, so the median is at most 117.5 and every count at
    # most 135: 470 of the 800 fit.
    counts = proof["counts"]
    assert (counts["lowest_giver"], counts["givers"], counts["takers"], counts["replicas"]) == (100, [0, 1, 2], [3], 800)
    assert "replica-count gate" in plan.solver["outside_why"]  # what `rebalancer plan` prints
    # The approval request's first line says which brokers, and why no placement can do better.
    from rebalancer.runbook import _bands_unmet

    first = _bands_unmet(plan.to_dict())[0]
    assert first.startswith("**Not every band is met**: disk: broker(s) 0") and "only give" in first, first
    # ... the counts' too, by their own sum
    assert "replica\\-count gate" in first and "holds 100 replicas" in first, first
    # the plan still fills broker 3 to its band, from broker 0 only
    moved_to = {b for c in plan.changes for b in c.replicas_after if b not in c.replicas_before}
    assert moved_to == {3} and {b for c in plan.changes for b in c.replicas_before} == {0}


@pytest.mark.parametrize(("old", "fits"), [((50, 50, 50), True), ((60, 50, 40), True), ((100, 20, 30), False)])
def test_the_mode_proves_the_count_gate_out_of_reach_only_where_no_median_fits(old: tuple[int, ...],
                                                                                fits: bool) -> None:
    """Add-brokers onto broker 3: old brokers may only give, so the gate (15 % of the median, one count at least) is
    out of reach where a giver is too low for any median the others allow. 50/50/50 and 60/50/40 (150 replicas, a
    median near 40 fits everyone once broker 3 takes its share) fit; 100/20/30 cannot: the median is at most 23.5
    with broker 1 at 20, every count at most 27, and 150 replicas do not fit in 27 + 20 + 27 + 27."""
    from rebalancer.plan.load_problem import load_input
    from rebalancer.plan.sum_proofs import count_proof
    from rebalancer.plan.targets import make_targets

    brokers = [Broker(id=b, rack=r) for b, r in ((0, "a"), (1, "b"), (2, "c"), (3, "d"))]
    holders = [b for b, n in enumerate(old) for _ in range(n)]
    parts = [Partition(topic="t", partition=i, replicas=(b,), leader=b, isr=(b,), size_bytes=1024)
             for i, b in enumerate(holders)]
    cluster = Cluster.build(brokers, parts)
    inp = load_input(cluster, load_model(cluster), make_targets(cluster, "add-brokers", [3]), 1)
    found = count_proof(inp)
    assert (found is None) is fits, found
    if not fits:
        assert found["lowest_giver"] == 20 and found["takers"] == [3]
    # a rebalance lets every broker give and take: no sum of the mode
    assert count_proof(load_input(cluster, load_model(cluster), make_targets(cluster, "rebalance", None), 1)) is None


@pytest.mark.parametrize(("per_rack", "partitions", "proof"), [
    ((2, 2, 2), 210, None), ((3, 2, 2), 210, "spread"), ((3, 3, 2), 210, "spread"), ((4, 4, 3), 210, "median"),
    ((5, 4, 4), 132, None), ((5, 4, 4), 134, "median")])
def test_racks_that_pin_every_replica_prove_the_count_gate_out_of_reach(per_rack: tuple[int, ...], partitions: int,
                                                                        proof: str | None) -> None:
    """RF 3 on three racks, every partition on all three: each rack holds all its partitions' replicas whatever the
    plan. Racks of 3, 2 and 2 brokers (or 3, 3 and 2) hold 70 and 105 per broker: no median is within 15 % of both
    (fuzz small seed 91). Racks of 4, 4 and 3 hold 52 or 53 and 70: a median of 61 is within 15 % of both, but at
    most three brokers can hold 61 or more, not the six a median of 61 needs (the median those counts have, 52.5,
    fails 70). Racks of 5, 4 and 4 with 132 partitions: 26-27 on the first rack, counts 26-34 around a median of 30
    pass (fuzz small seed 87: no proof); with 134 (seed 123) the median is at most 30, and there a rack of 4 holding
    134 with a broker at or below 30 puts another above 34. Racks of 2, 2 and 2 hold 105 each."""
    from rebalancer.plan.load_problem import load_input
    from rebalancer.plan.sum_proofs import count_proof, explain_counts
    from rebalancer.plan.targets import make_targets

    racks = {}
    for r, n in zip("abc", per_rack, strict=True):
        for _ in range(n):
            racks[len(racks)] = r
    by_rack = {r: [b for b, x in racks.items() if x == r] for r in "abc"}
    parts = []
    for i in range(partitions):
        reps = tuple(by_rack[r][i % len(by_rack[r])] for r in "abc")
        parts.append(Partition(topic="t", partition=i, replicas=reps, leader=reps[0], isr=reps, size_bytes=1024))
    cluster = Cluster.build([Broker(id=b, rack=r) for b, r in racks.items()], parts)
    found = count_proof(load_input(cluster, load_model(cluster), make_targets(cluster, "rebalance", None), 1))
    assert (found is None) is (proof is None), found
    if proof == "spread":
        assert (found["by"], found["high_rack"], found["at_least"], found["low_rack"], found["at_most"]) == (
            "racks", "c", 105, "a", 70)
    elif proof == "median":
        assert found["by"] == "racks" and found["median"] and found["racks"]["a"] == {
            "brokers": per_rack[0], "pinned": partitions, "reachable": partitions}, found
        assert "half the brokers at or below it" in explain_counts(found)


def test_no_sum_proves_anything_where_brokers_may_both_give_and_take_across_racks() -> None:
    from rebalancer.plan.sum_proofs import one_way, sum_proof

    inp, _ = _two_brokers(30, 20, 2)
    assert sum_proof(inp) is None and one_way(inp) == {}


def test_racks_that_pin_every_byte_prove_the_disk_bands_out_of_reach() -> None:
    """RF 3 on 3 racks of 3, 3 and 2 brokers: every byte stays in its rack, so the 2-broker rack holds a third of the
    data where its bands allow a quarter. A rebalance proves it by the racks' sum, at any size, and names the rack."""
    from rebalancer.plan.place_load import LP_EXACT_MAX_REPLICAS

    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c", 6: "a", 7: "b"}
    brokers = [Broker(id=b, rack=r) for b, r in racks.items()]
    by_rack = {r: [b for b, x in racks.items() if x == r] for r in "abc"}
    parts = []
    for i in range(240):
        reps = tuple(by_rack[r][i % len(by_rack[r])] for r in "abc")
        parts.append(Partition(topic=f"t{i % 8}", partition=i // 8, replicas=reps, leader=reps[0], isr=reps,
                               size_bytes=1024 * 1024))
    cluster = Cluster.build(brokers, parts)
    assert cluster.replica_count > LP_EXACT_MAX_REPLICAS
    proof = make_plan(cluster, "rebalance").solver["bands_proof"]
    assert proof["feasible"] is False and proof["by_sum"]["by"] == "racks", proof
    sides = {r["rack"]: (r["side"], r["brokers"]) for r in proof["by_sum"]["racks"]}
    assert sides == {"a": ("below", [0, 3, 6]), "b": ("below", [1, 4, 7]), "c": ("above", [2, 5])}


def test_counts_reach_their_gate_beside_replicas_too_large_for_any_band(tmp_path: Path) -> None:
    """Two partitions each larger than a broker's share of everything, both on broker 0; 840 small ones of lognormal
    sizes, 40 to 180 per broker, one replica each. Disk is out of reach (a size's sum), every other broker lies below
    its floor, and no move between two of them brings either nearer: the load search and the counts' repair left
    brokers 0 and 1 with 3 and 1 replicas, the others 123-178 around a median of 134.5 (fuzz small seed 101's
    shape). The counts' own pass moves the lightest replicas until every count passes its gate (95-128; disk's worst
    broker 60.0 -> 62.9 % above its target); the disk gate still fails, saying why."""
    import random
    from collections import Counter

    from rebalancer.validate import GateFailure, validate_run_dir

    rnd = random.Random(0)
    mib = 1024 * 1024
    parts = [Partition(topic=f"t{i % 40}", partition=i, replicas=(b,), leader=b, isr=(b,),
                       size_bytes=int(mib * rnd.lognormvariate(0, 1.5)) + 1)
             for i, b in enumerate(b for b in range(8) for _ in range(40 + 20 * b))]
    share = sum(p.size_bytes for p in parts) // 3
    parts += [Partition(topic="big", partition=k, replicas=(0,), leader=0, isr=(0,), size_bytes=share) for k in (0, 1)]
    cluster = Cluster.build([Broker(id=b, rack=None) for b in range(8)], parts)
    plan = make_plan(cluster, "rebalance")
    assert plan.solver["bands_proof"]["by_sum"]["by"] == "size"
    fixed = plan.solver.get("count_repair_by_counts", {})
    assert fixed["kept"] and fixed["after"][0] == 0, fixed
    after = {(c.topic, c.partition): tuple(c.replicas_after) for c in plan.changes}
    count = Counter(b for p in cluster.partitions for b in after.get(p.tp, p.replicas))
    assert plan.summary["max_deviation_pct"]["replicas_after"] <= 15.0, sorted(count.items())
    # the gates: disk fails, with the plan's proof; the counts pass
    write_cluster_json(cluster, tmp_path / "snapshot.json")
    plan_run_dir(tmp_path, "rebalance")
    with pytest.raises(GateFailure) as failed:
        validate_run_dir(tmp_path)
    line = str(failed.value)
    assert "disk-balance" in line and "replica-balance" not in line and "topic big" in line, line


def test_a_replica_larger_than_every_band_proves_them_out_of_reach() -> None:
    """One 10 MiB partition among twenty of 1 MiB on four brokers: every band ends near 7.9 MiB, so whichever broker
    holds the big one is above its band. A rebalance says so, naming the topic and the broker."""
    mib = 1024 * 1024
    brokers = [Broker(id=b, rack=r) for b, r in ((0, "a"), (1, "b"), (2, "c"), (3, "d"))]
    parts = [Partition(topic="big", partition=0, replicas=(0,), leader=0, isr=(0,), size_bytes=10 * mib)]
    parts += [Partition(topic="small", partition=i, replicas=(1 + i % 3,), leader=1 + i % 3, isr=(1 + i % 3,),
                        size_bytes=mib) for i in range(20)]
    plan = make_plan(Cluster.build(brokers, parts), "rebalance")
    proof = plan.solver["bands_proof"]
    assert proof["feasible"] is False and proof["by_sum"]["by"] == "size", proof
    assert proof["by_sum"]["topic"] == "big" and proof["by_sum"]["broker"] == 0
    assert proof["by_sum"]["bytes"] == 10 * mib > proof["by_sum"]["ceiling"]


def _greedy_of(cluster: Cluster, mode: str, new: list[int], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Any]:
    """The load problem ``make_plan`` builds for the cluster, what ``load_greedy`` made of it (the plan's later steps
    aside) and the plan."""
    import rebalancer.plan.place_load as planner

    seen: dict[str, Any] = {}
    greedy = planner.load_greedy

    def spy(problem: Any, deadline: Any = None) -> Any:
        changed, stats = greedy(problem, deadline)
        seen["problem"], seen["result"] = problem, (dict(changed), dict(stats))  # as greedy left them
        return changed, stats

    monkeypatch.setattr(planner, "load_greedy", spy)
    plan = make_plan(cluster, mode, brokers=new or None)
    return seen["problem"], seen["result"], plan


def test_greedy_moves_a_replica_it_added_on_under_the_change_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A production-shaped rebalance (fuzz family small, seed 15: 32 brokers, 1,568 replicas at RF 2, heavy-tailed
    topics). With one change per partition, a replica greedy has already moved is still free to move on (it is still
    one new replica) or back: frozen where its first move put it, the disk band ended 14 % away on 2 brokers. Then
    the plan trims the bytes greedy's moves copy beyond what balance needs."""
    from load_cases import family

    from rebalancer.plan.load_problem import evaluate

    cluster, mode, new = family("small", 15)
    monkeypatch.setattr("rebalancer.plan.place_load.SAMPLE_ROUNDS", 0)  # the sampled trim off (see below)
    problem, (changed, stats), plan = _greedy_of(cluster, mode, new, monkeypatch)
    assert problem.max_changes == 1
    disk = {b: 0.0 for b in problem.rack}
    for i, reps in enumerate(problem.replicas):
        assert sum(1 for b in changed.get(i, reps) if b not in reps) <= 1  # the cap holds against the original
        for b in changed.get(i, reps):
            disk[b] += problem.units["disk"][i]
    gate = problem.gate_bands["disk"]
    outside = {b: round(100 * (v / gate[b].average - 1), 2) for b, v in disk.items() if not gate[b].contains(int(v))}
    assert outside == {}, (outside, stats)
    assert evaluate(problem, changed, gates=True)[0] < 1.0, stats
    # greedy's placement copies 1.15x the bytes bound; the exact program within the relaxation's support, then the
    # neighbourhoods around the brokers receiving most, trim it, every band kept (the sampled trim off: it would
    # take the neighbourhoods' work, and it has its own test)
    trim = plan.solver["trim"]
    assert plan.solver["relaxation_trim"]["kept"] and trim["trimmed"] > 0 and trim["outside_bands"] == [], trim
    assert plan.summary["load"]["bytes_to_bound"] <= 1.10
    assert plan.summary["load"]["dimensions"]["disk"]["outside_after"] == []


@pytest.mark.slow
def test_a_bytes_trimming_program_stops_at_its_own_small_node_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A neighbourhood that trims bytes starts from a placement that meets its bands and only looks for fewer bytes:
    given the repair's 500 nodes, such programs ran 17-27 s each without beating their start (fuzz small seed 61),
    until the phase's clock cut the plan short. They stop at ``TRIM_NODE_LIMIT`` nodes; the repair keeps its own."""
    from load_cases import family

    import rebalancer.plan.neighbourhoods as hoods
    from rebalancer.plan.place_load import LP_NODE_LIMIT

    limits: list[int] = []
    real = hoods._round

    def spy(state: Any, hood: Any, deadline: Any, node_limit: int) -> Any:
        limits.append(node_limit)
        return real(state, hood, deadline, node_limit)

    monkeypatch.setattr(hoods, "_round", spy)
    monkeypatch.setattr("rebalancer.plan.place_load.SAMPLE_ROUNDS", 0)  # the sampled trim off: it has its own test
    cluster, mode, new = family("small", 15)
    plan = make_plan(cluster, mode, brokers=new or None)
    hood = plan.solver["trim"]  # the neighbourhoods' trimming, after the counts' repair and the relaxation's trim
    assert hood["trimmed"] > 0 and not hood["cut_short"], hood
    assert len(limits) == plan.solver["neighbourhoods"]["rounds"] + hood["rounds"], limits
    assert limits.count(hoods.TRIM_NODE_LIMIT) >= hood["trimmed"], limits
    assert set(limits) <= {LP_NODE_LIMIT, hoods.TRIM_NODE_LIMIT}, limits
    assert plan.summary["load"]["bytes_to_bound"] <= 1.10


def test_neighbourhoods_bring_in_what_one_move_at_a_time_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fuzz family small, seed 0: 25 brokers, 1,167 replicas at RF 3, one topic of partitions of 4-6.5 GB where a
    broker's target is 7.9 GB; brokers 3 and 7 start with two of them. Greedy leaves brokers 50 % over on disk and
    85 % under on replica counts (each first step of a fix pushes some broker out of its band). Too large for the whole
    program, the plan runs it a neighbourhood at a time: every broker ends inside the gates' disk, network-in and
    replica bands."""
    from load_cases import family

    from rebalancer.plan.load_problem import evaluate

    cluster, mode, new = family("small", 0)
    problem, (greedy, stats), plan = _greedy_of(cluster, mode, new, monkeypatch)
    assert stats["outside_bands"] and evaluate(problem, greedy, gates=True)[0] > 10
    hood = plan.solver["neighbourhoods"]
    assert hood["kept"] > 0 and hood["outside_bands"] == [] and not hood["cut_short"], hood
    dims = plan.summary["load"]["dimensions"]
    assert {d: dims[d]["outside_after"] for d in ("disk", "nw_in", "replicas")} == {
        "disk": [], "nw_in": [], "replicas": []}
    assert plan.summary["max_deviation_pct"]["replicas_after"] <= 15.0
    # and the leader hand-overs for network out keep every leader count within the gate, which measures from the
    # median after the plan (a band around the mean left five brokers at 14 of a median 16 plus, 20 % off)
    from rebalancer.plan.planner import _counts_outside_gate

    assert _counts_outside_gate(plan, load_model(cluster)) == {}


def test_the_neighbourhoods_end_by_the_plans_work_limit_not_a_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cluster above with the programs' work limit (``budget.Work``) spent by the first program: the repair runs
    that one and starts no other, the trims none; no phase is cut short by its clock (the plan is the work's, the
    same on any machine), and brokers left outside a band are said to be the work limit's doing."""
    from load_cases import family

    import rebalancer.plan.budget as budget

    monkeypatch.setattr(budget, "WORK_SHARE", 1e-9)  # a limit of 0.003 LP iterations: one program, then no more
    cluster, mode, new = family("small", 0)
    plan = make_plan(cluster, mode, brokers=new or None)
    hood = plan.solver["neighbourhoods"]
    assert hood["rounds"] == 1 and hood["work_spent"] and hood["outside_bands"], hood
    record = plan.solver["budget"]
    assert record["expired_in"] is None and record["work"]["stopped_in"] == "neighbourhoods", record
    assert record["work"]["spent"] >= budget.PROGRAM_ITERATIONS and record["work"]["programs"] >= 1
    assert "work limit" in plan.solver["outside_why"] and "--time-limit" in plan.solver["outside_why"]
    _assert_valid(cluster, plan, mode, new)


def test_the_exact_program_proves_a_bound_that_counts_whole_partitions() -> None:
    """Six 100-byte partitions on brokers 0 and 1 (racks a, b), broker 2 new (rack c): the disk band (380-420 bytes
    each) needs 380 bytes on broker 2, which the sum over brokers takes as the bound, but a broker holds whole
    replicas: four of them, 400 bytes. The exact program's dual bound proves it; the summary records it."""
    brokers = [Broker(0, "a"), Broker(1, "b"), Broker(2, "c")]
    parts = [Partition("t", i, (0, 1) if i % 2 else (1, 0), 0 if i % 2 else 1, (0, 1) if i % 2 else (1, 0),
                       size_bytes=100) for i in range(6)]
    cluster = Cluster.build(brokers, parts)
    plan = make_plan(cluster, "add-brokers", brokers=[2], balance="load", strategy="lp")
    load = plan.summary["load"]
    assert plan.summary["bytes_moved"] == 400 and _within(plan, "disk")
    assert plan.solver["bytes_proof"]["bytes"] == 400
    assert load["bytes_bound"] == 400 and load["bytes_to_bound"] == 1.0
    assert load["bytes_bound_by"] == "the exact program's dual bound"
    assert plan.summary["lower_bounds"]["bytes_moved"] == 400


def _greedy_input(monkeypatch: pytest.MonkeyPatch, seed: int) -> Any:
    """The ``LoadInput`` the planner hands ``load_greedy`` for fuzz family small ``seed`` (the plan stopped there)."""
    import load_cases

    import rebalancer.plan.place_load as place_load

    class Captured(Exception):
        pass

    seen: dict[str, Any] = {}

    def spy(problem: Any, deadline: Any = None) -> Any:
        seen["problem"] = problem
        raise Captured

    with monkeypatch.context() as m:
        m.setattr(place_load, "load_greedy", spy)
        cluster, mode, new = load_cases.family("small", seed)
        with pytest.raises(Captured):
            make_plan(cluster, mode, brokers=new or None)
    return seen["problem"]


def test_greedy_never_offers_a_replica_from_a_broker_it_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fuzz family small, seed 144 (27 brokers, 1,701 replicas at RF 3): a replica that left a broker, came back and
    left again was still listed on it (twice in its holders, forgotten once), and greedy offered to move it from
    there: "ValueError: 20 is not in list", an internal error from the plan stage."""
    from rebalancer.plan.load_greedy import load_greedy

    problem = _greedy_input(monkeypatch, 144)
    changed, stats = load_greedy(problem)
    assert stats["moves"] > 0
    for i, reps in changed.items():
        assert len(reps) == len(problem.replicas[i]) == len(set(reps))


def test_brokers_stuck_between_disk_and_network_in_trade_replicas_of_unlike_ratio(monkeypatch) -> None:
    """Fuzz family small, seed 157 (34 brokers, 6,924 replicas): greedy left brokers with disk at the top of its band
    and network in short of it (or the reverse): every replica that would bring network in brings disk over, and the
    exchanges paired replicas by one dimension only. The exchange across two dimensions (a replica of little network
    in per byte for one of much, of about the same disk) brings greedy's placement nearer every band than the same
    greedy without it, at no more bytes per violation removed than a waste-free move of an average replica."""
    from rebalancer.plan.load_greedy import _Placement, load_greedy
    from rebalancer.plan.load_problem import evaluate

    problem = _greedy_input(monkeypatch, 157)
    changed, stats = load_greedy(problem)
    with monkeypatch.context() as m:
        m.setattr(_Placement, "cross_swap", lambda self, x, giving, fan: None)
        plain, plain_stats = load_greedy(problem)
    assert stats["swaps"] > plain_stats["swaps"]
    assert evaluate(problem, changed)[0] < evaluate(problem, plain)[0]


def test_counts_inside_greedys_band_but_outside_their_gate_send_the_plan_to_the_program() -> None:
    """Fuzz family small, seed 135 (14 brokers, 192 replicas): greedy ended every broker inside its count band
    around the average (13.7 replicas: 12-16), and the plan said Balanced, but 16 is 2.5 from the median of 13.5,
    beyond the gate's 2.0: the plan failed its own replica gate. Such counts now send a small cluster to the exact
    program (counts within a band any counts inside of pass the gate), and a plan left so says so in its status."""
    import load_cases

    from rebalancer.plan.planner import _counts_outside_gate

    cluster, mode, new = load_cases.family("small", 135)
    plan = make_plan(cluster, mode, brokers=new or None)
    assert "replica counts outside their gate" in plan.solver["strategy_reason"]
    assert _counts_outside_gate(plan, load_model(cluster)) == {}
    assert "replicas" not in (plan.solver.get("outside_bands") or {})
    assert plan.summary["load"]["bytes_to_bound"] <= 1.10


@pytest.mark.slow
def test_the_search_for_any_placement_finds_one_where_the_bytes_search_ran_out_of_nodes() -> None:
    """Fuzz family small, seed 111 (39 brokers, 324 replicas, about 8 per broker): the exact program (the gates'
    bands as rows, the fewest bytes) ended its nodes with neither a placement nor a proof, and the plan went on to
    leave disk at 5.54 % and replica counts at 25 %. The same rows without an objective (``feasibility``) find a
    placement within every gate's band in the same nodes: the exact ladder's feasibility first (``_ladder_step``)."""
    import load_cases

    from rebalancer.plan.load_problem import evaluate, load_input
    from rebalancer.plan.lp_load import lp_load
    from rebalancer.plan.targets import make_targets

    cluster, mode, new = load_cases.family("small", 111)
    problem = load_input(cluster, load_model(cluster), make_targets(cluster, mode, new or None), 1)
    on_bytes, _ = lp_load(problem, 300, hard=True, node_limit=300)
    assert on_bytes is None
    found, stats = lp_load(problem, 300, hard=True, node_limit=300, feasibility=True)
    assert found is not None and stats["outcome"] == "optimal"
    assert evaluate(problem, found, gates=True)[0] == 0.0


@pytest.mark.slow
def test_a_trim_that_copies_more_once_its_counts_are_repaired_is_dropped() -> None:
    """Fuzz family small, seed 125 (10 brokers, 399 replicas): the exact program's placement met every gate at 1.034x
    the bytes bound; the neighbourhoods' trim after it left replica counts outside their gate (measured from the
    median), and their repair moved 16 replicas, more bytes than the trim had saved: the plan ended at 1.078x. A trim
    is kept only where, its counts repaired, it stands no further outside the gates and copies no more."""
    import load_cases

    cluster, mode, new = load_cases.family("small", 125)
    plan = make_plan(cluster, mode, brokers=new or None)
    assert plan.solver["trim_dropped"] is True
    assert plan.summary["load"]["bytes_to_bound"] <= 1.05, plan.summary["load"]["bytes_to_bound"]
    assert all(_within(plan, d) for d in ("disk", "nw_in", "replicas"))


@pytest.mark.slow
def test_a_program_stopped_far_from_its_bound_has_its_bytes_trimmed() -> None:
    """Fuzz family small, seed 75 (13 brokers, 512 replicas): the exact program met every band but stopped at its
    node limit with a 46 % gap, copying 1.86x the bytes bound; the neighbourhoods' bytes trimming (balance kept)
    brings it near the bound."""
    import load_cases

    cluster, mode, new = load_cases.family("small", 75)
    plan = make_plan(cluster, mode, brokers=new or None)
    assert plan.solver["lp"]["gap"] > 0.02 and plan.solver["neighbourhoods"]["trimmed"] > 0
    load = plan.summary["load"]
    assert load["bytes_to_bound"] <= 1.2, load["bytes_to_bound"]
    assert all(_within(plan, d) for d in ("disk", "nw_in", "replicas"))


def _split_counts(band: float):
    """Eight brokers holding 24, 24, 24, 24, 24, 30, 30, 30 single-replica partitions (average 26.25, median 24: the
    three at 30 fail the replica gate), counts only; the planner's band ``band`` x the average, the gate's 15 %.
    Returns (counts, replicas, LoadInput)."""
    from rebalancer.load import load_bands
    from rebalancer.plan.load_problem import LoadInput, count_gate_band, median_safe_band

    counts = [24] * 5 + [30] * 3
    replicas = [(b,) for b, n in enumerate(counts) for _ in range(n)]
    total, brokers = len(replicas), frozenset(range(8))
    inp = LoadInput(replicas=replicas, topics=[f"t{i % 7}" for i in range(total)],
                    units={"replicas": [1.0] * total},
                    bands={"replicas": load_bands("replicas", total, brokers, band=band)},
                    rack={b: f"r{b}" for b in brokers}, receivers=brokers, givers=brokers, removed=frozenset(),
                    gate_bands={"replicas": count_gate_band(total, brokers, 0.15)},
                    safe_bands={"replicas": median_safe_band(total, brokers, 0.15)}, count_gate={"replicas": 0.15})
    return counts, replicas, inp


def test_counts_the_gate_fails_are_repaired_within_the_band_that_passes_it() -> None:
    """Eight brokers at 24, 24, 24, 24, 24, 30, 30, 30 replicas: each inside the planner's band around the average
    (26.25), but three fail the gate, which measures from the median (24: 3.6 allowed). The count repair goes on from
    there with the counts held to the band any counts inside of pass the gate, and keeps what it finds; a placement
    the gate passes is left alone."""
    import statistics

    from rebalancer.plan.budget import Deadline
    from rebalancer.plan.place_load import _count_repair

    counts, replicas, inp = _split_counts(0.15)
    assert all(inp.bands["replicas"][b].contains(n) for b, n in enumerate(counts))
    solver: dict[str, object] = {}
    placed = _count_repair(inp, {}, 0.15, Deadline.never(), solver)
    after = [sum(1 for i, reps in enumerate(replicas) for x in placed.get(i, reps) if x == b) for b in range(8)]
    med = statistics.median(after)
    assert all(abs(n - med) <= max(0.15 * med, 1) for n in after), (after, solver)
    assert solver["count_repair"]["kept"] and solver["count_repair"]["counts_outside_after"] == 0
    again: dict[str, object] = {}
    assert _count_repair(inp, placed, 0.15, Deadline.never(), again) is placed and again == {}


@pytest.mark.slow
def test_a_production_shaped_plan_whose_counts_split_at_the_band_edges_passes_the_count_gate() -> None:
    """Fuzz family small, seed 37 (33 brokers, 1,683 replicas): the plan met disk and network in but ended nine
    brokers at 45 replicas and nine at 57 around an average of 51; the median, 49, puts 57 16.3 % above it and the
    replica gate failed. The count repair brings every count within the gate, the load bands kept."""
    import statistics

    import load_cases

    cluster, mode, new = load_cases.family("small", 37)
    plan = make_plan(cluster, mode, brokers=new or None)
    assert plan.solver["count_repair"]["kept"]
    rows = plan.summary["load"]["brokers"]
    counts = [r["replicas"]["after"] for r in rows]
    med = statistics.median(counts)
    assert all(abs(n - med) <= max(0.15 * med, 1) for n in counts), sorted(counts)
    assert all(_within(plan, d) for d in ("disk", "nw_in"))


@pytest.mark.slow
def test_trimming_bytes_never_leaves_a_count_its_gate_fails() -> None:
    """Fuzz family small, seed 127 (28 brokers, 794 replicas, RF 2): the neighbourhoods' trim for fewer bytes held
    counts to their band around the average and ended eleven brokers at 25 replicas against a median of 29.5 (15.3 %
    below it: the replica gate failed). A trim may lower the bytes only with the gates standing as they did: its
    counts are repaired, or it is dropped."""
    import statistics

    import load_cases

    cluster, mode, new = load_cases.family("small", 127)
    plan = make_plan(cluster, mode, brokers=new or None)
    counts = [r["replicas"]["after"] for r in plan.summary["load"]["brokers"]]
    med = statistics.median(counts)
    assert all(abs(n - med) <= max(0.15 * med, 1) for n in counts), sorted(counts)
    assert all(_within(plan, d) for d in ("disk", "nw_in"))
    assert plan.summary["load"]["bytes_to_bound"] <= 1.10


def test_neighbourhoods_judge_counts_from_the_median_as_the_gate_does() -> None:
    """Eight brokers holding 24, 24, 24, 24, 24, 30, 30, 30 replicas (average 26.25): every count lies within 15 % of
    the average, but the replica gate measures from the median, 24, and allows 3.6: the three brokers at 30 fail
    it. Fuzz small seed 151 ended so (30 replicas, median 26). The neighbourhoods judge counts as the gate does and
    bring every broker within it."""
    import statistics

    from rebalancer.plan.neighbourhoods import repair_neighbourhoods

    counts, replicas, inp = _split_counts(0.10)
    assert all(inp.gate_bands["replicas"][b].contains(n) for b, n in enumerate(counts))  # the average's band holds them
    changed, stats = repair_neighbourhoods(inp, {}, node_limit=500)
    after = [sum(1 for i, reps in enumerate(replicas) for x in changed.get(i, reps) if x == b) for b in range(8)]
    med = statistics.median(after)
    assert all(abs(n - med) <= max(0.15 * med, 1) for n in after), (after, stats)
    assert stats["kept"] > 0 and stats["outside_bands"] == []


def _shortcut_input(replicas: list[tuple[int, ...]], sizes: list[float], brokers: int, racks: int,
                    width: float) -> Any:
    from rebalancer.load import Band
    from rebalancer.plan.load_problem import LoadInput

    ids = frozenset(range(brokers))
    disk = [0.0] * brokers
    for reps, s in zip(replicas, sizes, strict=True):
        for b in reps:
            disk[b] += s
    mean = sum(disk) / brokers
    band = {b: Band(int(mean * (1 - width)), int(mean * (1 + width)) + 1, mean) for b in ids}
    return LoadInput(replicas=replicas, topics=["t"] * len(replicas), units={"disk": sizes}, bands={"disk": band},
                     rack={b: f"r{b % racks}" for b in ids}, receivers=ids, givers=ids, removed=frozenset())


def test_a_move_through_a_broker_is_cut_short() -> None:
    """Replica i went 0 -> 1 and j, of the same size, 1 -> 2: i goes 0 -> 2 and j stays, every load as it was,
    half the bytes. Where j went back to 0 instead, both stay where they were."""
    from rebalancer.plan.neighbourhoods import _shortcuts, _State

    replicas = [(0,), (1,), (0,), (1,), (2,)]
    sizes = [10.0, 10.0, 50.0, 50.0, 50.0]
    inp = _shortcut_input(replicas, sizes, 3, 3, 0.5)
    state = _State(inp, {0: (1,), 1: (2,)})
    load = {b: state.load["disk"][b] for b in range(3)}
    assert _shortcuts(state) == (1, 10.0)
    assert state.assign[:2] == [(2,), (1,)] and {b: state.load["disk"][b] for b in range(3)} == load
    state = _State(inp, {0: (1,), 1: (0,)})
    assert _shortcuts(state) == (1, 20.0)
    assert state.assign[:2] == [(0,), (1,)]


@settings(max_examples=examples(80), deadline=None)
@given(st.data())
def test_shortcuts_keep_counts_racks_and_bands_and_save_what_they_say(data: st.DataObject) -> None:
    """Over random placements (partitions of a few alike sizes, RF 1-3 on distinct racks, moves drawn at random):
    cutting moves short keeps every broker's replica count and each partition's replica count, spans no fewer racks,
    leaves the brokers as near their bands (``_State.key`` over all), and copies exactly the bytes it says less."""
    from rebalancer.plan.neighbourhoods import _copied, _shortcuts, _State

    brokers = data.draw(st.integers(3, 7))
    racks = data.draw(st.integers(3, brokers))
    rf = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(1, 25))
    sizes = [float(data.draw(st.sampled_from([1, 2, 3, 10, 11]))) for _ in range(n)]
    by_rack: dict[int, list[int]] = {}
    for b in range(brokers):
        by_rack.setdefault(b % racks, []).append(b)
    replicas = []
    for _ in range(n):
        rs = data.draw(st.lists(st.sampled_from(sorted(by_rack)), min_size=rf, max_size=rf, unique=True))
        replicas.append(tuple(data.draw(st.sampled_from(by_rack[r])) for r in rs))
    placed = {}
    for i in data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n, unique=True)):
        reps = list(replicas[i])
        k = data.draw(st.integers(0, rf - 1))
        free = [b for b in range(brokers) if b not in reps]
        if not free:
            continue
        reps[k] = data.draw(st.sampled_from(free))
        placed[i] = tuple(reps)
    inp = _shortcut_input(replicas, sizes, brokers, racks, data.draw(st.sampled_from([0.05, 0.2, 1.0])))
    state = _State(inp, placed)
    before = list(state.assign)
    key_before = state.key(range(brokers), state.load)
    copied = sum(_copied(inp, i, reps) for i, reps in enumerate(before))
    _, saved = _shortcuts(state)
    rack = inp.rack
    for old, new in zip(before, state.assign, strict=True):
        assert len(new) == len(set(new)) == len(old)
        assert len({rack[b] for b in new}) >= len({rack[b] for b in old})
    assert [sum(b in r for r in before) for b in range(brokers)] == \
        [sum(b in r for r in state.assign) for b in range(brokers)]
    assert state.key(range(brokers), state.load) <= key_before
    assert state.load["disk"] == pytest.approx(
        {b: sum(s for reps, s in zip(state.assign, sizes, strict=True) if b in reps) for b in range(brokers)})
    assert copied - sum(_copied(inp, i, reps) for i, reps in enumerate(state.assign)) == pytest.approx(saved)


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_a_step_widens_to_every_broker_before_it_gives_up(data: st.DataObject) -> None:
    """Greedy's step reads its neediest partners a few at a time, widening while none has a move (``widening_move``):
    it finds a move exactly when the search over every broker does, and its partner order (kept sorted as loads
    change) is the ranking of every broker."""
    import heapq

    from rebalancer.load import load_bands
    from rebalancer.plan.load_greedy import _Placement
    from rebalancer.plan.load_problem import LoadInput

    brokers = data.draw(st.integers(3, 14))
    racks = data.draw(st.integers(1, 4))
    n = data.draw(st.integers(1, 40))
    holders = st.lists(st.integers(0, brokers - 1), min_size=1, max_size=2, unique=True).map(tuple)
    replicas = [data.draw(holders) for _ in range(n)]
    sizes = [float(data.draw(st.sampled_from([1, 2, 5, 20]))) for _ in range(n)]
    ids = frozenset(range(brokers))
    total = sum(s * len(r) for r, s in zip(replicas, sizes, strict=True))
    inp = LoadInput(replicas=replicas, topics=[f"t{i % 3}" for i in range(n)], units={"disk": sizes},
                    bands={"disk": load_bands("disk", int(total), ids, band=0.05)},
                    rack={b: f"r{b % racks}" for b in ids}, receivers=ids, givers=ids, removed=frozenset())
    state = _Placement(inp)
    for _ in range(data.draw(st.integers(0, 3))):  # a few moves first: the order must follow them
        x = data.draw(st.sampled_from(sorted(ids)))
        move = state.best_move(x, data.draw(st.booleans()), brokers)
        if move is not None:
            i, g, r = move
            state.apply(i, g, r)
            state.refresh(g)
            state.refresh(r)
    for x in sorted(ids):
        for giving in (True, False):
            d = state.need(x, giving)[0]
            load, scale, low = state.load[d], state.scale[d], state.low[d]
            if giving:
                ranked = heapq.nsmallest(brokers, (r for r in state.receivers if r != x),
                                         key=lambda r: (-state.below[r], load[r] / scale[r]))
                assert [r for _, r in state.partners(x, d, True, brokers)] == ranked
            else:
                ranked = heapq.nsmallest(brokers, (g for g in state.givers if g != x and state.holding[g]),
                                         key=lambda g: (-state.above[g], -(load[g] - low[g]) / scale[g]))
                assert [g for g, _ in state.partners(x, d, False, brokers)] == ranked
            every = state.best_move(x, giving, brokers)
            widened = state.widening_move(x, giving)
            assert (every is None) == (widened is None)


def test_the_relaxation_proves_load_bands_out_of_reach_above_the_exact_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fuzz small seed 5 (2,139 replicas, too many for the whole 0/1 program): no placement meets every network-in
    band, and no sum shows it; the program's linear relaxation proves it in seconds, and the reason the approval
    request and the failed disk gate quote says so. (The neighbourhoods are held to one program each here, to keep it quick.)"""
    from load_cases import family

    import rebalancer.plan.neighbourhoods as hoods
    from rebalancer.plan.sum_proofs import why_out_of_reach

    monkeypatch.setattr(hoods, "MAX_ROUNDS", 1)
    monkeypatch.setattr(hoods, "TRIM_ROUNDS", 1)
    cluster, mode, new = family("small", 5)
    plan = make_plan(cluster, mode, brokers=new or None)
    proof = plan.solver["bands_proof"]
    assert proof["feasible"] is False and proof["by_relaxation"] and "by_sum" not in proof, proof
    assert plan.solver["relaxation"]["outcome"] == "infeasible"
    assert "linear relaxation has no solution" in (why_out_of_reach(proof) or "")


def test_the_relaxation_bounds_the_bytes_tighter_than_the_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fuzz small seed 151 (906 replicas, heavy-tailed sizes): greedy alone leaves brokers outside; the linear
    relaxation is feasible and proves a bytes bound above the sum over brokers (which splits partitions without
    regard to the other bands): the summary measures the plan against it."""
    from load_cases import family

    import rebalancer.plan.neighbourhoods as hoods
    from rebalancer.plan.load_summary import bytes_bound
    from rebalancer.plan.place_load import BYTES_PROOF_BY_RELAXATION
    from rebalancer.plan.targets import make_targets

    monkeypatch.setattr(hoods, "MAX_ROUNDS", 1)
    monkeypatch.setattr(hoods, "TRIM_ROUNDS", 1)
    cluster, mode, new = family("small", 151)
    plan = make_plan(cluster, mode, brokers=new or None)
    summed = bytes_bound(cluster, load_model(cluster), make_targets(cluster, mode, new or None))
    proof = plan.solver["bytes_proof"]
    assert proof["by"] == BYTES_PROOF_BY_RELAXATION and proof["bytes"] > summed
    load = plan.summary["load"]
    assert load["bytes_bound"] == proof["bytes"] and load["bytes_bound_by"] == BYTES_PROOF_BY_RELAXATION


def test_load_greedy_never_fills_a_receiver_past_its_hard_limit() -> None:
    """Broker 0 holds 60 units and each broker's band is 19-21; broker 1's disk may hold 10 at most (its capacity
    limit): it takes one partition of 10, broker 2 the rest it can, though two would bring broker 1 into its band."""
    from rebalancer.load import Band
    from rebalancer.plan.load_greedy import load_greedy
    from rebalancer.plan.load_problem import LoadInput

    band = Band(19, 21, 20.0)
    inp = LoadInput(replicas=[(0,)] * 6, topics=["t"] * 6, units={"disk": [10.0] * 6},
                    bands={"disk": {0: band, 1: replace(band, limit=10), 2: band}}, rack=dict.fromkeys(range(3)),
                    receivers=frozenset(range(3)), givers=frozenset(range(3)), removed=frozenset(), keep_racks=False)
    placed, _ = load_greedy(inp)
    held = [sum(1 for i in range(6) if b in placed.get(i, inp.replicas[i])) for b in range(3)]
    assert held[1] == 1 and held[2] == 2, held


def _three_brokers(replicas: list[tuple[int, ...]], sizes: list[float]) -> Any:
    """Brokers 0-2, each with the disk band 19-21 (target 20), no racks, one change per partition."""
    from rebalancer.load import Band
    from rebalancer.plan.load_problem import LoadInput

    band = Band(19, 21, 20.0)
    return LoadInput(replicas=replicas, topics=[f"t{i}" for i in range(len(replicas))], units={"disk": sizes},
                     bands={"disk": dict.fromkeys(range(3), band)}, rack=dict.fromkeys(range(3)),
                     receivers=frozenset(range(3)), givers=frozenset(range(3)), removed=frozenset(), keep_racks=False)


def test_the_load_program_moves_a_replica_only_where_allowed() -> None:
    """Broker 0 holds 40 and must give 20, one partition of 10 to each of brokers 1 and 2. With broker 2 the only one
    allowed to take them, broker 1 cannot reach its band: the program with the gates' bands says so."""
    from rebalancer.plan.highs import infeasible
    from rebalancer.plan.lp_load import lp_load

    inp = _three_brokers([(0,), (0,), (0,), (0,), (1,), (2,)], [10.0] * 6)
    placed, stats = lp_load(inp, 30, hard=True)
    assert placed is not None and sorted(reps for reps in placed.values()) == [(1,), (2,)], placed
    only_2 = {i: frozenset({2}) for i in range(4)}
    placed, stats = lp_load(inp, 30, hard=True, allowed=only_2)
    assert placed is None and infeasible(stats), stats


def test_the_relaxation_trim_undoes_moves_the_bands_do_not_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three brokers inside their 19-21 disk band; a placement that trades a 10 of broker 1 for a 10 of broker 2
    copies 20 for nothing. The relaxation keeps every replica where it is (its support), and the trim, each partition
    free to go where the placement or the relaxation puts it, finds the placement that copies nothing. Its program
    stops at the trims' node limit, not the repair's (500 nodes spent 0.9M LP iterations on fuzz small seed 151 to
    find what the first 50 found)."""
    import rebalancer.plan.place_load as place_load
    from rebalancer.plan.load_problem import evaluate
    from rebalancer.plan.lp_load import relaxation
    from rebalancer.plan.neighbourhoods import TRIM_NODE_LIMIT
    from rebalancer.plan.place_load import trim_by_relaxation

    limits: list[int | None] = []
    real = place_load.lp_load

    def spy(*args: Any, **kw: Any) -> Any:
        limits.append(kw.get("node_limit"))
        return real(*args, **kw)

    monkeypatch.setattr(place_load, "lp_load", spy)

    replicas = [(0,), (0,), (1,), (1,), (1,), (2,), (2,)]
    inp = _three_brokers(replicas, [10.0, 10.0, 5.0, 5.0, 10.0, 10.0, 10.0])
    wasteful = {4: (2,), 5: (1,)}
    assert evaluate(inp, wasteful, gates=True) == (0.0, 20.0)
    support, _ = relaxation(inp, 30)
    assert support is not None and all(share == frozenset(replicas[i]) for i, share in support.items()), support
    trimmed, record = trim_by_relaxation(inp, wasteful, 0.15, 30)
    assert record["kept"] and record["bytes_after"] == 0, record
    assert evaluate(inp, trimmed, gates=True) == (0.0, 0.0), trimmed
    assert limits == [TRIM_NODE_LIMIT], limits


def test_the_sampled_trim_cuts_moves_that_pass_through_a_broker() -> None:
    """Ten brokers with the disk band 19-21: broker 9 holds 40 and broker 8 nothing, so two partitions of 10 must
    go from 9 to 8 (20 copied). A placement that sends them through broker 5 and 6 instead (9's to 5 and 6, theirs
    on to 8) copies 40 and meets every band. The sampled trim, six brokers drawn at a time by its seeded
    generator, ends at the 20 that balance needs, every band kept; drawn again, the same placement."""
    from rebalancer.load import Band
    from rebalancer.plan.budget import Deadline
    from rebalancer.plan.load_problem import LoadInput, evaluate
    from rebalancer.plan.place_load import trim_by_samples

    replicas = [(b,) for b in range(8) for _ in range(2)] + [(9,)] * 4
    inp = LoadInput(replicas=replicas, topics=[f"t{i}" for i in range(len(replicas))],
                    units={"disk": [10.0] * len(replicas)},
                    bands={"disk": dict.fromkeys(range(10), Band(19, 21, 20.0))}, rack=dict.fromkeys(range(10)),
                    receivers=frozenset(range(10)), givers=frozenset(range(10)), removed=frozenset(),
                    keep_racks=False)
    wasteful = {16: (5,), 17: (6,), 10: (8,), 12: (8,)}  # 9 -> 5 -> 8 and 9 -> 6 -> 8
    assert evaluate(inp, wasteful, gates=True) == (0.0, 40.0)
    trimmed, record = trim_by_samples(inp, wasteful, 0.15, 0.0, Deadline.never())
    assert record["kept"] >= 1 and record["bytes_after"] == 20 and not record["cut_short"], record
    assert evaluate(inp, trimmed, gates=True) == (0.0, 20.0), trimmed
    assert sorted(trimmed.values()) == [(8,), (8,)], trimmed
    assert trim_by_samples(inp, wasteful, 0.15, 0.0, Deadline.never())[0] == trimmed
    # a placement outside a band is not the trim's to judge: nothing runs
    _, record = trim_by_samples(inp, {16: (5,)}, 0.15, 0.0, Deadline.never())
    assert record["status"] is None and record["rounds"] == 0, record


@pytest.mark.parametrize(("hood_moves", "again"), [(True, True), (False, False)])
def test_the_relaxation_trims_again_wherever_the_neighbourhoods_moved_the_placement(
        monkeypatch: pytest.MonkeyPatch, hood_moves: bool, again: bool) -> None:
    """The neighbourhoods' trim between the relaxation's trims may change the placement by a move cut short alone, with
    no program's placement kept (fuzz small seed 151: three shortcuts, no round kept); the relaxation's trim, which
    had stopped at its optimum within its start's neighbourhood, then runs again from there (151: 1.124x -> 1.113x
    the bytes bound). Where the neighbourhoods changed nothing, it does not."""
    from types import SimpleNamespace

    from rebalancer.plan import place_load
    from rebalancer.plan.budget import Budget

    inp = _three_brokers([(0,), (0,), (1,), (1,), (1,), (2,), (2,)], [10.0, 10.0, 5.0, 5.0, 10.0, 10.0, 10.0])
    wasteful = {4: (2,), 5: (1,)}
    calls: list[str] = []

    def relaxation_trim(req, solver, problem, placed, budget, reserve, name):  # type: ignore[no-untyped-def]
        calls.append(name)
        return placed, True

    def neighbourhoods(problem, placed, budget, reserve, bound, solver, algorithm, name="neighbourhoods"):  # type: ignore[no-untyped-def]
        # a shortcut: replica 5 goes to broker 0 instead of broker 1; no round kept
        return ({**placed, 5: (0,)} if hood_moves else dict(placed)), {"trimmed": 0, "shortcuts": int(hood_moves)}

    def sample_trim(req, solver, problem, placed, budget, reserve, bytes_enough):  # type: ignore[no-untyped-def]
        calls.append("sample_trim")
        return placed

    monkeypatch.setattr(place_load, "_relaxation_trim", relaxation_trim)
    monkeypatch.setattr(place_load, "_sample_trim", sample_trim)
    monkeypatch.setattr(place_load, "_neighbourhoods", neighbourhoods)
    monkeypatch.setattr(place_load, "bytes_bound", lambda *args, **kwargs: 1)
    req = SimpleNamespace(cluster=None, model=None)
    setup = SimpleNamespace(targets=None, solver={})
    place_load._trims(req, setup, inp, wasteful, Budget(600.0), 0.0)  # type: ignore[arg-type]
    assert calls == (["relaxation_trim", "sample_trim", "relaxation_trim_again"] if again
                     else ["relaxation_trim", "sample_trim"]), calls


def test_a_trim_is_judged_by_the_count_gate_when_its_loads_are_weighed_alone() -> None:
    """``_trim_kept`` weighs a trim's loads without the planner's count bands (``loads_only``), but its counts by
    their gate: three of eight brokers at 30 replicas against a median of 24 fail it, whichever way the loads are
    weighed. The count term was taken from the problem with the count bands dropped, so it read 0 there, and a trim
    that left counts outside their gate was kept wherever its loads and bytes stood no worse."""
    from rebalancer.plan.place_load import _gate_key

    _, _, inp = _split_counts(0.15)
    whole = _gate_key(inp, {}, 0.15)
    assert whole[0] > 0, whole
    assert _gate_key(inp, {}, 0.15, loads_only=True)[0] == whole[0]


@pytest.mark.parametrize(("limit", "probe_outcome", "nodes"), [
    (200_000, "node_limit", [25, 95]),      # 40k iterations in the probe's 25 nodes: 1,600 a node; 152.5k left
    (10_000_000, "node_limit", [25, 500]),  # the work pays for every node: the node limit as before
    (80_000, "node_limit", [25]),           # 32.5k left pays for 20 nodes, fewer than the probe ran: its answer
    (200_000, "optimal", [25]),             # the program ended within the probe
])
def test_the_weighted_program_runs_the_nodes_the_work_left_pays_for(
        limit: int, probe_outcome: str, nodes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The weighted program's first 25 nodes measure what a node costs in LP iterations (the same on any machine);
    it then runs again from the same start with as many nodes as the work left pays for, at most 500. Before, it
    was given 500 nodes whatever the work left, and where those were out of reach its wall clock stopped it (fuzz
    small seed 70: 102 nodes in 252 s; two runs, two plans)."""
    from rebalancer.plan import place_load
    from rebalancer.plan.budget import PROGRAM_ITERATIONS, Work

    asked: list[int] = []

    def solved(problem: Any, seconds: float, *, warm_start: Any, node_limit: int, work: Work) -> Any:
        asked.append(node_limit)
        assert warm_start == {3: (1, 2)}  # every run from the same start
        first = node_limit == place_load.PROBE_NODES
        stats = {"outcome": probe_outcome if first else "node_limit", "lp_iterations": 1_600 * node_limit,
                 "nodes": node_limit, "variables": 1_000, "have_solution": True}
        work.charge(stats)
        return {3: (node_limit,)}, stats

    monkeypatch.setattr(place_load, "lp_load", solved)
    work = Work(limit)
    placed, stats = place_load._weighted_program(None, lambda: 60.0, {3: (1, 2)}, work)
    assert asked == nodes
    assert placed == {3: (nodes[-1],)}
    assert stats.get("node_limit") == (None if probe_outcome == "optimal" else nodes[-1])
    assert work.spent == sum(1_600 * n + PROGRAM_ITERATIONS for n in nodes)


def test_the_local_search_of_nothing_moves_nothing() -> None:
    """An input with no broker and no partition: no move, not a crash (each broker's span of the columns was built
    for at least one broker)."""
    from rebalancer.plan.load_greedy import load_greedy
    from rebalancer.plan.load_problem import LoadInput

    changed, stats = load_greedy(LoadInput(replicas=[], topics=[], units={"replicas": []}, bands={"replicas": {}},
                                           rack={}, receivers=frozenset(), givers=frozenset(), removed=frozenset()))
    assert changed == {} and stats["moves"] == 0 and stats["outside_bands"] == []
