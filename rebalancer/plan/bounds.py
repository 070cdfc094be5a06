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

    leaving_d  = sum over givers of  cheapest_b(excess_b)     excess_b  = max(0, load_b - high_b), all of a removed broker's
    arriving_d = sum over receivers of cheapest(deficit_b)    deficit_b = max(0, low_b - load_b)
    bytes_moved >= max over d of max(leaving_d, arriving_d)

``cheapest(x)`` is the fewest bytes that carry x units of d: the fractional knapsack of the replicas that could
carry it, taken in order of bytes per unit (on the giver itself when leaving; any replica when arriving, which
only lowers the bound). For disk, bytes per unit is 1 (cheapest(x) = x); for network in, it is the partition's
retention in seconds. Leadership moves without copying, so leader-only loads (leaders, network out) bound
nothing here. The bound reports the dimension that set it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..load import DIMENSIONS, LoadBand, PartitionLoad
from ..model import Cluster, TopicPartition
from .leaders import LeaderItem, topic_bands
from .targets import Targets

__all__ = ["replica_move_bound", "leader_change_bound", "bytes_moved_bound", "BOUND_DEFINITIONS"]

BOUND_DEFINITIONS = {
    "replica_moves": "max(sum over givers of max(0, replicas_b - ceil_b), sum over receivers of max(0, floor - replicas_b)); "
                     "ceil_b = 0 for removed brokers; band = [floor, ceil] of replicas / eligible brokers",
    "leader_changes": "sum over topics of max(sum_b max(0, L_tb - ceil_t), sum_b max(0, floor_t - L_tb)); "
                      "band per topic over the brokers able to lead it",
    "bytes_moved": "max over dimensions of max(sum over givers of the fewest bytes carrying load_b - high_b, "
                   "sum over receivers of the fewest bytes carrying low_b - load_b); all of a removed broker's load "
                   "leaves; fewest bytes = fractional knapsack by bytes per unit of the dimension",
}


def replica_move_bound(counts: Mapping[int, int], targets: Targets) -> dict[str, int]:
    r = targets.replicas
    excess = sum(max(0, counts.get(b, 0) - (0 if b in targets.removed else r.ceil)) for b in targets.givers)
    deficit = sum(max(0, r.floor - counts.get(b, 0)) for b in targets.receivers if b not in targets.removed)
    return {"excess": excess, "deficit": deficit, "bound": max(excess, deficit)}


def leader_change_bound(items: Sequence[LeaderItem]) -> int:
    bands = topic_bands(items)
    per: dict[tuple[str, int], int] = {}
    for it in items:
        per[(it.key[0], it.current)] = per.get((it.key[0], it.current), 0) + 1
    # Leaders on brokers that cannot lead (dead, removed, out of sync) must all change.
    stranded: dict[str, int] = {}
    for (topic, b), c in per.items():
        if b not in bands[topic][1]:
            stranded[topic] = stranded.get(topic, 0) + c
    total = 0
    for topic, (band, brokers) in bands.items():
        excess = sum(band.excess(per.get((topic, b), 0)) for b in brokers)
        deficit = sum(band.deficit(per.get((topic, b), 0)) for b in brokers)
        total += max(excess + stranded.get(topic, 0), deficit)
    return total


class _Cheapest:
    """The fewest bytes that carry ``amount`` units of a dimension, taking replicas fractionally in order of bytes
    per unit (the fractional knapsack, exact for the relaxation): prefix sums over the sorted replicas."""

    def __init__(self, items: Iterable[tuple[int, int]]) -> None:  # (bytes, units) per replica
        ranked = sorted(((b, u) for b, u in items if u > 0), key=lambda x: x[0] / x[1])
        self.units = list(itertools.accumulate(u for _, u in ranked))
        self.bytes = list(itertools.accumulate(b for b, _ in ranked))
        self.ranked = ranked

    def __call__(self, amount: int) -> float:
        if amount <= 0 or not self.ranked:
            return 0.0
        i = bisect.bisect_left(self.units, amount)
        if i >= len(self.ranked):
            return float(self.bytes[-1])  # cannot carry it all: everything there is (the band is then unreachable)
        before_units = self.units[i - 1] if i else 0
        before_bytes = self.bytes[i - 1] if i else 0
        size, units = self.ranked[i]
        return before_bytes + size * (amount - before_units) / units


def bytes_moved_bound(cluster: Cluster, loads: Mapping[TopicPartition, PartitionLoad],
                      bands: Mapping[str, Mapping[int, LoadBand]], targets: Targets) -> dict[str, Any]:
    """The lower bound on bytes moved (module doc) over the dimensions in ``bands`` (dimension -> broker -> band,
    eligible brokers): {"bound", "by" (the dimension that set it), "per_dimension": {d: {"leaving", "arriving"}}}."""
    per: dict[str, dict[str, int]] = {}
    for name, band in bands.items():
        d = DIMENSIONS[name]
        if all(d.follower(load) == 0 for load in loads.values()):
            continue  # a leader-only load moves with leadership, which copies nothing
        on: dict[int, list[tuple[int, int]]] = {b: [] for b in cluster.broker_ids}
        for p in cluster.partitions:
            load = loads[p.tp]
            for i, b in enumerate(p.replicas):
                on[b].append((p.size_bytes, d.replica(load, i == 0)))
        held = {b: sum(u for _, u in items) for b, items in on.items()}
        leaving = 0.0
        for b in targets.givers | targets.removed:
            excess = held[b] if b in targets.removed else (band[b].excess(held[b]) if b in band else 0)
            if excess:
                leaving += _Cheapest(on[b])(excess)
        # Arriving, a replica may lead: its larger role's load per byte (a lower bound either way).
        anywhere = _Cheapest((p.size_bytes, max(d.replica(loads[p.tp], False), d.replica(loads[p.tp], True)))
                             for p in cluster.partitions)
        arriving = sum(anywhere(band[b].deficit(held[b])) for b in targets.receivers - targets.removed if b in band)
        per[name] = {"leaving": int(leaving), "arriving": int(arriving)}
    by = max(per, key=lambda n: max(per[n].values()), default=None)
    return {"bound": max(per[by].values()) if by else 0, "by": by, "per_dimension": per}
