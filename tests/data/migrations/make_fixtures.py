"""Make the schema-migration fixtures of ``tests/data/migrations/`` (not run by the suite).

Usage, from the repository root (PostgreSQL as for the test suite)::

    .venv/bin/python tests/data/migrations/make_fixtures.py 49a380d 5b370ac 15694ac 7b5ca51

For each commit the script checks the commit out into a git worktree in /tmp and runs
itself again (``--write``) with ``PYTHONPATH=<worktree>``, so that ``langgraph_stm`` is
that commit's code while the graph is today's ``tests/support/migration_graph.py``. The
child opens ``STMSaver.from_sqlite(file)`` / ``STMSaver.from_postgres(uri)``, runs
``setup()``, writes the conversation of ``write_conversation``, and, through a second,
fresh saver (nothing cached), records what that commit's code reads back. Then:

- ``sqlite-<sha>.db``: the SQLite file, VACUUMed, journal mode DELETE (one file);
- ``postgres-<sha>.sql``: ``pg_dump --no-owner --no-privileges --rows-per-insert=100`` of a
  temporary database (created and dropped here), without pg_dump's ``\\restrict`` /
  ``\\unrestrict`` psql meta-commands, so the dump is plain SQL a driver can execute;
- ``<dialect>-<sha>.json``: the commit, the ``stm_migrations`` versions of the database,
  and per thread the goal, plan, messages (class + ``model_dump()``) and the message ids
  of every checkpoint, as that commit's code returns them.

The worktrees are removed afterwards.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
GRAPH_MODULE = REPO / "tests" / "support" / "migration_graph.py"
ADMIN_URI = os.environ.get("STM_TEST_POSTGRES_URI", "postgresql://postgres@127.0.0.1:5432/postgres")
MAX_SIZE = 300_000
THREADS = ("t1", "t2", "long")


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def load_graph_module() -> Any:
    spec = importlib.util.spec_from_file_location("stm_migration_graph", GRAPH_MODULE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- child: runs with PYTHONPATH=<worktree of the old commit> ------------------------------
def write(dialect: str, target: str, out_json: Path, commit: str, worktree: Path) -> None:
    import langgraph_stm
    from langgraph_stm.checkpoint import STMSaver

    where = Path(langgraph_stm.__file__).resolve()
    if not where.is_relative_to(worktree.resolve()):
        raise SystemExit(f"langgraph_stm was imported from {where}, not from {worktree}")
    graph_module = load_graph_module()

    def open_saver() -> Any:
        if dialect == "sqlite":
            return STMSaver.from_sqlite(target)
        return STMSaver.from_postgres(target)

    with open_saver() as saver:
        saver.setup()
        graph = graph_module.build_graph(saver)
        graph_module.write_conversation(graph)
        written = {t: graph_module.dump_thread(graph, t) for t in THREADS}
    with open_saver() as saver:
        saver.setup()
        graph = graph_module.build_graph(saver)
        threads = {t: graph_module.dump_thread(graph, t) for t in THREADS}
    if threads != written:
        raise SystemExit(f"{commit}: a fresh saver reads other values than the writer")
    out_json.write_text(
        json.dumps({"commit": commit, "dialect": dialect, "threads": threads}, indent=1) + "\n"
    )


# -- parent ------------------------------------------------------------------------------
def run_child(dialect: str, target: str, out_json: Path, commit: str, worktree: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(worktree)}
    args = [sys.executable, str(Path(__file__).resolve()), "--write", dialect, target]
    args += [str(out_json), commit, str(worktree)]
    subprocess.run(args, check=True, env=env, cwd=tempfile.gettempdir())


def add_versions(out_json: Path, versions: list[int]) -> None:
    data = json.loads(out_json.read_text())
    data = {"commit": data["commit"], "dialect": data["dialect"], "versions": versions, **data}
    out_json.write_text(json.dumps(data, indent=1) + "\n")


def make_sqlite(commit: str, short: str, worktree: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "fixture.sqlite"
        out_json = out / f"sqlite-{short}.json"
        run_child("sqlite", str(db), out_json, commit, worktree)
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
        versions = [r[0] for r in conn.execute("SELECT v FROM stm_migrations ORDER BY v")]
        conn.close()
        target = out / f"sqlite-{short}.db"
        shutil.copyfile(db, target)
    add_versions(out_json, versions)
    check_size(target)


def make_postgres(commit: str, short: str, worktree: Path, out: Path, admin_uri: str) -> None:
    import psycopg

    dbname = f"stm_fixture_{short}_{uuid.uuid4().hex[:8]}"
    uri = f"{admin_uri.rpartition('/')[0]}/{dbname}"
    with psycopg.connect(admin_uri, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')
        try:
            out_json = out / f"postgres-{short}.json"
            run_child("postgres", uri, out_json, commit, worktree)
            with psycopg.connect(uri) as conn:
                rows = conn.execute("SELECT v FROM stm_migrations ORDER BY v").fetchall()
            dump = subprocess.run(
                ["pg_dump", "--no-owner", "--no-privileges", "--rows-per-insert=100", uri],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    lines = [ln for ln in dump.splitlines() if not ln.startswith(("\\restrict", "\\unrestrict"))]
    target = out / f"postgres-{short}.sql"
    target.write_text("\n".join(lines) + "\n")
    add_versions(out_json, [r[0] for r in rows])
    check_size(target)


def check_size(path: Path) -> None:
    size = path.stat().st_size
    print(f"{path.name}: {size} bytes")
    if size > MAX_SIZE:
        raise SystemExit(f"{path} is {size} bytes, more than {MAX_SIZE}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("commits", nargs="*", help="commits to make fixtures of")
    parser.add_argument("--out", type=Path, default=HERE, help="fixture directory")
    parser.add_argument("--postgres", default=ADMIN_URI, help="admin connection string")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite fixtures only")
    parser.add_argument("--write", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:
        dialect, target, out_json, commit, worktree = args.write
        write(dialect, target, Path(out_json), commit, Path(worktree))
        return
    if shutil.which("pg_dump") is None and not args.no_postgres:
        raise SystemExit("pg_dump is not on PATH (or pass --no-postgres)")
    for name in args.commits:
        commit = git("rev-parse", "--verify", f"{name}^{{commit}}")
        short = commit[:7]
        worktree = Path(tempfile.gettempdir()) / f"stm-fixture-{short}"
        git("worktree", "add", "--detach", str(worktree), commit)
        try:
            make_sqlite(commit, short, worktree, args.out)
            if not args.no_postgres:
                make_postgres(commit, short, worktree, args.out, args.postgres)
        finally:
            git("worktree", "remove", "--force", str(worktree))


if __name__ == "__main__":
    main()
