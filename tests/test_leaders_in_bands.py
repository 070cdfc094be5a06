"""Leaders chosen all at once with the bands as rows (``leader_exact.band_leaders``), where the network-out
hand-overs stop on a cluster too large for the exact leader program (issue 41, Deliver 5)."""

from __future__ import annotations

import itertools
import random

import pytest
from conftest import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rebalancer.load import Band, load_model, replica_table
from rebalancer.model import Broker, Cluster, Partition
from rebalancer.plan import leader_pass
from rebalancer.plan.budget import Deadline
from rebalancer.plan.leader_exact import BAND_MAX_PARTITIONS, EXACT_MAX_PARTITIONS, GateRows, band_leaders
from rebalancer.plan.leader_load import LeaderLoadInput
from rebalancer.plan.targets import make_targets


def _loads(leader: list[int], units: list[float], brokers: range) -> tuple[dict[int, float], dict[int, int]]:
    load, count = dict.fromkeys(brokers, 0.0), dict.fromkeys(brokers, 0)
    for i, b in enumerate(leader):
        load[b] += units[i]
        count[b] += 1
    return load, count


def _drawn(data: st.DataObject, most_brokers: int, fewest: int, most: int,
           largest: int) -> tuple[range, list[tuple[int, ...]], list[float], list[int]]:
    """A small leader choice drawn: the brokers, each partition's candidates, its network out (units) and leader."""
    brokers = range(data.draw(st.integers(2, most_brokers)))
    n = data.draw(st.integers(fewest, most))
    cands = [tuple(data.draw(st.lists(st.sampled_from(brokers), min_size=1, max_size=len(brokers), unique=True)))
             for _ in range(n)]
    units = [float(data.draw(st.integers(1, largest))) for _ in range(n)]
    return brokers, cands, units, [data.draw(st.sampled_from(c)) for c in cands]


@settings(max_examples=examples(25), deadline=None)
@given(st.data())
def test_band_leaders_meets_every_band_when_any_choice_does(data: st.DataObject) -> None:
    """Against every choice of leaders: where some choice puts each broker's network out and leader count inside
    their bands, the program finds one, with at most twice the fewest changes (its gap); where none does, it finds
    nothing."""
    brokers, cands, units, leader = _drawn(data, 4, 1, 8, 20)
    n_brokers, n = len(brokers), len(cands)
    avg = sum(units) / n_brokers
    width = data.draw(st.sampled_from([0.1, 0.3, 0.6]))
    bands = {b: Band(int(avg * (1 - width)), int(avg * (1 + width)) + 1, avg) for b in brokers}
    per = n / n_brokers
    counts = {b: Band(max(0, int(per) - 1), int(per) + 2, per) for b in brokers}
    inp = LeaderLoadInput(leader, cands, {"nw_out": units}, {"nw_out": bands}, {"nw_out": 1.0})

    def meets(choice: tuple[int, ...]) -> bool:
        load, count = _loads(list(choice), units, brokers)
        return all(bands[b].floor <= load[b] <= bands[b].ceil and counts[b].floor <= count[b] <= counts[b].ceil
                   for b in brokers)

    feasible = [c for c in itertools.product(*cands) if meets(c)]
    found, stats = band_leaders(inp, counts)
    if stats["status"] == "nothing to choose":  # one candidate each: the leaders stay as they are
        assert found is None and all(len(c) == 1 for c in cands)
        return
    if not feasible:
        assert not found, stats
        return
    assert found is not None, stats
    chosen = tuple(found.get(i, b) for i, b in enumerate(leader))
    assert meets(chosen), (chosen, stats)
    fewest = min(sum(a != b for a, b in zip(c, leader, strict=True)) for c in feasible)
    assert len(found) <= 2 * fewest, (found, fewest)


def _rf2_cluster(seed: int, brokers: int = 8, partitions: int = 400) -> Cluster:
    """RF 2 over ``brokers``, ``partitions`` partitions of 7 topics with heavy-tailed bytes-in rates, each led by its
    first replica."""
    rng = random.Random(seed)
    parts = []
    for i in range(partitions):
        a, b = rng.sample(range(brokers), 2)
        parts.append(Partition(f"t{i % 7}", i, (a, b), a, (a, b), size_bytes=100,
                               bytes_in_per_s=round(rng.lognormvariate(0, 1.5), 3)))
    return Cluster([Broker(b) for b in range(brokers)], parts)


def test_leaders_past_where_the_hand_overs_stop_meet_the_network_out_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """400 partitions (above the exact program's size) with heavy-tailed rates at RF 2: the hand-overs stop with
    network out 32 % off its target on some broker (a leadership that would help it pushes its other replica's
    broker out of the band); every leader at once brings every broker inside the band, leader counts within the
    gate (fuzz medium seeds 0, 4, 6, 9, 16: 26-78 % after the hand-overs, 10 % after this)."""
    from rebalancer.balance import counts_excess

    cluster = _rf2_cluster(3)
    assert EXACT_MAX_PARTITIONS < len(cluster.partitions) <= BAND_MAX_PARTITIONS
    model = load_model(cluster)
    targets = make_targets(cluster, "rebalance")
    units = replica_table(cluster, model.loads, dimensions=["nw_out"]).per_partition["nw_out"][0].astype(float).tolist()
    bands = model.bands("nw_out", int(sum(units)), targets.eligible)

    def outside(assignment: dict[tuple[str, int], tuple[int, ...]]) -> list[int]:
        led = [assignment.get(p.tp, p.replicas)[0] for p in cluster.partitions]
        load, count = _loads(led, units, range(8))
        assert not any(counts_excess(count, model.band["leaders"]).values()), count
        return [b for b in range(8) if not bands[b].contains(int(load[b]))]

    with monkeypatch.context() as m:  # the hand-overs alone
        m.setattr(leader_pass, "_leaders_in_bands", lambda inp, changed, *args: changed)
        handed: dict[tuple[str, int], tuple[int, ...]] = {}
        leader_pass._leaders_on_load(cluster, handed, targets, model, Deadline.never())
    assert outside(handed)
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    stats = leader_pass._leaders_on_load(cluster, assignment, targets, model, Deadline.never())
    assert outside(assignment) == [], stats
    assert stats["in_bands"]["outcome"] in ("optimal", "node_limit", "feasible") and stats["outside_bands"] == []


def test_above_the_whole_programs_size_the_leaders_the_outside_brokers_may_take_are_chosen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``BAND_MAX_PARTITIONS`` (here lowered to 100) only the partitions a broker outside the band may lead
    are the program's, every other leader kept: fewer variables than every leader's, and the band met all the same
    (fuzz medium seed 1, 109k partitions: one broker 0.01 % above network out's band after the hand-overs, inside
    with 2,828 variables in 0.6 s)."""
    cluster = _rf2_cluster(3)
    model = load_model(cluster)
    targets = make_targets(cluster, "rebalance")
    units = replica_table(cluster, model.loads, dimensions=["nw_out"]).per_partition["nw_out"][0].astype(float).tolist()
    bands = model.bands("nw_out", int(sum(units)), targets.eligible)
    monkeypatch.setattr(leader_pass, "BAND_MAX_PARTITIONS", 100)
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    stats = leader_pass._leaders_on_load(cluster, assignment, targets, model, Deadline.never())
    led = [assignment.get(p.tp, p.replicas)[0] for p in cluster.partitions]
    load, _ = _loads(led, units, range(8))
    assert all(bands[b].floor <= load[b] <= bands[b].ceil for b in range(8)), (load, stats)
    assert 0 < stats["in_bands"]["variables"] < sum(len(p.replicas) for p in cluster.partitions), stats["in_bands"]


def test_whole_leaders_the_gate_passes_prove_network_out_out_of_reach() -> None:
    """Two brokers and three partitions of network out 7, 7 and 6 (units of bytes in): a broker leads one or two of
    them, 6, 7, 13 or 14 against a target of 10 +- 10 %. Splitting a leadership reaches the band (the relaxation
    proves nothing) and no partition alone is too hot for the sum; the 0/1 program over whole leaders, the leader
    gate as rows, is infeasible: the plan records that proof and says why."""
    from rebalancer.plan import make_plan
    from rebalancer.plan.leader_exact import band_relaxation

    parts = [Partition("t", i, reps, reps[0], reps, size_bytes=100, bytes_in_per_s=rate)
             for i, (reps, rate) in enumerate((((0, 1), 7.0), ((1, 0), 7.0), ((0, 1), 6.0)))]
    cluster = Cluster([Broker(0), Broker(1)], parts)
    model = load_model(cluster)
    units = replica_table(cluster, model.loads, dimensions=["nw_out"]).per_partition["nw_out"][0].astype(float).tolist()
    bands = model.bands("nw_out", int(sum(units)), {0, 1})
    assert band_relaxation(units, [(0, 1)] * 3, bands) is True
    inp = LeaderLoadInput([0, 1, 0], [(0, 1)] * 3, {"nw_out": units}, {"nw_out": bands}, {"nw_out": 1.0})
    assert band_leaders(inp, GateRows(model.band["leaders"], frozenset({0, 1})))[1]["outcome"] == "infeasible"
    plan = make_plan(cluster, "rebalance", balance="load")
    assert plan.solver["network_out_proof"] == {"by": "0/1 program", "brokers": [0, 1]}
    assert "0/1 program over every leader is infeasible" in plan.solver["outside_why"]


@settings(max_examples=examples(25), deadline=None)
@given(st.integers(0, 40), st.lists(st.integers(-3, 3), min_size=2, max_size=8), st.sampled_from([0.1, 0.15, 0.3]))
def test_gate_rows_admit_every_choice_the_leader_gate_passes(mid: int, offsets: list[int], band: float) -> None:
    """The relaxed gate rows are a relaxation, or their "infeasible" would prove nothing: any leader counts the
    leader gate passes (|count - median| <= max(band x median, 1)), as whole leaders with a load band they all meet,
    leave the program a solution."""
    from rebalancer.balance import counts_excess

    counts = [max(0, mid + d) for d in offsets]
    assume(sum(counts) > 0)
    assume(not any(counts_excess(dict(enumerate(counts)), band).values()))
    leader = [b for b, n in enumerate(counts) for _ in range(n)]
    other = (leader[0] + 1) % len(counts)
    cands = [(leader[0], other)] + [(b,) for b in leader[1:]]  # one choice left: the program is built
    wide = {b: Band(0, 10**6, 1.0) for b in range(len(counts))}
    inp = LeaderLoadInput(leader, cands, {"nw_out": [1.0] * len(leader)}, {"nw_out": wide}, {"nw_out": 1.0})
    found, stats = band_leaders(inp, GateRows(band, frozenset(range(len(counts)))))
    assert stats["outcome"] != "infeasible" and found is not None, (counts, stats)


@settings(max_examples=examples(40), deadline=None)
@given(st.data())
def test_leaders_the_gate_rows_find_to_use_pass_the_leader_gate(data: st.DataObject) -> None:
    """``GateRows.to_use``: every choice the program finds passes the leader gate as the validation judges it (from
    the counts' median, at least one count of allowance) and meets every load band; where a choice meets the bands
    with every count at the median's allowance of a median it shares with more than half the brokers on each side,
    it finds one."""
    from rebalancer.balance import counts_excess

    brokers, cands, units, leader = _drawn(data, 5, 2, 9, 20)
    n_brokers = len(brokers)
    band = data.draw(st.sampled_from([0.1, 0.15, 0.5]))
    avg = sum(units) / n_brokers
    width = data.draw(st.sampled_from([0.3, 0.6, 2.0]))
    bands = {b: Band(int(avg * (1 - width)), int(avg * (1 + width)) + 1, avg) for b in brokers}
    inp = LeaderLoadInput(leader, cands, {"nw_out": units}, {"nw_out": bands}, {"nw_out": 1.0})
    found, stats = band_leaders(inp, GateRows(band, frozenset(brokers), to_use=True))
    if stats["status"] == "nothing to choose":
        return
    if found is not None:
        chosen = [found.get(i, b) for i, b in enumerate(leader)]
        load, count = _loads(chosen, units, brokers)
        assert not any(counts_excess(count, band).values()), (count, stats)
        assert all(bands[b].floor <= load[b] <= bands[b].ceil for b in brokers), (load, stats)
        return

    def plainly_passes(choice: tuple[int, ...]) -> bool:  # the rows' own case: a median more than half share
        load, count = _loads(list(choice), units, brokers)
        m = sorted(count.values())[n_brokers // 2]
        half = n_brokers // 2 + 1
        return (sum(c <= m for c in count.values()) >= half and sum(c >= m for c in count.values()) >= half
                and all(abs(c - m) <= max(band * m, 1) for c in count.values())
                and all(bands[b].floor <= load[b] <= bands[b].ceil for b in brokers))

    assert stats["outcome"] == "infeasible", stats
    assert not any(plainly_passes(c) for c in itertools.product(*cands))


def test_where_the_narrow_count_band_has_no_leaders_in_bands_the_gate_rows_find_some() -> None:
    """Fuzz small seed 196 (18 brokers, 1,454 partitions at RF 2): no leaders put network out within its band with
    every count inside the median-safe band, which is narrower than the gate; with the gate itself as rows they do,
    and the plan is Balanced (before: 36 % off network out's mean)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import load_cases

    from rebalancer.plan.planner import make_plan

    cluster, mode, new = load_cases.family("small", 196)
    plan = make_plan(cluster, mode, brokers=new or None)
    record = plan.solver["leaders"]["network_out"]
    assert record["in_bands"]["outcome"] == "infeasible" and record["in_gate_rows"]["outcome"] == "optimal"
    nw_out = plan.summary["load"]["dimensions"]["nw_out"]
    assert nw_out["outside_after"] == [] and nw_out["max_deviation_pct_after"] <= 10.0
    assert plan.solver["status"] == "Balanced"  # every band met, every count inside its gate (from the median)


@settings(max_examples=examples(40), deadline=None)
@given(st.data())
def test_even_leaders_bring_the_furthest_broker_as_near_as_any_choice(data: st.DataObject) -> None:
    """Against every choice of leaders with counts in their bands: ``even_leaders``' furthest broker (its leader load's
    deviation from its target) is within the program's gap of the least any choice reaches, and no broker's leader
    load nor topic's leaders end further outside what the network gate accepts or the topic's band than where they
    started; nothing only where no choice keeps the counts and those."""
    from rebalancer.plan.leader_exact import EVEN_CHANGES, EVEN_GAP, even_leaders, topic_violation

    brokers, cands, units, leader = _drawn(data, 4, 2, 8, 30)
    n_brokers, n = len(brokers), len(cands)
    topics = [data.draw(st.sampled_from("ab")) for _ in range(n)]
    avg = sum(units) / n_brokers
    bands = {b: Band(int(avg * 0.9), int(avg * 1.1) + 1, avg) for b in brokers}
    per = n / n_brokers
    counts = {b: Band(max(0, int(per) - 1), int(per) + 2, per) for b in brokers}
    topic_band = {t: Band(0, data.draw(st.integers(1, 3)), 1.0) for t in "ab"}
    gate = data.draw(st.sampled_from([0.2, 0.5, 5.0]))
    accepted = {b: (avg * (1 - gate), avg * (1 + gate)) for b in brokers}
    inp = LeaderLoadInput(leader, cands, {"nw_out": units}, {"nw_out": bands}, {"nw_out": 1.0}, topics=topics,
                          topic_band=topic_band, accepted={"nw_out": accepted})
    start_load, _ = _loads(leader, units, brokers)

    def within_gate(choice: list[int]) -> bool:  # inside what the gate accepts, or no further out than at the start
        load, _ = _loads(choice, units, brokers)
        return all(min(accepted[b][0], start_load[b]) - 1e-9 <= load[b] <= max(accepted[b][1], start_load[b]) + 1e-9
                   for b in brokers)

    def furthest(choice: list[int]) -> float:
        load, _ = _loads(choice, units, brokers)
        return max(abs(load[b] - avg) / avg for b in brokers)

    def allowed(choice: tuple[int, ...]) -> bool:
        _, count = _loads(list(choice), units, brokers)
        return all(counts[b].floor <= count[b] <= counts[b].ceil for b in brokers)

    def topic_out(choice: list[int]) -> dict[tuple[str, int], int]:
        out = {}
        for t in "ab":
            for b in brokers:
                k = sum(1 for i, x in enumerate(choice) if x == b and topics[i] == t)
                out[(t, b)] = topic_band[t].excess(k) + topic_band[t].deficit(k)
        return out

    found, stats = even_leaders(inp, counts)
    if stats["status"] == "nothing to choose":
        assert all(len(c) == 1 for c in cands)
        return
    start_out = topic_out(leader)
    feasible = [list(c) for c in itertools.product(*cands) if allowed(c) and within_gate(list(c))
                and all(v <= start_out[k] for k, v in topic_out(list(c)).items())]
    if found is None:
        assert not feasible, (feasible[:3], stats)
        return
    chosen = [found.get(i, b) for i, b in enumerate(leader)]
    assert allowed(tuple(chosen)) and within_gate(chosen)
    assert all(v <= start_out[k] for k, v in topic_out(chosen).items())
    assert topic_violation(chosen, topics, cands, topic_band) <= topic_violation(leader, topics, cands, topic_band)
    best = min(furthest(c) for c in feasible)
    assert furthest(chosen) <= (1 + EVEN_GAP) * (best + EVEN_CHANGES) + 1e-6, (furthest(chosen), best, stats)


def test_where_no_leaders_meet_the_band_they_bring_the_furthest_broker_nearer() -> None:
    """Fuzz small seed 127 (28 brokers, 397 partitions at RF 2): a partition too hot for network out's band puts it out
    of reach; the hand-overs stopped at 62 % off the mean. The leaders that bring the furthest broker nearest its
    target, no topic's leaders further outside their band than the hand-overs left them (5 leaders) and the counts
    within their gate, end it under 30 %."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import load_cases

    from rebalancer.plan.planner import make_plan

    cluster, mode, new = load_cases.family("small", 127)
    plan = make_plan(cluster, mode, brokers=new or None)
    even = plan.solver["leaders"]["network_out"]["even"]
    assert even["deviation_pct_before"] > 60 and even["deviation_pct_after"] < 30, even
    assert plan.summary["load"]["dimensions"]["nw_out"]["max_deviation_pct_after"] == even["deviation_pct_after"]
    assert plan.solver["leaders"]["topic_band_violation"] <= 5  # where the hand-overs left the topics' bands
    assert "leaders" not in plan.solver.get("outside_bands", {})  # the leader gate passes
