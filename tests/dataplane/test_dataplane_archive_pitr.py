"""Point-in-time recovery to each kind of target, and retention, on real PostgreSQL and a real S3 server (the
fixtures and helpers of test_dataplane_archive.py; apart so that the suite's workers share the long tests)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pg_harness import ScriptRunner
from test_dataplane_archive import (
    BUCKET,
    NEEDS_18,
    SCHEMA,
    Archiving,
    Store,
    archiving,
    assert_nothing_secret,
    assert_secrets_absent,
    barman_bin,
    base_backup,
    bins,
    check_recovered,
    fingerprint,
    now_utc,
    recover,
    store,
    write_batch,
)

pytestmark = pytest.mark.postgres
__all__ = ["archiving", "barman_bin", "store"]  # fixtures


def make_old(store: Store, server_prefix: str, backup_id: str, days: float) -> None:
    """Set the end_time in a backup's backup.info in the store to ``days`` ago: the age barman's
    recovery window reads."""
    client = store.client()
    key = f"{server_prefix}/base/{backup_id}/backup.info"
    text = client.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    when = datetime.now(UTC) - timedelta(days=days)
    text, count = re.subn(r"(?m)^end_time=.*$", f"end_time={when.isoformat(sep=' ')}", text)
    assert count == 1, text
    client.put_object(Bucket=BUCKET, Key=key, Body=text.encode())


def wal_segments(store: Store, server_prefix: str) -> list[str]:
    """The WAL segments (not history or backup label files) in the store, by name."""
    names = (k.rsplit("/", 1)[1] for k in store.keys(f"{server_prefix}/wals/"))
    return sorted(n[:24] for n in names if re.fullmatch(r"[0-9A-F]{24}\.gz", n))


@dataclass
class History:
    """A source's history: two base backups and three batches, with the points to recover to."""

    src: Archiving
    before_backups: str
    base_1_end_lsn: str
    time_1: str
    lsn_2: str
    after: dict[int, dict[str, tuple[int, str]]]


def make_history(store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], major: int) -> History:
    """Base backup base-1, batch 1, time_1, base-2, batch 2, restore point after-batch-2 and lsn_2,
    batch 3, its segment archived. A recovery to time_1 needs base-1 (base-2 ended after it)."""
    bindir = bins(major)
    prefix = f"pitr-{major}"
    src = archiving(store.env(prefix, "src", bindir), bindir)
    after = {}
    with src.connect() as conn:
        conn.execute(SCHEMA)
        before_backups = now_utc(conn)
    first = base_backup(runner, src, "base-1")
    assert first.returncode == 0, first.stderr
    res = first.result
    assert res["ok"] is True and res["outcome"] == "created" and res["name"] == "base-1"
    assert set(res) >= {"backupId", "beginWal", "endWal", "beginLsn", "endLsn", "beginTime", "endTime",
                        "timeline", "sizeBytes"}  # fmt: skip
    assert res["timeline"] == 1 and res["sizeBytes"] > 1_000_000 and res["fromStandby"] is False
    assert res["endWalArchived"] is True
    assert res["beginWal"] <= res["endWal"] and res["beginTime"] <= res["endTime"]
    # lz4 by default (the recoveries below read it); base-2 in gzip, so they read both
    assert [k.rsplit("/", 1)[-1] for k in store.keys(f"{prefix}/src/base/{res['backupId']}/")
            if "data.tar" in k] == ["data.tar.lz4"]
    again = base_backup(runner, src, "base-1")  # a retried Job: reported, not taken twice
    assert again.returncode == 0 and again.result["outcome"] == "exists"
    assert again.result["backupId"] == res["backupId"]

    with src.connect() as conn:
        write_batch(conn, 1)
        after[1] = fingerprint(conn)
        time_1 = now_utc(conn)
    second = base_backup(runner, src, "base-2", SAMPLEDB_BACKUP_COMPRESSION="gzip")
    assert second.returncode == 0, second.stderr
    assert second.result["endTime"] > time_1
    with src.connect() as conn:
        write_batch(conn, 2)
        after[2] = fingerprint(conn)
        conn.execute("SELECT pg_create_restore_point('after-batch-2')")
        # the insert position: with synchronous_commit off, pg_current_wal_lsn() (written) may lag
        lsn_2 = str(conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0])  # type: ignore[index]
        write_batch(conn, 3)
        after[3] = fingerprint(conn)
    src.wait_archived(src.switch())  # the last segment too, for the end of the archive
    assert after[1] != after[2] != after[3]
    keys = store.keys(f"{prefix}/src/")
    assert any(k.startswith(f"{prefix}/src/wals/") and k.endswith(".gz") for k in keys)
    assert sum(k.endswith("/backup.info") for k in keys) == 2
    return History(src, before_backups, res["endLsn"], time_1, lsn_2, after)



@pytest.mark.parametrize("major", [15, pytest.param(18, marks=NEEDS_18)])
def test_point_in_time_recovery_to_each_kind_of_target(
    major: int, store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_root: Path
) -> None:
    bindir = bins(major)
    history = make_history(store, runner, archiving, major)
    src, after = history.src, history.after

    cases: list[tuple[dict[str, str], dict[str, tuple[int, str]], str]] = [
        ({"SAMPLEDB_RECOVERY_TARGET_TIME": history.time_1}, after[1], "base-1"),
        ({"SAMPLEDB_RECOVERY_TARGET_NAME": "after-batch-2"}, after[2], "base-2"),
        # the backup for a restore point chosen by an LSN (verify-archive.sh's): the older one reaches it too
        ({"SAMPLEDB_RECOVERY_TARGET_NAME": "after-batch-2",
          "SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN": history.base_1_end_lsn}, after[2], "base-1"),
        ({"SAMPLEDB_RECOVERY_TARGET_LSN": history.lsn_2}, after[2], "base-2"),
        ({}, after[3], "base-2"),
    ]
    for settings, expected, backup_name in cases:
        run, pgdata = recover(runner, pg_root, src, **settings)
        assert run.returncode == 0, f"{settings}: {run.stderr}"
        assert run.result["ok"] is True and run.result["backupName"] == backup_name, run.result
        assert run.result["timeline"] > 1
        lines = [line for line in run.stderr.splitlines() if line.startswith("sampledb-recover:")]
        assert any("restored backup" in line and " s" in line for line in lines), run.stderr
        assert any("replayed to" in line and "promoted on timeline" in line for line in lines), run.stderr
        assert_secrets_absent(store, run.stdout, run.stderr)
        timeline = check_recovered(pgdata, bindir, expected)
        print(f"\n[{major}: recovery to {settings or 'the end'}] restore {run.result['restoreSeconds']} s,"
              f" replay {run.result['replaySeconds']} s, timeline {timeline}")  # fmt: skip

    too_early, pgdata = recover(runner, pg_root, src, SAMPLEDB_RECOVERY_TARGET_TIME=history.before_backups)
    assert too_early.returncode == 2
    assert "no base backup of src ended at or before the target time" in too_early.result["message"]
    assert "base-1" in too_early.result["message"]  # names the oldest backup and when it ended
    assert not pgdata.exists()
    assert_nothing_secret(too_early)



def assert_catalog(res: dict[str, Any], ids: list[str]) -> None:
    """The result lists the store's completed backups, newest first, and the oldest one's end."""
    catalog = res["catalog"]
    assert catalog["count"] == len(ids)
    assert [b["id"] for b in catalog["newest"]] == ids
    assert catalog["newest"][0]["name"] == res["name"] and catalog["newest"][0]["size"] > 0
    assert catalog["oldestEnd"] == catalog["newest"][-1]["end"]


def test_retention_deletes_backups_outside_the_recovery_window_and_the_wal_only_they_need(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_root: Path, pg_bindir: Path
) -> None:
    """base-1 made 3 days old, base-2 2 days old, base-3 now with SAMPLEDB_RETENTION=1d: a recovery to
    any time of the last day needs base-2 (the newest that ended before the window) and base-3, so
    base-1 goes, with the WAL before base-2's start; a recovery from base-2 still holds every row."""
    src = archiving(store.env("retain", "db", pg_bindir), pg_bindir)
    with src.connect() as conn:
        conn.execute(SCHEMA)
    made = {}
    for n, age in ((1, 3), (2, 2)):
        with src.connect() as conn:
            write_batch(conn, n)
        src.wait_archived(src.switch())
        run = base_backup(runner, src, f"base-{n}")
        assert run.returncode == 0, run.stderr
        made[n] = run.result
        make_old(store, "retain/db", run.result["backupId"], age)
    with src.connect() as conn:
        write_batch(conn, 3)
    src.wait_archived(src.switch())
    kept_from = made[2]["beginWal"]
    before = wal_segments(store, "retain/db")
    assert before[0] < kept_from  # WAL that only base-1 needs

    run = base_backup(runner, src, "base-3", SAMPLEDB_RETENTION="1d")

    assert run.returncode == 0, run.stderr
    res = run.result
    assert res["retention"] == "RECOVERY WINDOW OF 1 DAYS" and "retentionError" not in res, res
    assert res["deletedBackups"] == [made[1]["backupId"]]
    assert f"deleted 1 backup ({made[1]['backupId']})" in res["message"]
    assert_catalog(res, [res["backupId"], made[2]["backupId"]])  # what the store holds after the retention
    infos = sorted(k for k in store.keys("retain/db/base/") if k.endswith("/backup.info"))
    assert infos == sorted(f"retain/db/base/{b}/backup.info" for b in (made[2]["backupId"], res["backupId"]))
    assert store.keys(f"retain/db/base/{made[1]['backupId']}/") == []
    after = wal_segments(store, "retain/db")
    assert after and after[0] >= kept_from  # the WAL before the oldest kept backup is gone
    assert {w for w in before if w >= kept_from} <= set(after)  # what base-2 and base-3 need stays

    with src.connect() as conn:
        write_batch(conn, 4)
        expected = fingerprint(conn)
    src.wait_archived(src.switch())
    recovered, pgdata = recover(runner, pg_root, src, SAMPLEDB_RECOVERY_BACKUP="base-2")
    assert recovered.returncode == 0, recovered.stderr
    check_recovered(pgdata, pg_bindir, expected)

    # a retention run that fails (a backup.info barman cannot read) leaves the new backup standing
    store.client().put_object(Bucket=BUCKET, Key="retain/db/base/20000101T000000/backup.info", Body=b"unreadable\n")
    again = base_backup(runner, src, "base-4", SAMPLEDB_RETENTION="1d")
    assert again.returncode == 0, again.stderr
    assert again.result["outcome"] == "created" and "retention" not in again.result, again.result
    assert "20000101T000000" in again.result["retentionError"], again.result
    assert "warning: retention RECOVERY WINDOW OF 1 DAYS failed (the backup stands)" in again.stderr
    assert_secrets_absent(store, again.stdout, again.stderr, json.dumps(again.result))

    keys = store.keys("retain/")
    for bad in ("7", "7y", "0d", "1 d", "d", "10000d"):
        refused = base_backup(runner, src, "base-5", SAMPLEDB_RETENTION=bad)
        assert refused.returncode == 2, refused.stderr
        assert "invalid SAMPLEDB_RETENTION" in refused.result["message"]
    assert store.keys("retain/") == keys  # refused before any backup


