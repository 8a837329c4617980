"""Names of every object the operator creates for a SampleDB, derived from the SampleDB's name.

Invariants: every function is pure and deterministic. For any SampleDB name that is a DNS-1035
label (at most 63 characters, which the CRD enforces), every derived name is valid where
Kubernetes needs it: label-bound names (Services, Jobs, the StatefulSet's pods and its
controller-revision-hash label value) stay DNS labels of at most 63 characters, other names DNS
subdomains of at most 253. A name too long for its suffix is shortened and given a hash of the
whole name (`fit`), so two long names that share a prefix still get distinct children.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from enum import StrEnum

LABEL_LIMIT = 63
SUBDOMAIN_LIMIT = 253
HASH_LENGTH = 8
# The StatefulSet controller labels each pod with controller-revision-hash = "<sts>-<hash>", where
# the hash (fnv32, safe-encoded) has up to 10 characters.
REVISION_HASH_SUFFIX = 1 + 10
DATA_VOLUME = "data"  # the StatefulSet's volumeClaimTemplate name
POSTGRES_PORT = 5432


class JobKind(StrEnum):
    """What a Job does; part of its name."""

    INIT = "init"
    BACKUP = "backup"
    SNAPSHOT = "snapshot"
    RESTORE = "restore"
    UPGRADE = "upgrade"
    MIGRATE = "migrate"
    PRUNE = "prune"
    VERIFY = "verify"
    RELOAD = "reload"
    BASEBACKUP = "basebackup"
    RECOVERYVERIFY = "recoveryverify"


MAX_NAME_LENGTH = LABEL_LIMIT
"""The longest SampleDB name (a DNS-1035 label: it names the client Service); the CRD enforces it."""
BACKUP_NAME_MAX = 201
BACKUP_NAME_RE = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{BACKUP_NAME_MAX - 1}}}$"
"""The SampleDBBackup names the data-plane scripts accept (`check_name` in dataplane/lib.sh): the
backup's files are named after it, <name>.dump and, while written, .<name>.globals.sql.tmp-<pid>,
which must stay within a file name's 255 bytes. The CRD enforces it."""
STATEFULSET_LIMIT = LABEL_LIMIT - REVISION_HASH_SUFFIX


def short_hash(*parts: str, length: int = HASH_LENGTH) -> str:
    """A stable lowercase hex digest of `parts` (the separator makes ("a", "b") != ("ab",))."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:length]


def fit(base: str, suffix: str, limit: int = LABEL_LIMIT) -> str:
    """`base + suffix` when it fits in `limit`, else a shortened base, a hash of the whole base, the suffix."""
    if len(base) + len(suffix) <= limit:
        return base + suffix
    keep = limit - len(suffix) - HASH_LENGTH - 1
    return f"{base[:keep].rstrip('-')}-{short_hash(base)}{suffix}"


def statefulset_name(db: str) -> str:
    """The database's StatefulSet: short enough for its pods' controller-revision-hash label."""
    return fit(db, "", STATEFULSET_LIMIT)


def pod_name(db: str, ordinal: int = 0) -> str:
    return f"{statefulset_name(db)}-{ordinal}"


def data_pvc_name(db: str, ordinal: int = 0) -> str:
    """The PVC the StatefulSet controller creates from the "data" volumeClaimTemplate."""
    return f"{DATA_VOLUME}-{pod_name(db, ordinal)}"


INSTANCE_LABEL = "sampledb.io/instance"
ROLE_LABEL = "sampledb.io/role"
MAX_INSTANCES = 9


def instance_statefulset_name(db: str, index: int) -> str:
    """Instance `index`'s StatefulSet (one pod each): instance 0 is the database's original StatefulSet,
    instance k >= 1 is `<db>-i<k>`."""
    return statefulset_name(db) if index == 0 else fit(db, f"-i{index}", STATEFULSET_LIMIT)


def instance_pod_name(db: str, index: int) -> str:
    """Instance `index`'s pod (the instance's name in status.primary and status.instances)."""
    return f"{instance_statefulset_name(db, index)}-0"


def instance_data_pvc_name(db: str, index: int) -> str:
    """Instance `index`'s data volume; instance 0's is data_pvc_name(db)."""
    return f"{DATA_VOLUME}-{instance_pod_name(db, index)}"


SLOT_PREFIX = "sdb_i"  # the replication slots of the standbys; the operator drops no other slot


def replication_slot_name(index: int) -> str:
    """The physical replication slot (on the primary) that instance `index` streams through as a standby."""
    return f"{SLOT_PREFIX}{index}"


def replica_service_name(db: str) -> str:
    """The read-only Service: the hot standbys."""
    return fit(db, "-ro")


def backup_pvc_name(db: str) -> str:
    """The volume backups and snapshots are written to; it outlives the SampleDB."""
    return f"{db}-backups"


def secret_name(db: str) -> str:
    """The Secret holding the application's credentials and connection details."""
    return f"{db}-credentials"


def superuser_secret_name(db: str) -> str:
    """The Secret holding the database's superuser credentials: the operator's, its pods' and its Jobs'; never the
    application's (docs/security.md "Roles inside PostgreSQL")."""
    return fit(db, "-superuser")


def configmap_name(db: str) -> str:
    """The ConfigMap holding postgresql.conf settings and connection details (no secrets)."""
    return f"{db}-config"


def headless_service_name(db: str) -> str:
    """The StatefulSet's governing Service (stable pod DNS names)."""
    return fit(db, "-headless")


def client_service_name(db: str) -> str:
    """The Service applications connect to."""
    return db


def pooler_name(db: str) -> str:
    """The pooler's Deployment, Service, ConfigMap and Secret (a Service name: a DNS label)."""
    return fit(db, "-pooler")


def read_only_pooler_name(db: str) -> str:
    """The read-only pooler's Deployment, Service and ConfigMap (spec.pooler.readOnlyInstances)."""
    return fit(db, "-pooler-ro")


def disruption_budget_name(db: str) -> str:
    """The PodDisruptionBudget over the standbys' pods (a database of more than one instance)."""
    return db


def primary_disruption_budget_name(db: str) -> str:
    """The PodDisruptionBudget over the primary's pod (a database of more than one instance)."""
    return fit(db, "-primary")


def service_host(db: str, namespace: str) -> str:
    return f"{client_service_name(db)}.{namespace}.svc"


def endpoint(db: str, namespace: str, port: int = POSTGRES_PORT) -> str:
    """The value of status.endpoint: "<service>.<namespace>.svc:<port>"."""
    return f"{service_host(db, namespace)}:{port}"


def job_name(db: str, kind: JobKind, token: str) -> str:
    """`<db>-<kind>-<hash>`; the hash of (db, kind, token) makes one name per distinct piece of work."""
    return fit(db, f"-{kind.value}-{short_hash(db, kind.value, token)}")


def init_job_name(db: str, uid: str) -> str:
    """The one-time init Job; keyed by the SampleDB's uid so a re-created database gets a new Job."""
    return job_name(db, JobKind.INIT, uid)


def backup_job_name(db: str, backup: str) -> str:
    """The Job that takes the SampleDBBackup named `backup`."""
    return job_name(db, JobKind.BACKUP, backup)


def snapshot_job_name(db: str, uid: str) -> str:
    """The Job taking the final snapshot before deletion (one per SampleDB incarnation)."""
    return job_name(db, JobKind.SNAPSHOT, uid)


def restore_job_name(db: str, backup: str) -> str:
    return job_name(db, JobKind.RESTORE, backup)


def prune_job_name(db: str, backup: str) -> str:
    """The Job that deletes the files of the SampleDBBackup `backup` when that object is deleted."""
    return job_name(db, JobKind.PRUNE, backup)


def verify_job_name(db: str, backup_uid: str, request: str) -> str:
    """The Job verifying one backup (by uid: a re-created backup of the same name is another) for one
    request (a sampledb.io/verify annotation value, or "" for spec.backup.verify)."""
    return job_name(db, JobKind.VERIFY, f"{backup_uid}/{request}")


def upgrade_job_name(db: str, from_version: str, to_version: str) -> str:
    return job_name(db, JobKind.UPGRADE, f"{from_version}->{to_version}")


def migration_job_name(db: str, digest: str) -> str:
    """The Job applying pending migrations; `digest` identifies the set of files to apply."""
    return job_name(db, JobKind.MIGRATE, digest)


def reload_job_name(db: str, uid: str, parameters_hash: str) -> str:
    """The Job making the server reload one set of parameters (by the database's uid and their hash)."""
    return job_name(db, JobKind.RELOAD, f"{uid}/{parameters_hash}")


def backup_name(db: str, reason: str, at: datetime) -> str:
    """A SampleDBBackup's name: `<db>-<reason>-<UTC yyyymmddhhmmss>` (a DNS subdomain, <= BACKUP_NAME_MAX)."""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at
    return f"{db}-{reason}-{utc.strftime('%Y%m%d%H%M%S')}"


def ca_secret_name(db: str) -> str:
    """The Secret holding the database's own certificate authority (ca.crt, ca.key): the operator's only."""
    return fit(db, "-ca")


def tls_secret_name(db: str) -> str:
    """The Secret holding the server certificate the operator issued (tls.crt, tls.key, ca.crt)."""
    return fit(db, "-tls")


def client_secret_name(db: str, role: str) -> str:
    """The Secret holding a declared role's client certificate (tls.crt, tls.key, ca.crt): `<db>-client.<role>`,
    the role's `_` written `-`. A database's name has no dot, so no two (database, role) pairs share a name."""
    return f"{fit(db, '-client')}.{role.replace('_', '-')}"
