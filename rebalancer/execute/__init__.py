"""Execution: throttles, the lock, execute/verify/rollback. The moves' model is ``rebalancer.movement``, the cluster
access (backends, ``open_backend``) ``rebalancer.access``."""

from ..access.connect import open_backend
from ..movement.rate import parse_rate
from .runner import (
                     ExecOptions,
                     ExecutionFailed,
                     VerificationFailed,
                     approve,
                     execute,
                     preflight,
                     release_throttles,
                     rollback,
                     verify,
)

__all__ = ["ExecOptions", "ExecutionFailed", "VerificationFailed", "approve", "execute", "open_backend", "parse_rate",
           "preflight", "release_throttles", "rollback", "verify"]
