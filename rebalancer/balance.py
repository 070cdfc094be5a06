"""Per-broker load (replicas, leaders, bytes) and its deviation from the median, as numbers and as a table.

Deviation from the median is the Wix article's measure: ``(value - median) / median`` in percent; a median of
zero gives a deviation of 0 for a zero value and +inf otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .model import Cluster

__all__ = ["BrokerLoad", "broker_loads", "deviation_pct", "max_abs_deviation", "format_broker_table", "disk_targets",
           "human_bytes", "count_allowance", "count_excess", "counts_excess"]


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


def count_allowance(median: float, band: float) -> float:
    """How far a count may lie from the median and pass the count gates (replicas, leaders: ``rebalancer.validate``):
    ``band`` (a fraction) of the median, and never less than one count, since counts are whole (19 brokers cannot
    share 20 replicas within 15 %). The one place this rule is written: the planners' bands, their proofs and the
    tables use it too."""
    return max(band * median, 1.0)


def count_excess(value: float, median: float, band: float) -> float:
    """How far beyond ``count_allowance`` a count lies from the median (0 inside)."""
    return max(0.0, abs(value - median) - count_allowance(median, band))


def counts_excess(counts: Mapping[int, float], band: float) -> dict[int, float]:
    """Per broker, how far its count lies beyond what the count gates accept (within ``count_allowance`` of the
    median of ``counts``); 0 inside. The gate's predicate: the planner and ``rebalancer.validate`` both judge by it."""
    if not counts:
        return {}
    med = statistics.median(counts.values())
    return {b: count_excess(n, med, band) for b, n in counts.items()}


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


def disk_targets(cluster: Cluster) -> dict[int, tuple[float, int, int]]:
    """Each live broker's disk target and band (target, low, high) as the plan and the disk gate measure them: its
    capacity's share of the bytes (equal shares when no capacity is known), +-the disk band (``rebalancer.load``).
    Empty when the capacities cannot hold the bytes (the plan stage says so)."""
    from .load import CapacityError, dimension_loads, load_model

    live = [b.id for b in cluster.brokers if b.alive]
    if not live:
        return {}
    model = load_model(cluster)
    total = sum(dimension_loads(cluster, model.loads, dimensions=("disk",))["disk"].values())  # as the plan's summary
    try:
        bands = model.bands("disk", total, live)
    except CapacityError:
        return {}
    return {b: (band.average, band.floor, band.ceil) for b, band in bands.items()}


def format_broker_table(loads: Iterable[BrokerLoad], *, band_pct: float = 15.0,
                        disk: Mapping[int, tuple[float, int, int]] | None = None) -> str:
    """The per-broker table, measured as the validation gates measure: replica and leader counts against the median
    (``!`` beyond ``band_pct`` of it, one count at least), and, given ``disk`` (``disk_targets``), bytes against each
    broker's target (``!`` outside its disk band); without it, bytes against the median like the counts."""
    rows = list(loads)
    if not rows:
        return "(no brokers)"
    med_r = statistics.median(r.replicas for r in rows)
    med_l = statistics.median(r.leaders for r in rows)
    med_b = statistics.median(r.bytes for r in rows)

    def count(value: int, median: float) -> str:
        beyond = count_excess(value, median, band_pct / 100) > 1e-9
        return _fmt_dev(deviation_pct(value, median)) + ("!" if beyond else " ")

    def size(r: BrokerLoad) -> tuple[float, str]:
        if disk is not None and r.broker in disk:
            target, low, high = disk[r.broker]
            dev = deviation_pct(r.bytes, target)
            return dev, _fmt_dev(dev) + (" " if low <= r.bytes <= high else "!")
        dev = deviation_pct(r.bytes, med_b)
        return dev, _fmt_dev(dev) + ("!" if abs(dev) > band_pct else " ")

    by_target = disk is not None and bool(disk)
    header = (f"{'broker':>6} {'rack':<8} {'replicas':>8} {'dev%':>7}  {'leaders':>7} {'dev%':>7}  {'bytes':>11} "
              f"{'vs tgt%' if by_target else 'dev%':>7}")
    lines = [header, "-" * len(header)]
    worst_bytes = 0.0
    for r in rows:
        dev_b, shown_b = size(r)
        if r.alive:
            worst_bytes = max(worst_bytes, abs(dev_b))
        dead = " (down)" if not r.alive else ""
        lines.append(f"{r.broker:>6} {(r.rack or '-'):<8.8} {r.replicas:>8} {count(r.replicas, med_r)}  {r.leaders:>7} "
                     f"{count(r.leaders, med_l)}  {human_bytes(r.bytes):>11} {shown_b}{dead}")
    lines.append("-" * len(header))
    lines.append(f"{'median':>6} {'':<8} {med_r:>8g} {'':>7}  {med_l:>7g} {'':>7}  {human_bytes(med_b):>11}")
    counts = (f"max |deviation from median|: replicas {max_abs_deviation([r.replicas for r in rows]):.1f}%, "
              f"leaders {max_abs_deviation([r.leaders for r in rows]):.1f}%")
    if by_target:
        from .load import DIMENSIONS

        band = DIMENSIONS["disk"].band * 100
        lines.append(f"{counts}; bytes {worst_bytes:.1f}% from target")
        lines.append(f"'!' = a count beyond {band_pct:g}% of the median (at least one), bytes outside the disk band "
                     f"(+-{band:g}% of target: the broker's capacity share of the bytes)")
    else:
        lines.append(f"{counts}, bytes {max_abs_deviation([r.bytes for r in rows]):.1f}%"
                     f"  ('!' = beyond {band_pct:g}%, a count by at least one)")
    return "\n".join(lines)
