"""The execution's time before approval (issue 43, step 1): the physical bound at the throttle (the busiest broker's
bytes in or out), the expected duration of the executor's batches, and where an operator reads them (plan.json,
``rebalancer plan``, the approval request; the report: tests/test_report.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import examples, run_cli
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rebalancer import runbook
from rebalancer.formats import write_cluster_json
from rebalancer.movement.batches import Step, batch_floor, make_batches, peak_disk, steps_of
from rebalancer.movement.estimate import (
    BATCH_OVERHEAD_S,
    RATE_FACTOR,
    batch_cost,
    describe,
    duration,
    estimate,
    transfer,
)
from rebalancer.sim.scenarios import ScenarioParams, build_scenario

MB = 1_000_000


def change(topic: str, partition: int, before: tuple[int, ...], after: tuple[int, ...], size: int) -> SimpleNamespace:
    return SimpleNamespace(topic=topic, partition=partition, replicas_before=before, replicas_after=after,
                           size_bytes=size)


def test_bytes_in_and_out_follow_the_steps_a_change_is_split_into() -> None:
    # [0, 1] -> [2, 3]: two steps. The first adds 2 fetching from 0; the second adds 3 fetching from 2, which the
    # first step put first (the leader the new replica fetches from, as the executor throttles it).
    steps = steps_of("t", 0, (0, 1), (2, 3), 100)
    assert [s.before[0] for s in steps] == [0, 2]
    assert transfer(steps) == {0: (0, 100), 2: (100, 100), 3: (100, 0)}


def test_the_bound_is_the_busiest_broker_and_says_which_way() -> None:
    # Broker 0 sends 300 bytes (three partitions it leads, each to a new replica elsewhere); 4 receives 200.
    changes = [change("t", 0, (0, 1), (4, 1), 100), change("t", 1, (0, 2), (4, 2), 100),
               change("t", 2, (0, 3), (5, 3), 100)]
    e = estimate(changes, 10)
    assert (e.bound_broker, e.bound_direction, e.bound_bytes, e.bound_seconds) == (0, "out", 300, 30.0)
    assert e.batches == 1 and e.batch_floor_seconds == 30.0
    assert e.expected_seconds == 30.0 * RATE_FACTOR + BATCH_OVERHEAD_S
    assert describe(e) == "at 10 B/s: at least 30 s, broker 0 sends 300 B; expected 36 s (1 batch)"


def test_batches_of_one_move_per_broker_add_up_to_more_than_the_bound_unless_formed_for_it() -> None:
    # Two moves into broker 4 (400 bytes: the bound), at most one move per broker per batch.
    changes = [change("t", 0, (0,), (4,), 100), change("t", 1, (1,), (4,), 300), change("t", 2, (2,), (5,), 300)]
    small = estimate(changes, 100, per_broker=1, order="smallest")
    assert small.bound_seconds == 4.0 and small.bound_broker == 4
    # smallest first: partitions 0 and 2 (broker 5 receives 300 bytes: 3 s), then 1 (3 s)
    assert small.batches == 2 and small.batch_floor_seconds == 6.0
    # formed for the bound: broker 4's largest move with partition 2 beside it (3 s), then its other one (1 s)
    bound = estimate(changes, 100, per_broker=1)
    assert bound.batches == 2 and bound.batch_floor_seconds == 4.0 == bound.bound_seconds


def test_a_broker_sending_and_receiving_in_one_batch_is_busy_for_the_larger() -> None:
    # Broker 1 receives partition 0 from 0 and sends partition 1 to 2, 100 bytes each way: Kafka throttles its
    # replication in and out apart, so the batch takes 100 bytes' time, as the bound says, not 200.
    changes = [change("t", 0, (0,), (1,), 100), change("t", 1, (1,), (2,), 100)]
    e = estimate(changes, 10)
    assert e.bound_seconds == 10.0 and e.batches == 1
    assert e.batch_floor_seconds == 10.0
    steps = [s for c in changes for s in steps_of(c.topic, c.partition, c.replicas_before, c.replicas_after,
                                                  c.size_bytes)]
    assert batch_floor([steps]) == 100


@settings(max_examples=examples(100), deadline=None)
@example([([0], [4], 7), ([1], [0], 5), ([1], [0], 5), ([2], [0], 7), ([2], [4], 10)], 4, 5, 1)
@given(st.lists(st.tuples(st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
                          st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True),
                          st.integers(1, 10**9)), min_size=1, max_size=25),
       st.integers(1, 4), st.integers(1, 30), st.integers(1, 10**8))
def test_no_schedule_of_batches_beats_the_bound(raw, per_broker: int, total: int, throttle: int) -> None:
    changes = []
    for i, (before, after, size) in enumerate(raw):
        after = after[:len(before)] + [b for b in before if b not in after][:max(0, len(before) - len(after))]
        if len(after) < len(before) or sorted(after) == sorted(before):
            continue
        changes.append(change("t", i, tuple(before), tuple(after), size))
    e = estimate(changes, throttle, per_broker=per_broker, total=total)
    steps = [s for c in changes for s in steps_of(c.topic, c.partition, c.replicas_before, c.replicas_after,
                                                  c.size_bytes)]
    per = transfer(steps)
    assert e.bound_bytes == max((max(v) for v in per.values()), default=0)
    # each batch waits for its busiest broker: the sum over batches is never below the whole plan's busiest broker
    assert e.batch_floor_seconds >= e.bound_seconds * (1 - 1e-9) - 1e-3
    assert e.expected_seconds >= e.bound_seconds - 1e-3
    # as the executor batches: with the cost of one more batch at the throttle (a batch may split where its moves
    # hold each other back by more: five moves, three onto broker 0, at 1 byte/s are two batches, not the caps' one)
    assert e.batches == len(make_batches(steps, per_broker=per_broker, total=total, batch_cost=batch_cost(throttle)))


def test_the_rolling_estimate_starts_each_move_when_its_brokers_have_room() -> None:
    """One broker receives a long move and two short ones, one each from three others, at most one move per broker:
    batches wait for the long move before the short ones start on their own brokers, rolling does not."""
    from rebalancer.movement.estimate import POLL_S, START_COST_S

    changes = [change("t", 0, (0,), (4,), 1000), change("t", 1, (1,), (5,), 100), change("t", 2, (2,), (5,), 100),
               change("t", 3, (3,), (5,), 100)]
    batches = estimate(changes, 10, per_broker=1)
    rolling = estimate(changes, 10, schedule="rolling", per_broker=1)
    assert batches.bound_seconds == rolling.bound_seconds == 100.0 and rolling.schedule == "rolling"
    # the fluid model: broker 4's 100 s with 5's three moves of 10 s beside it, one after another
    assert rolling.modelled_seconds == pytest.approx(100.0)
    # at the real copy rate, the long move from the loop's first start: its round's Admin API calls, then the
    # copy, then the election at the end
    assert rolling.expected_seconds == pytest.approx(START_COST_S + 100.0 * RATE_FACTOR + BATCH_OVERHEAD_S)
    assert rolling.expected_seconds < batches.expected_seconds
    assert rolling.batches == 3  # rounds of starts: the first, then one per short move that freed broker 5
    assert POLL_S > 0 and describe(rolling).endswith("(rolling)")
    # a faster poll is seen sooner: one poll less of each batch's overhead
    faster = estimate(changes, 10, per_broker=1, poll=0.2)
    assert faster.expected_seconds == pytest.approx(batches.expected_seconds - (POLL_S - 0.2) * batches.batches)
    with pytest.raises(ValueError, match="schedule must be one of batches, rolling"):
        estimate(changes, 10, schedule="auto")


def test_a_partitions_steps_wait_for_the_loop_between_them() -> None:
    """A partition's second step starts when its first is seen done (half a poll late, on average) and its round of
    starts has been submitted: the model counts that idle time, which only the executor's loop causes."""
    from rebalancer.movement.schedule import simulate

    steps = steps_of("t", 0, (0, 1), (2, 3), 100)
    assert len(steps) == 2
    assert simulate(steps, 10.0).makespan == pytest.approx(20.0)
    assert simulate(steps, 10.0, poll=1.0, start_cost=0.5).makespan == pytest.approx(0.5 + 10 + 0.5 + 0.5 + 10)


def test_durations_read_as_an_operator_says_them() -> None:
    assert [duration(x) for x in (0.2, 89, 90, 1320, 5399, 5401, 36000)] == \
        ["1 s", "89 s", "2 min", "22 min", "1 h 30 min", "1 h 31 min", "10 h 00 min"]


def test_the_plan_says_the_time_at_the_throttle_it_was_planned_for(tmp_path: Path) -> None:
    """plan.json's summary, ``rebalancer plan``'s output and the approval request carry it; a throttle
    that is not one fails before anything is written."""
    desc = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams()), desc)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{desc}")
    bad = run_cli("plan", str(run), "--mode", "add-brokers", "--brokers", "12,13,14,15", "--throttle", "fast")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "throttle" in bad.stderr
    assert not (run / "plan.json").exists()
    out = run_cli("plan", str(run), "--mode", "add-brokers", "--brokers", "12,13,14,15", "--throttle", "20MB/s",
                  "--max-moves-per-broker", "3")
    assert out.returncode == 0, out.stderr
    doc = json.loads((run / "plan.json").read_text())
    e = doc["summary"]["execution"]
    steps = [Step(c["topic"], c["partition"], tuple(c["replicas_before"]), tuple(c["replicas_after"]),
                  c["size_bytes"]) for c in doc["changes"]]
    per = transfer(s for c in steps for s in steps_of(c.topic, c.partition, c.before, c.after, c.size_bytes))
    assert e["throttle_bytes_per_s"] == 20 * MB and e["bound_bytes"] == max(max(v) for v in per.values())
    assert max(per[e["bound_broker"]]) == e["bound_bytes"] and e["bound_broker"] in (12, 13, 14, 15)  # new: receive
    assert e["bound_seconds"] == e["bound_bytes"] / (20 * MB) and e["expected_seconds"] > e["bound_seconds"]
    line = describe(e)
    assert line.startswith(f"at 20 MB/s: at least {duration(e['bound_seconds'])}, broker {e['bound_broker']} receives")
    assert f"execution {line}" in out.stdout
    _, body = runbook.approval_request(run)
    assert "**Execution** at 20 MB/s: at least" in body.replace("\\", "")
    # The schedule it assumes, the rolling one asked for: its own estimate, said as such.
    out = run_cli("plan", str(run), "--mode", "add-brokers", "--brokers", "12,13,14,15", "--throttle", "20MB/s",
                  "--schedule", "rolling")
    assert out.returncode == 0, out.stderr
    rolled = json.loads((run / "plan.json").read_text())["summary"]["execution"]
    assert rolled["schedule"] == "rolling" and rolled["per_broker"] == 2 and rolled["bound_bytes"] == e["bound_bytes"]
    assert f"execution {describe(rolled)}" in out.stdout and describe(rolled).endswith("(rolling)")


def test_the_plans_default_estimate_is_the_schedule_the_snapshots_source_runs(tmp_path: Path) -> None:
    """``auto`` (the default) estimated as the execution will resolve it: batches for a snapshot read from a file (or
    through ZooKeeper), rolling for one read through the Admin API (kafka://), where the executor runs rolling."""
    desc = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams()), desc)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{desc}")
    args = ("plan", str(run), "--mode", "add-brokers", "--brokers", "12,13,14,15")
    assert run_cli(*args).returncode == 0
    assert json.loads((run / "plan.json").read_text())["summary"]["execution"]["schedule"] == "batches"
    snap = json.loads((run / "snapshot.json").read_text())
    snap["meta"]["source"] = "kafka://broker-1:9092"
    (run / "snapshot.json").write_text(json.dumps(snap))
    assert run_cli(*args).returncode == 0
    assert json.loads((run / "plan.json").read_text())["summary"]["execution"]["schedule"] == "rolling"
    assert run_cli(*args, "--schedule", "batches").returncode == 0
    assert json.loads((run / "plan.json").read_text())["summary"]["execution"]["schedule"] == "batches"


def _assert_batch_rules(batches: list[list[Step]], steps: list[Step], per_broker: int, total: int,
                        max_bytes: int | None, nonempty: bool = False) -> None:
    """Every step once; a partition's steps one per batch and in order; the caps on moves per broker, moves and
    bytes per batch (a larger step alone); ``nonempty``: no empty batch."""
    key = (lambda s: (s.tp, s.seq))
    assert sorted((s for bt in batches for s in bt), key=key) == sorted(steps, key=key)
    done: dict[tuple[str, int], int] = {}
    for bt in batches:
        assert (bt or not nonempty) and len(bt) <= total and len({s.tp for s in bt}) == len(bt)
        assert max_bytes is None or len(bt) == 1 or sum(s.bytes for s in bt) <= max_bytes
        for broker in {x for s in bt for x in s.brokers()}:
            assert sum(1 for s in bt if broker in s.brokers()) <= per_broker
        for s in bt:
            assert s.seq == done.get(s.tp, 0)
            done[s.tp] = s.seq + 1


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(1, 10**6),
                          st.booleans()), min_size=1, max_size=40),
       st.integers(1, 3), st.integers(1, 12), st.sampled_from([None, 10**6, 3 * 10**6]))
def test_batches_formed_for_the_bound_keep_every_rule(raw, per_broker: int, total: int, max_bytes) -> None:
    """Every step once; a partition's steps one per batch and in order; the caps on moves per broker, moves and bytes
    per batch (a larger step alone); never a higher floor than the largest steps first."""
    steps: list[Step] = []
    for i, (a, b, c, size, two) in enumerate(raw):
        if len({a, b, c}) < 3:
            continue
        after = (c, a + 10) if two else (c, b)  # two replicas replaced: two steps
        steps += steps_of("t", i, (a, b), after, size)
    batches = make_batches(steps, per_broker=per_broker, total=total, max_bytes=max_bytes)
    _assert_batch_rules(batches, steps, per_broker, total, max_bytes)
    largest = make_batches(steps, per_broker=per_broker, total=total, max_bytes=max_bytes, order="largest")
    assert batch_floor(batches) <= batch_floor(largest)


def _bound_batches_by_definition(data: list[Step], per_broker: int, total: int,
                                 max_bytes: int | None) -> list[list[Step]]:
    """``batches._bound_batches`` as its docstring defines it, reading every ready step for every batch (the
    library's version reads only the per-broker lists it can still take from: minutes saved at 60,000 steps)."""
    from rebalancer.movement.batches import _Batch, _per_broker, step_loads

    loads = {id(s): _per_broker(step_loads(s)) for s in data}
    left: dict[int, int] = {}
    for s in data:
        for b, x in loads[id(s)].items():
            left[b] = left.get(b, 0) + x
    queues: dict[tuple[str, int], list[Step]] = {}
    for s in data:
        queues.setdefault(s.tp, []).append(s)
    heads = dict.fromkeys(queues, 0)
    batches = []
    while heads:
        ready = sorted((queues[tp][i] for tp, i in heads.items()), key=lambda s: (-s.bytes, s.topic, s.partition))
        critical = max((b for s in ready for b in loads[id(s)]), key=lambda b: (left[b], -b))
        batch = _Batch(per_broker, total, max_bytes)
        for s in ready:
            if critical in loads[id(s)] and batch.fits(s, loads[id(s)]):
                batch.take(s, loads[id(s)])
        length = max(batch.held.values(), default=0)
        taken = {id(s) for s in batch.steps}
        rest = sorted((s for s in ready if id(s) not in taken),
                      key=lambda s: (-max(left[b] for b in loads[id(s)]), -s.bytes, s.topic, s.partition))
        for s in rest:
            if batch.fits(s, loads[id(s)], length):
                batch.take(s, loads[id(s)])
        for s in batch.steps:
            for b, x in loads[id(s)].items():
                left[b] -= x
            heads[s.tp] += 1
            if heads[s.tp] == len(queues[s.tp]):
                del heads[s.tp]
        batches.append(batch.steps)
    return batches


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.sampled_from([1, 5, 5, 9, 10**6]),
                          st.integers(1, 10**6), st.booleans(), st.integers(0, 2), st.booleans()),
                min_size=1, max_size=60),
       st.integers(1, 4), st.integers(1, 20), st.sampled_from([None, 10, 10**6]))
def test_batches_for_the_bound_are_those_of_their_definition(raw, per_broker: int, total: int, max_bytes) -> None:
    """The fast batching (per-broker lists, read only while they can fit) chooses what reading every ready step
    chooses, ties in sizes and bytes left included, and steps adding two replicas at once (a step read back from an
    execution's state may: each destination is loaded by one replica's size, the source by both)."""
    from rebalancer.movement.batches import _bound_batches

    steps: list[Step] = []
    for i, (a, b, c, tied, size, two, topic, whole) in enumerate(raw):
        if len({a, b, c}) < 3:
            continue
        after = (c, a + 8) if two else (c, b)
        size = tied if tied != 10**6 else size
        steps += [Step(f"t{topic}", i, (a, b), after, size)] if whole else steps_of(f"t{topic}", i, (a, b), after, size)
    data = [s for s in sorted(steps, key=lambda s: (s.topic, s.partition, s.seq)) if not s.leader_only]
    fast = _bound_batches(data, per_broker, total, max_bytes)
    assert [[(s.tp, s.seq) for s in bt] for bt in fast] == \
        [[(s.tp, s.seq) for s in bt] for bt in _bound_batches_by_definition(data, per_broker, total, max_bytes)]


def test_a_step_adding_two_replicas_fits_a_destination_by_one_replicas_size() -> None:
    """Broker 1 has 80 bytes left under the batch's length once it takes B; C adds replicas on 1 and 2 at once
    (120 bytes from its source 4, 60 onto each destination): it fits, though its 120 bytes are more than 80."""
    from rebalancer.movement.batches import _bound_batches

    a1, a2 = Step("a", 0, (0, 9), (0, 7), 100), Step("a", 1, (0, 9), (0, 6), 100)  # broker 0: critical, length 200
    b = Step("b", 0, (1, 9), (1, 5), 120)
    c = Step("c", 0, (4, 9), (1, 2), 60)
    data = [a1, a2, b, c]
    fast = _bound_batches(data, 5, 50, None)
    assert fast == _bound_batches_by_definition(data, 5, 50, None)
    assert fast[0] == [a1, a2, b, c]


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.integers(1, 10**6),
                          st.booleans()), min_size=1, max_size=50),
       st.integers(1, 4), st.integers(1, 12), st.sampled_from([None, 10**6, 3 * 10**6]), st.integers(0, 300))
def test_refined_batches_keep_every_rule_and_never_a_higher_floor(raw, per_broker: int, total: int, max_bytes,
                                                                 work: int) -> None:
    """Local search from any batches (here the largest first), cut at any amount of work: every step once, one step
    per partition a batch and in order, the caps kept; the floor never higher than where it started."""
    from rebalancer.movement.batches import refine

    steps: list[Step] = []
    for i, (a, b, c, size, two) in enumerate(raw):
        if len({a, b, c}) < 3:
            continue
        steps += steps_of("t", i, (a, b), (c, a + 10) if two else (c, b), size)
    start = make_batches(steps, per_broker=per_broker, total=total, max_bytes=max_bytes, order="largest")
    start = [bt for bt in start if not bt[0].leader_only]
    batches = refine(start, per_broker, total, max_bytes, work=work)
    _assert_batch_rules(batches, [s for bt in start for s in bt], per_broker, total, max_bytes, nonempty=True)
    assert batch_floor(batches) <= batch_floor(start)


def test_refine_moves_a_straggler_and_trades_steps_to_even_the_batches() -> None:
    from rebalancer.movement.batches import refine

    # One move per broker a batch. Brokers 9 and 8 each receive a large and a small move, the large ones in different
    # batches: 100 + 100 s at 1 B/s, where the two large together and the two small together take 100 + 10. No
    # move alone fits elsewhere (the cap): a large and a small trade places.
    a, b = Step("a", 0, (0,), (9,), 100), Step("b", 0, (1,), (8,), 10)
    c, d = Step("c", 0, (2,), (9,), 10), Step("d", 0, (3,), (8,), 100)
    assert batch_floor([[a, b], [c, d]]) == 200
    batches = refine([[a, b], [c, d]], 1, 50, None)
    assert batch_floor(batches) == 110 and {frozenset(bt) for bt in batches} == {frozenset({a, d}), frozenset({b, c})}
    # A straggler: the longest batch's move goes where it adds nothing, and the emptied batch is dropped.
    other = Step("other", 0, (6,), (7,), 200)
    batches = refine([[a, other], [d]], 1, 50, None)
    assert batch_floor(batches) == 200 and len(batches) == 1
    assert refine([[a, other], [d]], 1, 50, None, work=0) == [[a, other], [d]]  # no work: as given


def test_batches_wait_for_disk_room_and_a_plan_no_order_fits_is_named() -> None:
    """Broker 9 holds 80 of at most 100: it receives 60 (a) and gives 50 away (b). One batch would hold both (140);
    with its room known, a waits for the batch after b's, and 9 never holds more than 90."""
    from rebalancer.movement.batches import DiskRoom, NoRoom

    a = Step("a", 0, (1, 2), (9, 2), 60)
    b = Step("b", 0, (9, 3), (5, 3), 50)
    held = {9: 80, 5: 0, 1: 60}
    room = DiskRoom(held, {9: 100})
    assert make_batches([a, b]) == [[a, b]] and peak_disk([[a, b]], held)[9][0] == 140
    batches = make_batches([a, b], room=room)
    assert batches == [[b], [a]] and peak_disk(batches, held)[9] == (90, 1)
    # Batches that fit are kept as they are.
    plenty = DiskRoom(held, {9: 1000})
    assert make_batches([a, b], room=plenty) == [[a, b]]
    # Broker 9 and 5 each full, each waiting for the other to free room first: no order fits.
    c = Step("c", 0, (5, 4), (9, 4), 60)
    with pytest.raises(NoRoom, match="cannot move: broker (9|5) holds"):
        make_batches([Step("d", 0, (9, 3), (5, 3), 60), c], room=DiskRoom({9: 80, 5: 80}, {9: 100, 5: 100}))


def test_peak_disk_counts_a_batchs_new_replicas_before_the_old_ones_free_theirs() -> None:
    # broker 0 gives 30 to broker 2 and takes 20 from broker 1; then broker 2 gives 10 to broker 0
    first = [Step("a", 0, (0,), (2,), 30), Step("b", 0, (1,), (0,), 20)]
    second = [Step("c", 0, (2,), (0,), 10)]
    held = {0: 100, 1: 50, 2: 0}
    assert peak_disk([first, second], held) == {0: (120, 0), 1: (50, -1), 2: (30, 0)}
    # one move a batch, the giving first: broker 0 never holds more than it started with
    assert peak_disk([[first[0]], [first[1]], second], held)[0] == (100, -1)


def test_expected_time_runs_the_batches_in_the_fluid_model_not_only_their_floor() -> None:
    # One batch whose moves share throttles unevenly: broker 3 sends 400 bytes (the floor, 20 s at 20 B/s) but its
    # copies also share broker 2's and 4's, so it cannot send at the full rate all the time (21.67 s in the fluid
    # model). Split in two it would take 20 s, but a batch more costs BATCH_OVERHEAD_S: it stays one batch.
    changes = [change("t", 0, (3,), (2,), 100), change("t", 1, (3,), (2,), 100), change("t", 2, (1,), (3,), 100),
               change("t", 3, (2,), (3,), 100), change("t", 4, (3,), (4,), 200), change("t", 5, (2,), (4,), 200)]
    e = estimate(changes, 20, per_broker=10)
    assert e.batches == 1 and e.batch_floor_seconds == 20.0
    assert e.modelled_seconds == pytest.approx(21.667, abs=1e-3)
    assert e.expected_seconds == pytest.approx(21.667 * RATE_FACTOR + BATCH_OVERHEAD_S, abs=1e-2)
    # At 1 B/s the split saves 33 s, more than a batch costs: two batches, each at its floor.
    e = estimate(changes, 1, per_broker=10)
    assert e.batches == 2 and e.batch_floor_seconds == e.modelled_seconds == 400.0
    assert e.expected_seconds == pytest.approx(400.0 * RATE_FACTOR + 2 * BATCH_OVERHEAD_S)


def test_untangle_splits_a_batch_whose_moves_hold_each_other_back() -> None:
    """Broker 0 sends two large moves, to 8 and to 9, and each of those takes ten small moves from elsewhere: 200
    bytes through each of the three throttles (the floor, at 1 B/s), but a large move gets a twelfth of its
    destination's throttle while the small ones copy, then half of its source's: 290 s in the fluid model. Split,
    each large move goes with the other's small ones: 100 + 100 s."""
    from rebalancer.movement.batches import untangle
    from rebalancer.movement.fluid import simulate_batches

    a, b = Step("a", 0, (0,), (8,), 100), Step("b", 0, (0,), (9,), 100)
    into8 = [Step("c", i, (10 + i,), (8,), 10) for i in range(10)]
    into9 = [Step("d", i, (20 + i,), (9,), 10) for i in range(10)]
    batch = [a, b, *into8, *into9]
    assert batch_floor([batch]) == 200 and simulate_batches([batch], 1.0).makespan == pytest.approx(290.0)
    first, second = untangle([batch], batch_cost=0)
    assert {frozenset(first), frozenset(second)} == {frozenset([a, *into9]), frozenset([b, *into8])}
    assert simulate_batches([first, second], 1.0).makespan == pytest.approx(200.0)
    # A batch boundary costing more than the 90 s saved, or no work allowed: as given.
    assert untangle([batch], batch_cost=90) == [batch]
    assert untangle([batch], batch_cost=0, work=0) == [batch]


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.integers(1, 10**6),
                          st.booleans()), min_size=1, max_size=50),
       st.integers(1, 6), st.integers(1, 30), st.sampled_from([None, 3 * 10**6]), st.integers(0, 10**6),
       st.sampled_from([None, 0, 1000]))
def test_untangled_batches_keep_every_rule_and_never_take_longer(raw, per_broker: int, total: int, max_bytes,
                                                                 cost: int, work) -> None:
    """From any batches, cut at any amount of work: every rule kept, the fluid model's time plus ``cost`` a batch
    never higher, and no broker's peak disk higher."""
    from rebalancer.movement.batches import untangle
    from rebalancer.movement.fluid import simulate_batches

    steps: list[Step] = []
    for i, (a, b, c, size, two) in enumerate(raw):
        if len({a, b, c}) < 3:
            continue
        steps += steps_of("t", i, (a, b), (c, a + 10) if two else (c, b), size)
    start = [bt for bt in make_batches(steps, per_broker=per_broker, total=total, max_bytes=max_bytes)
             if not bt[0].leader_only]
    batches = untangle(start, cost, work=work)
    _assert_batch_rules(batches, [s for bt in start for s in bt], per_broker, total, max_bytes, nonempty=True)
    assert (simulate_batches(batches, 1.0).makespan + cost * len(batches)
            <= simulate_batches(start, 1.0).makespan + cost * len(start) + 1e-6 * sum(s.bytes for s in steps))
    held = dict.fromkeys(range(20), 10**7)
    after, before = peak_disk(batches, held), peak_disk(start, held)
    assert all(after[b][0] <= before[b][0] for b in held)


def test_verification_measures_the_execution_against_its_bound_and_its_expected_time(tmp_path: Path) -> None:
    """The time the execution copied (its first submit to its last copy) against the bound and against what the
    estimate expected for the schedule and caps it ran with (recorded in its state): the ETA's error, read where
    the run ends (``verification.json``'s ``execution_time``)."""
    from rebalancer.execute.runner import _execution_time
    from rebalancer.plan import plan_run_dir
    from rebalancer.rundir import RunDir

    desc = tmp_path / "cluster.json"
    write_cluster_json(build_scenario("new-brokers", ScenarioParams()), desc)
    run = tmp_path / "run"
    runbook.snapshot(run, f"file://{desc}")
    plan = plan_run_dir(run, "add-brokers", brokers=[12, 13, 14, 15])
    rate = 20 * MB
    for schedule, per_broker in (("batches", 5), ("rolling", 2)):
        want = estimate(plan.changes, rate, schedule=schedule, per_broker=per_broker, total=50)
        state = {"kind": "execute", "plan_hash": plan.hash, "throttle_bytes_per_s": rate,
                 "params": {"per_broker": per_broker, "total": 50, "max_batch_bytes": None, "order": "bound"},
                 "batches": [{"index": 0, "submitting_at": 1000.0, "copied_at": 1010.0},
                             {"index": 1, "submitting_at": 1011.0, "copied_at": 1000.0 + want.expected_seconds}]}
        if schedule == "rolling":
            state["schedule"] = "rolling"
        RunDir(run).state.parent.mkdir(parents=True, exist_ok=True)
        RunDir(run).state.write_text(json.dumps(state))
        took = _execution_time(run, plan)
        assert took is not None and took["schedule"] == schedule
        assert took["seconds"] == pytest.approx(want.expected_seconds, abs=1e-3)
        assert took["expected_seconds"] == round(want.expected_seconds, 3) and took["to_expected"] == 1.0
        assert took["bound_seconds"] == round(want.bound_seconds, 3)
