"""Per-broker load (replicas, leaders, bytes) and its deviation from the median, as numbers and as a table.

Deviation from the median is the Wix article's measure: ``(value - median) / median`` in percent; a median of
zero gives a deviation of 0 for a zero value and +inf otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .model import Cluster

__all__ = ["BrokerLoad", "broker_loads", "deviation_pct", "max_abs_deviation", "format_broker_table", "human_bytes"]


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    broker: int
    rack: str | None
    alive: bool
    replicas: int
    leaders: int
    preferred_leaders: int
    bytes: int


def broker_loads(cluster: Cluster) -> list[BrokerLoad]:
    """Load of every broker of the cluster (brokers with nothing on them included), sorted by broker id: a view of
    ``rebalancer.load``, the one place that measures per-broker load (replicas, preferred leaders and disk bytes
    are its dimensions); the current leaders, a state rather than a load, are counted here."""
    from .load import dimension_loads, partition_loads

    loads = partition_loads(cluster, retention_ms=cluster.meta.get("topic_retention_ms") or {})
    per = dimension_loads(cluster, loads, dimensions=("replicas", "leaders", "disk"))
    leaders = {b.id: 0 for b in cluster.brokers}
    for p in cluster.partitions:
        if p.leader is not None:
            leaders[p.leader] += 1
    return [BrokerLoad(b.id, b.rack, b.alive, per["replicas"][b.id], leaders[b.id], per["leaders"][b.id],
                       per["disk"][b.id]) for b in sorted(cluster.brokers, key=lambda x: x.id)]


def deviation_pct(value: float, median: float) -> float:
    if median == 0:
        return 0.0 if value == 0 else math.inf
    return (value - median) / median * 100.0


def max_abs_deviation(values: Sequence[float]) -> float:
    """Largest |deviation from the median| in percent over the values (0 for an empty list)."""
    if not values:
        return 0.0
    med = statistics.median(values)
    return max(abs(deviation_pct(v, med)) for v in values)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def _fmt_dev(d: float) -> str:
    return "   inf" if math.isinf(d) else f"{d:+6.1f}"


def format_broker_table(loads: Iterable[BrokerLoad], *, band_pct: float = 15.0) -> str:
    """The per-broker skew table: counts, bytes and deviation from the median; '!' marks |dev| > band."""
    rows = list(loads)
    if not rows:
        return "(no brokers)"
    med_r = statistics.median(r.replicas for r in rows)
    med_l = statistics.median(r.leaders for r in rows)
    med_b = statistics.median(r.bytes for r in rows)
    header = f"{'broker':>6} {'rack':<8} {'replicas':>8} {'dev%':>6}  {'leaders':>7} {'dev%':>6}  {'bytes':>11} {'dev%':>6}"
    lines = [header, "-" * len(header)]
    for r in rows:
        devs = (deviation_pct(r.replicas, med_r), deviation_pct(r.leaders, med_l), deviation_pct(r.bytes, med_b))
        flag = " !" if any(abs(d) > band_pct for d in devs) else ""
        dead = " (down)" if not r.alive else ""
        lines.append(
            f"{r.broker:>6} {(r.rack or '-'):<8.8} {r.replicas:>8} {_fmt_dev(devs[0])}  {r.leaders:>7} {_fmt_dev(devs[1])}"
            f"  {human_bytes(r.bytes):>11} {_fmt_dev(devs[2])}{flag}{dead}"
        )
    lines.append("-" * len(header))
    lines.append(
        f"{'median':>6} {'':<8} {med_r:>8g} {'':>6}  {med_l:>7g} {'':>6}  {human_bytes(med_b):>11}"
    )
    worst = (
        max_abs_deviation([r.replicas for r in rows]),
        max_abs_deviation([r.leaders for r in rows]),
        max_abs_deviation([r.bytes for r in rows]),
    )
    lines.append(
        f"max |deviation from median|: replicas {worst[0]:.1f}%, leaders {worst[1]:.1f}%, bytes {worst[2]:.1f}%"
        f"  ('!' = beyond {band_pct:g}%)"
    )
    return "\n".join(lines)
