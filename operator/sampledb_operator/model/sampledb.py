"""The SampleDB custom resource: spec and status models, the single source of its CRD schema.

Invariants: field descriptions, defaults, constraints and CEL rules declared here are what the
API server enforces (model/crd.py generates the CRD from them); `validate_spec` checks only what
the schema cannot express, and never performs I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sampledb_operator.model.archive import ArchiveSpec, ArchiveStatus, ObjectStore, RecoverySpec
from sampledb_operator.model.conditions import MAX_CONDITIONS, Condition
from sampledb_operator.model.names import MAX_NAME_LENGTH
from sampledb_operator.model.schema import (
    API_VERSION,
    DNS1035_LABEL_RE,
    NAME_MAX,
    SHA256_RE,
    KeyRef,
    ObjectMeta,
    OneOf,
    Quantity,
    Rule,
    SpecModel,
    StatusModel,
    SubdomainName,
    Time,
)
from sampledb_operator.model.spec_rules import (
    CLASS_IMMUTABLE_RULE,
    CRON_RE,
    FORBIDDEN_PARAMETERS,
    MAJORS_TEXT,
    MAX_SIZE_RULE,
    MAX_STORAGE,
    MIN_SIZE_RULE,
    MIN_STORAGE,
    PARAMETER_NAME_RE,
    REQUEST_WITHIN_LIMIT_RULE,
    SUPPORTED_MAJORS,
    VERSION_RE,
    CronSchedule,
    Image,
    Parameters,
    ResourceList,
    Version,
    grow_only,
)

KIND = "SampleDB"
DEFAULT_IMAGE_REPOSITORY = "postgres"

__all__ = [  # re-exported from spec_rules: the spec's constants live with the spec
    "CRON_RE",
    "DEFAULT_IMAGE_REPOSITORY",
    "FORBIDDEN_PARAMETERS",
    "KIND",
    "MAX_STORAGE",
    "MIN_STORAGE",
    "PARAMETER_NAME_RE",
    "SUPPORTED_MAJORS",
    "VERSION_RE",
    "AppliedMigration",
    "BackupRecord",
    "BackupSpec",
    "BackupStorageSpec",
    "DeletionPolicy",
    "InitSpec",
    "InstanceStatus",
    "MigrationsSpec",
    "Phase",
    "Problem",
    "ReplicationSpec",
    "ResourceRequirements",
    "RestoreSpec",
    "SampleDB",
    "SampleDBSpec",
    "SampleDBStatus",
    "StorageSpec",
    "UpgradeSpec",
    "image_for",
    "major_of",
]


class DeletionPolicy(StrEnum):
    """What happens to the data when the SampleDB is deleted."""

    SNAPSHOT = "Snapshot"
    RETAIN = "Retain"
    DELETE = "Delete"


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
    DELETING = "Deleting"
    FAILED = "Failed"


class StorageSpec(SpecModel):
    """The database's data volume."""

    cel_rules = (CLASS_IMMUTABLE_RULE,)

    size: Annotated[Quantity, MIN_SIZE_RULE, MAX_SIZE_RULE, grow_only("storage size")] = Field(
        description=f"Size of the data volume, e.g. 10Gi, from {MIN_STORAGE} to {MAX_STORAGE}. It can be"
        " increased later (when the storage class allows volume expansion) but never reduced."
    )
    storage_class_name: SubdomainName | None = Field(
        default=None,
        description="StorageClass of the data volume; the cluster's default class when omitted."
        " Immutable after creation.",
    )


class ResourceRequirements(SpecModel):
    """Compute resources of the database container."""

    cel_rules = (REQUEST_WITHIN_LIMIT_RULE,)

    requests: ResourceList | None = Field(
        default=None, description="Minimum resources, e.g. {cpu: 250m, memory: 512Mi}."
    )
    limits: ResourceList | None = Field(
        default=None, description="Maximum resources; each must be at least the matching request."
    )


class InitSpec(SpecModel):
    """SQL run once, when the database is first created (not after a restore)."""

    cel_rules = (
        Rule(
            "has(self.configMapKeyRef) != has(self.secretKeyRef)",
            "init needs exactly one of configMapKeyRef or secretKeyRef",
        ),
    )

    config_map_key_ref: KeyRef | None = Field(
        default=None, description="A ConfigMap key whose value is the SQL script."
    )
    secret_key_ref: KeyRef | None = Field(
        default=None, description="A Secret key whose value is the SQL script (for scripts holding secrets)."
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


class MigrationsSpec(SpecModel):
    """Schema migrations applied in order, each exactly once."""

    config_map_name: SubdomainName = Field(
        description="ConfigMap whose keys are SQL files named NNNN_name.sql (e.g. 0001_create_users.sql),"
        " applied in ascending order. Applied files must not change; new files may be added."
    )


class UpgradeSpec(SpecModel):
    """How version changes are carried out."""

    backup_before_minor: bool = Field(
        default=True,
        description="Take a backup before a minor-version upgrade (a major-version upgrade always"
        " takes one).",
    )


class ReplicationSpec(SpecModel):
    """How the standbys follow the primary, and when the operator fails over."""

    synchronous: bool = Field(
        default=False,
        description="Synchronous replication: a commit returns only once at least one standby has flushed it"
        " (synchronous_standby_names = 'ANY 1 (*)'), so a failover loses no committed transaction; writes wait"
        " while no standby is connected. Asynchronous (false) may lose the last transactions committed on the"
        " primary before it failed. Ignored with one instance.",
    )
    failover_delay_seconds: int = Field(
        default=30, ge=0, le=3600,
        description="How long the primary must stay unready (its pod not Ready; a deleted pod counts from its deletion)"
        " before the operator fences it"
        " and promotes the most advanced standby. 0 fails over at once; a longer delay rides out restarts.",
    )


class SampleDBSpec(SpecModel):
    """The desired state of one PostgreSQL database."""

    cel_rules = (
        Rule(
            "!has(self.restore) || (has(oldSelf.restore) && self.restore == oldSelf.restore)",
            "restore can only be set when the SampleDB is created",
            reason="FieldValueForbidden",
            field_path=".restore",
        ),
        Rule(
            "!has(self.recovery) || (has(oldSelf.recovery) && self.recovery == oldSelf.recovery)",
            "recovery can only be set when the SampleDB is created",
            reason="FieldValueForbidden",
            field_path=".recovery",
        ),
        Rule(
            "!(has(self.restore) && has(self.recovery))",
            "a database is created from a backup (restore) or recovered from an object store (recovery), not both",
            field_path=".recovery",
        ),
    )

    version: Version = Field(
        description=f'PostgreSQL version as MAJOR.MINOR, e.g. "16.4" (supported majors: {MAJORS_TEXT}).'
        " Raising it upgrades the database; a major-version downgrade is rejected."
    )
    image: Image | None = Field(
        default=None,
        description='Container image, with a tag or a digest; "postgres:<version>" when omitted. It must run'
        " the given version.",
    )
    storage: StorageSpec = Field(description="The data volume.")
    resources: ResourceRequirements | None = Field(
        default=None, description="CPU and memory for the database container."
    )
    parameters: Parameters | None = Field(
        default=None,
        description='postgresql.conf settings, as strings: {max_connections: "200", shared_buffers: 256MB}.',
    )
    init: InitSpec | None = Field(default=None, description="SQL run once when the database is created.")
    backup: BackupSpec = Field(
        default_factory=BackupSpec, description="Scheduled backups, their verification and their volume."
    )
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.SNAPSHOT,
        description="On deletion: Snapshot takes a final backup and then deletes the data volume; Retain"
        " keeps the data volume; Delete deletes it without a backup.",
    )
    restore: RestoreSpec | None = Field(
        default=None, description="Create the database from a backup. Only at creation."
    )
    recovery: RecoverySpec | None = Field(
        default=None,
        description="Create the database from another database's base backup and WAL in an object store, up to"
        " a point in time (or the end of its archive). Only at creation; the init SQL is not run.",
    )
    paused: bool = Field(
        default=False,
        description="Stop reconciling: the operator changes nothing until it is set back to false.",
    )
    migrations: MigrationsSpec | None = Field(default=None, description="Schema migrations to apply.")
    replicas: int = Field(
        default=1, ge=1, le=9,
        description="PostgreSQL instances: one primary (read-write, the Service <name>) and replicas-1 hot standbys"
        " by streaming replication (read-only, the Service <name>-ro). The operator elects the primary, fails"
        " over to the most advanced standby, and never removes the primary when scaling down.",
    )
    replication: ReplicationSpec = Field(
        default_factory=ReplicationSpec, description="Replication mode and failover timing (with replicas > 1)."
    )
    upgrade: UpgradeSpec = Field(default_factory=UpgradeSpec, description="Upgrade behaviour.")


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
    ready_instances: str | None = Field(default=None, max_length=8, description="Ready instances / spec.replicas.")
    instances: list[InstanceStatus] = Field(
        default_factory=list, max_length=9, description="Each instance's role, readiness and replication position."
    )
    archive: ArchiveStatus | None = Field(
        default=None, description="Continuous WAL archiving and base backups (with spec.backup.objectStore).",
    )

    @property
    def has_run(self) -> bool:
        """The database has been ready at least once: currentVersion is set the first time it is and never
        cleared; before that the database is being provisioned."""
        return self.current_version is not None


class SampleDB(BaseModel):
    """A whole SampleDB object as read from the API server."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    cel_rules: ClassVar[tuple[Rule, ...]] = (
        Rule(
            f"self.metadata.name.size() <= {MAX_NAME_LENGTH}",
            f"must be at most {MAX_NAME_LENGTH} characters: it names the database's Service (longer derived"
            " names, such as the StatefulSet's and the Jobs', are shortened with a hash)",
            field_path=".metadata.name",
        ),
        Rule(
            f"self.metadata.name.matches('{DNS1035_LABEL_RE}')",
            "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter),"
            " because it names the database's Services",
            field_path=".metadata.name",
        ),
    )

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: ObjectMeta
    spec: SampleDBSpec = Field(description="The desired state of the database.")
    status: SampleDBStatus = Field(
        default_factory=SampleDBStatus, description="The observed state, written by the operator."
    )


# ---------------------------------------------------------------- what the schema cannot express


@dataclass(frozen=True, slots=True)
class Problem:
    """A spec problem found by the operator: reason (CamelCase) and message for a status condition."""

    reason: str
    message: str
    field: str


def major_of(version: str) -> int:
    """The major version of "MAJOR.MINOR" (or of a bare "MAJOR")."""
    return int(version.split(".", 1)[0])


def image_for(spec: SampleDBSpec) -> str:
    """The container image: spec.image, or "postgres:<version>"."""
    return spec.image or f"{DEFAULT_IMAGE_REPOSITORY}:{spec.version}"
