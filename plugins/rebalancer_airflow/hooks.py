"""Hooks for the cluster connections: they turn an Airflow connection into the library's source arguments.

``zookeeper_default`` (conn_type ``zookeeper``)
    host: ``host:port[,host:port]`` (or host + port), schema: the chroot without its leading slash (``kafka``),
    login/password: digest auth (optional), extra: ``{"sizes": "file:///path/log-dirs.json"}`` (ZooKeeper holds no
    partition sizes; optional), plus ``"capacity": "/path/capacity.json"`` (broker capacities in Cruise Control's
    format, for plans on load; optional). ``ZooKeeperHook.get_source()`` -> ``("zk://[user:pass@]hosts/chroot", sizes)``.

``kafka_default`` (conn_type ``kafka``)
    host: the bootstrap servers ``host:port[,host:port]`` (or host + port), login/password: SASL username/password,
    extra: kafka-python ``KafkaAdminClient`` security kwargs (``security_protocol``, ``sasl_mechanism``,
    ``ssl_cafile``, ...) and ``capacity`` as above. ``KafkaClusterHook.get_source()`` -> ``("kafka://bootstrap", kafka_config)``.

Secrets never reach a log line: the connection's password is masked by Airflow in task logs, and ``describe()``
gives the source without credentials. A connection that is missing or unusable is one ``InputError`` line naming the
connection and the field (the tasks turn library errors into a failed task with that line, not a traceback).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from airflow.sdk.bases.hook import BaseHook

from rebalancer.errors import InputError

__all__ = ["ZooKeeperHook", "KafkaClusterHook", "cluster_source"]

# kafka-python KafkaAdminClient security settings accepted from the connection's extra.
KAFKA_SECURITY_KEYS = frozenset({
    "security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_kerberos_name",
    "sasl_kerberos_service_name", "sasl_kerberos_domain_name", "sasl_oauth_token_provider", "ssl_context",
    "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_crlfile",
    "ssl_ciphers", "client_id", "request_timeout_ms", "api_version",
})


def _connection(hook: BaseHook, conn_id: str) -> Any:
    """The Airflow connection, or one line saying it is not defined."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return hook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise InputError(f"Airflow connection {conn_id!r} is not defined (Admin > Connections, or AIRFLOW_CONN_"
                         f"{conn_id.upper()})") from None


def _extra(conn: Any, conn_id: str) -> dict[str, Any]:
    """The connection's extra as a JSON object (Airflow gives {} for a broken one after logging: refuse it)."""
    raw = conn.extra
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise InputError(f"connection {conn_id!r}: extra is not valid JSON") from None
    if not isinstance(value, dict):
        raise InputError(f"connection {conn_id!r}: extra must be a JSON object, got {type(value).__name__}")
    return value


def _hosts(host: str | None, port: int | None, what: str, conn_id: str) -> str:
    text = (host or "").strip()
    if not text:
        raise InputError(f"connection {conn_id!r} names no {what} host (host: host:port[,host:port])")
    if port and "," not in text and ":" not in text:
        text = f"{text}:{port}"
    return text


class ZooKeeperHook(BaseHook):
    """A ZooKeeper-mode Kafka cluster's metadata store."""

    conn_name_attr = "zookeeper_conn_id"
    default_conn_name = "zookeeper_default"
    conn_type = "zookeeper"
    hook_name = "ZooKeeper (Kafka metadata)"

    def __init__(self, zookeeper_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.zookeeper_conn_id = zookeeper_conn_id

    def _parts(self) -> tuple[str, str, tuple[str, str] | None, dict[str, Any]]:
        conn = _connection(self, self.zookeeper_conn_id)
        hosts = _hosts(conn.host, conn.port, "ZooKeeper", self.zookeeper_conn_id)
        chroot = (conn.schema or "").strip("/")
        auth = (conn.login, conn.password or "") if conn.login else None
        extra = _extra(conn, self.zookeeper_conn_id)
        unknown = sorted(set(extra) - {"sizes", "capacity"})
        if unknown:
            raise InputError(f"connection {self.zookeeper_conn_id!r}: unknown extra key(s) {', '.join(unknown)} "
                             "(only 'sizes': file:///path/log-dirs.json, 'capacity': /path/capacity.json)")
        return hosts, chroot, auth, extra

    def get_source(self) -> tuple[str, str | None]:
        """``(zk URL with credentials, sizes URL or None)``: pass both to the library, never log the URL."""
        hosts, chroot, auth, extra = self._parts()
        cred = ""
        if auth:
            from airflow.sdk.log import mask_secret

            cred = f"{quote(auth[0], safe='')}:{quote(auth[1], safe='')}@"
            mask_secret(quote(auth[1], safe=""))  # Airflow masks the password as stored, not URL-quoted
        # The chroot is percent-encoded: rebalancer.urls reads an '@' or '%' in it as URL syntax otherwise.
        return f"zk://{cred}{hosts}{'/' + quote(chroot, safe='/') if chroot else ''}", extra.get("sizes")

    def capacity(self) -> str | None:
        """The connection's broker capacity file (Cruise Control's format, extra ``capacity``), if any."""
        value = self._parts()[3].get("capacity")
        return str(value) if value else None

    def describe(self) -> str:
        hosts, chroot, _auth, _extra = self._parts()
        return f"zk://{hosts}{'/' + chroot if chroot else ''}"


class KafkaClusterHook(BaseHook):
    """A Kafka cluster through its Admin API (bootstrap servers + kafka-python security settings)."""

    conn_name_attr = "kafka_conn_id"
    default_conn_name = "kafka_default"
    conn_type = "kafka"
    hook_name = "Kafka cluster (Admin API)"

    def __init__(self, kafka_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id

    def get_source(self) -> tuple[str, dict[str, Any]]:
        """``("kafka://bootstrap", kafka_config)``; login/password become the SASL username/password."""
        conn = _connection(self, self.kafka_conn_id)
        bootstrap = _hosts(conn.host, conn.port, "bootstrap", self.kafka_conn_id)
        extra = _extra(conn, self.kafka_conn_id)
        unknown = sorted(set(extra) - KAFKA_SECURITY_KEYS - {"bootstrap_servers", "capacity"})
        if unknown:
            raise InputError(f"connection {self.kafka_conn_id!r}: unknown extra key(s) {', '.join(unknown)} "
                             f"(kafka-python KafkaAdminClient settings: {', '.join(sorted(KAFKA_SECURITY_KEYS))})")
        config = {k: v for k, v in extra.items() if k in KAFKA_SECURITY_KEYS}
        if conn.login:
            config.setdefault("sasl_plain_username", conn.login)
        if conn.password:
            config.setdefault("sasl_plain_password", conn.password)
        return f"kafka://{extra.get('bootstrap_servers') or bootstrap}", config

    def capacity(self) -> str | None:
        """The connection's broker capacity file (Cruise Control's format, extra ``capacity``), if any."""
        value = _extra(_connection(self, self.kafka_conn_id), self.kafka_conn_id).get("capacity")
        return str(value) if value else None

    def describe(self) -> str:
        conn = _connection(self, self.kafka_conn_id)
        return f"kafka://{_hosts(conn.host, conn.port, 'bootstrap', self.kafka_conn_id)}"


def cluster_source(params: dict[str, Any]) -> dict[str, Any]:
    """The library arguments for the run's cluster, from the DAG params ``backend`` and the connection ids:
    ``{"source", "sizes", "kafka_config", "display", "capacity"}`` (capacity: the connection's capacity file)."""
    backend = params.get("backend") or "zookeeper"
    if backend == "zookeeper":
        zk_hook = ZooKeeperHook(params.get("zookeeper_conn_id") or ZooKeeperHook.default_conn_name)
        source, sizes = zk_hook.get_source()
        return {"source": source, "sizes": sizes, "kafka_config": None, "display": zk_hook.describe(),
                "capacity": zk_hook.capacity()}
    if backend == "kafka":
        k_hook = KafkaClusterHook(params.get("kafka_conn_id") or KafkaClusterHook.default_conn_name)
        source, config = k_hook.get_source()
        return {"source": source, "sizes": None, "kafka_config": config or None, "display": k_hook.describe(),
                "capacity": k_hook.capacity()}
    raise InputError(f"DAG param backend must be zookeeper or kafka, got {backend!r}")
