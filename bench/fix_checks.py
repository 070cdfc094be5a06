"""Do the tests of the real-Kafka fixes (issue 12, point 3) fail without their fix? One mutation per fix.

Each mutation undoes one fix by an exact text replacement in a temporary git worktree of HEAD (the working tree
is never touched), then runs the tests that cover that fix, on the engines where the defect can occur: real Kafka
3.9 (ZooKeeper mode) through zk:// or kafka://, real Kafka 4.x through kafka://, and a real ZooKeeper with the
simulator where no local real cluster can be put in the state (a ZooKeeper-mode cluster migrating to KRaft, a
ZooKeeper with digest ACLs). Prints one line per mutation and test: whether it failed without the fix, and the
first assertion or error line. A mutation whose text is no longer found is reported, not skipped silently.

The same tests pass with every fix in place (the README's test command runs them). Takes 20-40 minutes: each
mutation starts its own real clusters.

    .venv/bin/python bench/fix_checks.py [--only NAME[,NAME...]] [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
C = "tests/test_conformance.py::"


@dataclass(frozen=True)
class Mutation:
    name: str
    defect: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = [
    Mutation(
        "cleanup-removes-all", "the final cleanup deletes every throttle key, an operator's included",
        "rebalancer/execute/runner.py",
        '    _retrying(lambda: thr.release(backend, ledger, keep), "removing throttles", patience=120.0)\n',
        '    _retrying(lambda: thr.release(backend, ledger, keep), "removing throttles", patience=120.0)\n'
        '    for (kind, name), keys in backend.throttle_configs().items():  # then every other throttle too\n'
        '        backend.alter_configs(kind, name, {}, delete=list(keys))\n',
        (C + "test_add_brokers_plan_executes_exactly_under_a_real_throttle[kafka-3.9-zk]",)),
    Mutation(
        "cleanup-ignores-flight", "throttles removed while this run's moves still copy (ZooKeeper mode cannot cancel)",
        "rebalancer/execute/runner.py",
        "    keep = thr.batch_throttles(copying, {b for s in copying for b in (*s.before, *s.after)}) if copying else (set(), {})\n",
        "    keep = (set(), {})\n",
        (C + "test_destination_killed_fails_the_batch_and_rollback_restores_the_original_order[kafka-3.9-zk]",)),
    Mutation(
        "verify-whole-cluster", "verify fails a healthy cluster when a topic was created elsewhere",
        "rebalancer/execute/runner.py",
        '"passed": not problems and not throttles}',
        '"passed": not problems and not throttles and not balance}',
        (C + "test_add_brokers_plan_executes_exactly_under_a_real_throttle[kafka-3.9-kafka]",)),
    Mutation(
        "no-settle-grace", "a finished move that a poll still shows unfinished fails the batch",
        "rebalancer/execute/watch.py",
        "            if now - since < self.limits.settle_grace:\n",
        "            if False:\n",
        (C + "test_add_brokers_plan_executes_exactly_under_a_real_throttle[kafka-3.9-kafka]",
         C + "test_add_brokers_plan_executes_exactly_under_a_real_throttle[kafka-4-kafka]")),
    Mutation(
        "zk-sees-znode-only", "the ZooKeeper backend sees only /admin/reassign_partitions, not Admin-API moves",
        "rebalancer/access/zk_backend.py",
        "            for p in sorted(set(a.adding) | set(a.removing)):\n",
        "            for p in ():\n",
        (C + "test_someone_elses_reassignment_is_refused_with_nothing_changed[kafka-3.9-zk]",)),
    Mutation(
        "rollback-keeps-cancel-order", "rollback leaves the order a cancel left (not the original, preferred first)",
        "rebalancer/execute/runner.py",
        "            if sorted(have) == sorted(c.replicas_before) or have in _waypoints(c):\n",
        "            if have in _waypoints(c):\n",
        (C + "test_destination_killed_fails_the_batch_and_rollback_restores_the_original_order[kafka-3.9-kafka]",
         C + "test_destination_killed_fails_the_batch_and_rollback_restores_the_original_order[kafka-4-kafka]")),
    Mutation(
        "leader-rate-on-preferred", "the leader-side rate goes on the preferred replica, not every current source",
        "rebalancer/execute/throttle.py",
        "        for b in s.before:\n            if b in live:\n                leader_side.add",
        "        for b in s.before[:1]:\n            if b in live:\n                leader_side.add",
        (C + "test_the_copy_is_throttled_at_the_current_leader_not_the_preferred_one[kafka-3.9-kafka]",
         C + "test_the_copy_is_throttled_at_the_current_leader_not_the_preferred_one[kafka-4-kafka]")),
    Mutation(
        "timeout-ignores-progress", "a move that producers outpace is timed out as dead",
        "rebalancer/execute/watch.py",
        "        if elapsed <= self.timeout or not stuck:\n",
        "        if elapsed <= self.timeout:\n",
        (C + "test_a_move_that_producers_outpace_is_reported_not_timed_out[kafka-3.9-kafka]",
         C + "test_a_move_that_producers_outpace_is_reported_not_timed_out[kafka-4-kafka]")),
    Mutation(
        "no-migration-check", "a ZooKeeper-mode cluster migrating to KRaft is driven through its ignored znodes",
        "rebalancer/access/zk_backend.py",
        "            if problem:\n                raise SourceError",
        "            if False:\n                raise SourceError",
        ("tests/test_zk_guards.py::test_a_cluster_migrating_to_kraft_is_refused_through_zookeeper",)),
    Mutation(
        "no-acl-copy", "nodes the tool creates do not carry the cluster's ZooKeeper ACL",
        "rebalancer/access/zk_backend.py",
        "                zk.default_acl = acl  # every create() below carries the cluster's ACL\n",
        "                pass\n",
        ("tests/test_zk_guards.py::test_nodes_the_tool_creates_carry_the_clusters_acl",)),
]


def first_failure(output: str) -> str:
    """The first ``E   ...`` line of pytest's report (the assertion or error), else the summary line."""
    for line in output.splitlines():
        if re.match(r"^E\s{2,}\S", line):
            return line[1:].strip()[:160]
    summary = [ln for ln in output.splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    return (summary[-1] if summary else output.strip().splitlines()[-1] if output.strip() else "")[:160]


def run(mutation: Mutation, work: Path, keep: bool) -> list[tuple[str, str, str, float]]:
    tree = work / mutation.name
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=REPO, check=True,
                   capture_output=True)
    try:
        target = tree / mutation.path
        text = target.read_text()
        if text.count(mutation.old) != 1:
            return [(t, "not applied", f"the fix's text is found {text.count(mutation.old)} times", 0.0)
                    for t in mutation.tests]
        target.write_text(text.replace(mutation.old, mutation.new))
        env = {**os.environ, "REBALANCER_KAFKA_HOME": str(REPO / ".kafka")}
        rows = []
        for test in mutation.tests:
            started = time.monotonic()
            proc = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-x",
                                   "-p", "no:cacheprovider", test, "--basetemp", str(work / f"bt-{mutation.name}")],
                                  cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
            took = time.monotonic() - started
            outcome = "FAILED" if proc.returncode == 1 else "passed" if proc.returncode == 0 else f"exit {proc.returncode}"
            rows.append((test, outcome, first_failure(proc.stdout) if proc.returncode else "", took))
            (work / f"{mutation.name}.log").open("a").write(proc.stdout[-20000:] + proc.stderr[-5000:])
        return rows
    finally:
        if not keep:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated mutation names: " + ",".join(m.name for m in MUTATIONS))
    parser.add_argument("--keep", action="store_true", help="keep the worktrees and logs")
    args = parser.parse_args()
    chosen = MUTATIONS
    if args.only:
        names = set(args.only.split(","))
        unknown = names - {m.name for m in MUTATIONS}
        if unknown:
            print(f"fix_checks: unknown mutation(s) {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        chosen = [m for m in MUTATIONS if m.name in names]
    work = Path(tempfile.mkdtemp(prefix="fix-checks-"))
    print(f"worktrees and logs under {work}", flush=True)
    print(f"{'mutation (fix undone)':<28} {'test [engine]':<90} {'without fix':<11} {'s':>5}  first failure", flush=True)
    bad = 0
    for m in chosen:
        for test, outcome, why, took in run(m, work, args.keep):
            short = test.split("::", 1)[1].removeprefix("test_")
            print(f"{m.name:<28} {short[:90]:<90} {outcome:<11} {took:5.0f}  {why}", flush=True)
            bad += outcome != "FAILED"
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{bad} test(s) did not fail without their fix" if bad else "every test failed without its fix")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
