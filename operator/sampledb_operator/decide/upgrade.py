"""Version upgrades as pure steps: which version and data directory the StatefulSet runs now.

status.currentVersion is what runs; spec.version is what is wanted. A minor change (same major)
takes a pre-upgrade backup when spec.upgrade.backupBeforeMinor says so, then rolls the
StatefulSet to the new image. A major change always takes the backup first; then an upgrade Job
with the new image dumps the running old server into a new data directory (pgdata-<major>) on the
same volume; only when it succeeds does the StatefulSet switch to the new image and directory.
The old directory is kept. A failure leaves the old version running and is not retried until
spec.version or the retry annotation changes (their values name the backup and the Job). One
upgrade at a time: while an upgrade (or thaw) Job of another attempt is unfinished, a new target
waits (WaitingForUpgrade) without a backup or a Job of its own.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.desired_config import DATA_MOUNT
from sampledb_operator.decide.labels import VERSION_ANNOTATION, selector_labels
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB, image_for, major_of

DEFAULT_DATA_DIR = "pgdata"
RETRY_ANNOTATION = "sampledb.io/retry-upgrade"


class Kind(StrEnum):
    NONE = "none"
    MINOR = "minor"
    MAJOR = "major"
    REFUSED = "refused"  # a major downgrade


def data_dir_for(version: str) -> str:
    """The data directory a major upgrade to `version` creates."""
    return f"{DEFAULT_DATA_DIR}-{major_of(version)}"


def kind_of(current: str | None, wanted: str) -> Kind:
    if current is None or current == wanted:
        return Kind.NONE
    if major_of(wanted) > major_of(current):
        return Kind.MAJOR
    if major_of(wanted) < major_of(current):
        return Kind.REFUSED
    return Kind.MINOR


def work_token(current: str, wanted: str, retry: str) -> str:
    """Names one upgrade attempt: from, to and the retry annotation's value."""
    return f"{current}->{wanted}" + (f"#{retry}" if retry else "")


@dataclass(frozen=True, slots=True)
class UpgradeInput:
    wanted: str  # spec.version
    current: str | None  # status.currentVersion (None: never ran)
    data_dir: str  # the directory the StatefulSet uses now
    backup_required: bool
    backup_phase: str | None  # the pre-upgrade SampleDBBackup's phase (None: not created / no status)
    backup_message: str = ""
    job_finished: bool = False
    job_succeeded: bool = False
    job_exists: bool = False
    job_message: str = ""
    sts_ready: bool = False
    sts_version: str | None = None  # what the StatefulSet's template runs (its version annotation)
    migration_running: bool = False  # a schema migration Job runs: the upgrade does not start meanwhile
    other_job_running: str = ""  # an unfinished upgrade (or thaw) Job of another attempt: this one waits for it


@dataclass(frozen=True, slots=True)
class UpgradeDecision:
    version: str  # the version the StatefulSet should run now
    data_dir: str  # and its data directory
    kind: Kind
    start_job: bool = False  # create the major-upgrade Job
    status: str | None = None  # the Upgrading condition: "True", "False", or None (leave as is)
    reason: str = ""
    message: str = ""
    failed: bool = False


def decide(inp: UpgradeInput) -> UpgradeDecision:
    """Where the upgrade stands and what the StatefulSet runs meanwhile."""
    kind = kind_of(inp.current, inp.wanted)
    if kind is Kind.NONE:
        return UpgradeDecision(inp.wanted, inp.data_dir, kind)
    assert inp.current is not None
    keep = (inp.current, inp.data_dir)
    span = f"{inp.current} to {inp.wanted}"
    if kind is Kind.REFUSED:
        return UpgradeDecision(*keep, kind, status="False", reason="DowngradeRefused", failed=True,
                               message=f"a major-version downgrade from {span} is never attempted;"
                                       " restore a backup into a new SampleDB instead")
    if inp.migration_running and inp.backup_phase is None and not inp.job_exists:
        return UpgradeDecision(*keep, kind, status="True", reason="WaitingForMigration",
                               message="a schema migration is running; the upgrade starts after it")
    if inp.other_job_running and not inp.job_exists:
        # One upgrade at a time: two Jobs would share the volume (and NEW_PGDATA), and one's cleanup
        # or failure trap would undo the other's work.
        return UpgradeDecision(*keep, kind, status="True", reason="WaitingForUpgrade",
                               message=f"Job {inp.other_job_running} of an earlier upgrade attempt is still"
                                       f" running; the upgrade from {span} starts after it")
    if inp.backup_required and inp.backup_phase != "Succeeded":
        if inp.backup_phase == "Failed":
            return UpgradeDecision(*keep, kind, status="False", reason="UpgradeFailed", failed=True,
                                   message=f"the pre-upgrade backup failed ({inp.backup_message}); still on"
                                           f" {inp.current}. Set a new spec.version or the {RETRY_ANNOTATION}"
                                           " annotation to retry")
        return UpgradeDecision(*keep, kind, status="True", reason="BackingUp",
                               message=f"taking the pre-upgrade backup before upgrading from {span}")
    if kind is Kind.MINOR:
        return _rolled(inp, inp.data_dir, kind, span)
    if not inp.job_exists:
        return UpgradeDecision(*keep, kind, start_job=True, status="True", reason="UpgradeJobRunning",
                               message=f"moving the data from {span} into {data_dir_for(inp.wanted)}")
    if not inp.job_finished:
        return UpgradeDecision(*keep, kind, status="True", reason="UpgradeJobRunning",
                               message=f"moving the data from {span} into {data_dir_for(inp.wanted)}")
    if not inp.job_succeeded:
        return UpgradeDecision(*keep, kind, status="False", reason="UpgradeFailed", failed=True,
                               message=f"the upgrade Job failed: {inp.job_message}; rolled back: still on"
                                       f" {inp.current} in {inp.data_dir}. Set a new spec.version or the"
                                       f" {RETRY_ANNOTATION} annotation to retry")
    return _rolled(inp, data_dir_for(inp.wanted), kind, span)


def _rolled(inp: UpgradeInput, data_dir: str, kind: Kind, span: str) -> UpgradeDecision:
    if inp.sts_ready and inp.sts_version == inp.wanted:
        return UpgradeDecision(inp.wanted, data_dir, kind, status="False", reason="UpgradeSucceeded",
                               message=f"upgraded from {span}")
    return UpgradeDecision(inp.wanted, data_dir, kind, status="True", reason="RollingOut",
                           message=f"rolling the database from {span}")


def upgrade_job(db: SampleDB, *, name: str, data_dir: str) -> dict[str, Any]:
    """The major-upgrade Job: the NEW version's image dumps the running old server (over the network,
    read-only while it runs) into `data_dir` on the same volume, next to the old directory.

    It mounts the data PVC, so it must run on the database pod's node (ReadWriteOnce): pod affinity.
    """
    pvc = names.data_pvc_name(db.metadata.name)
    body = jobs.job(
        db,
        name=name,
        component="upgrade",
        script="upgrade.sh",
        env=[{"name": "NEW_PGDATA", "value": f"{DATA_MOUNT}/{data_dir}"},
             {"name": "UPGRADE_METHOD", "value": "auto"}, {"name": "WAIT_TIMEOUT", "value": "300"}],
        extra_volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}],
        extra_mounts=[{"name": "data", "mountPath": DATA_MOUNT}],
        image=image_for(db.spec),
        annotations={VERSION_ANNOTATION: db.spec.version},
    )
    pod_spec = body["spec"]["template"]["spec"]
    beside = {"labelSelector": {"matchLabels": selector_labels(db)}, "topologyKey": "kubernetes.io/hostname"}
    pod_spec["affinity"] = {**(pod_spec.get("affinity") or {}),
                            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [beside]}}
    return body
