"""Names and formats Kafka defines, which every layer that talks to a cluster spells the same way: the lock's
marker topic, the replication-throttle config keys (KIP-73) and topic ids as Kafka prints them.

The bottom of the package: it imports nothing from it, so the readers (``kafka_admin``, ``kafka_zk``), the backends,
the lock and the simulator can all use it without importing each other.
"""

from __future__ import annotations

import base64
import uuid

__all__ = ["LOCK_TOPIC", "LEADER_RATE", "FOLLOWER_RATE", "LEADER_REPLICAS", "FOLLOWER_REPLICAS",
           "THROTTLE_BROKER_KEYS", "THROTTLE_TOPIC_KEYS", "kafka_uuid", "new_topic_id", "uuid_of"]

LOCK_TOPIC = "__rebalancer_lock"  # the cluster lock's marker topic (``lock``)

# Replication quotas (KIP-73): a rate on each broker, leader (what it serves) and follower (what it fetches) apart,
# and on each topic the replicas those rates apply to ("partition:broker,...", or "*").
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
THROTTLE_BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE)
THROTTLE_TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


def kafka_uuid(value: uuid.UUID | str | bytes) -> str:
    """A topic id as Kafka prints it (URL-safe base64 of the 16 bytes, no padding), from a UUID or either string form."""
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, uuid.UUID):
        raw = value.bytes
    elif len(value) == 22:
        return value
    else:
        raw = uuid.UUID(value).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def new_topic_id() -> str:
    """A fresh topic id (a random UUID as Kafka prints it). Like Kafka's ``Uuid.randomUuid``, never one that begins
    with '-': the lock's id is the marker topic's, and ``rebalancer unlock LOCK_ID`` would read it as an option (1 id
    in 64 did)."""
    while True:
        topic_id = kafka_uuid(uuid.uuid4())
        if not topic_id.startswith("-"):
            return topic_id


def uuid_of(topic_id: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))
