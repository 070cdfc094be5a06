"""The execution's live progress bar (rich) on a terminal: batches, moves, bytes and the ETA; the run's log lines
above it; no bar where stderr is not a terminal."""

from __future__ import annotations

import io
import re
import sys

from rich.console import Console

from rebalancer.balance import human_bytes
from rebalancer.cli import _progress_bar


def _lines(out: io.StringIO) -> list[str]:
    """What the terminal shows, line by line: the escape sequences (cursor, erase) taken out."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).replace("\r", "")
    return [line for line in text.splitlines() if line.strip()]


def test_the_bar_shows_the_batch_moves_bytes_and_eta_with_the_log_above_it() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    with _progress_bar(console) as show:
        assert show is not None
        print("batch 1/3: 4 moves submitted", file=sys.stderr)  # a line the run logs meanwhile
        show(1, 3, 2, 10, 5 * 2**20, 20 * 2**20, 12.0, 36.0)
        show(2, 3, 6, 10, 15 * 2**20, 20 * 2**20, 40.0, 9.0)
    lines = _lines(out)
    assert lines[0] == "batch 1/3: 4 moves submitted"  # above the bar, whole
    last = lines[-1]  # the bar as it was left
    assert last.startswith("batch 2/3 ") and "6/10 moves" in last and last.endswith(" 40s ETA 9s")
    assert f"{human_bytes(15 * 2**20)}/{human_bytes(20 * 2**20)}" in last and "━" in last


def test_a_rolling_run_has_no_batch_count_and_no_terminal_no_bar() -> None:
    out = io.StringIO()
    with _progress_bar(Console(file=out, force_terminal=True, width=160, color_system=None)) as show:
        assert show is not None
        show(1, 0, 1, 4, 0, 0, 1.0, 3.0)  # rolling: batches unknown ahead; nothing to copy: moves count
    last = _lines(out)[-1]
    assert last.startswith("batch 1 ") and "1/4 moves" in last
    with _progress_bar() as none:  # pytest's stderr is not a terminal
        assert none is None
