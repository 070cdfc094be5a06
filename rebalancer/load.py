"""The load model: what each replica puts on its broker, what each broker can take, and the balance dimensions.

A *dimension* is one thing the plan balances, defined once (``DIMENSIONS``) and read by the bounds, the planners,
the gates and the report. Each says what a partition's leader and each of its other replicas weigh in it, in
integer base units (bytes, bytes per second, counts), and which capacity it is measured against:

============  =========================================  ======================  ============================
dimension     leader replica                             other replica           capacity (Cruise Control key)
============  =========================================  ======================  ============================
``disk``      size (bytes)                               size                    ``DISK`` (MiB)
``nw_in``     bytes in per second                        bytes in per second     ``NW_IN`` (KiB/s)
``nw_out``    bytes in x (consumer fan-out + RF - 1)     0                       ``NW_OUT`` (KiB/s)
``replicas``  1                                          1                       none (counts)
``leaders``   1                                          0                       none (counts)
============  =========================================  ======================  ============================

The planners meet them in order of ``priority`` (disk 100, network 10, counts 1: a unit of disk outside its band,
measured in targets, outweighs a hundred of counts), which is the issue's order: disk, then network, then counts.

The leader takes the producers' bytes and every follower fetches them from it, so each replica has the partition's
bytes in; only the leader sends: to the RF - 1 followers and to the consumers (fan-out = consumer bytes out / bytes
in, 1.0 unless given). A partition's bytes in per second is, in this order: the p95 from the Spark stage's load
history (``Partition.bytes_in_per_s``), else the constraint-based seed's size / retention, with the topic's
``retention.ms`` or, when the topic sets none, the brokers' (Kafka's default: 168 hours). A topic kept for ever
(``retention.ms`` -1) has no rate that its size could tell: 0, and ``PartitionLoad.source`` says so.

Brokers may differ, so bands are around the mean *utilisation* (load / capacity over the eligible brokers), not
the mean load: broker b's target is ``total x capacity_b / sum of capacities``. A dimension without capacities
(counts, or no capacity given for any broker) balances the load itself (every capacity 1).

Capacities come from a file in Cruise Control's capacity format (``brokerCapacities``, ``brokerId`` -1 as the
default, ``DISK`` in MiB, possibly one entry per log directory (JBOD), ``NW_IN``/``NW_OUT`` in KiB/s, ``CPU``
accepted and unused), else from the snapshot (the disk total a broker reports through DescribeLogDirs).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CapacityError, InputError
from .formats import read_json
from .model import INT32_MAX, Cluster, Partition, TopicPartition

__all__ = ["Dimension", "DIMENSIONS", "PartitionLoad", "Band", "LoadModel", "accepted_range", "beyond", "beyond_columns", "DEFAULT_RETENTION_MS",
           "partition_loads", "dimension_loads", "largest_replica", "ReplicaTable", "replica_table", "read_capacity_file", "capacities", "load_bands", "load_model",
           "model_from_params", "read_history", "HISTORY_FILE", "CapacityError"]

MiB = 1024 * 1024
KiB = 1024
DEFAULT_RETENTION_MS = 168 * 3600 * 1000  # Kafka's log.retention.hours default
MAX_CAPACITY = 2**50   # base units per broker (1 PiB, 1 PiB/s): thousands of brokers' sum stays in a 64-bit integer
MAX_FANOUT = 1e6       # consumer bytes out per byte in: a million consumer groups reading every byte


@dataclass(frozen=True)
class PartitionLoad:
    size: int            # bytes of the log: every replica holds it
    bytes_in: float      # bytes per second written into the partition
    fanout: float        # consumer bytes out / bytes in
    rf: int
    source: str          # where bytes_in came from: history, topic retention, broker retention, none


@dataclass(frozen=True)
class Dimension:
    name: str
    title: str
    unit: str
    capacity_key: str | None              # the Cruise Control capacity resource; None: a count
    capacity_unit: int                    # base units per capacity-file unit
    band: float                           # default band half-width, relative to the target (0.05 = +-5 %)
    max_utilisation: float | None         # default hard limit, as a fraction of capacity
    leader: Callable[[PartitionLoad], float]
    follower: Callable[[PartitionLoad], float]
    priority: float = 1.0                 # weight of a unit outside its band (in target units) against the others

    def replica(self, load: PartitionLoad, leads: bool) -> int:
        """What one replica of the partition weighs here, in whole base units."""
        return int(round((self.leader if leads else self.follower)(load)))


DIMENSIONS: dict[str, Dimension] = {d.name: d for d in (
    Dimension("disk", "disk", "bytes", "DISK", MiB, 0.05, 0.85, lambda p: p.size, lambda p: p.size, 100.0),
    Dimension("nw_in", "network in", "bytes/s", "NW_IN", KiB, 0.10, 0.80, lambda p: p.bytes_in, lambda p: p.bytes_in,
              10.0),
    Dimension("nw_out", "network out", "bytes/s", "NW_OUT", KiB, 0.10, 0.80,
              lambda p: p.bytes_in * (p.fanout + p.rf - 1), lambda p: 0.0, 10.0),
    Dimension("replicas", "replicas", "replicas", None, 1, 0.15, None, lambda p: 1, lambda p: 1),
    Dimension("leaders", "leaders", "leaders", None, 1, 0.15, None, lambda p: 1, lambda p: 0),
)}


# -- per partition ------------------------------------------------------------------------------------------------
def _retention_ms(value: Any, where: str) -> int | None:
    if value is None:
        return None
    try:
        ms = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: retention.ms {value!r} is not an integer") from None
    if ms < -1 or ms == 0:
        raise InputError(f"{where}: retention.ms {ms} is neither positive nor -1 (kept for ever)")
    return ms


def partition_loads(cluster: Cluster, *, retention_ms: Mapping[str, Any] | None = None,
                    broker_retention_ms: Any = DEFAULT_RETENTION_MS,
                    fanout: Mapping[str, float] | None = None, default_fanout: float = 1.0,
                    history: Mapping[TopicPartition, tuple[float, float | None]] | None = None
                    ) -> dict[TopicPartition, PartitionLoad]:
    """Every partition's load. ``retention_ms``: topic -> its ``retention.ms`` config (absent: the brokers');
    ``fanout``: topic -> consumer bytes out / bytes in; ``history``: partition -> (p95 bytes in, p95 consumer bytes
    out or None) from the Spark stage (``read_history``), which wins over both."""
    retention_ms = retention_ms or {}
    fanout = fanout or {}
    broker_ms = _retention_ms(broker_retention_ms, "the brokers' log retention")
    for topic, f in [*fanout.items(), ("(default)", default_fanout)]:
        if not (isinstance(f, (int, float)) and math.isfinite(f) and 0 <= f <= MAX_FANOUT):
            raise InputError(f"fan-out of topic {topic}: {f!r} is not a number from 0 to {MAX_FANOUT:g} "
                             "(consumer bytes out per byte in)")
    topic_ms = {t: _retention_ms(v, f"topic {t}") for t, v in retention_ms.items()}
    out: dict[TopicPartition, PartitionLoad] = {}
    history = history or {}
    for p in cluster.partitions:
        f = float(fanout.get(p.topic, default_fanout))
        seen = history.get(p.tp)
        if seen is not None:
            rate, out_rate = seen
            if out_rate is not None and rate > 0:
                f = out_rate / rate
            out[p.tp] = PartitionLoad(p.size_bytes, float(rate), f, len(p.replicas), "history")
        else:
            out[p.tp] = _one(p, topic_ms.get(p.topic), broker_ms, f)
    return out


HISTORY_FILE = "analysis/partition_load.parquet"


def read_history(run_dir: str | Path) -> dict[TopicPartition, tuple[float, float | None]]:
    """The Spark stage's per-partition p95 rates (``RUN_DIR/analysis/partition_load.parquet``, written when the
    analysis had a load history): partition -> (bytes in per second, consumer bytes out per second or None).
    Empty when the file is absent; ``InputError`` naming it when it is unreadable or malformed."""
    path = Path(run_dir) / HISTORY_FILE
    if not path.exists():
        return {}
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path).to_pydict()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    if not {"topic", "partition", "bytes_in_p95"} <= set(table):
        raise InputError(f"{path}: lacks topic, partition or bytes_in_p95")
    outs = table.get("bytes_out_p95") or [None] * len(table["topic"])
    history: dict[TopicPartition, tuple[float, float | None]] = {}
    for t, n, rate, out in zip(table["topic"], table["partition"], table["bytes_in_p95"], outs, strict=True):
        if rate is None or not math.isfinite(float(rate)) or float(rate) < 0:
            raise InputError(f"{path}: partition {t}-{n} has bytes_in_p95 {rate!r}")
        good_out = out is not None and math.isfinite(float(out)) and float(out) >= 0
        history[(str(t), int(n))] = (float(rate), float(out) if good_out else None)
    return history


def _one(p: Partition, topic_ms: int | None, broker_ms: int | None, fanout: float) -> PartitionLoad:
    rf = len(p.replicas)
    if p.bytes_in_per_s is not None:
        return PartitionLoad(p.size_bytes, float(p.bytes_in_per_s), fanout, rf, "history")
    ms, source = (topic_ms, "topic retention") if topic_ms is not None else (broker_ms, "broker retention")
    if ms is None or ms == -1:
        return PartitionLoad(p.size_bytes, 0.0, fanout, rf, "none (kept for ever)")
    return PartitionLoad(p.size_bytes, p.size_bytes / (ms / 1000.0), fanout, rf, source)


# -- per broker ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicaTable:
    """Every replica of a placement as columns (numpy): its partition, broker, whether it leads, and the
    partition's bytes; ``units(d, leads)`` gives what each replica weighs in dimension d. Built once per
    placement, so that sums over millions of replicas stay vectorised."""

    partition: Any   # int64 index into ``cluster.partitions``
    broker: Any      # int64 broker id
    leads: Any       # bool
    size: Any        # int64 bytes of the replica's partition
    per_partition: dict[str, tuple[Any, Any]]  # dimension -> (leader units, follower units) per partition

    def units(self, dimension: str, as_leader: bool | None = None) -> Any:
        """Each replica's load in ``dimension``: in its own role, or as leader/follower when given."""
        import numpy as np

        lead, follow = self.per_partition[dimension]
        if as_leader is None:
            return np.where(self.leads, lead[self.partition], follow[self.partition])
        return (lead if as_leader else follow)[self.partition]


def replica_table(cluster: Cluster, loads: Mapping[TopicPartition, PartitionLoad],
                  assignment: Mapping[TopicPartition, tuple[int, ...]] | None = None,
                  dimensions: Iterable[str] = DIMENSIONS) -> ReplicaTable:
    """The replica table of the cluster as it is, or with ``assignment`` (partition -> replicas, the first leading)
    applied. A plan of 3M replicas asks for seven: what depends on the cluster and ``loads`` alone and takes a Python
    pass over every partition (the placement as it is, sizes, the loads as columns) is built once per cluster and kept
    (``Cluster.cached``; the arrays are read-only), so a table costs what the assignment changes."""

    parts = cluster.partitions
    partition, broker, leads = placement_columns(cluster, assignment)
    size = partition_sizes(cluster)[partition]
    # keyed by the loads' identity: the cluster keeps them alive with it, so the key cannot be reused
    _, columns = cluster.cached(f"load-columns-{id(loads)}", lambda: (loads, _load_columns([loads[p.tp] for p in parts])))
    # each dimension's units: numpy arithmetic on the columns, milliseconds; not kept (80 MB at 3M replicas)
    per = {name: (_units(DIMENSIONS[name].leader, columns), _units(DIMENSIONS[name].follower, columns))
           for name in dimensions}
    return ReplicaTable(partition, broker, leads, size, per)


def placement_columns(cluster: Cluster, assignment: Mapping[TopicPartition, tuple[int, ...]] | None = None
                      ) -> tuple[Any, Any, Any]:
    """(partition index, broker, leads) per replica (numpy, read-only) of the cluster as it is (built once per cluster:
    ``Cluster.cached``) or with ``assignment`` applied."""
    if assignment:
        return replica_columns([assignment.get(p.tp, p.replicas) for p in cluster.partitions])
    return cluster.cached("replica-placement", lambda: replica_columns([p.replicas for p in cluster.partitions]))


def partition_sizes(cluster: Cluster) -> Any:
    """Each partition's size in bytes (numpy int64, read-only), built once per cluster."""
    import numpy as np

    parts = cluster.partitions
    return cluster.cached("partition-size", lambda: _read_only(
        np.fromiter((p.size_bytes for p in parts), np.int64, len(parts))))


def _read_only(array: Any) -> Any:
    array.flags.writeable = False
    return array


def replica_columns(placed: Sequence[Sequence[int]]) -> tuple[Any, Any, Any]:
    """(partition index, broker, leads) per replica of ``placed`` (brokers per partition, the first leading), as
    read-only numpy columns in ``placed``'s order: what every per-replica sum over millions of replicas starts from."""
    import itertools

    import numpy as np

    counts = np.fromiter(map(len, placed), np.int64, len(placed))
    broker = np.fromiter(itertools.chain.from_iterable(placed), np.int64, int(counts.sum()))
    partition = np.repeat(np.arange(len(placed), dtype=np.int64), counts)
    leads = np.zeros(len(broker), bool)
    leads[(np.cumsum(counts) - counts)[counts > 0]] = True  # each partition's first replica
    return _read_only(partition), _read_only(broker), _read_only(leads)


@dataclass(frozen=True)
class _LoadColumns:
    """``PartitionLoad``'s numeric fields as numpy columns (one row per partition): a dimension's ``leader`` and
    ``follower`` functions are arithmetic, so they take the columns as they take one partition's load."""

    size: Any
    bytes_in: Any
    fanout: Any
    rf: Any
    rows: int


def _load_columns(ordered: Sequence[PartitionLoad]) -> _LoadColumns:
    import numpy as np

    n = len(ordered)
    return _LoadColumns(_read_only(np.fromiter((x.size for x in ordered), np.int64, n)),
                        _read_only(np.fromiter((x.bytes_in for x in ordered), np.float64, n)),
                        _read_only(np.fromiter((x.fanout for x in ordered), np.float64, n)),
                        _read_only(np.fromiter((x.rf for x in ordered), np.int64, n)), n)


def _units(role: Callable[[Any], Any], columns: _LoadColumns) -> Any:
    """One role's weight per partition in whole base units (``Dimension.replica``, vectorised: a constant is
    broadcast, an integer column kept exact, a float one rounded half to even as ``round`` does)."""
    import numpy as np

    value = np.asarray(role(columns))
    if value.ndim == 0:
        value = np.full(columns.rows, value)
    if np.issubdtype(value.dtype, np.integer):
        return value.astype(np.int64, copy=False)
    return np.rint(value).astype(np.int64)


def dimension_loads(cluster: Cluster, loads: Mapping[TopicPartition, PartitionLoad],
                    assignment: Mapping[TopicPartition, tuple[int, ...]] | None = None,
                    dimensions: Iterable[str] = DIMENSIONS, table: ReplicaTable | None = None
                    ) -> dict[str, dict[int, int]]:
    """dimension -> broker -> load, for the cluster as it is or with ``assignment`` (partition -> replicas, the
    first leading) applied (or of a ``table`` built before). Every broker of the cluster is present."""
    import numpy as np

    dims = list(dimensions)
    table = table or replica_table(cluster, loads, assignment, dims)
    ids = np.array(sorted(cluster.broker_ids), dtype=np.int64)
    where = np.searchsorted(ids, table.broker)
    out = {}
    for name in dims:
        sums = np.zeros(len(ids), np.int64)
        np.add.at(sums, where, table.units(name))
        out[name] = {int(b): int(v) for b, v in zip(ids, sums, strict=True)}
    return out


def largest_replica(cluster: Cluster, tables: Iterable[ReplicaTable], dimensions: Iterable[str]) -> dict[str, dict[int, int]]:
    """dimension -> broker -> the heaviest single replica it carries in any of ``tables`` (placements, e.g. before
    and after a plan): what ``accepted_range`` widens a broker's band by. Every broker of the cluster is present."""
    import numpy as np

    ids = np.array(sorted(cluster.broker_ids), dtype=np.int64)
    tables = list(tables)
    where = [np.searchsorted(ids, t.broker) for t in tables]
    out = {}
    for d in dimensions:
        top = np.zeros(len(ids), np.int64)
        for t, w in zip(tables, where, strict=True):
            np.maximum.at(top, w, t.units(d))
        out[d] = {int(b): int(v) for b, v in zip(ids, top, strict=True)}
    return out


# -- capacities ---------------------------------------------------------------------------------------------------
def _number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise CapacityError(f"{where}: {value!r} is not a number")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CapacityError(f"{where}: {str(value)[:40]!r} is not a number") from None
    except OverflowError:  # an integer beyond any float
        raise CapacityError(f"{where}: {str(value)[:40]}... is not a capacity (too large)") from None
    if not math.isfinite(x) or x <= 0:
        raise CapacityError(f"{where}: {str(value)[:40]!r} is not a positive number")
    return x


def _capacity(amount: float, dim: Dimension, where: str) -> int:
    """``amount`` file units of ``dim`` in base units, at most ``MAX_CAPACITY`` (the sums over thousands of brokers
    stay within 64-bit integers)."""
    base = amount * dim.capacity_unit
    if not base <= MAX_CAPACITY:
        raise CapacityError(f"{where}: {amount:g} is not a capacity: more than {MAX_CAPACITY // dim.capacity_unit} "
                            f"(1 PiB, or 1 PiB/s, per broker)")
    return int(base)


def read_capacity_file(path: str | Path) -> dict[int, dict[str, int]]:
    """Broker id (-1: the default) -> dimension -> capacity in base units, from a Cruise Control capacity file."""
    doc = read_json(path)
    where = str(path)
    entries = doc.get("brokerCapacities") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CapacityError(f"{where}: expected Cruise Control's format, an object with a non-empty "
                            "'brokerCapacities' list")
    by_key = {d.capacity_key: d for d in DIMENSIONS.values() if d.capacity_key}
    out: dict[int, dict[str, int]] = {}
    for i, entry in enumerate(entries):
        at = f"{where}: brokerCapacities[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("capacity"), dict):
            raise CapacityError(f"{at}: expected an object with 'brokerId' and a 'capacity' object")
        raw_id = entry.get("brokerId")
        try:
            broker = int(str(raw_id))
        except ValueError:
            raise CapacityError(f"{at}: brokerId {raw_id!r} is not a broker id (or -1 for the default)") from None
        if not -1 <= broker <= INT32_MAX:
            raise CapacityError(f"{at}: brokerId {broker} is not a broker id (or -1 for the default)")
        if broker in out:
            raise CapacityError(f"{at}: brokerId {broker} appears twice")
        values: dict[str, int] = {}
        for key, value in entry["capacity"].items():
            if key == "CPU":
                continue  # accepted (Cruise Control files carry it), not a dimension here
            dim = by_key.get(key)
            if dim is None:
                raise CapacityError(f"{at}: unknown resource {key!r} (known: {', '.join(sorted([*by_key, 'CPU']))})")
            if isinstance(value, dict):  # JBOD: one capacity per log directory
                if not value:
                    raise CapacityError(f"{at}.capacity.{key}: no log directory")
                amount = sum(_number(v, f"{at}.capacity.{key}.{d}") for d, v in value.items())
            else:
                amount = _number(value, f"{at}.capacity.{key}")
            values[dim.name] = _capacity(amount, dim, f"{at}.capacity.{key}")
        out[broker] = values
    return out


def capacities(cluster: Cluster, file: Mapping[int, Mapping[str, int]] | None = None) -> dict[str, dict[int, int]]:
    """dimension -> broker -> capacity (base units) for the dimensions that have one for every broker: the file's
    entry for the broker, else its default (-1), else what the snapshot says the broker has (disk: its log
    directories' total). A dimension known for some live brokers only is an error: utilisation needs every one
    (a dead broker holds nothing after a plan and reports nothing, so it needs none)."""
    file = file or {}
    default = file.get(-1, {})
    snapshot = {"disk": {b.id: b.disk_capacity_bytes for b in cluster.brokers},
                "nw_in": {b.id: b.network_capacity_bytes_per_s for b in cluster.brokers},
                "nw_out": {b.id: b.network_capacity_bytes_per_s for b in cluster.brokers}}
    out: dict[str, dict[int, int]] = {}
    for d in DIMENSIONS.values():
        if d.capacity_key is None:
            continue
        per: dict[int, int | None] = {}
        for b in (b.id for b in cluster.brokers if b.alive):
            per[b] = file.get(b, {}).get(d.name, default.get(d.name, snapshot[d.name].get(b)))
        known = {b: c for b, c in per.items() if c}
        if not known:
            continue
        missing = sorted(b for b in per if not per[b])
        if missing:
            raise CapacityError(f"{d.title} capacity is known for broker(s) {_ids(known)} but not for {_ids(missing)}: "
                                f"give every broker one (a brokerId -1 default in the capacity file)")
        out[d.name] = known
    return out


def _ids(ids: Iterable[int]) -> str:
    shown = sorted(ids)
    return ",".join(map(str, shown[:8])) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")


# -- bands --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Band:
    """An integer band [floor, ceil] around an average (a count's per-broker average, or a broker's load target:
    its share of the total by capacity); ``limit`` is the hard capacity limit, if any. Counts and loads use it alike."""

    floor: int
    ceil: int
    average: float
    limit: int | None = None

    def excess(self, value: int) -> int:
        return max(0, value - self.ceil)

    def deficit(self, value: int) -> int:
        return max(0, self.floor - value)

    def contains(self, value: int) -> bool:
        return self.floor <= value <= self.ceil


def load_bands(dimension: str, total: int, eligible: Iterable[int], capacity: Mapping[int, int] | None = None, *,
               band: float | None = None, max_utilisation: float | None = None) -> dict[int, Band]:
    """Each eligible broker's band in ``dimension`` for ``total`` load: target = total x capacity_b / sum of the
    eligible capacities (every capacity 1 when none is known), band = target x (1 -+ band), widened to whole
    units. With capacities, the hard limit is ``max_utilisation`` x capacity (the dimension's default unless
    given); raises ``CapacityError`` when the eligible brokers cannot hold ``total`` within it."""
    d = DIMENSIONS[dimension]
    brokers = sorted(eligible)
    if not brokers:
        raise CapacityError("no eligible brokers")
    half = d.band if band is None else band
    if not 0 <= half < 1:
        raise InputError(f"{d.title} band {half!r} is not a fraction from 0 to 1 (0.05 = +-5 %)")
    cap = {b: (capacity or {}).get(b, 0) for b in brokers} if capacity else {b: 1 for b in brokers}
    if capacity and any(c <= 0 for c in cap.values()):
        raise CapacityError(f"{d.title} capacity is missing for broker(s) {_ids(b for b, c in cap.items() if c <= 0)}")
    cap_total = sum(cap.values())
    limit_frac = (d.max_utilisation if max_utilisation is None else max_utilisation) if capacity else None
    if limit_frac is not None and not 0 < limit_frac <= 1:
        raise InputError(f"{d.title} capacity threshold {limit_frac!r} is not a fraction from 0 to 1")
    if limit_frac is not None and total > limit_frac * cap_total:
        raise CapacityError(f"the eligible brokers cannot hold the {d.title} load: {total} {d.unit} needs "
                            f"{total / cap_total:.1%} of their {cap_total} {d.unit}, more than the "
                            f"{limit_frac:.0%} threshold")
    out = {}
    for b in brokers:
        target = total * cap[b] / cap_total
        limit = int(limit_frac * cap[b]) if limit_frac is not None else None
        high = math.ceil(target * (1 + half))
        out[b] = Band(math.floor(target * (1 - half)), high if limit is None else max(min(high, limit), 0),
                      target, limit)
    return out


def beyond(value: float, low: float, high: float) -> float:
    """How far ``value`` lies outside [low, high]: ``value - high`` above it, ``low - value`` below it, 0 inside. The
    band distance every search weighs (``plan.load_greedy``, ``plan.leader_load``, ``plan.load_problem``,
    ``plan.split``) and the gates measure (``gate_excess_pct``): a plan and its gate cannot measure differently."""
    return value - high if value > high else low - value if value < low else 0.0


def beyond_columns(values: Any, low: Any, high: Any) -> Any:
    """``beyond`` over numpy columns (element by element, the same floating-point operations)."""
    import numpy as np

    return np.where(values > high, values - high, np.where(values < low, low - values, 0.0))


def gate_excess_pct(after: float, before: float, target: float, band: float, *, not_worse: bool,
                    largest: float = 0.0, held: bool = False) -> float:
    """The disk and network gates' predicate for one broker, which the plan's summary judges by too: percent of the
    target by which ``after`` lies outside what the gate accepts (``accepted_range``: target -+ ``band``, a fraction,
    widened to whole units; ``not_worse``: or no further from the target than before); with ``held`` (a broker the
    mode moves one way only, past its target on the side it cannot correct: ``held_one_way``), also where no further
    past it than before. With ``not_worse`` or ``held`` the range is widened by ``largest``, the busiest replica the
    broker carries before or after (a broker that serves a few busy partitions, or moves in whole ones, cannot come
    finer). 0 inside."""
    if not target:
        return 0.0
    slack = largest if not_worse or held else 0.0
    low, high = accepted_range(target, band, before, slack, not_worse)
    if held:
        low, high = min(low, before), max(high, before)
    return round(beyond(after, low, high) / target * 100, 3)


def held_one_way(after: float, target: float, may_give: bool, may_take: bool) -> bool:
    """A broker the mode lets move one way only, past its target on the side it cannot correct (an old broker below
    it in add-brokers): the gates hold it to where it started there, or to one partition past its band."""
    return (after < target and not may_take) or (after > target and not may_give)


def headroom_excess_pct(after: float, before: float, capacity: float, limit: float) -> float:
    """The capacity gate's predicate: percent of the capacity by which ``after`` lies above ``limit`` (a fraction)
    of it, or above ``before`` where the broker was already over. 0 within."""
    return round(max(0.0, after - max(limit * capacity, before)) / capacity * 100, 3)


def accepted_range(target: float, band: float, before: float, slack: float = 0.0,
                   not_worse: bool = False) -> tuple[float, float]:
    """The loads a deviation gate accepts for one broker: target -+ ``band`` (a fraction) widened to whole units and by
    ``slack`` (the busiest partition the broker carries: a broker that serves a few busy partitions cannot be
    balanced finer), and, ``not_worse``, anything no further from the target than ``before``. The gates
    (``rebalancer.validate``) measure a plan with it; the leader hand-overs keep brokers inside it."""
    low, high = math.floor(target * (1 - band)) - slack, math.ceil(target * (1 + band)) + slack
    if not_worse:
        away = abs(before - target)
        low, high = min(low, target - away), max(high, target + away)
    return low, high


# -- the model of one cluster ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadModel:
    """Everything the bounds, planners, gates and report need about load, for one cluster."""

    loads: dict[TopicPartition, PartitionLoad]
    capacity: dict[str, dict[int, int]]          # dimension -> broker -> capacity, for dimensions that have one
    band: dict[str, float]                       # dimension -> relative band half-width
    threshold: dict[str, float]                  # dimension -> capacity threshold (fraction), capacity dims only
    rate_sources: dict[str, int]                 # where bytes in per second came from -> partitions
    fanout: dict[str, float] = dataclasses.field(default_factory=dict)  # topic -> consumer fan-out, when given
    default_fanout: float = 1.0

    def params(self) -> dict[str, Any]:
        """What rebuilds this model from the same snapshot (``model_from_params``): recorded in plan.json so that
        the gates and the report measure the plan against the capacities, bands and thresholds it was made for."""
        return {"capacity": {d: {str(b): c for b, c in sorted(per.items())} for d, per in self.capacity.items()},
                "band": dict(self.band), "threshold": dict(self.threshold), "fanout": dict(self.fanout),
                "default_fanout": self.default_fanout}

    def bands(self, dimension: str, total: int, eligible: Iterable[int]) -> dict[int, Band]:
        return load_bands(dimension, total, eligible, self.capacity.get(dimension), band=self.band[dimension],
                          max_utilisation=self.threshold.get(dimension))


def load_model(cluster: Cluster, *, capacity_file: str | Path | None = None, fanout: Mapping[str, float] | None = None,
               default_fanout: float = 1.0, band: Mapping[str, float] | None = None,
               threshold: Mapping[str, float] | None = None,
               history: Mapping[TopicPartition, tuple[float, float | None]] | None = None) -> LoadModel:
    """The load model of ``cluster``: retention from the snapshot (``meta.topic_retention_ms``), capacities from
    ``capacity_file`` and the snapshot, each dimension's band and capacity threshold (its default unless given)."""
    unknown = sorted({*(band or {}), *(threshold or {})} - set(DIMENSIONS))
    if unknown:
        raise InputError(f"unknown balance dimension(s) {', '.join(unknown)} (known: {', '.join(DIMENSIONS)})")
    loads = partition_loads(cluster, retention_ms=cluster.meta.get("topic_retention_ms") or {}, fanout=fanout,
                            default_fanout=default_fanout, history=history)
    cap = capacities(cluster, read_capacity_file(capacity_file) if capacity_file else None)
    bands = {d.name: float((band or {}).get(d.name, d.band)) for d in DIMENSIONS.values()}
    thresholds = {d.name: float((threshold or {}).get(d.name, d.max_utilisation or 1.0))
                  for d in DIMENSIONS.values() if d.name in cap}
    sources = _sources(loads)
    return LoadModel(loads, cap, bands, thresholds, sources, dict(fanout or {}), float(default_fanout))


def _sources(loads: Mapping[TopicPartition, PartitionLoad]) -> dict[str, int]:
    """Where bytes in per second came from -> how many partitions."""
    out: dict[str, int] = {}
    for load in loads.values():
        out[load.source] = out.get(load.source, 0) + 1
    return out


def model_from_params(cluster: Cluster, params: Any,
                      history: Mapping[TopicPartition, tuple[float, float | None]] | None = None) -> LoadModel:
    """The model a plan recorded (``LoadModel.params``) over ``cluster`` (and the run's ``history``); raises
    ``InputError`` on a malformed record (plan.json may have been edited)."""
    where = "plan.json params.load"
    if not isinstance(params, dict):
        raise InputError(f"{where}: not an object")
    try:
        capacity = {str(d): {int(b): int(c) for b, c in per.items()} for d, per in (params.get("capacity") or {}).items()}
        band = {str(d): float(v) for d, v in (params.get("band") or {}).items()}
        threshold = {str(d): float(v) for d, v in (params.get("threshold") or {}).items()}
        fanout = {str(t): float(v) for t, v in (params.get("fanout") or {}).items()}
        default_fanout = float(params.get("default_fanout", 1.0))
    except (AttributeError, TypeError, ValueError):
        raise InputError(f"{where}: malformed capacities, bands, thresholds or fan-outs") from None
    unknown = sorted({*capacity, *band, *threshold} - set(DIMENSIONS))
    if unknown:
        raise InputError(f"{where}: unknown balance dimension(s) {', '.join(unknown)}")
    if any(c <= 0 for per in capacity.values() for c in per.values()):
        raise InputError(f"{where}: a capacity is not positive")
    if any(c > MAX_CAPACITY for per in capacity.values() for c in per.values()):
        raise InputError(f"{where}: a capacity is above {MAX_CAPACITY} (1 PiB, or 1 PiB/s)")
    loads = partition_loads(cluster, retention_ms=cluster.meta.get("topic_retention_ms") or {}, fanout=fanout,
                            default_fanout=default_fanout, history=history)
    bands = {d.name: band.get(d.name, d.band) for d in DIMENSIONS.values()}
    thresholds = {d: threshold.get(d, DIMENSIONS[d].max_utilisation or 1.0) for d in capacity}
    sources = _sources(loads)
    return LoadModel(loads, capacity, bands, thresholds, sources, fanout, default_fanout)
