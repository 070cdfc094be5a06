"""Planning: targets and bounds, the exact leader flow, Pinterest's flow, the 0/1 program, the greedy planner."""

from ..planfile.result import Change, Plan, content_hash, load_plan, write_plan
from .budget import Budget, Deadline
from .planner import STRATEGIES, choose_strategy, make_plan, plan_run_dir
from .targets import MODES, PlanError, make_targets

__all__ = ["MODES", "STRATEGIES", "Budget", "Change", "Deadline", "Plan", "PlanError", "choose_strategy", "content_hash",
           "load_plan", "make_plan", "make_targets", "plan_run_dir", "write_plan"]
