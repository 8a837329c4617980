"""migrate.sh on a real server: ordered, once, stops at a failure, refuses drift and bad names."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_harness import PgServer, ScriptRunner, as_postgres

pytestmark = pytest.mark.postgres

M1 = "CREATE TABLE items (id int PRIMARY KEY, label text);\n"
M2 = "ALTER TABLE items ADD COLUMN price numeric;\nINSERT INTO items VALUES (1, 'ü', 9.5);\n"
M10 = "CREATE INDEX items_label_idx ON items (label);\n"


def migrations(work_dir: Path, files: dict[str, str]) -> Path:
    folder = work_dir / "migrations"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    as_postgres(["chmod", "-R", "a+rX", str(folder)], check=False)
    folder.chmod(0o755)
    return folder


def rows(server: PgServer, env: dict[str, str], sql: str) -> list[tuple[object, ...]]:
    with server.connect(env["PGDATABASE"]) as conn:
        return conn.execute(sql).fetchall()


def applied_versions(server: PgServer, env: dict[str, str]) -> list[int]:
    found = rows(server, env, "SELECT version FROM sampledb_meta.schema_migrations ORDER BY applied_at, version")
    return [int(str(v[0])) for v in found]


def test_applies_in_numeric_order_once(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    folder = migrations(work_dir, {"0010_index.sql": M10, "0002_price.sql": M2, "0001_items.sql": M1})

    run = runner.run("migrate.sh", {**db_env, "MIGRATIONS_DIR": str(folder)})

    assert run.returncode == 0, run.stderr
    assert run.result["applied"] == [1, 2, 10]
    assert run.result["current_version"] == 10
    assert applied_versions(pg_server, db_env) == [1, 2, 10]
    names = rows(pg_server, db_env, "SELECT name FROM sampledb_meta.schema_migrations ORDER BY version")
    assert names == [("0001_items.sql",), ("0002_price.sql",), ("0010_index.sql",)]
    assert rows(pg_server, db_env, "SELECT label, price FROM items") == [("ü", 9.5)]


def test_rerun_is_a_noop(runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1, "0002_price.sql": M2})
    env = {**db_env, "MIGRATIONS_DIR": str(folder)}
    assert runner.run("migrate.sh", env).returncode == 0

    again = runner.run("migrate.sh", env)

    assert again.returncode == 0, again.stderr
    assert again.result["applied"] == []
    assert again.result["current_version"] == 2
    assert rows(pg_server, db_env, "SELECT count(*) FROM items") == [(1,)]


def test_new_file_is_applied_on_a_later_run(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1})
    env = {**db_env, "MIGRATIONS_DIR": str(folder)}
    assert runner.run("migrate.sh", env).returncode == 0
    migrations(work_dir, {"0002_price.sql": M2})

    run = runner.run("migrate.sh", env)

    assert run.returncode == 0, run.stderr
    assert run.result["applied"] == [2]


def test_failing_file_stops_and_keeps_earlier_ones(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    bad = "CREATE TABLE partial (id int);\nINSERT INTO missing_table VALUES (1);\n"
    folder = migrations(work_dir, {"0001_items.sql": M1, "0002_broken.sql": bad, "0003_later.sql": M10})

    run = runner.run("migrate.sh", {**db_env, "MIGRATIONS_DIR": str(folder)})

    assert run.returncode == 6
    assert "0002_broken.sql" in run.result["message"]
    assert 'relation "missing_table" does not exist' in run.result["message"]
    assert run.result["applied"] == [1]
    assert run.result["failed"] == "0002_broken.sql"
    assert applied_versions(pg_server, db_env) == [1]
    assert rows(pg_server, db_env, "SELECT to_regclass('partial') IS NULL, to_regclass('items') IS NOT NULL") == [
        (True, True)
    ]
    assert rows(pg_server, db_env, "SELECT to_regclass('items_label_idx') IS NULL") == [(True,)]


def test_changed_applied_file_is_refused_naming_it(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1})
    env = {**db_env, "MIGRATIONS_DIR": str(folder)}
    assert runner.run("migrate.sh", env).returncode == 0
    migrations(work_dir, {"0001_items.sql": M1 + "-- edited\n", "0002_price.sql": M2})

    run = runner.run("migrate.sh", env)

    assert run.returncode == 3
    assert "0001_items.sql changed since it was applied" in run.result["message"]
    assert applied_versions(pg_server, db_env) == [1]


def test_out_of_order_file_is_refused(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1, "0003_index.sql": M10})
    env = {**db_env, "MIGRATIONS_DIR": str(folder)}
    assert runner.run("migrate.sh", env).returncode == 0
    migrations(work_dir, {"0002_price.sql": M2})

    run = runner.run("migrate.sh", env)

    assert run.returncode == 3
    assert "0002_price.sql" in run.result["message"]
    assert applied_versions(pg_server, db_env) == [1, 3]


@pytest.mark.parametrize("bad_name", ["1_short.sql", "0001-dash.sql", "0001_items.txt", "notes.md", "0001_.sql"])
def test_bad_file_names_are_rejected_before_anything_runs(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path, bad_name: str
) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1, bad_name: "SELECT 1;\n"})

    run = runner.run("migrate.sh", {**db_env, "MIGRATIONS_DIR": str(folder)})

    assert run.returncode == 2
    assert bad_name in run.result["message"]
    assert rows(pg_server, db_env, "SELECT to_regclass('items') IS NULL") == [(True,)]


def test_duplicate_versions_are_rejected(runner: ScriptRunner, db_env: dict[str, str], work_dir: Path) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1, "00001_other.sql": M2})

    run = runner.run("migrate.sh", {**db_env, "MIGRATIONS_DIR": str(folder)})

    assert run.returncode == 2
    assert "same version 1" in run.result["message"]


def test_configmap_dot_entries_are_ignored(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    folder = migrations(work_dir, {"0001_items.sql": M1})
    (folder / "..data").mkdir()
    (folder / "..data" / "0001_items.sql").write_text(M1)
    folder.chmod(0o755)
    (folder / "..data").chmod(0o755)

    run = runner.run("migrate.sh", {**db_env, "MIGRATIONS_DIR": str(folder)})

    assert run.returncode == 0, run.stderr
    assert run.result["applied"] == [1]


def test_empty_directory_applies_nothing(runner: ScriptRunner, db_env: dict[str, str], work_dir: Path) -> None:
    folder = migrations(work_dir, {})

    run = runner.run("migrate.sh", {**db_env, "MIGRATIONS_DIR": str(folder)})

    assert run.returncode == 0, run.stderr
    assert run.result["applied"] == []
    assert run.result["current_version"] == 0


def test_a_database_whose_records_are_elsewhere_is_not_migrated_twice(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    """Issue #11, item 12: an operator that lost its own records (a SampleDB adopting a retained volume
    has an empty status.appliedMigrations) sends every file again; the database's table decides."""
    folder = migrations(work_dir, {"0001_items.sql": M1, "0002_price.sql": M2})
    env = {**db_env, "MIGRATIONS_DIR": str(folder)}
    first = runner.run("migrate.sh", env)
    assert first.returncode == 0, first.stderr
    assert (first.result["applied"], first.result["already"]) == ([1, 2], [])
    migrations(work_dir, {"0010_index.sql": M10})

    adopted = runner.run("migrate.sh", env)  # every file, as a new SampleDB's first run sends them

    assert adopted.returncode == 0, adopted.stderr
    assert adopted.result["applied"] == [10]
    assert adopted.result["already"] == [1, 2]
    assert "2 already recorded" in adopted.result["message"]
    assert rows(pg_server, db_env, "SELECT count(*) FROM items") == [(1,)]  # 0002's INSERT did not run again
    assert applied_versions(pg_server, db_env) == [1, 2, 10]
