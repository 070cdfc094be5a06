"""Every error the library raises on purpose, and the exit code the CLI maps it to.

    RebalancerError                 exit 1   base class; never raised itself
    ├── InputError                  exit 2   a file, URL or option the user gave is unusable
    │   └── ModelError              exit 3   the cluster description breaks an invariant
    ├── SourceError                 exit 4   a cluster source (ZooKeeper, Kafka) cannot be read
    │   ├── TransientError          exit 4   ... for a moment (connection lost, session expired, controller moving):
    │   │                                    backends raise it, the executor retries it, nothing else
    │   └── ClusterBusy             exit 9   another execution holds the cluster lock, or a reassignment this run
    │                                        did not start is in flight: nothing was done, try again later
    └── SimulationError             exit 5   the simulated cluster or its ZooKeeper cannot run

The library never calls ``sys.exit``; ``rebalancer.cli.main`` turns these into one line on stderr and the exit
code above. Anything else that escapes is a bug and is reported as such (exit 70).
"""

from __future__ import annotations

__all__ = [
    "RebalancerError",
    "InputError",
    "ModelError",
    "SourceError",
    "ClusterBusy",
    "TransientError",
    "SimulationError",
]


class RebalancerError(Exception):
    """Base of every deliberate error; ``str(err)`` is the one line the user sees."""

    exit_code = 1


class InputError(RebalancerError):
    """A file, URL or option given by the user cannot be used."""

    exit_code = 2


class ModelError(InputError):
    """The cluster description violates an invariant (names the topic, partition or broker)."""

    exit_code = 3


class SourceError(RebalancerError):
    """A cluster source could not be reached or read (timeout, auth, missing metadata)."""

    exit_code = 4


class TransientError(SourceError):
    """The cluster could not be reached for a moment: worth retrying (the one transient type every backend raises)."""


class ClusterBusy(SourceError):
    """The cluster is in use (the cluster lock is held, or someone else's reassignment is in flight): refused, and
    nothing on the cluster was changed."""

    exit_code = 9


class SimulationError(RebalancerError):
    """The simulated cluster or the ZooKeeper server it needs could not be started or driven."""

    exit_code = 5
