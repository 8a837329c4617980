"""init.sh on a real server: runs once, then no-op; refuses changed SQL; a failure leaves nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pg_harness import PASSWORD, PgServer, ScriptRunner

pytestmark = pytest.mark.postgres

INIT_SQL = """
CREATE TABLE settings (key text PRIMARY KEY, value text);
INSERT INTO settings VALUES ('greeting', 'こんにちは 👋');
SELECT * FROM settings;
"""


def write_sql(work_dir: Path, text: str, name: str = "init.sql") -> Path:
    path = work_dir / name
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)
    return path


def query(server: PgServer, env: dict[str, str], sql: str) -> list[tuple[object, ...]]:
    with server.connect(env["PGDATABASE"]) as conn:
        return conn.execute(sql).fetchall()


def test_first_run_applies_and_records_hash(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    sql_file = write_sql(work_dir, INIT_SQL)

    run = runner.run("init.sh", {**db_env, "INIT_SQL_FILE": str(sql_file)})

    assert run.returncode == 0, run.stderr
    assert run.result["outcome"] == "applied"
    assert query(pg_server, db_env, "SELECT value FROM settings") == [("こんにちは 👋",)]
    recorded = query(pg_server, db_env, "SELECT sha256 FROM sampledb_meta.init_state")
    assert recorded == [(run.result["sha256"],)]
    assert PASSWORD not in run.stdout + run.stderr


def test_second_run_with_same_sql_is_a_noop(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    sql_file = write_sql(work_dir, INIT_SQL)
    env = {**db_env, "INIT_SQL_FILE": str(sql_file)}
    assert runner.run("init.sh", env).returncode == 0

    again = runner.run("init.sh", env)

    assert again.returncode == 0, again.stderr
    assert again.result["outcome"] == "unchanged"
    assert query(pg_server, db_env, "SELECT count(*) FROM settings") == [(1,)]


def test_changed_sql_is_refused_with_drift_code_and_not_run(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    sql_file = write_sql(work_dir, INIT_SQL)
    env = {**db_env, "INIT_SQL_FILE": str(sql_file)}
    assert runner.run("init.sh", env).returncode == 0
    write_sql(work_dir, INIT_SQL + "\nINSERT INTO settings VALUES ('extra', 'x');\n")

    changed = runner.run("init.sh", env)

    assert changed.returncode == 3
    assert changed.result["code"] == 3
    assert "init SQL changed since it ran" in changed.result["message"]
    assert "init SQL changed since it ran" in changed.stderr
    assert query(pg_server, db_env, "SELECT count(*) FROM settings") == [(1,)]


def test_failing_sql_leaves_no_record_and_no_effects(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    bad = "CREATE TABLE half_done (id int);\nINSERT INTO half_done VALUES (1);\nSELECT * FROM nope_table;\n"
    sql_file = write_sql(work_dir, bad)

    run = runner.run("init.sh", {**db_env, "INIT_SQL_FILE": str(sql_file)})

    assert run.returncode == 6
    assert "42P01" in run.result["message"] and "init.sql line 3" in run.result["message"]
    assert "nope_table" not in run.result["message"]  # SQL text is withheld (it may hold secrets)
    assert query(pg_server, db_env, "SELECT to_regclass('half_done') IS NULL") == [(True,)]
    assert query(pg_server, db_env, "SELECT to_regclass('sampledb_meta.init_state') IS NULL") == [(True,)]


def test_failed_run_can_be_retried_after_fixing_the_sql(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    sql_file = write_sql(work_dir, "SELECT 1/0;")
    env = {**db_env, "INIT_SQL_FILE": str(sql_file)}
    assert runner.run("init.sh", env).returncode == 6
    write_sql(work_dir, INIT_SQL)

    run = runner.run("init.sh", env)

    assert run.returncode == 0, run.stderr
    assert run.result["outcome"] == "applied"


def test_sql_that_commits_itself_is_reported_and_not_recorded(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    sql_file = write_sql(work_dir, "CREATE TABLE t1 (id int);\nCOMMIT;\n")

    run = runner.run("init.sh", {**db_env, "INIT_SQL_FILE": str(sql_file)})

    assert run.returncode == 6
    assert "ended the transaction" in run.result["message"]
    assert query(pg_server, db_env, "SELECT count(*) FROM sampledb_meta.init_state") == [(0,)]


def test_missing_file_is_a_config_error(runner: ScriptRunner, db_env: dict[str, str], work_dir: Path) -> None:
    run = runner.run("init.sh", {**db_env, "INIT_SQL_FILE": str(work_dir / "absent.sql")})

    assert run.returncode == 2
    assert "absent.sql" in run.result["message"]


def test_wrong_password_is_a_connect_error_without_echoing_it(
    runner: ScriptRunner, db_env: dict[str, str], work_dir: Path
) -> None:
    sql_file = write_sql(work_dir, INIT_SQL)
    wrong = "Wr0ng-PASSWORD-xyz"

    run = runner.run("init.sh", {**db_env, "PGPASSWORD": wrong, "INIT_SQL_FILE": str(sql_file)})

    assert run.returncode == 9
    assert "password authentication failed" in run.result["message"]
    assert wrong not in run.stdout + run.stderr + str(run.result)


SECRET = "hunter2-do-not-print-7f3a"
BROKEN_WITH_SECRETS = [
    # a syntax error: the server quotes the text "at or near" it, psql adds the "LINE n:" context
    f"CREATE ROLE reporting LOGIN;\nALTER ROLE reporting PASSWORD '{SECRET}' VALID UNTILL 'infinity';\n",
    f"CREATE ROLE reporting LOGIN PASSWORD '{SECRET};\n",  # an unterminated literal
    f"SELECT '{SECRET}'::int;\n",  # the server quotes the value it cannot read
    f"SELECT {SECRET.replace('-', '_')};\n",  # the server quotes the unknown column
    f"CREATE TABLE t (k text PRIMARY KEY);\nINSERT INTO t VALUES ('{SECRET}'), ('{SECRET}');\n",  # DETAIL: Key
]


@pytest.mark.parametrize("sql_text", BROKEN_WITH_SECRETS)
def test_a_failing_init_sql_never_echoes_its_text(
    runner: ScriptRunner, db_env: dict[str, str], work_dir: Path, sql_text: str
) -> None:
    """Init SQL may come from a Secret: its failure keeps the server's SQLSTATE and line, not the SQL."""
    sql_file = write_sql(work_dir, sql_text)

    run = runner.run("init.sh", {**db_env, "INIT_SQL_FILE": str(sql_file)})

    assert run.returncode == 6, run.stderr
    message = run.result["message"]
    assert message.startswith("init SQL failed: ERROR:"), message
    assert re.search(r"\b[0-9A-Z]{5}: ", message), message  # the SQLSTATE
    for secret in (SECRET, SECRET.replace("-", "_"), "hunter2", "do-not-print"):
        assert secret not in run.stdout + run.stderr + json.dumps(run.result), (message, run.stderr)
