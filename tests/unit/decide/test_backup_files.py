"""decide/backup/backup_files.py: the prune Job that deletes a backup's files with its SampleDBBackup."""

from __future__ import annotations

from sampledb_operator.decide.backup.backup_files import prune_job
from sampledb_operator.model.backup import SampleDBBackup


def backup() -> SampleDBBackup:
    return SampleDBBackup.model_validate({
        "metadata": {"name": "db-manual-1", "namespace": "ns", "uid": "b-uid"},
        "spec": {"database": "db", "reason": "manual"},
        "status": {"phase": "Succeeded", "version": "16.4",
                   "location": {"pvcName": "db-backups", "path": "/sampledb/backups/db-manual-1.dump"}},
    })


def test_prune_job_removes_exactly_the_backups_files_from_its_volume() -> None:
    job = prune_job(backup(), image="postgres:16.4")
    spec = job["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["command"] == ["rm", "-f", "--", "/sampledb/backups/db-manual-1.dump",
                                    "/sampledb/backups/db-manual-1.json", "/sampledb/backups/db-manual-1.globals.sql"]
    assert container["volumeMounts"] == [{"name": "backups", "mountPath": "/sampledb/backups"}]
    assert spec["volumes"] == [{"name": "backups", "persistentVolumeClaim": {"claimName": "db-backups"}}]
    assert "env" not in container  # no database connection: the SampleDB may be gone
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("SampleDBBackup", "db-manual-1", "b-uid")
    assert len(job["metadata"]["name"]) <= 63
