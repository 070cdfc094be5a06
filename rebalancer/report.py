"""The approver's report: one self-contained HTML page to read in a minute before approving a rebalance plan.

``render_report(RUN_DIR)`` reads

- ``analysis/summary.json`` and ``analysis/brokers.json`` (required, see ``docs/analysis-schema.md``),
- ``analysis/brokers_after.json``, ``analysis/topic_broker_top.json``, ``analysis/topic_broker_top_after.json``,
- ``plan.json`` (see ``rebalancer/planfile/result.py``) and ``validation/result.json`` (optional),
- the ``meta`` line of ``snapshot.json`` (optional, for the cluster's source),

and writes ``RUN_DIR/report.html`` plus the charts as PNGs in ``RUN_DIR/report/``. The page needs nothing else:
charts are embedded as base64 ``data:`` URIs, the CSS is inline, there is no JavaScript. Apart from the
generated-at timestamp the output depends only on the inputs. The page is the jinja2 template
``templates/report.html.j2``, rendered with autoescape from a view model of plain values (``_page``): inputs can be
edited by hand, so every value taken from them is text, never markup (``$`` is escaped in chart labels too, where
matplotlib would read mathtext); the few fragments built here (``Markup``) format their values escaped. A nested
object that is not one reads as n/a.

Page, top to bottom: title; headline (moves vs. lower bound, leader changes, bytes to copy, max deviation from
the median before -> after, content hash, solver status); per-broker bar charts with the median and the +-15 %
band; utilisation per broker before/after against each load band and capacity (``summary.load``); heat map of
the worst topics; flags (Wix, Pinterest, under-replicated); validation gates; change list.
Every headline number sits in an element with a stable ``id`` (``moves``, ``bound``, ``ratio``, ...).
"""

from __future__ import annotations

import base64
import html
import json
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import jinja2
from markupsafe import Markup

from .balance import deviation_pct, human_bytes
from .errors import InputError
from .formats import StagedFiles, atomic_write_text, read_json
from .rundir import CHARTS_DIR, PLAN_FILE, REPORT_FILE, RunDir

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["render_report", "REPORT_FILE", "CHARTS_DIR", "BAND_PCT", "MAX_CHANGE_ROWS"]

BAND_PCT = 15.0
MAX_CHANGE_ROWS = 200
MAX_TICK_LABELS = 60  # above this many brokers, label only a few ticks
MAX_LISTED_BROKERS = 24  # flag lists longer than this are cut with "... and N more"
METRICS = ("replicas", "leaders", "bytes")
LOAD_DIMENSIONS = ("disk", "nw_in", "nw_out")
CHART_FILES = ({m: f"brokers_{m}.png" for m in METRICS} | {"heatmap": "topics_heatmap.png"}
               | {f"load_{d}": f"load_{d}.png" for d in LOAD_DIMENSIONS} | {"failover": "failover.png"})

COLOR_OK = "#4c72b0"
COLOR_ABOVE = "#d62728"
COLOR_BELOW = "#ff7f0e"
COLOR_MEDIAN = "#2ca02c"


# -- inputs ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Inputs:
    run_dir: Path
    summary: dict[str, Any]
    brokers: list[dict[str, Any]]
    brokers_after: list[dict[str, Any]] | None
    after_source: str | None  # which file the "after" broker loads come from
    top: dict[str, Any] | None
    top_after: dict[str, Any] | None
    plan: dict[str, Any] | None
    validation: dict[str, Any] | None
    meta: dict[str, Any]


def _check(ok: bool, path: Path, what: str) -> None:
    if not ok:
        raise InputError(f"{path}: {what}")


def _optional_json(path: Path) -> Any | None:
    return read_json(path) if path.exists() else None


def _read_summary(path: Path) -> dict[str, Any]:
    doc = read_json(path)
    _check(isinstance(doc, dict), path, "expected a JSON object")
    _check(isinstance(doc.get("before"), dict), path, "missing the 'before' object")
    _check(doc.get("after") is None or isinstance(doc["after"], dict), path, "'after' is neither an object nor null")
    return cast(dict[str, Any], doc)  # checked above


def _check_broker_rows(doc: Any, path: Path) -> list[dict[str, Any]]:
    _check(isinstance(doc, list), path, "expected a JSON list of brokers")
    for i, row in enumerate(doc):
        _check(isinstance(row, dict), path, f"entry {i} is not an object")
        for key in ("broker", *METRICS):
            _check(isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool), path,
                   f"entry {i} has no numeric {key!r}")
    return sorted(doc, key=lambda r: r["broker"])


def _check_top(doc: Any, path: Path) -> dict[str, Any]:
    _check(isinstance(doc, dict), path, "expected a JSON object")
    topics, brokers, matrix = doc.get("topics"), doc.get("brokers"), doc.get("replicas")
    _check(isinstance(topics, list) and isinstance(brokers, list) and isinstance(matrix, list), path,
           "needs 'topics', 'brokers' and 'replicas' lists")
    _check(len(matrix) == len(topics) and all(isinstance(r, list) and len(r) == len(brokers) for r in matrix),
           path, "'replicas' is not a topics x brokers matrix")
    return cast(dict[str, Any], doc)  # checked above


def _check_plan(doc: Any, path: Path) -> dict[str, Any]:
    _check(isinstance(doc, dict), path, "expected a JSON object")
    _check(isinstance(doc.get("summary"), dict), path, "missing the 'summary' object")
    _check(isinstance(doc.get("changes"), list), path, "missing the 'changes' list")
    for key in ("replica_moves", "partitions_changed", "leader_changes", "bytes_moved"):
        _check(isinstance(doc["summary"].get(key), int), path, f"summary has no integer {key!r}")
    return cast(dict[str, Any], doc)  # checked above


def _check_validation(doc: Any, path: Path) -> dict[str, Any]:
    _check(isinstance(doc, dict), path, "expected a JSON object")
    _check(isinstance(doc.get("gates"), list), path, "missing the 'gates' list")
    _check(all(isinstance(g, dict) and "name" in g for g in doc["gates"]), path, "every gate needs a 'name'")
    return cast(dict[str, Any], doc)  # checked above


def _plan_brokers_after(plan: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Per-broker loads after the plan from plan.json, for when the analysis ran before the plan existed."""
    rows = plan["summary"].get("brokers")
    if not isinstance(rows, list):
        return None
    try:
        return sorted(({"broker": r["broker"], "rack": r.get("rack"), **{m: r[f"{m}_after"] for m in METRICS}}
                       for r in rows), key=lambda r: r["broker"])
    except (AttributeError, KeyError, TypeError):
        return None


def _snapshot_meta(path: Path) -> dict[str, Any]:
    """The ``"meta": {...},`` line of a snapshot written by ``write_cluster_json`` (never the whole file)."""
    try:
        with path.open(encoding="utf-8") as fh:
            for _, line in zip(range(20), fh, strict=False):
                if line.startswith('"meta":'):
                    meta = json.loads(line[len('"meta":'):].strip().rstrip(","))
                    return meta if isinstance(meta, dict) else {}
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    return {}


def _load_inputs(run_dir: Path) -> _Inputs:
    rd = RunDir(run_dir)
    analysis = rd.analysis
    summary = _read_summary(rd.analysis_summary)
    brokers = _check_broker_rows(read_json(analysis / "brokers.json"), analysis / "brokers.json")
    plan_path = rd.plan
    plan = _optional_json(plan_path)
    plan = _check_plan(plan, plan_path) if plan is not None else None
    after_path = analysis / "brokers_after.json"
    after_doc = _optional_json(after_path)
    brokers_after, after_source = None, None
    if after_doc is not None:
        brokers_after, after_source = _check_broker_rows(after_doc, after_path), "analysis/brokers_after.json"
    elif plan is not None:
        brokers_after = _plan_brokers_after(plan)
        after_source = PLAN_FILE if brokers_after is not None else None
    tops = {}
    for name in ("topic_broker_top.json", "topic_broker_top_after.json"):
        doc = _optional_json(analysis / name)
        tops[name] = _check_top(doc, analysis / name) if doc is not None else None
    val_path = rd.validation_result
    validation = _optional_json(val_path)
    return _Inputs(
        run_dir=run_dir, summary=summary, brokers=brokers, brokers_after=brokers_after, after_source=after_source,
        top=tops["topic_broker_top.json"], top_after=tops["topic_broker_top_after.json"], plan=plan,
        validation=_check_validation(validation, val_path) if validation is not None else None,
        meta=_snapshot_meta(rd.snapshot),
    )


# -- formatting -----------------------------------------------------------------------------------------------
def _obj(value: Any) -> Mapping[str, Any]:
    """A nested object of an input file; an edited value that is not an object reads as empty (shown as n/a)."""
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> str:
    return str(int(value)) if isinstance(value, (int, float)) and math.isfinite(value) else "n/a"


def _dec(value: Any, places: int) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "n/a"
    return "inf" if math.isinf(value) else f"{value:.{places}f}"


def _human(value: Any) -> str:
    return human_bytes(value) if isinstance(value, (int, float)) else "n/a"


def _any(value: Any) -> str:
    """A gate's observed value or threshold, whatever its JSON type."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _broker_list(ids: Any) -> str:
    if not isinstance(ids, list):
        return "n/a"
    if not ids:
        return "none"
    shown = ", ".join(str(b) for b in ids[:MAX_LISTED_BROKERS])
    more = f" ... and {len(ids) - MAX_LISTED_BROKERS} more" if len(ids) > MAX_LISTED_BROKERS else ""
    return f"{len(ids)}: {shown}{more}"


def _short_topic(name: Any, width: int = 32) -> str:
    """A topic name as a tick label: shortened, and with ``$`` escaped (matplotlib reads ``$...$`` as mathtext)."""
    text = str(name)
    text = text if len(text) <= width else f"{text[:14]}...{text[-(width - 17):]}"
    return text.replace("$", r"\$")


def _source(inputs: _Inputs) -> str:
    meta = inputs.meta
    if meta.get("source"):
        return str(meta["source"])
    if meta.get("scenario"):
        return f"simulated scenario {meta['scenario']}"
    return inputs.run_dir.name


# -- charts ---------------------------------------------------------------------------------------------------
def _values(rows: Sequence[Mapping[str, Any]], ids: Sequence[int], metric: str) -> list[float]:
    by_id = {r["broker"]: r[metric] for r in rows}
    return [float(by_id.get(b, 0)) for b in ids]


def _broker_ticks(ax: Axes, ids: Sequence[int], axis: str = "x") -> None:
    """Every broker id up to MAX_TICK_LABELS brokers, about 20 evenly spread ones above."""
    n = len(ids)
    if n <= MAX_TICK_LABELS:
        pos = list(range(n))
    else:
        step = math.ceil(n / 20)
        pos = list(range(0, n, step))
    size = 8 if n <= 30 else 7
    rotation = 90 if 30 < n <= MAX_TICK_LABELS and axis == "x" else 0
    labels = [str(ids[i]) for i in pos]
    if axis == "x":
        ax.set_xticks(pos, labels, fontsize=size, rotation=rotation)
    else:
        ax.set_yticks(pos, labels, fontsize=size)


def _bar_colors(values: Sequence[float], median: float) -> list[str]:
    lo, hi = median * (1 - BAND_PCT / 100), median * (1 + BAND_PCT / 100)
    return [COLOR_ABOVE if v > hi else COLOR_BELOW if v < lo else COLOR_OK for v in values]


def _bar_panel(ax: Axes, ids: Sequence[int], values: Sequence[float], metric: str, label: str) -> None:
    from matplotlib.ticker import FuncFormatter

    n = len(values)
    median = statistics.median(values) if values else 0.0
    colors = _bar_colors(values, median)
    ax.axhspan(median * (1 - BAND_PCT / 100), median * (1 + BAND_PCT / 100), color=COLOR_MEDIAN, alpha=0.15,
               linewidth=0, zorder=0)
    ax.bar(range(n), values, width=0.8, color=colors, linewidth=0, zorder=2)
    empty = [i for i, v in enumerate(values) if v == 0 and colors[i] != COLOR_OK]
    if empty:  # a zero-height bar is invisible: mark empty brokers on the baseline
        ax.plot(empty, [0] * len(empty), linestyle="none", marker="^", markersize=6, color=COLOR_BELOW,
                clip_on=False, zorder=4)
    ax.axhline(median, color=COLOR_MEDIAN, linewidth=1.5, linestyle="--", zorder=3)
    worst = max((abs(deviation_pct(v, median)) for v in values), default=0.0)
    above, below = colors.count(COLOR_ABOVE), colors.count(COLOR_BELOW)
    med_text = human_bytes(median) if metric == "bytes" else f"{median:g}"
    ax.set_title(f"{label}: median {med_text}, max |deviation| {_dec(worst, 1)}%, "
                 f"{above} above / {below} below the band", loc="left", fontsize=10)
    ax.set_xlim(-0.6, n - 0.4)
    ax.grid(axis="y", linewidth=0.5, alpha=0.5, zorder=0)
    ax.set_axisbelow(True)
    if metric == "bytes":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(v)))
    ax.tick_params(axis="y", labelsize=8)
    ax.set_ylabel(metric, fontsize=9)
    _broker_ticks(ax, ids)


def _broker_chart(metric: str, before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]] | None,
                  out: Path) -> None:
    """Per-broker bars of one metric, before (and after) as two panels sharing both axes."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ids = sorted({r["broker"] for r in before} | {r["broker"] for r in after or ()})
    panels = [("Before", _values(before, ids, metric))]
    if after is not None:
        panels.append(("After the plan", _values(after, ids, metric)))
    width = min(16.0, max(12.0, 4.0 + 0.1 * len(ids)))
    fig = Figure(figsize=(width, 0.7 + 2.2 * len(panels)), dpi=100, layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, (label, values) in zip(axes, panels, strict=True):
        _bar_panel(ax, ids, values, metric, label)
    axes[-1].set_xlabel("broker", fontsize=9)
    handles = [
        Line2D([], [], color=COLOR_MEDIAN, linestyle="--", label="median"),
        Patch(color=COLOR_MEDIAN, alpha=0.15, label=f"median \u00b1{BAND_PCT:g}%"),
        Patch(color=COLOR_OK, label="within the band"),
        Patch(color=COLOR_ABOVE, label="above"),
        Patch(color=COLOR_BELOW, label="below"),
        Line2D([], [], linestyle="none", marker="^", color=COLOR_BELOW, label="empty broker"),
    ]
    fig.legend(handles=handles, loc="outside upper right", ncols=len(handles), fontsize=9, frameon=False)
    fig.suptitle(f"{metric.capitalize()} per broker", fontsize=12, x=0.01, ha="left")
    fig.savefig(out, format="png")


def _aligned_matrix(top: Mapping[str, Any], topics: Sequence[str], brokers: Sequence[int]) -> list[list[float]]:
    """``top``'s replicas matrix re-ordered to the given topics and brokers (0 where absent)."""
    cells = {(t, b): v for t, row in zip(top["topics"], top["replicas"], strict=True)
             for b, v in zip(top["brokers"], row, strict=True)}
    return [[float(cells.get((t, b), 0)) for b in brokers] for t in topics]


def _heatmap_panel(ax: Axes, matrix: Sequence[Sequence[float]], topics: Sequence[str], brokers: Sequence[int],
                   label: str, vmax: float, show_topics: bool) -> Any:
    image = ax.imshow(matrix, aspect="auto", interpolation="nearest", cmap="YlOrRd", vmin=0, vmax=vmax)
    ax.set_title(label, loc="left", fontsize=10)
    _broker_ticks(ax, brokers)
    ax.set_xlabel("broker", fontsize=9)
    if show_topics:
        ax.set_yticks(range(len(topics)), [_short_topic(t) for t in topics], fontsize=8)
    else:
        ax.set_yticks([])
    if len(brokers) <= 24 and len(topics) <= 30:
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:g}", ha="center", va="center", fontsize=9,
                        color="white" if vmax and v > 0.6 * vmax else "black")
    return image


def _heatmap(top: Mapping[str, Any], top_after: Mapping[str, Any] | None, out: Path) -> None:
    """Replicas of the worst topics (rows) on every broker (columns), before and after side by side."""
    from matplotlib.figure import Figure

    topics, brokers = list(top["topics"]), sorted(top["brokers"])
    panels = [("Before", _aligned_matrix(top, topics, brokers))]
    if top_after is not None:
        panels.append(("After the plan", _aligned_matrix(top_after, topics, brokers)))
    vmax = max((v for _, m in panels for row in m for v in row), default=0.0) or 1.0
    panel_width = min(16.0 / len(panels), max(4.0, 0.4 * len(brokers)))
    fig = Figure(figsize=(1.5 + panel_width * len(panels) + 1.0, 1.6 + 0.4 * max(len(topics), 4)), dpi=100,
                 layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    images = [_heatmap_panel(ax, matrix, topics, brokers, label, vmax, show_topics=k == 0)
              for k, (ax, (label, matrix)) in enumerate(zip(axes, panels, strict=True))]
    fig.colorbar(images[-1], ax=list(axes), shrink=0.9, label="replicas", pad=0.01)
    fig.suptitle(f"Replicas of the {len(topics)} most skewed topics per broker", fontsize=12, x=0.01, ha="left")
    fig.savefig(out, format="png")


def _load_chart(dim: str, info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], out: Path) -> None:
    """One load dimension per broker, before and after the plan, against each broker's band: in % of the broker's
    capacity where it is known (with the capacity threshold), else in % of its target (its share of the total)."""
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    by_cap = bool(info.get("by_capacity"))
    ids: list[int] = []
    before: list[float] = []
    after: list[float] = []
    low: list[float] = []
    high: list[float] = []
    for r in rows:
        cell = _obj(r.get(dim))
        scale = _num(cell.get("capacity")) if by_cap else _num(cell.get("target"))
        values = [_num(cell.get(k)) for k in ("before", "after", "low", "high")]
        broker = r.get("broker")
        if not scale or not isinstance(broker, int):
            continue
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            continue
        ids.append(broker)
        for series, v in zip((before, after, low, high), known, strict=True):
            series.append(100.0 * v / scale)
    n = len(ids)
    width = min(16.0, max(12.0, 4.0 + 0.1 * n))
    fig = Figure(figsize=(width, 3.4), dpi=100, layout="constrained")
    ax = fig.subplots()
    xs = list(range(n))
    # The band of each broker as a shaded bar behind its two bars.
    ax.bar(xs, [h - lo for lo, h in zip(low, high, strict=True)], bottom=low, width=0.9, color=COLOR_MEDIAN, alpha=0.18,
           linewidth=0, zorder=1)
    inside = [lo <= a <= h for lo, a, h in zip(low, after, high, strict=True)]
    ax.bar([x - 0.2 for x in xs], before, width=0.38, color="#b0b0b0", linewidth=0, zorder=2)
    ax.bar([x + 0.2 for x in xs], after, width=0.38, color=[COLOR_OK if ok else COLOR_ABOVE for ok in inside],
           linewidth=0, zorder=3)
    threshold = _num(info.get("threshold_pct")) if by_cap else None
    if threshold is not None:
        ax.axhline(threshold, color=COLOR_ABOVE, linewidth=1, linestyle=":", zorder=4)
    unit = "% of capacity" if by_cap else "% of the broker's target"
    outside = n - sum(inside)
    ax.set_title(f"{_obj(info).get('title', dim)}: band ±{_dec(info.get('band_pct'), 1)}% of each broker's "
                 f"target, {outside} of {n} broker(s) outside after the plan", loc="left", fontsize=10)
    ax.set_ylabel(unit, fontsize=9)
    ax.set_xlim(-0.6, n - 0.4)
    ax.grid(axis="y", linewidth=0.5, alpha=0.5, zorder=0)
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("broker", fontsize=9)
    _broker_ticks(ax, ids)
    handles: list[Artist] = [Patch(color="#b0b0b0", label="before"), Patch(color=COLOR_OK, label="after, inside the band"),
               Patch(color=COLOR_ABOVE, label="after, outside"), Patch(color=COLOR_MEDIAN, alpha=0.18, label="band")]
    if threshold is not None:
        handles.append(Line2D([], [], color=COLOR_ABOVE, linestyle=":", label=f"capacity threshold {threshold:g}%"))
    fig.legend(handles=handles, loc="outside upper right", ncols=len(handles), fontsize=9, frameon=False)
    fig.suptitle(f"{_obj(info).get('title', dim).capitalize()} per broker ({unit})", fontsize=12, x=0.01, ha="left")
    fig.savefig(out, format="png")


def _failover_chart(failover: Mapping[str, Any], out: Path) -> None:
    """Per broker failing alone (x), the survivors' largest deviation from their mean, before and after the plan: one
    panel for leader counts, one for leader load (``summary.failover``, as the section's table)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    before, after = _obj(_obj(failover.get("before")).get("brokers")), _obj(_obj(failover.get("after")).get("brokers"))
    ids = sorted(int(b) for b in after)
    weighted = str(failover.get("weighted_by", "load"))
    panels = [("leaders_dev_pct", "leader count"), ("load_dev_pct", f"leader {weighted}")]
    width = min(16.0, max(12.0, 4.0 + 0.1 * len(ids)))
    fig = Figure(figsize=(width, 0.9 + 2.2 * len(panels)), dpi=100, layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    xs = list(range(len(ids)))
    for ax, (key, label) in zip(axes, panels, strict=True):
        was = [_num(_obj(before.get(str(b))).get(key)) or 0.0 for b in ids]  # plan.json: keys are strings
        now = [_num(_obj(after.get(str(b))).get(key)) or 0.0 for b in ids]
        ax.bar([x - 0.2 for x in xs], was, width=0.38, color="#b0b0b0", linewidth=0, zorder=2)
        ax.bar([x + 0.2 for x in xs], now, width=0.38, color=[COLOR_OK if a <= w else COLOR_ABOVE
                                                               for w, a in zip(was, now, strict=True)],
               linewidth=0, zorder=3)
        ax.set_title(f"{label}: worst survivor's deviation from the survivors' mean", loc="left", fontsize=10)
        ax.set_ylabel("%", fontsize=9)
        ax.set_xlim(-0.6, len(ids) - 0.4)
        ax.grid(axis="y", linewidth=0.5, alpha=0.5, zorder=0)
        ax.set_axisbelow(True)
        ax.tick_params(axis="y", labelsize=8)
    axes[-1].set_xlabel("the broker that fails", fontsize=9)
    _broker_ticks(axes[-1], ids)
    handles = [Patch(color="#b0b0b0", label="before"), Patch(color=COLOR_OK, label="after, no worse"),
               Patch(color=COLOR_ABOVE, label="after, worse")]
    fig.legend(handles=handles, loc="outside upper right", ncols=len(handles), fontsize=9, frameon=False)
    fig.suptitle("If one broker fails", fontsize=12, x=0.01, ha="left")
    fig.savefig(out, format="png")


def _failover_doc(plan: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """plan.json's ``summary.failover`` (empty without a plan, or for a plan written before the figures existed)."""
    return _obj(_obj(_obj(plan).get("summary")).get("failover")) if plan is not None else {}


def _load_dims(plan: Mapping[str, Any] | None) -> tuple[Mapping[str, Any], list[Mapping[str, Any]], list[str]]:
    """plan.json's ``summary.load``: its dimensions, broker rows, and the load dimensions that carry a load."""
    load = _obj(_obj(plan.get("summary")).get("load")) if plan is not None else {}
    rows: list[Mapping[str, Any]] = [r for r in _items(load.get("brokers")) if isinstance(r, dict)]
    dims_doc = _obj(load.get("dimensions"))
    dims = [d for d in LOAD_DIMENSIONS if isinstance(dims_doc.get(d), dict) and _num(dims_doc[d].get("total"))]
    return dims_doc, rows, dims


def _render_charts(inputs: _Inputs, charts_dir: Path) -> dict[str, Path]:
    """Draw every chart the inputs allow; returns chart key -> PNG path (stale PNGs of ours are removed)."""
    import matplotlib

    matplotlib.use("Agg")
    charts_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, Path] = {}
    for metric in METRICS:
        made[metric] = charts_dir / CHART_FILES[metric]
        _broker_chart(metric, inputs.brokers, inputs.brokers_after, made[metric])
    if inputs.top is not None and inputs.top["topics"]:
        made["heatmap"] = charts_dir / CHART_FILES["heatmap"]
        _heatmap(inputs.top, inputs.top_after, made["heatmap"])
    dims_doc, rows, dims = _load_dims(inputs.plan)
    for d in dims if rows else ():
        made[f"load_{d}"] = charts_dir / CHART_FILES[f"load_{d}"]
        _load_chart(d, _obj(dims_doc[d]), rows, made[f"load_{d}"])
    failover = _failover_doc(inputs.plan)
    if _obj(_obj(failover.get("after")).get("brokers")):
        made["failover"] = charts_dir / CHART_FILES["failover"]
        _failover_chart(failover, made["failover"])
    for key, name in CHART_FILES.items():
        if key not in made:
            (charts_dir / name).unlink(missing_ok=True)
    return made


def _png(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


# -- the page's view model: plain values, formatted; the template (templates/report.html.j2) escapes them ----------
def _what(plan: Mapping[str, Any] | None) -> str:
    return (f"{plan.get('mode', '?')} plan, strategy {plan.get('strategy', '?')}" if plan is not None
            else "current skew (no plan yet)")


def _facts(inputs: _Inputs, generated_at: str) -> list[str]:
    taken, analysed = inputs.meta.get("taken_at"), inputs.summary.get("generated_at")
    return ([f"snapshot taken {taken}"] if taken else []) + ([f"analysed {analysed}"] if analysed else []) + [
        f"report generated {generated_at}"]


def _validation_view(validation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if validation is None:
        return None
    gates = [{"ok": bool(g.get("passed")), "name": g["name"], "observed": _any(g.get("observed")),
              "threshold": _any(g.get("threshold")), "description": g.get("description", "")}
             for g in validation["gates"]]
    failed = sum(1 for g in gates if not g["ok"])
    detail = f"{failed} of {len(gates)} gates red" if failed else "the overall result is not passed"
    return {"gates": gates, "ok": bool(validation.get("passed")) and not failed, "detail": detail}


def _cluster_view(summary: Mapping[str, Any]) -> dict[str, str]:
    b = summary["before"]
    return {"brokers": _int(b.get("brokers")), "racks": _int(b.get("racks")), "topics": _int(b.get("topics")),
            "partitions": _int(b.get("partitions")), "replicas": _int(b.get("replicas")), "bytes": _human(b.get("bytes"))}


def _text(value: Any) -> Markup:
    """Any value from an input file as HTML text (inputs are edited by hand at times: nothing in them is markup),
    escaped as ``html.escape`` does it (quotes too); a fragment built here (``Markup``) as it is. The template's
    ``finalize``: every value the page shows passes through it."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value), quote=True))


def _span(id_: str, text: str, **attrs: str) -> Markup:
    """``<span id=...>text</span>``: a headline number the tests and the approver's eyes find by id."""
    extra = Markup("").join(Markup(' {}="{}"').format(k, _text(v)) for k, v in attrs.items())
    return Markup('<span id="{}"{}>{}</span>').format(id_, extra, _text(text))


def _bytes_bound_sub(load: Mapping[str, Any]) -> Markup:
    bound = _num(load.get("bytes_bound"))
    if bound is None:
        return Markup("replica data sent over the network")
    by = f" ({load.get('bytes_bound_by')})" if load.get("bytes_bound_by") else ""
    return Markup("lower bound {}{} &middot; bytes / bound {}").format(
        _span("bytes-bound", human_bytes(bound)), _text(by), _span("bytes-ratio", _dec(load.get("bytes_to_bound"), 3)))


def _execution_view(execution: Mapping[str, Any]) -> dict[str, Markup] | None:
    """The time to execute the plan at its throttle: the expected duration, the bound under it (``movement.estimate``)."""
    from .movement.estimate import describe, duration

    try:
        line, expected = describe(dict(execution)), duration(float(execution["expected_seconds"]))
    except (KeyError, TypeError, ValueError):  # no estimate (an older or hand-edited plan.json)
        return None
    return {"expected_html": _span("execution-expected", expected), "line_html": _span("execution", line)}


def _plan_view(plan: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    s, solver, params = plan["summary"], _obj(plan.get("solver")), _obj(plan.get("params"))
    bounds = _obj(s.get("lower_bounds"))
    return {
        "moves_html": _span("moves", _int(s["replica_moves"])),
        "moves_sub": Markup("lower bound {} &middot; moves / bound {}").format(
            _span("bound", _int(bounds.get("replica_moves"))), _span("ratio", _dec(s.get("moves_to_bound"), 3))),
        "partitions_html": _span("partitions-changed", _int(s["partitions_changed"])),
        "partitions_sub": f"at most {_int(s.get('max_changes_in_a_partition'))} replica change(s) per partition",
        "leaders_html": _span("leader-changes", _int(s["leader_changes"])),
        "leaders_sub": Markup("lower bound {} &middot; changes / bound {}").format(
            _span("leader-bound", _int(bounds.get("leader_changes"))),
            _span("leader-ratio", _dec(s.get("leader_changes_to_bound"), 3))),
        "bytes_html": _span("bytes", _human(s["bytes_moved"]), **{"data-bytes": _int(s["bytes_moved"])}),
        "bytes_sub": _bytes_bound_sub(_obj(s.get("load"))),
        "execution": _execution_view(_obj(s.get("execution"))),
        "mode": plan.get("mode", "?"), "strategy": plan.get("strategy", "?"), "status": solver.get("status", "n/a"),
        "gap": _any(solver["gap"]) if solver.get("gap") is not None else None,
        "seconds": _any(solver["seconds"]) if solver.get("seconds") is not None else None,
        "brokers": _broker_list(params["brokers"]) if params.get("brokers") else None,
        "hash": str(plan.get("content_hash", "")), "reason": solver.get("strategy_reason"),
    }


def _deviations(inputs: _Inputs) -> dict[str, Any]:
    """Max |deviation from the median| before/after per metric: plan.json's, else summary.json's."""
    if inputs.plan is not None and isinstance(inputs.plan["summary"].get("max_deviation_pct"), dict):
        d = inputs.plan["summary"]["max_deviation_pct"]
        return {f"{m}-{w}": d.get(f"{m}_{w}") for m in METRICS for w in ("before", "after")}
    out: dict[str, Any] = {}
    for when in ("before", "after"):
        part = inputs.summary.get(when) or {}
        devs = part.get("max_abs_deviation_pct") or {}
        for m in METRICS:
            out[f"{m}-{when}"] = devs.get(m)
    return out


def _deviation_view(inputs: _Inputs) -> list[dict[str, Any]]:
    devs = _deviations(inputs)
    return [{"metric": m, "before": _dec(devs[f"{m}-before"], 1), "after": _dec(devs[f"{m}-after"], 1),
             "bad": _exceeds_band(devs[f"{m}-after"])} for m in METRICS]


def _exceeds_band(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > BAND_PCT


def _charts_view(inputs: _Inputs, charts: Mapping[str, Path]) -> dict[str, Any]:
    if inputs.brokers_after is not None:
        note = Markup("Before and after the plan (after: from <code>{}</code>).").format(_text(inputs.after_source))
    elif inputs.plan is not None:
        note = Markup("The plan's per-broker loads are not available: before only.")
    else:
        note = Markup("Current load only (no plan yet).")
    return {"note": note, "images": [{"src": _png(charts[m]), "alt": f"{m} per broker"} for m in METRICS]}


MAX_LOAD_ROWS = 400


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _load_cell(value: Any, cell: Mapping[str, Any], rate: bool) -> dict[str, Any]:
    """One broker's load in one dimension: utilisation (% of capacity) where the capacity is known, else the
    amount and its deviation from the broker's target; marked when outside the band."""
    v, cap, target = _num(value), _num(cell.get("capacity")), _num(cell.get("target"))
    low, high = _num(cell.get("low")), _num(cell.get("high"))
    if v is None:
        return {"na": True}
    amount = human_bytes(v) + ("/s" if rate else "")
    dev = f" ({(v - target) / target * 100:+.1f}%)" if target else ""
    shown = f"{v / cap * 100:.1f}%" if cap else amount + dev
    title = f"{amount}{dev}" + (f" of {human_bytes(cap)}{'/s' if rate else ''}" if cap else "")
    return {"bad": low is not None and high is not None and not low <= v <= high, "title": title, "shown": shown}


def _band_cell(cell: Mapping[str, Any], rate: bool) -> dict[str, Any]:
    low, high, cap = _num(cell.get("low")), _num(cell.get("high")), _num(cell.get("capacity"))
    if low is None or high is None:
        return {"na": True}
    if cap:
        return {"band": True, "low": f"{low / cap * 100:.1f}", "high": f"{high / cap * 100:.1f}%"}
    unit = "/s" if rate else ""
    return {"band": True, "low": human_bytes(low) + unit, "high": human_bytes(high) + unit}


def _load_view(plan: Mapping[str, Any] | None, charts: Mapping[str, Path]) -> dict[str, Any] | None:
    """Utilisation per broker before and after the plan against the band (and capacity, where known), per load
    dimension, from plan.json's ``summary.load``: a chart per dimension, then the table."""
    dims_doc, rows_in, dims = _load_dims(plan)
    if not rows_in or not dims:
        return None
    notes = []
    for d in dims:
        info = _obj(dims_doc[d])
        threshold = (f", capacity threshold {_dec(info.get('threshold_pct'), 0)}%"
                     if info.get("threshold_pct") is not None else "")
        notes.append({"dim": d, "title": info.get("title", d), "band": _dec(info.get("band_pct"), 1),
                      "by": "% of capacity" if info.get("by_capacity") else "amount (vs target)",
                      "threshold": threshold, "outside": len(_items(info.get("outside_after")))})
    rows = []
    for r in rows_in[:MAX_LOAD_ROWS]:
        cells = []
        for d in dims:
            cell, rate = _obj(r.get(d)), d != "disk"
            cells += [_load_cell(cell.get("before"), cell, rate), _load_cell(cell.get("after"), cell, rate),
                      _band_cell(cell, rate)]
        rows.append({"broker": r.get("broker"), "cells": cells})
    return {"notes": notes, "rows": rows, "more": len(rows_in) > MAX_LOAD_ROWS, "shown": MAX_LOAD_ROWS,
            "total": len(rows_in), "images": [{"dim": d, "src": _png(charts[f"load_{d}"]), "alt": f"{d} per broker"}
                                              for d in dims if f"load_{d}" in charts]}


def _heatmap_view(inputs: _Inputs, charts: Mapping[str, Path]) -> dict[str, str] | None:
    if "heatmap" not in charts:
        return None
    return {"when": "before and after the plan" if inputs.top_after is not None else "before",
            "src": _png(charts["heatmap"])}


FLAGS = ((Markup("Wix-underloaded brokers (replicas &lt; 0.5 &times; median)"), "wix_underloaded", _broker_list),
         ("Pinterest: brokers leading more than average", "pinterest_over", _broker_list),
         ("Pinterest: brokers leading less than average", "pinterest_under", _broker_list),
         (Markup("Under-replicated partitions (ISR &lt; replicas)"), "under_replicated_partitions", _int))


def _flags_view(summary: Mapping[str, Any]) -> dict[str, Any]:
    before, after = summary["before"], summary.get("after")
    return {"after": bool(after), "rows": [
        {"label": label, "id": key.replace("_", "-"), "before": fmt(before.get(key)),
         "after": fmt(after.get(key)) if after else None} for label, key, fmt in FLAGS]}


def _changes_view(plan: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    changes = plan["changes"]
    shown = changes[:MAX_CHANGE_ROWS]
    rows = []
    for c in shown:
        if not isinstance(c, dict):
            continue
        old = _items(c.get("replicas_before"))
        rows.append({"topic": c.get("topic"), "partition": c.get("partition"), "before": [_text(b) for b in old],
                     "after": [{"id": b, "added": b not in old} for b in _items(c.get("replicas_after"))],
                     "leader_before": c.get("leader_before"), "leader_after": c.get("leader_after"),
                     "leader_moves": c.get("leader_before") != c.get("leader_after"),
                     "bytes": _human(c.get("bytes_to_copy", 0))})
    count = (f"showing {len(shown)} of {len(changes)} changes" if len(changes) > len(shown)
             else f"{len(changes)} changes")
    return {"total": len(changes), "count": count, "rows": rows}


def _failover_view(plan: Mapping[str, Any] | None, charts: Mapping[str, Path], worst: int = 5) -> dict[str, Any] | None:
    """If a broker or a rack fails (``summary.failover``): every broker's failure as a chart, then the worst single
    failures after the plan, and each rack's, against the same failure before it; absent for a plan written before
    the figures existed."""
    failover = _failover_doc(plan)
    before, after = _obj(failover.get("before")), _obj(failover.get("after"))
    if not after:
        return None

    def figures(fig: Mapping[str, Any]) -> dict[str, str]:
        return {"leaders": _dec(fig.get("leaders_dev_pct"), 1), "load": _dec(fig.get("load_dev_pct"), 1),
                "offline": _int(fig.get("offline")), "single": _int(fig.get("single_replica")),
                "under_min_isr": _int(fig.get("under_min_isr"))}

    brokers_after, brokers_before = _obj(after.get("brokers")), _obj(before.get("brokers"))
    ranked = sorted(brokers_after, key=lambda b: (-float(_obj(brokers_after[b]).get("leaders_dev_pct") or 0),
                                                 -float(_obj(brokers_after[b]).get("load_dev_pct") or 0), str(b)))
    racks_after, racks_before = _obj(after.get("racks")), _obj(before.get("racks"))
    rows = ([{"label": f"broker {b}", "before": figures(_obj(brokers_before.get(b))),
              "after": figures(_obj(brokers_after[b]))} for b in ranked[:worst]]
            + [{"label": f"rack {r}", "before": figures(_obj(racks_before.get(r))), "after": figures(_obj(racks_after[r]))}
               for r in sorted(racks_after, key=str)])
    isr = Markup("each topic's min.insync.replicas as the snapshot read it" if failover.get("min_insync_replicas_known")
                 else "min.insync.replicas 1 assumed: the snapshot read no topic's")
    floor = _obj(failover.get("order_floor"))
    worst_after = _obj(after.get("worst_broker"))
    floor_view = {k: {"floor": _dec(floor.get(f"{k}_dev_pct"), 1), "by": _text(floor.get(f"{k}_dev_pct_by")),
                      "now": _dec(worst_after.get(f"{k}_dev_pct"), 1)}
                  for k in ("leaders", "load") if isinstance(floor.get(f"{k}_dev_pct"), (int, float))}
    return {"weighted": failover.get("weighted_by", "load"), "rows": rows, "isr": isr, "worst": min(worst, len(ranked)),
            "chart": _png(charts["failover"]) if "failover" in charts else None, "floor": floor_view}


CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#f4f5f7;
color:#1d2330;font-size:15px;line-height:1.4}
main{max-width:1320px;margin:0 auto;padding:20px 28px 40px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #dde1e7;padding-bottom:4px}
code{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:0.92em}
.muted{color:#5f6b7a;font-size:13px;margin:2px 0}.source{margin:2px 0;font-size:16px}
.verdict{display:inline-block;padding:6px 14px;border-radius:6px;font-weight:600;margin:12px 0 6px}
.verdict.ok{background:#dff3e3;color:#146c2e}.verdict.bad{background:#fbe0e0;color:#a31515}
.verdict.pending{background:#fff3d6;color:#7a5300}
.cluster{font-size:15px;margin:6px 0 12px}
.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;margin:8px 0}
.card{border:1px solid #dde1e7;border-radius:8px;padding:10px 14px;background:#fafbfc}
.card .label{font-size:13px;color:#5f6b7a;text-transform:uppercase;letter-spacing:.03em}
.card .value{font-size:30px;font-weight:700;font-variant-numeric:tabular-nums}
.card .sub{font-size:13px;color:#3b4554}
.facts{margin:10px 0 2px}
.noplan{background:#fff3d6;border:1px solid #f0d48a;border-radius:6px;padding:10px 14px;font-weight:600}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:4px 10px;border-bottom:1px solid #e6e9ee;text-align:left;vertical-align:top}
thead th{background:#f0f2f5;font-size:13px}
table.dev{margin-top:12px}table.dev caption{text-align:left;font-weight:600;padding:4px 0;white-space:nowrap}
table.dev td{font-size:17px}td.bad{color:#a31515;font-weight:600}
td.num{text-align:right}
tr.pass td{background:#e3f5e7}tr.fail td{background:#fbe0e0}
tr.pass td.status{color:#146c2e;font-weight:700}tr.fail td.status{color:#a31515;font-weight:700}
table.changes{font-size:13px}td.chg{background:#fff3d6}
table.flags th{font-weight:500}
table.load{font-size:13px}table.load td.bad{background:#fbe0e0}
figure{margin:10px 0}figure img{max-width:100%;height:auto;display:block;border:1px solid #eef0f3}
footer{margin-top:30px;color:#5f6b7a;font-size:12px}
"""


_TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("rebalancer", "templates"), autoescape=True,
                                finalize=_text, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                lstrip_blocks=True)


def _page(inputs: _Inputs, charts: Mapping[str, Path], generated_at: str) -> str:
    plan = inputs.plan
    return _TEMPLATES.get_template("report.html.j2").render(
        source=_source(inputs), css=Markup(CSS), what=_what(plan), run_name=inputs.run_dir.name,
        facts=_facts(inputs, generated_at), validation=_validation_view(inputs.validation),
        cluster=_cluster_view(inputs.summary), plan=_plan_view(plan), deviations=_deviation_view(inputs),
        charts=_charts_view(inputs, charts), band=f"{BAND_PCT:g}", load=_load_view(plan, charts),
        heatmap=_heatmap_view(inputs, charts), failover=_failover_view(plan, charts),
        flags=_flags_view(inputs.summary), changes=_changes_view(plan), generated_at=generated_at,
        plan_hash=plan.get("content_hash", "") if plan is not None else "") + "\n"


# -- entry point ----------------------------------------------------------------------------------------------
def render_report(run_dir: str | Path) -> Path:
    """Write ``RUN_DIR/report.html`` (self-contained) and its charts in ``RUN_DIR/report/``; return the html path.

    Raises ``InputError`` (naming the file) when a required input is missing or any input is malformed.
    """
    root = Path(run_dir)
    inputs = _load_inputs(root)
    generated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    # The charts directory and the page together, or neither (a full disk leaves the previous report whole).
    with StagedFiles(root) as stage:
        charts = _render_charts(inputs, stage.path(CHARTS_DIR))
        atomic_write_text(stage.path(REPORT_FILE), _page(inputs, charts, generated_at))
    return root / REPORT_FILE
