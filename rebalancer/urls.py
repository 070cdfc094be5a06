"""Source URLs: the one parser of ``file://``, ``zk://`` and ``kafka://`` sources, and the one function that renders
any source string safely for messages.

Shapes::

    file://PATH
    zk://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][/chroot]
    kafka://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]

Rules (RFC 3986 where it has one):

- The scheme is case-insensitive (RFC 3986 section 3.1): ``ZK://`` and ``Kafka://`` are accepted and mean ``zk://``
  and ``kafka://``.
- The userinfo is everything between ``//`` and the LAST ``@``: passwords may hold ``@``, ``/``, ``?`` and ``#``
  unencoded, and a ``/`` before that ``@`` is part of the password, never the start of a chroot. The first ``:``
  splits user from password; both are percent-decoded (``%40`` is ``@``), and neither may be empty. Hence an ``@``
  in a chroot must be written ``%40`` (the chroot is percent-decoded too).
- Hosts are ``HOST:PORT`` with a port of 1-65535; an IPv6 address goes in brackets, ``[::1]:2181``.
- After the hosts: a chroot (``zk://`` only), no query (``?``) or fragment (``#``). Whitespace around the whole URL
  is ignored; whitespace or control characters anywhere after the userinfo are refused.

No message ever echoes a source as given. ``redact_url`` keeps the scheme, the user, the hosts and the path, writes
``***`` for a password and ``…`` for anything it cannot place (a malformed URL shows its scheme and no more);
``source_scheme`` and ``split_url`` say what is wrong with a source in those terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from .errors import InputError

__all__ = ["SCHEMES", "SourceUrl", "redact_url", "source_scheme", "split_url"]

# scheme -> the form shown when a source is unusable, and the name used in messages
SCHEMES = {
    "file": ("file://PATH", "file"),
    "zk": ("zk://HOST:PORT[,HOST:PORT...][/chroot]", "ZooKeeper"),
    "kafka": ("kafka://HOST:PORT[,HOST:PORT...]", "Kafka"),
}

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_HOSTNAME = re.compile(r"[^\s\x00-\x1f\x7f/?#@\[\],:]+")  # a DNS name (unicode allowed) or an IPv4 literal
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+(?:%[\w.-]+)?\]")
_USER = re.compile(r"[^\s\x00-\x1f\x7f/?#:@]+")
_PLAIN = re.compile(r"[^\s\x00-\x1f\x7f:@]{1,300}")  # scheme-less text with nowhere to hold a password
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class SourceUrl:
    """A parsed source. ``path`` is the chroot for ``zk`` (``""`` or ``/a/b``), the file for ``file``, ``""`` for
    ``kafka``; ``hosts`` are ``HOST:PORT`` strings (IPv6 in brackets). The password never shows in ``repr``."""

    scheme: str
    hosts: tuple[str, ...] = ()
    path: str = ""
    user: str | None = None
    password: str | None = field(default=None, repr=False)


def _split_host_port(entry: str) -> tuple[str, str | None]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``HOST`` -> (host, port or None); nothing validated."""
    if entry.startswith("[") and "]" in entry:
        end = entry.index("]") + 1
        host, after = entry[:end], entry[end:]
        if not after:
            return host, None
        return host, after[1:] if after.startswith(":") else after
    host, sep, port = entry.rpartition(":")
    return (host, port) if sep else (entry, None)


def _valid_host(host: str) -> bool:
    if _IPV6.fullmatch(host):
        return True
    if not _HOSTNAME.fullmatch(host) or len(host) > 253:
        return False
    try:  # what the resolver will be asked: DNS labels of 1-63 characters, IDNA-encodable
        host.encode("idna")
    except UnicodeError:
        return False
    return True


def _valid_port(port: str | None) -> bool:
    return port is not None and port.isascii() and port.isdigit() and 0 < int(port) < 65536


def _shown_entry(entry: str) -> str:
    """One host-list entry for a message: a host that is not a host name, or a port that is not a number, is ``…``
    (a password typed where a host belongs, ``user:secret`` without its ``@``, shows as ``user:…``)."""
    host, port = _split_host_port(entry)
    shown = host if _valid_host(host) else "…"
    if port is None:
        return shown
    return f"{shown}:{port if port.isascii() and port.isdigit() else '…'}"


def redact_url(text: str) -> str:
    """``text`` as it may appear in a message or a log: scheme, user, hosts and path, never a password.

    ``zk://ops:s3cret@h:2181/kafka`` -> ``zk://ops:***@h:2181/kafka``; ``zk:/ops:s3cret@h:1`` -> ``zk:…`` (not
    ``scheme://``: nothing after the scheme is shown); a query or fragment becomes ``?…``; text without a scheme is
    shown only when it has no ``:`` or ``@`` (a bare path or host name), else as ``…``. ``file://`` URLs carry no
    secrets and are shown whole (without control characters).
    """
    text = text.strip()
    m = _SCHEME.match(text)
    if m is None:
        return text if _PLAIN.fullmatch(text) else "…"
    scheme, rest = m.group(1).lower(), text[m.end():]
    if not rest.startswith("//"):
        return f"{scheme}:…"
    rest = rest[2:]
    if scheme == "file":
        return "file://" + _CONTROL.sub("?", rest)
    userinfo = ""
    if "@" in rest:
        cred, rest = rest.rsplit("@", 1)
        user, sep, _ = cred.partition(":")
        userinfo = f"{user if _USER.fullmatch(user) else '…'}:***@" if sep else "***@"
    cut = re.search(r"[?#]", rest)
    tail = "?…" if cut else ""
    if cut:
        rest = rest[: cut.start()]
    hosts, slash, path = rest.partition("/")
    shown_hosts = ",".join(_shown_entry(e) if e else "" for e in hosts.split(",")) if hosts else ""
    if path:
        path = path if scheme == "zk" and not _UNSAFE.search(path) else "…"
    return f"{scheme}://{userinfo}{shown_hosts}{slash}{path}{tail}"


def _expected(schemes: Sequence[str]) -> tuple[str, str]:
    """("file://, zk:// or kafka://", "file://PATH, zk://... or kafka://...") for messages."""

    def either(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]

    return either([f"{s}://" for s in schemes]), either([SCHEMES[s][0] for s in schemes])


def source_scheme(text: str, schemes: Sequence[str] = ("file", "zk", "kafka")) -> str:
    """The scheme of a source, lower-cased (``ZK://`` is ``zk``), if it is one of ``schemes`` and followed by ``//``.

    Otherwise ``InputError`` saying what is wrong, e.g. ``unknown source 'zk:…': 'zk:' must be followed by '//';
    expected file://PATH, ...``: callers dispatch on the returned scheme and never on the text themselves.
    """
    stripped = text.strip()
    names, forms = _expected(schemes)
    shown = redact_url(text)
    m = _SCHEME.match(stripped)
    if m is None:
        raise InputError(f"unknown source {shown!r}: no scheme; expected {forms}")
    scheme = m.group(1).lower()
    if scheme not in schemes:
        raise InputError(f"unknown source {shown!r}: scheme {m.group(1)!r} is not {names}; expected {forms}")
    if not stripped[m.end():].startswith("//"):
        raise InputError(f"unknown source {shown!r}: '{m.group(1)}:' must be followed by '//'; expected {forms}")
    return scheme


def split_url(text: str, schemes: Sequence[str] = ("file", "zk", "kafka")) -> SourceUrl:
    """Parse a source by the rules of the module doc; ``InputError`` (one line, no secret) names what is wrong."""
    scheme = source_scheme(text, schemes)
    rest = text.strip()[len(scheme) + 3:]
    if scheme == "file":
        if not rest:
            raise InputError("file:// names no file (expected file://PATH)")
        return SourceUrl("file", path=rest)
    form, name = SCHEMES[scheme]
    shown = redact_url(text)

    def bad(problem: str) -> InputError:
        return InputError(f"{name} URL {shown}: {problem}")

    user = password = None
    if "@" in rest:
        cred, rest = rest.rsplit("@", 1)
        raw_user, sep, raw_password = cred.partition(":")
        if not sep or not raw_user:
            raise bad(f"credentials must be USER:PASSWORD@ (expected {scheme}://USER:PASSWORD@HOST:PORT...)")
        if not raw_password:
            raise bad(f"the password of user {raw_user if _USER.fullmatch(raw_user) else '…'!r} is empty")
        user, password = unquote(raw_user), unquote(raw_password)
    if _UNSAFE.search(rest):
        raise bad("whitespace or a control character after the credentials")
    if re.search(r"[?#]", rest):
        raise bad("takes no query (?…) or fragment (#…)")
    hosts_text, slash, path = rest.partition("/")
    if not hosts_text:
        raise bad(f"names no host (expected {form})")
    hosts = tuple(_checked_entry(entry, bad) for entry in hosts_text.split(","))
    if scheme == "kafka":
        if path:
            raise bad(f"takes no path (expected {form})")
        return SourceUrl(scheme, hosts, "", user, password)
    segments = path.rstrip("/").split("/") if path.strip("/") else []
    if any(s in ("", ".", "..") for s in segments):
        raise bad("the chroot has an empty, '.' or '..' segment")
    chroot = "/" + unquote("/".join(segments)) if segments else ""
    return SourceUrl(scheme, hosts, chroot, user, password)


def _checked_entry(entry: str, bad: Callable[[str], InputError]) -> str:
    if not entry:
        raise bad("an empty host in the host list")
    host, port = _split_host_port(entry)
    shown = _shown_entry(entry)
    if host.startswith("["):
        if not _IPV6.fullmatch(host):
            raise bad(f"{shown!r} is not HOST:PORT (not an IPv6 address in brackets)")
    elif ":" in host:
        raise bad(f"{shown!r} is not HOST:PORT (an IPv6 address goes in brackets: [::1]:2181)")
    elif not _valid_host(host):
        raise bad(f"{shown!r} is not HOST:PORT (not a host name)")
    if port is None:
        raise bad(f"{shown!r} is not HOST:PORT (no port)")
    if not _valid_port(port):
        raise bad(f"{shown!r} is not HOST:PORT (the port must be a number 1-65535)")
    return f"{host}:{int(port)}"
