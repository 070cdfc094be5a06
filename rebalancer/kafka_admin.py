"""Kafka Admin-API connections (``kafka://`` sources) and reading a cluster through them.

``kafka://HOST:PORT[,HOST:PORT...]`` names bootstrap brokers (parsed by ``rebalancer.urls``: the scheme is
case-insensitive, IPv6 hosts go in brackets). Connection security comes from a client config, in this order (later
wins): the file named by ``REBALANCER_KAFKA_CONFIG``, the file given with ``--kafka-config``, a mapping passed by the
caller (the Airflow connection's extras), and SASL credentials in the URL (``kafka://user:password@HOST:PORT``, which
also default the protocol to ``SASL_PLAINTEXT``/``PLAIN``; the credentials end at the last ``@``, and are
percent-decoded).

A config file is either JSON of kafka-python keyword arguments or a Java/librdkafka client properties file::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="ops" \\
        password="...";
    ssl.ca.location=/etc/kafka/ca.pem

Properties follow Java's rules: a line ending in an unescaped backslash continues on the next (whose leading
whitespace is dropped), ``#`` and ``!`` start comments, ``key=value`` or ``key: value``, and backslash escapes
(``\\\\``, ``\\t``, ``\\uXXXX``) are decoded. ``sasl.jaas.config`` is ``LoginModule FLAG option=value ...;`` with
values quoted or not; its ``username`` and ``password`` options are used.

Secrets (passwords) are never printed: ``KafkaTarget.display``, ``repr`` and every error message leave them out; an
error about a config file names the line, and the key only when it is a property name, never a value.

Reading (``read_cluster``): Metadata gives live brokers with racks and every partition's replicas, leader and ISR
(brokers named in replica lists but absent from Metadata are dead); DescribeLogDirs asked of every live broker gives
replica sizes; ListPartitionReassignments gives what is in flight.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError, SourceError, TransientError
from .kafka_names import LOCK_TOPIC
from .model import Broker, Cluster, Partition, TopicPartition
from .urls import split_url

__all__ = ["KafkaTarget", "parse_kafka_url", "load_client_config", "admin_session", "read_cluster",
           "TransientKafkaError", "kafka_errors"]

log = logging.getLogger(__name__)

# kafka-python keyword arguments a config may set (anything else is refused, so a typo is not silently ignored).
CLIENT_KEYS = {
    "security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_kerberos_name",
    "sasl_kerberos_service_name", "sasl_kerberos_domain_name", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
    "ssl_password", "ssl_crlfile", "ssl_check_hostname", "client_id", "request_timeout_ms", "api_version",
}
SECRET_KEYS = {"sasl_plain_password", "ssl_password"}
# Java client / librdkafka property names -> kafka-python keyword arguments.
PROPERTY_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.cafile": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "client.id": "client_id",
    "request.timeout.ms": "request_timeout_ms",
}
PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
MECHANISMS = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"}
# sasl.jaas.config: "LoginModuleClass FLAG (option=value)* ;", values quoted (with backslash escapes) or bare.
_JAAS_HEAD = re.compile(r"\s*[A-Za-z_$][\w$.]*\s+(?:required|requisite|sufficient|optional)(?=\s|;|$)", re.I)
_JAAS_OPTION = re.compile(r'\s+([A-Za-z_][\w.-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";=]+)')
_JAAS_END = re.compile(r"\s*;?\s*")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")  # a key that may be named in an error (anything else might be a secret)
SASL_AUTHENTICATE_API_KEY = 36  # the Kafka protocol's SaslAuthenticate request: our credentials, awaiting an answer


class TransientKafkaError(TransientError):
    """The cluster could not be reached for a moment (connection lost, controller moving): worth retrying."""


@dataclass(frozen=True)
class KafkaTarget:
    bootstrap: tuple[str, ...]
    config: Mapping[str, Any] = field(default_factory=dict, repr=False)  # holds the password: never in a repr

    @property
    def display(self) -> str:
        """The bootstrap list with protocol and user, never a password: safe for logs and errors."""
        proto = self.config.get("security_protocol", "PLAINTEXT")
        user = self.config.get("sasl_plain_username")
        hosts = ",".join(self.bootstrap[:3]) + (f",+{len(self.bootstrap) - 3} more" if len(self.bootstrap) > 3 else "")
        return f"kafka://{hosts}" + (f" ({proto}" + (f", user {user})" if user else ")") if proto != "PLAINTEXT" else "")

    def client_kwargs(self) -> dict[str, Any]:
        return {"bootstrap_servers": list(self.bootstrap), **self.config}


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Java properties logical lines as (number of their first line, text), comments and blank lines left out.

    A line ending in an odd number of backslashes continues on the next one, whose leading whitespace is dropped;
    a comment line is never continued (Java's ``Properties.load``)."""
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(" \t\f")
            i += 1
        parts.append(line)
        yield number, "".join(parts)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(raw: str) -> str:
    """Java properties escapes: ``\\t \\n \\r \\f``, ``\\uXXXX``; a backslash before anything else stands for it."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", raw[i + 2:i + 6]):
                out.append(chr(int(raw[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _key_value(line: str) -> tuple[str, str] | None:
    """Split a logical line at its first unescaped ``=`` or ``:`` (whitespace around it allowed); None without one.
    Java also takes bare whitespace as the separator; refused here, so a stray secret on a line of its own is
    never read as a key (and named in an error)."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in " \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if not key or not rest or rest[0] not in "=:":
        return None
    return _unescape(key), _unescape(rest[1:].strip(" \t\f"))


def _jaas(value: str, where: str) -> dict[str, str]:
    """``username``/``password`` of a ``sasl.jaas.config`` value; ``InputError`` naming no value when malformed."""
    head = _JAAS_HEAD.match(value)
    if head is None:
        raise InputError(f"{where}: sasl.jaas.config is not 'LoginModuleClass required option=value ...;'")
    options: dict[str, str] = {}
    pos = head.end()
    while (m := _JAAS_OPTION.match(value, pos)) is not None:
        raw = m.group(2)
        options[m.group(1)] = re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"') else raw
        pos = m.end()
    if not _JAAS_END.fullmatch(value, pos):
        raise InputError(f"{where}: sasl.jaas.config: after the options (option=value or option=\"value\") only "
                         "';' may follow")
    out: dict[str, str] = {}
    if "username" in options:
        out["sasl_plain_username"] = options["username"]
    if "password" in options:
        out["sasl_plain_password"] = options["password"]
    return out


def _properties(text: str, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    previous = ""
    for n, line in _logical_lines(text):
        split = _key_value(line)
        if split is None:
            raise InputError(f"{where}:{n}: expected key=value")
        key, value = split
        if key == "sasl.jaas.config":
            out.update(_jaas(value, f"{where}:{n}"))
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = bool(value)
        elif key in ("ssl.truststore.location", "ssl.keystore.location"):
            raise InputError(f"{where}:{n}: {key} is a Java keystore; this client needs PEM files "
                             "(ssl.ca.location, ssl.certificate.location, ssl.key.location)")
        elif key in PROPERTY_KEYS:
            out[PROPERTY_KEYS[key]] = value
        elif key.replace(".", "_") in CLIENT_KEYS:
            out[key.replace(".", "_")] = value
        elif not _KEY.fullmatch(key):
            raise InputError(f"{where}:{n}: expected key=value (the key is not a property name)")
        else:
            hint = (" (a continuation of sasl.jaas.config? end the line before it with '\\')"
                    if previous == "sasl.jaas.config" and key in ("username", "password", "serviceName") else "")
            raise InputError(f"{where}:{n}: unknown Kafka client property {key!r}{hint}")
        previous = key
    return out


def load_client_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a client config file (JSON of kafka-python arguments, or Java/librdkafka properties)."""
    from .formats import loads_json, read_text

    p = Path(path)
    text = read_text(p)
    if text.lstrip().startswith("{"):
        doc = loads_json(text, str(p))
        if not isinstance(doc, dict):
            raise InputError(f"{p}: expected a JSON object of client settings")
        return dict(doc)
    return _properties(text, str(p))


def _checked(config: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key not in CLIENT_KEYS:
            named = repr(key) if isinstance(key, str) and _KEY.fullmatch(key) else "(not a setting name)"
            raise InputError(f"unknown Kafka client setting {named} (known: {', '.join(sorted(CLIENT_KEYS))})")
        if value is None or value == "":
            continue
        out[key] = value
    # A value that is not one of the allowed ones is never echoed: a password pasted into the wrong field would be.
    if "security_protocol" in out:
        out["security_protocol"] = str(out["security_protocol"]).upper()
        if out["security_protocol"] not in PROTOCOLS:
            raise InputError(f"security_protocol is not one of {', '.join(sorted(PROTOCOLS))} (the value is not shown)")
    if "sasl_mechanism" in out:
        out["sasl_mechanism"] = str(out["sasl_mechanism"]).upper()
        if out["sasl_mechanism"] not in MECHANISMS:
            raise InputError(f"sasl_mechanism is not one of {', '.join(sorted(MECHANISMS))} (the value is not shown)")
    if out.get("security_protocol", "PLAINTEXT").startswith("SASL") and "sasl_mechanism" not in out:
        out["sasl_mechanism"] = "PLAIN"
    if "sasl_mechanism" in out and not out.get("security_protocol", "").startswith("SASL"):
        raise InputError(f"sasl_mechanism is set but security_protocol is {out.get('security_protocol', 'PLAINTEXT')}:"
                         " use SASL_PLAINTEXT or SASL_SSL")
    if out.get("sasl_mechanism") in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
            out.get("sasl_plain_username") and "sasl_plain_password" in out):
        raise InputError(f"SASL {out['sasl_mechanism']} needs a username and password")
    for key, value in out.items():
        if key not in ("request_timeout_ms", "api_version", "ssl_check_hostname") and not isinstance(value, str):
            raise InputError(f"Kafka client setting {key} must be a string, not {type(value).__name__}")
    if "request_timeout_ms" in out:
        value = out["request_timeout_ms"]
        try:
            out["request_timeout_ms"] = int(value) if not isinstance(value, bool) else -1
        except (TypeError, ValueError):
            out["request_timeout_ms"] = -1
        if not 1 <= out["request_timeout_ms"] <= 3_600_000:
            raise InputError("request_timeout_ms must be an integer of milliseconds from 1 to 3600000")
    if "api_version" in out:
        out["api_version"] = _api_version(out["api_version"])
    if "ssl_check_hostname" in out and isinstance(out["ssl_check_hostname"], str):
        out["ssl_check_hostname"] = out["ssl_check_hostname"].lower() not in ("false", "0", "no", "")
    for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_crlfile"):
        if key in out and not Path(out[key]).is_file():
            raise InputError(f"{key}: no such file {out[key]}")
    return out


def _api_version(value: Any) -> tuple[int, ...]:
    """A broker version pin, as kafka-python takes it: "3.9" or [3, 9] -> (3, 9)."""
    parts = value.split(".") if isinstance(value, str) else value
    try:
        version = tuple(int(v) for v in parts) if isinstance(parts, (list, tuple)) else ()
    except (TypeError, ValueError):
        version = ()
    if not 2 <= len(version) <= 3 or any(v < 0 or v > 1000 for v in version):
        raise InputError("api_version must be a broker version such as \"3.9\" or [3, 9]")
    return version


def parse_kafka_url(url: str, *, config_file: str | None = None,
                    config: Mapping[str, Any] | None = None) -> KafkaTarget:
    """Parse ``kafka://[user:password@]HOST:PORT[,HOST:PORT]`` and merge the client config (see the module doc)."""
    u = split_url(url, ("kafka",))
    merged: dict[str, Any] = {}
    for path in (os.environ.get("REBALANCER_KAFKA_CONFIG"), config_file):
        if path:
            merged.update(load_client_config(path))
    merged.update(config or {})
    if u.user is not None:
        merged["sasl_plain_username"], merged["sasl_plain_password"] = u.user, u.password
        merged.setdefault("security_protocol", "SASL_PLAINTEXT")
    return KafkaTarget(bootstrap=u.hosts, config=_checked(merged))


def kafka_errors() -> tuple[type[BaseException], ...]:
    """kafka-python's errors that mean "not reachable right now" rather than "refused"."""
    import kafka.errors as ke

    # UnknownBrokerIdError: a broker that came back is not in the cached metadata yet.
    return (ke.KafkaConnectionError, ke.RetriableError, ke.NodeNotReadyError, ke.UnknownBrokerIdError)


class _Seen(logging.Handler):
    """What kafka-python logged while connecting (collected, never printed), read for one question: did a broker
    turn the SASL credentials down?

    Two kinds of evidence count: a ``SaslAuthenticationFailedError`` (the broker's answer), and a broker closing
    the connection while our SaslAuthenticate request, the credentials, awaited its answer. The second is needed
    because a broker that closes right after answering races kafka-python (3.0.12 drops bytes received together
    with the end of the stream), so whether the answer was read at all depends on timing. Kafka itself delays the
    close (``connection.failed.authentication.delay.ms``, 100 ms by default) for that reason; the simulated broker
    does not. Either way the wrong password is reported as rejected, whether it came from the URL or a file."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.rejected = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a log record that cannot be formatted is no evidence
            return
        self.messages.append(text)
        if "SaslAuthenticationFailed" in text or self._closed_on_credentials(record):
            self.rejected = True

    @staticmethod
    def _closed_on_credentials(record: logging.LogRecord) -> bool:
        import kafka.errors as ke

        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) < 2 or not isinstance(args[1], ke.KafkaConnectionError):
            return False  # only a connection the broker ended, not a timeout of ours
        pending = getattr(getattr(args[0], "parser", None), "in_flight_requests", None) or ()
        return any(getattr(header, "request_api_key", getattr(header, "api_key", None)) == SASL_AUTHENTICATE_API_KEY
                   for header in pending)


@contextmanager
def _seen_errors() -> Iterator[_Seen]:
    """Collect kafka-python's log messages (without printing them) while connecting."""
    logger = logging.getLogger("kafka")
    handler = _Seen()
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@contextmanager
def admin_session(target: KafkaTarget, *, timeout: float = 10.0) -> Iterator[Any]:
    """A connected ``KafkaAdminClient``; connection and authentication failures become one-line ``SourceError``s."""
    import kafka.errors as ke

    from kafka import KafkaAdminClient

    kwargs = target.client_kwargs()
    kwargs.setdefault("request_timeout_ms", max(int(timeout * 1000), 1000))
    kwargs.setdefault("client_id", "kafka-rebalancer")
    rejected = SourceError(f"Kafka at {target.display} rejected the SASL credentials")
    try:
        with _seen_errors() as seen:
            client = KafkaAdminClient(**kwargs, bootstrap_timeout_ms=int(timeout * 1000))
    except (ke.KafkaTimeoutError, ke.KafkaConnectionError):
        # kafka-python retries a failed SASL authentication until the bootstrap times out: say which it was.
        if seen.rejected and str(target.config.get("security_protocol", "")).startswith("SASL"):
            raise rejected from None
        raise SourceError(f"cannot connect to Kafka at {target.display} within {timeout:g} s") from None
    except ke.SaslAuthenticationFailedError:
        raise rejected from None
    except ke.AuthorizationError as exc:
        raise SourceError(f"Kafka at {target.display} denied access ({type(exc).__name__})") from None
    except ke.KafkaConfigurationError as exc:
        raise InputError(f"Kafka client config for {target.display}: {exc}") from None
    except ke.KafkaError as exc:
        raise SourceError(f"Kafka at {target.display}: {type(exc).__name__} {exc}") from None
    try:
        yield client
    finally:
        client.close()


# -- reading a cluster ---------------------------------------------------------------------------------------------
def metadata(admin: Any, topics: list[str] | None = None) -> dict[str, Any]:
    """The Metadata response as a dict (brokers, controller_id, cluster_id, topics).

    A broker still starting (ZooKeeper mode, before the controller's first UpdateMetadata reached it) answers with
    no brokers at all: that answer says nothing about the cluster, so it is raised as "not reachable right now" for
    the caller to retry, as Kafka's own clients ignore it (read as it was, every broker looked down, and a throttle
    release took an unread broker's rate for someone else's and left it)."""
    import kafka.errors as ke

    found: dict[str, Any] = admin._manager.run(admin._get_cluster_metadata, topics)  # describe_* takes two calls
    if not found.get("brokers"):
        raise ke.KafkaConnectionError("a broker still starting answered Metadata with no brokers")
    return found


def metadata_seen_by(admin: Any, broker: int, topics: list[str] | None) -> dict[str, Any]:
    """The Metadata response of one broker (its own metadata cache, which learns of a new topic or a finished move a
    moment after the controller): what a client that happens to ask this broker sees."""
    from kafka.protocol.metadata import MetadataRequest

    async def ask() -> Any:
        request = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                                      for t in topics],
                                  allow_auto_topic_creation=False)
        return await admin._manager.send(request, node_id=broker)

    return dict(admin._manager.run(ask).to_dict())


def describe_configs(admin: Any, resources: list[Any], config_filter: str = "modified", *,
                     broker: int | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """DescribeConfigs of ``resources`` (kafka-python ``ConfigResource``s), as kafka-python's ``describe_configs``
    answers (resource type -> name -> config -> entry), asked as it asks them (a broker's own config of that
    broker, the rest of any one), or all of ``broker`` (its own view: ``configs_seen_by``). Unlike it, a resource
    Kafka answers with an error raises that error (``kafka.errors``): kafka-python reads such a result as a
    resource with no configs, and a throttle whose config could not be read would look removed. A topic that no
    longer exists (deleted meanwhile) is the one error read as having no configs."""
    import kafka.errors as ke
    from kafka.admin import ConfigResourceType

    async def ask() -> list[Any]:
        if broker is not None:
            groups: list[tuple[int | None, list[Any]]] = [(broker, resources)]
        else:
            by_broker, other = admin._group_config_resources(resources)
            groups = [*by_broker.items(), *([(None, other)] if other else [])]
        return [await admin._manager.send(admin._describe_configs_request(group, False), node_id=node)
                for node, group in groups]

    responses = admin._manager.run(ask) if resources else []
    for response in responses:
        for result in response.results:
            gone = (result.error_code == ke.UnknownTopicOrPartitionError.errno
                    and result.resource_type == ConfigResourceType.TOPIC.value)
            if result.error_code and not gone:
                raise ke.for_code(result.error_code)(
                    f"describing the config of {ConfigResourceType(result.resource_type).name.lower()} "
                    f"{result.resource_name!r}: {result.error_message or 'no message'}")
    return dict(admin._describe_configs_process_responses(responses, config_filter))


def configs_seen_by(admin: Any, broker: int, resources: list[Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """DescribeConfigs of ``resources`` (kafka-python ``ConfigResource``s) asked of one broker: its own view, which
    lags a change made elsewhere until its metadata (KRaft) or its ZooKeeper notification catches up. Broker
    resources other than the broker itself are not allowed (a broker describes only its own config: Kafka's
    error is raised, ``describe_configs``)."""
    return describe_configs(admin, resources, broker=broker)


def partitions_of(meta: Mapping[str, Any], ongoing: Mapping[TopicPartition, Mapping[str, list[int]]],
                  sizes: Mapping[TopicPartition, Mapping[int, int]] | None = None,
                  wanted: set[TopicPartition] | None = None) -> list[Partition]:
    out = []
    for t in meta["topics"]:
        if t.get("error_code") or t["name"] == LOCK_TOPIC:  # the cluster lock is not data
            continue
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            if wanted is not None and tp not in wanted:
                continue
            replicas = tuple(p["replica_nodes"])
            leader = p["leader_id"] if p["leader_id"] in replicas else None
            per = (sizes or {}).get(tp) or {}
            size = per[leader] if leader is not None and leader in per else (max(per.values()) if per else 0)
            flight = ongoing.get(tp) or {}
            out.append(Partition(tp[0], tp[1], replicas, leader, tuple(b for b in p["isr_nodes"] if b in replicas),
                                 int(size), adding=tuple(flight.get("adding_replicas", ())),
                                 removing=tuple(flight.get("removing_replicas", ()))))
    return out


def log_dir_sizes(admin: Any, brokers: list[int], topic_partitions: Mapping[str, list[int]] | None = None,
                  totals: dict[int, int] | None = None) -> dict[TopicPartition, dict[int, int]]:
    """Bytes per replica from DescribeLogDirs on every live broker (future replicas of a log-dir move excluded);
    of ``topic_partitions`` ({topic: [partition]}) only, when given. ``totals``, when given, receives each broker's
    disk size (its log directories' total bytes, which brokers report since Kafka 3.3; absent when unknown)."""
    sizes: dict[TopicPartition, dict[int, int]] = {}
    for entry in admin.describe_log_dirs(topic_partitions=dict(topic_partitions) if topic_partitions else None,
                                         brokers=brokers):
        disk = 0
        for d in entry["log_dirs"]:
            if d.get("error_code"):
                continue
            disk += max(0, int(d.get("total_bytes", -1) or -1))
            for t in d["topics"]:
                for p in t["partitions"]:
                    if p.get("is_future_key"):
                        continue
                    per = sizes.setdefault((t["name"], p["partition_index"]), {})
                    per[entry["broker"]] = max(per.get(entry["broker"], 0), int(p["partition_size"]))
        if totals is not None and disk > 0:
            totals[entry["broker"]] = disk
    return sizes


TOPIC_SETTINGS = ("retention.ms", "min.insync.replicas")  # what a snapshot reads of each topic's config


def topic_settings(admin: Any, topics: list[str]) -> dict[str, dict[str, int]]:
    """Each topic's effective ``TOPIC_SETTINGS`` (its own, else the one its brokers give it), from DescribeConfigs:
    setting -> topic -> value (``retention.ms`` -1: kept for ever); a topic not described (deleted meanwhile) is
    left out, and its readers use Kafka's defaults."""
    from kafka.admin import ConfigResource, ConfigResourceType

    out: dict[str, dict[str, int]] = {key: {} for key in TOPIC_SETTINGS}
    if not topics:
        return out
    res = describe_configs(admin, [ConfigResource(ConfigResourceType.TOPIC, t, configs=dict.fromkeys(TOPIC_SETTINGS))
                                   for t in topics], config_filter="all")
    for by_name in res.values():
        for name, entries in by_name.items():
            for key in TOPIC_SETTINGS:
                value = (entries.get(key) or {}).get("value")
                if value is None:
                    continue  # not described (a topic deleted meanwhile)
                try:
                    out[key][name] = int(value)
                except (TypeError, ValueError):
                    continue  # not a number: its readers use Kafka's default
    return out


def in_flight(admin: Any) -> dict[TopicPartition, dict[str, list[int]]]:
    return {(tp.topic, tp.partition): v for tp, v in admin.list_partition_reassignments().items()}


def read_cluster(admin: Any, *, display: str, with_sizes: bool = True, raw: bool = False) -> Cluster:
    """Brokers (racks), partitions (replicas, leader, ISR), sizes and in-flight reassignments via the Admin API.

    kafka-python's errors become one-line ``SourceError``s, unless ``raw`` (the caller handles and retries them)."""
    import kafka.errors as ke

    try:
        meta = metadata(admin)
        live = sorted(b["node_id"] for b in meta["brokers"])
        disks: dict[int, int] = {}
        sizes = log_dir_sizes(admin, live, totals=disks) if with_sizes else None
        ongoing = in_flight(admin)
        topics = sorted(t["name"] for t in meta["topics"] if not t.get("error_code") and t["name"] != LOCK_TOPIC)
        settings = topic_settings(admin, topics) if with_sizes else {}
    except kafka_errors() as exc:
        if raw:
            raise
        raise TransientKafkaError(f"Kafka at {display}: {type(exc).__name__} while reading the cluster") from None
    except ke.AuthorizationError as exc:
        if raw:
            raise
        raise SourceError(f"Kafka at {display} denied describing the cluster ({type(exc).__name__})") from None
    except ke.KafkaError as exc:
        if raw:
            raise
        raise SourceError(f"Kafka at {display}: {type(exc).__name__} while reading the cluster") from None
    brokers = {b["node_id"]: Broker(id=b["node_id"], rack=b.get("rack") or None, alive=True, host=b.get("host") or None,
                                    port=b.get("port") or None, disk_capacity_bytes=disks.get(b["node_id"]))
               for b in meta["brokers"]}
    parts = partitions_of(meta, ongoing, sizes)
    for p in parts:
        for b in p.replicas:
            if b not in brokers:
                brokers[b] = Broker(id=b, alive=False)
    meta_out: dict[str, Any] = {"source": display, "taken_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "sizes_known": bool(with_sizes), "cluster_id": meta.get("cluster_id"),
                                "controller_id": meta.get("controller_id")}
    # effective values: Kafka resolves topic, broker and default
    if settings.get("retention.ms"):
        meta_out["topic_retention_ms"] = settings["retention.ms"]
    if settings.get("min.insync.replicas"):
        meta_out["topic_min_insync_replicas"] = settings["min.insync.replicas"]
    if ongoing:
        meta_out["reassignment_in_progress"] = [
            {"topic": t, "partition": p, "replicas": [b for b in v["replicas"] if b not in v["removing_replicas"]]}
            for (t, p), v in sorted(ongoing.items())]
    return Cluster.build(sorted(brokers.values(), key=lambda b: b.id), parts, meta_out)
