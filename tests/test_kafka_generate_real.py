"""bench/kafka_generate.py against Kafka's own code, from the jars of Kafka 3.9.2 and 4.3.1 (.kafka/<v>/libs).

``bench/java/GenerateHarness.java`` is compiled once per session (``javac``, no Kafka on the class path: it reaches
Kafka by reflection) and run once per Kafka version with every case on stdin:

- ``admin`` cases (3.9): ``AdminUtils.assignReplicasToBrokers(brokers, partitions, rf, fixedStartIndex,
  startPartitionId)``, which uses ``fixedStartIndex`` as both the start index and the replica shift, against
  ``assign_rack_unaware`` / ``assign_rack_aware(..., start, start, start_partition)``. Kafka 4.x has no AdminUtils
  any more (checked too).
- ``tool`` cases (both): the tool's private ``ReassignPartitionsCommand.calculateAssignment`` (all of ``--generate``
  but the Admin calls) with its ``java.util.Random`` reseeded, against ``generate(..., seed, kafka=version)``:
  several topics at once (HashMap order, one Random shared by the topics), on 3.9 ``AdminUtils``, on 4.x KRaft's
  ``StripedReplicaPlacer``.

The outputs must be identical. The last tests run the real ``kafka-reassign-partitions --generate`` on a local
cluster (rebalancer.localkafka) and find each topic's proposal among the re-implementation's outputs for some value
of the random draws (3.9: start index and replica shift, drawn independently; 4.x: every draw of the placer).
Missing jars fail the tests (``bash scripts/fetch_kafka.sh``): they never skip.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import kafka_generate as kg  # noqa: E402

HARNESS = REPO / "bench" / "java" / "GenerateHarness.java"
VERSIONS = ("3.9", "4.x")
TOOL_MAIN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
RACK_POOLS = [
    ["a", "b", "c", "d", "e", "f"],
    ["rack-1", "rack-2", "rack-3", "rack-4", "rack-5", "rack-6"],
    ["us-east-1c", "us-east-1a", "eu-west-2b", "ap-south-1a", "us-east-1b", "eu-west-2a"],
    ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa"],  # String.hashCode collides in pairs: HashMap order by insertion
    ["zz", "y", "x9", "W", "v-1", "u_u"],
]
COLLIDING_TOPICS = ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "AaAaAa", "BBBBBB", "AaAaBB", "BBBBAa"]

Case = dict[str, Any]


def libs(version: str) -> Path:
    return Path(os.environ.get("REBALANCER_KAFKA_HOME") or REPO / ".kafka") / version / "libs"


def require_kafka(version: str) -> Path:
    path = libs(version)
    if not any(path.glob("kafka-tools-*.jar")) or not any(path.glob("kafka-server-common-*.jar")):
        pytest.fail(f"no Kafka {version} jars in {path}: run `bash scripts/fetch_kafka.sh` (Maven Central) first",
                    pytrace=False)
    return path


def require_jdk() -> tuple[str, str]:
    java, javac = shutil.which("java"), shutil.which("javac")
    if not java or not javac:
        pytest.fail("java and javac are needed (a JDK 17: apt-get install openjdk-17-jdk-headless)", pytrace=False)
    return java, javac


# -- cases ---------------------------------------------------------------------------------------------------------
def brokers_spec(order: list[int], rack_of: dict[int, str | None]) -> str:
    return ",".join(f"{b}@{rack_of[b]}" if rack_of.get(b) is not None else str(b) for b in order)


def random_brokers(rnd: random.Random, n: int, racks: int) -> tuple[list[int], dict[int, str | None]]:
    """``n`` broker ids (0..n-1 or scattered, listed in id order or shuffled) and their racks: none (``racks`` 0) or
    up to ``racks`` names from one pool with uneven weights."""
    ids = list(range(n)) if rnd.random() < 0.5 else rnd.sample(range(1000), n)
    order = sorted(ids) if rnd.random() < 0.5 else rnd.sample(ids, n)
    if racks == 0:
        return order, {b: None for b in ids}
    names = rnd.choice(RACK_POOLS)[:racks]
    weights = [rnd.choice([1, 1, 2, 5]) for _ in names]
    rack_of: dict[int, str | None] = {b: rnd.choices(names, weights)[0] for b in ids}
    return order, rack_of


def partitions_count(rnd: random.Random) -> int:
    return rnd.choice([rnd.randint(1, 12), rnd.randint(13, 100), rnd.randint(101, 500)])


def admin_cases() -> list[Case]:
    rnd = random.Random(20240917)
    cases: list[Case] = []
    # A grid over the edges: partition counts around multiples of the broker count, every RF, racks none/1/2/3/6.
    for n in (3, 4, 5, 7, 12, 60):
        for racks in (0, 1, 2, 3, 6):
            order, rack_of = random_brokers(rnd, n, min(racks, n))
            for parts in sorted({1, n - 1, n, n + 1, 2 * n + 3, 500}):
                for rf in range(1, min(4, n) + 1):
                    for start in sorted({0, 1, n - 1}):
                        cases.append({"parts": parts, "rf": rf, "start": start, "start_partition": -1,
                                      "order": order, "rack_of": rack_of})
    # Random cases: 3..60 brokers, uneven racks, 1..500 partitions, any start index, some start partitions.
    for _ in range(1500):
        n = rnd.randint(3, 60)
        order, rack_of = random_brokers(rnd, n, rnd.choice([0, 0, 1, 2, 3, 4, 5, 6]))
        cases.append({"parts": partitions_count(rnd), "rf": rnd.randint(1, min(4, n)), "start": rnd.randrange(2 * n),
                      "start_partition": rnd.choice([-1, -1, 0, rnd.randint(1, 3 * n)]), "order": order,
                      "rack_of": rack_of})
    for i, c in enumerate(cases):
        c["id"] = f"a{i}"
        c["line"] = (f"admin {c['id']} {c['parts']} {c['rf']} {c['start']} {c['start_partition']} "
                     f"{brokers_spec(c['order'], c['rack_of'])}")
    return cases


def tool_cases() -> list[Case]:
    rnd = random.Random(7)
    cases: list[Case] = []
    for _ in range(500):
        n = rnd.randint(3, 60)
        order, rack_of = random_brokers(rnd, n, rnd.choice([0, 0, 1, 2, 3, 4, 5, 6]))
        n_topics = rnd.choice([1, 1, 2, 3, 5, 14, 30])  # 13+ topics resize the HashMap
        if rnd.random() < 0.2:
            names = rnd.sample(COLLIDING_TOPICS, min(n_topics, len(COLLIDING_TOPICS)))
        else:
            names = [f"{rnd.choice(['t', 'orders', 'x.y.z', 'log_'])}{rnd.randint(0, 99999)}" for _ in range(n_topics)]
        names = list(dict.fromkeys(names))
        budget = 600 if n_topics > 3 else 1500
        topics = {t: (max(1, min(partitions_count(rnd), budget // len(names))), rnd.randint(1, min(4, n)))
                  for t in names}
        cases.append({"order": order, "rack_of": rack_of, "topics": topics})
    # Around the HashMap's first resize (13 keys in 16 buckets): computeIfAbsent resizes at the start of the call
    # after the one that went past 3/4, so 13 single-partition topics stay in 16 buckets.
    for _ in range(60):
        n = rnd.randint(3, 20)
        order, rack_of = random_brokers(rnd, n, rnd.choice([0, 2, 3]))
        names = [f"t{rnd.randint(0, 99999)}" for _ in range(rnd.choice([12, 13, 13, 14, 25]))]
        cases.append({"order": order, "rack_of": rack_of,
                      "topics": {t: (rnd.choice([1, 1, 1, 2]), rnd.randint(1, min(3, n))) for t in names}})
    for i, c in enumerate(cases):
        c["id"] = f"t{i}"
        c["seed"] = rnd.getrandbits(64) - (1 << 63)
        c["line"] = (f"tool {c['id']} {c['seed']} {brokers_spec(c['order'], c['rack_of'])} "
                     + ",".join(f"{t}:{p}:{rf}" for t, (p, rf) in c["topics"].items()))
    return cases


ADMIN = admin_cases()
TOOL = tool_cases()


# -- running Kafka's code ------------------------------------------------------------------------------------------
def run_harness(classes: Path, version: str, lines: list[str]) -> tuple[str, dict[str, dict[str, str]]]:
    java, _ = require_jdk()
    proc = subprocess.run([java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
                           f"{classes}{os.pathsep}{libs(version)}/*", "GenerateHarness"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    out = proc.stdout.splitlines()
    assert proc.returncode == 0 and out and out[-1] == "done", \
        f"the harness failed on Kafka {version} (exit {proc.returncode}): {proc.stderr[-2000:]}"
    engine = out[0].removeprefix("info ")
    results: dict[str, dict[str, str]] = {}
    for line in out[1:-1]:
        case_id, topic, assignment = line.split(" ", 2)
        results.setdefault(case_id, {})[topic] = assignment
    return engine, results


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict[str, dict[str, str]]]]:
    """{version: (engine, {case id: {topic or "-": "p:b,b;p:b,b" or "ERROR ..."}})}: one JVM per version."""
    for version in VERSIONS:
        require_kafka(version)
    _, javac = require_jdk()
    classes = tmp_path_factory.mktemp("generate-harness")
    compiled = subprocess.run([javac, "-d", str(classes), str(HARNESS)], capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, f"javac {HARNESS.name} failed:\n{compiled.stderr}"
    jobs = {"3.9": [c["line"] for c in ADMIN + TOOL], "4.x": [c["line"] for c in ADMIN[:3] + TOOL]}
    with ThreadPoolExecutor(2) as pool:
        futures = {v: pool.submit(run_harness, classes, v, lines) for v, lines in jobs.items()}
        return {v: f.result() for v, f in futures.items()}


def parse(assignment: str) -> dict[int, list[int]]:
    assert not assignment.startswith("ERROR"), assignment
    return {int(p): [int(b) for b in reps.split(",")]
            for p, reps in (item.split(":") for item in assignment.split(";"))}


def describe(case: Case) -> str:
    keys = ("parts", "rf", "start", "start_partition", "seed", "topics")
    shown = {k: case[k] for k in keys if k in case}
    return f"{case['id']} {shown} brokers {brokers_spec(case['order'], case['rack_of'])}"


def check_all(cases: list[Case], expected_of: Callable[[Case], dict[str, dict[int, list[int]]]],
              results: dict[str, dict[str, str]], version: str) -> None:
    wrong = []
    for case in cases:
        got = {t: parse(a) for t, a in results.get(case["id"], {}).items()}
        mine = expected_of(case)
        if got != mine:
            topic = next((t for t in sorted(set(got) | set(mine)) if got.get(t) != mine.get(t)), "?")
            diff = [(p, got.get(topic, {}).get(p), mine.get(topic, {}).get(p))
                    for p in sorted(set(got.get(topic, {})) | set(mine.get(topic, {})))
                    if got.get(topic, {}).get(p) != mine.get(topic, {}).get(p)]
            wrong.append(f"{describe(case)}: topic {topic}, (partition, Kafka, ours) {diff[:4]}")
    assert not wrong, (f"{len(wrong)} of {len(cases)} cases differ from Kafka {version}; first ones:\n"
                       + "\n".join(wrong[:5]))


# -- the comparisons -----------------------------------------------------------------------------------------------
def admin_expected(case: Case) -> dict[str, dict[int, list[int]]]:
    rack_of = case["rack_of"]
    if all(r is None for r in rack_of.values()):
        got = kg.assign_rack_unaware(case["parts"], case["rf"], case["order"], case["start"], case["start"],
                                     case["start_partition"])
    else:
        got = kg.assign_rack_aware(case["parts"], case["rf"], rack_of, case["start"], case["start"],
                                   case["start_partition"])
    return {"-": got}


def tool_expected(version: str) -> Callable[[Case], dict[str, dict[int, list[int]]]]:
    def expected(case: Case) -> dict[str, dict[int, list[int]]]:
        proposal = kg.generate(case["topics"], case["order"], case["rack_of"], seed=case["seed"], kafka=version)
        out: dict[str, dict[int, list[int]]] = {t: {} for t in case["topics"]}
        for (t, p), reps in proposal.items():
            out[t][p] = list(reps)
        return out
    return expected


def test_the_tools_engine_per_version(kafka: dict[str, Any]) -> None:
    # 3.9's --generate calls AdminUtils.assignReplicasToBrokers; 4.x's calls KRaft's StripedReplicaPlacer, and
    # AdminUtils is gone from its jars.
    assert kafka["3.9"][0] == "adminutils"
    assert kafka["4.x"][0] == "striped"
    for case in ADMIN[:3]:
        assert kafka["4.x"][1][case["id"]]["ERROR"].startswith("java.lang.ClassNotFoundException")


def test_admin_utils_rack_unaware_39(kafka: dict[str, Any]) -> None:
    cases = [c for c in ADMIN if all(r is None for r in c["rack_of"].values())]
    assert len(cases) > 500
    check_all(cases, admin_expected, kafka["3.9"][1], "3.9")


def test_admin_utils_rack_aware_39(kafka: dict[str, Any]) -> None:
    cases = [c for c in ADMIN if any(r is not None for r in c["rack_of"].values())]
    assert len(cases) > 1000
    check_all(cases, admin_expected, kafka["3.9"][1], "3.9")


@pytest.mark.parametrize("version", VERSIONS)
def test_generate_is_the_tools_calculate_assignment(kafka: dict[str, Any], version: str) -> None:
    check_all(TOOL, tool_expected(version), kafka[version][1], version)


def test_cases_cover_the_brief() -> None:
    sizes = [len(c["order"]) for c in ADMIN + TOOL]
    racks = {len({r for r in c["rack_of"].values() if r is not None}) for c in ADMIN + TOOL}
    parts = [c["parts"] for c in ADMIN] + [p for c in TOOL for p, _ in c["topics"].values()]
    rfs = {c["rf"] for c in ADMIN} | {rf for c in TOOL for _, rf in c["topics"].values()}
    assert (min(sizes), max(sizes)) == (3, 60) and racks >= set(range(7))
    assert (min(parts), max(parts)) == (1, 500) and rfs == {1, 2, 3, 4}
    assert len({c["start"] for c in ADMIN}) > 50 and any(len(c["topics"]) > 12 for c in TOOL)


# -- the real tool on a real cluster -------------------------------------------------------------------------------
RACKS = {1: "r1", 2: "r2", 3: "r1", 4: "r2"}
TOPICS = {  # explicit current assignments; --generate ignores them but needs the topics
    "orders": [(1, 2, 3), (2, 3, 4), (3, 4, 1), (4, 1, 2), (1, 3, 2), (2, 4, 3), (3, 1, 4), (4, 2, 1), (1, 2, 4),
               (2, 1, 3)],
    "clicks": [(1, 2), (2, 3), (3, 4), (4, 1), (1, 3), (2, 4), (3, 1)],
    "audit": [(4, 3, 2, 1), (1, 2, 3, 4), (2, 1, 4, 3)],
}


def real_generate(tmp_path: Path, version: str) -> dict[str, dict[int, list[int]]]:
    """Start a 4-broker cluster of Kafka ``version`` in 2 racks, create TOPICS and run the real --generate
    (rack-aware, the default) over every broker; the cluster is stopped whatever happens."""
    from rebalancer.localkafka import load, nodes
    from rebalancer.model import Broker, Cluster, Partition

    java, _ = require_jdk()
    kafka_libs = require_kafka(version)
    d = tmp_path / f"kafka-{version}"
    try:
        state = nodes.start_cluster(d, version=version, brokers=RACKS)
        cluster = Cluster.build([Broker(b, rack) for b, rack in RACKS.items()],
                                [Partition(t, p, reps, reps[0], reps) for t, parts in TOPICS.items()
                                 for p, reps in enumerate(parts)])
        load.create_topics(state, cluster)
        move = tmp_path / "topics-to-move.json"
        move.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in TOPICS]}))
        load.write_tools_logging(tmp_path)
        cmd = [java, *[f"-D{k}={v}" for k, v in load.tools_logging(tmp_path).items()], "-cp", f"{kafka_libs}/*",
               TOOL_MAIN, "--bootstrap-server", load.bootstrap_of(state), "--generate",
               "--topics-to-move-json-file", str(move), "--broker-list", ",".join(map(str, sorted(RACKS)))]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        nodes.stop_cluster(d)
    assert done.returncode == 0, f"--generate failed: {done.stderr[-2000:]}"
    marker = "Proposed partition reassignment configuration"
    assert marker in done.stdout, done.stdout
    proposed = json.loads(done.stdout.split(marker, 1)[1].strip().splitlines()[0])
    out: dict[str, dict[int, list[int]]] = {t: {} for t in TOPICS}
    for p in proposed["partitions"]:
        out[p["topic"]][p["partition"]] = p["replicas"]
    assert {t: len(v) for t, v in out.items()} == {t: len(v) for t, v in TOPICS.items()}
    return out


class NeedDraw(Exception):
    def __init__(self, bound: int) -> None:
        self.bound = bound


class Scripted(kg.JavaRandom):
    """A Random whose draws are given (``script``); one more raises NeedDraw with its bound."""

    def __init__(self, script: list[int]) -> None:
        self.script, self.pos = script, 0

    def next_int(self, bound: int) -> int:
        if self.pos == len(self.script):
            raise NeedDraw(bound)
        self.pos += 1
        return self.script[self.pos - 1]


def every_outcome(run: Callable[[kg.JavaRandom], Any]) -> Iterator[Any]:
    """``run``'s result for every possible sequence of draws (depth-first)."""
    stack: list[list[int]] = [[]]
    while stack:
        script = stack.pop()
        try:
            yield run(Scripted(script))
        except NeedDraw as need:
            stack.extend(script + [v] for v in range(need.bound))


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_generate_39_is_adminutils_for_some_start_and_shift(tmp_path: Path) -> None:
    # Kafka 3.9 draws the start index and the replica shift independently (RAND.nextInt(#brokers) each), so each
    # topic's proposal must be assign_rack_aware's for some (start, shift) in range(4) x range(4).
    proposal = real_generate(tmp_path, "3.9")
    for topic, parts in TOPICS.items():
        rf = len(parts[0])
        fits = [(s, h) for s in range(len(RACKS)) for h in range(len(RACKS))
                if kg.assign_rack_aware(len(parts), rf, RACKS, s, h) == proposal[topic]]
        assert fits, f"{topic}: Kafka 3.9 proposed {proposal[topic]}, no (start index, shift) gives it"


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_generate_4x_is_the_striped_placer_for_some_draws(tmp_path: Path) -> None:
    proposal = real_generate(tmp_path, "4.x")
    for topic, parts in TOPICS.items():
        rf = len(parts[0])
        outcomes = set()
        for placed in every_outcome(lambda rng, parts=parts, rf=rf: tuple(map(tuple, kg.striped_place(len(parts), rf, sorted(RACKS),
                                                                                     RACKS, rng)))):
            outcomes.add(placed)
        mine = tuple(tuple(proposal[topic][p]) for p in range(len(parts)))
        assert mine in outcomes, f"{topic}: Kafka 4.x proposed {proposal[topic]}, not among {len(outcomes)} outcomes"
