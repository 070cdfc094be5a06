"""Execution: batches, throttles, the ZooKeeper and Admin-API backends, execute/verify/rollback."""

from .connect import open_backend
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
from .throttle import parse_rate

__all__ = ["ExecOptions", "ExecutionFailed", "VerificationFailed", "approve", "execute", "open_backend", "parse_rate",
           "preflight", "release_throttles", "rollback", "verify"]
