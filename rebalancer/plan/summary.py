"""The short human summary of a plan printed by ``rebalancer plan`` (the report and the approval use plan.json)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..balance import human_bytes
from ..planfile.result import Plan
from .load_summary import LoadSummary

__all__ = ["format_plan_summary"]


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _status(solver: Mapping[str, Any]) -> str:
    """One line: the status (which says so when the time limit cut the plan short) and the time against the limit."""
    line = f"  status {solver.get('status')}"
    budget = solver.get("budget")
    if budget:
        line += f", {budget['seconds']:.2f} s of the {budget['limit']:g} s time limit"
        if budget.get("over_by"):
            line += f" ({budget['over_by']:.1f} s over)"
    else:  # a plan written before the stage had one budget
        line += f", {solver.get('seconds', 0):.2f} s"
    if isinstance(solver.get("gap"), float):
        line += f", gap {solver['gap']:.4f}"
    for name, brokers in (solver.get("outside_bands") or {}).items():
        shown = ",".join(map(str, brokers[:12])) + (f" and {len(brokers) - 12} more" if len(brokers) > 12 else "")
        line += f"\n  outside the {name} band after the plan: broker(s) {shown}"
    if solver.get("outside_why"):
        line += f"\n  why: {solver['outside_why']}"
    return line


def _load_lines(load: LoadSummary | None) -> list[str]:
    """Bytes moved against their bound, then each load dimension: brokers outside the band before -> after."""
    if not load:
        return []
    by = f" ({load['bytes_bound_by']})" if load.get("bytes_bound_by") else ""
    lines = [f"  bytes moved {human_bytes(load['bytes_moved'])}, lower bound {human_bytes(load['bytes_bound'])}{by},"
             f" ratio {_ratio(load['bytes_to_bound'])}"]
    for name, d in load["dimensions"].items():
        if "error" in d:
            lines.append(f"  {name}: {d['error']}")
            continue
        worst = d["worst_after"]
        lines.append(f"  {d['title']} within +-{d['band_pct']:g}% of target{' (by capacity)' if d['by_capacity'] else ''}:"
                     f" {len(d['outside_before'])} -> {len(d['outside_after'])} broker(s) outside;"
                     f" worst after: broker {worst['broker']} {worst['deviation_pct']:+.1f}%")
    return lines


def _execution_lines(execution: dict[str, Any] | None) -> list[str]:
    """The time to execute the plan at the throttle it was planned for: the bound and the expected duration."""
    if not execution:
        return []
    from ..movement.estimate import describe

    return [f"  execution {describe(execution)}"]


def _floor_text(floor: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    """How far an order of followers alone could even the worst single failure (``failover.order_floors``), where
    that is below where it stands: "; an order of followers could reach no lower than leaders 9.4%, load 13.7%"."""
    if not floor:
        return ""
    parts = [f"{what} {floor[fig]:.1f}%" for fig, what in (("leaders_dev_pct", "leaders"), ("load_dev_pct", "load"))
             if isinstance(floor.get(fig), (int, float))]
    if not parts or all(isinstance(floor.get(f), (int, float)) and floor[f] >= after[f] - 0.01
                        for f in ("leaders_dev_pct", "load_dev_pct") if f in floor):
        return ""
    return f"; an order of followers could reach no lower than {', '.join(parts)}"


def _failover_lines(failover: Mapping[str, Any] | None, solver: Mapping[str, Any]) -> list[str]:
    """The worst single-broker and single-rack failure, before the plan and after it (``plan.failover``)."""
    if not failover:
        return []
    lines = []
    for key, what in (("worst_broker", "one broker"), ("worst_rack", "one rack")):
        before, after = failover["before"][key], failover["after"][key]
        if not after:
            continue
        lines.append(f"  after {what} fails: leaders +-{before['leaders_dev_pct']:.1f}% -> "
                     f"{after['leaders_dev_pct']:.1f}% (worst: {after['leaders_dev_pct_by']}), leader "
                     f"{failover['weighted_by']} +-{before['load_dev_pct']:.1f}% -> {after['load_dev_pct']:.1f}% "
                     f"(worst: {after['load_dev_pct_by']})"
                     + (f", {after['offline']} partition(s) offline" if after["offline"] else "")
                     + (f", {after['under_min_isr']} under min.insync.replicas (was {before.get('under_min_isr', 0)})"
                        if after.get("under_min_isr") or before.get("under_min_isr") else "")
                     + ("; --repair-racks spreads them" if key == "worst_rack" and after.get("under_min_isr")
                        and "rack_repair" not in solver else "")
                     + (_floor_text(failover.get("order_floor"), after) if key == "worst_broker" else ""))
    if "rack_repair" in solver:
        r = solver["rack_repair"]
        lines.append(f"  racks: {r['uneven_before']} partition(s) leaned on one rack; {r['repaired']} spread evenly "
                     f"({r['moves']} replica(s), {human_bytes(r['bytes'])})"
                     + (f", {r['left']} only as far as the change cap allows (e.g. {', '.join(r['left_examples'])})"
                        if r["left"] else "")
                     + (f", {r['skipped']} left to the placement (a replica on a broker that cannot keep it)"
                        if r["skipped"] else "")
                     + (f" ({r['why_none']})" if r.get("why_none") else ""))
    if "failover" in solver:
        lines.append(f"  followers reordered for failover: {solver['failover']['reordered']} partition(s), "
                     f"{solver['failover']['order_only']} of them for that alone (no bytes)"
                     + ("; the plan changed nothing else" if solver["failover"].get("why") == "nothing else to change"
                        else ""))
    return lines


def format_plan_summary(plan: Plan) -> str:
    s = plan.summary
    b = s["lower_bounds"]
    dev = s["max_deviation_pct"]
    solver = plan.solver
    lines = [
        f"plan: mode {plan.mode}, strategy {plan.strategy} ({solver.get('strategy_reason', '')})",
        _status(solver),
        f"  replica moves   {s['replica_moves']:>8}   lower bound {b.get('replica_moves', 0):>8}   ratio {_ratio(s['moves_to_bound'])}",
        f"  leader changes  {s['leader_changes']:>8}   lower bound {b.get('leader_changes', 0):>8}   ratio {_ratio(s['leader_changes_to_bound'])}",
        f"  partitions changed {s['partitions_changed']}, bytes to copy {human_bytes(s['bytes_moved'])},"
        f" at most {s['max_changes_in_a_partition']} replica(s) added to one partition",
        f"  max deviation from median: replicas {dev['replicas_before']:.1f}% -> {dev['replicas_after']:.1f}%,"
        f" leaders {dev['leaders_before']:.1f}% -> {dev['leaders_after']:.1f}%, bytes {dev['bytes_before']:.1f}% -> {dev['bytes_after']:.1f}%",
        f"  replica spread (max-min) {s['replica_spread']['before']} -> {s['replica_spread']['after']},"
        f" worst per-topic leader spread {s['topic_leader_spread']['before']} -> {s['topic_leader_spread']['after']}",
        *_load_lines(s.get("load")),
        *_execution_lines(s.get("execution")),
        *_failover_lines(s.get("failover"), solver),
        f"  content hash {plan.hash}",
    ]
    if not plan.changes:
        lines.insert(1, "  nothing to change: the cluster is already balanced for this mode")
    return "\n".join(lines)
