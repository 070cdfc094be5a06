"""The benchmark's baseline is Kafka's own assignment algorithm: pin it to Kafka's unit-test expectations."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import kafka_generate as kg  # noqa: E402


def test_rack_unaware_matches_kafka_admin_utils_test():
    assert kg.assign_rack_unaware(10, 3, [0, 1, 2, 3, 4], 0, 0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_aware_spreads_every_partition_over_distinct_racks():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert kg.rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    for start in range(6):
        for reps in kg.assign_rack_aware(12, 3, racks, start, start).values():
            assert len({racks[b] for b in reps}) == 3 and len(set(reps)) == 3


def test_generate_ignores_the_current_placement():
    # The Sqooba article's point: removing one broker, --generate rewrites nearly every partition.
    proposal = kg.generate({"x.y.z.t": (10, 2)}, list(range(19)), {b: "ab"[b % 2] for b in range(20)}, seed=3)
    current = {0: (7, 18), 1: (8, 19), 2: (9, 10), 3: (0, 11), 4: (1, 12), 5: (2, 13), 6: (3, 14), 7: (4, 15),
               8: (5, 16), 9: (6, 17)}
    changed = sum(1 for p, reps in current.items() if proposal[("x.y.z.t", p)] != reps)
    assert changed >= 8
