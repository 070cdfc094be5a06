"""Turning a plan into steps and batches (pure functions of plain data).

A *step* moves one partition from one replica list to the next. A change that adds k >= 2 replicas becomes k steps,
each replacing one replica, so a partition never holds more than RF + 1 replicas at once (Kafka keeps the old and
the new replicas until the new ones are in sync). A leader-only change (a reorder) is one step that copies nothing.

A *batch* is a set of steps submitted together: at most ``per_broker`` moves touching any broker (as the source
leader or the destination), at most ``total`` moves, at most ``max_bytes`` bytes (a single larger step still gets
a batch of its own), one step per partition, and a partition's steps in order across batches. Steps go smallest
first (by bytes) unless ``order="largest"``. Leader-only steps are batched apart from data moves, as one reorder plus
one preferred leader election per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Step", "steps_of", "make_batches"]


@dataclass(frozen=True)
class Step:
    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    size_bytes: int
    seq: int = 0  # position among this partition's steps

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def added(self) -> tuple[int, ...]:
        return tuple(b for b in self.after if b not in self.before)

    @property
    def bytes(self) -> int:
        return self.size_bytes * len(self.added)

    @property
    def leader_only(self) -> bool:
        return not self.added

    def brokers(self) -> set[int]:
        """Brokers the step loads: destinations, and the source (the current leader, first replica)."""
        return set(self.added) | ({self.before[0]} if self.added else set())

    def to_dict(self) -> dict[str, object]:
        return {"topic": self.topic, "partition": self.partition, "from": list(self.before), "to": list(self.after),
                "size_bytes": self.size_bytes, "bytes": self.bytes, "seq": self.seq}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        return cls(str(d["topic"]), int(d["partition"]), tuple(d["from"]), tuple(d["to"]), int(d["size_bytes"]),
                   int(d.get("seq", 0)))


def steps_of(topic: str, partition: int, before: tuple[int, ...], after: tuple[int, ...], size_bytes: int) -> list[Step]:
    """The steps of one change: one replica replaced per step, the final order (preferred leader) on the last."""
    added = [b for b in after if b not in before]
    removed = [b for b in before if b not in after]
    if len(added) <= 1:
        return [Step(topic, partition, before, after, size_bytes, 0)]
    steps = []
    current = list(before)
    for i, (gone, new) in enumerate(zip(removed, added, strict=False)):
        nxt = [new if b == gone else b for b in current]
        if i == len(added) - 1:
            nxt = list(after)
        steps.append(Step(topic, partition, tuple(current), tuple(nxt), size_bytes, i))
        current = nxt
    return steps


def make_batches(steps: Iterable[Step], *, per_broker: int = 5, total: int = 50, max_bytes: int | None = None,
                 order: str = "smallest") -> list[list[Step]]:
    if per_broker < 1 or total < 1:
        raise ValueError("per_broker and total must be at least 1")
    pending = sorted(steps, key=lambda s: ((s.bytes if order == "smallest" else -s.bytes), s.topic, s.partition, s.seq))
    data = [s for s in pending if not s.leader_only]
    leaders = [s for s in pending if s.leader_only]
    batches: list[list[Step]] = []
    next_seq: dict[tuple[str, int], int] = {}
    for s in data:
        next_seq.setdefault(s.tp, 0)
    while data:
        batch: list[Step] = []
        load: dict[int, int] = {}
        size = 0
        in_batch: set[tuple[str, int]] = set()
        rest = []
        for s in data:
            ok = (s.seq == next_seq[s.tp] and s.tp not in in_batch and len(batch) < total
                  and all(load.get(b, 0) < per_broker for b in s.brokers())
                  and (max_bytes is None or not batch or size + s.bytes <= max_bytes))
            if ok:
                batch.append(s)
                in_batch.add(s.tp)
                size += s.bytes
                for b in s.brokers():
                    load[b] = load.get(b, 0) + 1
            else:
                rest.append(s)
        for s in batch:
            next_seq[s.tp] += 1
        batches.append(batch)
        data = rest
    for i in range(0, len(leaders), total):
        batches.append(leaders[i:i + total])
    return batches
