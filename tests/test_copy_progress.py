"""The executor's reading of a copy (rebalancer.execute.progress): a dead move is told from one that producers
outpace only by the leader's log growing at least half the throttle while the gap does not shrink."""

from __future__ import annotations

import pytest

from rebalancer.execute.progress import CopyProgress, RunProgress
from rebalancer.movement.batches import Step

TP = ("t", 0)
MB = 1_000_000


def samples(watch: CopyProgress, copied: list[int], leader: list[int], added: int = 1) -> None:
    for i, (c, lead) in enumerate(zip(copied, leader, strict=True)):
        watch.add(float(i), {TP: (c, lead, added)})


def test_a_dead_move_is_not_outpaced_and_does_not_advance() -> None:
    watch = CopyProgress(throttle=MB, last_advance=0.0)
    samples(watch, [0, 0, 0, 0], [4 * MB] * 4)
    assert watch.outpaced([TP]) == [] and watch.last_advance == 0.0


def test_producers_at_the_throttle_starving_the_copy_are_outpaced() -> None:
    watch = CopyProgress(throttle=MB, last_advance=0.0)
    samples(watch, [0, 0, 0, 0], [4 * MB + i * 1_250_000 for i in range(4)])
    assert watch.outpaced([TP]) == [TP] and watch.gap(TP) == 4 * MB + 3 * 1_250_000
    assert watch.last_outpaced == 3.0  # the executor's stall clock starts again from here


def test_samples_older_than_the_window_are_dropped() -> None:
    watch = CopyProgress(throttle=MB, last_advance=0.0)
    for i in range(10):
        watch.add(i * 10.0, {TP: (0, 4 * MB, 1)})
    assert [s.at for s in watch.history[TP]] == [60.0, 70.0, 80.0, 90.0]


def test_a_copy_that_closes_the_gap_is_not_outpaced_even_with_producers() -> None:
    watch = CopyProgress(throttle=MB, last_advance=0.0)
    samples(watch, [0, MB, 2 * MB, 3 * MB], [4 * MB + i * 600_000 for i in range(4)])
    assert watch.outpaced([TP]) == [] and watch.last_advance == 3.0


def test_slow_producers_do_not_excuse_a_stalled_copy() -> None:
    watch = CopyProgress(throttle=MB, last_advance=0.0)
    samples(watch, [0, 0, 0, 0], [4 * MB + i * 100_000 for i in range(4)])
    assert watch.outpaced([TP]) == []


def test_each_new_replica_needs_the_whole_log() -> None:
    watch = CopyProgress(throttle=MB, last_advance=0.0)
    samples(watch, [4 * MB, 4 * MB, 4 * MB], [4 * MB + i * MB for i in range(3)], added=2)
    assert watch.gap(TP) == 2 * 6 * MB - 4 * MB and watch.outpaced([TP]) == [TP]
    assert watch.outpaced([("other", 1)]) == []


# -- the whole run (RunProgress) ---------------------------------------------------------------------------------
A = Step("a", 0, (1, 2), (3, 2), 100 * MB)   # broker 3 receives 100 MB from broker 1
B = Step("b", 0, (1, 4), (5, 4), 60 * MB)    # broker 5 receives 60 MB from broker 1
LEAD = Step("c", 0, (6, 7), (7, 6), 10 * MB)  # a leader-only step: copies nothing


def test_the_critical_throttle_is_the_one_with_the_most_bytes_left() -> None:
    run = RunProgress([A, B, LEAD], throttle=10 * MB, started=0.0)
    assert (run.moves, run.bytes) == (2, 160 * MB)
    assert run.critical(2) == [(1, "out"), (3, "in")]  # broker 1 sends both: 160 MB
    run.finish(A)
    assert (run.moves_done, run.bytes_done) == (1, 100 * MB)
    assert run.critical(2) == [(1, "out"), (5, "in")] and run.left[(1, "out")] == 60 * MB
    assert run.eta(10.0) == 6.0  # 60 MB left on broker 1 at 10 MB/s; the rate seen (10 MB/s) agrees


def test_the_rate_counts_what_moves_in_flight_copied_where_sizes_are_seen() -> None:
    run = RunProgress([A, B], throttle=10 * MB, started=0.0)
    run.sample(0.0, [A, B], {A.tp: (0, 100 * MB, 1), B.tp: (0, 60 * MB, 1)})
    assert run.rate((1, "out")) is None  # one sample: no rate yet
    run.sample(10.0, [A, B], {A.tp: (50 * MB, 100 * MB, 1), B.tp: (30 * MB, 60 * MB, 1)})
    assert run.rate((1, "out")) == 8 * MB  # 80 MB through broker 1 in 10 s
    snap = run.snapshot(10.0)
    assert snap["critical"][0] == {"broker": 1, "direction": "out", "bytes_left": 160 * MB,
                                   "rate_bytes_per_s": 8 * MB}
    assert "critical broker 1 out 152.6 MiB left at 7.6 MiB/s" in run.line(10.0)
    # ZooKeeper shows no sizes: the finished moves' bytes over the time since the start (a window would read 0
    # while a long move copies)
    run.finish(A)
    run.sample(20.0, [B], None)
    assert run.rate((1, "out")) == pytest.approx(100 * MB / 20.0)
    assert run.rate((1, "out"), now=40.0) == pytest.approx(100 * MB / 40.0)


def test_an_eta_never_below_the_schedules_own_floor_nor_the_rate_seen() -> None:
    run = RunProgress([A, B], throttle=10 * MB, started=0.0)
    assert run.eta(0.0) == 16.0 and run.eta(0.0, floor=25.0) == 25.0
    run.finish(B)
    assert run.eta(30.0) == pytest.approx(30.0 * 100 / 60)  # 60 MB in 30 s: 100 MB left takes 50 s


def test_a_resumed_run_counts_what_was_done() -> None:
    run = RunProgress([A, B], throttle=10 * MB, started=0.0, done=[B])
    assert (run.moves_done, run.bytes_done, run.left[(5, "in")]) == (1, 60 * MB, 0)
    assert run.critical(3) == [(1, "out"), (3, "in")]
