"""The archive across a failover whose old primary had not archived its last segments, on real PostgreSQL
and a real S3 server (the fixtures and helpers of test_dataplane_archive.py).

A standby that streams marks every complete segment it receives as archived (.done) when archive_mode is
on; promotion archives only the new timeline's history file and the old timeline's last, partial segment.
Segments the old primary wrote and streamed but never archived would be a hole in the archive: a recovery
from a base backup of the old timeline stops at the hole. archive-wal.sh fills it from the new primary
when it archives the new timeline's history file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pg_harness import ScriptRunner, as_postgres
from test_dataplane_archive import (
    BUCKET,
    SCHEMA,
    Archiving,
    Store,
    archiving,
    barman_bin,
    base_backup,
    check_recovered,
    clone_standby,
    fingerprint,
    recover,
    store,
    wait_until,
    write_batch,
)

pytestmark = pytest.mark.postgres
__all__ = ["archiving", "barman_bin", "store"]  # fixtures


def wal_names(store: Store, prefix: str) -> set[str]:
    return {k.rsplit("/", 1)[1].removesuffix(".gz") for k in store.keys(f"{prefix}/wals/")}


def test_segments_the_old_primary_never_archived_are_archived_by_the_new_one(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_root: Path, pg_bindir: Path
) -> None:
    primary = archiving(store.env("hole", "db", pg_bindir), pg_bindir)
    with primary.connect() as conn:
        conn.execute(SCHEMA)
        write_batch(conn, 1)
    run = base_backup(runner, primary, "before")
    assert run.returncode == 0, run.stderr
    primary.wait_archived(primary.switch())
    standby = clone_standby(primary, pg_root, pg_bindir)
    replica = Archiving(standby, runner.dir)
    replica.start(primary.env)
    try:
        # the primary's archiver falls behind: three complete segments and a part of a fourth are
        # streamed to the standby and never archived by the primary
        with primary.connect() as conn:
            conn.execute("ALTER SYSTEM SET archive_command = 'false'")
            conn.execute("SELECT pg_reload_conf()")
        unarchived = []
        for batch in (2, 3, 4):
            with primary.connect() as conn:
                write_batch(conn, batch)
            unarchived.append(primary.switch())
        with primary.connect() as conn:
            conn.execute("SET synchronous_commit = on")  # flushed, so streamed, when it returns
            write_batch(conn, 5)
            expected_tl1 = fingerprint(conn)
            lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert lsn is not None
        wait_until(lambda: replica.value(f"SELECT pg_last_wal_replay_lsn() >= '{lsn[0]}'") is True, 30, "replay")
        assert not wal_names(store, "hole/db") & set(unarchived)
        as_postgres([str(pg_bindir / "pg_ctl"), "-D", str(primary.server.datadir), "-m", "immediate", "stop"])
        assert replica.value("SELECT pg_promote()") is True
        with replica.connect() as conn:
            assert fingerprint(conn) == expected_tl1
            write_batch(conn, 6)
            expected = fingerprint(conn)
        wal = replica.switch()
        assert wal.startswith("00000002")
        replica.wait_archived(wal)
        names = wal_names(store, "hole/db")
        assert set(unarchived) <= names, sorted(names)
        # the whole log: the checkpoints of a loaded machine can push the line out of any fixed tail
        assert "segment(s) of timeline 1 streamed here but not in" in replica.log_tail(1_000_000)
        run, pgdata = recover(runner, pg_root, primary)
        assert run.returncode == 0, run.stderr
        check_recovered(pgdata, pg_bindir, expected)

        # a hole of two segments before the timeline's end: the segment after the first missing one is
        # missing too, but the store holds the old timeline's partial segment and the new timeline's
        for wal in unarchived[1:]:
            store.client().delete_object(Bucket=BUCKET, Key=store.wal_key("hole", "db", wal))
        gap, _ = recover(runner, pg_root, primary)
        assert gap.returncode == 6, gap.stderr
        assert f"has a gap: WAL file {unarchived[1]} is missing but " in gap.result["message"], gap.result
    finally:
        standby.stop()
