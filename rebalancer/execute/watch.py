"""Watching a submitted batch's moves, a poll at a time: one rule per method, plain data in, no cluster, no clock.

The executor polls the cluster (what is in flight, each moving partition's replicas, the live brokers, now and then
the new replicas' sizes) and hands each look to ``Watcher.check``, which applies the rules in order:

1. ``arrived``: the moves at their target (all of them: the batch copied).
2. ``vanished``: a move no longer in flight and not at its target past ``settle_grace`` fails the batch (on a real
   cluster the controller finishes a move before every broker's metadata shows it: a poll in that gap is not one).
3. ``target_down``: a broker of a move's target (one it adds, or one it keeps: a move completes only when its whole
   target is in sync) down past ``destination_grace`` fails it; said when it goes down and when it is back.
4. ``stalled``: past the batch's time limit (``timeout_factor`` x its busiest broker's bytes / throttle +
   ``min_timeout``), a batch that copies nothing fails; where the backend sees replica sizes, only when no byte
   reached a new replica for ``min_timeout`` and no producer traffic explains it (``progress.CopyProgress``): a move
   that producers outpace is reported once, not killed.
5. ``eta``: the seconds left, from the rate seen once a move finished, from bytes / throttle before that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..errors import ExecutionFailed
from ..movement.batches import Step
from ..movement.estimate import transfer
from .progress import QUOTA_WINDOW_S, CopyProgress

__all__ = ["ExecutionFailed", "Limits", "Sizes", "Watcher", "busiest_seconds"]

# partition -> (bytes on its new replicas, bytes its leader holds, number of new replicas)
Sizes = Mapping[tuple[str, int], tuple[int, int, int]]


class Limits(Protocol):
    """The patience the watcher keeps (``runner.ExecOptions`` has them)."""

    @property
    def settle_grace(self) -> float: ...
    @property
    def destination_grace(self) -> float: ...
    @property
    def min_timeout(self) -> float: ...
    @property
    def timeout_factor(self) -> float: ...
    @property
    def report_every(self) -> float: ...


def busiest_seconds(steps: Sequence[Step], rate: float) -> float:
    """The steps' busiest broker's bytes in or out (``estimate.transfer``) over ``rate``: the least time they can
    copy in."""
    return max((max(v) for v in transfer(steps).values()), default=0) / rate


class Watcher:
    """One batch's moves (``todo``) under the rules of the module doc. ``batch``: its state record (``copied_at``
    and ``ingest_outpaces_throttle`` are written into it, then ``save`` is called); ``say``: a line for the
    operator; ``now``: the time it is watched from."""

    def __init__(self, todo: Sequence[Step], batch: dict[str, Any], limits: Limits, *, rate: float, now: float,
                 label: str, say: Callable[[str], None], save: Callable[[], None]) -> None:
        self.todo, self.batch, self.limits, self.rate = list(todo), batch, limits, rate
        self.label, self.say, self.save = label, say, save
        self.started: float = batch.get("submitted_at") or now  # the rolling executor sets it once it submits
        self.expected = busiest_seconds(self.todo, rate)
        self.timeout = limits.min_timeout + limits.timeout_factor * self.expected
        self.tps = {s.tp for s in self.todo}
        self.total_bytes = sum(s.bytes for s in self.todo)
        self.finished: set[Step] = set()  # seen at their target: a partition's next step may move it on since
        self.dead_since: dict[int, float] = {}
        self.gone_since: dict[tuple[str, int], float] = {}
        self.last_sizes = float("-inf")
        self.progress = CopyProgress(float(rate), now)  # a resumed batch gets a patience window from here
        self.warned_ingest = False

    def moving(self) -> list[Step]:
        return [s for s in self.todo if s not in self.finished]

    def due(self, now: float) -> bool:
        """Whether the next look should carry the new replicas' sizes (every ``report_every`` seconds)."""
        return now - self.last_sizes >= self.limits.report_every

    def check(self, flight: Mapping[tuple[str, int], Any], current: Mapping[tuple[str, int], Any], live: set[int],
              now: float, *, due: bool = False, sizes: Sizes | None = None) -> list[Step]:
        """One look at the cluster: the moves at their target now (all of them: the batch copied); raises
        ``ExecutionFailed`` by rules 2-4. ``due``: this look read the sizes (``sizes``, None where the backend sees
        none) for the time-limit rule."""
        finished = self.arrived(flight, current)
        if len(finished) == len(self.todo):
            self.batch["copied_at"] = now  # every move at its target (elections and throttle changes follow)
            return finished
        self.vanished(flight, current, now)
        self.target_down(live, now)
        if due:
            self.last_sizes = now
            self.stalled(sizes, live, now)
        return finished

    def arrived(self, flight: Mapping[tuple[str, int], Any], current: Mapping[tuple[str, int], Any]) -> list[Step]:
        """Rule 1: the moves no longer in flight whose partition has their target replicas (once seen, kept)."""
        self.finished.update(s for s in self.todo if s.tp not in flight and current.get(s.tp) is not None
                             and current[s.tp].replicas == s.after)
        return [s for s in self.todo if s in self.finished]

    def vanished(self, flight: Mapping[tuple[str, int], Any], current: Mapping[tuple[str, int], Any],
                 now: float) -> None:
        """Rule 2: a move out of flight, not at its target, for ``settle_grace`` (cancelled or reverted elsewhere)."""
        for s in self.todo:
            if s.tp in flight or s in self.finished:
                self.gone_since.pop(s.tp, None)
                continue
            since = self.gone_since.setdefault(s.tp, now)
            if now - since < self.limits.settle_grace:
                continue  # not listed any more, not at its target yet: ask again before calling it lost
            have = current.get(s.tp)
            if have is not None and have.replicas not in (s.after, s.before):
                raise ExecutionFailed(f"{s.topic}-{s.partition} ended with replicas {list(have.replicas)}, "
                                      f"not the planned {list(s.after)}")
            raise ExecutionFailed(f"{s.topic}-{s.partition}: the reassignment has not been in flight for "
                                  f"{now - since:.0f} s but the partition has "
                                  f"{list(have.replicas) if have else 'no'} replicas (cancelled or reverted elsewhere)")

    def target_down(self, live: set[int], now: float) -> None:
        """Rule 3: a broker of a move's target down past ``destination_grace`` (it may be restarting meanwhile)."""
        grace = self.limits.destination_grace
        for s in self.moving():
            for b in sorted(s.after, key=lambda b: b not in s.added):
                role = "destination broker" if b in s.added else "kept broker"
                if b not in live:
                    if b not in self.dead_since:
                        self.dead_since[b] = now
                        self.say(f"{self.label}: {role} {b} is down; waiting up to {grace:g} s for it to return "
                                 f"(--destination-grace)")
                    if now - self.dead_since[b] >= grace:
                        raise ExecutionFailed(f"batch {self.batch['index'] + 1} stalled: {role} {b} of "
                                              f"{s.topic}-{s.partition} is down (waited {now - self.dead_since[b]:.0f}"
                                              f" s, --destination-grace {grace:g} s)")
                elif b in self.dead_since:
                    since = self.dead_since.pop(b)
                    self.say(f"{self.label}: {role} {b} is back after {now - since:.0f} s")

    def stalled(self, sizes: Sizes | None, live: set[int], now: float) -> None:
        """Rule 4: producers outpacing the throttle (said once), and the time limit for a batch that copies
        nothing. ``sizes``: the moving partitions' (None: the backend sees no replica sizes, ZooKeeper)."""
        limits, watch, rate = self.limits, self.progress, self.rate
        moving = self.moving()
        outpaced = []
        if sizes is not None:
            watch.add(now, {s.tp: sizes[s.tp] for s in moving if s.tp in sizes})
            outpaced = watch.outpaced(s.tp for s in moving)
        if outpaced and not self.warned_ingest:
            tp = outpaced[0]
            self.warned_ingest = True
            self.batch["ingest_outpaces_throttle"] = [f"{t}-{p}" for t, p in outpaced]
            self.save()
            self.say(f"{self.label}: {len(outpaced)} move(s) do not catch up "
                     f"(e.g. {tp[0]}-{tp[1]}: {watch.gap(tp)} bytes behind its leader, not shrinking, while "
                     f"producers write into it): Kafka counts in-sync replication of a throttled partition "
                     f"against the throttle of {rate:.0f} B/s; raise --throttle, or wait for traffic to drop")
        # Stalled: no byte reached a new replica for min_timeout (never less than Kafka's quota window), and
        # producers did not explain it meanwhile (the quota still counts their traffic after it stops).
        patience = max(limits.min_timeout, QUOTA_WINDOW_S)
        stuck = sizes is None or now - max(watch.last_advance, watch.last_outpaced) > patience
        elapsed = now - self.started
        if elapsed <= self.timeout or not stuck:
            return
        why = "" if sizes is None else f", no byte copied for {now - watch.last_advance:.0f} s"
        blind = ("" if sizes is not None else
                 "; ZooKeeper shows no replica sizes, so a move that producers outpace looks like a stuck "
                 "one: raise --throttle or --min-timeout, or execute through kafka://")
        # A move completes only when its whole target is in the ISR: a kept replica's broker that is down
        # blocks it without any byte missing on the new replicas.
        down = sorted({b for s in moving for b in s.after if b not in live})
        if down:
            blind += f"; target broker(s) {', '.join(map(str, down))} down: the moves wait for them to rejoin"
        raise ExecutionFailed(f"batch {self.batch['index'] + 1} timed out after {elapsed:.0f} s "
                              f"(limit {self.timeout:.0f} s: {self.expected:.0f} s at the throttle "
                              f"x{limits.timeout_factor:g} + {limits.min_timeout:.0f} s{why}); "
                              f"{len(self.todo) - len(moving)}/{len(self.todo)} moves done{blind}")

    def eta(self, now: float) -> float:
        """Rule 5: seconds left, at the rate seen once a move finished, at bytes / throttle before that."""
        elapsed = now - self.started
        done = sum(s.bytes for s in self.finished)
        if done and self.total_bytes:
            return elapsed * (self.total_bytes - done) / done
        return max(0.0, self.expected - elapsed)
