"""The ``kafka`` commands: ``rebalancer kafka up|down|status|kill-broker|restart-broker|kill-controller``.

``add_kafka_parser(sub, parser_class)`` registers them on the main parser's sub-commands; each sets ``func`` to a
``cmd_*(args) -> int``. ``python -m rebalancer.localkafka`` runs the same commands without the ``kafka`` word
(``main``), with the same one-line errors and exit codes as ``rebalancer`` (``rebalancer.errors``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import InputError

__all__ = ["add_kafka_parser", "cmd_up", "cmd_down", "cmd_status", "cmd_kill_broker", "cmd_restart_broker",
           "cmd_kill_controller"]


def _gib(kib: int) -> str:
    return f"{kib / 1024 / 1024:.2f} GiB"


def _down_hint(directory: str) -> str:
    return f"stop with: rebalancer kafka down --dir {directory}"


def cmd_up(args: argparse.Namespace) -> int:
    from .cluster import up
    from .nodes import status

    state = up(args.dir, args.version, brokers=args.brokers, racks=args.racks, scenario=args.scenario,
               partitions=args.partitions, topics=args.topics, rf=args.rf, new_brokers=args.new_brokers,
               seed=args.seed, data_mib=args.data_mib, broker_config=dict(args.broker_config or []),
               heap_mib=args.heap_mib, producer=args.producer, timeout=args.timeout)
    st = status(args.dir)
    mode = "KRaft" if state["kraft"] else "ZooKeeper mode"
    racks = sorted({r for r in state["racks"].values() if r})
    print(f"Kafka {state['kafka_version']} ({mode}) up in {state['startup_seconds']:.1f} s: {len(state['nodes'])}"
          f" broker{'s' if len(state['nodes']) > 1 else ''}{', racks ' + ','.join(racks) if racks else ''}; {st['running']} JVMs, {_gib(st['rss_kib'])} resident")
    loaded = state.get("load")
    if loaded:
        print(f"loaded {state['scenario']}: {loaded['topics']} topics, {loaded['partitions']} partitions,"
              f" {loaded['bytes'] / 1024 / 1024:.0f} MiB in {loaded['seconds']:.1f} s"
              f" ({loaded['producer']} producer, {loaded['mib_per_s']:g} MiB/s)")
    if state.get("new_brokers"):
        print(f"new (empty) brokers: {','.join(map(str, state['new_brokers']))}")
    if state.get("zk_url"):
        print(state["zk_url"])
    print(state["kafka_url"])
    if state.get("sizes"):
        print(f"sizes: {state['sizes']}")
    print(_down_hint(args.dir))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from .cluster import down

    state = down(args.dir)
    assert state is not None
    print(f"local Kafka {state['kafka_version']} in {args.dir} stopped (logs kept in {args.dir}/node-*/)")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .nodes import status

    st = status(args.dir)
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"Kafka {st['kafka_version']} in {st['directory']}: {st['running']} of {len(st['processes'])} processes"
          f" running, {_gib(st['rss_kib'])} resident")
    for p in st["processes"]:
        state = f"pid {p['pid']}, {p['rss_kib'] / 1024:.0f} MiB" if p["alive"] else "stopped"
        roles = "+".join(p["roles"])
        print(f"  {p['name']:<10} {roles:<18} rack {p['rack'] or '-':<4} port {p['port']:<6} {state}")
    for key in ("zk_url", "kafka_url", "sizes"):
        if st.get(key):
            print(st[key])
    return 0


def cmd_kill_broker(args: argparse.Namespace) -> int:
    from .cluster import kill_broker

    kill_broker(args.dir, args.broker)
    print(f"broker {args.broker}: killed (kill -9); bring it back with: rebalancer kafka restart-broker {args.broker}"
          f" --dir {args.dir}")
    return 0


def cmd_restart_broker(args: argparse.Namespace) -> int:
    from .cluster import restart_broker

    done = restart_broker(args.dir, args.broker, timeout=args.timeout, in_sync=not args.no_wait_isr)
    tail = (f", in the ISR of its {done['in_sync_partitions']} partitions after {done['seconds']:.1f} s"
            if done["in_sync_partitions"] is not None else "")
    print(f"broker {args.broker}: restarted (pid {done['pid']}), registered after {done['registered_seconds']:.1f} s{tail}")
    return 0


def cmd_kill_controller(args: argparse.Namespace) -> int:
    from .cluster import kill_controller

    done = kill_controller(args.dir, timeout=args.timeout)
    print(f"controller {done['controller']}: killed; {done['new_controller']} took over after"
          f" {done['failover_seconds']:.1f} s; {done['controller']} restarted ({done['seconds']:.1f} s in all)")
    return 0


# -- parser -------------------------------------------------------------------------------------------------------
def _version(text: str) -> str:
    from .nodes import normalize_version

    try:
        return normalize_version(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {low} to {high}")
        return value
    return parse


def _mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 0 to 1000000 (MiB)")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to 86400 seconds")
    return value


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not KEY=VALUE (a server.properties line)")
    return key.strip(), value.strip()


INT32_MAX = 2**31 - 1


def _add_commands(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("up", help="start ZooKeeper (3.9) and brokers, load a scenario with real data")
    p.add_argument("--dir", required=True, help="directory for the nodes' configs, data and logs, and localkafka.json")
    p.add_argument("--version", type=_version, default="3.9",
                   help="3.9 (Kafka 3.9.2, ZooKeeper mode; default) or 4.x (Kafka 4.3.1, KRaft)")
    p.add_argument("--scenario", help="new-brokers | wix | pinterest | sqooba | file:PATH (as 'sim up'); none:"
                                      " empty brokers")
    p.add_argument("--brokers", type=_int(1, 10_000), help="brokers (the scenario's parameter when one is given;"
                                                            " default 3 without)")
    p.add_argument("--racks", type=_int(1, 1_000), help="racks")
    p.add_argument("--partitions", type=_int(1, 5_000_000), help="scenario: total partitions")
    p.add_argument("--topics", type=_int(1, 1_000_000), help="scenario: topics")
    p.add_argument("--rf", type=_int(1, 16), help="scenario: replication factor")
    p.add_argument("--new-brokers", type=_int(0, 10_000), help="new-brokers scenario: how many empty brokers")
    p.add_argument("--seed", type=_int(0, 2**32 - 1), default=42, help="scenario seed (default 42)")
    p.add_argument("--data-mib", type=_mib, default=0.0,
                   help="MiB of random data to write, shared among the partitions by the scenario's sizes (default 0)")
    p.add_argument("--broker-config", type=_key_value, action="append", metavar="KEY=VALUE",
                   help="a server.properties entry for every node (repeatable), e.g. auto.leader.rebalance.enable=false")
    p.add_argument("--heap-mib", type=_int(64, 16_384), default=256, help="heap of each broker JVM (default 256)")
    p.add_argument("--producer", choices=("auto", "kafka-python", "console"), default="auto",
                   help="how to write the data: kafka-python (fast with the crc32c package) or Kafka's console"
                        " producer; auto picks kafka-python only when crc32c is installed")
    p.add_argument("--timeout", type=_seconds, default=180.0, help="seconds to wait for the brokers (default 180)")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop every process 'kafka up' started from DIR (logs and data are kept)")
    p.add_argument("--dir", required=True)
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("status", help="processes, their memory, and the sources")
    p.add_argument("--dir", required=True)
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("kill-broker", help="kill -9 one broker (its data stays)")
    p.add_argument("broker", type=_int(0, INT32_MAX), help="broker id")
    p.add_argument("--dir", required=True)
    p.set_defaults(func=cmd_kill_broker)

    p = sub.add_parser("restart-broker", help="start a broker again with its config and data; wait until it is in"
                                              " sync")
    p.add_argument("broker", type=_int(0, INT32_MAX), help="broker id")
    p.add_argument("--dir", required=True)
    p.add_argument("--timeout", type=_seconds, default=120.0, help="seconds to wait (default 120)")
    p.add_argument("--no-wait-isr", action="store_true", help="return once registered, before it is back in the ISR")
    p.set_defaults(func=cmd_restart_broker)

    p = sub.add_parser("kill-controller", help="kill -9 the active controller, wait for another, restart it")
    p.add_argument("--dir", required=True)
    p.add_argument("--timeout", type=_seconds, default=120.0, help="seconds to wait (default 120)")
    p.set_defaults(func=cmd_kill_controller)


def add_kafka_parser(sub: Any, parser_class: type[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Register ``kafka`` and its sub-commands on the main parser's sub-parsers (``sub``); returns the ``kafka``
    parser. ``parser_class`` is the main CLI's parser class (one-line errors)."""
    kafka: argparse.ArgumentParser = sub.add_parser("kafka", help="real Apache Kafka on this machine (3.9 with ZooKeeper, or 4.x KRaft) for"
                                         " tests, benches and demos")
    ksub = kafka.add_subparsers(dest="kafka_command", required=True, parser_class=parser_class)
    _add_commands(ksub, parser_class)
    return kafka
