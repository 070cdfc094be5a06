"""The layers of ``rebalancer/`` ([tool.importlinter] in pyproject.toml, checked by ``lint-imports`` in
scripts/test.sh): kept by the code as it is, and broken by an import that goes up a layer or closes a cycle inside a
package (on a copy of the library, so the check is shown to bite)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT), "--no-cache", "--no-logo"], cwd=where, capture_output=True, text=True,
                          timeout=120)


def test_the_library_keeps_its_layers() -> None:
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


@pytest.mark.parametrize("module, line, broken", [
    # the model, near the bottom, importing the validation, near the top
    ("model.py", "from . import validate as _up", "rebalancer.model is not allowed to import rebalancer.validate"),
    # the fluid model importing the batches, which import it: a cycle inside movement/
    ("movement/fluid.py", "from . import batches as _cycle", "No cycles are allowed in rebalancer.movement"),
    # the planner reaching into the executor (its estimate once did): they are independent
    ("plan/summary.py", "from ..execute import runner as _across",
     "rebalancer.plan is not allowed to import rebalancer.execute"),
    # the executor reaching into the planner (it reads the plan file, which lies below both)
    ("execute/runner.py", "from ..plan import planner as _across",
     "rebalancer.execute is not allowed to import rebalancer.plan"),
    # Kafka's names, at the bottom (the readers, backends and simulator share them), importing the lock
    ("kafka_names.py", "from .execute import lock as _up",
     "rebalancer.kafka_names is not allowed to import rebalancer.execute"),
    # an import for the types alone counts too: the fluid model naming the batches' Step for an annotation was one
    ("movement/fluid.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .batches import Step as _typed",
     "No cycles are allowed in rebalancer.movement"),
])
def test_an_import_up_a_layer_or_round_a_cycle_breaks_them(tmp_path: Path, module: str, line: str,
                                                           broken: str) -> None:
    shutil.copytree(ROOT / "rebalancer", tmp_path / "rebalancer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "rebalancer" / module).open("a") as f:
        f.write(f"\n{line}  # noqa\n")
    run = _lint(tmp_path)
    assert run.returncode != 0
    assert broken in run.stdout, run.stdout
