"""Run files are evidence, not code: the report view, report.html and the approval request show whatever an edited
run file holds as text, never as markup on the Airflow origin.

The view is checked in a real Airflow 3.3 (the plugin mounted by the api-server, logged-in users as in
``test_airflow_runbook.py``) and in headless Chromium. Its runs belong to ``kafka_rebalance_weekly``, which stays
paused: the runs created here through the REST API stay queued and nothing executes; their run directories are
planted by hand, as someone with write access to the runs volume could.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from airflow_support import APPROVER, Stack, signed_in_browser
from test_report import _make_run, _read_dom

from rebalancer import runbook
from rebalancer.report import render_report

pytestmark = pytest.mark.timeout(600)  # the first Airflow test also starts Airflow and renders a report

DAG = "kafka_rebalance_weekly"
PWNED = "<script>document.title='pwned'</script>"  # sets the title if it ever runs
ALERT = "<script>alert(1)</script>"
# Two real run ids whose file-safe forms would be one without runbook.safe_name's hash: each gets its own directory.
TWIN_A, TWIN_B = "manual__2026-01-05T10:00:00+00:00", "manual__2026-01-05T10_00_00_00_00"
# Inside the sandboxed Data Docs a script runs, but in an opaque origin without the Airflow cookie.
DOCS_PROBE = ("<!doctype html><html><body><p>docs</p>"
              "<script>let c; try { c = document.cookie.length } catch (e) { c = 'blocked' }"
              "document.title = 'origin=' + window.origin + ' cookie=' + c</script></body></html>")

EDITED_PLAN = {
    "format": "kafka-rebalancer/plan", "mode": PWNED, "strategy": PWNED, "content_hash": PWNED,
    "summary": {"replica_moves": ALERT, "leader_changes": {"n": PWNED}, "bytes_moved": "lots",
                "partitions_changed": [1], "moves_to_bound": PWNED},
    "solver": {"status": PWNED}, "changes": [{"topic": PWNED, "partition": 0}],
}


def url(dag_id: str, run_id: str, path: str = "") -> str:
    return f"/rebalancer/runs/{quote(dag_id, safe='')}/{quote(run_id, safe='')}/{path}"


# -- a real Airflow with planted run directories ----------------------------------------------------------------
@pytest.fixture(scope="module")
def stack(airflow_stack: Any) -> Stack:
    return airflow_stack.result(timeout=600)  # the worker's shared stack (tests/conftest.py)


@pytest.fixture(scope="module")
def report_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with a real report.html (rendered from a plan whose strategy and a topic carry markup)."""
    run = tmp_path_factory.mktemp("report") / "run"
    _make_run(run, with_plan=True)
    plan = json.loads((run / "plan.json").read_text())
    plan["strategy"] = PWNED
    plan["changes"][0]["topic"] = PWNED
    (run / "plan.json").write_text(json.dumps(plan))
    render_report(run)
    return run


@pytest.fixture(scope="module")
def runs(stack: Stack, report_run: Path) -> dict[str, Path]:
    """Queued runs of the paused weekly DAG and the run directories planted for them (and for ids Airflow lacks)."""
    ids = {"edited": "manual__edited", "malformed": "manual__malformed", "solo": "manual__solo",
           "twin_a": TWIN_A, "twin_b": TWIN_B}
    for run_id in ids.values():
        stack.admin.request("POST", f"/dags/{DAG}/dagRuns", json={"dag_run_id": run_id, "logical_date": None})
    dirs = {key: stack.run_dir(DAG, run_id) for key, run_id in ids.items()}
    assert dirs["twin_a"] != dirs["twin_b"]

    edited = dirs["edited"]
    shutil.copytree(report_run, edited)
    (edited / "plan.json").write_text(json.dumps(EDITED_PLAN))
    for name, doc in (("approval.json", {"decision": PWNED, "by": PWNED, "at": PWNED, "comment": PWNED}),
                      ("execution/state.json", {"failed": PWNED})):
        (edited / name).parent.mkdir(parents=True, exist_ok=True)
        (edited / name).write_text(json.dumps(doc))
    (edited / "evil.html").write_text(f"<!doctype html><p>evil</p>{PWNED}")
    report = edited / "report.html"  # a hand-edited report: the CSP sandbox keeps its script from running
    report.write_text(report.read_text().replace("</body>", f"{PWNED}</body>"))
    (edited / "validation" / "docs").mkdir(parents=True)
    (edited / "validation" / "docs" / "index.html").write_text(DOCS_PROBE)

    malformed = dirs["malformed"]
    malformed.mkdir(parents=True)
    (malformed / "plan.json").write_text("[1, 2]")
    (malformed / "verification.json").write_text('"passed"')
    (malformed / "approval.json").write_text("{not json")

    for key in ("solo", "twin_a", "twin_b"):
        dirs[key].mkdir(parents=True)
        (dirs[key] / "plan.json").write_text(json.dumps({"mode": "leaders", "changes": [], "content_hash": key,
                                                         "summary": {"replica_moves": 0, "leader_changes": 0}}))
    (stack.runs_root() / "not_a_dag" / "r1").mkdir(parents=True)
    return dirs


@pytest.fixture(scope="module")
def approver(stack: Stack) -> Any:
    client = stack.client(APPROVER)
    return lambda path: client.http.get(f"{client.base_url}{path}")


# -- the report view ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_edited_run_files_are_shown_escaped(runs: dict[str, Path], approver: Any) -> None:
    page = approver(url(DAG, "manual__edited"))
    assert page.status_code == 200, page.text[:500]
    assert "<script" not in page.text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; replica moves" in page.text
    assert "lots bytes" in page.text and "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page.text
    assert "State: <b>execution failed</b>" in page.text

    index = approver("/rebalancer/")
    assert index.status_code == 200, index.text[:500]
    assert "<script" not in index.text.lower() and "&lt;script&gt;alert(1)&lt;/script&gt; moves" in index.text


@pytest.mark.slow
def test_malformed_run_files_render_as_malformed(runs: dict[str, Path], approver: Any) -> None:
    page = approver(url(DAG, "manual__malformed"))
    assert page.status_code == 200, page.text[:500]
    assert "verification.json is malformed" in page.text and "plan.json is malformed" in page.text
    index = approver("/rebalancer/")
    assert index.status_code == 200, index.text[:500]
    assert re.search(r"manual__malformed</a></td><td>verification.json is malformed</td>", index.text)


@pytest.mark.slow
def test_run_files_are_downloads(runs: dict[str, Path], approver: Any) -> None:
    for path, media in (("evil.html", "application/octet-stream"), ("plan.json", "application/json"),
                        ("report/brokers_replicas.png", "image/png")):
        resp = approver(url(DAG, "manual__edited", f"files/{path}"))
        assert resp.status_code == 200
        assert resp.headers["content-type"].split(";")[0] == media, path
        assert resp.headers["content-disposition"].startswith("attachment;"), path
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in resp.headers.get("content-security-policy", ""), path


@pytest.mark.slow
def test_report_and_data_docs_are_sandboxed(runs: dict[str, Path], approver: Any) -> None:
    report = approver(url(DAG, "manual__edited", "report.html"))
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/html")
    csp = report.headers.get("content-security-policy", "")
    assert re.match(r"sandbox;", csp) and "default-src 'none'" in csp and "script-src" not in csp, csp
    assert report.headers["x-content-type-options"] == "nosniff"
    docs = approver(url(DAG, "manual__edited", "docs/index.html"))
    csp = docs.headers.get("content-security-policy", "")
    assert docs.status_code == 200 and re.match(r"sandbox allow-scripts[ a-z-]*;", csp), csp
    assert "allow-same-origin" not in csp and "connect-src 'none'" in csp


@pytest.mark.slow
def test_only_the_run_airflow_knows_reaches_its_directory(runs: dict[str, Path], approver: Any) -> None:
    assert approver(url(DAG, "manual__solo")).status_code == 200
    for twin, key in ((TWIN_A, "twin_a"), (TWIN_B, "twin_b")):  # each run sees its own directory only
        page = approver(url(DAG, twin))
        assert page.status_code == 200 and f"<code>{key}</code>" in page.text, page.text
    for dag_id, run_id in (
        (DAG, "manual__solo."),                # not a run; its file-safe form is not manual__solo either
        ("_" + DAG, "manual__solo"),           # not a DAG, but its file-safe form is kafka_rebalance_weekly
        ("not_a_dag", "r1"),                   # a directory without a DAG
    ):
        for path in ("", "report.html", "files/plan.json", "docs/index.html"):
            resp = approver(url(dag_id, run_id, path))
            assert resp.status_code == 404, (dag_id, run_id, path, resp.status_code)
    index = approver("/rebalancer/").text
    assert f"<a href='{url(DAG, 'manual__solo')[len('/rebalancer/'):]}' title='manual__solo'>manual__solo</a>" in index
    assert "not_a_dag" not in index and runs["twin_a"].name in index and runs["twin_b"].name in index


@pytest.mark.browser
@pytest.mark.slow
def test_in_chromium_the_report_renders_and_no_planted_script_runs(stack: Stack, runs: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    driver, wait = signed_in_browser(stack, tmp_path)
    try:

        # The run page and the index show the edited values as text.
        for path, shown in ((url(DAG, "manual__edited"), "<script>alert(1)</script> replica moves"),
                            ("/rebalancer/", "<script>alert(1)</script> moves")):
            driver.get(f"{stack.base_url}{path}")
            wait.until(ec.presence_of_element_located((By.TAG_NAME, "h2")))
            assert driver.title != "pwned" and not driver.find_elements(By.TAG_NAME, "script")
            assert shown in driver.find_element(By.TAG_NAME, "body").text

        # The approver's report under its CSP: tables, the inline style, the embedded charts; not the
        # script appended to it, nor the markup in its plan.
        driver.get(f"{stack.base_url}{url(DAG, 'manual__edited', 'report.html')}")
        wait.until(ec.presence_of_element_located((By.ID, "moves")))
        assert driver.title.startswith("Kafka rebalance report")
        assert driver.find_element(By.CSS_SELECTOR, ".cards").value_of_css_property("display") == "grid"
        images = driver.find_elements(By.TAG_NAME, "img")
        # the count charts, the heat map, a utilisation chart per load dimension and the failover chart
        assert len(images) == 8 and all(int(i.get_property("naturalWidth")) > 500 for i in images)
        assert len(driver.find_elements(By.CSS_SELECTOR, "table.changes tbody tr")) == 200
        assert PWNED in driver.find_element(By.ID, "changes").text

        # The Data Docs: scripts run, in an opaque origin that cannot read the Airflow cookie.
        driver.get(f"{stack.base_url}{url(DAG, 'manual__edited', 'docs/index.html')}")
        wait.until(lambda d: d.title.startswith("origin="))
        assert driver.title == "origin=null cookie=blocked"
    finally:
        driver.quit()


# -- report.html and the approval request -------------------------------------------------------------------------
@pytest.mark.slow
def test_report_html_shows_edited_plan_fields_as_text(tmp_path: Path) -> None:
    """Markup in any field is text; a field that is not the object or list it should be reads as n/a."""
    run = tmp_path / "run"
    _make_run(run, with_plan=True)
    plan = json.loads((run / "plan.json").read_text())
    plan.update(mode=PWNED, strategy=PWNED, content_hash=PWNED, solver=PWNED, params=[PWNED])
    plan["summary"]["lower_bounds"] = PWNED
    plan["changes"][0].update(topic=PWNED, replicas_before=7, leader_after=PWNED)
    (run / "plan.json").write_text(json.dumps(plan))
    top = json.loads((run / "analysis" / "topic_broker_top.json").read_text())
    top["topics"][0] = "$\\frac{<b>}$"  # matplotlib mathtext in a tick label
    (run / "analysis" / "topic_broker_top.json").write_text(json.dumps(top))

    markup = render_report(run).read_text()
    dom = _read_dom(markup)
    assert "script" not in dom.tags and "<script" not in markup
    assert dom.text["solver-status"] == "n/a" and dom.text["bound"] == "n/a" and dom.text["hash"] == PWNED[:12]
    assert f"<h1>Kafka rebalance: {html.escape(PWNED)} plan, strategy {html.escape(PWNED)}</h1>" in markup
    assert f"<tr><td>{html.escape(PWNED)}</td>" in markup and f"&rarr; {html.escape(PWNED)}</td>" in markup


def test_approval_request_markdown_shows_edited_fields_as_text(tmp_path: Path) -> None:
    """Airflow renders the body as markdown: an edited value must not make a link, an image, HTML, a heading or
    an extra table cell."""
    run = tmp_path / "run"
    (run / "validation").mkdir(parents=True)
    link = "[approve here](https://evil.example/)"
    (run / "plan.json").write_text(json.dumps({
        "mode": f"add-brokers <img src=x onerror=alert(1)> {link}", "strategy": "lp` <b>bold</b> `",
        "content_hash": "<script>", "solver": {"status": "Optimal | www.evil.example"},
        "summary": {"replica_moves": "<b>9</b>", "leader_changes": 1, "bytes_moved": "lots",
                    "lower_bounds": {"replica_moves": link}, "max_deviation_pct": {"replicas_before": "**x**"}},
        "changes": []}))
    (run / "validation" / "result.json").write_text(json.dumps({"gates": [
        {"name": "gate | <i>x</i>", "passed": True, "observed": link, "threshold": "a\n\n# heading"}]}))
    (run / "snapshot.json").write_text('{\n"meta": {"source": "zk://h/<b>c</b>[x](javascript:alert(1))"},\n')

    subject, body = runbook.approval_request(run, report_url="http://af/rebalancer/runs/d/r(1)/report.html")
    prose = re.sub(r"`[^`\n]*`", "", body)  # code spans show their text literally
    assert "`lp' <b>bold</b> '`" in body and "`<script>`" in body
    assert not re.findall(r"(?<!\\)<", prose), body  # no raw HTML
    links = re.findall(r"(?<!\\)\[", prose)
    assert links == ["["] and "[Open the approver's report](http://af/rebalancer/runs/d/r%281%29/report.html)" in body
    assert "www.evil" not in body and "javascript:" not in body and "https://evil" not in body  # no autolinks
    assert not [line for line in body.splitlines() if line.startswith("#")]
    assert "| \\<b\\>9\\<\\/b\\> |" in body  # shown as typed
    tables = [line for line in body.splitlines() if line.startswith("|")]
    for line in tables:  # every row has as many cells as its header
        header = next(h for h in reversed(tables[:tables.index(line) + 1]) if h.startswith("| |") or
                      h.startswith("| gate |"))
        assert len(re.findall(r"(?<!\\)\|", line)) == header.count("|"), line
