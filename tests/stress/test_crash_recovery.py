"""Crash recovery: SIGKILL a real graph at seeded boundaries, resume it in a new process.

The graph and the boundaries are those of :mod:`tests.support.crash_child` (tools with a
ledger, an approval interrupt, trim and summarize nodes; SQL statements, our driver's
write transaction, the inner saver's writes). For each backend a reference run without
kills records every boundary and the final state. Each test kills a run at one boundary
(chosen from ``STM_STRESS_SEED``, spread over: inside our write transaction; the entry of
the inner ``put``, which on PostgreSQL is after our commit and before the inner saver's;
inside the inner ``put``; a tool's side effect; anywhere else), checks that the kill hit
the same boundary as the reference run has at that position, resumes the thread in a
new process and checks the result against the reference: same messages (ids, order,
content), same structured fields, each tool run once per call (twice only for the
calls whose side effect happened and whose result was not saved yet when the process
died: at-least-once is what any side effect outside the database gets), no history
problem in any checkpoint, and ``get_thread_state`` equal to the latest checkpoint.

Every third test also kills the recovering process once, at a seeded boundary of its
own, before the final resume (a crash during recovery).

``STM_STRESS_FULL=1``: 36 kill points per backend; otherwise 6.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from langgraph_stm import validate_history
from tests.stress.conftest import FULL, SEED
from tests.support.approval_graphs import Ledger, config, dump
from tests.support.crash_child import APPROVED, THREAD, TURNS, build_crash_graph, opened

REPO = Path(__file__).resolve().parents[2]
POINTS = 36 if FULL else 6
FIELDS = ("goal", "plan", "constraints", "artifacts", "last_error", "summary")
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def run_child(backend: str, target: str, workdir: Path, kill_at: int | None = None) -> int:
    """Run the crash child; return its exit code (``-SIGKILL`` when it killed itself)."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "tests.support.crash_child", backend, target, str(workdir)]
    result = subprocess.run(
        [*args, *([] if kill_at is None else [str(kill_at)])],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if result.returncode not in (0, -signal.SIGKILL):
        pytest.fail(f"crash child failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.returncode


@dataclass(frozen=True)
class Outcome:
    """What a finished thread holds, in comparable form."""

    messages: list[dict[str, Any]]
    fields: dict[str, Any]
    ledger: Counter[str]


def outcome(backend: str, target: str, ledger: Path) -> Outcome:
    """Read the finished thread and check what needs no reference: the run is over, no
    checkpoint of its history has a tool-pair problem, ids are unique, and the thread
    index matches the latest checkpoint."""
    with opened(backend, target) as saver:
        saver.setup()
        graph = build_crash_graph(saver, Ledger())
        snap = graph.get_state(config(THREAD))
        assert (snap.next, snap.interrupts) == ((), ())
        messages = list(snap.values["messages"])
        ids = [m.id for m in messages]
        assert len(set(ids)) == len(ids), f"duplicate message ids: {ids}"
        for past in graph.get_state_history(config(THREAD)):
            problems = validate_history(list(past.values.get("messages", [])))
            assert problems == [], (past.config, problems)
        state = saver.get_thread_state(THREAD)
        assert state is not None
        assert state.checkpoint_id == snap.config["configurable"]["checkpoint_id"]
        assert state.message_count == len(messages)
        fields = {f: snap.values.get(f) for f in FIELDS}
        for field in FIELDS:
            empty = [] if field in ("plan", "constraints", "artifacts") else None
            stored = fields[field] if fields[field] is not None else empty
            assert getattr(state, field) == stored, f"get_thread_state().{field}"
    return Outcome(dump(messages), fields, Counter(Ledger(ledger).calls()))


@dataclass(frozen=True)
class Reference:
    """The run without kills: every boundary label, in order, and the outcome."""

    labels: list[str]
    outcome: Outcome


def kill_points(labels: list[str], count: int, seed: int, backend: str) -> list[int]:
    """``count`` distinct boundaries (1-based positions) chosen from ``seed``: a sixth at
    the entry of the inner ``put`` (on PostgreSQL: between our commit and the inner
    saver's), a third inside our write transaction, a sixth inside the inner ``put``, one
    right after a tool's side effect (full count), the rest anywhere."""
    rng = random.Random(f"{seed}:{backend}")
    groups: dict[str, list[int]] = {"between": [], "ours": [], "inner": [], "tool": [], "any": []}
    for position, label in enumerate(labels, start=1):
        phase, kind, _ = label.split("|", 2)
        if kind == "inner.put.enter":
            groups["between"].append(position)
        elif kind == "tool.ran":
            groups["tool"].append(position)
        elif phase in ("ours", "inner"):
            groups[phase].append(position)
        groups["any"].append(position)
    quotas = {
        "between": max(1, count // 6),
        "ours": count // 3,
        "inner": max(1, count // 6),
        "tool": 1 if count >= 12 else 0,
    }
    chosen: set[int] = set()
    for group, quota in quotas.items():
        chosen.update(rng.sample(groups[group], quota))
    rest = [p for p in groups["any"] if p not in chosen]
    chosen.update(rng.sample(rest, count - len(chosen)))
    return sorted(chosen)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def reference(
    backend: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Reference:
    """The reference run of ``backend``, once per module."""
    workdir = tmp_path_factory.mktemp(f"reference-{backend}")
    target = (
        str(workdir / "db.sqlite")
        if backend == "sqlite"
        else request.getfixturevalue("make_postgres_database")()
    )
    assert run_child(backend, target, workdir) == 0
    labels = json.loads((workdir / "events.json").read_text())
    return Reference(labels, outcome(backend, target, workdir / "ledger.jsonl"))


@pytest.fixture
def target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh database of ``backend`` for the test."""
    if backend == "sqlite":
        return str(tmp_path / "db.sqlite")
    return str(request.getfixturevalue("postgres_uri"))


class TestReferenceRun:
    """The run without kills exercises what the crash runs are checked on."""

    def test_the_reference_run_reaches_every_feature_under_test(self, reference: Reference) -> None:
        """Every turn done, the approved calls run once, a summary written, messages
        trimmed, structured fields set, and enough boundaries of each kind to choose from."""
        result = reference.outcome
        assert [s["status"] for s in result.fields["plan"]] == ["done"] * len(TURNS)
        assert all(result.ledger[c] == 1 for c in APPROVED)
        assert set(result.ledger.values()) == {1}
        assert result.fields["summary"] is not None
        assert result.fields["summary"]["version"] >= 2
        ids = [m["id"] for m in result.messages]
        assert "stm-tool:ai-h4:h4-c0" not in ids  # the large report was trimmed away
        assert result.fields["goal"]
        assert result.fields["artifacts"]
        assert result.fields["constraints"]
        phases = Counter(label.split("|", 1)[0] for label in reference.labels)
        assert min(phases["ours"], phases["inner"]) >= POINTS

    def test_kill_points_are_reproducible_from_the_seed(
        self, reference: Reference, backend: str
    ) -> None:
        """The same seed picks the same distinct points; another seed picks others."""
        first = kill_points(reference.labels, 36, SEED, backend)
        assert first == kill_points(reference.labels, 36, SEED, backend)
        assert len(set(first)) == 36
        assert first != kill_points(reference.labels, 36, SEED + 1, backend)


def second_kill(point: int, backend: str) -> int | None:
    """For every third point, a boundary of the recovering process to kill it at too
    (a crash during recovery), chosen from the seed; ``None`` for the others."""
    if point % 3 != 2:
        return None
    return random.Random(f"{SEED}:{backend}:{point}").randint(1, 600)


@pytest.mark.parametrize("point", range(POINTS))
def test_a_run_killed_at_a_seeded_boundary_resumes_to_the_reference_state(
    point: int,
    backend: str,
    reference: Reference,
    target: str,
    tmp_path: Path,
) -> None:
    """Kill at the boundary (every third point: kill the recovering process as well),
    resume in a new process until done, compare with the reference run."""
    at = kill_points(reference.labels, POINTS, SEED, backend)[point]
    expected_label = reference.labels[at - 1]
    where = f"seed {SEED}, boundary {at} ({expected_label})"
    workdir = tmp_path / "run"
    assert run_child(backend, target, workdir, kill_at=at) == -signal.SIGKILL, where
    killed = json.loads((workdir / "killed.json").read_text())
    assert killed["label"] == expected_label, f"not reproducible: {where} vs {killed}"
    in_flight = Counter(killed["in_flight"])
    again = second_kill(point, backend)
    if again is not None and run_child(backend, target, workdir, kill_at=again) != 0:
        killed = json.loads((workdir / "killed.json").read_text())
        in_flight += Counter(killed["in_flight"])
        where += f", then boundary {again} of the recovery ({killed['label']})"
    assert run_child(backend, target, workdir) == 0, where
    result = outcome(backend, target, workdir / "ledger.jsonl")
    assert result.messages == reference.outcome.messages, where
    assert result.fields == reference.outcome.fields, where
    assert result.ledger == reference.outcome.ledger + in_flight, where
