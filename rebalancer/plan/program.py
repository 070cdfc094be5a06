"""The rules every replica-placement 0/1 program shares, written once: the count program (``lp``, by replica
counts) and the load program (``lp_load``, by disk, network and counts) both place a partition's replicas with

- ``add_rf``: the replicas still to place, exactly (``rf_<tag>``);
- ``add_change_cap``: at most N brokers added (``changes_<tag>``);
- ``add_racks``: at most one replica per rack where the partition had one per rack (``rack_<tag>_<rack>``), else
  never fewer racks than before (``rack_cover_<tag>_<rack>``, ``rack_count_<tag>``);
- ``in_place``: the extraction order of a solution, survivors where they were and new brokers in the places of the
  ones that left (Kafka gives meaning only to the first replica; a stable order keeps reassignments minimal).

Each program adds its own rows between these (leader choice, bands, capacity) and solves through ``highs.solve``,
in a child process killed past its time limit. The helpers add rows in the order the programs always did: HiGHS's
path through a model depends on its row order, and a plan must not change with a refactoring.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["add_rf", "add_change_cap", "add_racks", "in_place"]


def add_rf(prob: Any, choices: Iterable[Any], count: int, tag: str) -> None:
    """Exactly ``count`` of the partition's placement variables ``choices`` set: its replicas still to place."""
    import pulp

    prob += pulp.lpSum(choices) == count, f"rf_{tag}"


def add_change_cap(prob: Any, added: Sequence[Any], cap: int | None, tag: str) -> None:
    """At most ``cap`` of ``added`` (the variables of brokers new to the partition); none when ``cap`` is None or no
    broker is new."""
    import pulp

    if cap is not None and added:
        prob += pulp.lpSum(added) <= cap, f"changes_{tag}"


def add_racks(prob: Any, by_rack: Mapping[Any, Sequence[Any]], racks_before: int, replicas: int,
              tag: str, held: Collection[Any] = (), warm_racks: Collection[Any] | None = None) -> None:
    """Rack rules of one partition: ``by_rack`` its placement variables per rack; ``racks_before`` the racks it
    spans before the plan, of ``replicas``; ``held`` racks of replicas that stay outside the variables. One per rack
    before: at most one per rack after (none in a held rack). Fewer racks than replicas before: a binary per rack not
    held, set only where the rack gets a replica, and at least as many racks as before (``warm_racks``: the racks of
    the warm start, to give those binaries their values)."""
    import pulp

    if racks_before == replicas:
        for r, vs in by_rack.items():
            if len(vs) + (1 if r in held else 0) > 1:
                prob += pulp.lpSum(vs) <= (0 if r in held else 1), f"rack_{tag}_{r}"
        return
    z = {r: prob.add_variable(f"z_{tag}_{r}", cat="Binary") for r in by_rack if r not in held}
    if warm_racks is not None:
        for r, zr in z.items():
            zr.setInitialValue(1 if r in warm_racks else 0)
    for r, zr in z.items():
        prob += zr <= pulp.lpSum(by_rack[r]), f"rack_cover_{tag}_{r}"
    prob += pulp.lpSum(z.values()) >= racks_before - len(held), f"rack_count_{tag}"


def in_place(current: Sequence[int], kept: Collection[int], new: Iterable[int]) -> list[int]:
    """``current``'s brokers in ``kept`` where they were, ``new`` ones (in their order) in the places of those that
    left, the rest of ``new`` after."""
    fresh = iter(new)
    order = [b if b in kept else next(fresh, None) for b in current]
    return [b for b in order if b is not None] + list(fresh)
