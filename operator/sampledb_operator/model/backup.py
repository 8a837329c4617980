"""The SampleDBBackup custom resource: one backup of one SampleDB, and its outcome.

Invariants: the spec is immutable once created (a CEL rule enforces it); the status is written only
by the operator; models here are the single source of the SampleDBBackup CRD schema.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sampledb_operator.model.conditions import MAX_CONDITIONS, Condition
from sampledb_operator.model.names import BACKUP_NAME_MAX, BACKUP_NAME_RE, MAX_NAME_LENGTH
from sampledb_operator.model.schema import (
    API_VERSION,
    NAME_MAX,
    SHA256_RE,
    SHORT_TEXT_MAX,
    LabelName,
    ObjectMeta,
    OneOf,
    Rule,
    SpecModel,
    StatusModel,
    SubdomainName,
    Time,
)

KIND = "SampleDBBackup"


class BackupReason(StrEnum):
    """Why a backup was taken."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"
    PRE_DELETE = "pre-delete"
    PRE_UPGRADE = "pre-upgrade"
    PRE_MIGRATION = "pre-migration"


class BackupPhase(StrEnum):
    """Values of a backup's status.phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class BackupStorageRef(SpecModel):
    """Where the backup is written."""

    claim_name: SubdomainName = Field(
        description="PersistentVolumeClaim, in the same namespace, that receives the backup file."
    )


class SampleDBBackupSpec(SpecModel):
    """Which database to back up, and why. Immutable."""

    cel_rules = (Rule("self == oldSelf", "spec is immutable; create a new SampleDBBackup instead"),)

    database: Annotated[LabelName, Field(max_length=MAX_NAME_LENGTH)] = Field(
        description="Name of the SampleDB, in the same namespace, to back up."
    )
    reason: BackupReason = Field(
        default=BackupReason.MANUAL,
        description="Why the backup is taken: scheduled, manual, pre-delete, pre-upgrade or pre-migration.",
    )
    storage: BackupStorageRef | None = Field(
        default=None,
        description="Where to write the backup; the database's backup volume (<database>-backups)"
        " when omitted.",
    )


class BackupLocation(StatusModel):
    """Where a finished backup lives."""

    pvc_name: str = Field(max_length=NAME_MAX, description="PersistentVolumeClaim holding the backup file.")
    path: str = Field(max_length=SHORT_TEXT_MAX, description="Path of the backup file inside that volume.")


class VerificationRecord(StatusModel):
    """What the latest verification of the backup answered (spec.backup.verify or the sampledb.io/verify
    annotation)."""

    request: str | None = Field(
        default=None, max_length=SHORT_TEXT_MAX,
        description="The sampledb.io/verify annotation value it answered; absent for the automatic one"
        " (spec.backup.verify of the SampleDB).",
    )
    job_name: str | None = Field(default=None, max_length=NAME_MAX, description="The verify Job.")
    data_compared: bool | None = Field(
        default=None,
        description="Whether table row counts and checksums were compared (false: the backup records none,"
        " so only its checksum and a complete restore were checked).",
    )
    tables: int | None = Field(default=None, ge=0, description="Tables in the restored database.")
    rows: int | None = Field(default=None, ge=0, description="Rows in the restored database.")


class SampleDBBackupStatus(StatusModel):
    """The outcome of the backup, written by the operator."""

    phase: Annotated[str, OneOf.of(BackupPhase)] | None = Field(
        default=None, description="Pending, Running, Succeeded or Failed."
    )
    started_at: Time | None = Field(default=None, description="When the backup Job started.")
    completed_at: Time | None = Field(default=None, description="When the backup finished (either way).")
    size_bytes: int | None = Field(default=None, ge=0, description="Size of the backup file in bytes.")
    checksum: str | None = Field(
        default=None, pattern=SHA256_RE, description="SHA-256 of the backup file, lowercase hex."
    )
    location: BackupLocation | None = Field(default=None, description="Where the backup file is.")
    store_location: str | None = Field(
        default=None, max_length=1200,
        description="The backup's dump in the object store (spec.backup.objectStore.copyBackups of its database):"
        " s3://<bucket>/<path>/<database>/logical/<reason>/<name>.dump.",
    )
    version: str | None = Field(
        default=None, max_length=16, description="PostgreSQL version of the database when backed up."
    )
    message: str | None = Field(
        default=None, max_length=SHORT_TEXT_MAX, description="Human-readable detail, e.g. why it failed."
    )
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation the status was computed for."
    )
    verified: bool | None = Field(
        default=None,
        description="Whether the latest verification proved the backup restorable (see the Verified"
        " condition); absent until one has finished.",
    )
    verified_at: Time | None = Field(default=None, description="When the latest verification finished.")
    verification: VerificationRecord | None = Field(
        default=None, description="What the latest verification answered."
    )
    conditions: list[Condition] = Field(
        default_factory=list, max_length=MAX_CONDITIONS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        description="Conditions of the backup: Verified once a verification has started.",
    )


BACKUP_NAME_RULE = Rule(
    f"self.metadata.name.matches('{BACKUP_NAME_RE}')",
    f"must be at most {BACKUP_NAME_MAX} characters: the backup's files are named after it, and the backup"
    " script refuses longer names",
    field_path=".metadata.name",
)


def backup_name_error(name: str) -> str | None:
    """Why the CRD refuses this SampleDBBackup name (BACKUP_NAME_RULE's message), or None."""
    return None if re.fullmatch(BACKUP_NAME_RE, name) else BACKUP_NAME_RULE.message


class SampleDBBackup(BaseModel):
    """A whole SampleDBBackup object as read from the API server."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    cel_rules: ClassVar[tuple[Rule, ...]] = (BACKUP_NAME_RULE,)

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: ObjectMeta
    spec: SampleDBBackupSpec = Field(description="Which database to back up, and why. Immutable.")
    status: SampleDBBackupStatus = Field(
        default_factory=SampleDBBackupStatus, description="The outcome, written by the operator."
    )
