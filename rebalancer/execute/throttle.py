"""Kafka replication quotas for a batch: which configs to set, and how to take away exactly those again.

Per batch (as ``kafka-reassign-partitions --throttle`` does, limited to what moves):

- ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` (bytes/s) on every live broker
  of a moving partition, old replicas and new (as Kafka's own tool does): the copy is served by whichever replica
  leads when it runs, which need not be the preferred one;
- on each moving topic, ``leader.replication.throttled.replicas`` listing ``partition:broker`` for the partition's
  existing replicas (any of them may serve the copy) and ``follower.replication.throttled.replicas`` listing the new
  replicas.

Every throttle this run sets is written to its **ledger** (``RUN_DIR/execution/throttles.json``) *before* it is
set: for a broker rate, the value set and the value it replaced; for a topic's replica list, the entries this run
added. Removal (``release``) undoes exactly the ledger: a rate goes back to the value it replaced (or is deleted),
unless someone changed it since, and only the list entries this run added are taken out, so throttles set by other
tools or operators are never deleted. Entries still needed (``keep``: the next batch, or moves of this run still
copying) stay. Anything else found is *foreign*: reported (``foreign``), never removed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..access.backend import Backend, ConfigChange
from ..errors import InputError
from ..formats import atomic_write_json, read_json
from ..kafka_names import THROTTLE_BROKER_KEYS, THROTTLE_TOPIC_KEYS
from ..model import topic_name_problem

__all__ = ["clear_command", "batch_throttles", "Ledger",
           "apply", "release", "foreign"]

Throttles = tuple[set[int], dict[str, tuple[set[str], set[str]]]]  # (brokers, {topic: (leader side, follower side)})


def batch_throttles(steps: Iterable[Any], live: set[int]) -> Throttles:
    """(brokers to rate-limit, {topic: (leader replicas 'p:b', follower replicas 'p:b')}) for a batch's steps."""
    brokers: set[int] = set()
    topics: dict[str, tuple[set[str], set[str]]] = {}
    for s in steps:
        if not s.added:
            continue
        leader_side, follower_side = topics.setdefault(s.topic, (set(), set()))
        for b in s.before:
            if b in live:
                leader_side.add(f"{s.partition}:{b}")
                brokers.add(b)
        for b in s.added:
            follower_side.add(f"{s.partition}:{b}")
            if b in live:
                brokers.add(b)
    return brokers, topics


def _items(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def _join(items: Iterable[str]) -> str:
    def key(x: str) -> tuple[int, ...]:
        try:
            return tuple(int(v) for v in x.split(":"))
        except ValueError:
            return (2**63,)
    return ",".join(sorted(set(items), key=key))


def _ledger_problem(doc: Any) -> str | None:
    """What is wrong with a ledger document, or None."""
    if not isinstance(doc, dict):
        return "not an object"
    brokers, topics = doc.get("brokers") or {}, doc.get("topics") or {}
    if not isinstance(brokers, dict) or not isinstance(topics, dict):
        return "brokers and topics must be objects"
    for b, keys in brokers.items():
        if not (isinstance(b, str) and b.isascii() and b.isdigit() and int(b) <= 2**31 - 1) or not isinstance(keys, dict):
            return f"broker entry {b!r:.40}"
        for key, entry in keys.items():
            if key not in THROTTLE_BROKER_KEYS or not isinstance(entry, dict) or not isinstance(entry.get("set"), str) \
                    or not isinstance(entry.get("previous"), (str, type(None))):
                return f"broker {b}: entry {key!r:.60}"
    for t, keys in topics.items():
        if topic_name_problem(t) or not isinstance(keys, dict):
            return f"topic entry {t!r:.60}"
        for key, entries in keys.items():
            if key not in THROTTLE_TOPIC_KEYS or not isinstance(entries, list) or not all(
                    isinstance(x, str) and re.fullmatch(r"[0-9]{1,10}:[0-9]{1,10}", x) for x in entries):
                return f"topic {t}: entry {key!r:.60}"
    return None


class Ledger:
    """What this run set, persisted before it is set (write-ahead), so a crash never leaves an unknown throttle.

    ``brokers``: {broker: {key: {"set": value, "previous": value or None}}};
    ``topics``: {topic: {key: [entries this run added]}}.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        doc = read_json(self.path) if self.path.exists() or self.path.is_symlink() else {}
        problem = _ledger_problem(doc)
        if problem:
            raise InputError(f"{self.path}: not a throttle ledger ({problem}); it records which throttles this run "
                             "set: restore it, or remove it and clear them with kafka-configs")
        self.brokers: dict[str, dict[str, dict[str, str | None]]] = doc.get("brokers") or {}
        self.topics: dict[str, dict[str, list[str]]] = doc.get("topics") or {}

    def save(self) -> None:
        atomic_write_json(self.path, {"brokers": self.brokers, "topics": self.topics})

    def __bool__(self) -> bool:
        return bool(self.brokers or self.topics)

    def entities(self) -> list[str]:
        return [f"brokers/{b}" for b in sorted(self.brokers, key=int)] + [f"topics/{t}" for t in sorted(self.topics)]

    def foreign_part(self, entity_type: str, name: str, key: str, value: str) -> str | None:
        """The part of a throttle value this run did not set (None: all of it is this run's)."""
        if entity_type == "brokers":
            return None if (self.brokers.get(name, {}).get(key) or {}).get("set") == value else value
        mine = set(self.topics.get(name, {}).get(key, ()))
        theirs = [x for x in _items(value) if x not in mine]
        return _join(theirs) if theirs else None


def apply(backend: Backend, ledger: Ledger, rate: int, throttles: Throttles) -> bool:
    """Add these throttles to whatever is set (recording them in the ledger first); returns whether anything changed."""
    brokers, topics = throttles
    current = backend.throttle_configs([("brokers", str(b)) for b in brokers] + [("topics", t) for t in topics])
    writes: list[tuple[str, str, dict[str, str]]] = []
    for b in sorted(brokers):
        have = current.get(("brokers", str(b)), {})
        mine = ledger.brokers.setdefault(str(b), {})
        want = {}
        for key in THROTTLE_BROKER_KEYS:
            if have.get(key) == str(rate) and key not in mine:
                continue  # already exactly this (someone else's): nothing to set, nothing to undo
            if key not in mine:
                mine[key] = {"set": str(rate), "previous": have.get(key)}
            mine[key]["set"] = str(rate)
            if have.get(key) != str(rate):
                want[key] = str(rate)
        if not mine:
            ledger.brokers.pop(str(b))
        if want:
            writes.append(("brokers", str(b), want))
    for t, sides in sorted(topics.items()):
        have = current.get(("topics", t), {})
        want = {}
        for key, entries in zip(THROTTLE_TOPIC_KEYS, sides, strict=True):
            existing = _items(have.get(key))
            if existing == ["*"]:
                continue  # someone throttles every replica of this topic already
            new = sorted(set(entries) - set(existing))
            if new:
                listed = ledger.topics.setdefault(t, {}).setdefault(key, [])
                listed.extend(x for x in new if x not in listed)
                want[key] = _join([*existing, *new])
        if want:
            writes.append(("topics", t, want))
    if not writes:
        return False
    ledger.save()
    backend.alter_many([ConfigChange(entity_type, name, config, (), current.get((entity_type, name), {}))
                        for entity_type, name, config in writes])
    return True


def release(backend: Backend, ledger: Ledger, keep: Throttles = (set(), {})) -> list[str]:
    """Undo what the ledger records, except what ``keep`` still needs; returns the entities changed."""
    keep_brokers, keep_topics = keep
    if not ledger:
        return []
    # Read only what may change: the brokers not kept, and the topics with a replica of ours to drop (narrowing a
    # rolling run's throttles read every broker and topic it had throttled, up to 1.6 s with the loop waiting).
    brokers = [b for b in ledger.brokers if int(b) not in keep_brokers]
    topics = [t for t in ledger.topics
              if any(set(ledger.topics[t].get(key, ())) - side
                     for key, side in zip(THROTTLE_TOPIC_KEYS, keep_topics.get(t, (set(), set())), strict=True))]
    current = (backend.throttle_configs([("brokers", b) for b in brokers] + [("topics", t) for t in topics])
               if brokers or topics else {})
    # A broker whose config this backend cannot read now (the Admin API asks the broker itself; a dead one cannot
    # answer) stays in the ledger, so a later release removes its throttle once it is back.
    unreachable = backend.unreachable_brokers({int(b) for b in brokers}) if brokers else set()
    changes: list[ConfigChange] = []
    for b in sorted(ledger.brokers, key=int):
        if int(b) in keep_brokers or int(b) in unreachable:
            continue
        have = current.get(("brokers", b), {})
        restore, delete = {}, []
        for key, entry in ledger.brokers[b].items():
            if have.get(key) != entry["set"]:
                continue  # changed by someone else since: no longer ours
            if entry.get("previous") is None:
                delete.append(key)
            else:
                restore[key] = str(entry["previous"])
        if restore or delete:
            changes.append(ConfigChange("brokers", b, restore, delete, have))
        del ledger.brokers[b]
    for t in sorted(ledger.topics):
        have = current.get(("topics", t), {})
        kept_sides = keep_topics.get(t, (set(), set()))
        set_, delete = {}, []
        for key, side in zip(THROTTLE_TOPIC_KEYS, kept_sides, strict=True):
            mine = set(ledger.topics[t].get(key, ()))
            drop = mine - side
            existing = _items(have.get(key))
            left = [x for x in existing if x not in drop]
            if len(left) != len(existing):
                if left:
                    set_[key] = _join(left)
                else:
                    delete.append(key)
            still = sorted(mine & side)
            if still:
                ledger.topics[t][key] = still
            else:
                ledger.topics[t].pop(key, None)
        if set_ or delete:
            changes.append(ConfigChange("topics", t, set_, delete, have))
        if not ledger.topics[t]:
            del ledger.topics[t]
    backend.alter_many(changes)
    # Saved once, after the cluster changed: a crash before this leaves entries whose undoing is then a no-op.
    ledger.save()
    return [f"{c.entity_type}/{c.name}" for c in changes]


def foreign(backend: Backend, ledger: Ledger) -> dict[str, dict[str, str]]:
    """Throttles set in the cluster that this run did not set: {"brokers/1": {key: value}} (topic lists: only the
    entries that are not this run's)."""
    out: dict[str, dict[str, str]] = {}
    for (entity_type, name), keys in sorted(backend.throttle_configs().items()):
        theirs = {k: part for k, v in keys.items() if (part := ledger.foreign_part(entity_type, name, k, v)) is not None}
        if theirs:
            out[f"{entity_type}/{name}"] = theirs
    return out


def clear_command(run_dir: str | Path, source: str) -> str:
    """The command that removes a run's throttles, as advice printed with an error: it runs as printed (the run
    directory and the source, quoted for a shell), credentials left out (``redact_url``: a source with a password
    needs it typed again; client settings from a file need ``--kafka-config`` again)."""
    from ..urls import redact_url

    return f"rebalancer throttle --clear {shlex.quote(str(Path(run_dir).resolve()))} --source {shlex.quote(redact_url(source))}"
