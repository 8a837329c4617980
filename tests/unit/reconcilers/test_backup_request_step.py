"""reconcilers/backup_request.py on the fake cluster: the backup taken before a piece of work is requested
once (announced BackupRequested), then only looked at: a second call returns the same name and its phase
without a second create, and a cache that has not seen it yet gets AlreadyExists, not a second backup."""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster, sampledb

from sampledb_operator.decide.backups import pre_work_backup_name
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.backup_request import ensure_backup


def database(cluster: FakeCluster) -> SampleDB:
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb()))


async def test_the_backup_is_requested_once_and_then_only_looked_at() -> None:
    cluster = FakeCluster()
    db = database(cluster)
    name, phase = await ensure_backup(cluster.ctx, db, reason="pre-upgrade", token="17.2")
    assert (name, phase) == (pre_work_backup_name(db, "pre-upgrade", "17.2"), None)
    stored = cluster.get("SampleDBBackup", name)
    assert stored is not None
    assert stored["spec"] == {"database": "orders", "reason": "pre-upgrade", "storage": {"claimName": "orders-backups"}}
    assert stored["metadata"]["labels"]["sampledb.io/database"] == "orders"
    assert cluster.recorder.events == [("Normal", "BackupRequested", f"pre-upgrade backup {name} requested")]

    cluster.writes.clear()
    assert await ensure_backup(cluster.ctx, db, reason="pre-upgrade", token="17.2") == (name, None)
    cluster.set_status("SampleDBBackup", name, {"phase": "Running"})
    assert await ensure_backup(cluster.ctx, db, reason="pre-upgrade", token="17.2") == (name, "Running")
    assert cluster.written() == []
    assert len(cluster.recorder.events) == 1
    assert len(cluster.of_kind("SampleDBBackup")) == 1


async def test_another_piece_of_work_gets_another_backup() -> None:
    cluster = FakeCluster()
    db = database(cluster)
    first, _ = await ensure_backup(cluster.ctx, db, reason="pre-upgrade", token="17.2")
    second, _ = await ensure_backup(cluster.ctx, db, reason="pre-migration", token="digest")
    assert first != second
    assert sorted(b["metadata"]["name"] for b in cluster.of_kind("SampleDBBackup")) == sorted([first, second])


async def test_a_stale_cache_never_makes_a_second_backup_nor_a_second_event() -> None:
    cluster = FakeCluster()
    db = database(cluster)
    cluster.freeze_cache()
    name, _ = await ensure_backup(cluster.ctx, db, reason="pre-migration", token="abc")
    assert await ensure_backup(cluster.ctx, db, reason="pre-migration", token="abc") == (name, None)
    assert cluster.written() == [("create", "SampleDBBackup", name), ("create", "SampleDBBackup", name)]
    assert len(cluster.of_kind("SampleDBBackup")) == 1
    assert cluster.recorder.reasons() == ["BackupRequested"]
