"""The report view: a FastAPI app mounted by the api-server at ``/rebalancer`` (see ``rebalancer_plugin.py``).

    GET /rebalancer/                                   every run directory, newest first, with its state
    GET /rebalancer/runs/{dag_id}/{run_id}/            one run: plan numbers, approval, links to its artifacts
    GET /rebalancer/runs/{dag_id}/{run_id}/report.html the approver's report
    GET /rebalancer/runs/{dag_id}/{run_id}/docs/{path} the validation Data Docs (validation/docs/)
    GET /rebalancer/runs/{dag_id}/{run_id}/files/{path} any artifact of the run (JSON, PNG, ...)

Every route needs an Airflow login (the UI's session cookie or a bearer token) with read access to the DAG's runs.
Paths are resolved inside the run directory; anything that escapes it (``..``, symlinks, absolute paths) is 404.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag

__all__ = ["app", "resolve_inside"]

app = FastAPI(title="Kafka rebalance reports", description="Run directories of the Kafka rebalance runbook DAGs")

_RUN_ACCESS = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))]


def _runs_root() -> Path:
    from rebalancer.runbook import runs_root

    return runs_root()


def _run_dir(dag_id: str, run_id: str) -> Path:
    from rebalancer.runbook import run_dir_for

    run = run_dir_for(dag_id, run_id, _runs_root())
    if not run.is_dir():
        raise HTTPException(404, f"no run directory for {dag_id} / {run_id} (the run has not taken its snapshot yet)")
    return run


def resolve_inside(root: Path, relative: str) -> Path:
    """``root/relative`` if it is a file inside ``root`` (after resolving ``..`` and symlinks); 404 otherwise."""
    root = root.resolve()
    if not relative or relative.startswith(("/", "\\")) or "\x00" in relative:
        raise HTTPException(404, "not found")
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, "not found")
    return target


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _state(run: Path) -> str:
    if (run / "verification_rollback.json").exists():
        return "rolled back"
    ver = _json(run / "verification.json")
    if ver is not None:
        return "verified" if ver.get("passed") else "verification failed"
    state = _json(run / "execution" / "state.json")
    if state is not None:
        return "execution failed" if state.get("failed") else ("executed" if state.get("finished") else "executing")
    approval = _json(run / "approval.json")
    if approval is not None:
        return str(approval.get("decision", "?"))
    if (run / "report.html").exists():
        return "awaiting approval"
    plan = _json(run / "plan.json")
    if plan is not None:
        return "planned" if plan.get("changes") else "nothing to change"
    return "started"


_STYLE = """<style>body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1a202c}table{border-collapse:collapse}
td,th{border:1px solid #cbd5e0;padding:.3rem .6rem;text-align:left}th{background:#edf2f7}a{color:#2b6cb0}
code{background:#edf2f7;padding:0 .2rem}</style>"""


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                        f"{_STYLE}</head><body><h2>{html.escape(title)}</h2>{body}</body></html>")


@app.get("/", response_class=HTMLResponse)
def index(request: Request, user: GetUserDep) -> HTMLResponse:
    from airflow.api_fastapi.app import get_auth_manager

    root = _runs_root()
    rows = []
    auth = get_auth_manager()
    dags = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for dag_dir in dags:
        if not auth.is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                      details=DagDetails(id=dag_dir.name), user=user):
            continue
        for run in dag_dir.iterdir():
            if run.is_dir():
                rows.append((run.stat().st_mtime, dag_dir.name, run))
    rows.sort(reverse=True)
    lines = ["<table><tr><th>DAG</th><th>run</th><th>state</th><th>plan</th><th>updated</th><th></th></tr>"]
    for mtime, dag_id, run in rows[:500]:
        plan = _json(run / "plan.json") or {}
        s = plan.get("summary", {})
        what = (f"{plan.get('mode')}: {s.get('replica_moves', 0)} moves, {s.get('leader_changes', 0)} leader changes"
                if plan else "")
        href = f"runs/{quote(dag_id, safe='')}/{quote(run.name, safe='')}/"
        report = f"<a href='{href}report.html' target='_blank'>report</a>" if (run / "report.html").exists() else ""
        lines.append(f"<tr><td>{html.escape(dag_id)}</td><td><a href='{href}'>{html.escape(run.name)}</a></td>"
                     f"<td>{html.escape(_state(run))}</td><td>{html.escape(what)}</td>"
                     f"<td>{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(mtime))} UTC</td><td>{report}</td></tr>")
    lines.append("</table>")
    if not rows:
        lines = [f"<p>No runs yet in <code>{html.escape(str(root))}</code>.</p>"]
    return _page("Kafka rebalance runs", "".join(lines))


@app.get("/runs/{dag_id}/{run_id}", dependencies=_RUN_ACCESS, include_in_schema=False)
def run_redirect(dag_id: str, run_id: str) -> RedirectResponse:
    return RedirectResponse(f"{quote(run_id, safe='')}/")


@app.get("/runs/{dag_id}/{run_id}/", response_class=HTMLResponse, dependencies=_RUN_ACCESS)
def run_page(dag_id: str, run_id: str) -> HTMLResponse:
    run = _run_dir(dag_id, run_id)
    plan = _json(run / "plan.json") or {}
    s = plan.get("summary", {})
    approval = _json(run / "approval.json")
    items = [f"<p>State: <b>{html.escape(_state(run))}</b> &middot; directory <code>{html.escape(str(run))}</code></p>"]
    if plan:
        items.append(f"<p>{html.escape(str(plan.get('mode')))} plan <code>{html.escape(str(plan.get('content_hash'))[:12])}"
                     f"</code>: {s.get('replica_moves', 0)} replica moves, {s.get('leader_changes', 0)} leader "
                     f"changes, {s.get('bytes_moved', 0):,} bytes; moves / lower bound = {s.get('moves_to_bound')}</p>")
    if approval:
        items.append(f"<p>Decision: <b>{html.escape(str(approval.get('decision')))}</b> by "
                     f"{html.escape(str(approval.get('by')))} at {html.escape(str(approval.get('at')))} "
                     f"{html.escape(str(approval.get('comment') or ''))}</p>")
    links = []
    if (run / "report.html").exists():
        links.append("<li><a href='report.html'>Approver's report</a></li>")
    if (run / "validation" / "docs" / "index.html").exists():
        links.append("<li><a href='docs/index.html'>Validation Data Docs</a></li>")
    for name in ("plan.json", "reassignment.json", "rollback.json", "validation/result.json", "approval.json",
                 "execution/state.json", "verification.json", "verification_rollback.json", "analysis/summary.json"):
        if (run / name).exists():
            links.append(f"<li><a href='files/{name}'>{name}</a></li>")
    items.append("<ul>" + "".join(links) + "</ul>")
    return _page(f"{dag_id} / {run_id}", "".join(items))


@app.get("/runs/{dag_id}/{run_id}/report.html", dependencies=_RUN_ACCESS)
def report(dag_id: str, run_id: str) -> FileResponse:
    run = _run_dir(dag_id, run_id)
    if not (run / "report.html").exists():
        raise HTTPException(404, "no report yet: it is written by the run's report task")
    return FileResponse(resolve_inside(run, "report.html"), media_type="text/html")


@app.get("/runs/{dag_id}/{run_id}/docs/{path:path}", dependencies=_RUN_ACCESS)
def data_docs(dag_id: str, run_id: str, path: str) -> FileResponse:
    return FileResponse(resolve_inside(_run_dir(dag_id, run_id) / "validation" / "docs", path))


@app.get("/runs/{dag_id}/{run_id}/files/{path:path}", dependencies=_RUN_ACCESS)
def artifact(dag_id: str, run_id: str, path: str) -> FileResponse:
    return FileResponse(resolve_inside(_run_dir(dag_id, run_id), path))
