"""Deleting a SampleDBBackup whose Job still runs (issue #11, item 13c): the files finalizer stays until
the Job has finished, then the prune Job removes what it wrote, where it writes (status.location is
not set yet). And the other ways the finalizer goes: at once without files, without a volume or in a
terminating namespace; after the prune Job, announced whichever way it ended; never from a stale copy."""

from __future__ import annotations

from tests.support.fake_cluster import NS, FakeCluster, running_database

from sampledb_operator.decide.backup.backup_files import FILES_FINALIZER
from sampledb_operator.model import names
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result
from sampledb_operator.reconcilers.backup import BackupReconciler
from sampledb_operator.reconcilers.effects import LOOK_AGAIN_AFTER_CONFLICT


async def test_a_running_backup_keeps_its_files_finalizer_until_its_job_ends() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders"}})
    backups, ref = BackupReconciler(cluster.ctx), ObjectRef(NS, "b1")
    await backups(ref)
    backup_job, prune_job = names.backup_job_name("orders", "b1"), names.prune_job_name("orders", "b1")
    assert cluster.get("Job", backup_job) is not None

    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)  # while its Job writes
    await backups(ref)
    backup = cluster.get("SampleDBBackup", "b1")
    assert backup is not None and FILES_FINALIZER in backup["metadata"]["finalizers"]
    assert cluster.get("Job", prune_job) is None

    cluster.finish_job(backup_job)
    await backups(ref)
    prune = cluster.get("Job", prune_job)
    assert prune is not None
    command = prune["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "/sampledb/backups/b1.dump" in command
    assert prune["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "orders-backups"
    cluster.finish_job(prune_job)
    await backups(ref)
    assert cluster.get("SampleDBBackup", "b1") is None  # finalizer released, object gone


async def _succeeded_backup(cluster: FakeCluster) -> tuple[BackupReconciler, ObjectRef]:
    """A backup whose Job succeeded and whose status records where its files are."""
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders"}})
    backups, ref = BackupReconciler(cluster.ctx), ObjectRef(NS, "b1")
    await backups(ref)
    cluster.finish_job(names.backup_job_name("orders", "b1"))
    await backups(ref)
    stored = cluster.get("SampleDBBackup", "b1")
    assert stored is not None and stored["status"]["location"]["pvcName"] == "orders-backups"
    return backups, ref


async def test_a_backup_deleted_before_it_ran_is_released_at_once() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1", "finalizers": [FILES_FINALIZER, "keep"]},
                                   "spec": {"database": "orders"}, "status": {"phase": "Pending"}})
    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)
    cluster.writes.clear()
    await BackupReconciler(cluster.ctx)(ObjectRef(NS, "b1"))
    stored = cluster.get("SampleDBBackup", "b1")
    assert stored is not None and stored["metadata"]["finalizers"] == ["keep"]
    assert cluster.written() == [("patch", "SampleDBBackup", "b1")]  # no prune Job: no files


async def test_a_failed_prune_says_which_files_are_left_and_releases() -> None:
    cluster = FakeCluster()
    backups, ref = await _succeeded_backup(cluster)
    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)
    await backups(ref)
    prune = names.prune_job_name("orders", "b1")
    assert cluster.get("Job", prune) is not None
    await backups(ref)  # the prune Job runs: nothing to do
    assert cluster.get("SampleDBBackup", "b1") is not None
    cluster.finish_job(prune, succeeded=False, message="rm: read-only file system")
    await backups(ref)
    assert cluster.recorder.events[-1] == (
        "Warning", "BackupFilesLeft", "could not delete /sampledb/backups/b1.dump on orders-backups"
        " (BackoffLimitExceeded: rm: read-only file system); delete them by hand")
    assert cluster.get("SampleDBBackup", "b1") is None


async def test_a_successful_prune_is_announced() -> None:
    cluster = FakeCluster()
    backups, ref = await _succeeded_backup(cluster)
    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)
    await backups(ref)
    cluster.finish_job(names.prune_job_name("orders", "b1"))
    await backups(ref)
    assert cluster.recorder.events[-1] == ("Normal", "BackupFilesDeleted",
                                           "deleted the files of /sampledb/backups/b1.dump on orders-backups")
    assert cluster.get("SampleDBBackup", "b1") is None


async def test_in_a_terminating_namespace_the_finalizer_goes_without_a_prune_even_while_the_job_runs() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders"}})
    backups, ref = BackupReconciler(cluster.ctx), ObjectRef(NS, "b1")
    await backups(ref)  # its Job runs
    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)
    cluster.patch("Namespace", NS, {"status": {"phase": "Terminating"}})
    await backups(ref)
    assert cluster.get("SampleDBBackup", "b1") is None
    assert cluster.get("Job", names.prune_job_name("orders", "b1")) is None


async def test_files_on_a_deleted_volume_are_not_pruned() -> None:
    cluster = FakeCluster()
    backups, ref = await _succeeded_backup(cluster)
    cluster.remove(("PersistentVolumeClaim", NS, "orders-backups"))
    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)
    await backups(ref)
    assert cluster.get("SampleDBBackup", "b1") is None
    assert cluster.get("Job", names.prune_job_name("orders", "b1")) is None


async def test_a_stale_release_writes_nothing_and_the_newer_object_is_released() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1", "finalizers": [FILES_FINALIZER, "keep"]},
                                   "spec": {"database": "orders"}})
    await cluster.ctx.apis["SampleDBBackup"].delete("b1", NS)
    cluster.freeze_cache()
    cluster.patch("SampleDBBackup", "b1", {"metadata": {"annotations": {"note": "x"}}})
    backups, ref = BackupReconciler(cluster.ctx), ObjectRef(NS, "b1")
    assert await backups(ref) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)  # refused: it looks again
    stored = cluster.get("SampleDBBackup", "b1")
    assert stored is not None and FILES_FINALIZER in stored["metadata"]["finalizers"]
    cluster.sync_cache()
    await backups(ref)
    stored = cluster.get("SampleDBBackup", "b1")
    assert stored is not None and stored["metadata"]["finalizers"] == ["keep"]
