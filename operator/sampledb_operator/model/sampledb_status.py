"""The SampleDB's status: what the operator last observed of the database, its instances, its backups and
its migrations.

Pure data, no I/O; part of the single source of the SampleDB CRD schema (SampleDB in model/sampledb.py
holds it, model/crd.py generates the CRD from it). Invariants: the status is written only by the operator;
status.phase takes only Phase's values, a one-word summary whose detail is in the conditions (at most
MAX_CONDITIONS, one per type); currentVersion, once set, is never cleared (has_run relies on it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from sampledb_operator.model.archive import ArchiveStatus
from sampledb_operator.model.conditions import MAX_CONDITIONS, Condition
from sampledb_operator.model.databases import MAX_DATABASES, DatabaseStatus
from sampledb_operator.model.roles import MAX_ROLES, RoleStatus
from sampledb_operator.model.schema import NAME_MAX, SHA256_RE, OneOf, StatusModel, Time


class Phase(StrEnum):
    """Values of status.phase (a one-word summary for kubectl; conditions hold the detail)."""

    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    INITIALIZING = "Initializing"
    RESTORING = "Restoring"
    RUNNING = "Running"
    UPGRADING = "Upgrading"
    MIGRATING = "Migrating"
    DEGRADED = "Degraded"
    PAUSED = "Paused"
    HIBERNATED = "Hibernated"
    DELETING = "Deleting"
    FAILED = "Failed"

class BackupRecord(StatusModel):
    """A reference to a completed backup."""

    name: str = Field(max_length=NAME_MAX, description="Name of the SampleDBBackup.")
    completed_at: Time | None = Field(default=None, description="When the backup completed.")


class AppliedMigration(StatusModel):
    """A migration file that has been applied."""

    name: str = Field(max_length=NAME_MAX, description="File name, e.g. 0001_create_users.sql.")
    checksum: str | None = Field(
        default=None, pattern=SHA256_RE, description="SHA-256 (hex) of the file's content when applied."
    )
    applied_at: Time | None = Field(default=None, description="When it was applied.")


class InstanceStatus(StatusModel):
    """One PostgreSQL instance of the database as the operator last saw it."""

    name: str = Field(max_length=NAME_MAX, description="The instance's pod name.")
    role: str = Field(max_length=16, description="primary, replica, or fenced (stopped during a failover).")
    ready: bool = Field(default=False, description="The pod is Ready.")
    lsn: str | None = Field(
        default=None, max_length=32,
        description="WAL position: the primary's current LSN, a standby's last replayed LSN.",
    )
    lag_bytes: int | None = Field(
        default=None, description="A standby's replay lag behind the primary's current LSN, in bytes.",
    )
    inactive_slot: str | None = Field(
        default=None, max_length=64,
        description="The primary's inactive replication slot that holds the oldest WAL (none: no slot is inactive).",
    )
    inactive_slot_retained_bytes: int | None = Field(
        default=None,
        description="The WAL that slot keeps on the primary's volume: bytes from its restart LSN to the current one.",
    )


class PoolerPause(StatusModel):
    """The pooler's pools paused for a switchover (reconcilers/pooler_pause.py)."""

    target: str = Field(max_length=NAME_MAX, description="The instance the switchover promotes.")
    paused_at: Time | None = Field(default=None, description="When the pools were paused (none: not yet).")
    resumed: bool = Field(default=False, description="Resumed before the switchover ended (it took too long).")


class SampleDBStatus(StatusModel):
    """The observed state of the database, written by the operator."""

    phase: Annotated[str, OneOf.of(Phase)] | None = Field(
        default=None, description="One-word summary of the state; see the conditions for details."
    )
    conditions: list[Condition] = Field(
        default_factory=list, max_length=MAX_CONDITIONS,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
        description="Ready, Initialized, Progressing, Degraded, Upgrading, BackupHealthy, DeletionBlocked.",
    )
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation the status was computed for."
    )
    current_version: str | None = Field(
        default=None, max_length=16, description="The PostgreSQL version the database runs now."
    )
    endpoint: str | None = Field(
        default=None, max_length=NAME_MAX + 8, description="host:port of the Service clients connect to."
    )
    secret_name: str | None = Field(
        default=None, max_length=NAME_MAX, description="Secret with the credentials and connection details."
    )
    last_backup: BackupRecord | None = Field(default=None, description="The latest successful backup.")
    last_snapshot: BackupRecord | None = Field(
        default=None, description="The latest succeeded snapshot taken before an upgrade or a migration."
    )
    applied_migrations: list[AppliedMigration] = Field(
        default_factory=list, max_length=10000, description="Migrations applied so far, in order."
    )
    applied_parameters: str | None = Field(
        default=None, max_length=64,
        description="Hash of the spec.parameters the server last reloaded (the reload Job's record).",
    )
    primary: str | None = Field(
        default=None, max_length=NAME_MAX,
        description="The instance (pod name) the operator elected primary; the Service <name> selects it.",
    )
    target_primary: str | None = Field(
        default=None, max_length=NAME_MAX,
        description="During a failover or switchover: the instance being promoted (the old primary is fenced"
        " until it is).",
    )
    pooler_pause: PoolerPause | None = Field(
        default=None,
        description="With spec.pooler, during a switchover: the pooler's pools paused for it (so that clients wait"
        " instead of failing), and when.",
    )
    ready_instances: str | None = Field(default=None, max_length=8, description="Ready instances / spec.replicas.")
    instances: list[InstanceStatus] = Field(
        default_factory=list, max_length=9, description="Each instance's role, readiness and replication position."
    )
    archive: ArchiveStatus | None = Field(
        default=None, description="Continuous WAL archiving and base backups (with spec.backup.objectStore).",
    )
    roles: list[RoleStatus] = Field(
        default_factory=list, max_length=MAX_ROLES * 2,
        description="The roles of spec.roles, and those removed from it (Retained), with what was done to each.",
    )
    roles_applied: str | None = Field(
        default=None, max_length=64,
        description="Hash of the spec.roles (and their password Secrets' versions) last applied to the server.",
    )
    databases: list[DatabaseStatus] = Field(
        default_factory=list, max_length=MAX_DATABASES * 2,
        description="The databases of spec.databases, and those removed from it (Retained), with what was done to"
        " each.",
    )
    databases_applied: str | None = Field(
        default=None, max_length=64, description="Hash of the spec.databases last applied to the server.",
    )
    pooler_applied: str | None = Field(
        default=None, max_length=64,
        description="With spec.pooler: hash of the pooler's role and lookup function (and its Secret's version) last"
        " made on the server.",
    )
    app_role_applied: str | None = Field(
        default=None, max_length=64,
        description="Hash of the credentials Secret's version whose password the application's role was last given.",
    )
    monitoring_applied: str | None = Field(
        default=None, max_length=64,
        description="With spec.monitoring.enabled: hash of the exporters' role last made on the server (and of the"
        " primary's pod it was made through).",
    )

    @property
    def has_run(self) -> bool:
        """The database has been ready at least once: currentVersion is set the first time it is and never
        cleared; before that the database is being provisioned."""
        return self.current_version is not None
