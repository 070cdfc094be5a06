"""The plan stage's options, declared once (``rebalancer.options``): ``PlanOptions``.

``rebalancer plan``'s flags, ``runbook.plan``'s keywords (and the argv of a plan run in its own process or handed
to the Spark job) and the DAG form's plan params are generated from these fields, and a setting left out keeps its
default here. What is planned (the mode, the brokers) is the request, not an option: ``make_plan`` and
``plan_run_dir`` take it apart. The execution the plan's time estimate assumes is paced by the same options as the
execution (``movement.pace``, ``strategies.schedule_option``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from ..errors import InputError
from ..load import DIMENSIONS
from ..movement.pace import per_broker_option, throttle_option, total_option
from ..options import INT32_MAX, given, option
from ..strategies import BALANCES, STRATEGY_REGISTRY, schedule_option

__all__ = ["PlanOptions", "named_values", "ESTIMATE_OPTIONS", "ESTIMATE_PREFIX"]

ESTIMATE_PREFIX = "the execution estimate assumes: "


def named_values(items: list[str], option: str, *, percent: bool = False, topics: bool = False) -> dict[str, float]:
    """``NAME=VALUE`` texts as a dict: dimension names (``percent``: the value in %, returned as a fraction) or topic
    names (``topics``); a one-line InputError for anything else."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(f"{option} {item!r}: expected NAME=VALUE")
        if not topics and name not in DIMENSIONS:
            raise InputError(f"{option} {item!r}: unknown dimension {name!r} (known: {', '.join(DIMENSIONS)})")
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"{option} {item!r}: {value!r} is not a number") from None
        if not math.isfinite(number) or number < 0 or (percent and number >= 100):
            raise InputError(f"{option} {item!r}: {value!r} must be a number from 0" + (" to below 100" if percent else ""))
        out[name] = number / 100 if percent else number
    return out


def _named_texts(values: Mapping[str, float], percent: bool = False) -> list[str]:
    """The ``NAME=VALUE`` texts that give ``values`` (what ``named_values`` reads back)."""
    return [f"{name}={round(float(v) * 100, 9)!r}" if percent else f"{name}={float(v)!r}" for name, v in values.items()]


def _dimension_option(flag: str, what: str, defaults: str) -> Any:
    return option(None, flag=flag, param=None, repeat=True, metavar="DIM=PCT",
                  text=partial(named_values, option=flag, percent=True), unparse=partial(_named_texts, percent=True),
                  help=f"{what}, in % (repeatable; dimensions: {defaults})")


_BANDS = ", ".join(f"{d.name} {d.band * 100:g}" for d in DIMENSIONS.values())
_THRESHOLDS = ", ".join(f"{d.name} {d.max_utilisation * 100:g}" for d in DIMENSIONS.values() if d.max_utilisation)


@dataclass(frozen=True)
class PlanOptions:
    """How the plan stage plans (``make_plan``) and what its estimate of the execution assumes (``plan_run_dir``)."""

    strategy: str = option("auto", choices=STRATEGY_REGISTRY.keys(), title="Planner", section="Plan",
                           help="the planner: auto picks one for the mode and the cluster (rebalancer.strategies)")
    balance: str = option("auto", choices=BALANCES.keys(), title="Balance", section="Plan",
                          help="what replica modes balance: load (disk, network in/out, then replica and leader "
                               "counts, by utilisation of each broker's capacity), counts (replica and leader counts "
                               "only), or auto (load when the snapshot has partition sizes)")
    capacity: str | None = option(None, param="capacity_file", title="Broker capacity file", section="Plan",
                                  help="broker capacities in Cruise Control's capacity.json format (brokerId -1: the "
                                       "default; DISK in MiB, NW_IN/NW_OUT in KiB/s); the disk size brokers report "
                                       "through DescribeLogDirs is used where the file says nothing")
    bands: Mapping[str, float] | None = _dimension_option("--band", "band half-width around each broker's target",
                                                           _BANDS)
    thresholds: Mapping[str, float] | None = _dimension_option(
        "--threshold", "capacity threshold: utilisation at most this", _THRESHOLDS)
    fanout: Mapping[str, float] | None = option(
        None, param=None, repeat=True, metavar="TOPIC=FACTOR", text=partial(named_values, option="--fanout", topics=True),
        unparse=_named_texts, help="consumer bytes out / bytes in of a topic, or *=FACTOR for every topic (default 1)")
    max_changes_per_partition: int | None = option(
        None, minimum=1, maximum=INT32_MAX, title="Max replica changes per partition", section="Plan",
        help="replicas added per partition at most", default_help="1; unlimited for remove-brokers")
    time_limit: float | None = option(
        None, above=0, maximum=10**9, unit=" seconds", param="time_limit_s", title="Plan stage time limit (s)",
        section="Plan", default_help="300, or 1 per 1,000 replicas when more",
        help="seconds for the whole plan stage, reading the snapshot included: each phase gets a share; when it runs "
             "out, the best valid plan so far, its status saying which phase was cut short (the approval request "
             "says so first), or a one-line error if none exists yet")
    objective: str = option("replicas", choices=("replicas", "bytes"), title="Minimise", section="Plan",
                            help="minimise replicas moved or bytes copied")
    write_lp: str | None = option(None, param=None, metavar="FILE",
                                  help="write the 0/1 program to this .lp file (debugging)")
    groups: int | None = option(
        None, minimum=1, maximum=INT32_MAX, param="plan_groups", title="Placement groups", section="Plan",
        default_help="one pass below 5,000,000 replicas, from there a group per 250,000 with at least 150 per broker",
        help="on load, split the replica placement in this many groups of topics, planned apart (as Spark tasks), "
             "merged and repaired")
    master: str | None = option(
        None, param="plan_spark_master", title="Spark master of the groups", section="Plan",
        default_help="in process below 5,000,000 replicas, local[*] from there; in the DAGs a split plan is "
                     "submitted through the spark_default connection",
        help="the Spark master that plans the groups as tasks")
    failover_order: bool = option(
        False, title="Order followers for failover", section="Plan",
        help="order each partition's followers so that a failed broker's leadership spreads evenly over the others "
             "(a partition whose order alone changes is a change that copies nothing)")
    failover_when_balanced: bool = option(
        False, title="Order followers for failover when nothing else changes", section="Plan",
        help="where the plan would change nothing (replicas and leaders balanced), order the followers for failover "
             "instead (as --failover-order: a plan of order-only changes that copies nothing, or none when the order "
             "already spreads every failure as evenly as it can)")
    repair_racks: bool = option(
        False, title="Spread partitions over the racks", section="Plan",
        help="first move replicas of partitions that lean on one rack (more than ceil(RF / racks) replicas on it) to "
             "their emptiest racks, so that one rack's failure takes as few of their replicas as it can; the "
             "placement then balances around them (repair moves are within --max-changes-per-partition)")
    # the execution the plan's time estimate assumes (``summary.execution``)
    throttle: int = throttle_option()
    schedule: str = schedule_option()
    per_broker: int | None = per_broker_option()
    total: int = total_option()

    @classmethod
    def from_input(cls, values: Mapping[str, Any] | Any = MappingProxyType({})) -> PlanOptions:
        """The options an operator gave (CLI flags, runbook keywords, DAG params by field name): text options as
        text (``throttle="50MB/s"``, ``bands=["disk=5"]``) or already read (``bands={"disk": 0.05}``); one left out or
        None keeps its default; a bad value is a one-line error, an unknown name a TypeError."""
        return cls(**given(cls, values))


ESTIMATE_OPTIONS = ("throttle", "schedule", "per_broker", "total")  # on the CLI after ``ESTIMATE_PREFIX``
