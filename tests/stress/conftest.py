"""Fixtures and switches of the stress suites (crash recovery, hostile input).

``STM_STRESS_FULL=1`` runs the full counts (36 kill points per backend, more hypothesis
examples); without it the suites run a reduced count that fits CI's time limit.
``STM_STRESS_SEED`` picks the kill points (default 1414): the same seed kills the same
boundaries. PostgreSQL is the server of ``STM_TEST_POSTGRES_URI``, as for the other tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

FULL = os.environ.get("STM_STRESS_FULL") == "1"
"""Whether the full counts run (``STM_STRESS_FULL=1``)."""

SEED = int(os.environ.get("STM_STRESS_SEED", "1414"))
"""The seed of the kill points."""

ADMIN_URI = os.environ.get("STM_TEST_POSTGRES_URI", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="module")
def make_postgres_database() -> Iterator[Callable[[], str]]:
    """A factory of fresh PostgreSQL databases that live as long as the test module
    (for what a module shares, such as a reference run); each is dropped at the end."""
    import psycopg

    created: list[str] = []
    try:
        admin = psycopg.connect(ADMIN_URI, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("STM_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but does not answer at {ADMIN_URI}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {ADMIN_URI}")

    def make() -> str:
        name = f"stm_stress_{uuid.uuid4().hex[:16]}"
        admin.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return f"{ADMIN_URI.rpartition('/')[0]}/{name}"

    with admin:
        try:
            yield make
        finally:
            for name in created:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
