"""Whether a replica mode has anything to place: the cluster as it is, measured against the bands the gates hold a
plan to.

The placement aims a little inside the gates' bands (``load_problem.LOAD_MARGIN``, ``COUNT_MARGIN``) so that its
plan passes them with room to spare. Run again on the cluster that plan left, it saw brokers between the two and
moved replicas to bring them inside the narrower bands: fuzz small seed 125, planned "Balanced" with disk at 4.97 %
and network in at 9.95 % off target, was planned again with 22 more moves, balanced both times. The gates decide
whether a cluster needs a plan; the margins only where a plan goes once it must move. So the placement runs only
where some broker lies outside what the gates accept: a replica on a broker that may not hold it (a removed or
dead one), a replica count past the count gate, disk outside its band, network in outside its band widened by the
busiest replica the broker holds (the network gate's slack), or a load over its capacity limit.
"""

from __future__ import annotations

from ..balance import counts_excess
from ..load import LoadModel, dimension_loads, largest_replica, replica_table
from ..model import Cluster
from .load_problem import placement_dimensions
from .targets import Targets

__all__ = ["outside_gates", "SETTLED"]

SETTLED = "no: every broker lies inside what the gates accept"  # ``solver.placement_needed`` where nothing is placed


def outside_gates(cluster: Cluster, targets: Targets, model: LoadModel, on_load: bool) -> str | None:
    """The first reason the cluster as it is needs a replica plan (a broker outside what the gates accept), or
    None when every eligible broker already lies inside (``on_load``: the load bands too, not the counts alone)."""
    eligible = targets.eligible
    count = dict.fromkeys(eligible, 0)
    for p in cluster.partitions:
        for b in p.replicas:
            if b not in count:
                return f"broker {b} holds replicas it may not keep"
            count[b] += 1
    over = sorted(b for b, x in counts_excess(count, model.band["replicas"]).items() if x > 1e-9)
    if over:
        return f"replica counts outside their gate (brokers {', '.join(map(str, over[:5]))})"
    if on_load:
        return _load_outside(cluster, targets, model)
    return None


def _load_outside(cluster: Cluster, targets: Targets, model: LoadModel) -> str | None:
    dims = [d for d in placement_dimensions(model) if d not in ("replicas", "leaders")]
    if not dims:
        return None
    table = replica_table(cluster, model.loads, dimensions=dims)
    loads = dimension_loads(cluster, model.loads, dimensions=dims, table=table)
    largest = largest_replica(cluster, [table], dims)
    for d in dims:
        slack = largest[d] if d != "disk" else dict.fromkeys(cluster.broker_ids, 0)  # the network gate's
        bands = model.bands(d, sum(loads[d].values()), targets.eligible)
        off = sorted(b for b, x in bands.items()
                     if not x.floor - slack[b] <= loads[d][b] <= x.ceil + slack[b]
                     or (x.limit is not None and loads[d][b] > x.limit))
        if off:
            return f"{d} outside its band (brokers {', '.join(map(str, off[:5]))})"
    return None
