"""How a batch's copy is going, from the replica sizes sampled while it runs (backends that see them: kafka://).

Per moving partition, the last samples of the bytes on its new replicas and of its leader's log. Two questions:

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

from ..model import TopicPartition

__all__ = ["CopyProgress", "QUOTA_WINDOW_S"]

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
