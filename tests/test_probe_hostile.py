"""The hostile-user probe (bench/probe_hostile.py) in its quick form: about 60 bad inputs and hand edits through the
real CLI against a real ZooKeeper and the simulated cluster, run once for the module. It must exit 0, its table's
TOTAL row must show no exit-70s, no half-written files, no cluster changes and no leaked secrets, and each case is a
test of its own (its result from the probe's --json), so that a failure names its case."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import REPO

GOAL_ZERO = ("exit-70", "half-written", "cluster-changes", "secret-leaks")
PROBE = REPO / "bench" / "probe_hostile.py"


def parse_table(stdout: str) -> dict[str, dict[str, int]]:
    """{family or TOTAL: {column: count}} from the probe's table (header starting with 'family')."""
    lines = stdout.splitlines()
    header = next(ln.split() for ln in lines if ln.split()[:2] == ["family", "cases"])
    rows: dict[str, dict[str, int]] = {}
    for ln in lines:
        parts = ln.split()
        if len(parts) == len(header) and parts[0] != "family" and all(p.isdigit() for p in parts[1:]):
            rows[parts[0]] = dict(zip(header[1:], map(int, parts[1:]), strict=True))
    return rows


def test_parse_table() -> None:
    text = ("family  cases  clean-errors  expected-ok  exit-70  other-unclean  half-written  cluster-changes  secret-leaks\n"
            "----\nurls  3  2  1  0  0  0  0  0\n----\nTOTAL  3  2  1  0  0  0  0  0\n\n3 cases in 1 s; failing cases: 0\n")
    rows = parse_table(text)
    assert rows["TOTAL"] == {"cases": 3, "clean-errors": 2, "expected-ok": 1, "exit-70": 0, "other-unclean": 0,
                             "half-written": 0, "cluster-changes": 0, "secret-leaks": 0}


def _quick_cases() -> list[tuple[str, str]]:
    """(family, title) of each case of ``probe_hostile.py --quick``, read from the probe itself (under a second)."""
    spec = importlib.util.spec_from_file_location("probe_hostile", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["probe_hostile"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return [(c.family, c.title) for c in module.quick_subset(module.all_cases())]


QUICK = _quick_cases()


@pytest.fixture(scope="module")
def quick_probe(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[Any, Any]]:
    """One run of the quick probe (its cases share its clusters), and its result per case."""
    record = tmp_path_factory.mktemp("probe") / "results.json"
    result = subprocess.run([sys.executable, str(PROBE), "--quick", "--jobs", "4", "--json", str(record)],
                            cwd=REPO, capture_output=True, text=True, timeout=1500)
    cases = {(r["family"], r["title"]): r for r in json.loads(record.read_text())} if record.exists() else {}
    return result, cases


def test_quick_probe_finds_no_bug(quick_probe: tuple[subprocess.CompletedProcess[str], dict[Any, Any]]) -> None:
    result, _ = quick_probe
    report = result.stdout + "\n" + result.stderr[-3000:]
    rows = parse_table(result.stdout)
    assert "TOTAL" in rows, report
    total = rows["TOTAL"]
    assert total["cases"] >= 50, report
    for column in GOAL_ZERO:
        assert total[column] == 0, f"{column}: {total[column]}\n{report}"
    assert result.returncode == 0, report


@pytest.mark.parametrize("family, title", QUICK, ids=[f"{f}: {t}" for f, t in QUICK])
def test_quick_probe_case(quick_probe: tuple[subprocess.CompletedProcess[str], dict[Any, Any]], family: str,
                          title: str) -> None:
    """Each case of the quick probe, one result each: a clean one-line error or the expected success, nothing
    half-written, nothing changed on the cluster, no secret echoed."""
    result, cases = quick_probe
    case = cases.get((family, title))
    assert case is not None, f"the probe did not run this case\n{result.stderr[-2000:]}"
    assert not case["failing"], (f"exit {case['code']}: " + ", ".join(
        k for k in ("exit70", "unclean", "half", "cluster_change", "leak") if case[k])
        + f"\nargs: {case['args']}\nstderr: {case['stderr'][-500:]}\nnotes: {case['notes']}")
