"""The planning library's shape: no function in ``rebalancer/plan/`` over ``MAX_LINES`` lines (issue 44: a reader
finds one step per function), beyond the few listed in ``LONGER`` that are still to be split, each held to the
length it had when listed, so the list can only shrink. McCabe complexity is ruff's job (``C901`` in
pyproject.toml)."""

from __future__ import annotations

import ast
from pathlib import Path

PLAN = Path(__file__).resolve().parents[1] / "rebalancer" / "plan"
MAX_LINES = 60
# module:function -> its length when listed (def line to last line, docstring included): debt, to be split
LONGER: dict[str, int] = {}


def _lengths() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(PLAN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                name = f"{path.stem}:{node.name}"
                out[name] = max(out.get(name, 0), (node.end_lineno or node.lineno) - start + 1)
    return out


def test_no_function_in_the_planning_library_grows_past_its_limit() -> None:
    lengths = _lengths()
    too_long = {name: n for name, n in lengths.items() if n > LONGER.get(name, MAX_LINES)}
    assert not too_long, f"split these (at most {MAX_LINES} lines; listed ones no longer than listed): {too_long}"


def test_the_list_of_longer_functions_only_names_functions_still_longer() -> None:
    """A function split below the limit, renamed or removed leaves the list (so its place cannot be taken)."""
    lengths = _lengths()
    stale = {name: lengths.get(name) for name in LONGER if lengths.get(name, 0) <= MAX_LINES}
    assert not stale, f"remove from LONGER (now within {MAX_LINES} lines, or gone): {stale}"
