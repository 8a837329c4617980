"""A SampleDB's backup and restore spec: spec.backup (schedule, retention, verification, the backup volume
and the object store) and spec.restore (create the database from a backup).

Pure data, no I/O; part of the single source of the SampleDB CRD schema (SampleDBSpec in model/sampledb.py
holds these models, model/crd.py generates the CRD from them). Invariants: the backup volume's size only
grows and its StorageClass is immutable (CEL rules); spec.restore names one source, a SampleDBBackup of the
namespace or its copy in an object store (model/archive.py), and SampleDBSpec's rules allow it only at
creation and never beside spec.recovery.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sampledb_operator.model.archive import ArchiveSpec, ObjectStore
from sampledb_operator.model.schema import Quantity, Rule, SpecModel, SubdomainName
from sampledb_operator.model.spec_rules import (
    CLASS_IMMUTABLE_RULE,
    MAX_SIZE_RULE,
    MAX_STORAGE,
    MIN_SIZE_RULE,
    MIN_STORAGE,
    CronSchedule,
    grow_only,
)


class BackupStorageSpec(SpecModel):
    """The volume backups are written to; it is kept when the SampleDB is deleted."""

    cel_rules = (CLASS_IMMUTABLE_RULE,)

    size: Annotated[Quantity, MIN_SIZE_RULE, MAX_SIZE_RULE, grow_only("backup storage size")] | None = Field(
        default=None,
        description=f"Size of the backup volume, from {MIN_STORAGE} to {MAX_STORAGE}. When omitted, the"
        " volume is created with the data volume's size and keeps it: it does not grow with the data volume"
        " (set a size to grow it; its StorageClass must allow volume expansion).",
    )
    storage_class_name: SubdomainName | None = Field(
        default=None,
        description="StorageClass of the backup volume; the cluster's default class when omitted."
        " Immutable after creation.",
    )


class BackupSpec(SpecModel):
    """Scheduled backups, their verification and their volume."""

    schedule: CronSchedule | None = Field(
        default=None,
        description='When to take scheduled backups, in cron format ("0 3 * * *", "@daily"), UTC.'
        " No scheduled backups when omitted; manual and pre-* backups still work.",
    )
    retention: int = Field(
        default=7, ge=1, le=1000,
        description="How many successful backups of each kind the operator takes to keep: scheduled ones,"
        " and pre-upgrade and pre-migration ones, each kind counted apart; older ones are deleted with their"
        " files. Manual and pre-delete backups are not counted and are never deleted by the operator.",
    )
    storage: BackupStorageSpec = Field(
        default_factory=BackupStorageSpec, description="The volume backups are written to."
    )
    verify: bool = Field(
        default=False,
        description="Verify every successful backup of this database: a Job checks its checksums, restores"
        " it into a throw-away server and compares every table's row count and checksum with those"
        " recorded at backup time (one verification at a time). The result is on the SampleDBBackup.",
    )
    object_store: ArchiveSpec | None = Field(
        default=None,
        description="Continuous WAL archiving and physical base backups to an S3-compatible object store, for"
        " point-in-time recovery (spec.recovery of a new SampleDB) that outlives this cluster.",
    )


class RestoreSpec(SpecModel):
    """Create the database from a backup instead of from scratch: a SampleDBBackup of this namespace, or its copy
    in an object store (which outlives the namespace and the cluster)."""

    cel_rules = (Rule("!has(self.database) || has(self.objectStore)", "database names a source in an object store:"
                      " it needs objectStore", field_path=".database"),)

    backup_name: SubdomainName = Field(
        description="Name of a Succeeded SampleDBBackup in the same namespace; with objectStore, the name of the"
        " backup whose copy is in the store."
    )
    object_store: ObjectStore | None = Field(
        default=None,
        description="Restore the backup's copy in this object store (spec.backup.objectStore.copyBackups of the"
        " source) instead of a SampleDBBackup: its path defaults to this database's namespace (set it to the"
        " source's namespace when that differs).",
    )
    database: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="With objectStore: the source database's name (its copies are under <path>/<database>/logical/);"
        " this database's name when omitted.",
    )
