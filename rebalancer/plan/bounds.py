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

Bytes: ``bytes_moved >= sum over the (excess) cheapest replicas of each giver`` would need the plan's structure;
we report bytes alongside moves, not a byte bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .leaders import LeaderItem, topic_bands
from .targets import Targets

__all__ = ["replica_move_bound", "leader_change_bound", "BOUND_DEFINITIONS"]

BOUND_DEFINITIONS = {
    "replica_moves": "max(sum over givers of max(0, replicas_b - ceil_b), sum over receivers of max(0, floor - replicas_b)); "
                     "ceil_b = 0 for removed brokers; band = [floor, ceil] of replicas / eligible brokers",
    "leader_changes": "sum over topics of max(sum_b max(0, L_tb - ceil_t), sum_b max(0, floor_t - L_tb)); "
                      "band per topic over the brokers able to lead it",
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
