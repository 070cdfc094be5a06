"""What the simulated controller and its Kafka listener share, in a leaf module that imports neither: where
listeners bind, the controller's per-partition error, and the shape of a listener (the throttle config keys and
topic ids are Kafka's: ``rebalancer.kafka_names``). The controller is given its listener as a factory
(``controller.ListenerFactory``; ``kafka_listener.serve`` is the Kafka protocol one), so the controller never imports
the listener."""

from __future__ import annotations

from typing import Protocol

__all__ = ["LISTEN_HOST", "DELETE_TOPICS", "ApiError", "delete_topic_path", "Listener"]

LISTEN_HOST = "127.0.0.1"  # where the brokers' Kafka listeners bind, as advertised in /brokers/ids/<id>
DELETE_TOPICS = "/admin/delete_topics"  # Kafka's DeleteTopicsZNode: one child per topic marked for deletion


class ApiError(Exception):
    """A Kafka error code with its message, the answer for one partition of a controller request (Kafka's ApiError)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


class Listener(Protocol):
    """One broker's listener: bound on creation (``port``), serving after ``start``; ``close`` stops it without
    waiting, ``join`` waits for its threads."""

    port: int

    def start(self) -> None: ...
    def close(self) -> None: ...
    def join(self, timeout: float = 10.0) -> None: ...

