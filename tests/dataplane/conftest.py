"""Fixtures for the data-plane tests: real, throwaway PostgreSQL servers and a script runner.

Every server is initdb'd and started for the test session (or a single test) and stopped with
``pg_ctl -m fast`` afterwards; all files live in one private temporary tree that is removed at
the end. Tests get a fresh database per test on the shared server (``db_env``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pg_dataset
import pytest
from pg_harness import (
    PgServer,
    ScriptRunner,
    default_bindir,
    new_server,
    private_dir,
    remove_tree,
    safe_name,
)


@pytest.fixture(scope="session")
def pg_bindir() -> Path:
    return default_bindir()


@pytest.fixture(scope="session")
def pg_root() -> Iterator[Path]:
    root = private_dir()
    yield root
    remove_tree(root)


@pytest.fixture(scope="session")
def pg_server_factory(pg_root: Path, pg_bindir: Path) -> Iterator[Callable[..., PgServer]]:
    """Start new servers on demand; all are stopped at the end of the session."""
    started: list[PgServer] = []

    def start(bindir: Path | None = None) -> PgServer:
        server = new_server(bindir or pg_bindir, pg_root)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def pg_server(pg_server_factory: Callable[..., PgServer]) -> PgServer:
    """The shared server; tests isolate themselves with their own databases."""
    return pg_server_factory()


@pytest.fixture(scope="session")
def runner(pg_root: Path, pg_bindir: Path) -> ScriptRunner:
    return ScriptRunner(pg_root, pg_bindir)


@pytest.fixture
def work_dir(pg_root: Path) -> Iterator[Path]:
    """A postgres-owned directory for this test's files (backups, SQL, migrations)."""
    path = private_dir(pg_root, prefix="test-")
    yield path
    remove_tree(path)


@pytest.fixture
def db_env(pg_server: PgServer, request: pytest.FixtureRequest) -> dict[str, str]:
    """The libpq environment of a fresh database on the shared server, named after the test."""
    name = safe_name(request.node.name)
    with pg_server.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_server.libpq_env(name)


@pytest.fixture(scope="session")
def dataset_env(pg_server: PgServer) -> dict[str, str]:
    """A database on the shared server holding the representative data set (read-only for tests)."""
    name = pg_server.create_database("dataset")
    with pg_server.connect(name) as conn:
        pg_dataset.load(conn)
    return pg_server.libpq_env(name)


@pytest.fixture(scope="session")
def dataset_fingerprint(pg_server: PgServer, dataset_env: dict[str, str]) -> dict[str, Any]:
    with pg_server.connect(dataset_env["PGDATABASE"]) as conn:
        return pg_dataset.fingerprint(conn)


@pytest.fixture
def fresh_server(pg_root: Path, pg_bindir: Path) -> Iterator[PgServer]:
    """A server of this test's own (for tests that change server-wide state); stopped afterwards."""
    server = new_server(pg_bindir, pg_root)
    yield server
    server.stop()
