"""Execution, verification and rollback of an approved plan, resumable, with the cluster as the source of truth.

``RUN_DIR/execution/state.json`` records the batches (fixed when the execution first starts) and each batch's
status: ``pending`` -> ``submitting`` -> ``submitted`` -> ``done`` (or ``failed``); steps found drifted are listed
and skipped, never overwritten. A restarted run reads the state (and refuses one whose steps are not the approved
plan's), then asks the cluster: a submitted batch whose partitions reached their targets is done, one still in
flight is waited for, and nothing finished is submitted again. Throttles are set per batch and recorded in the run's
throttle ledger (``execution/throttles.json``, see ``throttle``); when the execution ends, whatever happened, exactly
what the ledger records is removed, except the throttles of this run's moves still copying (ZooKeeper mode cannot
cancel them); throttles set by anyone else are reported and left alone.

Refusals, checked in this order so that nothing is written to the cluster (``preflight`` runs before any
connection): an invalid option, a plan whose content hash does not match its changes, no approval record or one
for another hash or not approving, an execution state that does not match the plan; then, connected: a
reassignment in flight that this run did not start, another execution holding the cluster lock (``execute.lock``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

from ..access.backend import Backend
from ..access.connect import open_backend
from ..errors import (
    ClusterBusy,
    ForeignReassignment,
    InputError,
    RebalancerError,
    SourceError,
    TransientError,
    VerificationFailed,
)
from ..formats import atomic_write_json, read_json
from ..movement.batches import TOTAL, NoRoom, Step, batch_floor, make_batches, peak_disk, steps_of
from ..movement.estimate import batch_cost
from ..movement.pace import per_broker_option, throttle_option, total_option
from ..movement.rate import parse_rate
from ..movement.schedule import DiskRoom, Scheduler, per_broker_of
from ..options import given, option
from ..planfile.result import Change, Plan, content_hash, load_plan
from ..retry import poll as poll_until
from ..retry import retry_call
from ..rundir import RunDir
from ..strategies import EXECUTION_SCHEDULES, resolve_schedule, schedule_option
from . import throttle as thr
from .lock import ClusterLock
from .progress import RunProgress
from .state import BatchState, ExecutionState
from .watch import ExecutionFailed, Watcher

__all__ = ["ExecOptions", "ExecutionFailed", "VerificationFailed", "open_backend", "preflight", "approve", "execute",
           "verify", "rollback", "release_throttles"]

log = logging.getLogger(__name__)


# batch, batches (0: not known ahead, the rolling schedule), moves done, moves, bytes done, bytes, elapsed s, ETA s
ProgressBar = Callable[[int, int, int, int, int, int, float, float], None]


@dataclass(frozen=True)
class ExecOptions:
    """How an execution, rollback or throttle release runs. The operator's options are declared here, once
    (``rebalancer.options``): the CLI's flags, the runbook's keywords and the DAG form's params are generated from
    these fields, and a setting left out keeps its default here (``from_input``)."""

    throttle: int = throttle_option()  # bytes/s
    # "batches": each batch after the previous one's slowest move; "rolling": a move starts as soon as its brokers
    # have room (``schedule.Scheduler``; needs a backend that adds moves to those in flight, kafka://); "auto": rolling
    # where the backend can, batches otherwise (zk://) (``strategies.resolve_schedule``)
    schedule: str = schedule_option()
    per_broker: int | None = per_broker_option()  # None: PER_BROKER for batches, ROLLING_PER_BROKER rolling
    total: int = total_option()
    max_batch_bytes: int | None = option(None, text=partial(parse_rate, what="--max-batch-bytes"), param=None,
                                         help="batches: cap on the bytes one batch copies, e.g. 100GB")
    order: str = option("bound", choices=("bound", "smallest", "largest"), param=None,  # ``batches.make_batches``
                        help="batches: how they are formed: bound (the broker with the most bytes left kept busy, "
                             "the fewest seconds in all), or the smallest or largest moves first")
    poll: float = option(1.0, above=0, maximum=3600, unit=" seconds", param="poll_s",
                         help="seconds between progress checks", title="Progress poll interval (s)",
                         section="Execution")
    timeout_factor: float = option(3.0, above=0, maximum=10**9, param=None,
                                   help="batch timeout = factor x bytes/throttle of the busiest broker + "
                                        "--min-timeout")
    min_timeout: float = option(120.0, minimum=0, maximum=86_400, unit=" seconds", param=None,
                                 help="seconds every batch may take beyond the factor above (a rollback: how long "
                                      "it waits for moves still copying)")
    # a destination broker down this long fails the batch (one restarting, back within it, completes the batch:
    # failing at once rolled back good copies)
    destination_grace: float = option(60.0, minimum=0, maximum=86_400, unit=" seconds", param="destination_grace_s",
                                      help="seconds a destination broker may be down (restarting) before the batch "
                                           "fails and the run rolls back", title="Destination grace (s)",
                                      section="Execution")
    settle_grace: float = 15.0         # a move no longer in flight and not at its target this long fails the batch
    # brokers learn of config changes asynchronously (ZooKeeper notifications), and a move must never start unthrottled
    throttle_settle: float = option(2.0, minimum=0, maximum=86_400, unit=" seconds", param=None,
                                    help="seconds between setting throttles and starting a batch (brokers apply "
                                         "config changes asynchronously)")
    approval: str | None = None        # path of the approval record (default RUN_DIR/approval.json)
    progress: Callable[[str], None] | None = None   # log lines (default: stderr)
    report_every: float = 5.0          # seconds between progress lines while a batch copies
    # Live progress for a terminal: (batch, batches, moves done, moves, bytes done, bytes, elapsed s, eta s).
    on_progress: ProgressBar | None = None

    @classmethod
    def from_input(cls, values: Mapping[str, Any] | argparse.Namespace = MappingProxyType({}),
                   **settings: Any) -> ExecOptions:
        """The options an operator gave (CLI flags, runbook arguments, DAG params), by field name: text options
        (the throttle, the batch cap) as text, a bad one a one-line error; one left out or None keeps its default.
        ``settings``: the fields that are not options (``progress``, ``approval``), None likewise left out."""
        return cls(**given(cls, values), **{k: v for k, v in settings.items() if v is not None})


# -- approval ---------------------------------------------------------------------------------------------------
def approve(run_dir: str | Path, *, by: str, decision: str = "approved", comment: str = "") -> dict[str, Any]:
    """Record a decision on exactly this plan (its content hash)."""
    if decision not in ("approved", "rejected"):
        raise InputError("decision must be approved or rejected")
    plan = _checked_plan(Path(run_dir))
    record = {"plan_hash": plan.hash, "decision": decision, "by": by, "comment": comment,
              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(RunDir.of(run_dir).approval, record)
    return record


def preflight(run_dir: str | Path, approval: str | None = None, kind: str | None = None) -> Plan:
    """What every command that changes the cluster checks before it connects: the plan matches its content hash, the
    approval record approves exactly that hash, and (``kind`` "execute" or "rollback") a state to resume holds only
    the plan's steps. Returns the plan."""
    run = Path(run_dir)
    plan = _checked_plan(run)
    _check_approval(run, plan, approval)
    if kind is not None:
        _resumable_state(run, plan, kind)
        thr.Ledger(RunDir(run).ledger)  # a ledger that cannot be read would leak throttles: refuse now
        _check_writable(RunDir(run).execution)
    return plan


def _check_writable(directory: Path) -> None:
    """The execution files can be written (a read-only or full run directory is refused before connecting)."""
    created = False
    probe = directory / f".write-check-{os.getpid()}"
    try:
        if not directory.is_dir():
            directory.mkdir(parents=True)
            created = True
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"x" * 65536)  # about what a state file and the ledger need
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot write to {directory}: {exc.strerror or exc}") from None
    finally:
        for undo in (probe.unlink, directory.rmdir if created else None):
            try:
                if undo is not None:
                    undo()
            except OSError:
                pass


def _checked_plan(run: Path) -> Plan:
    plan = load_plan(run)
    if content_hash(plan.changes) != plan.hash:
        raise InputError(f"{run / 'plan.json'}: its changes do not match its content hash (edited by hand?); re-plan")
    bad = next((c for c in plan.changes if len(set(c.replicas_after)) != len(c.replicas_after)
                or len(c.replicas_after) != len(c.replicas_before)), None)
    if bad is not None:
        raise InputError(f"{run / 'plan.json'}: {bad.topic}-{bad.partition} would get replicas {list(bad.replicas_after)} "
                         f"(from {list(bad.replicas_before)}): not a valid reassignment; re-plan")
    return plan


def _check_approval(run: Path, plan: Plan, path: str | None) -> dict[str, Any]:
    p = Path(path) if path else RunDir(run).approval
    if not p.exists():
        raise InputError(f"no approval record at {p}: nothing touches the cluster before this plan is approved")
    record = read_json(p)
    if not isinstance(record, dict) or not isinstance(record.get("plan_hash"), str) or record["plan_hash"] != plan.hash:
        raise InputError(f"{p} approves plan {str(record.get('plan_hash'))[:12] if isinstance(record, dict) else '?'}"
                         f", not this plan {plan.hash[:12]}: refusing to execute")
    if record.get("decision") != "approved":
        raise InputError(f"{p}: the plan was {record.get('decision')}, not approved")
    return record


# -- state ------------------------------------------------------------------------------------------------------
def _state_path(run: Path, kind: str) -> Path:
    """Where an execution ("execute") or a rollback ("rollback") keeps its state."""
    return RunDir(run).state if kind == "execute" else RunDir(run).rollback_state


# The rolling schedule throttles ahead this many times what starts next (``Scheduler.upcoming``) whenever what starts
# next needs throttling: one round of config calls covers several starts. A throttle on a partition not moving yet
# limits nothing (its followers are in sync), though KIP-73 counts their fetches against the leader's rate.
AHEAD_DEPTH = 2


def _schedule(opts: ExecOptions, backend: Backend) -> str:
    """The schedule an execution starts with (a resumed one keeps its own)."""
    if opts.schedule not in EXECUTION_SCHEDULES:
        raise InputError(f"schedule must be one of {', '.join(EXECUTION_SCHEDULES)}, not {opts.schedule!r}")
    if opts.schedule == "rolling" and not backend.can_add_moves:
        raise InputError(f"--schedule rolling needs a backend that adds moves to those in flight (kafka://); "
                         f"{backend.name} cannot: use --schedule batches")
    return resolve_schedule(opts.schedule, backend.can_add_moves)


def _new_state(plan: Plan, opts: ExecOptions, kind: str, steps: list[Step], schedule: str = "batches",
               room: DiskRoom | None = None) -> ExecutionState:
    """A fresh state. Batches: all of them made now, each within the disk room its brokers have then (``room``:
    ``batches.fit_room``; a plan no order fits fails here, before anything moves). Rolling: the steps, and batches
    made as moves start (``_run_rolling``), except the leader-only steps (reorders, nothing to copy), batched now to
    run first."""
    per_broker = per_broker_of(schedule, opts.per_broker)
    moving = [s for s in steps if schedule == "rolling" and not s.leader_only]
    first = [s for s in steps if schedule != "rolling" or s.leader_only]
    try:
        batches = make_batches(first, per_broker=per_broker, total=opts.total, max_bytes=opts.max_batch_bytes,
                               order=opts.order, room=room, batch_cost=batch_cost(opts.throttle, opts.poll))
    except NoRoom as exc:
        raise ExecutionFailed(f"no order of the plan's moves keeps every disk under its limit: {exc}") from None
    state: ExecutionState = {
        "kind": kind, "plan_hash": plan.hash, "throttle_bytes_per_s": opts.throttle,
        "params": {"per_broker": per_broker, "total": opts.total, "max_batch_bytes": opts.max_batch_bytes, "order": opts.order},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "finished": False,
        "batches": [{"index": i, "status": "pending", "steps": [s.to_dict() for s in b], "skipped": [], "events": []}
                    for i, b in enumerate(batches)]}
    if schedule == "rolling":
        state["schedule"] = "rolling"
        state["steps"] = [s.to_dict() for s in moving]
        for b in state["batches"]:
            b["leaders_only"] = True
    elif room:  # what each limited broker holds at most as the batches run (``batches.peak_disk``)
        peak = peak_disk(batches, room.held)
        state["disk_peak"] = {str(b): {"peak": peak.get(b, (room.held.get(b, 0), -1))[0], "limit": room.limit[b]}
                              for b in sorted(room.limit)}
    return state


def _save(path: Path, state: ExecutionState) -> None:
    """Written before and after every change to the cluster (hundreds of times a rolling run): compact, in the C
    encoder (an indented state of 700 moves took 80 ms a write, a quarter of a rolling run on the simulator)."""
    atomic_write_json(path, state, compact=True)


def _say(opts: ExecOptions, text: str) -> None:
    (opts.progress or (lambda t: print(t, file=sys.stderr, flush=True)))(text)


# -- connection hiccups -----------------------------------------------------------------------------------------------
def _retrying(fn: Callable[[], Any], what: str, patience: float = 60.0) -> Any:
    """Call ``fn``, riding out what a backend reports as transient (``TransientError``: a ZooKeeper session lost,
    a broker or the controller unreachable for a moment; the clients reconnect), every 0.5 s for ``patience``
    seconds (``retry.retry_call``)."""
    try:
        return retry_call(fn, on=TransientError, patience=patience,
                          before_retry=lambda exc: log.warning("%s while %s; retrying", exc, what))
    except TransientError as exc:
        raise SourceError(f"{exc} while {what}, and no reconnect within {patience:.0f} s; rerun the same "
                          "command to resume") from None


# -- the batch loop -----------------------------------------------------------------------------------------------
def _current(backend: Backend, tps: set[tuple[str, int]]) -> dict[tuple[str, int], Any]:
    """The moving partitions only: a poll must not read the whole cluster."""
    return dict(backend.read_partitions(tps))


def _run_batch(backend: Backend, state: ExecutionState, batch: BatchState, opts: ExecOptions,
               state_path: Path, total_batches: int, lock: ClusterLock, ledger: thr.Ledger,
               run: RunProgress | None = None, floor_after: float = 0.0) -> None:
    """One batch, start to done. ``run``: the whole run's progress (the batches' schedule), ``floor_after``: the
    least time the batches after this one take (the sum of their busiest brokers at the throttle)."""
    label = f"batch {batch['index'] + 1}/{total_batches}"
    todo = _start_batch(backend, state, batch, opts, state_path, label, lock, ledger)
    if run is not None:  # at their target already, or drifted (skipped, reported)
        waiting = {_key(s) for s in todo or []}
        for d in batch["steps"]:
            if _key(st := Step.from_dict(d)) not in waiting:
                run.finish(st)
    if todo is None:
        return
    # While this batch copies, throttle the next one's replicas too, so it can start without a settle wait.
    upcoming = _next_throttles(backend, state, batch)
    if upcoming[0]:
        try:
            thr.apply(backend, ledger, state["throttle_bytes_per_s"], upcoming)
        except TransientError as exc:  # best effort: the next batch sets its own throttles before it starts
            log.warning("could not throttle the next batch ahead (%s); it will be throttled when it starts", exc)
            upcoming = (set(), {})
    _wait(backend, state, batch, todo, opts, state_path, total_batches, run, floor_after)
    # Leadership: a preferred election where the preferred leader changed.
    _elect(backend, todo, batch, opts, label)
    thr.release(backend, ledger, keep=upcoming)  # narrow this run's throttles to exactly the next batch's
    batch["status"] = "done"
    batch["finished_at"] = time.time()
    if run is not None:  # what an operator (or the DAG's log) reads of a run in flight
        state["progress"] = run.snapshot(batch["finished_at"], floor_after)
    _save(state_path, state)


def _start_batch(backend: Backend, state: ExecutionState, batch: BatchState, opts: ExecOptions, state_path: Path,
                 label: str, lock: ClusterLock, ledger: thr.Ledger,
                 ours_elsewhere: frozenset[tuple[str, int]] = frozenset(), submit: bool = True,
                 throttled: set[tuple[Any, ...]] | None = None) -> list[Step] | None:
    """Submit a batch that is not submitted yet (or find it submitted by the run that crashed), throttled first;
    returns the moves to wait for, or None when none is left to do (the batch is then done). ``ours_elsewhere``:
    partitions of this run's other batches in flight (the rolling schedule's), not someone else's. ``submit``
    False: throttle it and stop there (``batch["settle_until"]`` says when ``_submit_batch`` may submit it; unset
    when the throttles were in force already: at once).
    ``throttled``: the steps whose throttles this run has in force (throttled ahead): not set again."""
    steps = [Step.from_dict(d) for d in batch["steps"]]
    tps = {s.tp for s in steps}
    flight = {tp: t for tp, t in backend.in_flight().items() if tp not in ours_elsewhere}
    if batch["status"] in ("pending", "submitting"):
        # Ours only if we were submitting this very batch and the in-flight set is exactly its partitions.
        ours = batch["status"] == "submitting" and flight and set(flight) <= tps and all(
            tuple(flight[s.tp]) == s.after for s in steps if s.tp in flight)
        if flight and not ours:
            t, p = sorted(flight)[0]
            raise ForeignReassignment(f"a reassignment this run did not start is in flight ({len(flight)} partitions, e.g. {t}-{p});"
                              " refusing to touch the cluster until it finishes")
        if ours:
            batch["status"] = "submitted"  # the crash came after the znode was created
    if batch["status"] in ("pending", "submitting"):
        current = _current(backend, tps)
        live = backend.live_brokers()
        todo, done_already = [], 0
        batch["skipped"] = []
        for s in steps:
            part = current.get(s.tp)
            have = part.replicas if part else None
            if have == s.after:
                done_already += 1
            elif have == s.before:
                todo.append(s)
            else:
                batch["skipped"].append({**s.to_dict(), "found": list(have) if have else None,
                                         "reason": "drifted: the partition no longer has the replicas the plan started from"})
                _say(opts, f"{label}: skipping {s.topic}-{s.partition}: replicas are "
                           f"{list(have) if have else 'gone'}, the plan expected {list(s.before)}")
        batch["todo"] = [s.to_dict() for s in todo]
        if not todo:
            batch["status"] = "done"
            batch["finished_at"] = time.time()
            _save(state_path, state)
            return None
        # A move completes only when its whole target is in sync: a broker that is down, whether the move adds it
        # or keeps it, blocks it until the batch times out. Refused at once (destinations named first).
        down = sorted({(b not in s.added, b, s.topic, s.partition) for s in todo for b in s.after if b not in live})
        if down:
            kept, b, t, p = down[0]
            then = "roll back again" if state.get("kind") == "rollback" else "rerun, or roll back"
            prefix = "rollback: " if state.get("kind") == "rollback" else ""
            what = (f"the target of {t}-{p} keeps broker {b}, which is down (a move completes only when its whole "
                    "target is in sync;" if kept else f"destination broker {b} of {t}-{p} is down (")
            raise ExecutionFailed(f"{prefix}batch {batch['index'] + 1} cannot start: {what} nothing submitted; bring "
                                  f"it back and {then})")
        lock.check()  # never submit under a lock someone released
        brokers, topics = thr.batch_throttles(todo, live)
        ahead = throttled is not None and all(_key(s) in throttled for s in todo)
        changed = not ahead and thr.apply(backend, ledger, state["throttle_bytes_per_s"], (brokers, topics))
        if throttled is not None:
            throttled.update(_key(s) for s in todo)
        batch["throttled"] = {"brokers": sorted(brokers), "topics": sorted(topics)}
        # Set just now: give the brokers time to see them (pre-set ones have been in force already).
        settle = opts.throttle_settle if changed else 0.0
        if not submit:
            if settle:  # else submitted at once, under the lock just checked
                batch["settle_until"] = time.time() + settle
            return todo
        time.sleep(settle)
        _submit_batch(backend, state, batch, todo, opts, state_path, label, lock)
    return [Step.from_dict(d) for d in batch.get("todo", batch["steps"])]


def _submit_batch(backend: Backend, state: ExecutionState, batch: BatchState, todo: list[Step], opts: ExecOptions,
                  state_path: Path, label: str, lock: ClusterLock) -> None:
    """Submit a throttled batch's moves (recorded ``submitting`` first: a crash in between is found on resume)."""
    if batch.pop("settle_until", None) is not None:
        lock.check()  # throttled a moment ago; still never submit under a lock someone released
    batch["status"] = "submitting"
    batch["submitting_at"] = time.time()  # a controller may start copying before submit() returns
    _save(state_path, state)
    backend.submit({s.tp: s.after for s in todo})
    batch["status"] = "submitted"
    batch["submitted_at"] = time.time()
    _save(state_path, state)
    _say(opts, f"{label}: submitted {len(todo)} moves "
               f"({sum(s.bytes for s in todo)} bytes) at {state['throttle_bytes_per_s']} B/s")


def _elect(backend: Backend, todo: list[Step], batch: BatchState, opts: ExecOptions, label: str) -> None:
    """Make each moved partition's preferred replica its leader (``_Elections``); when some are still led by
    another replica after ``max(min_timeout, 30)`` s the batch is still done (its data moved), the leaders left are
    reported, and ``verify`` names them."""
    _leaders_left(batch, _elect_preferred(backend, {s.tp: s.after[0] for s in todo}, opts,
                                          max(opts.min_timeout, 30.0)), opts, label)


def _leaders_left(batch: BatchState, left: Mapping[tuple[str, int], int], opts: ExecOptions, label: str) -> None:
    if left:
        (t, p), want = sorted(left.items())[0]
        batch["leaders_not_preferred"] = sorted(f"{t}-{p}" for t, p in left)
        _say(opts, f"{label}: {len(left)} partition(s) still not led by "
                   f"their preferred replica (e.g. {t}-{p}, broker {want}); a leaders plan or Kafka's auto leader "
                   "rebalancing will restore them")


class _Elections:
    """Preferred leader elections until each partition of ``want`` is led by the broker given (its first replica),
    or ``timeout`` seconds pass, a poll at a time (``step``). An election cannot hand leadership to a replica that
    is down or out of the ISR (a broker restarting, a replica catching up): a partition is elected when its
    preferred replica is in the ISR, and again while the leadership has not moved (a controller failing over may
    drop an election)."""

    def __init__(self, want: Mapping[tuple[str, int], int], opts: ExecOptions, timeout: float) -> None:
        self.deadline = time.monotonic() + timeout
        self.pending = dict(want)
        self.asked: dict[tuple[str, int], float] = {}  # when each partition's last election was asked for
        self.opts = opts
        self.blocked = False  # an election by someone else kept ours from being asked at the last step

    def step(self, backend: Backend, seen: Mapping[tuple[str, int], Any] | None = None) -> bool:
        """One look and, where due, one election; True once nothing is left to do (``pending``: those still led
        by another broker when the time ran out). ``seen``: the partitions as the caller's poll just read them
        (read again where it lacks one)."""
        current = (seen if seen is not None and all(tp in seen for tp in self.pending)
                   else _retrying(partial(_current, backend, set(self.pending)), "reading partitions"))
        self.pending = {tp: b for tp, b in self.pending.items()
                        if current.get(tp) is not None and current[tp].leader != b}
        if self.pending and self.blocked and time.monotonic() > self.deadline:
            raise ExecutionFailed("a preferred leader election by someone else did not finish")
        if not self.pending or time.monotonic() > self.deadline:
            return True
        now = time.monotonic()
        # In the ISR now, and not asked for within the last few polls (an election answers at once through the Admin
        # API; through ZooKeeper the controller takes a moment, and metadata lags it).
        ready = sorted(tp for tp, b in self.pending.items() if b in current[tp].isr
                       and now - self.asked.get(tp, -math.inf) >= max(2.0, 4 * self.opts.poll))
        if ready:
            self.blocked = _retrying(backend.election_running, "reading the election")
            if self.blocked:  # someone else's: ours is asked for once it ends
                return False
            _retrying(partial(backend.elect_preferred, ready), "electing preferred leaders")
            self.asked.update({tp: time.monotonic() for tp in ready})
        return False


def _elect_preferred(backend: Backend, want: Mapping[tuple[str, int], int], opts: ExecOptions,
                     timeout: float) -> dict[tuple[str, int], int]:
    """``_Elections`` until done; returns the partitions still led by another broker."""
    elections = _Elections(want, opts, timeout)
    while not elections.step(backend):
        time.sleep(opts.poll)
    return elections.pending


def _next_throttles(backend: Backend, state: ExecutionState, batch: BatchState) -> tuple[set[int], dict[str, Any]]:
    """Throttles of the next pending batch (assuming its steps start from where the plan expects)."""
    later = [b for b in state["batches"] if b["index"] > batch["index"] and b["status"] == "pending"]
    if not later:
        return set(), {}
    steps = [Step.from_dict(d) for d in later[0]["steps"]]
    return thr.batch_throttles(steps, _retrying(backend.live_brokers, "reading brokers"))


def _sizes(backend: Backend, todo: list[Step], current: Mapping[tuple[str, int], Any]
           ) -> dict[tuple[str, int], tuple[int, int, int]] | None:
    """Per moving partition: (bytes on its new replicas, bytes its leader holds, number of new replicas), or None
    when the backend cannot see replica sizes (ZooKeeper holds none)."""
    sizes = _retrying(lambda: backend.replica_sizes({s.tp for s in todo}), "reading replica sizes")
    if sizes is None:
        return None
    out = {}
    for s in todo:
        per = sizes.get(s.tp, {})
        p = current.get(s.tp)
        leader = p.leader if p is not None and p.leader is not None else s.before[0]
        out[s.tp] = (sum(per.get(b, 0) for b in s.added), per.get(leader, 0), len(s.added))
    return out


def _poll(backend: Backend, tps: set[tuple[str, int]]
          ) -> tuple[dict[tuple[str, int], Any], dict[tuple[str, int], Any], set[int]]:
    """One look at the moving partitions: (in flight, their current state, live brokers)."""
    seen = _retrying(lambda: backend.observe(tps), "reading the reassignments and partitions")
    return seen.flight, dict(seen.partitions), seen.live


def _watcher(state: ExecutionState, batch: BatchState, todo: list[Step], opts: ExecOptions, state_path: Path,
             label: str) -> Watcher:
    return Watcher(todo, cast(dict[str, Any], batch), opts, rate=state["throttle_bytes_per_s"], now=time.time(),
                   label=label, say=partial(_say, opts), save=partial(_save, state_path, state))


def _wait(backend: Backend, state: ExecutionState, batch: BatchState, todo: list[Step], opts: ExecOptions,
          state_path: Path, total_batches: int, run: RunProgress | None = None, floor_after: float = 0.0) -> None:
    """Poll until every move of the batch reached its target (``watch.Watcher``), reporting progress: the batch's,
    and the whole run's (``run``; ``floor_after``: see ``_run_batch``)."""
    label = f"batch {batch['index'] + 1}/{total_batches}"
    watch = _watcher(state, batch, todo, opts, state_path, label)
    if run is None:
        run = RunProgress(todo, state["throttle_bytes_per_s"], watch.started)
    counted: set[Step] = set()
    last_report = 0.0
    while True:
        flight, current, live = _poll(backend, watch.tps)
        now = time.time()
        due = watch.due(now)
        moving = watch.moving()
        sizes = _sizes(backend, moving, current) if due else None
        finished = watch.check(flight, current, live, now, due=due, sizes=sizes)
        for s in finished:
            if s not in counted:
                counted.add(s)
                run.finish(s)
        if len(finished) == len(todo):
            return
        if due:
            run.sample(now, moving, sizes)
        floor = watch.eta(now) + floor_after  # this batch's time left, then the later batches'
        if opts.on_progress is not None:
            opts.on_progress(batch["index"] + 1, total_batches, run.moves_done, run.moves, run.bytes_done, run.bytes,
                             now - run.started, run.eta(now, floor))
        elif now - last_report >= opts.report_every or last_report == 0:
            _say(opts, f"{label}: {len(finished)}/{len(todo)} moves of the batch; run {run.line(now, floor)}")
            last_report = now
        time.sleep(opts.poll)


def _state_steps(state: Mapping[str, Any]) -> list[Step]:
    """Every step a state names (what it would submit: a batch's steps and its todo list, the rolling schedule's
    steps)."""
    return [*(Step.from_dict(d) for b in state["batches"] for key in ("steps", "todo") for d in b.get(key, [])),
            *(Step.from_dict(d) for d in state.get("steps", []))]


class _Allowed:
    """The steps an execution (or a rollback) of this plan may submit: ``(topic, partition, before, after) in it``."""

    def __init__(self, plan: Plan, kind: str) -> None:
        self.reorders: dict[tuple[str, int], tuple[int, ...]] = {}
        if kind == "execute":
            self.steps = {_key(s) for s in _plan_steps(plan)}
            return
        self.steps = {_key(st) for c in plan.changes for h in _waypoints(c)
                      for st in steps_of(c.topic, c.partition, h, c.replicas_before, c.size_bytes)}
        # A cancelled move leaves the original replicas in another order (Kafka rebuilds the list): rollback
        # may reorder them back, which copies nothing.
        self.reorders = {(c.topic, c.partition): c.replicas_before for c in plan.changes}

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        topic, partition, before, after = key
        original = self.reorders.get((topic, partition))
        return key in self.steps or (original is not None and tuple(after) == original
                                     and sorted(before) == sorted(original))


def _allowed(plan: Plan, kind: str) -> _Allowed:
    return _Allowed(plan, kind)


def _resumable_state(run: Path, plan: Plan, kind: str) -> ExecutionState | None:
    """The state to resume (checked against the plan), or None to start afresh."""
    path = _state_path(run, kind)
    state = read_json(path) if path.exists() else None
    if not isinstance(state, dict) or state.get("plan_hash") != plan.hash or state.get("kind") != kind \
            or state.get("finished"):
        return None
    _check_state(path, state, _allowed(plan, kind))
    return cast(ExecutionState, state)  # its steps checked against the plan; the rest is ours


def _check_state(path: Path, state: Mapping[str, Any], allowed: _Allowed) -> None:
    """A resumed state may only hold steps of the approved plan: an edited state.json must not submit anything else."""
    try:
        steps = _state_steps(state)
        extra = [s for s in steps if (s.topic, s.partition, s.before, s.after) not in allowed]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InputError(f"{path}: malformed execution state; move it away to start this execution over") from None
    if extra:
        s = extra[0]
        raise InputError(f"{path}: the execution state does not match the approved plan ({s.topic}-{s.partition} "
                         f"{list(s.before)} -> {list(s.after)} is not one of its steps); refusing to resume it")


def _our_moves_in_flight(backend: Backend, states: list[Mapping[str, Any] | None]) -> list[Step]:
    """Steps of this run (submitted, not known done) whose reassignment is still in flight towards their target."""
    flight = backend.in_flight()
    out = []
    for state in states:
        for b in (state or {}).get("batches", []):
            if b.get("status") in ("submitting", "submitted", "failed"):
                out += [st for d in b.get("todo", b.get("steps", [])) if
                        (st := Step.from_dict(d)).tp in flight and tuple(flight[st.tp]) == st.after]
    return out


def _refuse_foreign(backend: Backend, state: Mapping[str, Any] | None) -> None:
    """Someone else's reassignment in flight: refuse before the lock is taken or anything is written."""
    ours = {s.tp: s.after for s in _our_moves_in_flight(backend, [state])}
    flight = backend.in_flight()
    foreign = sorted(tp for tp, target in flight.items() if ours.get(tp) != tuple(target))
    if foreign:
        t, p = foreign[0]
        raise ForeignReassignment(f"a reassignment this run did not start is in flight ({len(foreign)} partitions, "
                                  f"e.g. {t}-{p}); refusing to touch the cluster until it finishes")


def _release(run: Path, backend: Backend, ledger: thr.Ledger, opts: ExecOptions) -> None:
    """Remove this run's throttles, except those of its moves still copying (reported)."""
    rd = RunDir(run)
    states = [read_json(p) if p.exists() else None for p in (rd.state, rd.rollback_state)]
    copying = _retrying(lambda: _our_moves_in_flight(backend, states), "listing reassignments")
    # Every broker of a move still copying keeps its rate, a dead one too: it throttles again when it is back.
    keep = thr.batch_throttles(copying, {b for s in copying for b in (*s.before, *s.after)}) if copying else (set(), {})
    _retrying(lambda: thr.release(backend, ledger, keep), "removing throttles", patience=120.0)
    waiting = sorted(set(ledger.brokers) - {str(b) for b in keep[0]}, key=int)
    if waiting:
        _say(opts, f"could not remove this run's throttle from broker(s) {', '.join(waiting)} (down); run "
                   f"'{thr.clear_command(run, backend.source)}' once they are back")
    if copying:
        _say(opts, f"kept the throttles of {len(copying)} move(s) of this run still copying (e.g. "
                   f"{copying[0].topic}-{copying[0].partition}); run '{thr.clear_command(run, backend.source)}' "
                   "once they finish")


@contextmanager
def _failing(state: ExecutionState, batch: BatchState, state_path: Path) -> Iterator[None]:
    """A batch that fails is recorded failed, with the run's one-line reason; a refusal (``ClusterBusy``) leaves
    it as it was: it never started."""
    try:
        yield
    except ClusterBusy:
        raise
    except RebalancerError as exc:
        batch["status"] = "failed"
        batch["error"] = str(exc)
        state["failed"] = str(exc)
        _save(state_path, state)
        raise


@dataclass
class _Wave:
    """A batch of the rolling schedule in flight: its moves, their watcher, those already freed, and once they all
    copied, its preferred leader elections."""

    batch: BatchState
    todo: list[Step]
    watch: Watcher
    freed: set[Step]
    elections: _Elections | None = None


def _run_rolling(backend: Backend, state: ExecutionState, opts: ExecOptions, state_path: Path, lock: ClusterLock,  # noqa: C901
                 ledger: thr.Ledger, room: DiskRoom | None = None) -> None:
    """The rolling schedule (``schedule.Scheduler``): a move starts as soon as its brokers have room, each start a
    batch of its own in the state (``pending`` -> ``submitting`` -> ``submitted`` -> ``done``, resumed as batches
    are), several in flight at once and watched in one poll; a batch whose moves all reached their targets gets its
    preferred leaders elected and this run's throttles narrowed to the moves still copying. Nothing waits in a
    sleep: a batch just throttled is submitted once ``throttle_settle`` has passed, and elections are asked and
    checked a poll at a time, while the other moves are watched. The leader-only batches made up front (reorders)
    run first, as batches. A backend that cannot add moves to those in flight (a rolling state resumed through
    zk://) starts a batch only when none is in flight. ``room``: the brokers' disk before the plan and their limits
    (``schedule.DiskRoom``, from the plan): a move starts only once its destinations have room for it, and the state
    records each limited broker's peak (``disk_peak``); a move none can make room for fails the run, one line."""
    rate = state["throttle_bytes_per_s"]
    for batch in state["batches"]:
        if batch.get("leaders_only") and batch["status"] != "done":
            with _failing(state, batch, state_path):
                _run_batch(backend, state, batch, opts, state_path, len(state["batches"]), lock, ledger)
    steps = [Step.from_dict(d) for d in state["steps"]]
    waves = [b for b in state["batches"] if not b.get("leaders_only")]
    done = {_key(Step.from_dict(d)) for b in waves if b["status"] == "done" for d in b["steps"]}
    params = state["params"]
    # A broker's moves in flight must outlast the loop's reaction to a finish (a poll, then a start's round of
    # calls), or it idles between moves: at least twice the bytes the throttle moves in that time
    # (``Scheduler.min_bytes``), the reaction measured as the loop runs (first guess: a poll and a settle).
    reaction = opts.poll + opts.throttle_settle
    sched = Scheduler([s for s in steps if _key(s) not in done], per_broker=int(params["per_broker"]),
                      total=int(params["total"]), min_bytes=int(2 * rate * reaction),
                      room=room.after(s for s in steps if _key(s) in done) if room else None, rate=rate)

    def record_disk() -> None:
        if room:
            state["disk_peak"] = {str(b): {"peak": sched.disk_peak.get(b, 0), "limit": room.limit[b]}
                                  for b in sorted(room.limit)}

    active: dict[int, _Wave] = {}
    staged: _Wave | None = None  # throttled, waiting for the brokers to see the throttles
    run = RunProgress(steps, rate, time.time(), done=[s for s in steps if _key(s) in done])
    last_report = sizes_at = 0.0
    # Each start writes the state (write-ahead): on a plan of tens of thousands of moves that is megabytes, so starts
    # are spaced to keep the writing under a tenth of the time (a small state: no wait).
    save_cost, last_start = 0.0, -math.inf
    ahead: list[Step] = []  # throttled ahead of their start (``Scheduler.upcoming``)
    throttled: set[tuple[Any, ...]] = set()  # steps whose throttles this run has in force
    # Narrowing the throttles to the moves still copying reads and writes configs on every broker and topic
    # involved: at most a tenth of the time (a finished move's throttle costs nothing but the in-sync followers'
    # fetches KIP-73 counts against the rate; the end of the run removes them all).
    narrow_cost, narrowed_at = 0.0, -math.inf

    def throttle_ahead() -> None:
        """Throttle what starts next while the rest copies, as the batches do for the next batch: a move whose
        throttles are in force already starts without the settle wait. Each throttling is a round of config reads
        and writes with the loop waiting (0.13 s on the simulator), so when what starts next needs one, it covers
        what starts after that too (``AHEAD_DEPTH``)."""
        nonlocal ahead
        if all(_key(s) in throttled for s in sched.upcoming()):
            return
        ahead = sched.upcoming(AHEAD_DEPTH)
        new = [s for s in ahead if _key(s) not in throttled]
        try:
            thr.apply(backend, ledger, rate, thr.batch_throttles(new, _retrying(backend.live_brokers,
                                                                                "reading brokers")))
            throttled.update(_key(s) for s in new)
        except TransientError as exc:  # best effort: each batch sets its own throttles before it starts
            log.warning("could not throttle the next moves ahead (%s); each will be throttled when it starts", exc)

    def flying() -> frozenset[tuple[str, int]]:
        return frozenset(s.tp for w in active.values() for s in w.todo if s not in w.freed)

    def admit(batch: BatchState, started: list[Step], resumed: bool, reached: frozenset[Any] | set[Any] = frozenset()
              ) -> None:
        nonlocal staged
        label = f"batch {batch['index'] + 1}"
        others = flying() | frozenset(Step.from_dict(d).tp for b in waves if b is not batch
                                      and b["status"] != "done" for d in b.get("todo", b["steps"]))
        with _failing(state, batch, state_path):
            todo = _start_batch(backend, state, batch, opts, state_path, label, lock, ledger, others,
                                submit=resumed, throttled=throttled) or []
        waiting = {_key(s) for s in todo} - reached
        for s in started:
            if resumed:
                sched.start(s, time.monotonic())
            if _key(s) not in waiting:  # at its target already, or drifted (skipped, reported)
                sched.finish(s, time.monotonic())
                run.finish(s)
        if todo:
            wave = _Wave(batch, todo, _watcher(state, batch, todo, opts, state_path, label), set())
            for s in todo:
                if _key(s) in reached:
                    wave.watch.finished.add(s)
                    wave.freed.add(s)
            if batch["status"] == "pending":
                staged = wave
            else:
                active[batch["index"]] = wave
                if not resumed:
                    throttle_ahead()

    def start_ready() -> None:
        nonlocal last_start, staged
        while True:
            if staged is not None:
                if time.time() < staged.batch.get("settle_until", 0.0):
                    return
                wave, staged = staged, None
                with _failing(state, wave.batch, state_path):
                    _submit_batch(backend, state, wave.batch, wave.todo, opts, state_path, wave.watch.label, lock)
                sched.copying(wave.todo, time.monotonic())
                wave.watch.started = wave.batch["submitted_at"]
                active[wave.batch["index"]] = wave
                throttle_ahead()
            if active and (not backend.can_add_moves or time.monotonic() - last_start < 10 * save_cost):
                return
            started = sched.ready(time.monotonic(), copying=False)  # until submitted (below, once throttled)
            if not started:
                return
            last_start = time.monotonic()
            batch: BatchState = {"index": len(state["batches"]), "status": "pending",
                                 "steps": [s.to_dict() for s in started], "skipped": [], "events": []}
            state["batches"].append(batch)
            waves.append(batch)
            admit(batch, started, resumed=False)

    # Resumed: each batch not done is found in flight, at its target or to submit again. A step whose partition's
    # next step started later had reached its target (one step of a partition in flight at a time).
    latest: dict[tuple[str, int], int] = {}
    for b in waves:
        if b["status"] != "done":
            for d in b["steps"]:
                st = Step.from_dict(d)
                latest[st.tp] = max(latest.get(st.tp, -1), st.seq)
    for batch in list(waves):
        if batch["status"] != "done":
            admit(batch, [Step.from_dict(d) for d in batch["steps"]], resumed=True,
                  reached={_key(st) for d in batch["steps"] if (st := Step.from_dict(d)).seq < latest[st.tp]})
    while True:
        top = time.monotonic()
        start_ready()
        if not active and staged is None:
            record_disk()
            if not sched.done:  # the caps let a move start whenever nothing is in flight: only disk room stops it
                _save(state_path, state)
                raise ExecutionFailed(f"the rolling schedule stopped with {len(sched.left)} throttle(s) still to "
                                      f"copy: {sched.stuck() or 'no move can start'}")
            return
        copying = [w for w in active.values() if w.elections is None]
        electing = {tp for w in active.values() if w.elections is not None for tp in w.elections.pending}
        flight, current, live = _poll(backend, set(flying()) | electing)  # one look for the elections too
        now = time.time()
        due = now - sizes_at >= opts.report_every
        if due:  # replica sizes read once for every move copying, not once per batch
            sizes_at = now
            every = [s for w in copying for s in w.todo if s not in w.freed]
            seen = _sizes(backend, every, current)
            run.sample(now, every, seen)
        for wave in copying:
            with _failing(state, wave.batch, state_path):
                finished = wave.watch.check(flight, current, live, now, due=due, sizes=seen if due else None)
            for s in finished:
                if s not in wave.freed:
                    wave.freed.add(s)
                    sched.finish(s, time.monotonic())
                    run.finish(s)
            if len(finished) == len(wave.todo):
                wave.elections = _Elections({s.tp: s.after[0] for s in wave.todo}, opts, max(opts.min_timeout, 30.0))
        start_ready()  # refill the freed room before the elections
        completed = []
        for index, wave in active.items():
            if wave.elections is not None:
                with _failing(state, wave.batch, state_path):
                    if wave.elections.step(backend, current):
                        completed.append(index)
        if completed:
            for index in completed:
                wave = active.pop(index)
                _leaders_left(wave.batch, wave.elections.pending if wave.elections else {}, opts, wave.watch.label)
                wave.batch["status"] = "done"
                wave.batch["finished_at"] = time.time()
            if time.monotonic() - narrowed_at >= 10 * narrow_cost:
                narrowed_at = time.monotonic()
                still = [s for w in active.values() for s in w.todo if s not in w.freed]
                if staged is not None:
                    still += staged.todo
                thr.release(backend, ledger, keep=thr.batch_throttles(still + ahead, live))
                throttled.intersection_update(_key(s) for s in still + ahead)
                narrow_cost = time.monotonic() - narrowed_at
            # what an operator (or the DAG's log) reads of a run in flight, written with each finished batch
            state["progress"] = run.snapshot(now)
            record_disk()
            saving = time.monotonic()
            _save(state_path, state)
            save_cost = time.monotonic() - saving
        if opts.on_progress is not None:
            opts.on_progress(len(waves), 0, run.moves_done, run.moves, run.bytes_done, run.bytes, now - run.started,
                             run.eta(now))
        elif now - last_report >= opts.report_every or last_report == 0:
            _say(opts, f"rolling: {len(waves)} batch(es) started, {len(flying())} move(s) in flight; {run.line(now)}")
            last_report = now
        reaction = 0.8 * reaction + 0.2 * (opts.poll + time.monotonic() - top)
        want = int(2 * rate * reaction)
        if not 0.8 * sched.min_bytes <= want <= 1.25 * sched.min_bytes:
            sched.set_min_bytes(want)
        time.sleep(opts.poll)


def _run_batches(backend: Backend, state: ExecutionState, opts: ExecOptions, state_path: Path, lock: ClusterLock,
                 ledger: thr.Ledger) -> None:
    """The batches one after another, the whole run's progress kept across them."""
    rate = state["throttle_bytes_per_s"]
    batches = state["batches"]
    steps = [[Step.from_dict(d) for d in b["steps"]] for b in batches]
    run = RunProgress([s for ss in steps for s in ss], rate, time.time(),
                      done=[s for b, ss in zip(batches, steps, strict=True) if b["status"] == "done" for s in ss])
    # the least time the batches after each take: the sum of their busiest throttles (``batches.batch_floor``)
    after = [0.0] * len(batches)
    for i in range(len(batches) - 2, -1, -1):
        after[i] = after[i + 1] + batch_floor([steps[i + 1]]) / rate
    for i, batch in enumerate(batches):
        if batch["status"] != "done":
            with _failing(state, batch, state_path):
                _run_batch(backend, state, batch, opts, state_path, len(batches), lock, ledger, run, after[i])


def _run(run: Path, backend: Backend, plan: Plan, opts: ExecOptions, kind: str,
         make_steps: Callable[[], list[Step]]) -> ExecutionState:
    state_path = _state_path(run, kind)
    allowed = _allowed(plan, kind)
    # disk limits the plan knows (its load summary): the execution's moves wait for room; a rollback's start from
    # where the plan left the brokers, which the summary does not describe
    room = DiskRoom.of_plan(plan.summary) if kind == "execute" else None
    state = _resumable_state(run, plan, kind)
    schedule = _schedule(opts, backend)
    if state is not None:
        state["throttle_bytes_per_s"] = opts.throttle
    # Refusals first, read-only: another execution's lock, then someone else's reassignment in flight.
    lock = ClusterLock(backend, run, command=kind, say=lambda text: _say(opts, text))
    _retrying(lock.refuse_if_held, "reading the cluster lock")
    _retrying(lambda: _refuse_foreign(backend, state), "listing reassignments")
    _retrying(lock.acquire, "taking the cluster lock")
    ledger = None
    try:
        ledger = thr.Ledger(RunDir(run).ledger)
        if state is None:
            steps = make_steps()
            unknown = [st for st in steps if (st.topic, st.partition, st.before, st.after) not in allowed]
            if unknown:  # a bug, not an input: the steps come from the checked plan
                raise ExecutionFailed(f"internal check: step {unknown[0]} is not one of the plan's")
            state = _new_state(plan, opts, kind, steps, schedule, room)
        _save(state_path, state)
        theirs = thr.foreign(backend, ledger)
        if theirs:
            _say(opts, f"throttles set by someone else are left alone: {', '.join(sorted(theirs))}")
        if state.get("schedule") == "rolling":
            _run_rolling(backend, state, opts, state_path, lock, ledger, room)
        else:
            _run_batches(backend, state, opts, state_path, lock, ledger)
        state["finished"] = True
        state["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        state.pop("failed", None)
        _save(state_path, state)
        return state
    except TransientError as exc:
        raise SourceError(f"{exc} during {kind}; rerun the same command to resume") from None
    finally:
        # Whatever happened: exactly this run's throttles go (retried through a reconnect), then the lock.
        try:
            if ledger is not None:
                _release(run, backend, ledger, opts)
        finally:
            _retrying(lock.release, "releasing the cluster lock")


def _plan_steps(plan: Plan) -> list[Step]:
    out: list[Step] = []
    for c in plan.changes:
        out += steps_of(c.topic, c.partition, c.replicas_before, c.replicas_after, c.size_bytes)
    return out


def _key(s: Step) -> tuple[Any, ...]:
    return (s.topic, s.partition, s.before, s.after)


def _waypoints(c: Change) -> list[tuple[int, ...]]:
    """The replica lists a partition passes through on its way to the plan's target (the target included)."""
    return [st.after for st in steps_of(c.topic, c.partition, c.replicas_before, c.replicas_after, c.size_bytes)]


def execute(run_dir: str | Path, backend: Backend, opts: ExecOptions) -> ExecutionState:
    run = Path(run_dir)
    plan = preflight(run, opts.approval, kind="execute")
    if not plan.changes:
        nothing = _new_state(plan, opts, "execute", [])  # not written: there is nothing to resume
        nothing["finished"] = True
        return nothing
    existing = load_state(run)
    if existing and existing.get("plan_hash") == plan.hash and existing.get("finished"):
        return existing  # already executed: a rerun is a no-op
    return _run(run, backend, plan, opts, "execute", lambda: _plan_steps(plan))


def rollback(run_dir: str | Path, backend: Backend, opts: ExecOptions) -> ExecutionState:
    """Revert every partition of the approved plan that this run moved back to its recorded original replicas
    (only partitions found in a state the plan's steps produce; anything else was changed by someone else)."""
    run = Path(run_dir)
    plan = preflight(run, opts.approval, kind="rollback")
    ours = {(c.topic, c.partition) for c in plan.changes}
    # In-flight moves of this plan: the Admin API cancels them (Kafka reverts them to their original replicas);
    # ZooKeeper mode cannot, so wait for them to finish and revert them afterwards.
    flight = _retrying(backend.in_flight, "listing reassignments")
    if backend.can_cancel:
        waypoints = {(c.topic, c.partition): set(_waypoints(c)) for c in plan.changes}
        # Only moves this plan started (their target is one of the plan's steps); anyone else's are not ours to cancel.
        mine = sorted(tp for tp, target in flight.items() if tuple(target) in waypoints.get(tp, ()))
        if mine:
            _say(opts, f"rollback: cancelling {len(mine)} move(s) in flight")
            backend.cancel(mine)
    else:
        # A move completes only when its whole target is in sync: one that needs a broker that is down never does,
        # and ZooKeeper mode cannot cancel it. Refuse now, as execute does, before anything is submitted.
        _refuse_waiting_on_down_brokers(backend, {tp: t for tp, t in flight.items() if tp in ours})
    flight, ended = poll_until(partial(_retrying, backend.in_flight, "listing reassignments"),
                               lambda now: not set(now) & ours, timeout=opts.min_timeout, interval=opts.poll)
    if not ended:
        (t, p), target = sorted((tp, target) for tp, target in flight.items() if tp in ours)[0]
        waits = sorted(set(target) - _retrying(backend.live_brokers, "reading brokers"))
        on = f"; it waits for broker(s) {', '.join(map(str, waits))}, which are down" if waits else ""
        if backend.can_cancel:
            raise ExecutionFailed(f"rollback: the reassignment of {t}-{p} is still in flight {opts.min_timeout:g} s "
                                  f"after asking Kafka to cancel it{on} (nothing submitted; bring them back, or "
                                  "wait for it to finish, and roll back again)")
        raise ExecutionFailed(f"rollback: the reassignment of {t}-{p} is still in flight after {opts.min_timeout:g} s "
                              f"and ZooKeeper mode cannot cancel it{on} (nothing submitted; let it finish, or roll "
                              "back through kafka://, which can cancel it)")

    def steps() -> list[Step]:
        # From wherever each partition is now (planned target, or midway through a multi-step change) back to
        # its original replicas; partitions in any other state were changed by someone else and are left alone.
        current = {p.tp: p.replicas for p in backend.read_cluster().partitions}
        out: list[Step] = []
        for c in plan.changes:
            have = current.get((c.topic, c.partition))
            if have is None or have == c.replicas_before:
                continue
            if sorted(have) == sorted(c.replicas_before) or have in _waypoints(c):
                # a reorder (after a cancel) or the way back from one of the plan's waypoints
                out += steps_of(c.topic, c.partition, have, c.replicas_before, c.size_bytes)
        return out

    state = _run(run, backend, plan, opts, "rollback", steps)
    # Leadership too: an outage hands a dead broker's partitions to other replicas, and a partition whose replicas are
    # already the original ones has no step whose election would give it back. Every partition of the plan that has
    # its original replicas is led by its original preferred replica again, elected once that replica is in sync.
    current = _retrying(lambda: _current(backend, ours), "reading partitions")
    want = {(c.topic, c.partition): c.replicas_before[0] for c in plan.changes
            if (p := current.get((c.topic, c.partition))) is not None and p.replicas == c.replicas_before}
    left = _elect_preferred(backend, want, opts, max(opts.min_timeout, 30.0))
    if left:
        (t, p_), b = sorted(left.items())[0]
        _say(opts, f"rollback: {len(left)} partition(s) still not led by their original preferred replica (e.g. "
                   f"{t}-{p_}, broker {b}: not back in sync)")
    result = verify(run_dir, backend, expect="original", write=True)
    state["verified"] = result["passed"]
    return state


def _refuse_waiting_on_down_brokers(backend: Backend, flight: Mapping[tuple[str, int], list[int]]) -> None:
    """ZooKeeper mode: refuse a rollback whose moves in flight wait for a broker that is down (nothing submitted)."""
    if not flight:
        return
    live = _retrying(backend.live_brokers, "reading brokers")
    down = sorted((b, t, p) for (t, p), target in flight.items() for b in target if b not in live)
    if down:
        b, t, p = down[0]
        raise ExecutionFailed(f"rollback cannot start: the move of {t}-{p} in flight needs broker {b}, which is down, "
                              "and ZooKeeper mode cannot cancel it (nothing submitted; bring it back and roll back "
                              "again, or roll back through kafka://, which can cancel the move)")


def release_throttles(run_dir: str | Path, backend: Backend, opts: ExecOptions) -> dict[str, Any]:
    """``rebalancer throttle --clear RUN_DIR``: remove what this run's ledger records (not the throttles of its moves
    still copying), under the cluster lock; throttles set by others are reported, never removed."""
    run = Path(run_dir)
    preflight(run, opts.approval)
    ledger = thr.Ledger(RunDir(run).ledger)
    before = ledger.entities()
    if before:
        lock = ClusterLock(backend, run, command="throttle --clear", say=lambda text: _say(opts, text))
        _retrying(lock.acquire, "taking the cluster lock")
        try:
            _release(run, backend, ledger, opts)
        finally:
            _retrying(lock.release, "releasing the cluster lock")
    return {"removed": [e for e in before if e not in ledger.entities()], "kept": ledger.entities(),
            "foreign": thr.foreign(backend, ledger)}


def _partition_problems(plan: Plan, parts: Mapping[tuple[str, int], Any], expect: str) -> list[dict[str, Any]]:
    problems: list[dict[str, Any]] = []
    for c in plan.changes:
        want = c.replicas_after if expect == "planned" else c.replicas_before
        p = parts.get((c.topic, c.partition))
        if p is None:
            problems.append({"partition": f"{c.topic}-{c.partition}", "problem": "missing"})
        elif p.replicas != want:
            problems.append({"partition": p.name, "problem": "replicas", "expected": list(want), "found": list(p.replicas)})
        elif set(p.isr) != set(p.replicas):
            problems.append({"partition": p.name, "problem": "isr", "expected": list(want), "found": list(p.isr)})
        elif p.leader != want[0]:
            problems.append({"partition": p.name, "problem": "leader", "expected": want[0], "found": p.leader})
    return problems


def verify(run_dir: str | Path, backend: Backend, *, expect: str = "planned", write: bool = True,
           settle: float = 30.0, poll: float = 1.0) -> dict[str, Any]:
    """What this plan changed is as it should be: every planned partition has its target (or, after rollback,
    original) replicas in order, a full ISR and its preferred leader leading; none of this run's throttles is left
    (throttles set by others are reported, not counted).

    A live cluster moves under a check: an ISR shrinks for a moment, metadata lags a finished move, a leader
    waits for auto leader rebalancing. A partition problem fails only if it lasts ``settle`` seconds (re-read every
    ``poll``). Partitions the plan did not change, and topics created or deleted elsewhere, are not checked: the
    broker replica counts against the plan's prediction are reported (``balance_differences``), never failed."""
    run = Path(run_dir)
    plan = load_plan(run)
    tps = {(c.topic, c.partition) for c in plan.changes}
    ledger = thr.Ledger(RunDir(run).ledger)
    theirs = thr.foreign(backend, ledger)
    # Recorded and not removed yet, unless on a broker that is down now (the Admin API cannot reach its config;
    # a rate alone throttles nothing once the topic lists are gone): reported, removed by a later throttle --clear.
    unreachable = {f"brokers/{b}" for b in backend.unreachable_brokers({int(b) for b in ledger.brokers})}
    recorded: dict[str, dict[str, str]] = {e: {} for e in ledger.entities() if e not in unreachable}

    def seen_throttles() -> dict[str, dict[str, str]]:
        # Throttles removed a moment ago may still show on the broker asked (KRaft metadata, ZooKeeper
        # notifications reach it later): read again within the settle time, like the partitions.
        return {e: keys for (t, n), keys in _retrying(backend.throttle_configs, "reading throttles").items()
                if (e := f"{t}/{n}") not in theirs or theirs[e] != keys}

    def look() -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
        parts = _retrying(lambda: backend.read_partitions(tps), "reading partitions")
        return _partition_problems(plan, parts, expect), seen_throttles()

    (problems, throttles), _ = poll_until(look, lambda seen: not any(seen), timeout=settle, interval=poll)
    cluster = _retrying(backend.read_cluster, "reading the cluster")
    throttles.update({e: {} for e in recorded if e not in throttles})
    counts: dict[int, int] = {b.id: 0 for b in cluster.brokers}
    for p in cluster.partitions:
        for b in p.replicas:
            counts[b] = counts.get(b, 0) + 1
    predicted = {b["broker"]: b["replicas_after" if expect == "planned" else "replicas_before"]
                 for b in plan.summary.get("brokers", [])}
    balance = [{"broker": b, "predicted": predicted[b], "actual": counts.get(b, 0)}
               for b in sorted(predicted) if predicted[b] != counts.get(b, 0)]
    result = {"expect": expect, "plan_hash": plan.hash, "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "partitions_checked": len(plan.changes), "problems": problems, "throttles_left": throttles,
              "foreign_throttles": theirs, "throttles_on_down_brokers": sorted(unreachable),
              "balance_differences": balance, "passed": not problems and not throttles}
    if expect == "planned" and (took := _execution_time(run, plan)) is not None:
        result["execution_time"] = took
    if write:
        atomic_write_json(RunDir(run).verification(expect), result)
    if not result["passed"]:
        what = []
        if problems:
            first = problems[0]
            what.append(f"{len(problems)} partition(s) not as {expect} (e.g. {first['partition']}: {first['problem']})")
        if throttles:
            what.append(f"throttles left on {', '.join(sorted(throttles))}")
        raise VerificationFailed("verification failed: " + "; ".join(what))
    return result


def _execution_time(run: Path, plan: Plan) -> dict[str, Any] | None:
    """How long the execution copied (its first submit to its last batch at its target, wall seconds) against the
    bound at its throttle (``estimate``: no order of the moves is faster) and the time the estimate expected for
    its schedule and caps (the approval request's, where they were the plan's), or None before any batch
    copied."""
    from ..movement.estimate import estimate

    state = load_state(run)
    if state is None:
        return None
    batches = state.get("batches", [])
    starts = [b.get("submitting_at") or b.get("submitted_at") for b in batches]
    ends = [b.get("copied_at") for b in batches]
    first = min((t for t in starts if isinstance(t, (int, float))), default=None)
    last = max((t for t in ends if isinstance(t, (int, float))), default=None)
    throttle = state.get("throttle_bytes_per_s")
    if first is None or last is None or not isinstance(throttle, int) or throttle < 1:
        return None
    params = state.get("params") or {}
    ran = estimate(plan.changes, throttle, schedule=str(state.get("schedule") or "batches"),
                   per_broker=params.get("per_broker"), total=int(params.get("total") or TOTAL),
                   max_bytes=params.get("max_batch_bytes"), order=str(params.get("order") or "bound"))
    bound, expected = ran.bound_seconds, ran.expected_seconds
    took = max(0.0, last - first)
    return {"seconds": round(took, 3), "bound_seconds": round(bound, 3), "throttle_bytes_per_s": throttle,
            "to_bound": round(took / bound, 3) if bound > 0 else None, "schedule": ran.schedule,
            "expected_seconds": round(expected, 3), "to_expected": round(took / expected, 3) if expected > 0 else None}


def load_state(run_dir: str | Path) -> ExecutionState | None:
    path = RunDir.of(run_dir).state
    return cast(ExecutionState, json.loads(path.read_text())) if path.exists() else None
