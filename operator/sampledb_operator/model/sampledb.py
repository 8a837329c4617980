"""The SampleDB custom resource: the whole object and its spec, the single source of its CRD schema with
the models it holds (spec.backup and spec.restore in model/backup_spec.py, the status in
model/sampledb_status.py, the object store's in model/archive.py).

Invariants: field descriptions, defaults, constraints and CEL rules declared here are what the
API server enforces (model/crd.py generates the CRD from them); `validate_spec` checks only what
the schema cannot express, and never performs I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sampledb_operator.model.archive import RecoverySpec
from sampledb_operator.model.autogrow import AutoGrowSpec
from sampledb_operator.model.backup_spec import BackupSpec, RestoreSpec
from sampledb_operator.model.databases import DatabasesList
from sampledb_operator.model.hba import SPEC_RULES as HBA_SPEC_RULES
from sampledb_operator.model.hba import HbaRules
from sampledb_operator.model.monitoring import MonitoringSpec
from sampledb_operator.model.names import MAX_NAME_LENGTH
from sampledb_operator.model.pooler import PoolerSpec
from sampledb_operator.model.roles import RolesList
from sampledb_operator.model.sampledb_status import SampleDBStatus
from sampledb_operator.model.scheduling import SchedulingSpec
from sampledb_operator.model.schema import (
    API_VERSION,
    DNS1035_LABEL_RE,
    KeyRef,
    ObjectMeta,
    Quantity,
    Rule,
    SpecModel,
    SubdomainName,
)
from sampledb_operator.model.spec_rules import (
    AUTO_GROW_MAXIMUM_RULE,
    CLASS_IMMUTABLE_RULE,
    CRON_RE,
    FORBIDDEN_PARAMETERS,
    MAJORS_TEXT,
    MAX_SIZE_RULE,
    MAX_STORAGE,
    MIN_SIZE_RULE,
    MIN_STORAGE,
    PARAMETER_NAME_RE,
    SUPPORTED_MAJORS,
    VERSION_RE,
    Image,
    Parameters,
    ResourceRequirements,
    Version,
    grow_only,
)
from sampledb_operator.model.tls import TLSSpec

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
    "DeletionPolicy",
    "InitSpec",
    "MigrationsSpec",
    "Problem",
    "ReplicationSpec",
    "ResourceRequirements",
    "SampleDB",
    "SampleDBSpec",
    "StorageSpec",
    "UpgradeMethod",
    "UpgradeSpec",
    "image_for",
    "major_of",
]


class DeletionPolicy(StrEnum):
    """What happens to the data when the SampleDB is deleted."""

    SNAPSHOT = "Snapshot"
    RETAIN = "Retain"
    DELETE = "Delete"


class StorageSpec(SpecModel):
    """The database's data volume."""

    cel_rules = (CLASS_IMMUTABLE_RULE, AUTO_GROW_MAXIMUM_RULE)

    size: Annotated[Quantity, MIN_SIZE_RULE, MAX_SIZE_RULE, grow_only("storage size")] = Field(
        description=f"Size of the data volume, e.g. 10Gi, from {MIN_STORAGE} to {MAX_STORAGE}. It can be"
        " increased later (when the storage class allows volume expansion) but never reduced."
    )
    storage_class_name: SubdomainName | None = Field(
        default=None,
        description="StorageClass of the data volume; the cluster's default class when omitted."
        " Immutable after creation.",
    )
    auto_grow: AutoGrowSpec | None = Field(
        default=None,
        description="Grow the data volume by itself before it fills (the StorageClass must allow volume"
        " expansion). Without it, the volume grows only when size is raised.",
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


class MigrationsSpec(SpecModel):
    """Schema migrations applied in order, each exactly once."""

    config_map_name: SubdomainName = Field(
        description="ConfigMap whose keys are SQL files named NNNN_name.sql (e.g. 0001_create_users.sql),"
        " applied in ascending order. Applied files must not change; new files may be added."
    )


class UpgradeMethod(StrEnum):
    """How a major-version upgrade moves the data into the new major's data directory."""

    LINK = "Link"
    DUMP = "Dump"


class UpgradeSpec(SpecModel):
    """How version changes are carried out."""

    method: UpgradeMethod = Field(
        default=UpgradeMethod.LINK,
        description="How a major-version upgrade moves the data. Link (the default): the server is stopped"
        " after the pre-upgrade backup and pg_upgrade --link builds the new data directory from hard links to"
        " the old files (writes are refused for seconds to minutes, whatever the size; the old image provides"
        " the old binaries through an init container); once pg_upgrade has disabled the old directory, a"
        " failure is not rolled back (restore the pre-upgrade backup). If pg_upgrade refuses the upgrade before"
        " that point (its --check or its schema restore), it falls back to Dump with a Warning Event. Dump: the"
        " running server is made read-only and dumped into the new directory (writes are refused for the"
        " whole dump and restore); any failure"
        " leaves the old version running.",
    )

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
        Rule(
            "!has(self.roles) || !has(self.tls) || !has(self.tls.enabled) || self.tls.enabled"
            " || !self.roles.exists(r, has(r.certificate) && r.certificate)",
            "a role with certificate: true needs spec.tls.enabled (a client certificate is only presented over TLS)",
            field_path=".roles",
        ),
        *HBA_SPEC_RULES,
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
    roles: RolesList | None = Field(
        default=None,
        description="PostgreSQL roles the operator creates, keeps as written, and drops only when asked (ensure:"
        " absent); one removed from this list is left as it is (status.roles: Retained).",
    )
    databases: DatabasesList | None = Field(
        default=None,
        description="Databases the operator creates (with their owner), keeps as written, and drops only when asked"
        " (ensure: absent); one removed from this list is left as it is, with its data (status.databases:"
        " Retained).",
    )
    tls: TLSSpec = Field(
        default_factory=TLSSpec,
        description="TLS for clients and replication: on by default, with a certificate the operator issues from"
        " a certificate authority of the database's own (its ca.crt is published in the ConfigMap <name>-config).",
    )
    pg_hba: HbaRules | None = Field(
        default=None,
        description="Client access rules, pg_hba.conf lines in order, after the operator's own (the pod's socket,"
        " the standbys' replication, its user app) and before the default (a password from anywhere): the first"
        " that matches a connection decides. A change is applied by a reload, without a restart.",
    )
    pooler: PoolerSpec | None = Field(
        default=None,
        description="A PgBouncer connection pooler in front of the primary, at the Service <name>-pooler; clients"
        " log in with their own roles. Removing it removes the pooler.",
    )
    monitoring: MonitoringSpec = Field(
        default_factory=MonitoringSpec,
        description="Metrics from inside each instance: postgres_exporter beside it (port 9187), on by default.",
    )
    scheduling: SchedulingSpec | None = Field(
        default=None,
        description="Where the instances run: nodeSelector, tolerations, affinity, topologySpreadConstraints,"
        " priorityClassName, pod labels and annotations for every instance's pod, and how the instances spread over"
        " nodes (by default on different nodes when the scheduler can).",
    )


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
