"""thaw.sh against a real server: undoes upgrade.sh's freeze, and is a no-op when nothing is frozen."""

from __future__ import annotations

import psycopg
import pytest
from pg_harness import PASSWORD, PgServer, ScriptRunner

pytestmark = pytest.mark.postgres


def read_only(server: PgServer) -> str:
    with server.connect() as conn:
        row = conn.execute("SHOW default_transaction_read_only").fetchone()
        assert row is not None
        return str(row[0])


def test_a_frozen_server_accepts_writes_again(runner: ScriptRunner, pg_server: PgServer) -> None:
    with pg_server.connect() as conn:  # what upgrade.sh does before it dumps the old server
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        conn.execute("SELECT pg_reload_conf()")
    assert read_only(pg_server) == "on"
    with pg_server.connect() as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("CREATE TABLE frozen (id int)")

    run = runner.run("thaw.sh", pg_server.libpq_env())

    assert run.returncode == 0, run.stderr
    assert run.result["ok"] is True and run.result["read_only"] is False
    assert read_only(pg_server) == "off"
    with pg_server.connect() as conn:
        conn.execute("CREATE TABLE thawed (id int)")
    assert PASSWORD not in run.stdout + run.stderr


def test_thawing_a_writable_server_changes_nothing(runner: ScriptRunner, pg_server: PgServer) -> None:
    first = runner.run("thaw.sh", pg_server.libpq_env())
    second = runner.run("thaw.sh", pg_server.libpq_env())
    assert (first.returncode, second.returncode) == (0, 0)
    assert read_only(pg_server) == "off"
