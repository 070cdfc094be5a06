"""The rolling schedule (rebalancer.movement.schedule) on plain data: its caps, each partition's steps one at a time
and in order, no broker idle while a step of its would fit, and the fluid model of the throttles against the bound."""

from __future__ import annotations

import random

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from rebalancer.movement.batches import Step, make_batches, step_loads, steps_of
from rebalancer.movement.estimate import transfer
from rebalancer.movement.fluid import fair_rates, simulate_batches
from rebalancer.movement.schedule import Scheduler, simulate


def _steps(rng: random.Random, brokers: int, partitions: int) -> list[Step]:
    out: list[Step] = []
    for p in range(partitions):
        before = tuple(rng.sample(range(brokers), 2))
        k = rng.choice([0, 1, 1, 2])  # replicas replaced: a reorder, one, or two (two steps)
        others = [b for b in range(brokers) if b not in before]
        after = tuple(rng.sample(others, k)) + before[k:] if k else before[::-1]
        size = int(rng.lognormvariate(20, 1.5))
        out += steps_of("t", p, before, after, size)
    return out


def _bound(steps: list[Step]) -> float:
    return max((max(v) for v in transfer(steps).values()), default=0)


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 10_000), brokers=st.integers(4, 9), partitions=st.integers(1, 40),
       per_broker=st.integers(1, 4), total=st.integers(1, 12))
def test_the_simulated_schedule_keeps_the_caps_and_each_partitions_order(seed: int, brokers: int, partitions: int,
                                                                          per_broker: int, total: int) -> None:
    steps = _steps(random.Random(seed), brokers, partitions)
    sim = simulate(steps, 1e6, per_broker=per_broker, total=total)
    data = [s for s in steps if not s.leader_only]
    def key(s: Step) -> tuple[str, int, int]:
        return (s.topic, s.partition, s.seq)

    assert sorted((s for _, s in sim.finishes), key=key) == sorted(data, key=key) == sorted(
        (s for _, s in sim.starts), key=key)
    # replay: finishes before starts at the same instant, as the scheduler frees room then fills it
    events = sorted([(t, 0, s) for t, s in sim.finishes] + [(t, 1, s) for t, s in sim.starts],
                    key=lambda e: (e[0], e[1]))
    flying: dict[tuple[int, str], int] = {}  # per throttle: a broker's in and out apart, as Kafka throttles them
    partition_busy: set[tuple[str, int]] = set()
    done_seq: dict[tuple[str, int], int] = {}
    for _, kind, s in events:
        if kind == 1:
            assert s.tp not in partition_busy  # one step of a partition at a time
            assert s.seq == done_seq.get(s.tp, 0)  # and in order
            partition_busy.add(s.tp)
            for t in step_loads(s):
                flying[t] = flying.get(t, 0) + 1
                assert flying[t] <= per_broker
            assert len(partition_busy) <= total
        else:
            partition_busy.discard(s.tp)
            done_seq[s.tp] = s.seq + 1
            for t in step_loads(s):
                flying[t] -= 1
    # no order beats the busiest throttle's bytes (the model is faithful to the bound)
    assert sim.makespan >= _bound(data) / 1e6 * (1 - 1e-9)
    assert max(sim.peak_in_flight.values(), default=0) <= per_broker


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 10_000), brokers=st.integers(4, 9), partitions=st.integers(1, 40),
       per_broker=st.integers(1, 4), total=st.integers(1, 12))
def test_no_broker_waits_while_a_step_of_its_would_fit(seed: int, brokers: int, partitions: int, per_broker: int,
                                                       total: int) -> None:
    rng = random.Random(seed)
    sched = Scheduler(_steps(rng, brokers, partitions), per_broker=per_broker, total=total)
    flying: list[Step] = []
    while not sched.done:
        flying += sched.ready()
        assert sched.idle_with_work() == []
        assert flying
        sched.finish(flying.pop(rng.randrange(len(flying))))  # moves end in any order


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 10_000), brokers=st.integers(4, 9), partitions=st.integers(1, 40),
       per_broker=st.integers(1, 4), total=st.integers(1, 12), drain=st.booleans())
def test_ready_looks_only_where_room_freed_and_chooses_as_if_it_looked_everywhere(
        seed: int, brokers: int, partitions: int, per_broker: int, total: int, drain: bool) -> None:
    # drain: a clock, a throttle and a floor of bytes in flight, so that room also frees as moves drain
    rng = random.Random(seed)
    steps = _steps(rng, brokers, partitions)
    extra = {"rate": 1e8, "min_bytes": 10**8} if drain else {}
    fast = Scheduler(steps, per_broker=per_broker, total=total, **extra)
    slow = Scheduler(steps, per_broker=per_broker, total=total, **extra)
    slow._candidates = slow._waiting  # type: ignore[method-assign]  # every waiting step, every time
    flying: list[Step] = []
    now = 0.0
    while not slow.done:
        started = slow.ready(now)
        assert fast.ready(now) == started
        flying += started
        now += rng.choice([0.0, 0.1, 1.0, 5.0])
        done = flying.pop(rng.randrange(len(flying)))  # moves end in any order
        slow.finish(done, now)
        fast.finish(done, now)
    assert fast.done


def test_a_move_drained_by_the_clock_makes_room_before_it_finishes() -> None:
    # Broker 9 receives a 100-byte move from 1, then two of 10 from 2 and 3; one move at a time, a floor of 20 bytes
    # in flight, 10 bytes/s. Counted whole, the big move keeps 9 full until it finishes; by the clock, 9 takes the
    # next move once less than 20 bytes of it are left (after 8 s), so 9's throttle never waits for the executor.
    big = Step("big", 0, (1, 4), (9, 4), 100)
    small = [Step("small", i, (2 + i, 4), (9, 4), 10) for i in range(2)]
    whole = Scheduler([big, *small], per_broker=1, min_bytes=20)
    clock = Scheduler([big, *small], per_broker=1, min_bytes=20, rate=10.0)
    assert whole.ready(0.0) == clock.ready(0.0) == [big]
    assert clock.ready(7.9) == [] and clock.wake() == pytest.approx(8.0)
    assert whole.ready(8.5) == [] and clock.ready(8.5) == [small[0]]
    assert clock.left_bytes((9, "in")) == pytest.approx(15.0 + 10.0)  # 15 left of the big one, the new one whole
    clock.finish(big, 9.0)  # meanwhile both shared 9's throttle: 5 bytes/s each
    assert clock.left_bytes((9, "in")) == pytest.approx(7.5)


def test_an_empty_partitions_move_drains_by_the_clock_with_nothing_left() -> None:
    # A move of an empty partition (0 bytes) in flight beside others: it holds no bytes of its throttles, and the
    # clock's reading, the wake-up and its finish count it as such (they divided by its size).
    empty = Step("empty", 0, (1, 4), (9, 4), 0)
    big = Step("big", 0, (2, 4), (9, 4), 100)
    clock = Scheduler([empty, big], per_broker=2, min_bytes=20, rate=10.0)
    assert clock.ready(0.0) == [big, empty]
    assert clock.ready(1.0) == [] and clock.left_bytes((9, "in")) == pytest.approx(90.0)
    assert clock.wake() == pytest.approx(8.0)
    clock.finish(empty, 2.0)
    assert clock.left_bytes((9, "in")) == pytest.approx(80.0)
    sim = simulate([empty, big, Step("small", 0, (3, 4), (9, 4), 10)], 10.0, per_broker=1, poll=0.1, start_cost=0.1)
    assert sim.stuck is None and len(sim.finishes) == 3


def test_moves_past_the_count_share_the_total_cap_among_the_throttles_short_of_bytes() -> None:
    # Brokers 12 and 13 each receive ten small moves from brokers of their own, 12 a little more (the critical one);
    # one move per broker, six in all, and both far below min_bytes in flight. Each takes its counted move first,
    # then the rest of the total goes a move to each in turn: 12's small moves took all six, 13 waiting idle.
    into12 = [Step("a", i, (i, 50), (12, 50), 10) for i in range(10)]
    into13 = [Step("b", i, (20 + i, 50), (13, 50), 9) for i in range(10)]
    sched = Scheduler([*into12, *into13], per_broker=1, total=6, min_bytes=1000, rate=10.0)
    started = sched.ready(0.0)
    assert [s.topic for s in started] == ["a", "b", "a", "b", "a", "b"]
    assert started[0] == into12[0] and started[1] == into13[0]  # each throttle's largest, the critical one first


def test_a_move_not_yet_submitted_drains_from_when_it_copies() -> None:
    # As above, but the executor submits the big move a second after choosing it (its throttles and state written
    # first): until then it holds its 100 bytes whole, so 9 makes room at 9 s, not at 8 s.
    big = Step("big", 0, (1, 4), (9, 4), 100)
    small = Step("small", 0, (2, 4), (9, 4), 10)
    sched = Scheduler([big, small], per_broker=1, min_bytes=20, rate=10.0)
    assert sched.ready(0.0, copying=False) == [big]
    assert sched.ready(0.5) == [] and sched.left_bytes((9, "in")) == 100 and sched.wake() is None
    sched.copying([big], 1.0)
    assert sched.ready(8.5) == [] and sched.wake() == pytest.approx(9.0)
    assert sched.ready(9.5) == [small]


def test_draining_by_the_clock_keeps_the_critical_broker_busy_through_the_executors_loop() -> None:
    # Heavy-tailed moves onto four new brokers (half a second's copy at the median), the executor's loop between a
    # finish and the next start (over a second): counting a move in flight whole until it finishes leaves the
    # critical brokers idle while the loop reacts (seeds 1, 2, 3, 7: 1.05-1.12x the bound; drained 1.01-1.02x).
    rng = random.Random(1)
    steps: list[Step] = []
    for p in range(400):
        before = tuple(rng.sample(range(12), 2))
        steps += steps_of("t", p, before, (12 + p % 4, before[1]), int(rng.lognormvariate(13, 1.5)))
    bound = _bound(steps) / 1e6
    whole = simulate(steps, 1e6, poll=0.2, start_cost=1.0, drain=False).makespan / bound
    drained = simulate(steps, 1e6, poll=0.2, start_cost=1.0).makespan / bound
    assert whole > 1.10 and drained <= 1.05, (whole, drained)


def test_the_critical_broker_starts_first_and_largest_first() -> None:
    # Broker 9 receives three large moves (the bound); brokers 5-8 each one small one. One move in flight per broker:
    # the first ready steps are 9's largest and the small ones that do not touch 9's source.
    big = [Step("big", i, (0, 1), (9, 1), size) for i, size in enumerate((300, 500, 400))]
    small = [Step("small", i, (2, 3), (5 + i, 3), 10) for i in range(4)]
    sched = Scheduler(big + small, per_broker=1)
    first = sched.ready()
    assert first[0] == big[1]  # 500 bytes into 9: the critical throttle, largest first
    assert first[1:] == [small[0]]  # broker 2 (the small ones' source) has room for one


def test_upcoming_looks_depth_times_as_far_in_ready_order() -> None:
    # Broker 9 receives six moves from broker 0, one per throttle in flight: next come the largest waiting, then
    # the next ones.
    big = [Step("big", i, (0, 8), (9, 8), size) for i, size in enumerate((100, 600, 300, 500, 200, 400))]
    sched = Scheduler(big, per_broker=1)
    assert sched.ready() == [big[1]]  # 600 bytes: in flight, so no longer upcoming
    assert sched.upcoming() == [big[3]]
    assert sched.upcoming(2) == [big[3], big[5]]
    assert sched.upcoming(3) == [big[3], big[5], big[2]]


def test_rolling_reaches_the_bound_where_batches_wait_for_stragglers() -> None:
    # Broker 9 must receive 10 x 100 bytes (the bound, 1,000 s at 1 B/s), two at a time; broker 8 one 600-byte move.
    # Batches wait for it: the first batch lasts 600 s with broker 9 busy for 200 of them (1,400 s in all); rolling,
    # it copies beside broker 9's moves.
    big = [Step("big", i, (i % 3, 3), (9, 3), 100) for i in range(10)]
    steps = [*big, Step("other", 0, (4, 5), (8, 5), 600)]
    bound = _bound(steps)
    assert bound == 1000
    rolling = simulate(steps, 1.0, per_broker=2, total=4).makespan
    batched = simulate_batches(make_batches(steps, per_broker=2, total=4, order="smallest"), 1.0).makespan
    assert rolling == pytest.approx(bound)
    assert batched == pytest.approx(1400)


def test_a_broker_sends_and_receives_at_once_its_throttles_are_apart() -> None:
    # One move per throttle: broker 5 sends a to 6 and receives b from 7 at once (Kafka throttles its replication in
    # and out apart), while a second move into 6 waits for a.
    a = Step("a", 0, (5, 1), (6, 1), 100)
    b = Step("b", 0, (7, 1), (5, 1), 100)
    c = Step("c", 0, (8, 1), (6, 1), 50)
    sched = Scheduler([a, b, c], per_broker=1)
    assert sched.ready() == [a, b] and sched.flying[(5, "out")] == sched.flying[(5, "in")] == 1
    sched.finish(a)
    assert sched.ready() == [c]


def test_fair_rates_share_each_throttle() -> None:
    # two copies into broker 1 from 0 and 2, one from 2 into 3: broker 1's in-throttle is shared, 2's out too
    rates = fair_rates([((1, "in"), (0, "out")), ((1, "in"), (2, "out")), ((3, "in"), (2, "out"))], 10.0)
    assert rates == pytest.approx([5.0, 5.0, 5.0])
    assert fair_rates([((1, "in"), (0, "out"))], 10.0) == pytest.approx([10.0])


def test_a_broker_short_of_min_bytes_in_flight_takes_more_than_the_count() -> None:
    # Broker 9 receives six moves of 10 bytes from broker 0. Two at once by the count; with a floor of 35 bytes in
    # flight it takes moves until it holds 40 (short moves would drain before the executor reacts to a finish).
    small = [Step("s", i, (0, 1), (9, 1), 10) for i in range(6)]
    assert len(Scheduler(small, per_broker=2).ready()) == 2
    deep = Scheduler(small, per_broker=2, min_bytes=35)
    assert len(deep.ready()) == 4 and deep.flying_bytes[(9, "in")] == 40
    # Raised while moves are in flight: the waiting steps are looked at again.
    later = Scheduler(small, per_broker=2)
    first = later.ready()
    later.set_min_bytes(55)
    assert len(first) == 2 and len(later.ready()) == 4 and later.done is False
    for s in small:
        later.finish(s)
    assert later.done and later.flying_bytes[(9, "in")] == 0 and later.flying[(9, "in")] == 0


def test_the_rolling_peak_counts_a_move_from_its_start_until_it_frees_its_source() -> None:
    """Broker 6 receives a move from 5 and one from 7, one move at a time through its throttle in: the second starts
    once the first has copied (and freed its source), so 6 holds 100 from the first round of starts and 200 from the
    second; 5 and 7 only give and never hold more than before."""
    from rebalancer.movement.schedule import rolling_peak_disk

    steps = steps_of("a", 0, (5,), (6,), 100) + steps_of("b", 0, (7,), (6,), 100)
    sim = simulate(steps, 10.0, per_broker=1)
    assert [s.topic for _, s in sim.starts] == ["a", "b"]  # ties: by topic
    held = {5: 1000, 6: 0, 7: 500}
    peak = rolling_peak_disk(sim, held)
    assert peak[5] == (1000, -1) and peak[6] == (200, 1) and peak[7] == (500, -1)
    # both at once (two moves per throttle): 6 holds both new copies from the first round
    together = rolling_peak_disk(simulate(steps, 10.0, per_broker=2), held)
    assert together[6] == (200, 0) and together[5] == (1000, -1)


def test_a_move_waits_for_disk_room_its_destination_gets_when_another_move_leaves_it() -> None:
    """Broker 9 holds 80 of at most 100: it receives 60 (a) and gives 50 away (b). Both at once (what the caps allow)
    would fill it to 140; with its room known, a waits for b to free 50 and 9 never holds more than 90."""
    from rebalancer.movement.schedule import DiskRoom, rolling_peak_disk

    a = Step("a", 0, (1, 2), (9, 2), 60)
    b = Step("b", 0, (9, 3), (5, 3), 50)
    room = DiskRoom({9: 80, 5: 0, 1: 60}, {9: 100})
    naive = Scheduler([a, b])
    assert set(naive.ready()) == {a, b} and naive.disk == {9: 60, 5: 50}  # no limit: counted from 0
    sched = Scheduler([a, b], room=room)
    assert sched.ready() == [b] and sched.ready() == [] and sched.stuck() is None
    sched.finish(b)
    assert sched.disk[9] == 30 and sched.ready() == [a] and sched.disk_peak[9] == 90
    sched.finish(a)
    assert sched.done and sched.disk == {9: 90, 5: 50, 1: 0}
    held = {9: 80, 5: 0, 1: 60}
    assert rolling_peak_disk(simulate([a, b], 10.0), held)[9][0] == 140
    sim = simulate([a, b], 10.0, room=room)
    assert rolling_peak_disk(sim, held)[9][0] == 90 and sim.stuck is None


def test_a_move_no_order_makes_room_for_is_named_not_waited_on_forever() -> None:
    from rebalancer.movement.schedule import DiskRoom

    a = Step("a", 0, (1, 2), (9, 2), 60)
    c = Step("c", 0, (3, 4), (5, 4), 10)
    room = DiskRoom({9: 80}, {9: 100})
    sched = Scheduler([a, c], room=room)
    assert sched.ready() == [c] and sched.stuck() is None  # something in flight: a may get room yet
    sched.finish(c)
    assert sched.ready() == [] and sched.stuck() == (
        "a-0 cannot start: broker 9 holds 80 bytes and would hold 140, above its limit of 100, and no move in "
        "flight frees room on it")
    sim = simulate([a, c], 10.0, room=room)
    assert [s for _, s in sim.starts] == [c] and sim.stuck is not None and "broker 9" in sim.stuck
    # resumed after c and a move that freed 50 on 9: room enough
    assert room.after([c, Step("d", 0, (9, 6), (7, 6), 50)]).held == {9: 30, 5: 10, 3: -10, 7: 50}
