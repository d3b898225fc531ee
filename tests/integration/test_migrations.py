"""STMSaver schema migrations: a new database, every released schema and its data.

``MIGRATIONS`` (one list per dialect) is run in order by ``setup()``, which records the
index of each statement it ran in ``stm_migrations(v)``; a database never runs a recorded
version again. Migrations are therefore append-only: a released migration is never
edited, because every database created since has already run it and would keep what the
old statement made. (Migration #1 was once edited in place, in 5b370ac: a database
created at 49a380d passes ``setup()`` and then fails every read and write with
``no such column: digests``.) A schema change is a new migration appended at the end, and
it converts whatever the earlier ones created, data included.

``tests/data/migrations/history.json`` pins the released statements per dialect; the
current lists must start with them, statement for statement. It is updated only by
appending the statements of a new release, never by editing one.

The fixtures next to it are databases written by the code of each released schema, each
with a JSON file of what that code read back (``make_fixtures.py``, see the README there):
today's ``setup()`` must bring each to the latest version, with every checkpoint of every
thread reading as it was written, and new turns stored and read back. SQLite fixtures are
copied to the test's tmp dir; PostgreSQL dumps are loaded into the per-test database.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from langgraph_stm.checkpoint import STMSaver
from tests.support.migration_graph import build_graph, config, dump_messages, human, reply

DATA = Path(__file__).resolve().parents[1] / "data" / "migrations"
HISTORY: dict[str, list[str]] = json.loads((DATA / "history.json").read_text())
DIALECTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
NEW_TURNS = 14
"""Turns written on an old thread: enough new bodies that today's code packs them."""


def current_migrations(dialect: str) -> list[Any]:
    """Today's ``MIGRATIONS`` of ``dialect``, wherever the checkpoint package defines it."""
    for name in (f"langgraph_stm.checkpoint._{dialect}", f"langgraph_stm.checkpoint.{dialect}"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        if hasattr(module, "MIGRATIONS"):
            return list(module.MIGRATIONS)
    pytest.fail(f"no MIGRATIONS found for {dialect}")


@dataclass(frozen=True)
class Source:
    """One fixture: a released database, where it is stored and what its code read back."""

    dialect: str
    commit: str
    file: Path
    expected: dict[str, Any] = field(repr=False)

    @property
    def threads(self) -> list[str]:
        return list(self.expected["threads"])


def _sources() -> list[Source]:
    found = []
    for dialect, ext in (("sqlite", "db"), ("postgres", "sql")):
        for file in sorted(DATA.glob(f"{dialect}-*.{ext}")):
            expected = json.loads(file.with_suffix(".json").read_text())
            found.append(Source(dialect, expected["commit"][:7], file, expected))
    return found


SOURCES = _sources()


def _marks(source: Source) -> list[pytest.MarkDecorator]:
    return [pytest.mark.postgres] if source.dialect == "postgres" else []


def _id(source: Source) -> str:
    return f"{source.dialect}-{source.commit}"


SOURCE_PARAMS = [pytest.param(f, id=_id(f), marks=_marks(f)) for f in SOURCES]
THREAD_PARAMS = [
    pytest.param(f, t, id=f"{_id(f)}-{t}", marks=_marks(f)) for f in SOURCES for t in f.threads
]


# -- databases ---------------------------------------------------------------------------
@dataclass
class Database:
    """A database of one dialect: a SQLite file or a PostgreSQL connection string."""

    dialect: str
    target: str

    @contextmanager
    def saver(self) -> Iterator[STMSaver]:
        """A new saver on the database (nothing cached), after ``setup()``."""
        if self.dialect == "sqlite":
            opened = STMSaver.from_sqlite(self.target)
        else:
            opened = STMSaver.from_postgres(self.target)
        with opened as saver:
            saver.setup()
            yield saver

    @contextmanager
    def connect(self) -> Iterator[Any]:
        """A plain driver connection that commits on exit."""
        if self.dialect == "sqlite":
            conn = sqlite3.connect(self.target)
            try:
                yield conn
                conn.commit()
            finally:
                conn.close()
        else:
            import psycopg

            with psycopg.connect(self.target, autocommit=True) as conn:
                yield conn

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        with self.connect() as conn:
            return [tuple(r) for r in conn.execute(sql).fetchall()]

    def versions(self) -> list[int]:
        return [r[0] for r in self.query("SELECT v FROM stm_migrations ORDER BY v")]

    def our_tables(self) -> list[str]:
        if self.dialect == "sqlite":
            sql = (
                "SELECT name FROM sqlite_master "
                "WHERE type = 'table' AND name LIKE 'stm\\_%' ESCAPE '\\'"
            )
        else:
            sql = (
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename LIKE 'stm\\_%'"
            )
        return sorted(r[0] for r in self.query(sql))

    def our_indexes(self) -> list[str]:
        if self.dialect == "sqlite":
            sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        else:
            sql = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
        return sorted(r[0] for r in self.query(sql))

    def schema(self) -> dict[str, Any]:
        """Columns, indexes and (PostgreSQL) storage of our tables, names of constraints and
        indexes left out (a table rebuilt under a new name keeps equivalent ones)."""
        if self.dialect == "sqlite":
            schema: dict[str, Any] = {}
            with self.connect() as conn:
                for table in self.our_tables():
                    columns = [r[1:6] for r in conn.execute(f'PRAGMA table_xinfo("{table}")')]
                    indexes = []
                    for _, name, unique, origin, partial in conn.execute(
                        f'PRAGMA index_list("{table}")'
                    ):
                        cols = [r[2] for r in conn.execute(f'PRAGMA index_info("{name}")')]
                        sql = conn.execute(
                            "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
                        ).fetchone()
                        where = (sql[0] or "").partition(" WHERE ")[2] if sql else ""
                        indexes.append((unique, origin, partial, cols, where))
                    schema[table] = {"columns": columns, "indexes": sorted(indexes)}
            return schema
        columns = self.query("""
            SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                   pg_get_expr(d.adbin, d.adrelid), a.attstorage, a.attcompression
            FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
            JOIN pg_namespace AS n ON n.oid = c.relnamespace
            LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE c.relkind = 'r' AND n.nspname = current_schema()
              AND c.relname LIKE 'stm\\_%' AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY c.relname, a.attnum
        """)
        indexes = self.query("""
            SELECT tablename, indexdef FROM pg_indexes
            WHERE schemaname = current_schema() AND tablename LIKE 'stm\\_%'
        """)
        schema = {}
        for table, *column in columns:
            schema.setdefault(table, {"columns": [], "indexes": []})["columns"].append(column)
        for table, indexdef in indexes:
            unnamed = re.sub(r"INDEX \S+ ON", "INDEX ON", indexdef)
            schema[table]["indexes"] = sorted([*schema[table]["indexes"], unnamed])
        return schema

    def drop_ours(self) -> None:
        """Drop every table of ours (the inner saver's tables stay)."""
        tables = self.our_tables()
        with self.connect() as conn:
            for table in tables:
                conn.execute(f'DROP TABLE "{table}"' + " CASCADE" * (self.dialect != "sqlite"))


def load_dump(uri: str, dump: Path) -> None:
    """Run a plain SQL dump (psql meta-commands, lines starting with a backslash, skipped)."""
    import psycopg

    lines = dump.read_text().splitlines()
    sql = "\n".join(line for line in lines if not line.startswith("\\"))
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """A new database of the ``dialect`` parameter, with nothing in it."""
    dialect: str = request.node.callspec.params["dialect"]
    if dialect == "sqlite":
        return Database("sqlite", str(tmp_path / "new.sqlite"))
    return Database("postgres", request.getfixturevalue("postgres_uri"))


@pytest.fixture
def released(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """The ``source`` parameter's database, copied to a place the test may write."""
    source: Source = request.node.callspec.params["source"]
    if source.dialect == "sqlite":
        target = tmp_path / "released.sqlite"
        shutil.copyfile(source.file, target)
        return Database("sqlite", str(target))
    uri = request.getfixturevalue("postgres_uri")
    load_dump(uri, source.file)
    return Database("postgres", uri)


def read_thread(saver: STMSaver, thread_id: str) -> dict[str, Any]:
    """Goal, plan and messages (class + field dump, as JSON would hold them) of a thread."""
    values = build_graph(saver).get_state(config(thread_id)).values
    state = {
        "goal": values.get("goal"),
        "plan": values.get("plan", []),
        "messages": dump_messages(values.get("messages", [])),
    }
    return json.loads(json.dumps(state))


def read_or_error(saver: STMSaver, thread_id: str) -> dict[str, Any] | str:
    """:func:`read_thread`, or the name of the error it raises (checked elsewhere)."""
    try:
        return read_thread(saver, thread_id)
    except Exception as exc:
        return type(exc).__name__


def expected_state(source: Source, thread_id: str) -> dict[str, Any]:
    thread = source.expected["threads"][thread_id]
    return {k: thread[k] for k in ("goal", "plan", "messages")}


def new_turns(thread_id: str, messages: int, turns: int) -> list[dict[str, Any]]:
    """The messages ``turns`` new turns add to a thread of ``messages`` messages."""
    added = []
    for i in range(turns):
        added += [human(thread_id, 900 + i), reply(messages + 2 * i + 1)]
    return json.loads(json.dumps(dump_messages(added)))


def write_turns(saver: STMSaver, thread_id: str, turns: int) -> None:
    graph = build_graph(saver)
    for i in range(turns):
        graph.invoke({"messages": [human(thread_id, 900 + i)]}, config(thread_id))


# -- tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", DIALECTS)
class TestEmptyDatabase:
    """``setup()`` on a new database runs every migration once."""

    def test_setup_creates_every_table_and_index_of_the_migrations(
        self, dialect: str, empty_database: Database
    ) -> None:
        """Every table and index the migrations create (and do not drop) exists."""
        with empty_database.saver():
            pass
        tables, indexes = created_by(current_migrations(dialect))
        assert tables <= set(empty_database.our_tables())
        assert indexes <= set(empty_database.our_indexes())
        assert "stm_migrations" in tables

    def test_setup_records_every_version(self, dialect: str, empty_database: Database) -> None:
        """``stm_migrations`` holds 0 .. len(MIGRATIONS) - 1."""
        with empty_database.saver():
            pass
        assert empty_database.versions() == list(range(len(current_migrations(dialect))))

    def test_a_second_setup_is_a_no_op(self, dialect: str, empty_database: Database) -> None:
        """A second saver's ``setup()`` changes neither the schema nor the versions, and a
        thread written in between reads the same."""
        with empty_database.saver() as saver:
            write_turns(saver, "t1", 2)
            state = read_thread(saver, "t1")
        schema, versions = empty_database.schema(), empty_database.versions()
        with empty_database.saver() as saver:
            saver.setup()
            assert read_thread(saver, "t1") == state
        assert empty_database.schema() == schema
        assert empty_database.versions() == versions


def _prefixes() -> list[Any]:
    return [
        pytest.param(
            dialect, k, id=f"{dialect}-{k}", marks=[pytest.mark.postgres] * (dialect == "postgres")
        )
        for dialect in ("sqlite", "postgres")
        for k in range(1, len(HISTORY[dialect]))
    ]


@pytest.mark.parametrize(("dialect", "version"), _prefixes())
class TestIntermediateVersions:
    """A database stopped at any released version is brought to the latest one."""

    def test_setup_completes_the_schema_of_a_new_database(
        self, dialect: str, version: int, empty_database: Database
    ) -> None:
        """Released migrations 0 .. ``version`` - 1 run by hand, then ``setup()``: every
        version is recorded and the schema is that of a new database."""
        with empty_database.connect() as conn:
            for v, statement in enumerate(HISTORY[dialect][:version]):
                conn.execute(statement)
                conn.execute(f"INSERT INTO stm_migrations (v) VALUES ({v})")
        with empty_database.saver() as saver:
            write_turns(saver, "t1", 2)
            assert len(read_thread(saver, "t1")["messages"]) == 4
        assert empty_database.versions() == list(range(len(current_migrations(dialect))))
        schema = empty_database.schema()
        empty_database.drop_ours()
        with empty_database.saver():
            pass
        assert schema == empty_database.schema()


@pytest.mark.parametrize("source", SOURCE_PARAMS)
class TestReleasedDatabases:
    """A database written by a released schema's code is migrated by today's ``setup()``."""

    def test_setup_records_every_version(self, source: Source, released: Database) -> None:
        """After ``setup()`` the released versions are kept and the new ones recorded."""
        assert released.versions() == source.expected["versions"]
        with released.saver():
            pass
        assert released.versions() == list(range(len(current_migrations(source.dialect))))

    def test_setup_gives_the_schema_of_a_new_database(
        self, source: Source, released: Database
    ) -> None:
        """Our tables end up with the columns, indexes and storage a new database gets."""
        with released.saver():
            pass
        migrated = released.schema()
        released.drop_ours()
        with released.saver():
            pass
        assert migrated == released.schema()

    def test_a_new_thread_is_stored_and_read_back(self, source: Source, released: Database) -> None:
        """A new thread is written next to the old ones and read back by a new saver."""
        with released.saver() as saver:
            write_turns(saver, "new", 2)
        with released.saver() as saver:
            assert read_thread(saver, "new")["messages"] == new_turns("new", 0, 2)


@pytest.mark.parametrize(("source", "thread_id"), THREAD_PARAMS)
class TestReleasedThreads:
    """Each thread of a released database reads, and grows, as its own code wrote it."""

    def test_the_latest_state_reads_as_written(
        self, source: Source, thread_id: str, released: Database
    ) -> None:
        """``get_state`` returns the messages (class and fields), goal and plan recorded."""
        with released.saver() as saver:
            assert read_thread(saver, thread_id) == expected_state(source, thread_id)

    def test_every_checkpoint_reads_as_written(
        self, source: Source, thread_id: str, released: Database
    ) -> None:
        """Every checkpoint of ``get_state_history`` has the message ids recorded."""
        with released.saver() as saver:
            history = [
                [
                    s.config["configurable"]["checkpoint_id"],
                    [m.id for m in s.values.get("messages", [])],
                ]
                for s in build_graph(saver).get_state_history(config(thread_id))
            ]
        assert history == source.expected["threads"][thread_id]["history"]

    def test_new_turns_are_stored_and_read_back(
        self, source: Source, thread_id: str, released: Database
    ) -> None:
        """Turns written by today's code extend the old thread; a new saver reads them back
        after the old messages, and the other threads read as before."""
        expected = expected_state(source, thread_id)
        others = [t for t in source.threads if t != thread_id]
        with released.saver() as saver:
            before = {t: read_or_error(saver, t) for t in others}
            write_turns(saver, thread_id, NEW_TURNS)
        with released.saver() as saver:
            state = read_thread(saver, thread_id)
            added = new_turns(thread_id, len(expected["messages"]), NEW_TURNS)
            assert state == {**expected, "messages": expected["messages"] + added}
            assert {t: read_or_error(saver, t) for t in others} == before


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
class TestAppendOnly:
    """Released migrations are never edited: new ones are appended."""

    def test_the_migrations_start_with_the_released_history(self, dialect: str) -> None:
        """``MIGRATIONS`` starts with history.json's statements, statement for statement."""
        current, released = current_migrations(dialect), HISTORY[dialect]
        assert len(current) >= len(released), "a released migration was removed"
        for v, statement in enumerate(released):
            assert current[v] == statement, f"released migration #{v} was edited"

    def test_every_fixture_stops_at_a_released_version(self, dialect: str) -> None:
        """Each fixture's recorded versions are a prefix of the released history."""
        for source in SOURCES:
            if source.dialect == dialect:
                versions = source.expected["versions"]
                assert versions == list(range(len(versions)))
                assert len(versions) <= len(HISTORY[dialect])


_NAME = r"\"?(\w+)\"?"
_DDL = re.compile(
    rf"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<table>{_NAME})"
    rf"|\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<index>{_NAME})"
    rf"\s+ON\s+(?:ONLY\s+)?(?P<on>{_NAME})"
    rf"|\bDROP\s+(?P<drop>TABLE|INDEX)\s+(?:IF\s+EXISTS\s+)?(?P<dropped>{_NAME})"
    rf"|\bALTER\s+(?P<alter>TABLE|INDEX)\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(?P<old>{_NAME})"
    rf"\s+RENAME\s+TO\s+(?P<new>{_NAME})",
    re.IGNORECASE,
)


def created_by(migrations: list[Any]) -> tuple[set[str], set[str]]:
    """Tables and indexes the SQL migrations leave behind, replayed in order (a dropped
    table takes its indexes along; a migration that is not a string is skipped: what it
    creates is not checked here)."""
    tables: set[str] = set()
    indexes: dict[str, str] = {}
    for statement in migrations:
        if not isinstance(statement, str):
            continue
        for m in _DDL.finditer(statement):
            name = {k: v.strip('"') for k, v in m.groupdict().items() if v is not None}
            if "table" in name:
                tables.add(name["table"])
            elif "index" in name:
                indexes[name["index"]] = name["on"]
            elif name.get("drop", "").upper() == "TABLE":
                tables.discard(name["dropped"])
                indexes = {i: t for i, t in indexes.items() if t != name["dropped"]}
            elif "drop" in name:
                indexes.pop(name["dropped"], None)
            elif name["alter"].upper() == "TABLE" and name["old"] in tables:
                tables = (tables - {name["old"]}) | {name["new"]}
                indexes = {i: name["new"] if t == name["old"] else t for i, t in indexes.items()}
            elif name["old"] in indexes:
                indexes[name["new"]] = indexes.pop(name["old"])
    return tables, set(indexes)
