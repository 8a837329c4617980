"""On the fake cluster, when a database's data volume fills (the SampleDB reconciler's Degraded=True/VolumeFull):
reconcilers/backup.py stops a backup whose Job runs (the Job deleted, the backup Failed with VolumeFull), and the
schedule step postpones the due slot's backup (BackupHealthy False/BackupsPostponed, a Warning Event)."""

from __future__ import annotations

from typing import Any, cast

from tests.support.fake_cluster import NS, FakeCluster, condition, running_database

from sampledb_operator.model import names
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability import metrics
from sampledb_operator.reconcilers.backup import BackupReconciler

JOB = names.backup_job_name("orders", "b1")
FULL = ('2026-12-05 20:54:19 UTC [41] PANIC:  could not write to file "pg_wal/xlogtemp.41":'
        " No space left on device")


def _failed_count() -> float:
    return cast(float, metrics.backups_total.labels(reason="manual", result="failed")._value.get())  # type: ignore[attr-defined]


def _volume_fills(cluster: FakeCluster) -> None:
    """The server stops on its full volume: its pod crash-loops, the StatefulSet counts it not ready."""
    sts = cluster.get("StatefulSet", names.statefulset_name("orders"))
    assert sts is not None
    labels = sts["spec"]["template"]["metadata"]["labels"]
    pod: dict[str, Any] = {"metadata": {"name": names.pod_name("orders"), "labels": labels, "uid": "pod-1"},
                           "status": {"containerStatuses": [{
                               "name": "postgres", "restartCount": 3, "ready": False,
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                               "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": FULL}}}]}}
    cluster.put("Pod", pod)
    cluster.set_status("StatefulSet", names.statefulset_name("orders"), {
        **sts["status"], "readyReplicas": 0})


async def test_a_running_backup_is_stopped_when_the_data_volume_fills() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders"}})
    backups, ref = BackupReconciler(cluster.ctx), ObjectRef(NS, "b1")
    await backups(ref)
    assert cluster.get("Job", JOB) is not None
    assert cluster.get("SampleDBBackup", "b1")["status"]["phase"] == "Running"  # type: ignore[index]

    _volume_fills(cluster)
    await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    assert (condition(db, "Degraded")["status"], condition(db, "Degraded")["reason"]) == ("True", "VolumeFull")
    assert condition(db, "Ready")["status"] == "False"

    cluster.writes.clear()
    before = _failed_count()
    assert await backups(ref) is None
    assert cluster.written() == [("delete", "Job", JOB), ("patch/status", "SampleDBBackup", "b1")]
    assert cluster.get("Job", JOB) is None
    status = cluster.get("SampleDBBackup", "b1")["status"]  # type: ignore[index]
    assert status["phase"] == "Failed" and "completedAt" in status
    assert status["message"].startswith(f"Job {JOB} stopped: VolumeFull: the data volume of SampleDB orders is full")
    assert cluster.recorder.events[-1] == ("Warning", "BackupFailed", status["message"])
    assert _failed_count() == before + 1

    cluster.writes.clear()
    await backups(ref)  # finished: never touched again
    assert cluster.written() == []


async def test_a_scheduled_backup_due_on_a_full_volume_is_postponed_and_said() -> None:
    cluster = FakeCluster()
    await running_database(cluster, backup={"schedule": "@hourly"})
    [first] = [w[2] for w in cluster.written("create", "SampleDBBackup")]  # the creation's slot
    cluster.set_status("SampleDBBackup", first, {"phase": "Succeeded", "completedAt": "2026-11-30T09:00:30Z"})
    _volume_fills(cluster)
    cluster.clock.advance(3600)  # the next slot comes due
    cluster.writes.clear()
    for _ in range(2):  # the first pass says Degraded; the schedule step reads it from the status
        await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    health = condition(db, "BackupHealthy")
    assert (health["status"], health["reason"]) == ("False", "BackupsPostponed")
    assert health["message"].startswith("the scheduled backup of 2026-11-30T10:00:00Z is postponed: pod orders-0:"
                                        " container postgres stops because a volume is full")
    assert cluster.written("create", "SampleDBBackup") == []
    assert ("Warning", "BackupsPostponed", health["message"]) in cluster.recorder.events
