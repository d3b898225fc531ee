"""The notebooks in notebooks/ run top to bottom in a real Jupyter kernel, offline.

Each notebook is executed with ``nbclient`` in a fresh ``python3`` kernel whose working
directory is the test's tmp dir. The kernel spec is written by ipykernel into a temp
directory put first on ``JUPYTER_PATH``, so "python3" is this interpreter (the venv's)
whatever kernels the machine has installed, and nothing is written to the user's home.
A notebook that reads ``STM_NOTEBOOK_POSTGRES_URI`` gets a fresh PostgreSQL database
(the ``postgres_uri`` fixture) and is marked ``postgres``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
POSTGRES_VARIABLE = "STM_NOTEBOOK_POSTGRES_URI"
CELL_TIMEOUT = 120
"""Seconds one cell may run; the notebooks take a few seconds each on a loaded machine."""


def read(path: Path) -> NotebookNode:
    return nbformat.read(path, as_version=4)


def needs_postgres(path: Path) -> bool:
    """Whether the notebook's code reads the PostgreSQL URL variable."""
    return any(
        POSTGRES_VARIABLE in cell.source for cell in read(path).cells if cell.cell_type == "code"
    )


def params() -> list[object]:
    return [
        pytest.param(
            path, id=path.name, marks=[pytest.mark.postgres] if needs_postgres(path) else []
        )
        for path in NOTEBOOKS
    ]


@pytest.fixture
def kernel_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private Jupyter setup: the python3 kernel spec of this interpreter first on
    JUPYTER_PATH, IPython and Jupyter runtime files under ``tmp_path``; returns the
    directory the notebook runs in."""
    jupyter = tmp_path / "jupyter"
    write_kernel_spec(jupyter / "kernels" / "python3")
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    work = tmp_path / "work"
    work.mkdir()
    return work


def execute(nb: NotebookNode, cwd: Path) -> NotebookNode:
    """Run every cell of ``nb`` in order; a failing cell raises its CellExecutionError."""
    client = NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": cwd}}
    )
    return client.execute()


def test_python3_kernel_is_this_interpreter(kernel_env: Path) -> None:
    """The "python3" kernel the notebooks run in starts this interpreter, not another one."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert spec.argv[0] == sys.executable
    assert Path(spec.resource_dir).is_relative_to(kernel_env.parent)


def test_every_notebook_is_stored_without_outputs() -> None:
    """Notebooks are committed clean: no outputs, no execution counts."""
    assert NOTEBOOKS, "notebooks/ holds no notebook"
    for path in NOTEBOOKS:
        for index, cell in enumerate(read(path).cells):
            if cell.cell_type == "code":
                assert cell.outputs == [], f"{path.name} cell {index} has stored outputs"
                assert cell.execution_count is None, f"{path.name} cell {index} was run"


@pytest.mark.parametrize("path", params())
def test_notebook_runs_top_to_bottom(
    path: Path, kernel_env: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every code cell runs in order in one kernel, without an error."""
    if needs_postgres(path):
        monkeypatch.setenv(POSTGRES_VARIABLE, request.getfixturevalue("postgres_uri"))
    nb = read(path)
    assert any(cell.cell_type == "code" for cell in nb.cells), f"{path.name} has no code"
    executed = execute(nb, kernel_env)
    errors = [
        output
        for cell in executed.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert errors == []


def test_a_failing_cell_fails_with_its_error(kernel_env: Path) -> None:
    """The runner stops at the first failing cell and reports that cell's error."""
    nb = new_notebook(
        cells=[
            new_code_cell("ready = True"),
            new_code_cell("raise LookupError('order 42 is missing')"),
            new_code_cell("never = True"),
        ]
    )
    with pytest.raises(CellExecutionError, match="order 42 is missing") as failure:
        execute(nb, kernel_env)
    assert "LookupError" in str(failure.value)
    assert nb.cells[0].execution_count == 1
    assert nb.cells[2].execution_count is None  # never reached
