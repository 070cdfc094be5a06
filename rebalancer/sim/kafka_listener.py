"""The simulated brokers' Kafka wire protocol: what an Admin client needs, served from the simulated cluster's state.

Every live broker of a ``SimulatedCluster`` has a ``BrokerListener`` (a TCP server socket, one thread per client
connection) whose ``KafkaApis`` answers as a Kafka 3.9 broker in ZooKeeper mode does. kafka-python's generated
message classes (the same ones its ``KafkaAdminClient`` sends) decode each request and encode each response.

Served, with the versions a Kafka 3.9 ZooKeeper-mode broker advertises:

    ApiVersions 0-4, Metadata 0-12, CreateTopics 0-7, DeleteTopics 0-6, DescribeCluster 0-1, DescribeConfigs 0-4,
    IncrementalAlterConfigs 0-1, AlterPartitionReassignments 0, ListPartitionReassignments 0, ElectLeaders 0-2,
    DescribeLogDirs 0-4

What Kafka does, and so do these brokers:

- Frames are an int32 size and a request; a frame over ``socket.request.max.bytes`` (100 MiB), an unknown API or an
  unsupported version closes the connection. An ApiVersions request newer than v4 gets a v0 response with
  UNSUPPORTED_VERSION listing the ApiVersions versions, and the client retries with one of them (KIP-511).
- Metadata and DescribeCluster list the live brokers; the controller is the lowest live broker id. A partition
  reports every replica (adding ones included during a reassignment), the ISR, the replicas on dead brokers as
  offline, and LEADER_NOT_AVAILABLE with leader -1 when no live broker leads it. Topics carry their ids. As in
  Kafka's ZooKeeper-mode metadata cache, a topic whose deletion has started is no longer listed, nor a partition
  that never had a leader.
- CreateTopics and DeleteTopics are the controller's (NOT_CONTROLLER elsewhere) and go through ZooKeeper as Kafka's
  ``ZkAdminManager`` and ``AdminZkClient`` do: a create checks the topic (in this order: listed in metadata ->
  TOPIC_ALREADY_EXISTS; null config values -> INVALID_CONFIG; partitions or replication factor together with an
  assignment -> INVALID_REQUEST; partitions < 1 -> INVALID_PARTITIONS; replication factor < 1 or over the live
  brokers -> INVALID_REPLICATION_FACTOR; a name outside ``[a-zA-Z0-9._-]{1,249}`` or ``.``/``..`` ->
  INVALID_TOPIC_EXCEPTION; marked for deletion or present in ZooKeeper -> TOPIC_ALREADY_EXISTS; a '.'/'_' collision
  -> INVALID_TOPIC_EXCEPTION; partitions of different sizes, duplicate brokers, partitions not 0..n-1 ->
  INVALID_REPLICA_ASSIGNMENT; an unknown topic config name -> INVALID_CONFIG), then writes ``/config/topics/<t>`` and
  ``/brokers/topics/<t>`` with a fresh topic id, and answers when every partition has a leader (REQUEST_TIMED_OUT
  after ``timeout_ms``). An explicit assignment's brokers are not checked (Kafka 3.9 does not): a partition on unknown
  or dead brokers only gets no leader. Without an assignment, ``num.partitions`` and ``default.replication.factor``
  are 1 and replicas are placed round-robin over the live brokers in id order, the first partition's leader on the
  lowest (Kafka's rack-unaware placement with a fixed start; Kafka starts at random and spreads racks). Responses
  report the topic id (v7), the partition count, replication factor and every topic config (v5+). A delete (by name,
  or by id in v6: UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID) creates ``/admin/delete_topics/<t>`` and answers
  when the topic has left the metadata (REQUEST_TIMED_OUT after ``timeout_ms``), as Kafka's delayed delete does.
- DescribeLogDirs and broker DescribeConfigs/IncrementalAlterConfigs answer for the receiving broker only (a broker
  config resource names that broker, or is empty for the cluster-wide default). Log dirs hold the bytes each
  replica has copied; the offset lag is given in bytes still to copy.
- IncrementalAlterConfigs writes ``/config/<brokers|topics>/<name>`` and a ``/config/changes`` notification, as
  Kafka's ZooKeeper admin manager does; the controller applies throttles when it sees the notification.
  DescribeConfigs reports the dynamic configs in ZooKeeper, and the replication throttle keys at their Kafka
  defaults when unset (kafka-python only alters keys a describe returned).
- AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders are the controller's: another broker
  answers NOT_CONTROLLER, and the client asks Metadata for the controller and retries.

- SASL/PLAIN when the cluster is given SASL users (``SimulatedCluster(sasl_users={user: password})``, i.e. a
  SASL_PLAINTEXT listener): only ApiVersions, SaslHandshake (v1) and SaslAuthenticate are answered before a
  successful authentication; anything else, or a failed authentication (answered first), closes the connection.

Advertised (ApiVersions) is the whole table of a Kafka 3.9 ZooKeeper-mode broker, because clients infer the
broker's version from it; a request for an advertised API that is not served closes the connection.

Not served: produce/fetch, groups, ACLs, CreatePartitions, unclean leader election, TLS, SASL mechanisms other than
PLAIN, request quotas (``throttle_time_ms`` is always 0), broker configs other than the dynamic ones, create-topic
policies, checks of topic config values other than the throttled replica lists.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import kafka.errors as Errors
from kafka.admin import ACLOperation, AlterConfigOp, ConfigResourceType, ConfigSourceType, ConfigType
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from .. import kafka_zk as kz
from ..errors import SourceError
from ..kafka_names import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS, new_topic_id
from ..model import TopicPartition
from .common import LISTEN_HOST, ApiError, delete_topic_path

if TYPE_CHECKING:
    from .controller import SimulatedCluster

__all__ = ["BrokerListener", "KafkaApis", "serve", "APIS", "SUPPORTED_VERSIONS", "KAFKA_ZK_BROKER_VERSIONS", "SASL_VERSIONS",
           "MAX_FRAME_BYTES"]

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 104_857_600  # Kafka's socket.request.max.bytes default

# API key -> (min, max) version, as a Kafka 3.9 broker in ZooKeeper mode advertises them.
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiVersionsRequest.API_KEY: (0, 4),
    MetadataRequest.API_KEY: (0, 12),
    CreateTopicsRequest.API_KEY: (0, 7),
    DeleteTopicsRequest.API_KEY: (0, 6),
    DescribeClusterRequest.API_KEY: (0, 1),
    DescribeConfigsRequest.API_KEY: (0, 4),
    IncrementalAlterConfigsRequest.API_KEY: (0, 1),
    AlterPartitionReassignmentsRequest.API_KEY: (0, 0),
    ListPartitionReassignmentsRequest.API_KEY: (0, 0),
    ElectLeadersRequest.API_KEY: (0, 2),
    DescribeLogDirsRequest.API_KEY: (0, 4),
}
# Served by a SASL listener only (the cluster has SASL users); SaslHandshake v0 (unframed tokens) closes.
SASL_VERSIONS: dict[int, tuple[int, int]] = {
    SaslHandshakeRequest.API_KEY: (0, 1),
    SaslAuthenticateRequest.API_KEY: (0, 2),
}
SASL_APIS = {ApiVersionsRequest.API_KEY, *SASL_VERSIONS}
# Everything a Kafka 3.9 broker in ZooKeeper mode advertises (kafka-python's record of it), the served APIs at the
# versions above. Clients infer the broker's version from this table (kafka-python: Fetch v17 means 3.9, and below
# 2.4 it refuses a CreateTopics with an explicit assignment), so the simulated brokers advertise all of it, as a real
# one does, and close the connection on a request they do not serve. The SASL APIs only on a SASL listener.
KAFKA_ZK_BROKER_VERSIONS: dict[int, tuple[int, int]] = {
    k: v for k, v in BROKER_API_VERSIONS[(3, 9)].items() if k not in SASL_VERSIONS}

# With no authorizer, Kafka reports every operation a resource type supports as authorized.
TOPIC_OPERATIONS: set[int] = {ACLOperation.READ, ACLOperation.WRITE, ACLOperation.CREATE, ACLOperation.DELETE,
                    ACLOperation.ALTER, ACLOperation.DESCRIBE, ACLOperation.DESCRIBE_CONFIGS,
                    ACLOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {ACLOperation.CREATE, ACLOperation.CLUSTER_ACTION, ACLOperation.DESCRIBE_CONFIGS,
                      ACLOperation.ALTER_CONFIGS, ACLOperation.IDEMPOTENT_WRITE, ACLOperation.ALTER,
                      ACLOperation.DESCRIBE}
ZERO_UUID = uuid.UUID(int=0)
BROKER_ENDPOINT = 1  # DescribeCluster endpoint types: 1 broker, 2 controller (KRaft)


class _Close(Exception):
    """The request cannot be answered: close the connection, as Kafka does."""


# -- configs ---------------------------------------------------------------------------------------------------
def _check_number(kind: str, bits: int, minimum: int) -> Callable[[str], str | None]:
    """Kafka's validator of a LONG (64 bits) or INT (32 bits) config with a lower bound (its error texts)."""
    def check(value: str) -> str | None:
        try:
            number = int(value.strip())
        except ValueError:
            return f"Not a number of type {kind}"
        if not -(2 ** (bits - 1)) <= number <= 2 ** (bits - 1) - 1:
            return f"Not a number of type {kind}"
        return f"Value must be at least {minimum}" if number < minimum else None

    return check


_check_rate = _check_number("LONG", 64, 0)
_check_retention = _check_number("LONG", 64, -1)
_check_min_isr = _check_number("INT", 32, 1)


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _check_replicas(value: str) -> str | None:
    items = [item.strip() for item in value.split(",")]
    if "".join(items) == "*" or all(_REPLICA.fullmatch(item) for item in items):
        return None
    return ("Must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class _Key:
    """A config key the simulated cluster understands: Kafka's default, type, documentation and validator."""

    default: str
    config_type: ConfigType
    doc: str
    check: Callable[[str], str | None]


_RATE_DOC = ("A long representing the upper bound (bytes/sec) on replication traffic for {side}s enumerated in the "
             "property {side}.replication.throttled.replicas (for each topic). This property can be only set "
             "dynamically. It is suggested that the limit be kept above 1MB/s for accurate behaviour.")
_REPLICAS_DOC = ("A list of replicas for which log replication should be throttled on the {side} side. The list should "
                 "describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or "
                 "alternatively the wildcard '*' can be used to throttle all replicas for this topic.")
# The replication quotas (KIP-73): rates on brokers (default Long.MAX_VALUE), throttled replicas on topics.
KNOWN_KEYS: dict[ConfigResourceType, dict[str, _Key]] = {
    ConfigResourceType.BROKER: {
        LEADER_RATE: _Key(str(2**63 - 1), ConfigType.LONG, _RATE_DOC.format(side="leader"), _check_rate),
        FOLLOWER_RATE: _Key(str(2**63 - 1), ConfigType.LONG, _RATE_DOC.format(side="follower"), _check_rate),
    },
    ConfigResourceType.TOPIC: {
        LEADER_REPLICAS: _Key("", ConfigType.LIST, _REPLICAS_DOC.format(side="leader"), _check_replicas),
        FOLLOWER_REPLICAS: _Key("", ConfigType.LIST, _REPLICAS_DOC.format(side="follower"), _check_replicas),
        # What the load model reads (size / retention = bytes in per second); Kafka's defaults.
        "retention.ms": _Key("604800000", ConfigType.LONG, "The longest time a log is retained before old segments "
                             "are discarded (ms); -1: no time limit.", _check_retention),
        "retention.bytes": _Key("-1", ConfigType.LONG, "The largest size a partition's log may grow to before old "
                                "segments are discarded; -1: no size limit.", _check_retention),
        # What the failover figures read (partitions a failure leaves under it).
        "min.insync.replicas": _Key("1", ConfigType.INT, "The fewest in-sync replicas a write with acks=all needs; "
                                    "with fewer, such producers are refused (NotEnoughReplicas).", _check_min_isr),
    },
}
DEFAULT_BROKER = "<default>"  # the znode of the cluster-wide broker default, named "" in the protocol


class _Entry(NamedTuple):
    """One described config: its value, where it comes from, and the layers under it (most specific first)."""

    value: str | None
    source: ConfigSourceType
    synonyms: list[tuple[str | None, ConfigSourceType]]


def _apply(rtype: ConfigResourceType, config: dict[str, str], ops: Iterable[Any]) -> dict[str, str]:
    """An entity's config after IncrementalAlterConfigs operations; raises ``ApiError`` as Kafka refuses them."""
    ops = list(ops)
    if len({op.name for op in ops}) != len(ops):
        raise ApiError(Errors.InvalidRequestError.errno, "Error due to duplicate config keys")
    known = KNOWN_KEYS[rtype]
    # A throttle key on the wrong kind of entity is unknown there, as Kafka's config validation reports it.
    misplaced = {k for other, keys in KNOWN_KEYS.items() if other != rtype for k in keys}
    new = dict(config)
    for op in ops:
        if op.name in misplaced:
            raise ApiError(Errors.InvalidConfigurationError.errno,
                           f"Unknown {rtype.name.lower()} config name: {op.name}")
        key = known.get(op.name)
        if op.config_operation == AlterConfigOp.SET:
            if op.value is None:
                raise ApiError(Errors.InvalidRequestError.errno, f"Null value not supported for : {op.name}")
            new[op.name] = op.value
        elif op.config_operation == AlterConfigOp.DELETE:
            new.pop(op.name, None)
        elif op.config_operation in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            verb = "append" if op.config_operation == AlterConfigOp.APPEND else "subtract"
            if key is None:
                raise ApiError(Errors.InvalidRequestError.errno,
                               f"Config value {verb} is not simulated for config key: {op.name} (unknown type)")
            if key.config_type != ConfigType.LIST:
                raise ApiError(Errors.InvalidConfigurationError.errno,
                               f"Config value {verb} is not allowed for config key: {op.name}")
            items = [x for x in (s.strip() for s in new.get(op.name, key.default).split(",")) if x]
            given = [x for x in (s.strip() for s in (op.value or "").split(",")) if x]
            if verb == "append":
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            new[op.name] = ",".join(items)
        else:
            raise ApiError(Errors.InvalidRequestError.errno,
                           f"Unknown alter config operation type {op.config_operation}")
        if key is not None and op.name in new:
            problem = key.check(new[op.name])
            if problem:
                raise ApiError(Errors.InvalidConfigurationError.errno,
                               f"Invalid value {new[op.name]} for configuration {op.name}: {problem}")
    return new


def _topic_uuid(topic_id: str | None) -> uuid.UUID:
    """The 16 bytes of a topic id, which the topic znode holds in base64url."""
    if not topic_id:
        return ZERO_UUID
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
    except (ValueError, binascii.Error):
        return ZERO_UUID


# -- topics ----------------------------------------------------------------------------------------------------
LONG_MAX = str(2**63 - 1)
# Every topic config of Kafka 3.9 (LogConfig: TopicConfig's keys and the replication throttles), with the value a new
# topic gets from a broker with default settings, as CreateTopics v5+ reports them.
TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    FOLLOWER_REPLICAS: "",
    "index.interval.bytes": "4096",
    LEADER_REPLICAS: "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": LONG_MAX,
    "max.message.bytes": "1048588",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": LONG_MAX,
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.difference.max.ms": LONG_MAX,
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}
DEFAULT_PARTITIONS = 1  # num.partitions
DEFAULT_REPLICATION_FACTOR = 1  # default.replication.factor
NO_VALUE = -1  # CreateTopics: partitions / replication factor left to the broker's defaults
MAX_TOPIC_NAME = 249
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def _invalid_topic_name(name: str) -> str | None:
    """Why Kafka refuses a topic name (``Topic.validate``), or None."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    if not _LEGAL_TOPIC.fullmatch(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _default_assignment(brokers: list[int], partitions: int, replication_factor: int) -> dict[int, list[int]]:
    """Kafka's rack-unaware ``AdminUtils.assignReplicasToBrokers`` with start index and replica shift 0: first replicas
    round-robin over ``brokers``, the others after them with a shift that grows each round."""
    if partitions <= 0:
        raise ApiError(Errors.InvalidPartitionsError.errno, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ApiError(Errors.InvalidReplicationFactorError.errno, "Replication factor must be larger than 0.")
    n = len(brokers)
    if replication_factor > n:
        raise ApiError(Errors.InvalidReplicationFactorError.errno,
                       f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    out: dict[int, list[int]] = {}
    shift = 0
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = p % n
        out[p] = [brokers[first]] + [brokers[(first + 1 + (shift + j) % (n - 1)) % n]
                                     for j in range(replication_factor - 1)]
    return out


def _scala_map(assignment: dict[int, list[int]]) -> str:
    """An assignment as Kafka's error message prints it (a Scala map of buffers)."""
    inner = ", ".join(f"{p} -> ArrayBuffer({', '.join(map(str, r))})" for p, r in sorted(assignment.items()))
    return f"HashMap({inner})"


def _check_topic_configs(configs: dict[str, str]) -> None:
    """Kafka's ``LogConfig.validate`` as far as simulated: the names, then the throttled replica lists."""
    for name in configs:
        if name not in TOPIC_CONFIG_DEFAULTS:
            raise ApiError(Errors.InvalidConfigurationError.errno, f"Unknown topic config name: {name}")
    for key in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        problem = _check_replicas(configs[key]) if key in configs else None
        if problem:
            raise ApiError(Errors.InvalidConfigurationError.errno,
                           f"Invalid value {configs[key]} for configuration {key}: {problem}")


# -- the APIs --------------------------------------------------------------------------------------------------
class Api(NamedTuple):
    """A served API: kafka-python's request and response classes, and the ``KafkaApis`` method answering it."""

    request: Any
    response: Any
    handler: str  # (request, version) -> the response's fields


APIS: dict[int, Api] = {api.request.API_KEY: api for api in (
    Api(ApiVersionsRequest, ApiVersionsResponse, "api_versions"),
    Api(MetadataRequest, MetadataResponse, "metadata"),
    Api(CreateTopicsRequest, CreateTopicsResponse, "create_topics"),
    Api(DeleteTopicsRequest, DeleteTopicsResponse, "delete_topics"),
    Api(DescribeClusterRequest, DescribeClusterResponse, "describe_cluster"),
    Api(DescribeConfigsRequest, DescribeConfigsResponse, "describe_configs"),
    Api(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, "incremental_alter_configs"),
    Api(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, "alter_partition_reassignments"),
    Api(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, "list_partition_reassignments"),
    Api(ElectLeadersRequest, ElectLeadersResponse, "elect_leaders"),
    Api(DescribeLogDirsRequest, DescribeLogDirsResponse, "describe_log_dirs"),
    Api(SaslHandshakeRequest, SaslHandshakeResponse, "sasl_handshake"),
    Api(SaslAuthenticateRequest, SaslAuthenticateResponse, "sasl_authenticate"),
)}


@dataclass
class Session:
    """One client connection's SASL state (a listener without SASL users starts authenticated)."""

    authenticated: bool
    mechanism: str | None = None
    user: str | None = None
    close_after_reply: bool = False


class KafkaApis:
    """One broker's request handling: a framed request in, a framed response out (Kafka's ``KafkaApis``).

    Every handler reads and changes the cluster under ``sim.lock``, so it sees no half-done controller step."""

    def __init__(self, sim: SimulatedCluster, broker_id: int) -> None:
        self.sim = sim
        self.broker_id = broker_id

    def handle(self, frame: bytes, session: Session | None = None) -> bytes:
        """Answer one request frame (without its size prefix); raises ``_Close`` when the connection must close."""
        session = session or Session(authenticated=True)
        if len(frame) < 8:
            raise _Close(f"a {len(frame)}-byte frame holds no request header")
        api_key, version, correlation_id = struct.unpack(">hhi", frame[:8])
        api = APIS.get(api_key)
        versions = self.versions()
        if api is None:
            raise _Close(f"API key {api_key} is {'advertised but ' if api_key in versions else ''}not served by the "
                         "simulated broker")
        if api_key not in versions:
            raise _Close(f"{api.request.name} is not served by this listener")
        low, high = versions[api_key]
        if not low <= version <= high:
            if api_key == ApiVersionsRequest.API_KEY:
                return self._unsupported_api_versions(correlation_id)
            raise _Close(f"unsupported version {version} of {api.request.name} (supported: {low}-{high})")
        if not session.authenticated and api_key not in SASL_APIS:
            # Kafka: "Unexpected Kafka request of type X during SASL handshake" closes the connection.
            raise _Close(f"{api.request.name} before SASL authentication")
        try:
            request = api.request.decode(frame, version=version, header=True)
        except Exception as exc:
            raise _Close(f"malformed {api.request.name} v{version}: {exc!r}") from None
        if api_key in (SaslHandshakeRequest.API_KEY, SaslAuthenticateRequest.API_KEY):
            fields = getattr(self, api.handler)(request, version, session)  # these responses have no throttle time
        else:
            fields = {"throttle_time_ms": 0, **getattr(self, api.handler)(request, version)}
        log.debug("broker %d: %s v%d (correlation id %d)", self.broker_id, api.request.name, version, correlation_id)
        response = api.response(version=version, **fields)
        response.with_header(correlation_id=correlation_id)
        data: bytes = response.encode(header=True, framed=True)
        return data

    def versions(self) -> dict[int, tuple[int, int]]:
        """The API versions this broker's listener advertises (SASL ones on a SASL listener only)."""
        advertised = {**KAFKA_ZK_BROKER_VERSIONS, **SUPPORTED_VERSIONS}
        return {**advertised, **SASL_VERSIONS} if self.sim.sasl_users else advertised

    @staticmethod
    def _unsupported_api_versions(correlation_id: int) -> bytes:
        low, high = SUPPORTED_VERSIONS[ApiVersionsRequest.API_KEY]
        response = ApiVersionsResponse(version=0, error_code=Errors.UnsupportedVersionError.errno, api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=ApiVersionsRequest.API_KEY, min_version=low, max_version=high)])
        response.with_header(correlation_id=correlation_id)
        data: bytes = response.encode(header=True, framed=True)
        return data

    def _is_controller(self) -> bool:
        return self.sim.controller_id == self.broker_id

    def _live_brokers(self) -> list[tuple[int, int, str | None]]:
        """(id, port, rack) of every live broker, as Kafka's metadata cache lists them."""
        sim = self.sim
        return [(b, sim.kafka_ports[b], sim.brokers[b].rack) for b in sorted(sim.alive) if b in sim.kafka_ports]

    # -- SASL (PLAIN), when the cluster has SASL users ------------------------------------------------------------
    def sasl_handshake(self, request: Any, version: int, session: Session) -> dict[str, Any]:
        """SaslHandshake: PLAIN is the one mechanism enabled; v0 (unframed tokens) is not served."""
        if version == 0:
            raise _Close("SaslHandshake v0 (unframed SASL tokens) is not served")
        if request.mechanism != "PLAIN":
            return {"error_code": Errors.UnsupportedSaslMechanismError.errno, "mechanisms": ["PLAIN"]}
        session.mechanism = "PLAIN"
        return {"error_code": 0, "mechanisms": ["PLAIN"]}

    def sasl_authenticate(self, request: Any, version: int, session: Session) -> dict[str, Any]:
        """SaslAuthenticate with a PLAIN token (authzid NUL user NUL password, RFC 4616). A failure is answered,
        then the connection closes, as Kafka does."""
        if session.mechanism != "PLAIN" or session.authenticated:
            session.close_after_reply = True
            return {"error_code": Errors.IllegalSaslStateError.errno, "error_message": "Unexpected SaslAuthenticate",
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        parts = bytes(request.auth_bytes).split(b"\0")
        user, password = (parts[1].decode(errors="replace"), parts[2].decode(errors="replace")) if len(parts) == 3 else ("", "")
        if not user or self.sim.sasl_users.get(user) != password:
            session.close_after_reply = True
            return {"error_code": Errors.SaslAuthenticationFailedError.errno,
                    "error_message": "Authentication failed: Invalid username or password",
                    "auth_bytes": b"", "session_lifetime_ms": 0}
        session.authenticated, session.user = True, user
        return {"error_code": 0, "error_message": None, "auth_bytes": b"", "session_lifetime_ms": 0}

    # -- ApiVersions, Metadata, DescribeCluster ------------------------------------------------------------------
    def api_versions(self, request: Any, version: int) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": [
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(self.versions().items())]}

    def metadata(self, request: Any, version: int) -> dict[str, Any]:
        R = MetadataResponse
        sim = self.sim
        with sim.lock:
            listed = sorted(name for name in sim.topics if sim.in_metadata(name))
            if request.topics is None or (version == 0 and not request.topics):  # v0: an empty list means all
                wanted: list[tuple[str | None, uuid.UUID]] = [(name, ZERO_UUID) for name in listed]
            else:
                wanted = [(t.name, getattr(t, "topic_id", None) or ZERO_UUID) for t in request.topics]
            by_id = {_topic_uuid(sim.topics[name].topic_id): name for name in listed}
            topics = []
            for name, topic_id in wanted:
                if name is None:  # v12: by topic id
                    name = by_id.get(topic_id)
                    if name is None:
                        topics.append(R.MetadataResponseTopic(error_code=Errors.UnknownTopicIdError.errno, name=None,
                                                              topic_id=topic_id, is_internal=False, partitions=[]))
                        continue
                topics.append(self._topic_metadata(name, request.include_topic_authorized_operations))
            return {
                "brokers": [R.MetadataResponseBroker(node_id=b, host=LISTEN_HOST, port=port, rack=rack)
                            for b, port, rack in self._live_brokers()],
                "cluster_id": sim.cluster_id,
                "controller_id": -1 if sim.controller_id is None else sim.controller_id,
                "topics": topics,
                "authorized_operations": CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else None,
                "error_code": 0,
            }

    def _topic_metadata(self, name: str, with_operations: bool) -> Any:
        R = MetadataResponse.MetadataResponseTopic
        sim = self.sim
        assignment = sim.topics.get(name)
        if assignment is None or not sim.in_metadata(name):
            return R(error_code=Errors.UnknownTopicOrPartitionError.errno, name=name, topic_id=ZERO_UUID,
                     is_internal=False, partitions=[])
        partitions = []
        for p, replicas in sorted(assignment.partitions.items()):
            if (name, p) not in sim.state:
                continue  # never had a leader: not in the brokers' metadata
            leader, isr, epoch = sim.state[(name, p)]
            live_leader = leader if leader is not None and leader in sim.alive else None
            partitions.append(R.MetadataResponsePartition(
                error_code=0 if live_leader is not None else Errors.LeaderNotAvailableError.errno,
                partition_index=p, leader_id=-1 if live_leader is None else live_leader, leader_epoch=epoch,
                replica_nodes=list(replicas), isr_nodes=list(isr),
                offline_replicas=[b for b in replicas if b not in sim.alive]))
        return R(error_code=0, name=name, topic_id=_topic_uuid(assignment.topic_id), is_internal=False,
                 partitions=partitions,
                 # kafka-python's stub says set[int]; None encodes Kafka's "not requested" (-2^31), as a broker sends
                 authorized_operations=TOPIC_OPERATIONS if with_operations else None)  # type: ignore[arg-type]

    def describe_cluster(self, request: Any, version: int) -> dict[str, Any]:
        R = DescribeClusterResponse
        sim = self.sim
        if version >= 1 and request.endpoint_type != BROKER_ENDPOINT:
            return {"error_code": Errors.MismatchedEndpointTypeError.errno, "endpoint_type": BROKER_ENDPOINT,
                    "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                                     "of type CONTROLLER", "cluster_id": sim.cluster_id, "controller_id": -1,
                    "brokers": []}
        with sim.lock:
            return {
                "error_code": 0, "error_message": None, "endpoint_type": BROKER_ENDPOINT,
                "cluster_id": sim.cluster_id,
                "controller_id": -1 if sim.controller_id is None else sim.controller_id,
                "brokers": [R.DescribeClusterBroker(broker_id=b, host=LISTEN_HOST, port=port, rack=rack,
                                                    is_fenced=False) for b, port, rack in self._live_brokers()],
                "authorized_operations": CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else None,
            }

    # -- CreateTopics, DeleteTopics (the controller's, through ZooKeeper) ------------------------------------------
    def create_topics(self, request: Any, version: int) -> dict[str, Any]:
        """Kafka 3.9's ``KafkaApis.handleCreateTopicsRequest`` with ``ZkAdminManager.createTopics``."""
        R = CreateTopicsResponse.CreatableTopicResult
        names = [t.name for t in request.topics]
        if not self._is_controller():
            return {"topics": [R(name=n, topic_id=ZERO_UUID, error_code=Errors.NotControllerError.errno,
                                 error_message=None, num_partitions=-1, replication_factor=-1, configs=[])
                               for n in names]}
        sim = self.sim
        results: list[dict[str, Any]] = []
        created: dict[str, list[int]] = {}  # topic -> partitions to see led before answering
        with sim.lock:
            for topic in request.topics:
                result: dict[str, Any] = {"name": topic.name, "topic_id": ZERO_UUID, "error_code": 0,
                                          "error_message": None, "num_partitions": -1, "replication_factor": -1,
                                          "configs": []}
                try:
                    if topic.name == CLUSTER_METADATA_TOPIC:
                        raise ApiError(Errors.InvalidRequestError.errno,
                                       f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
                    if names.count(topic.name) > 1:
                        raise ApiError(Errors.InvalidRequestError.errno, "Found multiple entries for this topic.")
                    assignment, configs = self._check_new_topic(topic)
                    result.update(num_partitions=len(assignment), replication_factor=len(assignment[0]),
                                  configs=self._topic_configs(configs))
                    if not request.validate_only:
                        result["topic_id"] = _topic_uuid(self._write_new_topic(topic.name, assignment, configs))
                        created[topic.name] = sorted(assignment)
                except ApiError as exc:
                    result.update(error_code=exc.code, error_message=exc.message)
                    log.info("broker %d refused to create topic %s: %s", self.broker_id, topic.name, exc.message)
                results.append(result)

        def led() -> bool:
            return all(self._has_leader((t, p)) for t, ps in created.items() for p in ps)

        # Kafka answers at once with REQUEST_TIMED_OUT for a timeout <= 0, else when every partition has a leader.
        if created and (request.timeout_ms <= 0 or not sim.wait_until(led, request.timeout_ms / 1000)):
            with sim.lock:
                late = set(created) if request.timeout_ms <= 0 else \
                    {t for t, ps in created.items() if not all(self._has_leader((t, p)) for p in ps)}
            for result in results:
                if result["name"] in late and result["error_code"] == 0:
                    result.update(error_code=Errors.RequestTimedOutError.errno, error_message=None)
        for result in results:
            if result["error_code"]:  # a failed topic reports no configs or counts
                result.update(configs=[], num_partitions=-1, replication_factor=-1)
        return {"topics": [R(**result) for result in results]}

    def _has_leader(self, tp: TopicPartition) -> bool:
        """What Kafka's delayed create waits for: the partition is in the metadata with a leader."""
        sim = self.sim
        return tp[0] not in sim.deletion_started and tp in sim.state and sim.state[tp][0] is not None

    def _check_new_topic(self, topic: Any) -> tuple[dict[int, list[int]], dict[str, str]]:
        """The assignment and configs of a topic to create, refused as Kafka does (``ZkAdminManager.createTopics``,
        then ``AdminZkClient.validateTopicCreate``, in their order). Hold ``sim.lock``."""
        sim, name = self.sim, topic.name
        if sim.in_metadata(name):
            raise ApiError(Errors.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists.")
        nulls = [c.name for c in topic.configs if c.value is None]
        if nulls:
            raise ApiError(Errors.InvalidConfigurationError.errno,
                           f"Null value not supported for topic configs: {','.join(nulls)}")
        if (topic.num_partitions != NO_VALUE or topic.replication_factor != NO_VALUE) and topic.assignments:
            raise ApiError(Errors.InvalidRequestError.errno, "Both numPartitions or replicationFactor and "
                           "replicasAssignments were set. Both cannot be used at the same time.")
        if topic.assignments:  # Kafka does not check that these brokers exist
            assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        else:
            partitions = DEFAULT_PARTITIONS if topic.num_partitions == NO_VALUE else topic.num_partitions
            rf = DEFAULT_REPLICATION_FACTOR if topic.replication_factor == NO_VALUE else topic.replication_factor
            assignment = _default_assignment(sorted(sim.alive), partitions, rf)
        problem = _invalid_topic_name(name)
        if problem:
            raise ApiError(Errors.InvalidTopicError.errno, f"Topic name is invalid: {problem}")
        if sim.zk.exists(delete_topic_path(name)):
            raise ApiError(Errors.TopicAlreadyExistsError.errno, f"Topic '{name}' is marked for deletion.")
        if sim.zk.exists(kz.topic_path(name)):
            raise ApiError(Errors.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists.")
        if "." in name or "_" in name:
            existing = sim.zk.get_children(kz.TOPICS)
            if name in existing:
                raise ApiError(Errors.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists.")
            colliding = [t for t in existing if t.replace(".", "_") == name.replace(".", "_")]
            if colliding:
                raise ApiError(Errors.InvalidTopicError.errno,
                               f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")
        if len({len(r) for r in assignment.values()}) != 1:
            raise ApiError(Errors.InvalidReplicationAssignmentError.errno,
                           "All partitions should have the same number of replicas")
        if any(len(set(r)) != len(r) for r in assignment.values()):
            raise ApiError(Errors.InvalidReplicationAssignmentError.errno,
                           f"Duplicate replica assignment found: {_scala_map(assignment)}")
        n = len(assignment)
        if sum(p for p in assignment if p >= 0) != n * (n - 1) // 2:  # Kafka's own test, a sum of the indexes
            raise ApiError(Errors.InvalidReplicationAssignmentError.errno,
                           "partitions should be a consecutive 0-based integer sequence")
        configs = {c.name: c.value for c in topic.configs}
        _check_topic_configs(configs)
        if 0 not in assignment:  # passes Kafka's sum test (e.g. partitions -1 and 1), then fails reading partition 0
            raise ApiError(Errors.UnknownError.errno, "key not found: 0")
        return assignment, configs

    @staticmethod
    def _topic_configs(configs: dict[str, str]) -> list[Any]:
        """Every topic config of a new topic as CreateTopics v5+ reports it: given ones as the topic's own."""
        C = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
        return [C(name=key, value=configs.get(key, default), read_only=False, is_sensitive=False,
                  config_source=(ConfigSourceType.DYNAMIC_TOPIC_CONFIG if key in configs
                                 else ConfigSourceType.DEFAULT_CONFIG))
                for key, default in sorted(TOPIC_CONFIG_DEFAULTS.items())]

    def _write_new_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str]) -> str:
        """Kafka's ``AdminZkClient.createTopicWithAssignment``: the config znode, then the topic znode with a new topic
        id (the controller does the rest when it sees the topic). Returns the topic id."""
        from kazoo.exceptions import NodeExistsError

        zk = self.sim.zk
        path = kz.config_path("topics", name)
        body = kz.encode({"version": 1, "config": configs})
        if zk.exists(path):
            zk.set(path, body)
        else:
            zk.create(path, body, makepath=True)
        topic_id = new_topic_id()
        znode = kz.topic_znode(kz.TopicAssignment(partitions=assignment, topic_id=topic_id))
        try:
            zk.create(kz.topic_path(name), kz.encode(znode), makepath=True)
        except NodeExistsError:
            raise ApiError(Errors.TopicAlreadyExistsError.errno, f"Topic '{name}' already exists.") from None
        log.info("broker %d created topic %s (id %s): %s", self.broker_id, name, topic_id, assignment)
        return topic_id

    def delete_topics(self, request: Any, version: int) -> dict[str, Any]:
        """Kafka 3.9's ``KafkaApis.handleDeleteTopicsRequest`` with ``ZkAdminManager.deleteTopics``."""
        R = DeleteTopicsResponse.DeletableTopicResult
        asked: list[tuple[str | None, uuid.UUID]] = (
            [(t.name, t.topic_id or ZERO_UUID) for t in request.topics] if version >= 6
            else [(name, ZERO_UUID) for name in request.topic_names or []])

        def everyone(code: int) -> dict[str, Any]:
            return {"responses": [R(name=n, topic_id=i, error_code=code, error_message=None) for n, i in asked]}

        if not self._is_controller():
            return everyone(Errors.NotControllerError.errno)
        if any(n is not None and i != ZERO_UUID for n, i in asked):  # "Topic name and topic ID can not both be..."
            return everyone(Errors.InvalidRequestError.errno)
        sim = self.sim
        results: list[dict[str, Any]] = []
        marked: set[str] = set()
        with sim.lock:
            by_id = {_topic_uuid(a.topic_id): name for name, a in sim.topics.items() if a.topic_id}
            for name, topic_id in asked:
                if topic_id != ZERO_UUID:
                    name = by_id.get(topic_id)
                    code = Errors.UnknownTopicIdError.errno if name is None else 0
                else:
                    code = Errors.TopicAuthorizationFailedError.errno if name is None else 0  # no name, no id
                if name is not None and code == 0 and not sim.in_metadata(name):
                    code = Errors.UnknownTopicOrPartitionError.errno
                if name is not None and code == 0:
                    code = self._mark_for_deletion(name)
                if name is not None and code == 0:
                    marked.add(name)
                results.append({"name": name, "topic_id": topic_id, "error_code": code, "error_message": None})

        def gone() -> bool:
            return not any(sim.in_metadata(name) for name in marked)

        # Kafka answers at once with REQUEST_TIMED_OUT for a timeout <= 0, else when the topics left the metadata.
        if marked and (request.timeout_ms <= 0 or not sim.wait_until(gone, request.timeout_ms / 1000)):
            with sim.lock:
                late = marked if request.timeout_ms <= 0 else {n for n in marked if sim.in_metadata(n)}
            for result in results:
                if result["name"] in late and result["error_code"] == 0:
                    result["error_code"] = Errors.RequestTimedOutError.errno
        return {"responses": [R(**result) for result in results]}

    def _mark_for_deletion(self, name: str) -> int:
        """Kafka's ``AdminZkClient.deleteTopic``: ``/admin/delete_topics/<t>``, already there or not; an error code."""
        from kazoo.exceptions import NodeExistsError

        zk = self.sim.zk
        if not zk.exists(kz.topic_path(name)):
            return int(Errors.UnknownTopicOrPartitionError.errno)
        try:
            zk.create(delete_topic_path(name), b"", makepath=True)
            log.info("broker %d marked topic %s for deletion", self.broker_id, name)
        except NodeExistsError:
            pass  # "already marked for deletion": Kafka waits for it all the same
        return 0

    # -- DescribeLogDirs -------------------------------------------------------------------------------------------
    def describe_log_dirs(self, request: Any, version: int) -> dict[str, Any]:
        R = DescribeLogDirsResponse.DescribeLogDirsResult
        sim = self.sim
        wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
        with sim.lock:
            by_topic: dict[str, list[Any]] = {}
            used = 0
            for tp, held in sorted(sim.disk.items()):
                if self.broker_id not in held:
                    continue
                nbytes = int(held[self.broker_id])
                used += nbytes
                if wanted is None or tp in wanted:
                    by_topic.setdefault(tp[0], []).append(R.DescribeLogDirsTopic.DescribeLogDirsPartition(
                        partition_index=tp[1], partition_size=nbytes, offset_lag=max(0, sim.size[tp] - nbytes),
                        is_future_key=False))
            capacity = sim.brokers[self.broker_id].disk_capacity_bytes
        result = R(error_code=0, log_dir=f"/var/lib/kafka/data-{self.broker_id}",
                   topics=[R.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                   total_bytes=capacity or -1, usable_bytes=max(0, int(capacity - used)) if capacity else -1)
        return {"error_code": 0, "results": [result]}

    # -- DescribeConfigs, IncrementalAlterConfigs ------------------------------------------------------------------
    def _config_entity(self, rtype: int, name: str) -> tuple[ConfigResourceType, str, str]:
        """(type, entity type, znode name) of a config resource, refused as Kafka's ZooKeeper admin manager does."""
        if rtype == ConfigResourceType.TOPIC:
            if name not in self.sim.topics:
                raise ApiError(Errors.UnknownTopicOrPartitionError.errno, f"The topic '{name}' does not exist.")
            return ConfigResourceType.TOPIC, "topics", name
        if rtype == ConfigResourceType.BROKER:
            if name == "":
                return ConfigResourceType.BROKER, "brokers", DEFAULT_BROKER
            if not name.isdigit():
                raise ApiError(Errors.InvalidRequestError.errno, f"Broker id must be an integer, but it is: {name}")
            if int(name) != self.broker_id:
                raise ApiError(Errors.InvalidRequestError.errno,
                               f"Unexpected broker id, expected {self.broker_id} or empty string, but received {name}")
            return ConfigResourceType.BROKER, "brokers", name
        raise ApiError(Errors.InvalidRequestError.errno, f"Unsupported resource type {rtype}")

    def _read_config(self, entity_type: str, name: str) -> dict[str, str]:
        try:
            return kz.read_config(self.sim.zk, entity_type, name)
        except SourceError as exc:
            raise ApiError(Errors.UnknownError.errno, str(exc)) from None

    def _described(self, rtype: ConfigResourceType, entity_type: str, name: str) -> dict[str, _Entry]:
        """Every config the resource reports: its dynamic ones from ZooKeeper, and the known keys' defaults."""
        if rtype == ConfigResourceType.TOPIC:
            out = {k: _Entry(v, ConfigSourceType.DYNAMIC_TOPIC_CONFIG, [(v, ConfigSourceType.DYNAMIC_TOPIC_CONFIG)])
                   for k, v in self._read_config(entity_type, name).items()}
        else:
            default = self._read_config("brokers", DEFAULT_BROKER)
            if name == DEFAULT_BROKER:  # the cluster-wide default reports only what is set there
                return {k: _Entry(v, ConfigSourceType.DYNAMIC_DEFAULT_BROKER_CONFIG,
                                  [(v, ConfigSourceType.DYNAMIC_DEFAULT_BROKER_CONFIG)]) for k, v in default.items()}
            layers = [(self._read_config("brokers", name), ConfigSourceType.DYNAMIC_BROKER_CONFIG),
                      (default, ConfigSourceType.DYNAMIC_DEFAULT_BROKER_CONFIG)]
            out = {}
            for key in {k for config, _ in layers for k in config}:
                synonyms: list[tuple[str | None, ConfigSourceType]] = [
                    (config[key], source) for config, source in layers if key in config]
                if key in KNOWN_KEYS[rtype]:
                    synonyms.append((KNOWN_KEYS[rtype][key].default, ConfigSourceType.DEFAULT_CONFIG))
                out[key] = _Entry(synonyms[0][0], synonyms[0][1], synonyms)
        for key, spec in KNOWN_KEYS[rtype].items():
            if key not in out:
                default_layer = (spec.default, ConfigSourceType.DEFAULT_CONFIG)
                # topic keys have no broker one
                no_layers: list[tuple[str | None, ConfigSourceType]] = []
                out[key] = _Entry(spec.default, ConfigSourceType.DEFAULT_CONFIG,
                                  no_layers if rtype == ConfigResourceType.TOPIC else [default_layer])
        return out

    def describe_configs(self, request: Any, version: int) -> dict[str, Any]:
        R = DescribeConfigsResponse.DescribeConfigsResult
        C = R.DescribeConfigsResourceResult
        results = []
        for res in request.resources:
            try:
                with self.sim.lock:
                    rtype, entity_type, name = self._config_entity(res.resource_type, res.resource_name)
                    entries = self._described(rtype, entity_type, name)
            except ApiError as exc:
                results.append(R(error_code=exc.code, error_message=exc.message, resource_type=res.resource_type,
                                 resource_name=res.resource_name, configs=[]))
                continue
            configs = []
            for key, entry in sorted(entries.items()):
                if res.configuration_keys is not None and key not in res.configuration_keys:
                    continue
                spec = KNOWN_KEYS[rtype].get(key)
                configs.append(C(
                    name=key, value=entry.value, read_only=False, config_source=entry.source,
                    is_default=entry.source == ConfigSourceType.DEFAULT_CONFIG, is_sensitive=False,
                    synonyms=[C.DescribeConfigsSynonym(name=key, value=v, source=s) for v, s in entry.synonyms]
                    if request.include_synonyms else [],
                    config_type=spec.config_type if spec else ConfigType.UNKNOWN,
                    documentation=spec.doc if spec and request.include_documentation else None))
            results.append(R(error_code=0, error_message=None, resource_type=res.resource_type,
                             resource_name=res.resource_name, configs=configs))
        return {"results": results}

    def incremental_alter_configs(self, request: Any, version: int) -> dict[str, Any]:
        R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
        responses = []
        for res in request.resources:
            code, message = 0, None
            try:
                with self.sim.lock:
                    rtype, entity_type, name = self._config_entity(res.resource_type, res.resource_name)
                    config = _apply(rtype, self._read_config(entity_type, name), res.configs)
                    if not request.validate_only:
                        self._write_config(entity_type, name, config)
            except ApiError as exc:
                code, message = exc.code, exc.message
                log.info("broker %d refused a config change of %s: %s", self.broker_id, res.resource_name, message)
            responses.append(R(error_code=code, error_message=message, resource_type=res.resource_type,
                               resource_name=res.resource_name))
        return {"responses": responses}

    def _write_config(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        """Kafka's ``AdminZkClient.changeConfigs``: the entity znode, then a change notification for every broker."""
        zk = self.sim.zk
        path = kz.config_path(entity_type, name)
        body = kz.encode({"version": 1, "config": config})
        if zk.exists(path):
            zk.set(path, body)
        else:
            zk.create(path, body, makepath=True)
        zk.create(f"{kz.CONFIG_CHANGES}/{kz.CONFIG_CHANGE_PREFIX}",
                  kz.encode({"version": 2, "entity_path": f"{entity_type}/{name}"}), sequence=True, makepath=True)

    # -- the controller's APIs -----------------------------------------------------------------------------------
    def alter_partition_reassignments(self, request: Any, version: int) -> dict[str, Any]:
        R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
        if not self._is_controller():
            return {"error_code": Errors.NotControllerError.errno, "error_message": "This is not the correct "
                    "controller for this cluster.", "responses": []}
        responses = []
        # One request is one controller event, as in Kafka: every move in it starts in the same tick. Partition by
        # partition, a loaded machine let the controller tick between them and the batch's copies started staggered
        # (a throttled copy measured 1.34x its bound in the flake hunt).
        with self.sim.lock:
            for topic in request.topics:
                partitions = []
                for p in topic.partitions:
                    tp: TopicPartition = (topic.name, p.partition_index)
                    code, message = 0, None
                    try:
                        if p.replicas is None:
                            self.sim.api_cancel(tp)
                        else:
                            self.sim.api_reassign(tp, list(p.replicas))
                    except ApiError as exc:
                        code, message = exc.code, exc.message
                    partitions.append(R.ReassignablePartitionResponse(partition_index=p.partition_index,
                                                                      error_code=code, error_message=message))
                responses.append(R(name=topic.name, partitions=partitions))
        return {"error_code": 0, "error_message": None, "responses": responses}

    def list_partition_reassignments(self, request: Any, version: int) -> dict[str, Any]:
        R = ListPartitionReassignmentsResponse.OngoingTopicReassignment
        if not self._is_controller():
            return {"error_code": Errors.NotControllerError.errno, "error_message": "This is not the correct "
                    "controller for this cluster.", "topics": []}
        wanted = None if request.topics is None else {(t.name, p) for t in request.topics for p in t.partition_indexes}
        by_topic: dict[str, list[Any]] = {}
        for (t, p), r in sorted(self.sim.ongoing().items()):
            if wanted is None or (t, p) in wanted:
                by_topic.setdefault(t, []).append(R.OngoingPartitionReassignment(
                    partition_index=p, replicas=r.replicas, adding_replicas=r.adding, removing_replicas=r.removing))
        return {"error_code": 0, "error_message": None,
                "topics": [R(name=t, partitions=ps) for t, ps in by_topic.items()]}

    def elect_leaders(self, request: Any, version: int) -> dict[str, Any]:
        R = ElectLeadersResponse.ReplicaElectionResult
        sim = self.sim
        asked = None if request.topic_partitions is None else \
            [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        if not self._is_controller():
            not_controller = Errors.NotControllerError.errno
            return {"error_code": not_controller, "replica_election_results": [
                R(topic=t, partition_result=[R.PartitionResult(partition_id=p, error_code=not_controller)])
                for t, p in asked or []]}
        preferred = version == 0 or request.election_type == 0
        by_topic: dict[str, list[Any]] = {}
        with sim.lock:
            for tp in sorted(tp for tp in sim.state if sim.in_metadata(tp[0])) if asked is None else asked:
                code, message = 0, None
                try:
                    if not preferred:
                        raise ApiError(Errors.InvalidRequestError.errno, "unclean leader election is not simulated")
                    sim.elect_preferred(tp)
                except ApiError as exc:
                    code, message = exc.code, exc.message
                if asked is None and code == Errors.ElectionNotNeededError.errno:
                    continue  # asked for every partition, Kafka reports only those it elected or failed
                by_topic.setdefault(tp[0], []).append(R.PartitionResult(partition_id=tp[1], error_code=code,
                                                                        error_message=message))
        return {"error_code": 0, "replica_election_results": [R(topic=t, partition_result=ps)
                                                              for t, ps in by_topic.items()]}


# -- sockets ---------------------------------------------------------------------------------------------------
def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    """``n`` bytes, or None when the peer closed the connection before sending them."""
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class BrokerListener:
    """A broker's Kafka listener: a TCP server socket and one thread per client connection.

    ``close`` stops accepting and shuts every open connection down without waiting (a connection thread may be
    waiting for the cluster's lock); ``join`` then waits for the threads."""

    def __init__(self, apis: KafkaApis, host: str, port: int = 0) -> None:
        self.apis = apis
        self._server = socket.create_server((host, port))  # SO_REUSEADDR: a restarted broker gets its port back
        self.port: int = self._server.getsockname()[1]
        self._mutex = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, name=f"kafka-broker-{apis.broker_id}", daemon=True)

    def start(self) -> None:
        self._acceptor.start()

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            connections = list(self._connections)
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        except OSError:
            pass
        self._server.close()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes the connection's recv(); its thread closes it
            except OSError:
                pass

    def join(self, timeout: float = 10.0) -> None:
        self._acceptor.join(timeout)
        with self._mutex:
            threads = list(self._connections.values())
        for thread in threads:
            thread.join(timeout)

    def _accept(self) -> None:
        bid = self.apis.broker_id
        while True:
            try:
                conn, peer = self._server.accept()
            except OSError:
                return  # closed
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(target=self._serve, args=(conn, peer), name=f"kafka-broker-{bid}-{peer[1]}",
                                      daemon=True)
            with self._mutex:
                if self._closed:
                    conn.close()
                    return
                self._connections[conn] = thread
            thread.start()

    def _serve(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        bid = self.apis.broker_id
        session = Session(authenticated=not self.apis.sim.sasl_users)
        try:
            while True:
                head = _recv_exact(conn, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                if not 0 <= size <= MAX_FRAME_BYTES:
                    log.warning("broker %d: closing connection from %s:%d: frame size %d", bid, *peer, size)
                    return
                frame = _recv_exact(conn, size)
                if frame is None:
                    return
                conn.sendall(self.apis.handle(frame, session))
                if session.close_after_reply:
                    return
        except _Close as exc:
            log.warning("broker %d: closing connection from %s:%d: %s", bid, *peer, exc)
        except OSError as exc:
            log.debug("broker %d: connection from %s:%d ended: %s", bid, *peer, exc)
        except Exception:  # a bug in a handler: this connection closes, the broker keeps serving
            log.exception("broker %d: failed to answer a request from %s:%d; closing the connection", bid, *peer)
        finally:
            with self._mutex:
                self._connections.pop(conn, None)
            conn.close()


def serve(sim: SimulatedCluster, broker_id: int, host: str, port: int) -> BrokerListener:
    """The Kafka protocol listener of one simulated broker (the controller's ``listener_factory``)."""
    return BrokerListener(KafkaApis(sim, broker_id), host, port)
