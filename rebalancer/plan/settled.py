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

from collections.abc import Mapping

from ..balance import counts_excess
from ..load import LoadModel, beyond, dimension_loads, largest_replica, replica_table
from ..model import Cluster, TopicPartition
from .load_problem import placement_dimensions
from .targets import Targets

__all__ = ["outside_gates", "gate_distance", "SETTLED"]

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
    for d, distance in gate_distance(cluster, model, targets.eligible, dims).items():
        off = sorted(b for b, x in distance.items() if x > 0)
        if off:
            return f"{d} outside its band (brokers {', '.join(map(str, off[:5]))})"
    return None


def gate_distance(cluster: Cluster, model: LoadModel, eligible: frozenset[int], dims: list[str],
                  assignment: Mapping[TopicPartition, tuple[int, ...]] | None = None) -> dict[str, dict[int, float]]:
    """dimension -> eligible broker -> how far its load (the cluster as it is, or with ``assignment``) lies outside
    what the gates accept, in units of its target: its band (a network one widened by the busiest replica the
    broker carries, the network gate's slack), and its capacity limit; 0 inside."""
    if not dims:
        return {}
    table = replica_table(cluster, model.loads, assignment, dimensions=dims)
    loads = dimension_loads(cluster, model.loads, dimensions=dims, table=table)
    largest = largest_replica(cluster, [table], dims)
    out: dict[str, dict[int, float]] = {}
    for d in dims:
        slack = largest[d] if d != "disk" else dict.fromkeys(cluster.broker_ids, 0)
        out[d] = {b: max(beyond(loads[d][b], x.floor - slack[b], x.ceil + slack[b]),
                         loads[d][b] - x.limit if x.limit is not None else 0.0) / max(x.average, 1e-9)
                  for b, x in model.bands(d, sum(loads[d].values()), eligible).items()}
    return out
