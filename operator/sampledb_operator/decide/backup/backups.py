"""The SampleDBBackups the operator asks for itself: scheduled, pre-upgrade, pre-migration, pre-delete.

Pure. One builder for every such request, so each carries the same labels: the database (what
`kubectl get sdbb -l sampledb.io/database=<db>` lists), its bucket (decide.sharding), the database's uid
(only backups of this incarnation count), the reason, and for a pre-delete snapshot the attempt. The
names are derived from what the backup is for, so a restart finds the same backup instead of taking a
second one.
"""

from __future__ import annotations

from sampledb_operator.decide.labels import DATABASE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, bucket_label
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION

DATABASE_UID_LABEL = "sampledb.io/database-uid"
REASON_LABEL = "sampledb.io/backup-reason"
ATTEMPT_LABEL = "sampledb.io/attempt"  # a pre-delete snapshot's attempt number
SCHEDULED_FOR_ANNOTATION = "sampledb.io/scheduled-for"  # a scheduled backup's slot


def backup_request(db: SampleDB, name: str, reason: str, *, attempt: int | None = None,
                   annotations: dict[str, str] | None = None) -> Obj:
    """A SampleDBBackup of `db` for `reason`, on the database's backups volume."""
    labels = {MANAGED_BY_LABEL: MANAGED_BY, DATABASE_LABEL: db.metadata.name,
              DATABASE_UID_LABEL: db.metadata.uid or "", REASON_LABEL: reason,
              **bucket_label(db.metadata.namespace or "", db.metadata.name)}
    if attempt is not None:
        labels[ATTEMPT_LABEL] = str(attempt)
    metadata: Obj = {"name": name, "namespace": db.metadata.namespace or "", "labels": labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": API_VERSION, "kind": "SampleDBBackup", "metadata": metadata,
        "spec": {"database": db.metadata.name, "reason": reason,
                 "storage": {"claimName": names.backup_pvc_name(db.metadata.name)}},
    }


def pre_work_backup_name(db: SampleDB, reason: str, token: str) -> str:
    """The name of the backup taken before the work `token` (an upgrade's target, a migration plan's digest)."""
    suffix = f"-{reason}-{names.short_hash(db.metadata.uid or '', reason, token)}"
    return names.fit(db.metadata.name, suffix, names.BACKUP_NAME_MAX)
