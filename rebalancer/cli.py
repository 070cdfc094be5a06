"""The ``rebalancer`` command line: one sub-command per stage, each working on a run directory.

Errors are one line on stderr with a non-zero exit code (see ``rebalancer.errors``); ``--debug`` adds tracebacks
and library logs.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .errors import INTERNAL_EXIT, InputError, RebalancerError, write_record
from .options import INT32_MAX, add_arguments, number
from .rundir import RunDir

if TYPE_CHECKING:
    from rich.console import Console

    from .execute import ExecOptions
    from .execute.runner import ProgressBar
    from .sim.scenarios import ScenarioParams

__all__ = ["main"]

log = logging.getLogger("rebalancer")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump), matching every other error of the tool."""

    def error(self, message: str) -> NoReturn:
        write_record(InputError(f"{self.prog}: {message} (see --help)"))
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# -- commands -----------------------------------------------------------------------------------------------
def cmd_snapshot(args: argparse.Namespace) -> int:
    from .balance import broker_loads, disk_targets, format_broker_table
    from .snapshot import REPLICAS_FILE, SNAPSHOT_FILE, take_snapshot

    cluster = take_snapshot(args.source, args.out, sizes=args.sizes, timeout=args.timeout,
                            kafka_config_file=args.kafka_config)
    out = Path(args.out)
    dead = [b.id for b in cluster.brokers if not b.alive]
    print(
        f"snapshot of {cluster.meta.get('source', args.source)}: {len(cluster.brokers)} brokers"
        f" ({len(cluster.racks)} racks{', down: ' + ','.join(map(str, dead)) if dead else ''}),"
        f" {len(cluster.topics)} topics, {len(cluster.partitions)} partitions, {cluster.replica_count} replicas"
    )
    if cluster.meta.get("reassignment_in_progress"):
        print(f"WARNING: a reassignment of {len(cluster.meta['reassignment_in_progress'])} partitions is in progress")
    if not cluster.meta.get("sizes_known"):  # the reader says (ZooKeeper holds none; the Admin API reads log dirs)
        print("note: ZooKeeper holds no partition sizes; pass --sizes file://LOG_DIRS.json (kafka-log-dirs --describe)")
    print(f"wrote {out / SNAPSHOT_FILE} and {out / REPLICAS_FILE}")
    if not args.quiet:
        print()
        print(format_broker_table(broker_loads(cluster), disk=disk_targets(cluster) if cluster.meta.get("sizes_known")
                                  else None))
    return 0


def cmd_skew(args: argparse.Namespace) -> int:
    from .balance import broker_loads, disk_targets, format_broker_table
    from .snapshot import load_snapshot

    cluster = load_snapshot(args.run_dir)
    print(format_broker_table(broker_loads(cluster), band_pct=args.band,
                              disk=disk_targets(cluster) if cluster.meta.get("sizes_known") else None))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from .plan import plan_run_dir
    from .plan.options import PlanOptions
    from .plan.summary import format_plan_summary

    brokers = _broker_list(args.brokers) if args.brokers else None
    if args.write_lp:
        _writable_file(args.write_lp, "--write-lp")
    plan = plan_run_dir(args.run_dir, args.mode, brokers=brokers, options=PlanOptions.from_input(args))
    print(format_plan_summary(plan))
    print(f"wrote {Path(args.run_dir) / 'plan.json'}, reassignment.json and rollback.json")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from .analyze import run_analysis

    summary = run_analysis(args.run_dir, master=args.master, history=args.history, in_process=args.in_process)
    before, after = summary["before"], summary.get("after")
    dev = before["max_abs_deviation_pct"]
    print(f"analysed {before['replicas']} replicas on {before['brokers']} brokers with Spark {summary['spark']['version']}"
          f" ({summary['spark']['master']}) in {summary['spark']['seconds']:.1f} s")
    print(f"  max deviation from median: replicas {dev['replicas']:.1f}%, leaders {dev['leaders']:.1f}%, bytes {dev['bytes']:.1f}%")
    if after:
        adev = after["max_abs_deviation_pct"]
        print(f"  after the plan:            replicas {adev['replicas']:.1f}%, leaders {adev['leaders']:.1f}%, bytes {adev['bytes']:.1f}%")
    print(f"  under-replicated partitions: {before['under_replicated_partitions']};"
          f" Wix-underloaded brokers: {before['wix_underloaded'] or 'none'}")
    print(f"wrote {Path(args.run_dir) / 'analysis'}/")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    import json as _json

    from .validate import GateFailure, Thresholds, format_gate_table, validate_run_dir

    th = Thresholds(max_changes_per_partition=args.max_changes_per_partition, max_deviation_pct=args.max_deviation,
                    max_leader_deviation_pct=args.max_leader_deviation,
                    max_disk_deviation_pct=args.max_disk_deviation,
                    max_network_deviation_pct=args.max_network_deviation,
                    max_disk_utilisation_pct=args.max_disk_utilisation,
                    max_network_utilisation_pct=args.max_network_utilisation,
                    max_bytes_to_bound=args.max_bytes_to_bound,
                    max_failover_deviation_pct=args.max_failover_deviation)
    try:
        result = validate_run_dir(args.run_dir, th)
    except GateFailure:
        path = RunDir.of(args.run_dir).validation_result
        print(format_gate_table(_json.loads(path.read_text())))
        raise
    print(format_gate_table(result))
    print(f"all {len(result['gates'])} gates passed in {result['seconds']:.1f} s; Data Docs: {result['docs']}")
    return 0


@contextmanager
def _progress_bar(console: Console | None = None) -> Iterator[ProgressBar | None]:
    """A live progress bar (rich) while an execution or rollback runs, on ``console`` (default: stderr, only when it is
    a terminal; else None, no bar); the lines the run logs to stderr meanwhile are printed above it."""
    if console is None:
        if not sys.stderr.isatty():
            yield None
            return
        from rich.console import Console

        console = Console(stderr=True)
    from rich.progress import BarColumn, Progress, TextColumn

    from .balance import human_bytes

    columns = (TextColumn("{task.description}"), BarColumn(bar_width=30), TextColumn("{task.fields[moves]} moves"),
               TextColumn("{task.fields[size]}"), TextColumn("{task.fields[time]}"))
    with Progress(*columns, console=console, redirect_stderr=True, redirect_stdout=False) as progress:
        task = progress.add_task("", total=1.0, visible=False, moves="", size="", time="")

        def show(batch: int, batches: int, moves_done: int, moves: int, done: int, total: int, elapsed: float,
                 eta: float) -> None:
            frac = (done / total) if total else (moves_done / moves if moves else 1.0)
            progress.update(task, completed=frac, visible=True, description=f"batch {batch}"
                            + (f"/{batches}" if batches else ""), moves=f"{moves_done}/{moves}",
                            size=f"{human_bytes(done)}/{human_bytes(total)}", time=f"{elapsed:.0f}s ETA {eta:.0f}s")

        yield show


def _exec_options(args: argparse.Namespace, bar: ProgressBar | None) -> ExecOptions:
    from .execute import ExecOptions

    return ExecOptions.from_input(args, on_progress=bar, progress=lambda t: print(t, file=sys.stderr, flush=True),
                                  approval=getattr(args, "approval", None))


def cmd_approve(args: argparse.Namespace) -> int:
    from .execute import approve

    record = approve(args.run_dir, by=args.by, decision="rejected" if args.reject else "approved", comment=args.comment)
    print(f"plan {record['plan_hash'][:12]} {record['decision']} by {record['by']} at {record['at']}")
    return 0


def cmd_execute(args: argparse.Namespace) -> int:
    from .execute import execute, open_backend, preflight

    with _progress_bar() as bar:
        opts = _exec_options(args, bar)  # an invalid throttle fails here, before any connection
        preflight(args.run_dir, opts.approval, kind="execute")  # the hash, its approval, the state: before connecting
        with open_backend(args.source, timeout=args.timeout, kafka_config_file=args.kafka_config) as backend:
            state = execute(args.run_dir, backend, opts)
    done = sum(1 for b in state.get("batches", []) if b["status"] == "done")
    skipped = sum(len(b.get("skipped", [])) for b in state.get("batches", []))
    print(f"executed: {done} batch(es) done" + (f", {skipped} drifted move(s) skipped (see execution/state.json)" if skipped else "")
          + "; this run's throttles removed")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from .execute import open_backend, verify

    with open_backend(args.source, timeout=args.timeout, kafka_config_file=args.kafka_config) as backend:
        result = verify(args.run_dir, backend, settle=args.settle)
    differ = len(result["balance_differences"])
    took = result.get("execution_time")
    print(f"verified: {result['partitions_checked']} partitions at their planned replicas with full ISR and preferred"
          " leaders; none of this run's throttles left; "
          + (f"{differ} broker(s) differ from the predicted replica count (changes made elsewhere: see "
             "verification.json)" if differ else "broker counts as predicted"))
    if took:
        from .movement.estimate import duration, rate

        print(f"copied in {duration(took['seconds'])} at {rate(took['throttle_bytes_per_s'])}: the bound was "
              f"{duration(took['bound_seconds'])}" + (f" ({took['to_bound']:.2f}x)" if took["to_bound"] else "")
              + (f", {took['schedule']} expected {duration(took['expected_seconds'])}"
                 f" ({took['to_expected']:.2f}x)" if took.get("to_expected") else ""))
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from .execute import open_backend, preflight, rollback

    with _progress_bar() as bar:
        opts = _exec_options(args, bar)
        preflight(args.run_dir, opts.approval, kind="rollback")
        with open_backend(args.source, timeout=args.timeout, kafka_config_file=args.kafka_config) as backend:
            state = rollback(args.run_dir, backend, opts)
    moved = sum(len(b.get("todo", [])) for b in state["batches"])
    print(f"rolled back: {moved} move(s) reverted, original assignment verified, throttles removed")
    return 0


def cmd_throttle(args: argparse.Namespace) -> int:
    from .execute import ExecOptions, open_backend, preflight, release_throttles

    if not args.clear:
        raise InputError("only --clear is supported: throttles are otherwise set per batch by execute")
    opts = ExecOptions(approval=args.approval, progress=lambda t: print(t, file=sys.stderr, flush=True))
    preflight(args.run_dir, opts.approval)
    with open_backend(args.source, timeout=args.timeout, kafka_config_file=args.kafka_config) as backend:
        result = release_throttles(args.run_dir, backend, opts)
    print(f"removed this run's throttles from {', '.join(result['removed'])}" if result["removed"]
          else "this run has no throttle left to remove")
    if result["kept"]:
        print(f"kept (moves of this run still copying): {', '.join(result['kept'])}")
    if result["foreign"]:
        print(f"throttles set by someone else, left alone: {', '.join(sorted(result['foreign']))}")
    return 0


def cmd_unlock(args: argparse.Namespace) -> int:
    from .execute import open_backend
    from .execute.lock import unlock

    with open_backend(args.source, timeout=args.timeout, kafka_config_file=args.kafka_config) as backend:
        marker = unlock(backend, args.lock_id)
    owner = marker.owner or {}
    print(f"released the cluster lock {marker.topic_id}" + (
        f" ({owner.get('command')} of {owner.get('run_dir')} on {owner.get('host')}, pid {owner.get('pid')})"
        if owner else ""))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import render_report

    path = render_report(args.run_dir)
    print(f"wrote {path} (open it in a browser; charts also in {path.parent / 'report'}/)")
    return 0


def _writable_file(path: str, option: str) -> None:
    """Fail before the work, not after it: the directory a file will be written to must exist, and the file, if it
    exists, must be a regular file (never a device such as /dev/full)."""
    target = Path(path).expanduser()
    if not target.parent.is_dir():
        raise InputError(f"{option} {path}: directory {target.parent} does not exist")
    if target.exists() and not target.is_file():
        raise InputError(f"{option} {path}: not a regular file")


def _broker_list(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--brokers takes comma-separated broker ids, got {text!r}") from None
    bad = [b for b in ids if not 0 <= b <= INT32_MAX]
    if bad:
        raise InputError(f"--brokers: {bad[0]} is not a Kafka broker id (0 to {INT32_MAX})")
    if not ids:
        raise InputError("--brokers is empty")
    if len(set(ids)) != len(ids):
        raise InputError(f"--brokers names a broker twice: {text}")
    return ids


def _scenario_params(args: argparse.Namespace) -> ScenarioParams:
    from .sim.scenarios import ScenarioParams

    return ScenarioParams(brokers=args.brokers, racks=args.racks, partitions=args.partitions, topics=args.topics,
                          rf=args.rf, new_brokers=args.new_brokers, seed=args.seed)


def cmd_sim_run(args: argparse.Namespace) -> int:
    from .sim.service import run_foreground

    return run_foreground(args.zk, scenario=args.scenario, params=_scenario_params(args),
                          acceleration=args.acceleration, state_dir=args.state_dir, attach=args.attach)


def cmd_sim_up(args: argparse.Namespace) -> int:
    from .sim.service import up

    state = up(args.dir, scenario=args.scenario, params=_scenario_params(args), acceleration=args.acceleration,
               zk_hosts=args.zookeeper, chroot=args.chroot, port=args.port)
    print(f"simulated cluster up: {state['zk_url']}  (sizes: {state['sizes']})")
    if state.get("kafka_bootstrap"):
        print(f"Kafka protocol (Admin API): {state['kafka_bootstrap']}")
    print(f"state in {Path(args.dir) / 'sim.json'}; stop with: rebalancer sim down --dir {args.dir}")
    return 0


def cmd_sim_down(args: argparse.Namespace) -> int:
    from .sim.service import down

    state = down(args.dir)
    print(f"simulated cluster at {state['zk_url']} stopped")
    return 0


def cmd_sim_status(args: argparse.Namespace) -> int:
    import json

    from .sim.controller import STATUS_PATH
    from .sim.service import read_state
    from .zkclient import parse_zk_url, zk_session

    state = read_state(args.dir)
    with zk_session(parse_zk_url(state["zk_url"]), timeout=5) as zk:
        data, _ = zk.get(STATUS_PATH)
    status = json.loads(data)
    print(f"{state['zk_url']}: brokers alive {status['alive']}, in-flight moves {status['in_flight']},"
          f" completed {status['completed']}, simulated time {status['sim_time_s']:.1f} s (x{status['acceleration']:g})")
    print(f"Kafka: kafka://{status['bootstrap']}")
    return 0


def cmd_sim_broker(args: argparse.Namespace) -> int:
    from .sim.service import read_state, send_command

    zk_url = args.zk or read_state(args.dir)["zk_url"]
    send_command(zk_url, args.op, args.broker)
    print(f"broker {args.broker}: {'killed' if args.op == 'kill-broker' else 'restarted'}")
    return 0


def cmd_sim_scenario(args: argparse.Namespace) -> int:
    from .formats import write_cluster_json
    from .sim.scenarios import build_scenario

    cluster = build_scenario(args.scenario, _scenario_params(args))
    write_cluster_json(cluster, args.out)
    print(f"wrote {args.out}: {len(cluster.brokers)} brokers, {len(cluster.partitions)} partitions")
    return 0


def cmd_zookeeper(args: argparse.Namespace) -> int:
    import signal
    import threading

    from .zkserver import ZooKeeperServer

    server = ZooKeeperServer(args.dir, port=args.port, tick_ms=args.tick_ms)
    server.start()
    print(f"ZooKeeper on {server.hosts} (data in {args.dir}); Ctrl-C stops it", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5):
        if server.process is None or server.process.poll() is not None:
            raise InputError("ZooKeeper exited; see its log in " + str(server.log_path))
    server.stop()
    return 0


# -- parser -------------------------------------------------------------------------------------------------
def _add_scenario_options(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--scenario", required=required,
                   help="wix | pinterest | new-brokers | sqooba | failover-skew | file:PATH (cluster description JSON)")
    p.add_argument("--brokers", type=_count, help="number of brokers (scenario default otherwise)")
    p.add_argument("--racks", type=_count, help="number of racks")
    p.add_argument("--partitions", type=_count, help="total partitions")
    p.add_argument("--topics", type=_count, help="number of topics")
    p.add_argument("--rf", type=_count, help="replication factor")
    p.add_argument("--new-brokers", type=number(int, minimum=0, maximum=10_000),
                   help="new-brokers scenario: how many empty brokers")
    p.add_argument("--seed", type=number(int, minimum=0, maximum=2**32 - 1), default=42, help="random seed (default 42)")


_positive_float = number(float, above=0, maximum=10**9)
_timeout = number(float, above=0, maximum=86_400, what=" seconds")
_seconds = number(float, minimum=0, maximum=86_400, what=" seconds")
_count = number(int, minimum=1, maximum=INT32_MAX)
_broker_id = number(int, minimum=0, maximum=INT32_MAX, what=" (a Kafka broker id)")
_port = number(int, minimum=1, maximum=65_535)


SOURCE_HELP = ("zk://[user:password@]HOST:PORT[/chroot] (ZooKeeper) or kafka://[user:password@]HOST:PORT[,HOST:PORT]"
               " (Admin API)")


def _kafka_config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kafka-config", metavar="FILE",
                   help="Kafka client config for kafka:// (security.protocol, sasl.*, ssl.* properties, or JSON of "
                        "kafka-python settings); also REBALANCER_KAFKA_CONFIG. Secrets are never printed")


def build_parser() -> argparse.ArgumentParser:
    from .options import option_fields
    from .plan.options import ESTIMATE_OPTIONS, ESTIMATE_PREFIX, PlanOptions
    from .strategies import MODES

    parser = _Parser(prog="rebalancer", description="Kafka rebalance runbook: snapshot, analyse, plan, validate, execute.")
    parser.add_argument("--debug", action="store_true", help="tracebacks and library logs on errors")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("snapshot", help="read a cluster and write RUN_DIR/snapshot.json and replicas.parquet")
    p.add_argument("--source", required=True, help="file://PATH.json, zk://HOST:PORT[/chroot] or kafka://HOST:PORT[,HOST:PORT]")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--sizes", help="file://PATH: kafka-log-dirs --describe JSON with partition sizes (for zk://)")
    _kafka_config_option(p)
    p.add_argument("--timeout", type=_timeout, default=10.0, help="connection timeout in seconds (default 10)")
    p.add_argument("--quiet", action="store_true", help="no per-broker table")
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("skew", help="print the per-broker skew table of a run directory's snapshot")
    p.add_argument("run_dir")
    p.add_argument("--band", type=_positive_float, default=15.0, help="flag deviations beyond this %% (default 15)")
    p.set_defaults(func=cmd_skew)

    p = sub.add_parser("plan", help="plan the smallest change set that restores balance; writes plan.json, "
                                    "reassignment.json, rollback.json")
    p.add_argument("run_dir")
    p.add_argument("--mode", required=True, choices=list(MODES))
    p.add_argument("--brokers", help="comma-separated broker ids: the new brokers (add-brokers) or those to empty")
    add_arguments(p, PlanOptions, [f.name for f in option_fields(PlanOptions) if f.name not in ESTIMATE_OPTIONS])
    add_arguments(p, PlanOptions, ESTIMATE_OPTIONS, prefix=ESTIMATE_PREFIX)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("analyze", help="Spark skew analysis of a run directory (writes RUN_DIR/analysis/)")
    p.add_argument("run_dir")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--history", help="load-history parquet: topic, partition, bytes_in_per_s[, bytes_out_per_s]")
    p.add_argument("--in-process", action="store_true", help="run in this process instead of spark-submit")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("validate", help="Great Expectations gates on RUN_DIR's plan (writes validation/)")
    p.add_argument("run_dir")
    p.add_argument("--max-changes-per-partition", type=_count,
                   help="gate 1 (default 1; the plan's own cap in remove-brokers mode)")
    p.add_argument("--max-deviation", type=_positive_float, default=15.0,
                   help="gate 2: replica count vs the median, %% (default 15; 1 replica of slack)")
    p.add_argument("--max-leader-deviation", type=_positive_float, default=15.0,
                   help="gate 4: leader count vs the median, %% (default 15; 1 leader of slack)")
    p.add_argument("--max-disk-deviation", type=_positive_float,
                   help="load plans: each broker's disk bytes vs its target, %% (default: the plan's band, 5)")
    p.add_argument("--max-network-deviation", type=_positive_float,
                   help="load plans: network in and out vs the target, %% (default: the plan's band, 10), "
                        "unless no worse than before")
    p.add_argument("--max-disk-utilisation", type=_positive_float,
                   help="capacity headroom: disk used after the plan, %% of capacity (default: the plan's, 85)")
    p.add_argument("--max-network-utilisation", type=_positive_float,
                   help="capacity headroom: network in/out, %% of capacity (default: the plan's, 80)")
    p.add_argument("--max-bytes-to-bound", type=_positive_float,
                   help="load plans: bytes copied at most this factor of their lower bound, plus the largest "
                        "partition moved (default 1.15)")
    p.add_argument("--max-failover-deviation", type=_positive_float,
                   help="after any one broker fails, the survivors' leader load vs their mean, %% (default 25), "
                        "unless no worse than before the plan")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("approve", help="record approval (or rejection) of exactly this plan (its content hash)")
    p.add_argument("run_dir")
    p.add_argument("--by", required=True, help="who decides")
    p.add_argument("--reject", action="store_true")
    p.add_argument("--comment", default="")
    p.set_defaults(func=cmd_approve)

    def exec_opts(q: argparse.ArgumentParser, throttle_required: bool = True) -> None:
        from .execute import ExecOptions

        q.add_argument("run_dir")
        q.add_argument("--source", required=True, help=SOURCE_HELP)
        _kafka_config_option(q)
        q.add_argument("--timeout", type=_timeout, default=10.0, help="connection timeout, seconds")
        add_arguments(q, ExecOptions, required=("throttle",) if throttle_required else ())

    p = sub.add_parser("execute", help="execute an approved plan in throttled batches (resumable)")
    exec_opts(p)
    p.add_argument("--approval", help="approval record (default RUN_DIR/approval.json)")
    p.set_defaults(func=cmd_execute)

    p = sub.add_parser("verify", help="check the cluster matches the plan, with no throttle left")
    p.add_argument("run_dir")
    p.add_argument("--source", required=True, help=SOURCE_HELP)
    _kafka_config_option(p)
    p.add_argument("--timeout", type=_timeout, default=10.0)
    p.add_argument("--settle", type=_timeout, default=30.0, metavar="SECONDS",
                   help="how long a partition may look wrong (an ISR shrinking for a moment, metadata catching up) "
                        "before it fails verification (default 30)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("rollback", help="revert the plan's completed moves to rollback.json, throttled")
    exec_opts(p, throttle_required=False)
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser("throttle", help="--clear removes the replication throttles this run set (its ledger); "
                                        "throttles set by others are reported, never removed")
    p.add_argument("run_dir")
    p.add_argument("--source", required=True, help=SOURCE_HELP)
    _kafka_config_option(p)
    p.add_argument("--clear", action="store_true")
    p.add_argument("--approval", help="approval record (default RUN_DIR/approval.json)")
    p.add_argument("--timeout", type=_timeout, default=10.0)
    p.set_defaults(func=cmd_throttle)

    p = sub.add_parser("unlock", help="release a stale cluster lock (after an execution was killed): give its id, "
                                      "as the refusal printed it")
    p.add_argument("lock_id")
    p.add_argument("--source", required=True, help=SOURCE_HELP)
    _kafka_config_option(p)
    p.add_argument("--timeout", type=_timeout, default=10.0)
    p.set_defaults(func=cmd_unlock)

    p = sub.add_parser("report", help="write RUN_DIR/report.html for the approver (needs the analysis)")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_report)

    from .localkafka.cli import add_kafka_parser

    add_kafka_parser(sub, _Parser)  # real Apache Kafka on this machine (rebalancer kafka up|down|status|...)

    sim = sub.add_parser("sim", help="the simulated Kafka cluster (ZooKeeper mode) for demos and tests")
    simsub = sim.add_subparsers(dest="sim_command", required=True, parser_class=_Parser)

    p = simsub.add_parser("up", help="start ZooKeeper and the simulated cluster in the background")
    p.add_argument("--dir", required=True, help="directory for logs, sizes and sim.json")
    _add_scenario_options(p, required=True)
    p.add_argument("--acceleration", type=_positive_float, default=1.0, help="simulated seconds per wall second")
    p.add_argument("--zookeeper", help="HOST:PORT of an existing ZooKeeper (default: start one)")
    p.add_argument("--port", type=_port, help="port for the started ZooKeeper (default: a free one)")
    p.add_argument("--chroot", default="/kafka", help="ZooKeeper chroot for the Kafka metadata (default /kafka)")
    p.set_defaults(func=cmd_sim_up)

    p = simsub.add_parser("down", help="stop what 'sim up' started")
    p.add_argument("--dir", required=True)
    p.set_defaults(func=cmd_sim_down)

    p = simsub.add_parser("status", help="brokers alive, moves in flight, simulated clock")
    p.add_argument("--dir", required=True)
    p.set_defaults(func=cmd_sim_status)

    p = simsub.add_parser("run", help="run the simulated controller in the foreground")
    p.add_argument("--zk", required=True, help="zk://HOST:PORT[/chroot]")
    _add_scenario_options(p, required=False)
    p.add_argument("--attach", action="store_true", help="adopt the metadata already in ZooKeeper")
    p.add_argument("--acceleration", type=_positive_float, default=1.0)
    p.add_argument("--state-dir", help="where log-dirs.json and events.jsonl are written")
    p.set_defaults(func=cmd_sim_run)

    for op, text in (("kill-broker", "kill a broker (its registration vanishes, leaders fail over)"),
                     ("restart-broker", "bring a killed broker back")):
        p = simsub.add_parser(op, help=text)
        p.add_argument("broker", type=_broker_id)
        where = p.add_mutually_exclusive_group(required=True)
        where.add_argument("--dir", help="directory of 'sim up'")
        where.add_argument("--zk", help="zk://HOST:PORT[/chroot] of a running simulator")
        p.set_defaults(func=cmd_sim_broker, op=op)

    p = simsub.add_parser("scenario", help="write a scenario as a cluster description JSON")
    _add_scenario_options(p, required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_sim_scenario)

    p = sub.add_parser("zookeeper", help="run a ZooKeeper server in the foreground (from the pyspark jars)")
    p.add_argument("--dir", required=True, help="data and log directory")
    p.add_argument("--port", type=_port, default=2181)
    p.add_argument("--tick-ms", type=number(int, minimum=1, maximum=60_000), default=2000)
    p.set_defaults(func=cmd_zookeeper)
    return parser


def _configure_logging(debug: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not debug:
        # A client library's background thread (kazoo's connection loop, say) must not print a traceback beside
        # the one-line error the command reports; --debug shows it.
        threading.excepthook = lambda args: log.debug("thread %s: %s", args.thread, args.exc_value)
    if not debug:
        # Great Expectations logs a whole traceback at ERROR when it cannot write its Data Docs (and sets its own
        # loggers' levels); the error we raise says it in one line.
        for handler in logging.getLogger().handlers:
            handler.addFilter(lambda record: not record.name.startswith("great_expectations"))
    # kazoo reports every failed connection attempt; the error we raise says it in one line.
    logging.getLogger("kazoo").setLevel(logging.INFO if debug else logging.CRITICAL)
    # kafka-python likewise logs each refused connection and retried request.
    logging.getLogger("kafka").setLevel(logging.INFO if debug else logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.debug)
    try:
        return int(args.func(args))
    except RebalancerError as exc:
        if args.debug:
            log.exception("error")
        print(f"rebalancer: error: {exc}", file=sys.stderr)
        write_record(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        print("rebalancer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # the machine, not a bug: a full disk, a read-only or missing directory, a long name
        if args.debug:
            raise
        where = f"{str(exc.filename)[:200]}: " if getattr(exc, "filename", None) else ""
        print(f"rebalancer: error: {where}{exc.strerror or exc}", file=sys.stderr)
        write_record(InputError(f"{where}{exc.strerror or exc}"))
        return 2
    except Exception as exc:  # a bug: still one line unless --debug
        if args.debug:
            raise
        print(f"rebalancer: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        write_record(exc, INTERNAL_EXIT)
        return INTERNAL_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
