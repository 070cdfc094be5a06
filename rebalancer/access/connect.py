"""The one registry of execution backends: ``open_backend`` picks the implementation of the ``Backend`` contract
(``access.backend``) by the source URL's scheme (``rebalancer.urls.source_scheme``), through ``BACKENDS`` only:

    zk://     ``ZkBackend``     what ``kafka-reassign-partitions --zookeeper`` does (ZooKeeper-mode clusters)
    kafka://  ``AdminBackend``  the Admin API (KIP-455), any cluster since Kafka 2.4, the only way into KRaft

Above the backends and the contract: they never import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from ..errors import InputError
from .backend import Backend

__all__ = ["BACKENDS", "open_backend"]


Opener = Callable[..., AbstractContextManager[Backend]]


def _zookeeper(source: str, *, timeout: float, **_kafka: Any) -> AbstractContextManager[Backend]:
    from .zk_backend import ZkBackend

    return ZkBackend.open(source, timeout=timeout)


def _kafka(source: str, *, timeout: float, kafka_config: Mapping[str, Any] | None = None,
           kafka_config_file: str | None = None) -> AbstractContextManager[Backend]:
    from .admin_backend import AdminBackend

    return AdminBackend.open(source, timeout=timeout, kafka_config=kafka_config, kafka_config_file=kafka_config_file)


# URL scheme -> a context manager opening that backend (the one place a scheme picks an implementation).
BACKENDS: dict[str, Opener] = {"zk": _zookeeper, "kafka": _kafka}


@contextmanager
def open_backend(source: str, timeout: float = 10.0, *, kafka_config: Mapping[str, Any] | None = None,
                 kafka_config_file: str | None = None) -> Iterator[Backend]:
    """The backend for a source URL (``zk://`` or ``kafka://``), connected; closed on exit."""
    from ..urls import source_scheme

    scheme = source_scheme(source, tuple(BACKENDS))  # one line saying what is wrong, never echoing a password
    opener = BACKENDS.get(scheme)
    if opener is None:  # pragma: no cover - source_scheme admits only registered schemes
        raise InputError(f"no execution backend for {scheme}://")
    with opener(source, timeout=timeout, kafka_config=kafka_config, kafka_config_file=kafka_config_file) as backend:
        yield backend
