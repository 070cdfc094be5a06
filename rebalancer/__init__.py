"""Kafka rebalance runbook: a plain library and CLI (no Airflow import) for snapshot, plan, validate, execute."""

from .errors import InputError, ModelError, RebalancerError, SimulationError, SourceError
from .model import Broker, Cluster, Partition

__all__ = ["Broker", "Cluster", "Partition", "RebalancerError", "InputError", "ModelError", "SourceError", "SimulationError"]
__version__ = "0.1.0"
