"""The application's role on a real server: app-role.sh (sourced by the image's entrypoint after initdb) makes it
LOGIN only and the owner of its database and public schema, with a password that logs in and appears in no output;
init SQL with SAMPLEDB_OWNER_ROLE makes the application's objects, and may RESET ROLE for the superuser's work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_harness import PASSWORD, PgServer, ScriptRunner, as_postgres

pytestmark = pytest.mark.postgres

APP_PASSWORD = "app pw with ' and \" and $HOME"


def source_app_role(runner: ScriptRunner, server: PgServer, database: str, app: str) -> Any:
    """app-role.sh sourced as the entrypoint does (its shell strict), on the server's socket."""
    env = runner.environment({"POSTGRES_USER": "postgres", "POSTGRES_DB": database, "SAMPLEDB_APP_USER": app,
                              "SAMPLEDB_APP_PASSWORD": APP_PASSWORD, "PGHOST": str(server.sockdir),
                              "PGPORT": str(server.port)})
    return as_postgres(["bash", "-c", f'set -Eeuo pipefail; . "{runner.dir}/app-role.sh"'], env=env, check=False)


def test_the_application_role_logs_in_owns_its_database_and_nothing_more(
        runner: ScriptRunner, fresh_server: PgServer) -> None:
    database = fresh_server.create_database("shop")
    ran = source_app_role(runner, fresh_server, database, "app")
    assert ran.returncode == 0, ran.stderr
    assert APP_PASSWORD not in ran.stdout + ran.stderr and PASSWORD not in ran.stdout + ran.stderr
    with fresh_server.connect(database) as conn:
        attributes = conn.execute("SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication,"
                                  " rolbypassrls FROM pg_roles WHERE rolname = 'app'").fetchone()
        assert attributes == (True, False, False, False, False, False)
        owners = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()"
                              " UNION ALL SELECT pg_get_userbyid(nspowner) FROM pg_namespace"
                              " WHERE nspname = 'public'").fetchall()
        assert owners == [("app",), ("app",)]
    with psycopg.connect(host="127.0.0.1", port=fresh_server.port, dbname=database, user="app",
                         password=APP_PASSWORD, autocommit=True) as app:
        app.execute("CREATE TABLE orders (id int)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("CREATE ROLE intruder")


def test_nothing_is_made_when_the_application_role_is_the_superuser(
        runner: ScriptRunner, fresh_server: PgServer) -> None:
    database = fresh_server.create_database("earlier")
    ran = source_app_role(runner, fresh_server, database, "postgres")
    assert ran.returncode == 0, ran.stderr
    with fresh_server.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE NOT rolsuper AND rolcanlogin").fetchone() == (0,)
        assert conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database"
                            " WHERE datname = current_database()").fetchone() == ("postgres",)


def test_init_sql_with_an_owner_role_makes_the_applications_objects_and_may_reset_role(
        runner: ScriptRunner, fresh_server: PgServer, work_dir: Path) -> None:
    database = fresh_server.create_database("owned")
    assert source_app_role(runner, fresh_server, database, "app").returncode == 0
    sql = work_dir / "init.sql"
    sql.write_text("CREATE TABLE mine (id int);\n"
                   "RESET ROLE;\n"
                   "CREATE TABLE the_superusers (id int);\n", encoding="utf-8")
    sql.chmod(0o644)
    run = runner.run("init.sh", {**fresh_server.libpq_env(database), "INIT_SQL_FILE": str(sql),
                                 "SAMPLEDB_OWNER_ROLE": "app"})
    assert run.returncode == 0, run.stderr
    with fresh_server.connect(database) as conn:
        owners = dict(conn.execute("SELECT tablename, tableowner FROM pg_tables"
                                   " WHERE schemaname IN ('public', 'sampledb_meta')").fetchall())
    assert owners == {"mine": "app", "the_superusers": "postgres", "init_state": "postgres"}
