"""The README's code and commands do what the README says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


class TestReadme:
    """Examples in README.md run as written."""

    def test_python_examples_run(self, tmp_path: Path) -> None:
        """Every ```python block runs in a fresh process without error."""
        blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
        assert blocks, "README has no python example"
        for block in blocks:
            result = subprocess.run(
                [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True
            )
            assert result.returncode == 0, result.stderr

    def test_the_two_fresh_machine_commands_are_shown(self) -> None:
        """The demo and whole-suite commands are in the README and defined in the Makefile."""
        assert "make demo" in README
        assert "make test" in README
        makefile = (REPO / "Makefile").read_text()
        assert re.search(r"^demo:", makefile, flags=re.M)
        assert re.search(r"^test:", makefile, flags=re.M)

    def test_demo_command_runs_offline(self, tmp_path: Path) -> None:
        """python -m langgraph_stm demo persists to SQLite and reloads identically."""
        result = subprocess.run(
            [sys.executable, "-m", "langgraph_stm", "demo", "--db", str(tmp_path / "d.sqlite")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert "reloaded from disk: identical" in result.stdout
        assert "never email external domains" in result.stdout
