"""Baseline: what ``kafka-reassign-partitions --generate`` proposes, re-implemented from Kafka's source.

``--generate`` ignores the current placement: for every topic it calls ``AdminUtils.assignReplicasToBrokers`` with
the topic's partition count and replication factor over the given broker list, starting at a random index. Both
variants are here: rack-unaware (``assignReplicasToBrokersRackUnaware``) and rack-aware
(``assignReplicasToBrokersRackAware`` over ``getRackAlternatedBrokerList``), with Kafka's ``replicaIndex`` shift.
Used by the benchmark only, to show how much more it moves than a minimal plan.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

__all__ = ["assign_rack_unaware", "assign_rack_aware", "rack_alternated", "generate"]


def _replica_index(first: int, second_shift: int, index: int, n: int) -> int:
    shift = 1 + (second_shift + index) % (n - 1)
    return (first + shift) % n


def assign_rack_unaware(n_partitions: int, rf: int, brokers: Sequence[int], start_index: int,
                        replica_shift: int, start_partition: int = 0) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    n = len(brokers)
    shift = replica_shift
    pid = max(0, start_partition)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        replicas = [brokers[first]]
        for j in range(rf - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        out[pid] = replicas
        pid += 1
    return out


def rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker from each rack (racks sorted, brokers sorted) in turn."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(rack_of):
        by_rack.setdefault(rack_of[b], []).append(b)
    racks = sorted(by_rack)
    iters = {r: iter(by_rack[r]) for r in racks}
    result: list[int] = []
    i = 0
    while len(result) < len(rack_of):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            result.append(nxt)
        i = (i + 1) % len(racks)
    return result


def assign_rack_aware(n_partitions: int, rf: int, rack_of: Mapping[int, str], start_index: int,
                      replica_shift: int, start_partition: int = 0) -> dict[int, list[int]]:
    arranged = rack_alternated(rack_of)
    n = len(arranged)
    n_racks = len(set(rack_of.values()))
    out: dict[int, list[int]] = {}
    shift = replica_shift
    pid = max(0, start_partition)
    for _ in range(n_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {rack_of[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                if (rack not in racks_with or len(racks_with) == n_racks) and \
                        (broker not in brokers_with or len(brokers_with) == n):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[pid] = replicas
        pid += 1
    return out


def generate(topics: Mapping[str, tuple[int, int]], brokers: Sequence[int], rack_of: Mapping[int, str | None],
             *, rack_aware: bool = True, seed: int = 0) -> dict[tuple[str, int], tuple[int, ...]]:
    """The proposal for {topic: (partitions, rf)}, with Kafka's random start drawn from ``seed``."""
    rng = random.Random(seed)
    use_racks = rack_aware and all(rack_of.get(b) for b in brokers)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic, (count, rf) in sorted(topics.items()):
        start = rng.randrange(len(brokers))
        shift = rng.randrange(len(brokers))
        if use_racks:
            assigned = assign_rack_aware(count, rf, {b: str(rack_of[b]) for b in brokers}, start, shift)
        else:
            assigned = assign_rack_unaware(count, rf, sorted(brokers), start, shift)
        for p, reps in assigned.items():
            out[(topic, p)] = tuple(reps)
    return out


def _self_check() -> None:
    # Kafka's AdminUtilsTest.testReplicaAssignment expectation (brokers 0-4, 10 partitions, RF 3, start 0).
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_rack_unaware(10, 3, [0, 1, 2, 3, 4], 0, 0) == expected
    # AdminRackAwareTest: rack-alternated list for racks {0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1}.
    assert rack_alternated({0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}) == [0, 3, 1, 5, 4, 2]


_self_check()
