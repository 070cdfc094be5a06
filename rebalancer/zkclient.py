"""ZooKeeper connection targets (``zk://`` URLs) and sessions with one-line errors.

``zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/chroot]`` (parsed by ``rebalancer.urls``: the scheme is
case-insensitive, the credentials end at the last ``@``); digest credentials come from the URL or the
``REBALANCER_ZK_AUTH=user:password`` environment variable, and are never printed (``ZkTarget.display`` and ``repr``
leave them out).

``zk_session`` turns every way of failing to get a usable session into one ``SourceError`` and prints nothing:
unreachable, credentials rejected, the chroot denied (a digest ACL and missing or wrong credentials), and with
``expect_kafka=True`` a chroot that holds no Kafka cluster. kazoo's own start-up warning ("No chroot path exists")
is never raised, and a client whose start failed is stopped before it is closed (kazoo refuses to close a running
connection: "Cannot close connection until it is stopped").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError, SourceError
from .urls import split_url

__all__ = ["ZkTarget", "parse_zk_url", "zk_session"]

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"


@dataclass(frozen=True)
class ZkTarget:
    hosts: str
    chroot: str = ""
    auth: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def connect_string(self) -> str:
        return self.hosts + self.chroot

    @property
    def display(self) -> str:
        """The URL without credentials, safe for logs and error messages."""
        return f"zk://{self.hosts}{self.chroot}"


def parse_zk_url(url: str) -> ZkTarget:
    """``zk://[USER:PASSWORD@]HOST:PORT[,...][/chroot]`` -> ``ZkTarget``; ``InputError`` (never echoing a password)."""
    u = split_url(url, ("zk",))
    auth = (u.user, u.password) if u.user is not None and u.password is not None else None
    if auth is None and os.environ.get("REBALANCER_ZK_AUTH"):
        user, sep, password = os.environ["REBALANCER_ZK_AUTH"].partition(":")
        if not sep or not user or not password:
            raise InputError("REBALANCER_ZK_AUTH must be user:password")
        auth = (user, password)
    return ZkTarget(hosts=",".join(u.hosts), chroot=u.path, auth=auth)


def _denied(target: ZkTarget, what: str) -> SourceError:
    how = (f"the given credentials (user {target.auth[0]!r})" if target.auth
           else "no credentials (use zk://USER:PASSWORD@HOST... or REBALANCER_ZK_AUTH)")
    return SourceError(f"ZooKeeper at {target.display} denied access to {what} with {how}")


def _shutdown(client: Any) -> None:
    """Stop, then close (in that order: kazoo refuses to close a connection that was never stopped); a failure here
    must not hide the error that got us here, so it is only logged."""
    try:
        client.stop()
    except Exception as exc:  # noqa: BLE001 - best effort: the session is being abandoned
        log.debug("stopping the ZooKeeper client: %s: %s", type(exc).__name__, exc)
    try:
        client.close()
    except Exception as exc:  # noqa: BLE001
        log.debug("closing the ZooKeeper client: %s: %s", type(exc).__name__, exc)


def _start(client: Any, target: ZkTarget, timeout: float) -> None:
    """Connect, as ``KazooClient.start`` does without its chroot check (whose warning would print and whose
    ``NoAuthError`` would escape a started client)."""
    from kazoo.protocol.states import KeeperState

    client.start_async().wait(timeout=timeout)
    if client.connected:
        return
    if client.client_state == KeeperState.AUTH_FAILED:
        raise SourceError(f"ZooKeeper at {target.display} rejected the credentials"
                          + (f" of user {target.auth[0]!r}" if target.auth else ""))
    raise SourceError(f"cannot connect to ZooKeeper at {target.display} within {timeout:g} s")


def _check(client: Any, target: ZkTarget, expect_kafka: bool) -> None:
    """The chroot is readable and, with ``expect_kafka``, holds a Kafka cluster (a readable ``/brokers/ids``)."""
    from kazoo.exceptions import KazooException, NoAuthError, NoNodeError

    no_kafka = SourceError(f"no Kafka metadata at {target.display} (no {BROKER_IDS}): wrong chroot?")
    try:
        if target.chroot and not client.exists("/"):
            if expect_kafka:
                raise no_kafka
            return
        if expect_kafka:
            client.get_children(BROKER_IDS)
    except NoAuthError:
        raise _denied(target, "the Kafka metadata" if expect_kafka else f"the chroot {target.chroot}") from None
    except NoNodeError:
        raise no_kafka from None
    except KazooException as exc:
        raise SourceError(f"ZooKeeper at {target.display}: {type(exc).__name__} while opening the session") from None


@contextmanager
def zk_session(target: ZkTarget, *, timeout: float = 10.0, create_chroot: bool = False,
               expect_kafka: bool = False) -> Iterator[Any]:
    """A started ``KazooClient`` rooted at the target's chroot; stopped and closed on exit.

    ``create_chroot`` creates the chroot first (the simulator's own ZooKeeper); ``expect_kafka`` requires a Kafka
    cluster there (``/brokers/ids``), so a wrong chroot is one error here rather than empty answers later. Every
    failure to open the session is one ``SourceError``, nothing is printed, and no kazoo thread outlives it.
    """
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, NoAuthError

    if create_chroot and target.chroot:
        with zk_session(ZkTarget(target.hosts, "", target.auth), timeout=timeout) as root:
            try:
                root.ensure_path(target.chroot)
            except NoAuthError:
                raise _denied(target, f"creating {target.chroot}") from None
            except KazooException as exc:
                raise SourceError(f"ZooKeeper at {target.display}: {type(exc).__name__} creating the chroot") from None
    auth_data = [("digest", f"{target.auth[0]}:{target.auth[1]}")] if target.auth else None
    try:
        client = KazooClient(
            hosts=target.connect_string,
            timeout=timeout,
            auth_data=auth_data,
            connection_retry={"max_tries": 3, "delay": 0.2, "backoff": 2, "max_delay": 2},
            command_retry={"max_tries": 5, "delay": 0.2, "backoff": 2, "max_delay": 2},
            logger=logging.getLogger("kazoo.client"),
        )
    except (ValueError, KazooException) as exc:
        raise InputError(f"ZooKeeper URL {target.display}: {exc}") from None
    try:
        _start(client, target, timeout)
        _check(client, target, expect_kafka)
    except BaseException:
        _shutdown(client)
        raise
    try:
        yield client
    finally:
        _shutdown(client)
