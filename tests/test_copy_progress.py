"""The executor's reading of a copy (rebalancer.execute.progress): a dead move is told from one that producers
outpace only by the leader's log growing at least half the throttle while the gap does not shrink."""

from __future__ import annotations

from rebalancer.execute.progress import CopyProgress

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
