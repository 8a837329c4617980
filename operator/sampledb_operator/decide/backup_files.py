"""A backup's files on its volume live as long as its SampleDBBackup object.

Pure. A SampleDBBackup that will write files carries the finalizer FILES_FINALIZER; when the object
is deleted (by hand or by retention), a small prune Job removes its .dump, .json and .globals.sql
from the volume, then the finalizer goes. The Job needs no database connection (the SampleDB may
be gone), only the volume. A backup deleted while its Job still runs keeps the finalizer until the
Job has finished, and its files are then pruned where the Job writes them (status.location may not
be set yet).
"""

from __future__ import annotations

import posixpath

from sampledb_operator.decide.desired import (
    COMPONENT_LABEL,
    DATABASE_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    container_security,
    pod_security,
)
from sampledb_operator.decide.jobs import BACKUP_MOUNT
from sampledb_operator.model import names
from sampledb_operator.model.backup import BackupLocation, SampleDBBackup
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.schema import API_VERSION

FILES_FINALIZER = "sampledb.io/backup-files"
SUFFIXES = (".dump", ".json", ".globals.sql")


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
              DATABASE_LABEL: db}
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
