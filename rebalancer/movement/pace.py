"""The options that pace an execution, declared once (``rebalancer.options``): the replication throttle and how
many moves run at once. ``ExecOptions`` (the execution) and ``PlanOptions`` (the plan's estimate of it) each declare
their fields with these, so the CLI, the runbook and the DAG form read one name, default, range and help. The
schedule they assume is the registry's (``rebalancer.strategies.schedule_option``)."""

from __future__ import annotations

from typing import Any

from ..options import INT32_MAX, option
from .batches import PER_BROKER, TOTAL
from .estimate import DEFAULT_THROTTLE
from .rate import parse_rate
from .schedule import ROLLING_PER_BROKER

__all__ = ["throttle_option", "per_broker_option", "total_option"]

RATE_PATTERN = r"^\s*[0-9.]+\s*([kKmMgG]i?B)?(/s)?\s*$"  # the DAG form's check of a rate (parse_rate decides)


def throttle_option() -> Any:
    """The replication quota per broker, bytes/s, given as text (``50MB/s``)."""
    return option(parse_rate(DEFAULT_THROTTLE), help="replication quota per broker, e.g. 50MB/s, 20MiB/s or bytes/s",
                  text=parse_rate, shown=DEFAULT_THROTTLE, pattern=RATE_PATTERN,
                  title="Replication throttle per broker", section="Execution")


def per_broker_option() -> Any:
    """Moves at once per broker (None: the schedule's own)."""
    return option(None, flag="--max-moves-per-broker", param="max_moves_per_broker", minimum=1, maximum=INT32_MAX,
                  help="moves at once per broker (rolling: into it and out of it apart)",
                  default_help=f"{PER_BROKER} in batches, {ROLLING_PER_BROKER} rolling",
                  title="Max moves at once per broker", section="Execution")


def total_option() -> Any:
    """Moves at once in the cluster."""
    return option(TOTAL, flag="--max-moves", param="max_moves", minimum=1, maximum=INT32_MAX,
                  help="moves at once in the cluster", title="Max moves at once", section="Execution")
