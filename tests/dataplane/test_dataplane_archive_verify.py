"""verify-archive.sh on real PostgreSQL and a real S3 server: a restore point made on a live primary,
its WAL waited for in the store, a copy restored to it by recover.sh and compared with the
statistics of the point's snapshot.

The store, the archiving servers, base backups and batches of rows are those of
test_dataplane_archive.py (its fixtures and helpers, imported). The primaries archive with a short
archive_timeout so that the point's segment reaches the store within seconds. Everything is judged
by data: the tests recover the same restore point themselves and count the rows there, damage the
store's objects with boto3, and hold locks from their own sessions.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import test_dataplane_archive as archive_tests
from pg_harness import PASSWORD, ScriptRun, ScriptRunner, free_port
from test_dataplane_archive import (
    BUCKET,
    NEEDS_18,
    NEW_PASSWORD,
    SCHEMA,
    Archiving,
    Store,
    assert_nothing_secret,
    assert_secrets_absent,
    base_backup,
    bins,
    connect_as,
    recover,
    recovered_server,
    write_batch,
)

pytestmark = pytest.mark.postgres

# the archive tests' fixtures, used here too: the S3 server (one per module), barman-cloud for the
# postgres user, and servers that archive
store = archive_tests.store
barman_bin = archive_tests.barman_bin
archiving = archive_tests.archiving

ARCHIVE_TIMEOUT_S = 5
ARCHIVE_SLACK_S = 5  # the archiver's latency: barman-cloud-wal-archive's start and upload, the poll
EXTRA_SQL = """
CREATE TABLE progress (n int NOT NULL);
INSERT INTO progress VALUES (0);
CREATE UNLOGGED TABLE scratch (id int);
INSERT INTO scratch SELECT generate_series(1, 10);
SELECT lo_from_bytea(0, 'a large object');
"""


def archiving_source(store: Store, archiving: Callable[..., Archiving], prefix: str, major: int) -> Archiving:
    """A primary archiving to ``prefix`` with a short archive_timeout, holding SCHEMA and batch 1."""
    bindir = bins(major)
    src: Archiving = archiving(store.env(prefix, "src", bindir), bindir)
    with src.connect() as conn:
        conn.execute(f"ALTER SYSTEM SET archive_timeout = '{ARCHIVE_TIMEOUT_S}s'")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute(SCHEMA)
        write_batch(conn, 1)
    return src


def verify_archive(runner: ScriptRunner, store: Store, src: Archiving, point: str, **extra: str) -> ScriptRun:
    env = {**src.env, **src.server.libpq_env(), "SAMPLEDB_VERIFY_POINT": point, **extra}
    run = runner.run("verify-archive.sh", env)
    assert_nothing_secret(run)
    assert_secrets_absent(store, run.stdout, run.stderr, json.dumps(run.result))
    return run


def table_counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Row counts of every ordinary table outside the system schemas (the statistics' tables)."""
    names = [
        str(row[0])
        for row in conn.execute(
            "SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND c.relpersistence <> 't' AND n.nspname <> 'information_schema'"
            " AND n.nspname !~ '^pg_'"
        ).fetchall()
    ]
    counts = {}
    for name in names:
        row = conn.execute(f"SELECT count(*) FROM {name}").fetchone()
        assert row is not None
        counts[name] = int(row[0])
    return counts


def recovered_counts(
    runner: ScriptRunner, pg_root: Path, src: Archiving, point: str, major: int
) -> tuple[dict[str, int], tuple[int, int], int]:
    """recover.sh to restore point ``point`` (the test's own recovery): every table's row count, the
    writer's items (count, highest id) and progress.n there."""
    run, pgdata = recover(runner, pg_root, src, SAMPLEDB_RECOVERY_TARGET_NAME=point)
    assert run.returncode == 0, run.stderr
    copy = recovered_server(pgdata, bins(major))
    copy.start()
    try:
        with connect_as(copy, NEW_PASSWORD) as conn:
            counts = table_counts(conn)
            live = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM items WHERE batch = 0").fetchone()
            progress = conn.execute("SELECT n FROM progress").fetchone()
    finally:
        copy.stop()
    assert live is not None and progress is not None
    return counts, (int(live[0]), int(live[1])), int(progress[0])


class Writer(threading.Thread):
    """A client that keeps inserting and updating rows, one transaction at a time: a new item
    (id = the transaction's number), an update of a batch-1 item, and progress.n = that number.
    Records the longest a transaction took."""

    def __init__(self, conninfo: str) -> None:
        super().__init__(daemon=True)
        self.conninfo = conninfo
        self.halt = threading.Event()
        self.commits = 0
        self.longest = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                while not self.halt.is_set():
                    k = self.commits + 1
                    began = time.monotonic()
                    with conn.transaction():
                        conn.execute("INSERT INTO items (id, batch, note) VALUES (%s, 0, 'live ' || %s)", (k, k))
                        conn.execute("UPDATE items SET note = note || '+' WHERE id = %s", (100001 + k % 500,))
                        conn.execute("UPDATE progress SET n = %s", (k,))
                    self.longest = max(self.longest, time.monotonic() - began)
                    self.commits = k
                    time.sleep(0.005)  # a steady load, not a flood: the 2-core host also runs the archiver
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        self.halt.set()
        self.join(30)
        if self.error is not None:
            raise AssertionError(f"the writer failed: {self.error}")


# ---- success, with a client writing throughout


@pytest.mark.parametrize("major", [15, pytest.param(18, marks=NEEDS_18)])
def test_verification_while_a_client_writes_matches_the_recovered_point(
    major: int, store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_root: Path
) -> None:
    src = archiving_source(store, archiving, f"va-{major}", major)
    with src.connect() as conn:
        conn.execute(EXTRA_SQL)
    made = base_backup(runner, src, "base-1")
    assert made.returncode == 0, made.stderr

    writer = Writer(src.server.conninfo())
    writer.start()
    try:
        wait_for = time.monotonic() + 30
        while writer.commits < 50 and time.monotonic() < wait_for:
            time.sleep(0.1)  # poll interval; the loop re-checks the writer's progress
        before = writer.commits
        started = time.monotonic()
        run = verify_archive(runner, store, src, f"va-{major}-point")
        took = time.monotonic() - started
        during = writer.commits - before
    finally:
        writer.stop()

    assert run.returncode == 0, run.stderr + json.dumps(run.result)
    res = run.result
    assert res["outcome"] == "verified" and res["point"] == f"va-{major}-point" and res["attempts"] == 1
    assert res["backupName"] == "base-1" and res["backupId"] == made.result["backupId"]
    assert res["walFile"][:8] == "00000001" and res["timeline"] == 1
    assert res["pointTime"].endswith("Z") and "/" in res["pointLsn"]
    assert 0 <= res["archivedSeconds"] <= ARCHIVE_TIMEOUT_S + ARCHIVE_SLACK_S, res
    assert res["rtoSeconds"] > 0 and res["rtoSeconds"] >= res["restoreSeconds"] + res["replaySeconds"]
    assert res["lockedSeconds"] < 2, res  # writes to the tables waited only for the locks and the point
    assert writer.longest < 5, writer.longest  # the default lock timeout; in practice far less
    assert during > 0  # the client wrote while the verification ran
    assert res["mismatched"] == 0 and res["mismatches"] == []
    assert res["unloggedTables"] == 1 and res["largeObjects"] == 1
    assert f"restore point va-{major}-point" in res["message"] and "matches" in res["message"]
    assert list(runner.work.glob("sdb-va.*")) == []  # the copy is gone
    print(f"\n[{major}: verify-archive] {took:.1f} s: archived {res['archivedSeconds']} s after the point,"
          f" restore {res['restoreSeconds']} s, replay {res['replaySeconds']} s, RTO {res['rtoSeconds']} s,"
          f" locks held {res['lockedSeconds']} s; {during} client transactions meanwhile")  # fmt: skip

    # the test's own recovery to the same restore point: the same tables and rows
    counts, live, progress = recovered_counts(runner, pg_root, src, res["point"], major)
    assert counts["public.scratch"] == 0  # unlogged: empty after any recovery
    assert res["tables"] == len(counts) == 4
    assert res["rows"] == sum(counts.values())
    assert live[0] == live[1] == progress  # a transaction boundary: every item up to n, nothing after
    assert 0 < progress < writer.commits  # writes before the point are in, those after it are not


# ---- the archive is damaged


def test_a_missing_or_damaged_segment_fails_the_restore_and_names_it(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving]
) -> None:
    src = archiving_source(store, archiving, "va-gap", 15)
    made = base_backup(runner, src, "base-1")
    assert made.returncode == 0, made.stderr
    segments = []
    for batch in (2, 3):
        with src.connect() as conn:
            write_batch(conn, batch)
        segments.append(src.switch())
    src.wait_archived(segments[-1])
    gap, other = segments
    key = store.wal_key("va-gap", "src", gap)
    client = store.client()
    client.delete_object(Bucket=BUCKET, Key=key)

    run = verify_archive(runner, store, src, "gap-missing")

    assert run.returncode == 6, run.stderr + json.dumps(run.result)
    res = run.result
    assert res["check"] == "restore" and res["point"] == "gap-missing" and res["backupName"] == "base-1"
    assert f"WAL file {gap} is not in the archive" in res["message"], res
    assert {"pointLsn", "pointTime", "walFile", "archivedSeconds", "backupId"} <= set(res)
    assert list(runner.work.glob("sdb-va.*")) == []

    # the same compressed format, other bytes: another segment's object under this one's name (any archived one:
    # under load archive_timeout may close a segment between the test's writes)
    others = sorted(k for k in store.keys("va-gap/src/wals/") if k.endswith(".gz") and k != key)
    assert others, "no other WAL segment in the store"
    other_key = store.wal_key("va-gap", "src", other)
    client.put_object(Bucket=BUCKET, Key=key, Body=client.get_object(
        Bucket=BUCKET, Key=other_key if other_key in others else others[-1])["Body"].read())  # fmt: skip
    run = verify_archive(runner, store, src, "gap-other")
    assert run.returncode == 6, run.stderr + json.dumps(run.result)
    assert run.result["check"] == "restore"
    assert f"WAL file {gap} from the archive is damaged" in run.result["message"], run.result

    client.put_object(Bucket=BUCKET, Key=key, Body=b"garbage, not a gzip stream" * 100)
    run = verify_archive(runner, store, src, "gap-garbage")
    assert run.returncode == 6, run.stderr + json.dumps(run.result)
    assert f"could not fetch WAL file {gap}" in run.result["message"], run.result


def test_a_base_backup_changed_in_the_store_is_caught_by_the_comparison(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving]
) -> None:
    """One row of items changed inside the base backup's tar (the same length: the page stays
    valid; PostgreSQL 15 initdb's default has no data checksums), a page that no WAL after the
    backup rewrites: the recovery succeeds, and the comparison finds public.items' checksum."""
    src = archiving_source(store, archiving, "va-tamper", 15)
    with src.connect() as conn:
        conn.execute("ALTER TABLE items SET (autovacuum_enabled = false)")  # no later WAL for its pages
        path = str(conn.execute("SELECT pg_relation_filepath('items')").fetchone()[0])  # type: ignore[index]
        note = str(conn.execute("SELECT note FROM items WHERE id = 100001").fetchone()[0])  # type: ignore[index]
    made = base_backup(runner, src, "base-1", SAMPLEDB_BACKUP_COMPRESSION="gzip")  # a tar this test can edit
    assert made.returncode == 0, made.stderr
    with src.connect() as conn:
        write_batch(conn, 2)  # new pages only; batch 1's stay as the backup has them

    client = store.client()
    prefix = f"va-tamper/src/base/{made.result['backupId']}/"
    tars = [k for k in store.keys(prefix) if k.endswith("data.tar.gz")]
    assert len(tars) == 1, store.keys(prefix)
    original = gzip.decompress(client.get_object(Bucket=BUCKET, Key=tars[0])["Body"].read())
    changed = io.BytesIO()
    found = 0
    with tarfile.open(fileobj=io.BytesIO(original)) as old, tarfile.open(fileobj=changed, mode="w") as new:
        for member in old.getmembers():
            data = old.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if data is not None and member.name.lstrip("./") == path:
                wrong = note[:-1] + ("0" if note[-1] != "0" else "1")
                found = data.count(note.encode())
                data = data.replace(note.encode(), wrong.encode())
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    assert found == 1, f"{path}: the row's text occurs {found} times"
    client.put_object(Bucket=BUCKET, Key=tars[0], Body=gzip.compress(changed.getvalue()))

    run = verify_archive(runner, store, src, "tampered")

    assert run.returncode == 8, run.stderr + json.dumps(run.result)
    res = run.result
    assert res["check"] == "compare" and res["mismatched"] == 1
    assert res["mismatches"] == [
        {"table": "public.items", "problem": "checksum", "expected_rows": 1000, "actual_rows": 1000}
    ]
    assert "public.items (checksum)" in res["message"]
    text = run.stdout + run.stderr + json.dumps(res, ensure_ascii=False)
    assert note not in text and "batch 1 ✓" not in text  # names and counts, never data


# ---- the point cannot be made


def test_a_lock_held_too_long_fails_the_point_and_writers_wait_only_briefly(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving]
) -> None:
    src = archiving_source(store, archiving, "va-lock", 15)
    with src.connect() as conn:
        conn.execute(EXTRA_SQL)
        conn.execute("CREATE TABLE zz_held (id int); INSERT INTO zz_held VALUES (1)")  # locked last (by name)
    writer = Writer(src.server.conninfo())
    blocker = psycopg.connect(src.server.conninfo())  # a transaction: ROW EXCLUSIVE on zz_held until rollback
    try:
        blocker.execute("UPDATE zz_held SET id = 2")
        writer.start()
        started = time.monotonic()
        run = verify_archive(runner, store, src, "locked", VERIFY_LOCK_TIMEOUT="1s", VERIFY_POINT_ATTEMPTS="2")
        took = time.monotonic() - started
    finally:
        blocker.rollback()
        blocker.close()
        writer.stop()

    print(f"\n[lock] refused in {took:.1f} s; the writer's longest transaction {writer.longest:.2f} s,"
          f" {writer.commits} transactions")  # fmt: skip
    assert run.returncode == 5, run.stderr + json.dumps(run.result)
    res = run.result
    assert res["check"] == "point" and res["attempts"] == 2
    assert "VERIFY_LOCK_TIMEOUT=1s" in res["message"] and "lock timeout" in res["message"], res
    assert "attempt 1:" in run.stderr  # retried once
    assert writer.commits > 0
    # the tables before zz_held were locked while the point waited: writers waited, each time for
    # about the lock timeout, never for the attempts together
    assert 0.5 < writer.longest < 2.5, writer.longest
    assert took < 30
    with src.connect() as conn:  # nothing is left locked or open
        assert conn.execute("SELECT count(*) FROM pg_locks WHERE mode = 'ShareLock' AND locktype = 'relation'"
                            ).fetchone() == (0,)  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "message", "code"),
    [
        ({"SAMPLEDB_VERIFY_POINT": ""}, "missing required setting SAMPLEDB_VERIFY_POINT", 2),
        ({"SAMPLEDB_VERIFY_POINT": "p" * 64}, "invalid SAMPLEDB_VERIFY_POINT", 2),
        ({"SAMPLEDB_VERIFY_POINT": "with space"}, "invalid SAMPLEDB_VERIFY_POINT", 2),
        ({"VERIFY_LOCK_TIMEOUT": "0"}, "invalid VERIFY_LOCK_TIMEOUT", 2),
        ({"VERIFY_POINT_ATTEMPTS": "0"}, "invalid VERIFY_POINT_ATTEMPTS", 2),
        ({"VERIFY_ARCHIVE_WAIT": "soon"}, "invalid VERIFY_ARCHIVE_WAIT", 2),
        ({"VERIFY_SCRATCH": "/nonexistent"}, "VERIFY_SCRATCH '/nonexistent' must be a writable directory", 2),
        ({"VERIFY_SCRATCH": "/tmp/" + "d" * 50}, "too long for the restored copy's Unix sockets", 2),
        ({"AWS_SECRET_ACCESS_KEY": ""}, "missing required setting AWS_SECRET_ACCESS_KEY", 2),
        ({"SAMPLEDB_S3_DESTINATION": "bucket"}, "invalid SAMPLEDB_S3_DESTINATION", 2),
        ({"PGHOST": "127.0.0.1", "PGPORT": "closed"}, "cannot connect to the database", 9),
    ],
)  # fmt: skip
def test_bad_settings_are_refused(
    *, store: Store, runner: ScriptRunner, pg_bindir: Path, settings: dict[str, str], message: str, code: int
) -> None:
    env = {
        **store.env("va-bad", "src", pg_bindir),
        "PGHOST": "192.0.2.1", "PGPORT": "1", "PGUSER": "nobody", "PGPASSWORD": PASSWORD, "PGDATABASE": "nowhere",
        "PGCONNECT_TIMEOUT": "2", "SAMPLEDB_VERIFY_POINT": "bad-settings",
        **settings,
    }  # fmt: skip
    if settings.get("PGPORT") == "closed":
        env["PGPORT"] = str(free_port())
    run = runner.run("verify-archive.sh", env)
    assert run.returncode == code, run.stderr + json.dumps(run.result)
    assert message in run.result["message"], run.result
    assert_nothing_secret(run)
    assert_secrets_absent(store, run.stdout, run.stderr, json.dumps(run.result))
