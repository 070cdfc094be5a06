"""The runbook's stages as plain functions: one per task of the Airflow DAGs (``dags/``), usable without Airflow.

Every function takes the run directory and explicit arguments, does one stage through the library, and returns
a small JSON-able summary (paths and numbers, for XCom). Errors are the library's one-line ``RebalancerError``s.

    run_dir_for(dag_id, run_id)      RUNS/<dag_id>/<run_id, sanitized>: one directory per DAG run
    snapshot(run_dir, source, ...)   snapshot.json, replicas.parquet, brokers.parquet
    spark_job(), spark_args(...)     what the Spark provider submits (the analysis itself runs in spark-submit)
    plan(run_dir, mode, ...)         plan.json, reassignment.json, rollback.json
    has_changes(run_dir)             False for a plan with nothing to change (the run ends early)
    validate(run_dir, ...)           validation/result.json and Data Docs; GateFailure when a gate fails
    report(run_dir, ...)             report.html, and the approval request's subject and markdown body
    record_decision(run_dir, ...)    approval.json: the decision on exactly this plan (its content hash)
    execute / verify / rollback      the cluster changes, checked, or reverted
    cleanup_throttles(run_dir, ...)  no replication throttle left behind by this run
    outcome(run_dir, failed)         the run's verdict in one line (and whether it failed)

``RUNS`` is ``$REBALANCER_RUNS_DIR``, else ``$AIRFLOW_HOME/rebalancer-runs`` (``~/airflow`` without AIRFLOW_HOME).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .errors import ERROR_RECORD_ENV, InputError, from_record
from .rundir import PLAN_ERROR_FILE, RunDir

if TYPE_CHECKING:
    from .access.backend import Backend
    from .execute import ExecOptions

__all__ = ["RUNS_ENV", "runs_root", "safe_name", "run_dir_for", "snapshot", "spark_job", "spark_args", "plan", "plan_args", "plan_summary", "plan_groups", "plan_job", "plan_job_error",
           "run_cli",
           "has_changes", "validate", "report", "approval_request", "record_decision",
           "execution_started", "execute", "verify", "rollback", "cleanup_throttles", "outcome"]

RUNS_ENV = "REBALANCER_RUNS_DIR"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


# -- the run directory -----------------------------------------------------------------------------------------
def runs_root() -> Path:
    if os.environ.get(RUNS_ENV):
        return Path(os.environ[RUNS_ENV]).expanduser().resolve()
    home = Path(os.environ.get("AIRFLOW_HOME") or "~/airflow").expanduser()
    return (home / "rebalancer-runs").resolve()


def safe_name(text: str) -> str:
    """A path component from a DAG id or run id, one-to-one: a name that is not already file-safe keeps its readable
    part and gets a short hash of the original (``manual__2026-01-05T10:00:00+00:00`` ->
    ``manual__2026-01-05T10_00_00_00_00-<8 hex>``), so two ids never share a run directory."""
    import hashlib

    name = _SAFE.sub("_", str(text)).strip("._") or "_"
    if name == text and len(name) <= 200:
        return name
    return f"{name[:190]}-{hashlib.sha256(str(text).encode()).hexdigest()[:8]}"


def run_dir_for(dag_id: str, run_id: str, root: str | Path | None = None) -> Path:
    base = Path(root).resolve() if root is not None else runs_root()
    return base / safe_name(dag_id) / safe_name(run_id)


# -- stages ------------------------------------------------------------------------------------------------------
def snapshot(run_dir: str | Path, source: str, *, sizes: str | None = None,
             kafka_config: Mapping[str, Any] | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """Read the cluster (``zk://`` with ``sizes``, or ``kafka://`` with ``kafka_config``) into ``run_dir``."""
    from .snapshot import take_snapshot

    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {"sizes": sizes, "timeout": timeout}
    if kafka_config:
        kwargs["kafka_config"] = dict(kafka_config)
    cluster = take_snapshot(source, run, **kwargs)
    in_flight = cluster.meta.get("reassignment_in_progress") or []
    return {"run_dir": str(run), "source": cluster.meta.get("source", _display(source)),
            "brokers": len(cluster.brokers), "racks": len(cluster.racks), "topics": len(cluster.topics),
            "partitions": len(cluster.partitions), "replicas": cluster.replica_count,
            "dead_brokers": [b.id for b in cluster.brokers if not b.alive],
            "sizes_known": bool(cluster.meta.get("sizes_known")),
            "reassignment_in_progress": len(in_flight)}


def spark_job() -> str:
    """The PySpark application the analysis submits (self-contained: it imports nothing from this package)."""
    from .analyze import JOB

    return str(JOB)


def plan_job() -> str:
    """The PySpark application of a plan split in groups (``spark/plan_job.py``: ``rebalancer plan`` as driver)."""
    return str(Path(__file__).resolve().parent.parent / "spark" / "plan_job.py")


def plan_job_error(run_dir: str | Path, *, clear: bool = False) -> str | None:
    """The one-line error ``spark/plan_job.py`` recorded in ``RUN_DIR/plan_error.json`` when its plan failed (the
    DAG fails the task with it, not with spark-submit's exit status); ``clear``: remove a previous one first."""
    path = Path(run_dir) / PLAN_ERROR_FILE
    if clear:
        path.unlink(missing_ok=True)
        return None
    try:
        doc = json.loads(path.read_text(errors="replace"))
    except FileNotFoundError:
        return None
    except ValueError:
        return f"an unreadable error record in {path}"
    return str(from_record(doc)).splitlines()[0][:2000] if doc else None


def spark_args(run_dir: str | Path, history: str | None = None) -> list[str]:
    """The application arguments of ``spark/skew_analysis.py`` for ``run_dir``."""
    args = ["--run-dir", str(run_dir)]
    if history:
        args += ["--history", str(history)]
    return args


def plan(run_dir: str | Path, mode: str, *, brokers: Sequence[int] | None = None, isolated: bool = False,
         **options: Any) -> dict[str, Any]:
    """Plan ``mode`` (``brokers``: the new ones, or those to empty) as ``options`` say: ``PlanOptions``' fields as an
    operator gives them (``capacity``: a capacity file in Cruise Control's format; ``bands``: dimension -> band as a
    fraction; ``throttle="50MB/s"``, ``schedule``, ``per_broker``, ``total``: the execution the plan's time estimate
    assumes; ``groups`` / ``master``: the load placement split in groups, as Spark tasks on ``master``;
    ``failover_order``: followers ordered for failover), None or left out: the default.

    ``isolated``: plan in a fresh ``python -m rebalancer plan`` process (``run_cli``), as the DAGs do. The plan of a
    large cluster starts worker processes (the leader waves' pool, a Spark session); they re-import the main module
    of the process that starts them, and inside an Airflow task that is Airflow itself, whose import fails there
    (tasks may not reach the metadata database): every plan of 12,000 partitions or more failed in the DAGs. A
    process of its own also hands its gigabytes back to the machine when the plan is written."""
    from .plan import plan_run_dir
    from .plan.options import PlanOptions

    ids = [int(b) for b in brokers] if brokers else None
    if mode in ("add-brokers", "remove-brokers") and not ids:
        raise InputError(f"mode {mode} needs the broker ids (the new brokers, or those to empty)")
    if isolated:  # plan_args reads the options first: a bad one fails here, in this process
        run_cli(["plan", *plan_args(run_dir, mode, brokers=ids, **options)])
        return plan_summary(run_dir)
    result = plan_run_dir(run_dir, mode, brokers=ids, options=PlanOptions.from_input(options))
    return _plan_summary(Path(run_dir), result.to_dict())


def plan_args(run_dir: str | Path, mode: str, *, brokers: Sequence[int] | None = None, **options: Any) -> list[str]:
    """The arguments of ``rebalancer plan`` (after the word ``plan``) for ``plan``'s options: what an isolated plan
    runs, and what the DAGs hand ``spark/plan_job.py``."""
    from .options import to_argv
    from .plan.options import PlanOptions

    PlanOptions.from_input(options)  # an unknown or bad option fails here, not in the other process
    args = [str(run_dir), "--mode", mode]
    args += ["--brokers", ",".join(str(int(b)) for b in brokers)] if brokers else []
    return args + to_argv(PlanOptions, options)


def plan_summary(run_dir: str | Path) -> dict[str, Any]:
    """The small summary ``plan`` returns, read from ``RUN_DIR/plan.json`` (after a plan in another process)."""
    from .formats import read_json

    return _plan_summary(Path(run_dir), read_json(Path(run_dir) / "plan.json"))


def plan_groups(run_dir: str | Path, mode: str, groups: int | None = None, master: str | None = None) -> int:
    """How many groups of topics the plan of ``run_dir`` places apart (1: one pass), as the planner will decide it
    (``split_plan``), from the snapshot's parquet row counts: no need to read snapshot.json. Only load placements
    are split; ``leaders`` plans never are."""
    import pyarrow.parquet as pq

    from .plan.place_load import split_plan

    if mode == "leaders":
        return 1
    rd = RunDir(Path(run_dir))
    try:
        replicas = pq.read_metadata(rd.replicas).num_rows
        brokers = pq.read_metadata(rd.brokers).num_rows
    except (OSError, ValueError) as exc:
        raise InputError(f"{run_dir}: no readable snapshot parquet ({type(exc).__name__}); take the snapshot "
                         "first") from None
    return split_plan(replicas, brokers, groups, master)[0]


def run_cli(args: Sequence[str]) -> None:
    """``python -m rebalancer ARGS`` in a process of its own (this interpreter, this package), its output passed
    through; a failure raises the error the CLI recorded (``errors.ERROR_RECORD_ENV``: its class and its one line),
    or a ``RuntimeError`` for an internal error or a process that recorded none."""
    import subprocess
    import sys
    import tempfile

    package_root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="rebalancer-cli-") as tmp:
        record = Path(tmp) / "error.json"
        env[ERROR_RECORD_ENV] = str(record)
        proc = subprocess.run([sys.executable, "-m", "rebalancer", *args], env=env, stdin=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, errors="replace", check=False)
        if proc.stderr:
            sys.stderr.write(proc.stderr)
        if proc.returncode == 0:
            return
        try:
            doc = json.loads(record.read_text())
        except (OSError, ValueError):
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            raise RuntimeError(f"rebalancer {args[0]} failed (exit {proc.returncode}): "
                               f"{lines[-1] if lines else 'no error recorded'}") from None
    raise from_record(doc)


def _plan_summary(run: Path, doc: Mapping[str, Any]) -> dict[str, Any]:
    s = doc.get("summary", {})
    dev = s.get("max_deviation_pct", {})
    return {"run_dir": str(run), "mode": doc.get("mode"), "strategy": doc.get("strategy"),
            "plan_hash": doc.get("content_hash"), "changes": len(doc.get("changes", [])),
            "replica_moves": s.get("replica_moves"), "leader_changes": s.get("leader_changes"),
            "bytes_moved": s.get("bytes_moved"), "moves_to_bound": s.get("moves_to_bound"),
            "leader_changes_to_bound": s.get("leader_changes_to_bound"),
            "solver_status": doc.get("solver", {}).get("status"), "execution": s.get("execution"),
            "max_deviation_pct": {k: dev.get(k) for k in ("replicas_before", "replicas_after", "leaders_before",
                                                           "leaders_after", "bytes_before", "bytes_after")}}


def has_changes(run_dir: str | Path) -> bool:
    """Does the plan change anything? (A balanced cluster needs no approval and no execution.)"""
    from .planfile.result import load_plan

    return bool(load_plan(run_dir).changes)


def validate(run_dir: str | Path, *, max_changes_per_partition: int | None = None, max_deviation_pct: float = 15.0,
             max_leader_deviation_pct: float = 15.0, max_disk_deviation_pct: float | None = None,
             max_network_deviation_pct: float | None = None, max_disk_utilisation_pct: float | None = None,
             max_network_utilisation_pct: float | None = None, max_bytes_to_bound: float | None = None,
             max_failover_deviation_pct: float | None = None) -> dict[str, Any]:
    """The GX gates; raises ``GateFailure`` (the message names the failed gates) after writing the result.
    The load thresholds (disk and network deviation, disk and network utilisation): None is the plan's own band or
    threshold; ``max_bytes_to_bound`` None is 1.15; ``max_failover_deviation_pct`` None is 25."""
    from .validate import Thresholds, format_gate_table, validate_run_dir

    th = Thresholds(max_changes_per_partition=max_changes_per_partition, max_deviation_pct=max_deviation_pct,
                    max_leader_deviation_pct=max_leader_deviation_pct, max_disk_deviation_pct=max_disk_deviation_pct,
                    max_network_deviation_pct=max_network_deviation_pct,
                    max_disk_utilisation_pct=max_disk_utilisation_pct,
                    max_network_utilisation_pct=max_network_utilisation_pct, max_bytes_to_bound=max_bytes_to_bound,
                    max_failover_deviation_pct=max_failover_deviation_pct)
    result = validate_run_dir(run_dir, th)
    return {"run_dir": str(run_dir), "passed": result["passed"], "gates": len(result["gates"]),
            "docs": str(Path(result["docs"]).resolve()), "table": format_gate_table(result)}


def report(run_dir: str | Path, *, report_url: str | None = None, docs_url: str | None = None,
           cluster: str | None = None) -> dict[str, Any]:
    """Render report.html and compose the approval request (subject and markdown body) for the approver."""
    from .report import render_report

    path = render_report(run_dir)
    subject, body = approval_request(run_dir, report_url=report_url, docs_url=docs_url, cluster=cluster)
    return {"run_dir": str(run_dir), "report": str(path), "subject": subject, "body": body}


def approval_request(run_dir: str | Path, *, report_url: str | None = None, docs_url: str | None = None,
                     cluster: str | None = None) -> tuple[str, str]:
    """Subject (cluster, mode, size) and markdown body (moves, bytes, bound ratio, balance, gates, links).

    Airflow renders the body as markdown, and plan.json, snapshot.json and validation/result.json may have been
    edited by hand: every value from them is markdown-escaped (``_md``) or shown literally in a code span."""
    from .balance import human_bytes

    run = Path(run_dir)
    doc = json.loads(RunDir(run).plan.read_text())
    s = doc.get("summary", {})
    snap = _snapshot_meta(run)
    where = cluster or snap.get("source") or "the cluster"
    mode = doc.get("mode", "?")
    moves, leaders, moved = s.get("replica_moves", 0), s.get("leader_changes", 0), s.get("bytes_moved") or 0
    moved = human_bytes(moved) if isinstance(moved, (int, float)) else str(moved)
    size = f"{moves} replica moves, {moved}" if mode != "leaders" else f"{leaders} leader changes, no data movement"
    failover = _failover_lead(doc)
    if failover and not moves and not leaders:
        size = "followers reordered for failover, no data movement"
    cut = _cut_short(doc)
    subject = f"Approve {mode} on {where}: {size}" + (" (cut short by the time limit)" if cut else "")
    bounds = s.get("lower_bounds", {})
    dev = s.get("max_deviation_pct", {})

    def ratio(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, (int, float)) else "n/a"

    lines = [
        *cut,
        *_bands_unmet(doc),
        f"**{_md(mode)}** plan for **{_md(where)}** (strategy {_md_code(doc.get('strategy'))}, solver status "
        f"{_md(doc.get('solver', {}).get('status', '?'))}), plan hash {_md_code(str(doc.get('content_hash'))[:12])}.",
        "",
        *failover,
        *_load_lead(s.get("load"), mode),
        *_execution_lead(s.get("execution")),
        "| | plan | lower bound | ratio |",
        "|---|---:|---:|---:|",
        f"| replica moves | {_md(moves)} | {_md(bounds.get('replica_moves', 'n/a'))} | "
        f"{ratio(s.get('moves_to_bound'))} |",
        f"| leader changes | {_md(leaders)} | {_md(bounds.get('leader_changes', 'n/a'))} | "
        f"{ratio(s.get('leader_changes_to_bound'))} |",
        f"| bytes to copy | {_md(moved)} | | |",
        f"| partitions changed | {_md(s.get('partitions_changed', len(doc.get('changes', []))))} | | |",
        "",
        "Balance (max deviation from the median, before -> after):",
        "",
        "| | before | after |",
        "|---|---:|---:|",
    ]
    for metric in ("replicas", "leaders", "bytes"):
        b, a = dev.get(f"{metric}_before"), dev.get(f"{metric}_after")
        lines.append(f"| {metric} | {_pct(b)} | {_pct(a)} |")
    result_path = RunDir(run).validation_result
    if result_path.exists():
        result = json.loads(result_path.read_text())
        passed = sum(1 for g in result.get("gates", []) if g.get("passed"))
        lines += ["", f"Validation gates (Great Expectations): **{passed}/{len(result.get('gates', []))} passed**", "",
                  "| gate | | observed | threshold |", "|---|---|---|---|"]
        for g in result.get("gates", []):
            lines.append(f"| {_md(g.get('name'))} | {'PASS' if g.get('passed') else 'FAIL'} | {_md(g.get('observed'))} "
                         f"| {_md(g.get('threshold'))} |")
    links = []
    if report_url:
        links.append(f"[Open the approver's report]({_md_url(report_url)})")
    if docs_url:
        links.append(f"[Validation Data Docs]({_md_url(docs_url)})")
    if links:
        lines += ["", " · ".join(links)]
    lines += ["", "Approve executes exactly this plan (its hash is recorded), throttled and in batches; Reject ends the "
                  "run without touching the cluster."]
    return subject, "\n".join(lines)


def _execution_lead(execution: Any) -> list[str]:
    """The approval request's line on time: at the run's throttle, the bound (no order of the moves is faster, and
    the broker that sets it) and the expected duration (``movement.estimate``)."""
    from .movement.estimate import describe

    if not isinstance(execution, dict):
        return []
    try:
        line = describe(execution)
    except (KeyError, TypeError, ValueError):  # a hand-edited plan.json: no estimate rather than a wrong one
        return []
    return [f"**Execution** {_md(line)}.", ""]


def _bands_unmet(doc: Mapping[str, Any]) -> list[str]:
    """The approval request's first line when the plan leaves brokers outside a band: which, in which dimension, and
    whether the planner's exact program proved that no placement meets them all."""
    solver = doc.get("solver") or {}
    outside = solver.get("outside_bands")
    if not isinstance(outside, dict) or not outside:
        return []
    where = "; ".join(f"{_md(d)}: broker(s) {_md(', '.join(map(str, list(bs)[:8])))}"
                      + (f" and {len(bs) - 8} more" if len(bs) > 8 else "")
                      for d, bs in outside.items() if isinstance(bs, list))
    proof = solver.get("bands_proof") or {}
    placed = [d for d in outside if d in ("disk", "nw_in", "replicas")]  # what the placement's exact program covers
    from .plan.sum_proofs import why_counts_out_of_reach, why_out_of_reach

    proven = why_out_of_reach(proof)
    counted = why_counts_out_of_reach(proof) if "replicas" in outside else None
    if placed and proven is not None:
        why = _md(proven)
    elif placed and proof.get("feasible") is True and proof.get("strict") is False:
        why = ("no placement does better than this: a broker the mode lets move one way only ends past its band on "
               "the side it cannot correct, no further from its target than before, as the disk gate accepts")
    elif placed and proof.get("feasible") is True:
        why = "a placement meeting every band exists, but this plan does not reach it"
    elif not placed:
        why = "network out and leader counts follow leadership, which the replica sets limit"
    else:
        why = _md(solver.get("outside_why") or "no further move brings these brokers closer")
    if counted is not None and _md(counted) not in why:  # (the plan's "why" may carry it already)
        why = f"{why}; {_md(counted)}"
    return [f"**Not every band is met**: {where}. {why}; the gates below judge it.", ""]


def _cut_short(doc: Mapping[str, Any]) -> list[str]:
    """The approval request's first line when the time limit cut the plan short: where, and what to do about it."""
    budget = (doc.get("solver") or {}).get("budget") or {}
    cut = [p for p, rec in (budget.get("phases") or {}).items() if isinstance(rec, dict) and rec.get("cut_short")]
    if not cut:  # a phase that cannot stop may end past the limit: late, not cut short
        return []
    limit = budget.get("limit")
    limit_text = f"{limit:g} s " if isinstance(limit, (int, float)) else ""
    return [f"**Cut short by the {_md(limit_text)}time limit in {_md(cut[0])}** "
            f"({_md(', '.join(cut))} stopped early): the best valid plan found by then, not the best this "
            f"planner finds. Reject and plan again with a larger limit (`time_limit_s`, `--time-limit`) unless an "
            f"answer now matters more.", ""]


def _failover_lead(doc: Mapping[str, Any]) -> list[str]:
    """The approval request's line on a follower order for failover (``plan --failover-order`` or, where the plan
    changed nothing else, ``--failover-when-balanced``): how many partitions it reorders and the worst single broker
    failure before -> after."""
    solver, failover = doc.get("solver"), (doc.get("summary") or {}).get("failover") or {}
    record = solver.get("failover") if isinstance(solver, dict) else None
    if not isinstance(record, dict) or not record.get("reordered"):
        return []
    why = " (the plan changed nothing else)" if record.get("why") == "nothing else to change" else ""
    line = f"**Followers reordered for failover**{why}: {_md(record.get('reordered'))} partition(s), no data copied"
    try:
        before, after = failover["before"]["worst_broker"], failover["after"]["worst_broker"]
        line += (f"; after the worst single broker failure, leaders {_pct(before['leaders_dev_pct'])} -> "
                 f"{_pct(after['leaders_dev_pct'])}, leader {_md(failover['weighted_by'])} "
                 f"{_pct(before['load_dev_pct'])} -> {_pct(after['load_dev_pct'])} from the survivors' mean")
    except (KeyError, TypeError):  # a hand-edited plan.json: the count alone
        pass
    return [line + ".", ""]


def _load_lead(load: Any, mode: str) -> list[str]:
    """The approval request's lead: bytes to copy against their lower bound (and the resource that set it), then the
    broker furthest from its target after the plan in each load dimension, against the band."""
    from .balance import human_bytes

    if not isinstance(load, dict) or mode == "leaders":
        return []
    moved, bound = load.get("bytes_moved"), load.get("bytes_bound")
    if not isinstance(moved, (int, float)) or not isinstance(bound, (int, float)):
        return []
    ratio = load.get("bytes_to_bound")
    by = f" (set by {_md(load.get('bytes_bound_by'))})" if load.get("bytes_bound_by") else ""
    lines = [f"**Bytes to copy: {_md(human_bytes(moved))}**, lower bound {_md(human_bytes(bound))}{by}, ratio "
             f"**{ratio:.3f}**." if isinstance(ratio, (int, float)) else
             f"**Bytes to copy: {_md(human_bytes(moved))}**, lower bound {_md(human_bytes(bound))}{by}."]
    worst = []
    raw_dims = load.get("dimensions")
    dims: dict[str, Any] = raw_dims if isinstance(raw_dims, dict) else {}
    for name in ("disk", "nw_in", "nw_out"):
        d = dims.get(name)
        if not isinstance(d, dict) or not isinstance(d.get("worst_after"), dict):
            continue
        w = d["worst_after"]
        dev, band = w.get("deviation_pct"), d.get("band_pct")
        if not isinstance(dev, (int, float)) or not isinstance(band, (int, float)) or not d.get("total"):
            continue
        inside = "inside" if abs(dev) <= band else "**outside**"
        worst.append(f"{_md(d.get('title', name))}: broker {_md(w.get('broker'))} at {dev:+.1f}% of its target "
                     f"({inside} the {band:g}% band)")
    if worst:
        lines.append("Worst broker after the plan: " + "; ".join(worst) + ".")
    return [*lines, ""]


_MD_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def _md(value: Any) -> str:
    """A value as markdown text, on one line and with every ASCII punctuation character backslash-escaped: it
    shows as typed and makes no link, autolink, image, HTML, emphasis, heading or table cell."""
    return _MD_PUNCTUATION.sub(r"\\\1", _CONTROL.sub(" ", str(value)))


def _md_code(value: Any) -> str:
    """A value as a code span (shown literally), on one line and without a backtick that would end the span."""
    return "`" + _CONTROL.sub(" ", str(value)).replace("`", "'") + "`"


def _md_url(url: str) -> str:
    """A link target with the characters that could end it or break out of it percent-encoded."""
    return quote(url, safe=":/?#@!$&*+,;=%~")


def _pct(value: Any) -> str:
    return f"{value:.1f}%" if isinstance(value, (int, float)) else "n/a"


def _snapshot_meta(run: Path) -> dict[str, Any]:
    """The snapshot's ``meta`` without loading every partition (snapshot.json has one partition per line)."""
    path = RunDir(run).snapshot
    try:
        with path.open() as fh:
            head = fh.read(65536)
        m = re.search(r'"source"\s*:\s*("(?:[^"\\]|\\.)*")', head)
        return {"source": json.loads(m.group(1))} if m else {}
    except OSError:
        return {}


def record_decision(run_dir: str | Path, *, decision: str, by: str, comment: str = "") -> dict[str, Any]:
    """approval.json for exactly this plan; ``execute`` checks it (hash and decision) before touching anything."""
    from .execute import approve

    return approve(run_dir, by=by, decision=decision, comment=comment)


def execution_started(run_dir: str | Path) -> bool:
    """Did an execution of this run ever start (its state file exists)? Only then can it need rollback or cleanup."""
    return RunDir.of(run_dir).state.exists()


@contextmanager
def _backend(source: str, kafka_config: Mapping[str, Any] | None, timeout: float) -> Iterator[Backend]:
    from .execute import open_backend

    kwargs: dict[str, Any] = {"timeout": timeout}
    if kafka_config:
        kwargs["kafka_config"] = dict(kafka_config)
    with open_backend(source, **kwargs) as backend:
        yield backend


def _options(options: Mapping[str, Any]) -> ExecOptions:
    """ExecOptions from the runbook's keywords: its fields by name (``rebalancer.options``), text options as an
    operator writes them (``throttle="50MB/s"``), one left out or None its default; progress lines on stdout (task
    logs). A name that is no option is a TypeError, as for any function."""
    from .execute import ExecOptions

    return ExecOptions.from_input(options, progress=lambda text: print(text, flush=True))


def execute(run_dir: str | Path, source: str, *, kafka_config: Mapping[str, Any] | None = None,
            timeout: float = 10.0, **options: Any) -> dict[str, Any]:
    """Execute the approved plan in throttled batches (resumable; a rerun of a finished execution is a no-op).
    ``options``: ``ExecOptions``' fields (``throttle="50MB/s"``, ``schedule``, ``per_broker``, ...)."""
    from .execute import execute as run_execute
    from .execute import preflight

    opts = _options(options)  # an invalid throttle fails here, before any connection
    preflight(run_dir, kind="execute")  # the plan's hash, its approval and the state to resume, before connecting
    with _backend(source, kafka_config, timeout) as backend:
        state = run_execute(run_dir, backend, opts)
    batches = state.get("batches", [])
    return {"run_dir": str(run_dir), "finished": bool(state.get("finished")),
            "schedule": str(state.get("schedule", "batches")), "batches": len(batches),
            "moves": sum(len(b.get("todo", b.get("steps", []))) for b in batches),
            "skipped_drifted": sum(len(b.get("skipped", [])) for b in batches),
            "throttle_bytes_per_s": state.get("throttle_bytes_per_s")}


def verify(run_dir: str | Path, source: str, *, kafka_config: Mapping[str, Any] | None = None,
           timeout: float = 10.0) -> dict[str, Any]:
    """The cluster has the planned replicas, full ISRs, preferred leaders and no throttle (verification.json)."""
    from .execute import verify as run_verify

    with _backend(source, kafka_config, timeout) as backend:
        result = run_verify(run_dir, backend)
    return {"run_dir": str(run_dir), "passed": result["passed"], "partitions_checked": result["partitions_checked"]}


def rollback(run_dir: str | Path, source: str, *, kafka_config: Mapping[str, Any] | None = None,
             timeout: float = 10.0, wait: float = 600.0, **options: Any) -> dict[str, Any]:
    """Revert what this run moved to rollback.json and verify the original assignment.

    Moves still in flight are waited for up to ``wait`` seconds first (ZooKeeper mode cannot cancel them: a move
    towards a dead broker finishes only once the broker is back)."""
    from .execute import preflight
    from .execute import rollback as run_rollback

    run = Path(run_dir)
    reason = _execution_failure(run)
    opts = _options({**options, "min_timeout": wait})
    preflight(run, kind="rollback")
    with _backend(source, kafka_config, timeout) as backend:
        state = run_rollback(run, backend, opts)
    return {"run_dir": str(run), "reason": reason, "verified": bool(state.get("verified")),
            "reverted": sum(len(b.get("todo", [])) for b in state.get("batches", []))}


def _execution_failure(run: Path) -> str | None:
    path = RunDir(run).state
    if not path.exists():
        return None
    failed = json.loads(path.read_text()).get("failed")
    return str(failed) if failed is not None else None


def cleanup_throttles(run_dir: str | Path, source: str, *, kafka_config: Mapping[str, Any] | None = None,
                      timeout: float = 10.0) -> dict[str, Any]:
    """Remove the throttles this run set (its ledger), except those of its moves still copying; throttles set by
    anyone else are reported, never removed. A run that never executed set none: nothing to connect to."""
    from .execute import preflight, release_throttles

    if not execution_started(run_dir):
        return {"run_dir": str(run_dir), "removed": [], "skipped": "nothing was executed"}
    opts = _options({})
    preflight(run_dir)
    with _backend(source, kafka_config, timeout) as backend:
        result = release_throttles(run_dir, backend, opts)
    return {"run_dir": str(run_dir), **result, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def outcome(run_dir: str | Path, failed: Sequence[str] = (), source: str | None = None) -> dict[str, Any]:
    """The run's verdict from its artifacts: ``{"ok": bool, "message": one line}``; ``failed`` names the tasks that
    failed. A failed run's message leads with the first cause and says whether the rollback restored the cluster;
    advice in it runs as printed (``source``: the cluster's, for the throttle command)."""
    run = Path(run_dir)
    approval = _read(RunDir(run).approval)
    state = _read(RunDir(run).state)
    ver = _read(RunDir(run).verification("planned"))
    back = _read(RunDir(run).verification("original"))
    if failed:
        parts = []
        if "execute" in failed and state and state.get("failed"):
            parts.append(f"execution failed: {state['failed']}")
        elif "verify" in failed and ver and not ver.get("passed"):
            what = []
            if ver.get("problems"):
                first = ver["problems"][0]
                what.append(f"{len(ver['problems'])} partition(s) not as planned (e.g. {first['partition']}: "
                            f"{first['problem']})")
            if ver.get("throttles_left"):
                what.append(f"throttles left on {', '.join(sorted(ver['throttles_left']))}")
            parts.append("verification failed: " + ("; ".join(what) or "see verification.json"))
        elif "validate" in failed and (result := _read(RunDir(run).validation_result)):
            gates = [g["name"] for g in result.get("gates", []) if not g.get("passed")]
            parts.append(f"validation gates failed: {', '.join(gates) or '?'}: nothing was asked or executed")
        else:
            parts.append(f"{', '.join(failed)} failed (see the task log)")
        if back is not None:
            parts.append("rolled back: original assignment verified" if back.get("passed")
                         else "rollback did NOT restore the original assignment (see verification_rollback.json)")
        elif "rollback" in failed:
            parts.append("the ROLLBACK FAILED: partitions may sit between the plan and the original assignment")
        if "cleanup_throttles" in failed:
            from .execute.throttle import clear_command

            parts.append(f"throttle cleanup FAILED: run '{clear_command(run, source or 'SOURCE')}'")
        return {"ok": False, "message": "; ".join(parts)}
    if approval and approval.get("decision") == "rejected":
        message = f"plan rejected by {approval.get('by')} at {approval.get('at')}: nothing executed"
        if approval.get("comment"):
            message += f" ({approval['comment']})"
    elif ver and ver.get("passed"):
        message = (f"executed and verified: {ver.get('partitions_checked')} partition(s) at their planned replicas, "
                   f"no throttle left (approved by {approval.get('by') if approval else '?'})")
    else:
        message = "nothing executed"
    return {"ok": True, "message": message}


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None




def _display(source: str) -> str:
    """A source URL without credentials."""
    from .urls import redact_url

    return redact_url(source)
