"""Every error the library raises on purpose, and the exit code the CLI maps it to.

    RebalancerError                 exit 1   base class; never raised itself
    ├── InputError                  exit 2   a file, URL or option the user gave is unusable
    │   ├── ModelError              exit 3   the cluster description breaks an invariant
    │   ├── PlanError               exit 2   the plan asked for cannot exist (too few brokers or racks, a bad list)
    │   └── CapacityError           exit 2   a capacity file that cannot be used, or capacity that cannot hold the load
    ├── SourceError                 exit 4   a cluster source (ZooKeeper, Kafka) cannot be read
    │   ├── TransientError          exit 4   ... for a moment (connection lost, session expired, controller moving):
    │   │                                    backends raise it, the executor retries it, nothing else
    │   └── ClusterBusy             exit 9   another execution holds the cluster lock, or a reassignment this run
    │       │                                did not start is in flight: nothing was done, try again later
    │       ├── ForeignReassignment exit 9   ... a reassignment this run did not start is in flight
    │       └── LockLost            exit 9   ... this execution's lock was released by someone else: it stopped
    ├── SimulationError             exit 5   the simulated cluster or its ZooKeeper cannot run
    ├── GateFailure                 exit 6   a validation gate failed (the result file names which)
    ├── ExecutionFailed             exit 7   a batch failed (stalled, timed out, a destination died): state recorded
    └── VerificationFailed          exit 8   the cluster is not what the plan (or the rollback) said it would be

The library never calls ``sys.exit``; ``rebalancer.cli.main`` turns these into one line on stderr and the exit
code above. Anything else that escapes is a bug and is reported as such (exit 70, ``INTERNAL_EXIT``).

A process that runs the CLI for another (the runbook's plan in a process of its own, the Spark plan job) learns how
it failed from a record, not from its stderr: with ``ERROR_RECORD_ENV`` naming a file, the CLI writes the error
there as JSON (``to_record``: the class, the exit code, the one line), and the caller raises it again
(``from_record``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "RebalancerError",
    "InputError",
    "ModelError",
    "PlanError",
    "CapacityError",
    "SourceError",
    "ClusterBusy",
    "ForeignReassignment",
    "LockLost",
    "TransientError",
    "SimulationError",
    "GateFailure",
    "ExecutionFailed",
    "VerificationFailed",
    "ERRORS",
    "ERROR_RECORD_ENV",
    "INTERNAL_EXIT",
    "to_record",
    "from_record",
    "write_record",
]

ERROR_RECORD_ENV = "REBALANCER_ERROR_RECORD"  # a file the CLI writes its error to, as JSON (``to_record``)
INTERNAL_EXIT = 70  # a bug: anything else that escapes


class RebalancerError(Exception):
    """Base of every deliberate error; ``str(err)`` is the one line the user sees."""

    exit_code = 1


class InputError(RebalancerError):
    """A file, URL or option given by the user cannot be used."""

    exit_code = 2


class ModelError(InputError):
    """The cluster description violates an invariant (names the topic, partition or broker)."""

    exit_code = 3


class PlanError(InputError):
    """The requested plan cannot exist (too few brokers or racks, capacity exceeded, bad broker list)."""


class CapacityError(InputError):
    """A capacity file that cannot be used, or capacity that cannot hold the load."""


class SourceError(RebalancerError):
    """A cluster source could not be reached or read (timeout, auth, missing metadata)."""

    exit_code = 4


class TransientError(SourceError):
    """The cluster could not be reached for a moment: worth retrying (the one transient type every backend raises)."""


class ClusterBusy(SourceError):
    """The cluster is in use (the cluster lock is held, or someone else's reassignment is in flight): refused, and
    nothing on the cluster was changed."""

    exit_code = 9


class ForeignReassignment(ClusterBusy):
    """A reassignment this run did not start is in flight: refused, nothing done."""


class LockLost(ClusterBusy):
    """This execution's lock was released by someone else (``rebalancer unlock``): it stops before the next batch."""


class SimulationError(RebalancerError):
    """The simulated cluster or the ZooKeeper server it needs could not be started or driven."""

    exit_code = 5


class GateFailure(RebalancerError):
    """At least one gate failed (the result file is written; the message names the failed gates)."""

    exit_code = 6


class ExecutionFailed(RebalancerError):
    """A batch failed (stalled, timed out, the destination died); the state and the reason are recorded."""

    exit_code = 7


class VerificationFailed(RebalancerError):
    """The cluster is not what the plan (or the rollback) said it would be after executing it."""

    exit_code = 8


# Every class above by name: what a record can name (``from_record``).
ERRORS: dict[str, type[RebalancerError]] = {c.__name__: c for c in (
    RebalancerError, InputError, ModelError, PlanError, CapacityError, SourceError, TransientError, ClusterBusy,
    ForeignReassignment, LockLost, SimulationError, GateFailure, ExecutionFailed, VerificationFailed)}


def to_record(error: BaseException, exit_code: int | None = None) -> dict[str, Any]:
    """How a process failed, as JSON: ``{"error": class name, "exit_code": n, "message": the one line}``. An error of
    ours keeps its class (the nearest of ``ERRORS``) and exit code; anything else is ``InternalError``."""
    if isinstance(error, RebalancerError):
        name = next(c.__name__ for c in type(error).__mro__ if c.__name__ in ERRORS)
        return {"error": name, "exit_code": exit_code or error.exit_code, "message": str(error)}
    return {"error": "InternalError", "exit_code": exit_code or INTERNAL_EXIT,
            "message": f"{type(error).__name__}: {error}"}


def write_record(error: BaseException, exit_code: int | None = None) -> None:
    """Write ``to_record(error)`` to the file ``ERROR_RECORD_ENV`` names, if it names one (the caller's)."""
    path = os.environ.get(ERROR_RECORD_ENV)
    if path:
        try:
            Path(path).write_text(json.dumps(to_record(error, exit_code)) + "\n")
        except OSError:  # the caller then knows only the exit code; the error itself is still said on stderr
            pass


def from_record(doc: Any) -> Exception:
    """The error a record names, to raise again: an error of ours with its one line, else a ``RuntimeError``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("message"), str):
        return RuntimeError(f"an unreadable error record: {str(doc)[:200]}")
    cls = ERRORS.get(str(doc.get("error")))
    if cls is None:
        return RuntimeError(f"{doc.get('error')} (exit {doc.get('exit_code')}): {doc['message']}")
    return cls(doc["message"])
