"""The per-broker table (``rebalancer snapshot`` / ``skew``, the main job's last output) flags what the gates
reject, and only that: counts against the median with one count of slack, bytes against each broker's disk band."""

from __future__ import annotations

import pytest

from rebalancer.balance import BrokerLoad, count_excess, disk_targets, format_broker_table
from rebalancer.model import Broker, Cluster, Partition

MiB = 1024 * 1024


def _flags(table: str) -> dict[int, str]:
    out = {}
    for line in table.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            out[int(parts[0])] = "".join(p[-1] for p in line.split() if p.endswith("!")) and line
    return {b: v for b, v in out.items() if v}


def test_one_leader_off_a_median_of_six_is_inside_the_gate_and_bytes_are_measured_against_the_target() -> None:
    # leaders 5/6/7 around a median of 6: 16.7 % but one count, which the leader gate accepts
    rows = [BrokerLoad(b, "r", True, 18, lead, lead, size * MiB)
            for b, lead, size in ((0, 6, 100), (1, 5, 104), (2, 7, 96), (3, 6, 95), (4, 6, 105))]
    targets = {b: (100.0 * MiB, int(95 * MiB), int(105 * MiB)) for b in range(5)}
    assert _flags(format_broker_table(rows, disk=targets)) == {}
    # 106 MiB is outside its band; 8 leaders is two off a median of 6
    rows[4] = BrokerLoad(4, "r", True, 18, 6, 6, 106 * MiB)
    rows[2] = BrokerLoad(2, "r", True, 18, 8, 8, 96 * MiB)
    assert set(_flags(format_broker_table(rows, disk=targets))) == {2, 4}


def test_disk_targets_are_the_capacity_share_of_the_bytes() -> None:
    brokers = [Broker(0, "a", disk_capacity_bytes=10**12), Broker(1, "b", disk_capacity_bytes=10**12),
               Broker(2, "c", disk_capacity_bytes=2 * 10**12)]
    parts = [Partition("t", i, (i % 3, (i + 1) % 3), i % 3, (i % 3, (i + 1) % 3), 100 * MiB) for i in range(12)]
    targets = disk_targets(Cluster.build(brokers, parts))
    total = 24 * 100 * MiB
    assert targets[2][0] == total / 2 and targets[0][0] == total / 4
    assert targets[0][1] <= total / 4 * 0.95 + 1 and targets[0][2] >= total / 4 * 1.05 - 1


def test_the_count_gates_rule_allows_one_count_or_the_band_of_the_median() -> None:
    assert count_excess(20, 19, 0.15) == 0.0    # 15 % of 19 is 2.85
    assert count_excess(23, 19, 0.15) == pytest.approx(4 - 2.85)
    assert count_excess(3, 2, 0.15) == 0.0      # one count of slack: 15 % of 2 is 0.3
    assert count_excess(4, 2, 0.15) == 1.0
