"""The leader hand-overs read a broker's whole pool as numpy columns (``leader_load._Leadership._whole_pool``): the
choice must be the one the reading partition by partition (``_one_by_one``, which reads the window near the size to
shed) makes over the same pool (same checks, same floating-point score, the first best in the pool's order), before
and after moves (the columns ``move`` keeps)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.load import Band
from rebalancer.plan.leader_load import LeaderLoadInput, _Leadership, leader_load


@st.composite
def inputs(draw: st.DrawFn) -> LeaderLoadInput:
    brokers = draw(st.integers(3, 7))
    n = draw(st.integers(4, 40))
    topics = [f"t{draw(st.integers(0, 4))}" for _ in range(n)]
    candidates, leader = [], []
    for _ in range(n):
        k = draw(st.integers(1, 3))
        reps = tuple(draw(st.permutations(range(brokers)))[:k])
        candidates.append(reps)
        leader.append(reps[0])
    # small whole units: ties between partitions are common, and some partitions carry nothing
    nw = [float(draw(st.integers(0, 6))) for _ in range(n)]
    total = sum(nw)
    nw_band = {b: Band(int(total / brokers * 0.9), int(total / brokers * 1.1) + 1, total / brokers) for b in range(brokers)}
    per = n / brokers
    count_band = {b: Band(int(per * 0.7), int(per * 1.3) + 1, per) for b in range(brokers)}
    leaders_band = {b: Band(int(per * 0.9), int(per * 1.1) + 1, per) for b in range(brokers)}
    per_topic = {t: topics.count(t) / brokers for t in set(topics)}
    topic_band = {t: Band(int(v), int(v) + 1, v) for t, v in per_topic.items()}
    accepted = None
    if draw(st.booleans()):
        accepted = {"nw_out": {b: (nw_band[b].floor * 0.8, nw_band[b].ceil * 1.2) for b in range(brokers)
                               if draw(st.booleans())},
                    "leaders": {b: (per * 0.8, per * 1.2) for b in range(brokers) if draw(st.booleans())}}
    return LeaderLoadInput(leader, candidates, {"nw_out": nw, "leaders": [1.0] * n},
                           {"nw_out": nw_band, "leaders": leaders_band}, {"nw_out": 10.0, "leaders": 1.0},
                           count_band=count_band if draw(st.booleans()) else None,
                           topics=topics, topic_band=topic_band if draw(st.booleans()) else None,
                           accepted=accepted)


@settings(max_examples=150, deadline=None)
@given(inputs(), st.floats(0.0, 3.0), st.integers(0, 8))
def test_the_whole_pool_read_as_columns_chooses_as_one_by_one(inp: LeaderLoadInput, desired: float,
                                                               moves: int) -> None:
    state = _Leadership(inp)
    for _ in range(moves + 1):
        chosen = None
        for x in state.brokers:
            pull = 3.0 / state.scale[state.main][x]
            led, could = state.lists(x)
            for giving, pool in ((True, led), (False, could)):
                got = state._whole_pool(x, giving, pool, desired, pull)
                assert got == state._one_by_one(x, giving, [i for _, i in pool], desired, pull)
                chosen = chosen or got
        if chosen is None:
            break
        i, a, c, _ = chosen
        state.move(i, a, c)  # the columns follow the move


def test_hand_overs_find_what_lies_far_from_the_size_to_shed() -> None:
    # broker 0 leads every partition and must shed more than any one carries, so the reading starts at its largest:
    # 30 partitions of 5 whose other replica, broker 2, may lead nothing (its leader-count ceiling is 0). Only the
    # whole pool holds what may go: the 10 partitions of 1 that broker 1 may take.
    n = 40
    leader = [0] * n
    candidates = [(0, 2)] * 30 + [(0, 1)] * 10
    units = [5.0] * 30 + [1.0] * 10
    total = sum(units)
    nw = {b: Band(int(total / 3 * 0.9), int(total / 3 * 1.1) + 1, total / 3) for b in range(3)}
    counts = {0: Band(0, n, n / 3), 1: Band(0, n, n / 3), 2: Band(0, 0, n / 3)}
    inp = LeaderLoadInput(leader, candidates, {"nw_out": units}, {"nw_out": nw}, {"nw_out": 1.0}, count_band=counts)
    changed, stats = leader_load(inp)
    assert changed == {i: 1 for i in range(30, 40)}
    assert stats["outside_bands"] == [0, 1, 2]  # the bands are out of reach: every move that helps is made


def test_hand_overs_of_nothing_hand_over_nothing() -> None:
    """An input with no broker and no partition: nothing to hand over, not a crash (the columns of each broker's
    span were built for at least one broker)."""
    changed, stats = leader_load(LeaderLoadInput([], [], {"nw_out": []}, {"nw_out": {}}, {}))
    assert changed == {} and stats["moves"] == 0 and stats["outside_bands"] == []
