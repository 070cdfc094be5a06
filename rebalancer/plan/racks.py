"""The rack rule both greedy planners share: a replica may move from ``giver`` to ``receiver`` when the partition
then spans no fewer racks than before, that is, when the receiver is in the giver's rack or in a rack none of the
partition's other replicas is in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["keeps_racks"]


def keeps_racks(rack: Mapping[int, str | None], replicas: Iterable[int], giver: int, receiver: int) -> bool:
    rr = rack.get(receiver)
    if rr == rack.get(giver):
        return True
    for b in replicas:  # a loop, not all() over a generator: asked millions of times by the load greedy
        if b != giver and rack.get(b) == rr:
            return False
    return True
