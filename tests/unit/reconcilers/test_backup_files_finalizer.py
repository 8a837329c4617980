"""Deleting a SampleDBBackup whose Job still runs (issue #11, item 13c): the files finalizer stays until
the Job has finished, then the prune Job removes what it wrote, where it writes (status.location is
not set yet)."""

from __future__ import annotations

from tests.support.fake_cluster import NS, FakeCluster, running_database

from sampledb_operator.decide.backup_files import FILES_FINALIZER
from sampledb_operator.model import names
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.backup import BackupReconciler


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
