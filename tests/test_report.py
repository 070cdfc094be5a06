"""The approver's report on a real run directory (scenario -> snapshot -> plan), checked in headless Chromium.

The Spark job that writes ``analysis/`` is built separately, so ``_write_analysis`` computes the JSON files the
report reads with pandas, exactly as ``docs/analysis-schema.md`` defines them.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rebalancer.balance import deviation_pct, human_bytes
from rebalancer.errors import InputError
from rebalancer.formats import write_cluster_json
from rebalancer.model import Cluster
from rebalancer.movement.estimate import describe, duration
from rebalancer.plan import plan_run_dir
from rebalancer.report import render_report
from rebalancer.sim.scenarios import build_scenario

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_TIMEOUT = 60
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SCREENSHOT_COPY = Path("/tmp/report-screenshot.png")
NEW_BROKERS = [12, 13, 14, 15]


# -- analysis files per docs/analysis-schema.md ---------------------------------------------------------------
def _replica_rows(cluster: Cluster, assignment: dict[tuple[str, int], list[int]]) -> pd.DataFrame:
    rows = []
    for p in cluster.partitions:
        replicas = assignment.get(p.tp, list(p.replicas))
        for pos, b in enumerate(replicas):
            rows.append({"topic": p.topic, "partition": p.partition, "broker": b, "is_leader": pos == 0,
                         "size_bytes": p.size_bytes})
    return pd.DataFrame(rows)


def _dev(value: float, median: float) -> float:
    return round(deviation_pct(value, median), 3)


def _brokers(cluster: Cluster, reps: pd.DataFrame) -> list[dict[str, Any]]:
    g = reps.groupby("broker").agg(replicas=("topic", "size"), leaders=("is_leader", "sum"),
                                   bytes=("size_bytes", "sum"))
    g = g.reindex([b.id for b in cluster.brokers], fill_value=0)
    med = {m: statistics.median(g[m].tolist()) for m in ("replicas", "leaders", "bytes")}
    avg_leaders = g["leaders"].mean()
    racks = {b.id: b.rack for b in cluster.brokers}
    return [
        {"broker": int(b), "rack": racks[b], "replicas": int(r.replicas), "leaders": int(r.leaders),
         "bytes": int(r.bytes), "bytes_in_p95": 0.0,
         "dev_replicas_pct": _dev(r.replicas, med["replicas"]), "dev_leaders_pct": _dev(r.leaders, med["leaders"]),
         "dev_bytes_pct": _dev(r.bytes, med["bytes"]),
         "wix_underloaded": bool(r.replicas < 0.5 * med["replicas"]),
         "pinterest_over": bool(r.leaders > avg_leaders), "pinterest_under": bool(r.leaders < avg_leaders)}
        for b, r in g.iterrows()
    ]


def _topic_broker(cluster: Cluster, reps: pd.DataFrame, column: str) -> pd.DataFrame:
    """topics x all brokers matrix of replica (or preferred-leader) counts, 0 where a topic is absent."""
    data = reps if column == "replicas" else reps[reps["is_leader"]]
    m = data.groupby(["topic", "broker"]).size().unstack(fill_value=0)
    return m.reindex(index=list(cluster.topics), columns=[b.id for b in cluster.brokers], fill_value=0)


def _topics_skew(cluster: Cluster, reps: pd.DataFrame) -> pd.DataFrame:
    m = _topic_broker(cluster, reps, "replicas")
    cv = (m.std(axis=1, ddof=0) / m.mean(axis=1)).round(4)
    skew = pd.DataFrame({"spread": m.max(axis=1) - m.min(axis=1), "cv": cv})
    return skew.sort_values(["spread", "cv"], ascending=False)


def _summary_part(cluster: Cluster, reps: pd.DataFrame, rows: list[dict[str, Any]]) -> dict[str, Any]:
    skew = _topics_skew(cluster, reps)
    return {
        "brokers": len(cluster.brokers), "racks": len({b.rack for b in cluster.brokers}),
        "topics": len(cluster.topics), "partitions": len(cluster.partitions), "replicas": int(len(reps)),
        "bytes": int(reps["size_bytes"].sum()),
        "median": {m: statistics.median(r[m] for r in rows) for m in ("replicas", "leaders", "bytes")},
        "max_abs_deviation_pct": {m: max(abs(r[f"dev_{m}_pct"]) for r in rows)
                                  for m in ("replicas", "leaders", "bytes")},
        "wix_underloaded": [r["broker"] for r in rows if r["wix_underloaded"]],
        "pinterest_over": [r["broker"] for r in rows if r["pinterest_over"]],
        "pinterest_under": [r["broker"] for r in rows if r["pinterest_under"]],
        "under_replicated_partitions": sum(1 for p in cluster.partitions if p.under_replicated),
        "worst_topics": [{"topic": t, "spread": int(r.spread), "cv": float(r.cv)} for t, r in skew.head(20).iterrows()],
    }


def _top(cluster: Cluster, reps: pd.DataFrame, topics: list[str]) -> dict[str, Any]:
    rep, lead = _topic_broker(cluster, reps, "replicas"), _topic_broker(cluster, reps, "leaders")
    return {"topics": topics, "brokers": [b.id for b in cluster.brokers],
            "replicas": rep.loc[topics].astype(int).values.tolist(),
            "leaders": lead.loc[topics].astype(int).values.tolist()}


def _write_analysis(run: Path, cluster: Cluster) -> None:
    """summary.json, brokers(_after).json and topic_broker_top(_after).json as the Spark job would write them."""
    out = run / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    plan = json.loads((run / "plan.json").read_text()) if (run / "plan.json").exists() else None
    before = _replica_rows(cluster, {})
    rows_before = _brokers(cluster, before)
    top_topics = list(_topics_skew(cluster, before).index[:20])
    summary: dict[str, Any] = {
        "generated_at": "2026-11-22T05:00:00Z",
        "spark": {"master": "test (pandas)", "version": "n/a", "seconds": 0.0},
        "input": {"replica_rows": int(len(before)), "history": None, "plan": plan is not None},
        "before": _summary_part(cluster, before, rows_before), "after": None,
    }
    (out / "brokers.json").write_text(json.dumps(rows_before))
    (out / "topic_broker_top.json").write_text(json.dumps(_top(cluster, before, top_topics)))
    if plan is not None:
        after = _replica_rows(cluster, {(c["topic"], c["partition"]): c["replicas_after"] for c in plan["changes"]})
        rows_after = _brokers(cluster, after)
        summary["after"] = _summary_part(cluster, after, rows_after)
        (out / "brokers_after.json").write_text(json.dumps(rows_after))
        (out / "topic_broker_top_after.json").write_text(json.dumps(_top(cluster, after, top_topics)))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))


def _make_run(run: Path, *, with_plan: bool) -> Cluster:
    run.mkdir(parents=True, exist_ok=True)
    cluster = build_scenario("new-brokers")
    write_cluster_json(cluster, run / "snapshot.json")
    if with_plan:
        plan_run_dir(run, "add-brokers", brokers=NEW_BROKERS)
    _write_analysis(run, cluster)
    return cluster


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("report") / "run"
    _make_run(run, with_plan=True)
    return run


# -- headless Chromium --------------------------------------------------------------------------------------
def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (scripts/setup.sh does)")
    profile = tmp / "chromium-profile"
    profile.mkdir(exist_ok=True)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT)
    assert result.returncode == 0, f"chromium exited {result.returncode}: {result.stderr[-2000:]}"
    return result


class _DomReader(HTMLParser):
    """Text and attributes of every element with an id; every tag name and every img src."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self.text: dict[str, str] = {}
        self.attrs: dict[str, dict[str, str | None]] = {}
        self.tags: list[str] = []
        self.img_src: list[str] = []
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "img":
            self.img_src.append(a.get("src") or "")
        ident = a.get("id")
        if ident:
            self.text[ident] = ""
            self.attrs[ident] = a
        if tag not in self.VOID:
            self._open.append((tag, ident))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self._open:
            if ident:
                self.text[ident] += data


def _read_dom(markup: str) -> _DomReader:
    reader = _DomReader()
    reader.feed(markup)
    reader.close()
    return reader


# -- tests ----------------------------------------------------------------------------------------------------
def test_report_charts_are_pngs(planned_run: Path) -> None:
    html_path = render_report(planned_run)
    assert html_path == planned_run / "report.html" and html_path.exists()
    execution = json.loads((planned_run / "plan.json").read_text())["summary"]["execution"]
    assert f'<span id="execution">{describe(execution)}</span>' in html_path.read_text()
    for name in ("brokers_replicas.png", "brokers_leaders.png", "brokers_bytes.png", "topics_heatmap.png",
                 "load_disk.png", "load_nw_in.png", "load_nw_out.png", "failover.png"):
        data = (planned_run / "report" / name).read_bytes()
        assert data[:8] == PNG_MAGIC, name
        assert len(data) > 10_000, f"{name} is only {len(data)} bytes"


@pytest.mark.browser
def test_report_in_chromium_shows_plan_numbers(planned_run: Path, tmp_path: Path) -> None:
    html_path = render_report(planned_run)
    plan = json.loads((planned_run / "plan.json").read_text())
    summary = json.loads((planned_run / "analysis" / "summary.json").read_text())
    s = plan["summary"]

    dom = _read_dom(_chromium(tmp_path, "--dump-dom", html_path.as_uri()).stdout)
    expected = {
        "moves": str(s["replica_moves"]),
        "bound": str(s["lower_bounds"]["replica_moves"]),
        "ratio": f"{s['moves_to_bound']:.3f}",
        "leader-changes": str(s["leader_changes"]),
        "partitions-changed": str(s["partitions_changed"]),
        "bytes": human_bytes(s["bytes_moved"]),
        "dev-replicas-before": f"{s['max_deviation_pct']['replicas_before']:.1f}",
        "dev-replicas-after": f"{s['max_deviation_pct']['replicas_after']:.1f}",
        "dev-leaders-after": f"{s['max_deviation_pct']['leaders_after']:.1f}",
        "dev-bytes-after": f"{s['max_deviation_pct']['bytes_after']:.1f}",
        "brokers": str(summary["before"]["brokers"]),
        "partitions": str(summary["before"]["partitions"]),
        "replicas": str(summary["before"]["replicas"]),
        "hash": plan["content_hash"][:12],
        "solver-status": plan["solver"]["status"],
        # the execution's time at the throttle the plan assumed (execute's default here)
        "execution-expected": duration(s["execution"]["expected_seconds"]),
        "execution": describe(s["execution"]),
    }
    got = {k: dom.text.get(k, "<missing>").strip() for k in expected}
    assert got == expected
    assert dom.attrs["bytes"]["data-bytes"] == str(s["bytes_moved"])
    # A load plan (the default with sizes): bytes within 1.10x their bound, replica moves never below theirs.
    assert s["replica_moves"] >= s["lower_bounds"]["replica_moves"] > 0
    assert s["load"]["bytes_to_bound"] <= 1.10 and s["load"]["dimensions"]["disk"]["outside_after"] == []
    assert dom.text["verdict"].strip() == "Validation not run yet"
    assert dom.text["validation-missing"].strip() == "validation not run yet"
    assert dom.text["changes-count"].startswith(f"showing 200 of {len(plan['changes'])} changes")
    assert dom.text["source"].strip() == "simulated scenario new-brokers"
    # Self-contained: eight embedded charts (counts, heat map, a utilisation chart per load dimension, a broker's
    # failure), nothing fetched, no script.
    assert len(dom.img_src) == 8 and all(src.startswith("data:image/png;base64,") for src in dom.img_src)
    assert all(f'id="load-chart-{d}"' in html_path.read_text() for d in ("disk", "nw_in", "nw_out"))
    assert not {"script", "link", "iframe", "object"} & set(dom.tags)
    assert "http://" not in html_path.read_text() and "https://" not in html_path.read_text()

    # Tall enough for the headline, the count charts, the utilisation section (a chart per load dimension) and the
    # failover chart.
    shot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,5700", "--hide-scrollbars", html_path.as_uri())
    assert shot.read_bytes()[:8] == PNG_MAGIC and shot.stat().st_size > 50_000
    shutil.copyfile(shot, SCREENSHOT_COPY)


def test_gate_table_when_validation_ran(planned_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(planned_run, run)
    (run / "validation").mkdir()
    gates = [{"name": "moves <= 1.1 x bound", "passed": True, "observed": 1.0, "threshold": 1.1},
             {"name": "racks <script>", "passed": False, "observed": [3, 2], "threshold": 3, "description": "a & b"}]
    (run / "validation" / "result.json").write_text(json.dumps({"passed": False, "gates": gates}))
    markup = render_report(run).read_text()
    dom = _read_dom(markup)
    assert "Validation FAILED: 1 of 2 gates red" in dom.text["verdict"]
    assert '<tr class="pass"><td>moves &lt;= 1.1 x bound</td><td class="status">PASS</td>' in markup
    assert '<tr class="fail"><td>racks &lt;script&gt;</td><td class="status">FAIL</td><td>[3, 2]</td>' in markup
    assert "a &amp; b" in markup and "script" not in dom.tags


def test_missing_summary_is_an_input_error_naming_the_file(planned_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(planned_run, run)
    (run / "analysis" / "summary.json").unlink()
    with pytest.raises(InputError, match=r"analysis/summary\.json: no such file"):
        render_report(run)
    (run / "analysis" / "summary.json").write_text("{not json")
    with pytest.raises(InputError, match=r"analysis/summary\.json: malformed JSON"):
        render_report(run)


def test_without_a_plan_the_report_shows_current_skew(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _make_run(run, with_plan=False)
    markup = render_report(run).read_text()
    dom = _read_dom(markup)
    assert "No plan exists yet" in dom.text["no-plan"]
    assert "moves" not in dom.text and "dev-replicas-after" not in dom.text
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert dom.text["dev-replicas-before"] == f"{summary['before']['max_abs_deviation_pct']['replicas']:.1f}"
    assert dom.text["flag-wix-underloaded"] == "4: 12, 13, 14, 15"
    assert len(dom.img_src) == 4  # no plan: no utilisation charts
    for name in ("brokers_replicas.png", "brokers_leaders.png", "brokers_bytes.png", "topics_heatmap.png"):
        assert (run / "report" / name).read_bytes()[:8] == PNG_MAGIC
    assert not list((run / "report").glob("load_*.png")) and not (run / "report" / "failover.png").exists()


def test_the_report_says_what_a_broker_or_rack_failure_does(planned_run: Path) -> None:
    """The failover section (issue 46): the worst single-broker failures after the plan and every rack, each against
    the same failure before it, from plan.json's ``summary.failover``; no section without a plan."""
    markup = render_report(planned_run).read_text()
    failover = json.loads((planned_run / "plan.json").read_text())["summary"]["failover"]
    section = markup[markup.index('<section id="failover">'):]
    section = section[:section.index("</section>")]
    worst = failover["after"]["worst_broker"]
    assert f"<th>broker {worst['leaders_dev_pct_by']}</th>" in section
    assert f"{worst['leaders_dev_pct']:.1f}%" in section
    for rack in failover["after"]["racks"]:
        assert f"<th>rack {rack}</th>" in section
    assert section.count("<tr><th>broker ") == 5 and "before" in section and "after" in section
    # how far an order of followers alone could go (``order_floor``), beside where the plan's worst stands
    floor = failover["order_floor"]
    line = section[section.index('<p id="failover-floor">'):]
    assert (f"below leaders {floor['leaders_dev_pct']:.1f}% (broker {floor['leaders_dev_pct_by']}; the plan's worst: "
            f"{worst['leaders_dev_pct']:.1f}%)") in line
    assert f"leader {failover['weighted_by']} {floor['load_dev_pct']:.1f}% (broker {floor['load_dev_pct_by']};" in line
    # every broker's failure as a chart above the table
    assert section.index('<figure id="failover-chart"><img src="data:image/png;base64,') < section.index("<table")
    assert (planned_run / "report" / "failover.png").read_bytes()[:8] == PNG_MAGIC


def test_no_failover_section_without_a_plan(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _make_run(run, with_plan=False)
    assert 'id="failover"' not in render_report(run).read_text()
