"""backup.sh's copies in the object store and restore.sh from them, on real PostgreSQL and a real S3 server
(versitygw with TLS: the fixtures of test_dataplane_archive.py).

Judged by data: the objects listed with boto3, the restored database's fingerprint against the source's, and
what a damaged or missing copy makes restore.sh answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pg_dataset
import pytest
from pg_harness import PASSWORD, PgServer, ScriptRun, ScriptRunner, private_dir
from test_dataplane_archive import BUCKET, Store, barman_bin, store

pytestmark = pytest.mark.postgres
__all__ = ["barman_bin", "store"]  # fixtures


@pytest.fixture(scope="module")
def target_server(pg_server_factory: Callable[..., PgServer]) -> PgServer:
    """A second server to restore into."""
    return pg_server_factory()


def store_env(store: Store, runner: ScriptRunner, prefix: str, server: str = "orders", **extra: str) -> dict[str, str]:
    """The store settings for a server of the runner's PostgreSQL."""
    return store.env(prefix, server, runner.bindir, **extra)


def backup(runner: ScriptRunner, env: dict[str, str], folder: Path, name: str, **extra: str) -> ScriptRun:
    return runner.run("backup.sh", {**env, "BACKUP_DIR": str(folder), "BACKUP_NAME": name, **extra})


def restore(runner: ScriptRunner, store: Store, into: tuple[PgServer, str], *, folder: Path, name: str,
            prefix: str, source: str = "orders") -> ScriptRun:
    server, database = into
    return runner.run("restore.sh", {**server.libpq_env(database), **store_env(store, runner, prefix, source),
                                     "RESTORE_FROM_STORE": "1", "BACKUP_DIR": str(folder), "BACKUP_NAME": name})


def test_backup_is_copied_and_restored_from_the_store_alone(
    runner: ScriptRunner, store: Store, dataset_env: dict[str, str], dataset_fingerprint: dict[str, Any],
    target_server: PgServer, *, work_dir: Path,
) -> None:
    made = backup(runner, {**dataset_env, **store_env(store, runner, "copies")}, work_dir, "nightly-1",
                  BACKUP_REASON="scheduled")

    assert made.returncode == 0, made.stderr
    assert made.result["store"] == f"s3://{BUCKET}/copies/orders/logical/scheduled/nightly-1.dump"
    keys = store.keys("copies/orders/logical/")
    assert keys == [f"copies/orders/logical/scheduled/nightly-1.{s}" for s in ("dump", "globals.sql", "json")]
    dump = store.client().get_object(Bucket=BUCKET, Key="copies/orders/logical/scheduled/nightly-1.dump")
    assert dump["ContentLength"] == (work_dir / "nightly-1.dump").stat().st_size
    # Only the store is left: the volume's files are gone, a scratch folder receives the copy.
    for path in work_dir.iterdir():
        path.unlink()
    scratch = private_dir(work_dir, prefix="scratch-")
    target = target_server.create_database("from_store")

    run = restore(runner, store, (target_server, target), folder=scratch, name="nightly-1", prefix="copies")

    assert run.returncode == 0, run.stderr
    with target_server.connect(target) as conn:
        assert pg_dataset.fingerprint(conn) == dataset_fingerprint
    assert pg_dataset.total_rows(dataset_fingerprint) >= pg_dataset.MIN_ROWS
    everything = made.stdout + made.stderr + run.stdout + run.stderr + json.dumps(made.result)
    assert PASSWORD not in everything and store.secret_key not in everything and store.access_key not in everything


def test_rerun_copies_an_existing_backup_without_dumping_again(
    runner: ScriptRunner, store: Store, dataset_env: dict[str, str], work_dir: Path,
) -> None:
    local = backup(runner, dataset_env, work_dir, "late")
    assert local.returncode == 0 and "store" not in local.result
    mtime = (work_dir / "late.dump").stat().st_mtime_ns

    again = backup(runner, {**dataset_env, **store_env(store, runner, "rerun")}, work_dir, "late")

    assert again.returncode == 0, again.stderr
    assert again.result["outcome"] == "exists"
    assert (work_dir / "late.dump").stat().st_mtime_ns == mtime
    assert store.keys("rerun/orders/logical/manual/") == [f"rerun/orders/logical/manual/late.{s}"
                                                            for s in ("dump", "globals.sql", "json")]


def test_copies_beyond_the_kept_number_are_pruned_per_reason(
    runner: ScriptRunner, store: Store, db_env: dict[str, str], work_dir: Path,
) -> None:
    env = {**db_env, **store_env(store, runner, "prune")}
    assert backup(runner, env, work_dir, "by-hand", BACKUP_REASON="manual").returncode == 0
    for n in range(1, 5):
        run = backup(runner, env, work_dir, f"sched-{n}", BACKUP_REASON="scheduled", BACKUP_STORE_KEEP="2")
        assert run.returncode == 0, run.stderr  # taken in order: by modification time, then name

    assert run.result["store_pruned"] == 1
    names = {k.rsplit("/", 1)[1].split(".", 1)[0] for k in store.keys("prune/orders/logical/scheduled/")}
    assert names == {"sched-3", "sched-4"}
    assert store.keys("prune/orders/logical/manual/") == [f"prune/orders/logical/manual/by-hand.{s}"
                                                            for s in ("dump", "globals.sql", "json")]


def test_a_damaged_copy_is_refused_and_the_target_untouched(
    runner: ScriptRunner, store: Store, db_env: dict[str, str], target_server: PgServer, work_dir: Path,
) -> None:
    env = {**db_env, **store_env(store, runner, "damaged")}
    assert backup(runner, env, work_dir, "bad").returncode == 0
    key = "damaged/orders/logical/manual/bad.dump"
    client = store.client()
    body = bytearray(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0xFF
    client.put_object(Bucket=BUCKET, Key=key, Body=bytes(body))
    target = target_server.create_database("damaged_target")
    with target_server.connect(target) as conn:
        conn.execute("CREATE TABLE keep_me (id int); INSERT INTO keep_me VALUES (1)")
    scratch = private_dir(work_dir, prefix="scratch-")

    run = restore(runner, store, (target_server, target), folder=scratch, name="bad", prefix="damaged")

    assert run.returncode == 4, run.stderr
    assert "checksum mismatch for bad.dump" in run.result["message"]
    with target_server.connect(target) as conn:
        assert conn.execute("SELECT count(*) FROM keep_me").fetchone() == (1,)


def test_missing_copies_and_missing_dumps_say_which(
    runner: ScriptRunner, store: Store, db_env: dict[str, str], target_server: PgServer, work_dir: Path,
) -> None:
    assert backup(runner, {**db_env, **store_env(store, runner, "missing")}, work_dir, "half").returncode == 0
    store.client().delete_object(Bucket=BUCKET, Key="missing/orders/logical/manual/half.dump")
    target = target_server.create_database("missing_target")
    scratch = private_dir(work_dir, prefix="scratch-")

    absent = restore(runner, store, (target_server, target), folder=scratch, name="never-taken", prefix="missing")
    half = restore(runner, store, (target_server, target), folder=scratch, name="half", prefix="missing")
    other = restore(runner, store, (target_server, target), folder=scratch, name="half", prefix="missing",
                    source="someone-else")

    assert absent.returncode == 2
    assert absent.result["message"] == (f"backup never-taken not found in the object store under s3://{BUCKET}/missing"
                                        "/orders/logical/")
    assert half.returncode == 4
    assert half.result["message"] == "backup half in the object store is incomplete: half.dump is missing"
    assert other.returncode == 2


def test_a_store_refusing_the_copy_fails_the_backup_and_keeps_the_files(
    runner: ScriptRunner, store: Store, db_env: dict[str, str], work_dir: Path,
) -> None:
    wrong = {**store_env(store, runner, "refused"), "AWS_SECRET_ACCESS_KEY": "not-the-key-" + "x" * 20}

    run = backup(runner, {**db_env, **wrong}, work_dir, "refused")
    again = backup(runner, {**db_env, **store_env(store, runner, "refused")}, work_dir, "refused")

    assert run.returncode == 1
    assert run.result["message"].startswith(f"copy of backup refused to the object store s3://{BUCKET}/refused failed"
                                            " (the backup is on the volume): ")
    assert "not-the-key" not in run.result["message"] + run.stderr
    assert sorted(p.name for p in work_dir.iterdir()) == ["refused.dump", "refused.globals.sql", "refused.json"]
    assert again.returncode == 0, again.stderr
    assert again.result["outcome"] == "exists"
    assert len(store.keys("refused/orders/logical/manual/")) == 3
