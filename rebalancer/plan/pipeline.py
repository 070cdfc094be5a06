"""The plan stage's steps and what they hand each other: the request (checked inputs), the setup (targets, the
choices made, the bounds known before placement, the solver record), the placement; and the shares of the time each
phase gets (``budget.Budget.phase``).

``planner.make_plan`` runs the steps in order: request -> setup -> placement (``place_counts`` or ``place_load``)
-> leaders (``leader_pass``) -> result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..load import LoadModel
from ..model import Cluster, TopicPartition
from .targets import Targets

if TYPE_CHECKING:
    from .budget import Budget

Key = TopicPartition  # the partition's coordinates everywhere in the plan (``model``)

# Shares of the time left when a phase starts (after the summary's reserve). Placement comes first: replica balance
# is what a replica mode is for, and leaders can be rebalanced later without moving data (--mode leaders).
GREEDY_SHARE = 0.6            # greedy is the placement; the leader flow gets the rest
GREEDY_BEFORE_LP_SHARE = 0.2  # greedy is only the program's warm start and fallback
LP_SHARE = 0.75               # of what greedy left; the leader flow gets the rest
LEADERS_SHARE = 1.0           # the last phase that can stop takes all that is left
SUMMARY_RESERVE = 0.1         # of the limit, kept for building the summary (which cannot be interrupted)
LEADERS_RESERVE = 0.1         # of the limit, kept for the leader passes after the load program


@dataclass(frozen=True)
class PlanRequest:
    """What was asked, checked (the pipeline's input): the cluster and its load model, the mode and its options."""

    cluster: Cluster
    mode: str
    brokers: tuple[int, ...]
    strategy: str             # as requested (``auto`` included)
    balance: str              # as requested
    objective: str
    max_changes_per_partition: int | None  # as given (None: the mode's default, ``PlanSetup.max_changes``)
    model: LoadModel
    write_lp: str | None
    limit_given: bool
    groups: int | None = None  # load placement split in this many groups (None: ``split_plan``'s choice)
    master: str | None = None  # Spark master running the groups (None: in process, or SPLIT_MASTER when large)
    failover_order: bool = False  # followers ordered so that a failed broker's leadership spreads (``failover``)
    failover_when_balanced: bool = False  # ... only where the plan would otherwise change nothing
    repair_racks: bool = False    # uneven partitions spread over the racks before the placement (``rack_repair``)
    origin: Cluster | None = None  # the cluster as it is, where ``cluster`` is the repair's result (the plan's base)

    @property
    def base(self) -> Cluster:
        """The cluster as it is: what the plan's changes, bytes and figures are counted from."""
        return self.origin if self.origin is not None else self.cluster


@dataclass
class PlanSetup:
    """The targets step's result: bands, the balance and strategy chosen, the lower bounds known before placement,
    and the solver record the later steps add to."""

    targets: Targets
    balanced: str             # load or counts
    strategy: str             # chosen
    max_changes: int | None
    dead_replicas: int
    solver: dict[str, Any]
    bounds: dict[str, Any]


@dataclass
class Placement:
    """The placement step's result: the new replicas of the partitions it changed, and the strategy that made them;
    the leaders step reorders them in place."""

    assignment: dict[Key, tuple[int, ...]]
    strategy: str


# a strategy's step (``strategies.Strategy.step``): where its replicas go (in leaders mode: who leads)
Step = Callable[[PlanRequest, PlanSetup, "Budget", float], Placement]
