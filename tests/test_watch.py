"""The batch watcher's rules (``rebalancer.execute.watch``) on plain data: no cluster, no clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from rebalancer.execute.watch import ExecutionFailed, Watcher, busiest_seconds
from rebalancer.movement.batches import Step

MB = 1_000_000
RATE = 10 * MB


@dataclass(frozen=True)
class Limits:
    settle_grace: float = 15.0
    destination_grace: float = 60.0
    min_timeout: float = 120.0
    timeout_factor: float = 3.0
    report_every: float = 5.0


@dataclass(frozen=True)
class Part:
    replicas: tuple[int, ...]


A = Step("a", 0, (1, 2), (3, 2), 100 * MB)   # broker 3 receives 100 MB from 1
B = Step("b", 0, (1, 4), (5, 4), 50 * MB)    # broker 5 receives 50 MB from 1


def watcher(*steps: Step, limits: Limits = Limits(), now: float = 0.0) -> tuple[Watcher, list[str], list[int]]:
    said: list[str] = []
    saved: list[int] = []
    batch: dict[str, Any] = {"index": 0}
    w = Watcher(list(steps) or [A, B], batch, limits, rate=RATE, now=now, label="batch 1/1", say=said.append,
                save=lambda: saved.append(1))
    return w, said, saved


def test_the_limit_comes_from_the_busiest_broker_in_or_out() -> None:
    # broker 1 sends 150 MB (both moves' source): 15 s at 10 MB/s, more than any broker receives
    assert busiest_seconds([A, B], RATE) == 15.0
    w, _, _ = watcher()
    assert w.expected == 15.0 and w.timeout == 120.0 + 3.0 * 15.0


def test_arrived_moves_are_kept_and_the_batch_is_copied_when_all_are() -> None:
    w, _, _ = watcher()
    flight = {B.tp: object()}
    current = {A.tp: Part(A.after), B.tp: Part(B.before)}
    assert w.check(flight, current, {1, 2, 3, 4, 5}, 1.0) == [A]
    # A's partition moves on (its next step) afterwards: still counted as arrived
    current = {A.tp: Part((6, 2)), B.tp: Part(B.after)}
    assert w.check({}, current, {1, 2, 3, 4, 5}, 2.0) == [A, B]
    assert w.batch["copied_at"] == 2.0


def test_a_move_gone_from_flight_fails_only_after_the_settle_grace() -> None:
    w, _, _ = watcher(A)
    current = {A.tp: Part(A.before)}
    w.check({}, current, {1, 2, 3}, 0.0)
    w.check({}, current, {1, 2, 3}, 14.0)  # the controller may have finished before the metadata shows it
    with pytest.raises(ExecutionFailed, match="not been in flight for 15 s"):
        w.check({}, current, {1, 2, 3}, 15.0)


def test_a_move_that_ended_elsewhere_says_where() -> None:
    w, _, _ = watcher(A)
    current = {A.tp: Part((7, 2))}
    w.check({}, current, {1, 2, 3}, 0.0)
    with pytest.raises(ExecutionFailed, match=r"a-0 ended with replicas \[7, 2\], not the planned \[3, 2\]"):
        w.check({}, current, {1, 2, 3}, 20.0)


def test_a_destination_down_is_waited_for_then_fails_the_batch() -> None:
    w, said, _ = watcher(A)
    flight = {A.tp: object()}
    current = {A.tp: Part(A.before)}
    w.check(flight, current, {1, 2}, 0.0)
    assert said == ["batch 1/1: destination broker 3 is down; waiting up to 60 s for it to return "
                    "(--destination-grace)"]
    w.check(flight, current, {1, 2, 3}, 30.0)
    assert said[-1] == "batch 1/1: destination broker 3 is back after 30 s"
    w.check(flight, current, {1, 3}, 40.0)  # a kept broker down: a move completes only with its whole target
    with pytest.raises(ExecutionFailed, match="stalled: kept broker 2 of a-0 is down"):
        w.check(flight, current, {1, 3}, 100.0)


def test_past_the_limit_a_batch_copying_nothing_fails_and_one_still_copying_does_not() -> None:
    flight = {A.tp: object()}
    current = {A.tp: Part(A.before)}
    w, _, _ = watcher(A)  # limit: 120 + 3 x 10 s = 150 s
    copied = 0
    for t in range(0, 400, 5):  # 1 MB every 5 s: far past the limit, still moving
        copied += MB
        w.check(flight, current, {1, 2, 3}, float(t), due=True, sizes={A.tp: (copied, 100 * MB, 1)})
    stuck, _, _ = watcher(A)
    for t in range(0, 155, 5):  # nothing ever arrives: fails once past the limit (and min_timeout without a byte)
        stuck.check(flight, current, {1, 2, 3}, float(t), due=True, sizes={A.tp: (0, 100 * MB, 1)})
    with pytest.raises(ExecutionFailed, match=r"timed out after 155 s \(limit 150 s: .*no byte copied for 155 s"):
        stuck.check(flight, current, {1, 2, 3}, 155.0, due=True, sizes={A.tp: (0, 100 * MB, 1)})


def test_zookeeper_sees_no_sizes_so_the_limit_alone_decides_and_says_so() -> None:
    w, _, _ = watcher(A)
    flight = {A.tp: object()}
    current = {A.tp: Part(A.before)}
    w.check(flight, current, {1, 2, 3}, 150.0, due=True, sizes=None)
    with pytest.raises(ExecutionFailed, match="ZooKeeper shows no replica sizes"):
        w.check(flight, current, {1, 2, 3}, 151.0, due=True, sizes=None)


def test_producers_outpacing_the_throttle_are_reported_once_not_failed() -> None:
    w, said, saved = watcher(A)
    flight = {A.tp: object()}
    current = {A.tp: Part(A.before)}
    for t in range(0, 400, 5):  # the leader grows at the throttle's rate; the gap never shrinks
        leader = 100 * MB + t * RATE
        w.check(flight, current, {1, 2, 3}, float(t), due=True, sizes={A.tp: (t * RATE // 2, leader, 1)})
    assert len([x for x in said if "do not catch up" in x]) == 1 and saved == [1]
    assert w.batch["ingest_outpaces_throttle"] == ["a-0"]


def test_eta_at_the_throttle_before_a_finish_then_at_the_rate_seen() -> None:
    w, _, _ = watcher(now=100.0)
    assert w.eta(104.0) == 11.0  # 15 s at the throttle, 4 gone
    w.check({B.tp: object()}, {A.tp: Part(A.after), B.tp: Part(B.before)}, {1, 2, 3, 4, 5}, 120.0)
    assert w.eta(120.0) == pytest.approx(20.0 * 50 / 100)  # 100 MB in 20 s, 50 MB left
