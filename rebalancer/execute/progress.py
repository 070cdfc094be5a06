"""How the run is going: the whole run for the operator (``RunProgress``), and each batch's copy from the replica
sizes sampled while it runs (``CopyProgress``, backends that see them: kafka://).

``CopyProgress`` keeps, per moving partition, the last samples of the bytes on its new replicas and of its leader's
log. Two questions:

- When did a byte last reach a new replica? A move that receives nothing for ``--min-timeout`` past the batch's
  time limit is dead (its fetcher is stuck, its source gone).
- Which moves copy toward a log end that producers move at least as fast (over the last 30 s, the gap to the
  leader not shrinking while the leader's log grew by at least half the throttle per second)? Kafka counts the in-sync followers' fetches of
  a throttled partition against the leader's rate without throttling them (KIP-73), so producers writing near the
  throttle leave the new replica little or nothing: measured on Kafka 3.9 and 4.3, nothing at all at 1.25x. Such a
  move is not dead; it finishes once the traffic drops or the throttle is raised, and is reported, not timed out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..balance import human_bytes
from ..model import TopicPartition
from ..movement.batches import Step, Throttled, step_loads

__all__ = ["CopyProgress", "QUOTA_WINDOW_S", "RunProgress"]

WINDOW_S = 30.0        # seconds of samples kept per partition (at least the last 3)
# Kafka's replication quota is a rate over 11 one-second samples (replication.quota.window.num x .size.seconds): a
# throttled copy that went over it waits until the window's average drops, which after a burst of in-sync traffic
# (producers that just stopped) can be several seconds. No move is called dead within this window.
QUOTA_WINDOW_S = 12.0
OUTPACED_GROWTH = 0.5  # leader growth (x the throttle) that explains a gap that does not shrink


@dataclass(frozen=True)
class _Sample:
    at: float
    copied: int        # bytes on the move's new replicas (summed)
    leader: int        # bytes of the leader's log
    added: int         # new replicas: each needs the leader's whole log

    @property
    def gap(self) -> int:
        return max(0, self.leader * self.added - self.copied)


@dataclass
class CopyProgress:
    throttle: float                  # bytes/s
    last_advance: float              # when a byte last reached a new replica (the start, until one does)
    last_outpaced: float = float("-inf")  # when ``outpaced`` last found a move that producers outpace
    history: dict[TopicPartition, list[_Sample]] = field(default_factory=dict)

    def add(self, at: float, sizes: Mapping[TopicPartition, tuple[int, int, int]]) -> None:
        """One sample: partition -> (bytes on its new replicas, bytes of its leader's log, number of new replicas)."""
        for tp, (copied, leader, added) in sizes.items():
            samples = self.history.setdefault(tp, [])
            if samples and copied > samples[-1].copied:
                self.last_advance = at
            samples.append(_Sample(at, copied, leader, added))
            while len(samples) > 3 and samples[0].at < at - WINDOW_S:
                del samples[0]

    def gap(self, tp: TopicPartition) -> int:
        samples = self.history.get(tp)
        return samples[-1].gap if samples else 0

    def outpaced(self, moving: Iterable[TopicPartition]) -> list[TopicPartition]:
        """The moving partitions whose gap to the leader does not shrink while producers fill the leader's log."""
        out = []
        for tp in moving:
            samples = self.history.get(tp, [])
            if len(samples) < 3 or samples[-1].at <= samples[0].at:
                continue
            first, last = samples[0], samples[-1]
            growth = (last.leader - first.leader) / (last.at - first.at)
            if last.gap >= first.gap > 0 and growth >= OUTPACED_GROWTH * self.throttle:
                out.append(tp)
                self.last_outpaced = max(self.last_outpaced, last.at)
        return sorted(out)


class RunProgress:
    """The whole run's progress, for the operator (the CLI's progress line, the Airflow task log, ``state.json``):
    moves and bytes done of the whole, the critical brokers' throttles (the broker and direction with the most
    bytes still to copy: the one that sets the time left) with the rate they move at now, and an ETA.

    ``steps``: every copy the run makes (leader-only steps copy nothing). A throttle's bytes done are those of its
    finished moves plus, where the backend sees replica sizes (kafka://), what its moves in flight copied so far
    (``sample``); its rate is the change over the last ``RATE_WINDOW_S`` seconds of samples (without sizes, the
    average since the start)."""

    RATE_WINDOW_S = 30.0

    def __init__(self, steps: Iterable[Step], throttle: float, started: float, done: Iterable[Step] = ()) -> None:
        self.steps = [s for s in steps if not s.leader_only]
        self.throttle, self.started = throttle, started
        self.moves, self.bytes = len(self.steps), sum(s.bytes for s in self.steps)
        self.left: dict[Throttled, int] = {}
        for s in self.steps:
            for t, x in step_loads(s).items():
                self.left[t] = self.left.get(t, 0) + x
        self.moves_done = self.bytes_done = 0
        self.through: dict[Throttled, float] = {}     # bytes through each throttle of the moves finished
        self.samples: list[tuple[float, dict[Throttled, float]]] = []  # (at, bytes through the critical throttles)
        self.copying: dict[Throttled, float] = {}     # bytes moves in flight copied so far, at the last sample
        self.sized = False                            # whether the last sample saw replica sizes
        for s in done:
            self.finish(s)

    def finish(self, s: Step) -> None:
        if s.leader_only:
            return
        self.moves_done += 1
        self.bytes_done += s.bytes
        for t, x in step_loads(s).items():
            self.left[t] -= x
            self.through[t] = self.through.get(t, 0.0) + x

    def critical(self, n: int = 1) -> list[Throttled]:
        """The ``n`` throttles with the most bytes left (ties: the lower broker, in before out)."""
        return sorted((t for t, x in self.left.items() if x > 0), key=lambda t: (-self.left[t], t))[:n]

    def sample(self, now: float, moving: Iterable[Step] = (),
               sizes: Mapping[TopicPartition, tuple[int, int, int]] | None = None) -> None:
        """Record the bytes through the critical throttles now; ``sizes`` (``CopyProgress.add``'s), where seen,
        count what the ``moving`` steps copied so far."""
        self.copying = {}
        self.sized = sizes is not None
        if sizes is not None:
            for s in moving:
                if s.tp in sizes and s.bytes:
                    part = min(1.0, sizes[s.tp][0] / s.bytes)
                    for t, x in step_loads(s).items():
                        self.copying[t] = self.copying.get(t, 0.0) + part * x
        watch = self.critical(3)
        self.samples.append((now, {t: self.through.get(t, 0.0) + self.copying.get(t, 0.0) for t in watch}))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.RATE_WINDOW_S:
            del self.samples[0]

    def rate(self, t: Throttled, now: float | None = None) -> float | None:
        """Bytes/s through ``t``: over the samples kept where they saw the moves in flight copy; where they cannot
        (ZooKeeper: finished moves only, which would read 0 while a long move copies), its average since the
        start (``now``). None: not measured yet."""
        if not self.sized:
            at = self.samples[-1][0] if now is None and self.samples else now
            return None if at is None or at <= self.started else self.through.get(t, 0.0) / (at - self.started)
        seen = [(at, v[t]) for at, v in self.samples if t in v]
        if len(seen) < 2 or seen[-1][0] <= seen[0][0]:
            return None
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])

    def eta(self, now: float, floor: float | None = None) -> float:
        """Seconds left: the most bytes left on one throttle at the throttle's rate (or ``floor``, the schedule's
        own least time left, batches' sum of their busiest brokers), or the rate seen so far if that is slower."""
        least = max(self.left.values(), default=0) / self.throttle if floor is None else floor
        seen = (now - self.started) * (self.bytes - self.bytes_done) / self.bytes_done if self.bytes_done else 0.0
        return max(least, seen)

    def snapshot(self, now: float, floor: float | None = None) -> dict[str, Any]:
        """What ``state.json`` keeps (``progress``)."""
        critical = [{"broker": b, "direction": d, "bytes_left": self.left[(b, d)],
                     "rate_bytes_per_s": None if (r := self.rate((b, d), now)) is None else round(r)}
                    for b, d in self.critical(3)]
        return {"moves_done": self.moves_done, "moves": self.moves, "bytes_done": self.bytes_done,
                "bytes": self.bytes, "elapsed_s": round(now - self.started, 1),
                "eta_s": round(self.eta(now, floor), 1), "critical": critical, "at": round(now, 3)}

    def line(self, now: float, floor: float | None = None) -> str:
        """One line: moves and bytes of the whole, the critical broker's rate and what it has left, elapsed, ETA."""
        head = f"{self.moves_done}/{self.moves} moves, {human_bytes(self.bytes_done)}/{human_bytes(self.bytes)}"
        crit = self.critical(1)
        if crit:
            (b, d), = crit
            r = self.rate((b, d), now)
            head += (f"; critical broker {b} {d} {human_bytes(self.left[(b, d)])} left"
                     + (f" at {human_bytes(r)}/s" if r is not None else ""))
        return f"{head}; {now - self.started:.0f} s elapsed, ETA ~{self.eta(now, floor):.0f} s"
