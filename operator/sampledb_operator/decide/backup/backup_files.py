"""A backup's files on its volume live as long as its SampleDBBackup object.

Pure. A SampleDBBackup that will write files carries the finalizer FILES_FINALIZER; when the object
is deleted (by hand or by retention), a small prune Job removes its .dump, .json and .globals.sql
from the volume, then the finalizer goes. The Job needs no database connection (the SampleDB may
be gone), only the volume. A backup deleted while its Job still runs keeps the finalizer until the
Job has finished, and its files are then pruned where the Job writes them (status.location may not
be set yet).

`plan_release` is one pass of that deletion as a plan, from `FilesFacts` the reconciler gathers (the
caches; live, the namespace and the volume, each only when `namespace_read_needed` /
`volume_read_needed` say the pass depends on it):

| the deleted backup                                        | plan                                      |
|-----------------------------------------------------------|-------------------------------------------|
| without the finalizer                                     | nothing                                   |
| its Job runs, the namespace is not terminating            | nothing: wait (the Job's events return)   |
| no files (never ran), no volume, or namespace terminating | release the finalizer                     |
| no prune Job                                              | create it                                 |
| prune Job running                                         | nothing                                   |
| prune Job finished                                        | BackupFilesDeleted, or Warning            |
|                                                           | BackupFilesLeft; then release             |

The release carries the resourceVersion it was computed from (a stale pass writes nothing).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from sampledb_operator.decide.children.desired_statefulset import container_security, pod_security
from sampledb_operator.decide.effects import Create, Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.jobs import BACKUP_MOUNT, test_annotations
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, bucket_label
from sampledb_operator.decide.status import JobState
from sampledb_operator.model import names
from sampledb_operator.model.backup import BackupLocation, SampleDBBackup
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB, image_for
from sampledb_operator.model.schema import API_VERSION

FILES_FINALIZER = "sampledb.io/backup-files"
SUFFIXES = (".dump", ".json", ".globals.sql")
KIND = "SampleDBBackup"


def expected_location(backup: SampleDBBackup) -> BackupLocation:
    """Where the backup's Job writes its files (what status.location says once it has succeeded)."""
    claim = backup.spec.storage.claim_name if backup.spec.storage else names.backup_pvc_name(backup.spec.database)
    return BackupLocation(pvc_name=claim, path=f"{BACKUP_MOUNT}/{backup.metadata.name}.dump")


def prune_job(backup: SampleDBBackup, *, image: str, pod_annotations: dict[str, str] | None = None,
              location: BackupLocation | None = None) -> Obj:
    """The Job deleting `backup`'s files at `location` (default: its status.location), owned by the backup."""
    location = location or backup.status.location
    assert location is not None
    directory, file_name = posixpath.split(location.path)
    stem = file_name.removesuffix(".dump")
    db, name = backup.spec.database, backup.metadata.name
    labels = {MANAGED_BY_LABEL: MANAGED_BY, COMPONENT_LABEL: "prune",
              DATABASE_LABEL: db, **bucket_label(backup.metadata.namespace or "", db)}
    template_meta: Obj = {"labels": labels}
    if pod_annotations:
        template_meta["annotations"] = dict(pod_annotations)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names.prune_job_name(db, name), "namespace": backup.metadata.namespace, "labels": labels,
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": "SampleDBBackup", "name": name,
                                 "uid": backup.metadata.uid or "", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "backoffLimit": 2,
            "activeDeadlineSeconds": 600,
            "template": {
                "metadata": template_meta,
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": pod_security(),
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [{
                        "name": "prune", "image": image,
                        "command": ["rm", "-f", "--", *(f"{directory}/{stem}{s}" for s in SUFFIXES)],
                        "volumeMounts": [{"name": "backups", "mountPath": directory}],
                        "securityContext": container_security(read_only_root=True),
                    }],
                    "volumes": [{"name": "backups", "persistentVolumeClaim": {"claimName": location.pvc_name}}],
                },
            },
        },
    }


@dataclass(frozen=True, slots=True)
class FilesFacts:
    """Everything one pass of the deletion of a backup's files reads."""

    backup: SampleDBBackup  # being deleted (deletionTimestamp set), as read
    backup_job: JobState | None  # its backup Job (names.backup_job_name), from the cache; None: none
    prune_job: JobState | None  # its prune Job (names.prune_job_name), from the cache; None: none
    namespace_terminating: bool | None = None  # read live only when namespace_read_needed
    volume_exists: bool | None = None  # the files' volume: read only when volume_read_needed
    db: SampleDB | None = None  # spec.database, from the cache: read only when database_read_needed


def holds(backup: SampleDBBackup) -> bool:
    """The files finalizer still holds the backup: its deletion has steps left."""
    return FILES_FINALIZER in backup.metadata.finalizers


def files_location(facts: FilesFacts) -> BackupLocation | None:
    """Where the backup's files are: status.location, else where its Job writes them when it ran (or runs no
    more) without recording it; None when it never wrote any."""
    backup = facts.backup
    if backup.status.location is not None:
        return backup.status.location
    if facts.backup_job is not None or backup.status.phase == "Running":
        return expected_location(backup)
    return None


def _job_runs(facts: FilesFacts) -> bool:
    return facts.backup_job is not None and not facts.backup_job.finished


def namespace_read_needed(facts: FilesFacts) -> bool:
    """The pass depends on whether the namespace is terminating: the backup's Job still runs (a terminating
    namespace does not wait for it), or there are files to prune (nothing new is created there)."""
    return holds(facts.backup) and (_job_runs(facts) or files_location(facts) is not None)


def _waits_for_job(facts: FilesFacts) -> bool:
    """Its Job may still be writing files: wait for it (the Job's events bring the backup back)."""
    return _job_runs(facts) and not facts.namespace_terminating


def volume_read_needed(facts: FilesFacts) -> bool:
    """The pass prunes files unless their volume is gone."""
    return (holds(facts.backup) and not _waits_for_job(facts) and files_location(facts) is not None
            and not facts.namespace_terminating)


def database_read_needed(facts: FilesFacts) -> bool:
    """The pass creates the prune Job: the database (if it still exists) gives its image and test annotations."""
    return volume_read_needed(facts) and bool(facts.volume_exists) and facts.prune_job is None


def plan_release(facts: FilesFacts) -> Plan:
    """The plan of this pass of the deletion of `facts.backup`'s files (empty when the finalizer is gone)."""
    backup = facts.backup
    if not holds(backup) or _waits_for_job(facts):
        return Plan()
    location = files_location(facts)
    if location is None or facts.namespace_terminating or not facts.volume_exists:
        return Plan((release(backup),))
    if facts.prune_job is None:
        db = facts.db
        image = image_for(db.spec) if db else f"postgres:{backup.status.version or '16'}"
        body = prune_job(backup, image=image, pod_annotations=test_annotations(db) if db else None,
                         location=location)
        return Plan((Create(body),))
    if not facts.prune_job.finished:
        return Plan()
    if facts.prune_job.succeeded:
        event = EventSpec("Normal", "BackupFilesDeleted", f"deleted the files of {location.path} on"
                          f" {location.pvc_name}")
    else:
        event = EventSpec("Warning", "BackupFilesLeft", f"could not delete {location.path} on"
                          f" {location.pvc_name} ({facts.prune_job.reason}: {facts.prune_job.message});"
                          " delete them by hand")
    return Plan((Emit(event), release(backup)))


def release(backup: SampleDBBackup) -> Patch:
    """Remove the files finalizer, on the condition that the backup is the one the pass read."""
    remaining = [f for f in backup.metadata.finalizers if f != FILES_FINALIZER]
    return Patch(KIND, backup.metadata.name,
                 {"metadata": {"finalizers": remaining, "resourceVersion": backup.metadata.resource_version}})
