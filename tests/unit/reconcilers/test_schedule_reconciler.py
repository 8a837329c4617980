"""reconcilers/schedule.py in the SampleDB pass, on the in-memory cluster: a scheduled SampleDBBackup
per slot (only while the database is Ready and no upgrade or migration runs), retention, the requeue at
the next slot, status.lastBackup and BackupHealthy with its Events.

The database is created at 09:00:00 with the schedule "30 * * * *": its first slot is 09:30 (the
BackupReconciler, which runs a backup, is not part of these passes: a test sets the backup's outcome).
"""

from __future__ import annotations

import pytest
from tests.support.fake_cluster import FakeCluster, condition, running_database

from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj

BACKUP = "SampleDBBackup"
HOURLY_AT_HALF_PAST = "30 * * * *"
FIRST = "orders-scheduled-20261130093000"  # the 09:30 slot's backup
SECOND = "orders-scheduled-20261130103000"
THIRD = "orders-scheduled-20261130113000"


async def scheduled_database(cluster: FakeCluster, **backup: object) -> None:
    await running_database(cluster, backup={"schedule": HOURLY_AT_HALF_PAST, **backup})
    assert cluster.of_kind(BACKUP) == []  # 09:00 is before the first slot: nothing is backfilled


def scheduled(cluster: FakeCluster) -> list[str]:
    return sorted(b["metadata"]["name"] for b in cluster.of_kind(BACKUP) if b["spec"]["reason"] == "scheduled")


def events(cluster: FakeCluster, reason: str) -> list[tuple[str, str, str]]:
    return [e for e in cluster.recorder.events if e[1] == reason]


def finish(cluster: FakeCluster, name: str, phase: str, completed: str, message: str = "") -> Obj:
    """The BackupReconciler's part: the backup's outcome."""
    status: Obj = {"phase": phase, "completedAt": completed}
    if message:
        status["message"] = message
    return cluster.set_status(BACKUP, name, status)


async def test_the_due_slot_gets_one_scheduled_backup_and_the_pass_comes_back_at_the_next_slot() -> None:
    cluster = FakeCluster()
    await scheduled_database(cluster)

    result = await cluster.reconcile("orders")
    assert result is not None and result.requeue_after == 1800.0  # 09:00 -> 09:30
    assert cluster.of_kind(BACKUP) == []

    cluster.clock.advance(1800 + 100)  # 09:31:40
    result = await cluster.reconcile("orders")

    assert scheduled(cluster) == [FIRST]
    backup = cluster.get(BACKUP, FIRST)
    assert backup is not None
    assert backup["metadata"]["annotations"] == {"sampledb.io/scheduled-for": "2026-11-30T09:30:00Z"}
    assert backup["metadata"]["labels"]["sampledb.io/database-uid"] == "uid-sampledb-orders"
    assert backup["spec"] == {"database": "orders", "reason": "scheduled",
                              "storage": {"claimName": names.backup_pvc_name("orders")}}
    assert events(cluster, "BackupScheduled") == [
        ("Normal", "BackupScheduled", f"scheduled backup {FIRST} for 2026-11-30T09:30:00Z requested")]
    assert result is not None and result.requeue_after == 3500.0  # until 10:30

    await cluster.reconcile("orders")  # a second pass in the same slot
    assert scheduled(cluster) == [FIRST]
    assert len(cluster.written("create", BACKUP)) == 1
    assert len(events(cluster, "BackupScheduled")) == 1


async def test_a_pass_on_a_stale_cache_creates_the_slot_once_and_announces_it_once() -> None:
    cluster = FakeCluster()
    await scheduled_database(cluster)
    cluster.clock.advance(1800)
    cluster.freeze_cache()

    await cluster.reconcile("orders")
    await cluster.reconcile("orders")  # the backup's watch event has not arrived: its create is refused

    assert len(cluster.written("create", BACKUP)) == 2
    assert scheduled(cluster) == [FIRST]
    assert len(events(cluster, "BackupScheduled")) == 1


@pytest.mark.parametrize("why", ["not ready", "upgrading"])
async def test_no_scheduled_backup_while_the_database_is_not_ready_or_busy(why: str) -> None:
    cluster = FakeCluster()
    await scheduled_database(cluster)
    if why == "not ready":
        cluster.set_status("StatefulSet", "orders", {"replicas": 1, "readyReplicas": 0})
    else:
        cluster.patch("SampleDB", "orders", {"spec": {"version": "17.2"}})  # a major upgrade: its backup first
        await cluster.reconcile("orders")
        assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["status"] == "True"
    cluster.clock.advance(1800)

    await cluster.reconcile("orders")
    await cluster.reconcile("orders")

    assert scheduled(cluster) == []
    assert events(cluster, "BackupScheduled") == []


async def test_retention_prunes_the_oldest_scheduled_backups_the_operator_made() -> None:
    cluster = FakeCluster()
    await scheduled_database(cluster, retention=1)
    cluster.put(BACKUP, {"metadata": {"name": "orders-mine"},  # a user's: never pruned
                         "spec": {"database": "orders", "reason": "manual"},
                         "status": {"phase": "Succeeded", "completedAt": "2026-11-30T09:10:00Z"}})
    for slot, name in ((1800, FIRST), (3600, SECOND)):
        cluster.clock.advance(slot)
        await cluster.reconcile("orders")
        finish(cluster, name, "Succeeded", cluster.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert scheduled(cluster) == [FIRST, SECOND]

    await cluster.reconcile("orders")  # FIRST is beyond retention now that SECOND succeeded

    assert scheduled(cluster) == [SECOND]
    assert cluster.get(BACKUP, "orders-mine") is not None
    assert events(cluster, "BackupPruned") == [
        ("Normal", "BackupPruned", f"deleted Succeeded scheduled backup {FIRST} (retention 1)")]

    cluster.clock.advance(3600)
    await cluster.reconcile("orders")  # the 11:30 slot's backup is new (unfinished): SECOND stays
    assert scheduled(cluster) == [SECOND, THIRD]
    assert len(events(cluster, "BackupPruned")) == 1


async def test_last_backup_and_backup_healthy_follow_the_finished_backups() -> None:
    cluster = FakeCluster()
    await scheduled_database(cluster)
    cluster.clock.advance(1800)
    await cluster.reconcile("orders")
    health = condition(cluster.get("SampleDB", "orders"), "BackupHealthy")
    assert (health["status"], health["reason"]) == ("Unknown", "AwaitingFirstBackup")

    finish(cluster, FIRST, "Failed", "2026-11-30T09:31:00Z", message="pg_dump: disk full")
    await cluster.reconcile("orders")
    await cluster.reconcile("orders")  # the condition is in the status now: not announced again

    health = condition(cluster.get("SampleDB", "orders"), "BackupHealthy")
    assert (health["status"], health["reason"]) == ("False", "BackupFailed")
    assert "pg_dump: disk full" in health["message"]
    assert events(cluster, "BackupFailed") == [("Warning", "BackupFailed", health["message"])]
    db = cluster.get("SampleDB", "orders")
    assert db is not None and "lastBackup" not in db["status"]  # a failed backup is no lastBackup

    cluster.clock.advance(3600)
    await cluster.reconcile("orders")
    finish(cluster, SECOND, "Succeeded", "2026-11-30T10:31:00Z")
    await cluster.reconcile("orders")
    await cluster.reconcile("orders")

    db = cluster.get("SampleDB", "orders")
    assert db is not None
    assert db["status"]["lastBackup"] == {"name": SECOND, "completedAt": "2026-11-30T10:31:00Z"}
    health = condition(db, "BackupHealthy")
    assert (health["status"], health["reason"]) == ("True", "BackupSucceeded")
    assert events(cluster, "BackupRecovered") == [("Normal", "BackupRecovered", health["message"])]
    assert len(events(cluster, "BackupFailed")) == 1

