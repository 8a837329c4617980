"""Backup verification on real servers: backup.sh's statistics and verify.sh's restore-and-compare.

verify.sh runs without any database connection: it checks the files' checksums, restores into a
throw-away server it starts itself (with the binaries on PATH, or those the test passes), and
compares the restored tables with the statistics recorded at backup time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_harness import PASSWORD, PgServer, ScriptRun, ScriptRunner, bindir_for, private_dir, remove_tree

pytestmark = pytest.mark.postgres

NEWER_MAJOR = 18

TRICKY_SQL = """
CREATE TABLE shapes (r int, h text, s text, f float8, d double precision, ts timestamptz, iv interval,
                     m money, b bytea, j jsonb, a int[], n numeric);
INSERT INTO shapes
SELECT g, 'h' || g, NULL, g / 7.0, 1e300 * g, '2024-03-01 12:00+02'::timestamptz + g * interval '1 hour',
       make_interval(days => g, secs => g / 3.0), g * 1.25, decode(md5(g::text), 'hex'),
       jsonb_build_object('k', g, 'z', 'ö'), ARRAY[g, NULL, -g], g / 3.0
FROM generate_series(1, 500) AS g;
CREATE TABLE "Weird ""name"", here" (id int);
INSERT INTO "Weird ""name"", here" VALUES (1), (1), (2);
CREATE TABLE empty_one (id int);
CREATE TABLE no_columns ();
INSERT INTO no_columns DEFAULT VALUES;
INSERT INTO no_columns DEFAULT VALUES;
CREATE SCHEMA other;
CREATE TABLE other.events (at date NOT NULL, what text) PARTITION BY RANGE (at);
CREATE TABLE other.events_2024 PARTITION OF other.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE other.events_2025 PARTITION OF other.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
INSERT INTO other.events SELECT DATE '2024-06-01' + g, 'event ' || g FROM generate_series(1, 400) AS g;
CREATE UNLOGGED TABLE scratch (id int);
INSERT INTO scratch SELECT generate_series(1, 10);
"""


def backup(runner: ScriptRunner, env: dict[str, str], folder: Path, name: str, **extra: str) -> ScriptRun:
    return runner.run("backup.sh", {**env, "BACKUP_DIR": str(folder), "BACKUP_NAME": name, **extra})


def verify(runner: ScriptRunner, folder: Path, name: str, bindir: Path | None = None, **extra: str) -> ScriptRun:
    """verify.sh with a libpq environment that points nowhere: it must not need one."""
    env = {
        "BACKUP_DIR": str(folder),
        "BACKUP_NAME": name,
        "PGHOST": "192.0.2.1",
        "PGPORT": "1",
        "PGUSER": "nobody",
        "PGPASSWORD": PASSWORD,
        "PGDATABASE": "nowhere",
        **extra,
    }
    return runner.run("verify.sh", env, bindir=bindir)


def metadata(folder: Path, name: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    return parsed


def rewrite_metadata(folder: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the metadata as backup.sh writes it: one line, no spaces, "stats" last."""
    meta = metadata(folder, name)
    change(meta)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(meta, separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def dataset_backup(runner: ScriptRunner, dataset_env: dict[str, str], pg_root: Path) -> Iterator[Path]:
    """One backup of the representative data set, copied per test (tests damage their copy)."""
    folder = private_dir(pg_root, prefix="verify-src-")
    made = backup(runner, dataset_env, folder, "ds")
    assert made.returncode == 0, made.stderr
    yield folder
    remove_tree(folder)


@pytest.fixture
def ds(dataset_backup: Path, work_dir: Path) -> Path:
    """A private copy of the data set's backup files in this test's directory."""
    for src in dataset_backup.iterdir():
        dst = work_dir / src.name
        shutil.copy2(src, dst)
        st = src.stat()
        os.chown(dst, st.st_uid, st.st_gid)
    return work_dir


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


# ---- backup.sh: statistics


def test_backup_records_row_counts_and_checksums_of_every_table(
    ds: Path, pg_server: PgServer, dataset_env: dict[str, str]
) -> None:
    meta = metadata(ds, "ds")

    assert list(meta)[-1] == "stats"  # the last member: readers with sed stop before it
    assert meta["stats_error"] is None
    assert meta["encoding"] == "UTF8"
    stats = meta["stats"]
    assert stats["method"] == "row-md5-sum128-v1"
    assert set(stats["tables"]) == {"public.customers", "public.orders", "public.documents"}
    with pg_server.connect(dataset_env["PGDATABASE"]) as conn:
        for table, recorded in stats["tables"].items():
            assert recorded["rows"] == conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
            assert len(recorded["checksum"]) == 32
    assert stats["large_objects"]["count"] == 8


def test_statistics_are_those_of_the_dumped_snapshot_while_rows_are_written(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    name = db_env["PGDATABASE"]
    with pg_server.connect(name) as conn:
        conn.execute("CREATE TABLE busy (id bigserial PRIMARY KEY, payload text)")
        conn.execute("INSERT INTO busy (payload) SELECT repeat('x', 200) FROM generate_series(1, 50000)")
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        with psycopg.connect(pg_server.conninfo(name), autocommit=True) as conn:
            while not stop.is_set():
                conn.execute("INSERT INTO busy (payload) VALUES ('during the backup')")
                conn.execute(
                    "UPDATE busy SET payload = 'changed'"
                    " WHERE id = (SELECT min(id) FROM busy WHERE payload <> 'changed')"
                )
                written[0] += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        made = backup(runner, db_env, work_dir, "busy")
    finally:
        stop.set()
        thread.join()

    assert made.returncode == 0, made.stderr
    assert written[0] > 0
    run = verify(runner, work_dir, "busy")
    assert run.returncode == 0, run.stderr + json.dumps(run.result)
    assert run.result["compared"] is True
    recorded = metadata(work_dir, "busy")["stats"]["tables"]["public.busy"]["rows"]
    assert run.result["rows"] == recorded


def test_backup_without_statistics_when_disabled(runner: ScriptRunner, db_env: dict[str, str], work_dir: Path) -> None:
    made = backup(runner, db_env, work_dir, "plain", BACKUP_STATS="0")

    assert made.returncode == 0, made.stderr
    assert made.result["stats"] is False
    meta = metadata(work_dir, "plain")
    assert meta["stats"] is None
    assert "disabled" in meta["stats_error"]


# ---- verify.sh: success


def test_verify_of_an_intact_backup_restores_and_matches(runner: ScriptRunner, ds: Path) -> None:
    run = verify(runner, ds, "ds")

    assert run.returncode == 0, run.stderr
    assert run.result["ok"] is True
    assert run.result["compared"] is True
    assert run.result["tables"] == 3
    assert run.result["rows"] >= 100_000
    assert run.result["large_objects"] == 8
    assert run.result["mismatches"] == []
    assert PASSWORD not in run.stdout + run.stderr + json.dumps(run.result)
    assert list(runner.work.glob("sampledb-verify.*")) == []  # the throw-away cluster is gone


def test_verify_handles_types_names_partitions_and_empty_tables(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], work_dir: Path
) -> None:
    with pg_server.connect(db_env["PGDATABASE"]) as conn:
        conn.execute(TRICKY_SQL)
    assert backup(runner, db_env, work_dir, "tricky").returncode == 0

    run = verify(runner, work_dir, "tricky")

    assert run.returncode == 0, run.stderr + json.dumps(run.result)
    tables = set(metadata(work_dir, "tricky")["stats"]["tables"])
    assert tables == {
        "public.shapes",
        'public."Weird ""name"", here"',
        "public.empty_one",
        "public.no_columns",
        "other.events_2024",
        "other.events_2025",
        "public.scratch",
    }  # leaf partitions, not the parent
    assert run.result["rows"] == 500 + 3 + 0 + 2 + 400 + 10


@pytest.mark.skipif(bindir_for(NEWER_MAJOR) is None, reason=f"PostgreSQL {NEWER_MAJOR} is not installed")
def test_verify_of_an_older_major_backup_with_newer_binaries(
    runner: ScriptRunner, pg_server: PgServer, db_env: dict[str, str], ds: Path
) -> None:
    with pg_server.connect(db_env["PGDATABASE"]) as conn:
        conn.execute(TRICKY_SQL)
    assert backup(runner, db_env, ds, "tricky").returncode == 0
    newer = bindir_for(NEWER_MAJOR)

    for name in ("ds", "tricky"):
        run = verify(runner, ds, name, bindir=newer)

        assert run.returncode == 0, run.stderr + json.dumps(run.result)
        assert run.result["compared"] is True
        assert run.result["server_version"].startswith(f"postgres (PostgreSQL) {NEWER_MAJOR}")
        assert run.result["backup_server_version"].startswith(str(pg_server.major))


@pytest.mark.skipif(bindir_for(NEWER_MAJOR) is None, reason=f"PostgreSQL {NEWER_MAJOR} is not installed")
def test_verify_on_the_newer_major_itself(
    runner: ScriptRunner, pg_server_factory: Callable[..., PgServer], work_dir: Path
) -> None:
    newer = bindir_for(NEWER_MAJOR)
    server = pg_server_factory(newer)
    name = server.create_database("on_newer")
    with server.connect(name) as conn:
        conn.execute(TRICKY_SQL)
    made = runner.run(
        "backup.sh", {**server.libpq_env(name), "BACKUP_DIR": str(work_dir), "BACKUP_NAME": "n"}, bindir=newer
    )
    assert made.returncode == 0, made.stderr

    run = verify(runner, work_dir, "n", bindir=newer)

    assert run.returncode == 0, run.stderr + json.dumps(run.result)
    assert run.result["compared"] is True


def test_verify_of_an_older_backup_without_statistics_says_what_it_checked(runner: ScriptRunner, ds: Path) -> None:
    def as_before(meta: dict[str, Any]) -> None:  # the metadata backup.sh wrote before statistics existed
        for key in ("encoding", "stats_error", "stats"):
            del meta[key]

    rewrite_metadata(ds, "ds", as_before)

    run = verify(runner, ds, "ds")

    assert run.returncode == 0, run.stderr
    assert run.result["compared"] is False
    assert "no table statistics" in run.result["message"]
    assert "not compared" in run.result["message"]
    assert run.result["tables"] == 3


# ---- verify.sh: damage is detected


def test_verify_detects_a_flipped_byte(runner: ScriptRunner, ds: Path) -> None:
    flip_byte(ds / "ds.dump", (ds / "ds.dump").stat().st_size // 2)

    run = verify(runner, ds, "ds")

    assert run.returncode == 4
    assert run.result["check"] == "integrity"
    assert "checksum mismatch for ds.dump" in run.result["message"]
    assert "sampledb-verify: initdb" not in run.stderr  # nothing restored


def test_verify_detects_a_truncated_dump(runner: ScriptRunner, ds: Path) -> None:
    dump = ds / "ds.dump"
    size = dump.stat().st_size
    with dump.open("r+b") as fh:
        fh.truncate(size - 1000)

    run = verify(runner, ds, "ds")

    assert run.returncode == 4
    assert f"the file has {size - 1000} bytes, the backup wrote {size}" in run.result["message"]


def test_verify_detects_a_missing_dump_or_roles_file(runner: ScriptRunner, ds: Path) -> None:
    flip_byte(ds / "ds.globals.sql", 0)
    assert verify(runner, ds, "ds").returncode == 4

    (ds / "ds.dump").unlink()
    run = verify(runner, ds, "ds")

    assert run.returncode == 4
    assert "incomplete" in run.result["message"]


def test_verify_of_an_unknown_backup_is_a_config_error(runner: ScriptRunner, work_dir: Path) -> None:
    run = verify(runner, work_dir, "never")

    assert run.returncode == 2
    assert "never.json" in run.result["message"]


def test_verify_reports_a_dump_that_does_not_restore(runner: ScriptRunner, ds: Path) -> None:
    """Damage before the checksum was taken (e.g. a faulty disk under pg_dump): the SHA-256 matches,
    the restore fails."""
    dump = ds / "ds.dump"
    with dump.open("r+b") as fh:
        fh.truncate(dump.stat().st_size * 2 // 3)
    digest = hashlib.sha256(dump.read_bytes()).hexdigest()
    rewrite_metadata(ds, "ds", lambda m: m.update(sha256=digest, size_bytes=dump.stat().st_size))

    run = verify(runner, ds, "ds")

    assert run.returncode == 6, run.stderr
    assert run.result["check"] == "restore"
    assert "does not restore" in run.result["message"]


def test_verify_reports_tables_whose_data_differs_by_name_only(runner: ScriptRunner, ds: Path) -> None:
    def differ(meta: dict[str, Any]) -> None:
        tables = meta["stats"]["tables"]
        tables["public.orders"]["checksum"] = "0" * 32
        tables["public.customers"]["rows"] += 1
        del tables["public.documents"]
        tables['public."gone"'] = {"rows": 1, "checksum": "1" * 32}

    rewrite_metadata(ds, "ds", differ)

    run = verify(runner, ds, "ds")

    assert run.returncode == 8, run.stderr
    result = run.result
    assert result["mismatched"] == 4
    problems = {m["table"]: m["problem"] for m in result["mismatches"]}
    assert problems == {
        "public.orders": "checksum",
        "public.customers": "rows",
        "public.documents": "unexpected",
        'public."gone"': "missing",
    }
    customers = next(m for m in result["mismatches"] if m["table"] == "public.customers")
    assert customers["expected_rows"] == customers["actual_rows"] + 1
    assert "public.orders (checksum)" in result["message"]
    text = run.stdout + run.stderr + json.dumps(result, ensure_ascii=False)
    for value in ("山田太郎", "ドキュメント", "note ✓", "during the backup"):
        assert value not in text  # names and counts, never data


def test_verify_reports_large_objects_that_differ(runner: ScriptRunner, ds: Path) -> None:
    rewrite_metadata(ds, "ds", lambda m: m["stats"]["large_objects"].update(count=9))

    run = verify(runner, ds, "ds")

    assert run.returncode == 8
    assert run.result["large_objects_problem"] == "count"
    assert run.result["mismatched"] == 0


def test_verify_bounds_the_mismatch_list(runner: ScriptRunner, ds: Path) -> None:
    def many(meta: dict[str, Any]) -> None:
        for i in range(300):
            meta["stats"]["tables"][f"public.missing_table_with_a_long_name_{i:04d}"] = {"rows": 1, "checksum": "x"}
            meta["stats"]["tables"][f'public."ドキュメントの長い名前のテーブル_{i:04d}"'] = {"rows": 1, "checksum": "x"}

    rewrite_metadata(ds, "ds", many)

    run = verify(runner, ds, "ds")

    assert run.returncode == 8
    assert run.result["mismatched"] == 600
    assert 0 < len(run.result["mismatches"]) < 600
    assert len(json.dumps(run.result, ensure_ascii=False).encode()) < 4096  # fits a termination message


def test_verify_refuses_binaries_older_than_the_backup(runner: ScriptRunner, ds: Path) -> None:
    rewrite_metadata(ds, "ds", lambda m: m.update(pg_dump_version="pg_dump (PostgreSQL) 99.1"))

    run = verify(runner, ds, "ds")

    assert run.returncode == 2
    assert "needs PostgreSQL 99 or newer" in run.result["message"]
