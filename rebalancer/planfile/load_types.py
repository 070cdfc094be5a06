"""The shape of plan.json's ``summary.load`` (written by ``rebalancer.plan.load_summary``): each balance dimension
against its bands before and after the plan, and the bytes moved against their lower bound."""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["WorstBroker", "DimensionSummary", "LoadSummary"]


class WorstBroker(TypedDict):
    broker: int
    deviation_pct: float


class DimensionSummary(TypedDict, total=False):
    """One dimension against its bands; only ``error`` when its capacity cannot hold its load."""
    error: str
    title: str
    unit: str
    total: int
    band_pct: float
    by_capacity: bool
    threshold_pct: float | None
    max_deviation_pct_before: float
    max_deviation_pct_after: float
    outside_before: list[int]
    outside_after: list[int]
    outside_gate: list[int]       # disk, network: brokers the gate fails (``load.gate_excess_pct``)
    over_threshold: list[int]     # with capacities: brokers the capacity gate fails (``load.headroom_excess_pct``)
    worst_after: WorstBroker


class LoadSummary(TypedDict):
    """plan.json's ``summary.load``. ``brokers``: per eligible broker, ``broker`` and, per dimension name, its
    before/after/target/low/high/capacity (keys are the dimension names, hence not a TypedDict)."""
    dimensions: dict[str, DimensionSummary]
    bytes_moved: int
    bytes_bound: int
    bytes_bound_by: str | None
    bytes_bound_per_dimension: dict[str, Any]
    bytes_to_bound: float | None
    rate_sources: Any
    brokers: list[dict[str, Any]]
