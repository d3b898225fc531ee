"""The ``--json PATH`` option every benchmark script shares.

A script measures into one plain-data dict, then :func:`write_json` prints it for a
reader with the script's own ``report`` and, with ``--json PATH``, also writes the
same dict to PATH as JSON (``--json -``: the JSON on stdout instead of the report).
``run_all.py`` reads those files; it never parses the printed text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_json(data: dict[str, Any], path: str | None, report: Callable[[Any], None]) -> None:
    """Print ``data`` with ``report`` and write it as JSON to ``path`` (``"-"``: stdout)."""
    if path == "-":
        json.dump(data, sys.stdout, indent=2)
        print()
        return
    report(data)
    if path:
        Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
