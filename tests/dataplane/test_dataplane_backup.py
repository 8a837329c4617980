"""backup.sh and restore.sh on real servers: a faithful round trip, checksums, atomicity."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pg_dataset
import pytest
from pg_harness import PASSWORD, PgServer, ScriptRunner

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def restore_server(pg_server_factory: Callable[..., PgServer]) -> PgServer:
    """A second, fresh server to restore into."""
    return pg_server_factory()


def backup(runner: ScriptRunner, env: dict[str, str], folder: Path, name: str) -> Any:
    return runner.run("backup.sh", {**env, "BACKUP_DIR": str(folder), "BACKUP_NAME": name})


def test_round_trip_into_a_fresh_server_is_identical(
    runner: ScriptRunner,
    dataset_env: dict[str, str],
    dataset_fingerprint: dict[str, Any],
    restore_server: PgServer,
    work_dir: Path,
) -> None:
    made = backup(runner, dataset_env, work_dir, "nightly-1")
    assert made.returncode == 0, made.stderr
    target = restore_server.create_database("restored")

    run = runner.run(
        "restore.sh",
        {**restore_server.libpq_env(target), "BACKUP_DIR": str(work_dir), "BACKUP_NAME": "nightly-1"},
    )

    assert run.returncode == 0, run.stderr
    with restore_server.connect(target) as conn:
        restored = pg_dataset.fingerprint(conn)
    assert pg_dataset.total_rows(dataset_fingerprint) >= pg_dataset.MIN_ROWS
    assert len(dataset_fingerprint["large_objects"]) == 8
    assert restored == dataset_fingerprint
    assert PASSWORD not in made.stdout + made.stderr + run.stdout + run.stderr


def test_backup_writes_metadata_matching_the_dump(
    runner: ScriptRunner, pg_server: PgServer, dataset_env: dict[str, str], work_dir: Path
) -> None:
    run = backup(runner, dataset_env, work_dir, "meta")

    assert run.returncode == 0, run.stderr
    meta = json.loads((work_dir / "meta.json").read_text())
    dump = work_dir / "meta.dump"
    assert meta["format"] == "custom"
    assert meta["database"] == "dataset"
    assert meta["size_bytes"] == dump.stat().st_size
    assert meta["sha256"] == run.result["sha256"]
    assert meta["server_version"].startswith(str(pg_server.major))
    assert meta["created"].endswith("Z")
    assert meta["globals_file"] == "meta.globals.sql"
    assert "CREATE ROLE postgres;" in (work_dir / "meta.globals.sql").read_text()
    assert sorted(p.name for p in work_dir.iterdir()) == ["meta.dump", "meta.globals.sql", "meta.json"]


def test_rerun_of_completed_backup_verifies_and_keeps_it(
    runner: ScriptRunner, dataset_env: dict[str, str], work_dir: Path
) -> None:
    first = backup(runner, dataset_env, work_dir, "same")
    mtime = (work_dir / "same.dump").stat().st_mtime_ns

    again = backup(runner, dataset_env, work_dir, "same")

    assert again.returncode == 0, again.stderr
    assert again.result["outcome"] == "exists"
    assert again.result["sha256"] == first.result["sha256"]
    assert (work_dir / "same.dump").stat().st_mtime_ns == mtime


def test_corrupted_dump_is_refused_by_restore_and_target_untouched(
    runner: ScriptRunner, dataset_env: dict[str, str], restore_server: PgServer, work_dir: Path
) -> None:
    assert backup(runner, dataset_env, work_dir, "bad").returncode == 0
    dump = work_dir / "bad.dump"
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))
    target = restore_server.create_database("untouched")
    with restore_server.connect(target) as conn:
        conn.execute("CREATE TABLE keep (id int)")

    run = runner.run(
        "restore.sh", {**restore_server.libpq_env(target), "BACKUP_DIR": str(work_dir), "BACKUP_NAME": "bad"}
    )

    assert run.returncode == 4
    assert "checksum mismatch for bad.dump" in run.result["message"]
    assert run.result["actual_sha256"] != run.result["expected_sha256"]
    with restore_server.connect(target) as conn:
        assert conn.execute("SELECT to_regclass('keep') IS NOT NULL").fetchone() == (True,)


def test_rerun_of_corrupted_backup_reports_integrity_error(
    runner: ScriptRunner, dataset_env: dict[str, str], work_dir: Path
) -> None:
    assert backup(runner, dataset_env, work_dir, "rot").returncode == 0
    with (work_dir / "rot.dump").open("ab") as fh:
        fh.write(b"x")

    run = backup(runner, dataset_env, work_dir, "rot")

    assert run.returncode == 4


def test_failing_dump_leaves_no_final_file(runner: ScriptRunner, pg_server: PgServer, work_dir: Path) -> None:
    env = {**pg_server.libpq_env("postgres")}
    with pg_server.connect() as conn:
        conn.execute("DROP DATABASE IF EXISTS locked_out")
        conn.execute("CREATE DATABASE locked_out")
        conn.execute("CREATE ROLE dumper LOGIN PASSWORD 'dumper-pw'")
    with pg_server.connect("locked_out") as conn:
        conn.execute("CREATE TABLE secret_table (id int)")
        conn.execute("REVOKE ALL ON secret_table FROM PUBLIC")
    env.update(PGUSER="dumper", PGPASSWORD="dumper-pw", PGDATABASE="locked_out")

    run = backup(runner, env, work_dir, "partial")

    assert run.returncode == 7
    assert "permission denied" in run.result["message"]
    assert list(work_dir.iterdir()) == []


def test_unknown_database_fails_to_connect_and_writes_nothing(
    runner: ScriptRunner, pg_server: PgServer, work_dir: Path
) -> None:
    run = backup(runner, pg_server.libpq_env("no_such_db"), work_dir, "nothing")

    assert run.returncode == 9
    assert 'database "no_such_db" does not exist' in run.result["message"]
    assert list(work_dir.iterdir()) == []


def test_restore_of_unknown_backup_is_a_config_error(
    runner: ScriptRunner, restore_server: PgServer, work_dir: Path
) -> None:
    run = runner.run("restore.sh", {**restore_server.libpq_env(), "BACKUP_DIR": str(work_dir), "BACKUP_NAME": "never"})

    assert run.returncode == 2
    assert "never.json" in run.result["message"]


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", ""])
def test_unsafe_backup_names_are_rejected(
    runner: ScriptRunner, dataset_env: dict[str, str], work_dir: Path, name: str
) -> None:
    run = backup(runner, dataset_env, work_dir, name)

    assert run.returncode == 2
    assert list(work_dir.iterdir()) == []


def test_restore_replaces_existing_objects(
    runner: ScriptRunner,
    dataset_env: dict[str, str],
    dataset_fingerprint: dict[str, Any],
    restore_server: PgServer,
    work_dir: Path,
) -> None:
    assert backup(runner, dataset_env, work_dir, "again").returncode == 0
    target = restore_server.create_database("twice")
    env = {**restore_server.libpq_env(target), "BACKUP_DIR": str(work_dir), "BACKUP_NAME": "again"}
    assert runner.run("restore.sh", env).returncode == 0
    with restore_server.connect(target) as conn:
        conn.execute("DELETE FROM orders WHERE id % 2 = 0")

    run = runner.run("restore.sh", env)

    assert run.returncode == 0, run.stderr
    with restore_server.connect(target) as conn:
        assert pg_dataset.fingerprint(conn) == dataset_fingerprint
