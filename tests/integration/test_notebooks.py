"""The notebooks in notebooks/ run top to bottom, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every code cell runs in order in one namespace, as a kernel would run them."""
    monkeypatch.chdir(tmp_path)
    cells = json.loads(path.read_text())["cells"]
    namespace: dict[str, object] = {"__name__": "__main__"}
    code_cells = [c for c in cells if c["cell_type"] == "code"]
    assert code_cells, f"{path.name} has no code"
    for index, cell in enumerate(code_cells):
        source = "".join(cell["source"])
        exec(compile(source, f"{path.name}[{index}]", "exec"), namespace)
