"""Object storage for a SampleDB: where WAL and base backups go (spec.backup.objectStore), and where a new
database is recovered from to a point in time (spec.recovery).

Pure data, no I/O. The store's layout follows Barman Cloud's (the archiver, docs/architecture.md):
`s3://<bucket>/<path>/<server>/{wals,base}/...`, where <path> is spec'd (default: the database's
namespace) and <server> is the database's name. A database archives to exactly one such prefix, and the
archiver refuses a prefix that already holds WAL (dataplane/archive-wal.sh), so two databases never write
the same one. Credentials are referenced, never held: the keys of a Secret in the database's namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import Field

from sampledb_operator.model.schema import (
    CONFIG_KEY_RE,
    NAME_MAX,
    KeyRef,
    Rule,
    SpecModel,
    StatusModel,
    SubdomainName,
    Time,
)
from sampledb_operator.model.spec_rules import CronSchedule

# An S3 bucket name (the rules of AWS's general purpose buckets: 3-63 lower-case letters, digits, '.'
# and '-', starting and ending with a letter or digit).
BUCKET_RE = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
# A path prefix inside the bucket: segments of letters, digits, '.', '_' and '-' separated by single '/',
# no leading or trailing '/', no segment starting with '.' (so no '.' or '..').
PATH_RE = r"^[A-Za-z0-9_-][A-Za-z0-9._-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$"
ENDPOINT_RE = r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/?$|^https?://\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?/?$"
REGION_RE = r"^[a-z0-9-]{1,64}$"
LSN_RE = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"
RESTORE_POINT_MAX = 63  # NAMEDATALEN - 1
DEFAULT_ARCHIVE_TIMEOUT = 60
DEFAULT_BASE_BACKUP_SCHEDULE = "@daily"
CREDENTIALS_OPT_IN_LABEL = "sampledb.io/object-store-credentials"  # a Secret's owner opts it in with "true"
RETENTION_RE = r"^[1-9][0-9]{0,3}[dwm]$"  # a recovery window: N days, weeks or months
VERIFY_RECOVERY_ANNOTATION = "sampledb.io/verify-recovery"  # on the SampleDB: each new value asks for a verification
DEFAULT_ACCESS_KEY_ID_KEY = "accessKeyId"
DEFAULT_SECRET_ACCESS_KEY_KEY = "secretAccessKey"


class ObjectStoreCredentials(SpecModel):
    """The store's access key pair: two keys of a Secret in the database's namespace."""

    secret_name: SubdomainName = Field(
        description="The Secret holding the access key pair. It is used only when it carries the label"
        ' sampledb.io/object-store-credentials: "true" (its owner\'s opt-in).'
    )
    access_key_id_key: str = Field(
        default=DEFAULT_ACCESS_KEY_ID_KEY, min_length=1, max_length=NAME_MAX, pattern=CONFIG_KEY_RE,
        description="The Secret's key whose value is the access key id.",
    )
    secret_access_key_key: str = Field(
        default=DEFAULT_SECRET_ACCESS_KEY_KEY, min_length=1, max_length=NAME_MAX, pattern=CONFIG_KEY_RE,
        description="The Secret's key whose value is the secret access key.",
    )


class ObjectStore(SpecModel):
    """An S3-compatible object store and a prefix in one of its buckets."""

    endpoint: str | None = Field(
        default=None, max_length=512, pattern=ENDPOINT_RE,
        description="The store's URL, e.g. https://minio.storage:9000; AWS S3 when omitted. Use https: the"
        " credentials and the data travel through it.",
    )
    bucket: str = Field(min_length=3, max_length=63, pattern=BUCKET_RE, description="The bucket (it must exist).")
    path: str | None = Field(
        default=None, min_length=1, max_length=512, pattern=PATH_RE,
        description="The prefix inside the bucket; the database's namespace when omitted. A database's WAL and"
        " base backups live under <path>/<database name>/.",
    )
    region: str | None = Field(
        default=None, max_length=64, pattern=REGION_RE, description="The bucket's region, if the store needs one."
    )
    credentials: ObjectStoreCredentials = Field(description="The access key pair, from a Secret.")
    ca: KeyRef | None = Field(
        default=None,
        description="A ConfigMap key holding the PEM CA bundle that signed the store's certificate (for a store"
        " with a private CA); the system's CAs when omitted.",
    )


class ArchiveSpec(ObjectStore):
    """Continuous WAL archiving and physical base backups to an object store."""

    archive_timeout_seconds: int = Field(
        default=DEFAULT_ARCHIVE_TIMEOUT, ge=1, le=3600,
        description="PostgreSQL's archive_timeout: a WAL segment with any write in it is archived at least this"
        " often, which bounds the data a lost cluster loses (the RPO) on a quiet database.",
    )
    base_backup_schedule: CronSchedule = Field(
        default=DEFAULT_BASE_BACKUP_SCHEDULE,
        description='When to take physical base backups, in cron format ("0 3 * * *", "@daily"), UTC. The first'
        " one is taken as soon as archiving works; recovery replays WAL from the base backup before the target,"
        " so frequent base backups make recoveries shorter.",
    )
    base_backup_from: Literal["PreferStandby", "Primary"] = Field(
        default="PreferStandby",
        description="Where base backups are taken: PreferStandby (default) reads a ready hot standby less than"
        " 16 MiB behind the primary when there is one, so the primary's disk and CPU serve only the"
        " application; Primary always reads the primary.",
    )
    base_backup_compression: Literal["lz4", "gzip", "none"] = Field(
        default="lz4",
        description="How base backups are compressed: lz4 (default: fast, about twice gzip's size; the image's"
        " Barman Cloud needs the lz4 Python module), gzip (smaller, bound by one core at ~10 MiB/s) or none.",
    )
    retention: str | None = Field(
        default=None, max_length=5, pattern=RETENTION_RE,
        description='A recovery window, e.g. "7d", "4w" or "3m" (days, weeks, months): after each base backup, the'
        " base backups no longer needed to recover any point in the window are deleted from the store, with the"
        " WAL that only they needed. The newest base backup is always kept. Everything is kept when omitted.",
    )
    copy_backups: bool = Field(
        default=True,
        description="Copy every SampleDBBackup (pg_dump) of this database to the store as well, under"
        " <path>/<database>/logical/<reason>/, so that it outlives the cluster (spec.restore.objectStore of a new"
        " SampleDB restores it). The copies of scheduled, pre-upgrade and pre-migration backups are kept as"
        " spec.backup.retention says (per kind); manual and pre-delete copies are kept. A backup whose copy fails"
        " is Failed (its files on the volume stay).",
    )
    verify_schedule: CronSchedule | None = Field(
        default=None,
        description="When to prove that the store restores this database (cron format, UTC; e.g. @weekly): a"
        " Job records a restore point on the primary with a checksum of every table, waits for its WAL to reach"
        " the store, recovers the newest base backup before it plus the WAL into a throw-away server and compares"
        " the tables. The measured recovery time (RTO) and data-loss window (RPO) go to status and metrics. Only"
        " on request (the annotation sampledb.io/verify-recovery) when omitted.",
    )


class RecoverySpec(SpecModel):
    """Create the database from another database's base backup and WAL in an object store, to a point in time."""

    cel_rules = (
        Rule(
            "[has(self.targetTime), has(self.targetName), has(self.targetLSN)].filter(x, x).size() <= 1",
            "recovery takes at most one of targetTime, targetName and targetLSN",
        ),
    )

    object_store: ObjectStore = Field(
        description="The store holding the source's archive (its path defaults to this database's namespace:"
        " set it to the source's namespace when that differs)."
    )
    database: str = Field(
        min_length=1, max_length=63, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="The source database's name: its WAL and base backups are under <path>/<database>/ in the store.",
    )
    target_time: Time | None = Field(
        default=None,
        description="Recover the transactions committed up to this time (RFC 3339, e.g. 2026-12-05T07:30:00Z)."
        " When no target is given, everything the archive holds is recovered.",
    )
    target_name: str | None = Field(
        default=None, min_length=1, max_length=RESTORE_POINT_MAX, pattern=r"^[A-Za-z0-9._:-]+$",
        description="Recover up to a restore point made with pg_create_restore_point().",
    )
    target_lsn: str | None = Field(
        default=None, alias="targetLSN", max_length=17, pattern=LSN_RE,
        description="Recover up to this WAL position (e.g. 0/3000060).",
    )


class BaseBackupRecord(StatusModel):
    """A physical base backup in the object store."""

    name: str = Field(max_length=NAME_MAX, description="The backup's name (its Job's).")
    backup_id: str | None = Field(default=None, max_length=64, description="The archiver's id of the backup.")
    completed_at: Time | None = Field(default=None, description="When it ended.")
    begin_wal: str | None = Field(default=None, max_length=24, description="The first WAL segment it needs.")
    end_lsn: str | None = Field(default=None, max_length=32, description="The WAL position it is consistent at.")
    size_bytes: int | None = Field(default=None, description="Its size in the store.")
    source: str | None = Field(default=None, max_length=NAME_MAX, description="The instance it was read from.")


class StoredBaseBackup(StatusModel):
    """A completed base backup in the object store, as the newest base backup Job listed them."""

    backup_id: str = Field(max_length=64, description="The archiver's id of the backup.")
    name: str | None = Field(default=None, max_length=NAME_MAX, description="Its name (its Job's).")
    completed_at: Time | None = Field(default=None, description="When it ended.")
    size_bytes: int | None = Field(default=None, description="The database's size it holds.")


class RecoveryVerification(StatusModel):
    """One verification that the store restores the database to a point in time (dataplane/verify-archive.sh)."""

    job_name: str = Field(max_length=NAME_MAX, description="The verification's Job.")
    request: str | None = Field(default=None, max_length=300, description="What asked for it (schedule or annotation).")
    verified: bool = Field(description="Whether the recovered copy held exactly the point's data.")
    reason: str = Field(max_length=64, description="The RecoveryVerified condition's reason it gave.")
    message: str = Field(default="", max_length=1024, description="What it found.")
    finished_at: Time | None = Field(default=None, description="When it ended.")
    point: str | None = Field(default=None, max_length=RESTORE_POINT_MAX, description="The restore point it recorded.")
    point_time: Time | None = Field(default=None, description="When the point was recorded on the primary.")
    point_lsn: str | None = Field(default=None, max_length=32, description="The point's WAL position.")
    base_backup: str | None = Field(default=None, max_length=64, description="The base backup it recovered from.")
    rto_seconds: float | None = Field(
        default=None, description="Seconds from the start of the restore until the recovered copy answered (RTO).",
    )
    rpo_seconds: float | None = Field(
        default=None,
        description="Seconds from the point until its WAL was in the store: what a cluster lost at that moment"
        " would have lost (RPO).",
    )
    tables: int | None = Field(default=None, description="Tables compared.")
    rows: int | None = Field(default=None, description="Rows compared.")


class ArchiveStatus(StatusModel):
    """Continuous archiving as the operator last saw it on the primary (pg_stat_archiver)."""

    destination: str | None = Field(default=None, max_length=1100, description="s3://<bucket>/<path>/<database>.")
    last_archived_wal: str | None = Field(default=None, max_length=64, description="The last WAL file archived.")
    last_archived_at: Time | None = Field(default=None, description="When it was archived.")
    last_failed_wal: str | None = Field(default=None, max_length=64, description="The last WAL file that failed.")
    last_failed_at: Time | None = Field(default=None, description="When it failed.")
    last_error: str | None = Field(default=None, max_length=1024, description="Why it failed (the archiver's words).")
    pending_segments: int | None = Field(
        default=None, description="WAL segments waiting on the primary's volume to be archived.",
    )
    lag_seconds: int | None = Field(
        default=None,
        description="Seconds of writes not yet in the store: since the oldest segment still waiting was"
        " completed (0 when nothing waits).",
    )
    last_base_backup: BaseBackupRecord | None = Field(default=None, description="The newest successful base backup.")
    first_recoverability_point: Time | None = Field(
        default=None, description="The oldest time a recovery can target (the oldest base backup's end).",
    )
    base_backups: list[StoredBaseBackup] | None = Field(
        default=None, max_length=8,
        description="The newest completed base backups in the store, newest first, as the newest base backup Job"
        " listed them after applying the retention.",
    )
    base_backups_count: int | None = Field(
        default=None, description="How many completed base backups the store held then.",
    )
    last_verification: RecoveryVerification | None = Field(
        default=None, description="The newest finished verification that the store restores the database.",
    )
    last_verified_at: Time | None = Field(
        default=None, description="When the newest successful verification ended.",
    )


@dataclass(frozen=True, slots=True)
class ArchiverState:
    """The primary's archiver, as SQL reports it (pg/client.archiver_state)."""

    archived_count: int = 0
    last_archived_wal: str | None = None
    last_archived_at: datetime | None = None
    failed_count: int = 0
    last_failed_wal: str | None = None
    last_failed_at: datetime | None = None
    pending: int = 0  # segments with a .ready file: completed, not archived yet
    oldest_pending_at: datetime | None = None  # when the oldest of them was completed
    error: str | None = None  # archive-wal.sh's last error line ("<time> <wal> <reason>"), if any
    now: datetime | None = None  # the server's clock when it answered
