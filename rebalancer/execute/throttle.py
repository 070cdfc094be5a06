"""Kafka replication quotas for a batch: which configs to set, and how to take them all away again.

Per batch (as ``kafka-reassign-partitions --throttle`` does, limited to what moves):

- ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` (bytes/s) on every live broker
  that sends (the partition's current leader) or receives (a new replica) in the batch;
- on each moving topic, ``leader.replication.throttled.replicas`` listing ``partition:broker`` for the partition's
  existing replicas (any of them may serve the copy) and ``follower.replication.throttled.replicas`` listing the new
  replicas.

While a batch copies, the next batch's throttles are added (so it can start without waiting for brokers to learn of
them); when a batch ends its throttles are narrowed to exactly the next batch's. Removal deletes exactly these
keys and keeps every other key of the entity. ``clear_all`` deletes the throttle keys
wherever they are (the final cleanup and ``rebalancer throttle --clear``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..errors import InputError

__all__ = ["THROTTLE_BROKER_KEYS", "THROTTLE_TOPIC_KEYS", "parse_rate", "batch_throttles", "apply", "narrow", "remove",
           "clear_all"]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
THROTTLE_BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE)
THROTTLE_TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_rate(text: str) -> int:
    """'50MB/s', '50MiB/s', '1.5GB/s' or plain bytes per second -> bytes/s (an int >= 1)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?i?[bB]?)\s*(?:/s)?\s*", text or "")
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise InputError(f"invalid throttle {text!r}: use bytes per second like 50MB/s, 20MiB/s or 10000000")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise InputError(f"invalid throttle {text!r}: must be at least 1 byte/s")
    return value


def batch_throttles(steps: Iterable[Any], live: set[int]) -> tuple[set[int], dict[str, tuple[set[str], set[str]]]]:
    """(brokers to rate-limit, {topic: (leader replicas 'p:b', follower replicas 'p:b')}) for a batch's steps."""
    brokers: set[int] = set()
    topics: dict[str, tuple[set[str], set[str]]] = {}
    for s in steps:
        if not s.added:
            continue
        leader_side, follower_side = topics.setdefault(s.topic, (set(), set()))
        for b in s.before:
            if b in live:
                leader_side.add(f"{s.partition}:{b}")
        if s.before[0] in live:
            brokers.add(s.before[0])
        for b in s.added:
            follower_side.add(f"{s.partition}:{b}")
            if b in live:
                brokers.add(b)
    return brokers, topics


def _merge(existing: str, add: set[str]) -> str:
    if existing.strip() == "*":
        return "*"
    items = {x.strip() for x in existing.split(",") if x.strip()} | add
    return ",".join(sorted(items, key=lambda x: tuple(int(v) for v in x.split(":"))))


def apply(backend: Any, rate: int, brokers: set[int], topics: dict[str, tuple[set[str], set[str]]]) -> bool:
    """Add this batch's throttles to whatever is set; returns whether any config changed."""
    changed = False
    for b in sorted(brokers):
        changed |= bool(backend.alter_configs("brokers", str(b), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}))
    current = backend.throttle_configs()
    for t, (leader_side, follower_side) in sorted(topics.items()):
        have = current.get(("topics", t), {})
        changed |= bool(backend.alter_configs("topics", t, {
            LEADER_REPLICAS: _merge(have.get(LEADER_REPLICAS, ""), leader_side),
            FOLLOWER_REPLICAS: _merge(have.get(FOLLOWER_REPLICAS, ""), follower_side)}))
    return changed


def narrow(backend: Any, done: tuple[Iterable[int], Iterable[str]], keep: tuple[set[int], dict[str, tuple[set[str], set[str]]]],
           rate: int) -> None:
    """After a batch: throttle exactly what the next batch needs (``keep``) and nothing else the batch had set."""
    keep_brokers, keep_topics = keep
    for b in sorted(set(done[0]) - keep_brokers):
        backend.alter_configs("brokers", str(b), {}, delete=THROTTLE_BROKER_KEYS)
    for t in sorted(set(done[1]) - set(keep_topics)):
        backend.alter_configs("topics", t, {}, delete=THROTTLE_TOPIC_KEYS)
    for t, (leader_side, follower_side) in sorted(keep_topics.items()):
        backend.alter_configs("topics", t, {LEADER_REPLICAS: _merge("", leader_side),
                                            FOLLOWER_REPLICAS: _merge("", follower_side)})


def remove(backend: Any, brokers: Iterable[int], topics: Iterable[str]) -> None:
    for b in sorted(set(brokers)):
        backend.alter_configs("brokers", str(b), {}, delete=THROTTLE_BROKER_KEYS)
    for t in sorted(set(topics)):
        backend.alter_configs("topics", t, {}, delete=THROTTLE_TOPIC_KEYS)


def clear_all(backend: Any) -> list[str]:
    """Delete every throttle key on every broker and topic; returns the entities cleaned."""
    cleaned = []
    for (entity_type, name), _keys in sorted(backend.throttle_configs().items()):
        keys = THROTTLE_BROKER_KEYS if entity_type == "brokers" else THROTTLE_TOPIC_KEYS
        backend.alter_configs(entity_type, name, {}, delete=keys)
        cleaned.append(f"{entity_type}/{name}")
    return cleaned
