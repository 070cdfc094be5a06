"""An independent 0/1 program for leader balancing, used to certify the min-cost flow (tests, benchmark).

Same lexicographic objective as ``leaders.balance_leaders`` with ``priority="changes"``, solved in stages so no
big weights are needed: (1) the per-topic band violation, (2) the cluster tolerance-band violation, (3) the leader
changes, (4) the cluster band violation, each minimised with the earlier ones fixed at their optimum. Slower than the flow; exact when every stage
reaches optimality. Each stage solves through ``highs.solve`` (a child process killed past its time limit), as every
program of the plan stage does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import highs
from .leaders import LeaderItem, tolerance_band, topic_bands
from .targets import band

__all__ = ["leader_ilp"]


def leader_ilp(items: Sequence[LeaderItem], cluster_brokers: frozenset[int],
               time_limit: float = 120.0) -> tuple[int, int, int, int]:
    """(topic violation, tolerance violation, changes, cluster violation) at the optimum."""
    import pulp

    prob = pulp.LpProblem("leaders", pulp.LpMinimize)
    y = {(it.key, b): prob.add_variable(f"y_{i}_{b}", cat="Binary") for i, it in enumerate(items) for b in it.candidates}
    for i, it in enumerate(items):
        prob += pulp.lpSum(y[(it.key, b)] for b in it.candidates) == 1, f"one_{i}"
    by_topic_broker: dict[tuple[str, int], list[Any]] = {}
    by_broker: dict[int, list[Any]] = {}
    for (k, b), v in y.items():
        by_topic_broker.setdefault((k[0], b), []).append(v)
        by_broker.setdefault(b, []).append(v)
    topic_terms: list[Any] = []
    for t, (tb, brokers) in topic_bands(items).items():
        for b in brokers:
            count = pulp.lpSum(by_topic_broker.get((t, b), []))
            over = prob.add_variable(f"to_{t}_{b}", lowBound=0)
            under = prob.add_variable(f"tu_{t}_{b}", lowBound=0)
            prob += count - over <= tb.ceil, f"thi_{t}_{b}"
            prob += count + under >= tb.floor, f"tlo_{t}_{b}"
            topic_terms += [over, under]
    cb = band(len(items), len(cluster_brokers))
    wide = tolerance_band(cb)
    cluster_terms: list[Any] = []
    wide_terms: list[Any] = []
    for b in sorted(cluster_brokers):
        count = pulp.lpSum(by_broker.get(b, []))
        for tag, bb, terms in (("c", cb, cluster_terms), ("w", wide, wide_terms)):
            over = prob.add_variable(f"{tag}o_{b}", lowBound=0)
            under = prob.add_variable(f"{tag}u_{b}", lowBound=0)
            prob += count - over <= bb.ceil, f"{tag}hi_{b}"
            prob += count + under >= bb.floor, f"{tag}lo_{b}"
            terms += [over, under]
    current = {it.key: it.current for it in items}
    changes = pulp.lpSum(v for (k, b), v in y.items() if b != current[k])
    results = []
    for stage, expr in enumerate((pulp.lpSum(topic_terms), pulp.lpSum(wide_terms), changes, pulp.lpSum(cluster_terms))):
        prob.setObjective(expr)
        result = highs.solve(prob, time_limit, warm=False)
        if result["outcome"] != "optimal":
            raise RuntimeError(f"leader ILP stage {stage + 1}: {result['status']}")
        value = int(round(pulp.value(expr) or 0))
        results.append(value)
        prob += expr <= value, f"stage_{stage}"
    return results[0], results[1], results[2], results[3]

