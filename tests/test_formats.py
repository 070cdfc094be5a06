"""Atomic JSON writes (``rebalancer.formats``)."""

from __future__ import annotations

import json
from pathlib import Path

from rebalancer.formats import atomic_write_json


def test_compact_json_is_the_same_document_on_one_line(tmp_path: Path) -> None:
    doc = {"batches": [{"index": i, "steps": [{"topic": "t", "from": [1, 2], "to": [3, 2]}]} for i in range(3)],
           "progress": {"eta_s": 1.5, "critical": [], "name": "ü"}}
    atomic_write_json(tmp_path / "indented.json", doc)
    atomic_write_json(tmp_path / "compact.json", doc, compact=True)
    indented, compact = (tmp_path / "indented.json").read_text(), (tmp_path / "compact.json").read_text()
    assert json.loads(indented) == json.loads(compact) == doc
    assert compact.count("\n") == 1 and compact.endswith("\n") and indented.count("\n") > 10
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
