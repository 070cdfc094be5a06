"""ZooKeeper connection targets (``zk://`` URLs) and sessions with one-line errors.

``zk://HOST:PORT[,HOST:PORT...][/chroot]``; digest credentials come from ``zk://user:password@HOST...`` or the
``REBALANCER_ZK_AUTH=user:password`` environment variable, and are never printed (``ZkTarget.display`` masks them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import unquote

from .errors import InputError, SourceError

__all__ = ["ZkTarget", "parse_zk_url", "zk_session"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZkTarget:
    hosts: str
    chroot: str = ""
    auth: tuple[str, str] | None = None

    @property
    def connect_string(self) -> str:
        return self.hosts + self.chroot

    @property
    def display(self) -> str:
        """The URL without credentials, safe for logs and error messages."""
        return f"zk://{self.hosts}{self.chroot}"


def parse_zk_url(url: str) -> ZkTarget:
    if not url.startswith("zk://"):
        raise InputError(f"not a ZooKeeper URL (expected zk://HOST:PORT[/chroot]): {url!r}")
    rest = url[len("zk://") :]
    auth = None
    if "@" in rest.split("/", 1)[0]:
        cred, rest = rest.split("@", 1)
        user, sep, password = cred.partition(":")
        if not sep or not user:
            raise InputError("ZooKeeper URL credentials must be user:password@")
        auth = (unquote(user), unquote(password))
    hosts, slash, chroot = rest.partition("/")
    if not hosts:
        raise InputError("ZooKeeper URL names no host (expected zk://HOST:PORT[/chroot])")
    for hp in hosts.split(","):
        host, sep, port = hp.rpartition(":")
        if not sep or not host or not port.isdigit() or not (0 < int(port) < 65536):
            raise InputError(f"ZooKeeper URL: {hp!r} is not HOST:PORT")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    if auth is None and os.environ.get("REBALANCER_ZK_AUTH"):
        user, sep, password = os.environ["REBALANCER_ZK_AUTH"].partition(":")
        if not sep:
            raise InputError("REBALANCER_ZK_AUTH must be user:password")
        auth = (user, password)
    return ZkTarget(hosts=hosts, chroot=chroot, auth=auth)


@contextmanager
def zk_session(target: ZkTarget, *, timeout: float = 10.0, create_chroot: bool = False) -> Iterator[object]:
    """A started ``KazooClient`` rooted at the target's chroot; closed on exit.

    Connection timeouts and authentication failures become one-line ``SourceError``s.
    """
    from kazoo.client import KazooClient
    from kazoo.exceptions import AuthFailedError, KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    auth_data = [("digest", f"{target.auth[0]}:{target.auth[1]}")] if target.auth else None
    if create_chroot and target.chroot:
        with zk_session(ZkTarget(target.hosts, "", target.auth), timeout=timeout) as root:
            root.ensure_path(target.chroot)  # type: ignore[attr-defined]
    client = KazooClient(
        hosts=target.connect_string,
        timeout=timeout,
        auth_data=auth_data,
        connection_retry={"max_tries": 3, "delay": 0.2, "backoff": 2, "max_delay": 2},
        command_retry={"max_tries": 5, "delay": 0.2, "backoff": 2, "max_delay": 2},
        logger=logging.getLogger("kazoo.client"),
    )
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError:
        client.close()
        raise SourceError(f"cannot connect to ZooKeeper at {target.display} within {timeout:g} s") from None
    except AuthFailedError:
        client.close()
        raise SourceError(f"ZooKeeper at {target.display} rejected the digest credentials") from None
    except KazooException as exc:
        client.close()
        raise SourceError(f"ZooKeeper at {target.display}: {type(exc).__name__} {exc}") from None
    try:
        yield client
    finally:
        try:
            client.stop()
        finally:
            client.close()
