"""Creating a database from a backup (spec.restore): the restore Job, and what blocks it.

Pure. The restore runs once per SampleDB incarnation (the Job's name is keyed by the SampleDB's
uid and the backup's name), after the new, empty database is ready and before anything else
writes to it; the init SQL is not run for a restored database. The backup is a SampleDBBackup of the
namespace (its volume mounted read-only), or with spec.restore.objectStore its copy in an object store
(downloaded by restore.sh into a scratch volume: nothing of the source's namespace is needed).
"""

from __future__ import annotations

from sampledb_operator.decide import jobs
from sampledb_operator.decide.children import archive_config
from sampledb_operator.decide.labels import db_name, namespace_of
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB

RESTORE_MOUNT = "/sampledb/restore"


def restore_job_name(db: SampleDB) -> str:
    assert db.spec.restore is not None
    return names.restore_job_name(db.metadata.name, f"{db.metadata.uid}/{db.spec.restore.backup_name}")


def from_store(db: SampleDB) -> bool:
    """The restore reads the backup's copy in an object store, not a SampleDBBackup."""
    return db.spec.restore is not None and db.spec.restore.object_store is not None


def source_problem(db: SampleDB, backup: Obj | None) -> Problem | None:
    """Why the backup named by spec.restore cannot be restored (yet), or None."""
    assert db.spec.restore is not None
    name = db.spec.restore.backup_name
    if backup is None:
        return Problem("RestoreSourceMissing", f"SampleDBBackup {name} does not exist in this namespace",
                       "spec.restore.backupName")
    status = backup.get("status") or {}
    if status.get("phase") != "Succeeded":
        return Problem("RestoreSourceNotReady",
                       f"SampleDBBackup {name} is {status.get('phase') or 'Pending'}, not Succeeded",
                       "spec.restore.backupName")
    if not (status.get("location") or {}).get("pvcName"):
        return Problem("RestoreSourceMissing", f"SampleDBBackup {name} has no location", "spec.restore.backupName")
    return None


def restore_job(db: SampleDB, backup: Obj) -> Obj:
    """The Job restoring `backup` (a Succeeded SampleDBBackup) into the database."""
    location = backup["status"]["location"]
    path = str(location.get("path") or "")
    file_name = path.rsplit("/", 1)[-1]
    backup_name = file_name.removesuffix(".dump") if file_name.endswith(".dump") else backup["metadata"]["name"]
    return jobs.job(
        db,
        name=restore_job_name(db),
        component="restore",
        script="restore.sh",
        env=[{"name": "BACKUP_DIR", "value": RESTORE_MOUNT}, {"name": "BACKUP_NAME", "value": backup_name},
             {"name": "WAIT_TIMEOUT", "value": "300"}, jobs.owner_role_env(db)],
        extra_volumes=[{"name": "restore-source",
                        "persistentVolumeClaim": {"claimName": location["pvcName"], "readOnly": True}}],
        extra_mounts=[{"name": "restore-source", "mountPath": RESTORE_MOUNT, "readOnly": True}],
    )


def store_restore_job(db: SampleDB) -> Obj:
    """The Job restoring the copy named by spec.restore from its object store: downloaded into a scratch
    volume (an emptyDir: the node's ephemeral storage needs room for the dump), checked against its metadata,
    then restored like a SampleDBBackup's."""
    assert db.spec.restore is not None
    env, volumes, mounts = archive_config.restore_source(db.spec, namespace_of(db), db_name(db))
    return jobs.job(
        db,
        name=restore_job_name(db),
        component="restore",
        script="restore.sh",
        env=[{"name": "BACKUP_DIR", "value": RESTORE_MOUNT},
             {"name": "BACKUP_NAME", "value": db.spec.restore.backup_name},
             {"name": "WAIT_TIMEOUT", "value": "300"}, jobs.owner_role_env(db), *env],
        extra_volumes=[{"name": "restore-source", "emptyDir": {}}, *volumes],
        extra_mounts=[{"name": "restore-source", "mountPath": RESTORE_MOUNT}, *mounts],
    )
