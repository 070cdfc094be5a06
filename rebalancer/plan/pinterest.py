"""Pinterest's one-shot leader rebalancing (strategy ``pinterest``), as "Using graph algorithms to optimize Kafka
operations, Part 2" describes it, per topic. Kept to compare against the exact ``flow`` strategy.

1. ``L_avg`` = partitions / brokers of the topic. Overloaded brokers (more leaders than ``L_avg``) hang off a dummy
   source with capacity ``floor(L_b - L_avg)``; underloaded ones feed a dummy sink with ``floor(L_avg - L_b)``.
2. Bipartite core: leader broker -> partition (capacity 1), partition -> each follower broker (capacity 1). A unit
   of flow broker -> partition -> broker is one leader swap on that partition.
3. Residue nodes: ``source -> source_residue`` carries the floored-away leftovers of the overloaded brokers
   (``floor`` of their sum, since swaps are whole), then 1 to each overloaded broker; ``underloaded broker ->
   sink_residue`` (1 each) ``-> sink`` carries the underloaded leftovers.
4. Costs: 1 on broker -> partition arcs (shorter chains), 1 on ``source -> source_residue`` and
   ``sink_residue -> sink`` (use the safe capacity first); then max-flow-min-cost.
5. Pruning: drop the dummy nodes, split the flow into weakly connected components; apply only the components whose
   swaps reduce the topic's skew (sum of |L_b - L_avg|).

Only in-sync, live replicas can take over (the same candidates the exact flow uses). A ``Deadline`` (see ``budget``)
is asked before each topic; on "stop" the topics left keep their preferred leaders (they are absent from the result).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a flow is solved: about a second, which every CLI command would pay
    import networkx as nx

from .budget import Deadline
from .leaders import LeaderItem

__all__ = ["pinterest_topic", "pinterest_leaders"]

SRC, SNK, SRC_RES, SNK_RES = "source", "sink", "source_residue", "sink_residue"


def _skew(counts: dict[int, int], avg: float) -> float:
    return sum(abs(c - avg) for c in counts.values())


def pinterest_topic(items: Sequence[LeaderItem]) -> dict[tuple[str, int], int]:
    """New preferred leader for the partitions of one topic (unchanged ones map to their current leader)."""
    result = {it.key: it.current for it in items}
    eligible = sorted({b for it in items for b in it.candidates})
    if not eligible:
        return result
    counts = {b: 0 for b in eligible}
    for it in items:
        if it.current in counts:
            counts[it.current] += 1
    avg = len(items) / len(eligible)
    import networkx as nx

    g = _flow_network(items, eligible, counts, avg)
    if SRC not in g or SNK not in g:
        return result
    core, swaps = _swaps(nx.max_flow_min_cost(g, SRC, SNK))
    # Pruning: keep the components that reduce skew.
    for comp in nx.weakly_connected_components(core):
        comp_swaps = {k: s for k, s in swaps.items() if ("p", k) in comp}
        if not comp_swaps:
            continue
        trial = dict(counts)
        for old, new in comp_swaps.values():
            trial[old] -= 1
            trial[new] += 1
        if _skew(trial, avg) < _skew(counts, avg) - 1e-9:
            counts = trial
            for k, (_old, new) in comp_swaps.items():
                result[k] = new
    return result


def _flow_network(items: Sequence[LeaderItem], eligible: list[int], counts: dict[int, int], avg: float) -> Any:
    """Pinterest's network: the source feeds the brokers above the average (by their whole excess, and one unit
    each through the residue node), the brokers below it feed the sink likewise; a broker reaches a partition it
    leads (cost 1: a change), a partition reaches the brokers that may lead it."""
    import networkx as nx

    g: nx.DiGraph[Any] = nx.DiGraph()
    over = [b for b in eligible if counts[b] > avg]
    under = [b for b in eligible if counts[b] < avg]
    leftover_over = 0.0
    leftover_under = 0.0
    for b in over:
        diff = counts[b] - avg
        g.add_edge(SRC, ("b", b), capacity=math.floor(diff + 1e-9), weight=0)
        leftover_over += diff - math.floor(diff + 1e-9)
        g.add_edge(SRC_RES, ("b", b), capacity=1, weight=0)
    for b in under:
        diff = avg - counts[b]
        g.add_edge(("b", b), SNK, capacity=math.floor(diff + 1e-9), weight=0)
        leftover_under += diff - math.floor(diff + 1e-9)
        g.add_edge(("b", b), SNK_RES, capacity=1, weight=0)
    g.add_edge(SRC, SRC_RES, capacity=math.floor(leftover_over + 1e-9), weight=1)
    g.add_edge(SNK_RES, SNK, capacity=math.floor(leftover_under + 1e-9), weight=1)
    for it in items:
        if it.current not in counts:
            continue  # the current leader cannot lead (dead or out of sync): not part of Pinterest's model
        g.add_edge(("b", it.current), ("p", it.key), capacity=1, weight=1)
        for b in it.candidates:
            if b != it.current:
                g.add_edge(("p", it.key), ("b", b), capacity=1, weight=0)
    return g


def _swaps(flow: Mapping[Any, Mapping[Any, int]]) -> tuple[Any, dict[tuple[str, int], tuple[int, int]]]:
    """The flow between brokers and partitions as a graph, and its swaps: each partition node with a unit in (from
    its old leader) and out (to its new one)."""
    import networkx as nx

    core: nx.DiGraph[Any] = nx.DiGraph()
    swaps: dict[tuple[str, int], tuple[int, int]] = {}
    for u, outs in flow.items():
        for v, f in outs.items():
            if f <= 0 or u in (SRC, SNK, SRC_RES, SNK_RES) or v in (SRC, SNK, SRC_RES, SNK_RES):
                continue
            core.add_edge(u, v)
    for node in core.nodes:
        if node[0] != "p":
            continue
        into = list(core.predecessors(node))
        out_of = list(core.successors(node))
        if into and out_of:
            swaps[node[1]] = (into[0][1], out_of[0][1])
    return core, swaps


def pinterest_leaders(items: Sequence[LeaderItem], deadline: Deadline | None = None) -> dict[tuple[str, int], int]:
    """Run the per-topic algorithm over every topic; partitions whose leader cannot stay get their first candidate.

    Topics the ``deadline`` leaves no time for are not in the result (their leaders stay)."""
    deadline = deadline or Deadline.never()
    by_topic: dict[str, list[LeaderItem]] = {}
    for it in items:
        by_topic.setdefault(it.key[0], []).append(it)
    out: dict[tuple[str, int], int] = {}
    for topic_items in by_topic.values():
        if deadline.expired():
            break
        topic_out = pinterest_topic(topic_items)
        for it in topic_items:
            if topic_out[it.key] not in it.candidates and it.candidates:
                topic_out[it.key] = it.candidates[0]
        out.update(topic_out)
    return out
