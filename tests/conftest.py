"""Shared fixtures: a private PostgreSQL database per test, a SQLite file per test.

PostgreSQL tests talk to a real server (``STM_TEST_POSTGRES_URI``, default
``postgresql://postgres@127.0.0.1:5432/postgres``). Each test gets its own freshly
created database, dropped afterwards. When the server does not answer, the tests are
skipped locally, but fail when ``STM_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), so CI
can never pass by skipping them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# "ci" (set by .ci/run) runs the property tests with no deadline: CI machines are
# shared and slow, and a deadline would turn load into flaky failures. Tests that need
# many examples ask for them with @settings(max_examples=...) themselves.
settings.register_profile(
    "ci", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

ADMIN_URI = os.environ.get("STM_TEST_POSTGRES_URI", "postgresql://postgres@127.0.0.1:5432/postgres")


def _with_database(uri: str, dbname: str) -> str:
    base, _, _ = uri.rpartition("/")
    return f"{base}/{dbname}"


@pytest.fixture
def postgres_uri() -> Iterator[str]:
    """Connection string of a new, empty database that is dropped after the test."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the test extras install it
        pytest.fail("psycopg is not installed: pip install 'langgraph-stm[postgres]'")
    try:
        admin = psycopg.connect(ADMIN_URI, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("STM_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but does not answer at {ADMIN_URI}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {ADMIN_URI}")
    dbname = f"stm_test_{uuid.uuid4().hex[:16]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')
        try:
            yield _with_database(ADMIN_URI, dbname)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    """Path of a SQLite database file that does not exist yet, in the test's tmp dir."""
    return tmp_path / "checkpoints.sqlite"
