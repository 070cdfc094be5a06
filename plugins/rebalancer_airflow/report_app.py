"""The report view: a FastAPI app mounted by the api-server at ``/rebalancer`` (see ``rebalancer_plugin.py``).

    GET /rebalancer/                                   every run directory, newest first, with its state
    GET /rebalancer/runs/{dag_id}/{run_id}/            one run: plan numbers, approval, links to its artifacts
    GET /rebalancer/runs/{dag_id}/{run_id}/report.html the approver's report
    GET /rebalancer/runs/{dag_id}/{run_id}/docs/{path} the validation Data Docs (validation/docs/)
    GET /rebalancer/runs/{dag_id}/{run_id}/files/{path} any artifact of the run (JSON, PNG, ...), as a download

Every route needs an Airflow login (the UI's session cookie or a bearer token) with read access to the DAG's runs.

Run files are evidence that anyone with write access to the runs volume can edit, so nothing in them runs on the
Airflow origin (where a script would act with the viewer's login):

- the pages rendered here escape every value read from a run file (a number is formatted only when it is one) and
  a file that is not the JSON object it should be shows as malformed; their CSP allows no script at all;
- report.html is served with ``Content-Security-Policy: sandbox`` (an opaque origin, no script), allowing only
  what it needs: its inline CSS and its charts as ``data:`` PNGs;
- the Data Docs need their inline scripts and styles and the CSS/JS/fonts/logo that Great Expectations links
  from public CDNs (jQuery, Bootstrap, bootstrap-table): ``sandbox allow-scripts`` without ``allow-same-origin``,
  so those scripts run in an opaque origin that cannot read the Airflow cookie or call the API, with no
  ``connect-src`` at all (``allow-popups``: GX's help links open a new tab). From that origin the browser sends no
  login cookie (SameSite=Lax) with a subresource request, so nothing is loaded from the docs' own directory
  (GX links none but its favicon);
- ``files/`` answers with ``Content-Disposition: attachment``, ``nosniff`` and application/octet-stream for
  anything but JSON and PNG (and a script-less sandbox in case a browser renders it anyway).

A run is addressed by the ids Airflow knows: the DAG must exist and the run must be one of its runs, and its
directory is ``run_dir_for(dag_id, run_id)``, resolved once (``run_directory``) from the ids that were
authorised. Directory names are file-safe forms of the ids (``runbook.safe_name``), and distinct ids can share
one (``manual__2026-01-05T10:00:00+00:00`` and ``manual__2026-01-05T10_00_00_00_00``; a DAG id and the same id
with a leading underscore): such a directory could hold either run's files, so it is served for neither (404),
and the index does not list it. Paths are resolved inside the run directory; anything that escapes it (``..``,
symlinks, absolute paths) is 404.
"""

from __future__ import annotations

import html
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.models.dag import DagModel
from airflow.models.dagrun import DagRun
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from rebalancer import rundir as rd

__all__ = ["app", "resolve_inside", "run_directory", "PAGE_CSP", "REPORT_CSP", "DOCS_CSP", "FILES_CSP"]

app = FastAPI(title="Kafka rebalance reports", description="Run directories of the Kafka rebalance runbook DAGs")

_RUN_ACCESS = [Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))]

PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
REPORT_CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"
DOCS_CSP = ("sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox; default-src 'none'; "
            "script-src 'unsafe-inline' https:; style-src 'unsafe-inline' https:; font-src https: data:; "
            "img-src data: https:; connect-src 'none'")
FILES_CSP = "sandbox; default-src 'none'"
DOWNLOAD_TYPES = {".json": "application/json", ".png": "image/png"}  # anything else: application/octet-stream


def _headers(csp: str) -> dict[str, str]:
    return {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff"}


# -- run directories --------------------------------------------------------------------------------------------
def _runs_root() -> Path:
    from rebalancer.runbook import runs_root

    return runs_root()


def _known_runs(session: Session, root: Path, dag_dirs: Collection[str]) -> dict[Path, tuple[str, str]]:
    """The DAG runs Airflow knows whose run directory (under ``root``, in one of ``dag_dirs``) is theirs alone,
    by that directory: a directory that two DAG ids or two run ids map to is left out."""
    from rebalancer.runbook import run_dir_for, safe_name

    dags: dict[str, list[str]] = defaultdict(list)
    for dag_id in session.scalars(select(DagModel.dag_id)):
        if safe_name(dag_id) in dag_dirs:
            dags[safe_name(dag_id)].append(dag_id)
    unique = [ids[0] for ids in dags.values() if len(ids) == 1]
    runs: dict[Path, list[tuple[str, str]]] = defaultdict(list)
    for dag_id, run_id in session.execute(select(DagRun.dag_id, DagRun.run_id).where(DagRun.dag_id.in_(unique))):
        runs[run_dir_for(dag_id, run_id, root)].append((dag_id, run_id))
    return {path: ids[0] for path, ids in runs.items() if len(ids) == 1}


def run_directory(dag_id: str, run_id: str, session: SessionDep) -> Path:
    """The directory of the DAG run ``dag_id`` / ``run_id`` (the authorised ids, exactly as Airflow knows them);
    404 for ids Airflow does not know and for a directory shared with another run."""
    from rebalancer.runbook import run_dir_for

    root = _runs_root()
    run = run_dir_for(dag_id, run_id, root)
    if _known_runs(session, root, {run.parent.name}).get(run) != (dag_id, run_id) or not run.is_dir():
        raise HTTPException(404, f"no run directory for {dag_id} / {run_id} (not a run of a DAG, or the run has "
                                 "not taken its snapshot yet)")
    return run


RunDir = Annotated[Path, Depends(run_directory)]


def resolve_inside(root: Path, relative: str) -> Path:
    """``root/relative`` if it is a file inside ``root`` (after resolving ``..`` and symlinks); 404 otherwise."""
    root = root.resolve()
    if not relative or relative.startswith(("/", "\\")) or "\x00" in relative:
        raise HTTPException(404, "not found")
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, "not found")
    return target


# -- reading run files ------------------------------------------------------------------------------------------
def _json(path: Path) -> Any:
    """A run file's JSON; None when it is absent or not JSON (callers tell the two apart by the file's existence)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _text(value: Any) -> str:
    return html.escape(str(value))


def _number(value: Any, spec: str = "") -> str:
    """A number from a run file, formatted; anything else as (escaped) text, n/a when absent."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return format(value, spec)
    return "n/a" if value is None else _text(value)


def _field(doc: Any, key: str) -> Any:
    return doc.get(key) if isinstance(doc, dict) else None


# The first of these files that exists tells the run's state (report.html by its existence alone).
_STATES: tuple[tuple[str, Callable[[dict[str, Any]], str] | None], ...] = (
    (rd.VERIFICATION_ROLLBACK_FILE, lambda d: "rolled back"),
    (rd.VERIFICATION_FILE, lambda d: "verified" if d.get("passed") is True else "verification failed"),
    (f"{rd.EXECUTION_DIR}/{rd.STATE_FILE}",
     lambda d: "execution failed" if d.get("failed") else "executed" if d.get("finished") else "executing"),
    (rd.APPROVAL_FILE, lambda d: str(d.get("decision", "?"))),
    (rd.REPORT_FILE, None),
    (rd.PLAN_FILE, lambda d: "planned" if d.get("changes") else "nothing to change"),
)


def _state(run: Path) -> str:
    for name, verdict in _STATES:
        if (run / name).exists():
            if verdict is None:
                return "awaiting approval"
            doc = _json(run / name)
            return verdict(doc) if isinstance(doc, dict) else f"{name} is malformed"
    return "started"


# -- pages ------------------------------------------------------------------------------------------------------
_STYLE = """<style>body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1a202c}table{border-collapse:collapse}
td,th{border:1px solid #cbd5e0;padding:.3rem .6rem;text-align:left}th{background:#edf2f7}a{color:#2b6cb0}
code{background:#edf2f7;padding:0 .2rem}</style>"""


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html><head><meta charset='utf-8'><title>{_text(title)}</title>"
                        f"{_STYLE}</head><body><h2>{_text(title)}</h2>{body}</body></html>",
                        headers=_headers(PAGE_CSP))


def _href(dag_id: str, run_id: str) -> str:
    return f"runs/{quote(dag_id, safe='')}/{quote(run_id, safe='')}/"


@app.get("/", response_class=HTMLResponse)
def index(user: GetUserDep, session: SessionDep) -> HTMLResponse:
    from airflow.api_fastapi.app import get_auth_manager

    root = _runs_root()
    dag_dirs = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    auth = get_auth_manager()
    allowed: dict[str, bool] = {}
    rows = []
    for run, (dag_id, run_id) in _known_runs(session, root, dag_dirs).items():
        if dag_id not in allowed:
            details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
            allowed[dag_id] = auth.is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                                     details=details, user=user)
        if allowed[dag_id] and run.is_dir():
            rows.append((run.stat().st_mtime, dag_id, run_id, run))
    rows.sort(reverse=True)
    lines = ["<table><tr><th>DAG</th><th>run</th><th>state</th><th>plan</th><th>updated</th><th></th></tr>"]
    for mtime, dag_id, run_id, run in rows[:500]:
        plan = _json(rd.RunDir(run).plan)
        s = _field(plan, "summary")
        what = (f"{_text(plan.get('mode'))}: {_number(_field(s, 'replica_moves'))} moves, "
                f"{_number(_field(s, 'leader_changes'))} leader changes" if isinstance(plan, dict) else "")
        href = _href(dag_id, run_id)
        report = f"<a href='{href}report.html' target='_blank'>report</a>" if rd.RunDir(run).report.exists() else ""
        lines.append(f"<tr><td>{_text(dag_id)}</td><td><a href='{href}' title='{_text(run_id)}'>{_text(run.name)}"
                     f"</a></td><td>{_text(_state(run))}</td><td>{what}</td>"
                     f"<td>{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(mtime))} UTC</td><td>{report}</td></tr>")
    lines.append("</table>")
    if not rows:
        lines = [f"<p>No runs yet in <code>{_text(root)}</code>.</p>"]
    return _page("Kafka rebalance runs", "".join(lines))


@app.get("/runs/{dag_id}/{run_id}", dependencies=_RUN_ACCESS, include_in_schema=False)
def run_redirect(dag_id: str, run_id: str) -> RedirectResponse:
    return RedirectResponse(f"{quote(run_id, safe='')}/")


_ARTIFACTS = (rd.PLAN_FILE, rd.REASSIGNMENT_FILE, rd.ROLLBACK_FILE, f"{rd.VALIDATION_DIR}/{rd.RESULT_FILE}",
              rd.APPROVAL_FILE, f"{rd.EXECUTION_DIR}/{rd.STATE_FILE}", rd.VERIFICATION_FILE,
              rd.VERIFICATION_ROLLBACK_FILE, f"{rd.ANALYSIS_DIR}/{rd.SUMMARY_FILE}")


@app.get("/runs/{dag_id}/{run_id}/", response_class=HTMLResponse, dependencies=_RUN_ACCESS)
def run_page(dag_id: str, run_id: str, run: RunDir) -> HTMLResponse:
    items = [f"<p>State: <b>{_text(_state(run))}</b> &middot; directory <code>{_text(run)}</code></p>"]
    plan = _json(rd.RunDir(run).plan)
    if isinstance(plan, dict):
        s = _field(plan, "summary")
        items.append(f"<p>{_text(plan.get('mode'))} plan <code>{_text(str(plan.get('content_hash'))[:12])}</code>: "
                     f"{_number(_field(s, 'replica_moves'))} replica moves, "
                     f"{_number(_field(s, 'leader_changes'))} leader changes, "
                     f"{_number(_field(s, 'bytes_moved'), ',')} bytes; "
                     f"moves / lower bound = {_number(_field(s, 'moves_to_bound'), '.3f')}</p>")
    elif rd.RunDir(run).plan.exists():
        items.append("<p>plan.json is malformed</p>")
    approval = _json(rd.RunDir(run).approval)
    if isinstance(approval, dict):
        items.append(f"<p>Decision: <b>{_text(approval.get('decision'))}</b> by {_text(approval.get('by'))} at "
                     f"{_text(approval.get('at'))} {_text(approval.get('comment') or '')}</p>")
    elif rd.RunDir(run).approval.exists():
        items.append("<p>approval.json is malformed</p>")
    links = []
    if rd.RunDir(run).report.exists():
        links.append("<li><a href='report.html'>Approver's report</a></li>")
    if (rd.RunDir(run).data_docs / "index.html").exists():
        links.append("<li><a href='docs/index.html'>Validation Data Docs</a></li>")
    links += [f"<li><a href='files/{quote(name)}'>{_text(name)}</a></li>" for name in _ARTIFACTS
              if (run / name).exists()]
    items.append("<ul>" + "".join(links) + "</ul>")
    return _page(f"{dag_id} / {run_id}", "".join(items))


@app.get("/runs/{dag_id}/{run_id}/report.html", dependencies=_RUN_ACCESS)
def report(run: RunDir) -> FileResponse:
    if not rd.RunDir(run).report.exists():
        raise HTTPException(404, "no report yet: it is written by the run's report task")
    return FileResponse(resolve_inside(run, rd.REPORT_FILE), media_type="text/html", headers=_headers(REPORT_CSP))


@app.get("/runs/{dag_id}/{run_id}/docs/{path:path}", dependencies=_RUN_ACCESS)
def data_docs(path: str, run: RunDir) -> FileResponse:
    return FileResponse(resolve_inside(rd.RunDir(run).data_docs, path), headers=_headers(DOCS_CSP))


@app.get("/runs/{dag_id}/{run_id}/files/{path:path}", dependencies=_RUN_ACCESS)
def artifact(path: str, run: RunDir) -> FileResponse:
    target = resolve_inside(run, path)
    return FileResponse(target, media_type=DOWNLOAD_TYPES.get(target.suffix.lower(), "application/octet-stream"),
                        filename=target.name, headers=_headers(FILES_CSP))
