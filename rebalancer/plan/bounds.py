"""Lower bounds that every plan is measured against. Each is a count no valid plan can go below.

Replica moves (a move = one replica added on a broker that did not hold it; each copies the partition's bytes)::

    excess  = sum over brokers that may give of max(0, replicas_b - ceil_b)     (ceil_b = 0 for removed brokers)
    deficit = sum over brokers that may receive of max(0, floor - replicas_b)
    replica_moves >= max(excess, deficit)

Every replica above a giver's ceiling must leave it (one move each) and every replica missing below a receiver's
floor must arrive (one move each). ``floor``/``ceil`` are the integer band around replicas / eligible brokers.
In add-brokers mode only the new brokers receive, so the deficit counts only them.

Leader changes (a change = a partition whose preferred leader differs afterwards)::

    leader_changes >= sum over topics of max(sum_b max(0, L_tb - ceil_t), sum_b max(0, floor_t - L_tb))

with ``L_tb`` the preferred leaders of topic t on broker b and the band over the brokers that can lead the topic:
each topic's excess leaders must each change once, as must each missing one. The bound assumes the band is
reachable; when the replica sets make it unreachable the plan reports that too.

Bytes moved (the bytes of every replica added somewhere), for load plans (``bytes_moved_bound``): a move takes a
replica's load off one broker and puts it on another, so the bytes leaving brokers and the bytes arriving both
equal the bytes moved. Per dimension d with integer bands [low_b, high_b] (``rebalancer.load``)::

    leaving_b  = max over d of cheapest_b(excess_db)    excess_db  = max(0, load_db - high_db), all of a removed broker's
    arriving_b = max over d of cheapest(deficit_db)     deficit_db = max(0, low_db - load_db)
    bytes_moved >= max(sum over givers of leaving_b, sum over receivers of arriving_b)

``cheapest(x)`` is the fewest bytes that carry x units of d: the fractional knapsack of the replicas that could
carry it, taken in order of bytes per unit (on the giver itself when leaving; any replica when arriving, which
only lowers the bound). For disk, bytes per unit is 1 (cheapest(x) = x); for network in, it is the partition's
retention in seconds. Leadership moves without copying, so leader-only loads (leaders, network out) bound
nothing here. A broker's replicas leave it once for every dimension at the same time, so per broker the largest
of its dimensions' amounts counts, and the sum of those maxima (never below the largest dimension's sum: fuzz small
seed 182, disk on some brokers and network in on others, 3.7 % above it) is the bound. It reports the dimension
that set it, or ``"disk+nw_in"`` (the dimensions some broker's maximum came from) where the per-broker maxima did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..load import DIMENSIONS, Band, PartitionLoad, ReplicaTable, dimension_loads, replica_table
from ..model import Cluster, TopicPartition
from .leaders import LeaderItem, topic_change_bounds
from .targets import Targets

__all__ = ["replica_move_bound", "leader_change_bound", "bytes_moved_bound", "BOUND_DEFINITIONS"]

BOUND_DEFINITIONS = {
    "replica_moves": "max(sum over givers of max(0, replicas_b - ceil_b), sum over receivers of max(0, floor - replicas_b)); "
                     "ceil_b = 0 for removed brokers; band = [floor, ceil] of replicas / eligible brokers",
    "leader_changes": "sum over topics of max(sum_b max(0, L_tb - ceil_t), sum_b max(0, floor_t - L_tb)); "
                      "band per topic over the brokers able to lead it",
    "bytes_moved": "max(sum over givers of the most over dimensions of the fewest bytes carrying load_b - high_b, "
                   "sum over receivers of the most over dimensions of the fewest bytes carrying low_b - load_b); "
                   "all of a removed broker's load leaves; fewest bytes = fractional knapsack by bytes per unit of "
                   "the dimension",
}


def replica_move_bound(counts: Mapping[int, int], targets: Targets) -> dict[str, int]:
    r = targets.replicas
    excess = sum(max(0, counts.get(b, 0) - (0 if b in targets.removed else r.ceil)) for b in targets.givers)
    deficit = sum(max(0, r.floor - counts.get(b, 0)) for b in targets.receivers if b not in targets.removed)
    return {"excess": excess, "deficit": deficit, "bound": max(excess, deficit)}


def leader_change_bound(items: Sequence[LeaderItem],
                        bands: Mapping[str, tuple[Band, frozenset[int]]] | None = None) -> int:
    return sum(topic_change_bounds(items, bands).values())


def _cheapest(size: Any, units: Any, amounts: Any) -> Any:
    """For each amount, the fewest bytes carrying it: the fractional knapsack of the replicas (``size`` bytes,
    ``units`` of the dimension each), taken in order of bytes per unit (exact for the relaxation); everything there
    is when the amount exceeds their units."""
    import numpy as np

    keep = units > 0
    size, units = size[keep].astype(np.float64), units[keep].astype(np.float64)
    amounts = np.asarray(amounts, dtype=np.float64)
    out = np.zeros(len(amounts))
    if not len(units):
        return out
    order = np.argsort(size / units, kind="stable")
    size, units = size[order], units[order]
    cum_units, cum_bytes = np.cumsum(units), np.cumsum(size)
    i = np.searchsorted(cum_units, amounts, side="left")
    full = i >= len(units)
    j = np.minimum(i, len(units) - 1)
    before_units = np.where(j > 0, cum_units[j - 1], 0.0)
    before_bytes = np.where(j > 0, cum_bytes[j - 1], 0.0)
    out = before_bytes + size[j] * (amounts - before_units) / units[j]
    out = np.where(full, cum_bytes[-1], out)
    return np.where(amounts > 0, out, 0.0)


def bytes_moved_bound(cluster: Cluster, loads: Mapping[TopicPartition, PartitionLoad],
                      bands: Mapping[str, Mapping[int, Band]], targets: Targets,
                      table: ReplicaTable | None = None) -> dict[str, Any]:
    """The lower bound on bytes moved (module doc) over the dimensions in ``bands`` (dimension -> broker -> band,
    eligible brokers): {"bound", "by" (the dimension that set it, or the dimensions the per-broker maxima came from,
    joined by "+"), "per_dimension": {d: {"leaving", "arriving"}} (each dimension's sums alone)}.
    ``table``: the cluster's current placement, if already built (``rebalancer.load.replica_table``)."""
    import numpy as np

    dims = [n for n in bands if any(DIMENSIONS[n].follower(x) for x in loads.values())]  # leader-only: free to move
    if table is None or not set(dims) <= set(table.per_partition):
        table = replica_table(cluster, loads, dimensions=dims)
    per: dict[str, dict[str, int]] = {}
    # side ("leaving"/"arriving") -> broker -> (the most bytes any dimension needs there, that dimension)
    most: dict[str, dict[int, tuple[float, str]]] = {"leaving": {}, "arriving": {}}

    def keep(side: str, b: int, amount: float, name: str) -> None:
        if amount > most[side].get(b, (0.0, ""))[0]:
            most[side][b] = (amount, name)

    givers = sorted(targets.givers | targets.removed)
    receivers = sorted(targets.receivers - targets.removed)
    by_broker = np.argsort(table.broker, kind="stable")  # each broker's replicas as one slice
    brokers_sorted = table.broker[by_broker]
    size = table.size[by_broker]
    sizes = np.fromiter((p.size_bytes for p in cluster.partitions), np.int64, len(cluster.partitions))
    held_by_dim = dimension_loads(cluster, loads, dimensions=dims, table=table)
    for name in dims:
        band, held = bands[name], held_by_dim[name]
        units = table.units(name)[by_broker]
        leaving = 0.0
        for b in givers:
            excess = held[b] if b in targets.removed else (band[b].excess(held[b]) if b in band else 0)
            if excess:
                lo, hi = np.searchsorted(brokers_sorted, [b, b + 1])
                amount = float(_cheapest(size[lo:hi], units[lo:hi], [excess])[0])
                leaving += amount
                keep("leaving", b, amount, name)
        # Arriving, a replica may lead: its larger role's load per byte (a lower bound either way); one per partition.
        lead, follow = table.per_partition[name]
        short = [b for b in receivers if b in band and band[b].deficit(held[b]) > 0]
        amounts = _cheapest(sizes, np.maximum(lead, follow), [band[b].deficit(held[b]) for b in short]) \
            if short else []
        for b, amount in zip(short, amounts, strict=True):
            keep("arriving", b, float(amount), name)
        per[name] = {"leaving": int(leaving), "arriving": int(float(np.sum(amounts)))}
    by = max(per, key=lambda n: max(per[n].values()), default=None)
    bound = max(per[by].values()) if by else 0
    side = max(most, key=lambda k: sum(a for a, _ in most[k].values()))
    combined = int(sum(a for a, _ in most[side].values()))
    if combined > bound:
        names = {n for _, n in most[side].values()}
        bound, by = combined, "+".join(n for n in dims if n in names)
    return {"bound": bound, "by": by, "per_dimension": per}
