"""How pytest-xdist hands the suite's tests to its workers (a pytest plugin, ``pytest_plugins`` in conftest.py): the
longest files first, the Airflow files on one worker (one Airflow stack), and in the fast tier a test at a time except
the files whose tests share a module's fixture."""

from __future__ import annotations

import os
from typing import Any

import pytest

FAST_TIER = os.environ.get("REBALANCER_TEST_TIER") == "fast"  # set by scripts/test.sh --fast


def file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


# The longest files first (measured: bench/flake_hunt.sh and the suite's --durations), so that pytest-xdist hands
# them out first and the short ones fill in at the end: the whole suite (``--dist loadfile --no-loadscope-reorder``,
# a file per worker) and the fast tier (a test at a time, ``pytest_xdist_make_scheduler``) both end with their
# workers about even.
# The files that use the Airflow stack, handed out together (``pytest_xdist_make_scheduler``): one worker starts one
# stack for them and stops it when they are done (``pytest_runtest_teardown``); handed out file by file, each worker
# started a stack of its own (the KRaft file's or the report view's) and kept it idle to the end of the run.
AIRFLOW_FILES = ("tests/test_airflow_runbook.py", "tests/test_kraft_end_to_end.py",
                 "tests/test_report_view_security.py")
LONGEST_FIRST = (*AIRFLOW_FILES, "tests/test_conformance.py", "tests/test_probe_hostile.py", "tests/test_probe_faults.py",
                 "tests/test_connection_errors.py", "tests/test_local_kafka.py", "tests/test_lock.py", "tests/test_planners.py", "tests/test_analysis.py", "tests/test_load_planner.py",
                 "tests/test_validate.py", "tests/test_load_gates.py", "tests/test_kafka_generate_real.py")
# The fast tier's (--durations of scripts/test.sh --fast): the Spark analysis (one worker, one session, ~2 minutes)
# and the hostile probe first.
FAST_LONGEST_FIRST = ("tests/test_analysis.py", "tests/test_probe_hostile.py", "tests/test_probe_faults.py",
                      "tests/test_validate.py",
                      "tests/test_rollback_outage.py", "tests/test_split.py", "tests/test_load_planner.py",
                      "tests/test_conformance.py", "tests/test_cli.py", "tests/test_connection_errors.py",
                      "tests/test_load_gates.py", "tests/test_execute_admin.py", "tests/test_lock.py")
# The fast tier hands out a test at a time (``pytest_xdist_make_scheduler``), except these files' tests, which share a
# fixture of their module (a Spark session, simulated SASL clusters): each stays on one worker, which starts it once.
FAST_TOGETHER = frozenset({"tests/test_analysis.py", "tests/test_connection_errors.py", "tests/test_load_gates.py",
                           "tests/test_report.py", "tests/test_airflow_dag_integrity.py", "tests/test_probe_hostile.py"})


@pytest.hookimpl(trylast=True)  # after conftest's markers: the fast tier's check reads them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The order: ``LONGEST_FIRST`` (or the fast tier's), then the rest as collected."""
    for item in items:
        heavy = any(item.get_closest_marker(m) for m in ("kafka", "airflow", "browser"))  # not in the fast tier
        if FAST_TIER and not heavy and _shares_a_fixture(item) and file_of(item) not in FAST_TOGETHER:
            raise pytest.UsageError(f"{item.nodeid} uses a fixture of its module: add its file to "
                                    "tests/scheduling.FAST_TOGETHER, so that the fast tier keeps the file on one worker")
    rank = {f: i for i, f in enumerate(FAST_LONGEST_FIRST if FAST_TIER else LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(file_of(item), len(rank)))  # stable within a file


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's per-scope queue (a worker takes the next scope when it finishes one, in the collection's
    longest-first order; ``--no-loadscope-reorder``) with the scopes this suite needs. The whole suite (``--dist
    loadfile``): a file per scope (its real clusters are started once), except ``AIRFLOW_FILES``, one scope, so that
    one worker runs them on one Airflow stack. The fast tier (``--dist loadscope``): a test per scope, or a file for
    the files in ``FAST_TOGETHER``. (``--dist loadgroup`` would do it with markers, but pytest-xdist 3.8 renames the
    node ids it groups by through ``item._nodeid``, which pytest 9.2 no longer reads.)"""
    dist = config.getoption("dist", None)
    if not FAST_TIER and dist != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if FAST_TIER:
                return path if path in FAST_TOGETHER else nodeid
            return "airflow" if path in AIRFLOW_FILES else path

    return Scopes(config, log)


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of its module or class scope (the session's ZooKeeper is per worker anyway)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in ("module", "class", "package") for chain in defs for d in chain)
