"""Execution: batches, throttles, the ZooKeeper backend, execute/verify/rollback."""

from .runner import ExecOptions, ExecutionFailed, VerificationFailed, approve, execute, open_backend, rollback, verify
from .throttle import clear_all, parse_rate

__all__ = ["ExecOptions", "ExecutionFailed", "VerificationFailed", "approve", "clear_all", "execute", "open_backend",
           "parse_rate", "rollback", "verify"]
