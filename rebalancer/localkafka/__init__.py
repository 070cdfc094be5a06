"""Real Apache Kafka on this machine, from the Maven Central jars in ``.kafka/<version>/libs``
(``bash scripts/fetch_kafka.sh``), for the tests, the benches and the demo.

- ``3.9``: Kafka 3.9.2 in ZooKeeper mode, with a real ZooKeeper (``ZooKeeperServerMain`` of the ZooKeeper 3.8.4 jar
  Kafka ships) and the brokers under the chroot ``/kafka``; the sources are ``zk://127.0.0.1:PORT/kafka`` and
  ``kafka://...``.
- ``4.x``: Kafka 4.3.1 in KRaft mode: the first three nodes (by id) are broker+controller (a static quorum,
  ``controller.quorum.voters``), the others brokers only; storage formatted with ``kafka-storage format`` first.

Each node is ``java -cp ".kafka/<v>/libs/*" kafka.Kafka DIR/node-<id>/server.properties``: a 256 MiB heap, the
serial collector, C1 only, few threads and a 4 MiB log-cleaner buffer; everything a rebalancer's behaviour depends
on keeps Kafka's default (``broker_config`` overrides any key). Public functions::

    up(directory, version="3.9", *, brokers, racks, scenario, partitions, topics, rf, new_brokers, seed,
       data_mib, broker_config, heap_mib, producer, timeout) -> state dict (also DIR/localkafka.json)
    down(directory, *, missing_ok=False) -> state | None
    local_cluster(directory, version, **up_kwargs)   context manager: up, and down in ``finally``
    status(directory) -> {"processes": [{"name", "pid", "alive", "rss_kib", ...}], "rss_kib", ...}
    kill_broker(directory, broker_id)                kill -9
    restart_broker(directory, broker_id, *, timeout, in_sync=True)
    kill_controller(directory, *, timeout) -> {"controller", "new_controller", ...}
    active_controller(directory) -> int
    add_kafka_parser(sub, parser_class)              the ``kafka`` CLI commands; ``main`` runs them alone

Errors: ``InputError`` (exit 2) for unusable input, ``SimulationError`` (exit 5) when Kafka cannot be started or
driven; each names the broker and the last line of its log where there is one. Layout of the directory and
process identities: ``rebalancer.localkafka.nodes``; scenario loading: ``rebalancer.localkafka.load``.
"""

from __future__ import annotations

from .cli import add_kafka_parser
from .cluster import active_controller, down, kill_broker, kill_controller, local_cluster, restart_broker, up
from .nodes import STATE_FILE, read_state, status

__all__ = ["up", "down", "status", "local_cluster", "kill_broker", "restart_broker", "kill_controller",
           "active_controller", "read_state", "add_kafka_parser", "STATE_FILE"]
