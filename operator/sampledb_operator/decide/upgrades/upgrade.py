"""Version upgrades as pure steps: which version and data directory the StatefulSet runs now.

status.currentVersion is what runs; spec.version is what is wanted. A minor change (same major)
takes a pre-upgrade backup when spec.upgrade.backupBeforeMinor says so, then rolls the
StatefulSet to the new image. A major change always takes the backup first; then the data moves into
a new data directory (pgdata-<major>) on the same volume, by spec.upgrade.method:
- Link (default): the instance is stopped (its StatefulSet scaled to 0), and once its pod is gone
  a Job of the new image, with the old image's installation copied in by an init container, runs
  pg_upgrade --check and pg_upgrade --link. A refused check falls back to Dump (the old server
  starts again first); a failure after pg_upgrade disabled the old directory (the point of no
  return) keeps the instance stopped and is reported, never retried by another method. After the
  switch, an analyze Job (vacuumdb --analyze-in-stages) runs without holding Ready back.
- Dump: an upgrade Job with the new image dumps the running old server (read-only meanwhile).
Only when the Job succeeds does the StatefulSet switch to the new image and directory.
The old directory is kept. A failure leaves the old version running and is not retried until
spec.version or the retry annotation changes (their values name the backup and the Job). One
upgrade at a time: while an upgrade (or thaw) Job of another attempt is unfinished, a new target
waits (WaitingForUpgrade) without a backup or a Job of its own.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.children import scheduling
from sampledb_operator.decide.children.desired_config import DATA_MOUNT, SCRIPTS_MOUNT, SECRET_USERNAME_KEY
from sampledb_operator.decide.children.desired_statefulset import container_security
from sampledb_operator.decide.labels import VERSION_ANNOTATION, db_name, selector_labels
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB, UpgradeMethod, image_for, major_of

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
    # Link: the job_* facts above are the Dump Job's (Dump chosen, or the fallback after a refused check)
    method: UpgradeMethod = UpgradeMethod.DUMP
    old_stopped: bool = False  # the instance's pod is gone and its StatefulSet runs 0 replicas
    link_job_exists: bool = False
    link_job_finished: bool = False
    link_job_succeeded: bool = False
    link_job_message: str = ""
    link_check_failed: bool = False  # pg_upgrade refused before the point of no return (--check, or its run)
    link_old_usable: bool = True  # False: it failed after pg_upgrade disabled the old data directory


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
    stop: bool = False  # the instance runs 0 replicas (Link: the old server stopped for pg_upgrade)
    start_link_job: bool = False  # create the pg_upgrade --link Job
    fallback: bool = False  # the Dump Job started now replaces a Link refused by pg_upgrade --check
    analyze: bool = False  # create the post-upgrade analyze Job (Link: pg_upgrade carries no statistics)


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
    fallback = False
    if inp.method is UpgradeMethod.LINK or inp.link_job_exists:
        linked = _link(inp, kind, span)
        if linked is not None:
            return linked
        fallback = True  # pg_upgrade --check refused: Dump, from the old server started again
    if not inp.job_exists and fallback:
        refused = (f"pg_upgrade refused the upgrade from {span} before the point of no return"
                   f" ({inp.link_job_message}); the old data directory is untouched")
        if not inp.sts_ready:
            return UpgradeDecision(*keep, kind, status="True", reason="FallingBackToDump",
                                   message=f"{refused}: starting {inp.current} again to upgrade with Dump")
        return UpgradeDecision(*keep, kind, start_job=True, fallback=True, status="True", reason="UpgradeJobRunning",
                               message=f"{refused}: moving the data with Dump into {data_dir_for(inp.wanted)}")
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


def _link(inp: UpgradeInput, kind: Kind, span: str) -> UpgradeDecision | None:
    """The Link method after the backup: stop, pg_upgrade --link, switch. None: its check refused, use Dump."""
    assert inp.current is not None
    keep = (inp.current, inp.data_dir)
    new_dir = data_dir_for(inp.wanted)
    if not inp.link_job_exists:
        if not inp.old_stopped:
            return UpgradeDecision(*keep, kind, stop=True, status="True", reason="StoppingServer",
                                   message=f"stopping {inp.current} for pg_upgrade --link from {span} into {new_dir}")
        return UpgradeDecision(*keep, kind, stop=True, start_link_job=True, status="True", reason="UpgradeJobRunning",
                               message=f"pg_upgrade --link from {span} into {new_dir} (the server is stopped)")
    if not inp.link_job_finished:
        return UpgradeDecision(*keep, kind, stop=True, status="True", reason="UpgradeJobRunning",
                               message=f"pg_upgrade --link from {span} into {new_dir} (the server is stopped)")
    if inp.link_job_succeeded:
        rolled = _rolled(inp, new_dir, kind, span)
        return replace(rolled, analyze=rolled.reason == "UpgradeSucceeded")
    if inp.link_check_failed:
        return None
    retry = f"Set a new spec.version or the {RETRY_ANNOTATION} annotation to retry"
    if not inp.link_old_usable:
        return UpgradeDecision(*keep, kind, stop=True, status="False", reason="UpgradeFailed", failed=True,
                               message=f"pg_upgrade --link failed after the point of no return: {inp.link_job_message}."
                                       f" pg_upgrade had disabled the old data directory {inp.data_dir} (its"
                                       " global/pg_control is now pg_control.old), so the old server is not started"
                                       " again and the instance stays stopped. Restore the pre-upgrade backup into a"
                                       " new SampleDB")
    return UpgradeDecision(*keep, kind, status="False", reason="UpgradeFailed", failed=True,
                           message=f"the upgrade Job failed: {inp.link_job_message}; rolled back: still on"
                                   f" {inp.current} in {inp.data_dir} (pg_upgrade had not disabled it). {retry}")


def _rolled(inp: UpgradeInput, data_dir: str, kind: Kind, span: str) -> UpgradeDecision:
    if inp.sts_ready and inp.sts_version == inp.wanted:
        return UpgradeDecision(inp.wanted, data_dir, kind, status="False", reason="UpgradeSucceeded",
                               message=f"upgraded from {span}")
    return UpgradeDecision(inp.wanted, data_dir, kind, status="True", reason="RollingOut",
                           message=f"rolling the database from {span}")


OLD_INSTALL_MOUNT = "/sampledb/old"  # the emptyDir the old image's installation is copied into


def link_job(db: SampleDB, *, name: str, old_image: str, old_data_dir: str, data_dir: str) -> dict[str, Any]:
    """The pg_upgrade --link Job: the NEW version's image, the data PVC, the instance stopped.

    An init container of the OLD image copies its PostgreSQL installation (and the libraries its
    programs need) into an emptyDir (upgrade.sh copy-binaries): OLD_BINDIR. No connection: the old
    cluster is started by the script itself on a private socket, as its bootstrap superuser (PGUSER,
    no password). No pod affinity: the database pod is gone (the volume's own node affinity, if any,
    places the pod).
    """
    pvc = names.data_pvc_name(db.metadata.name)
    old_bin = f"{OLD_INSTALL_MOUNT}/bin"
    user = {"name": "PGUSER", "valueFrom": {"secretKeyRef": {"name": names.superuser_secret_name(db_name(db)),
                                                              "key": SECRET_USERNAME_KEY}}}
    body = jobs.job(
        db, name=name, component="upgrade", script="upgrade.sh", connect=False,
        env=[user, {"name": "OLD_PGDATA", "value": f"{DATA_MOUNT}/{old_data_dir}"},
             {"name": "OLD_BINDIR", "value": old_bin}, {"name": "NEW_PGDATA", "value": f"{DATA_MOUNT}/{data_dir}"},
             {"name": "UPGRADE_METHOD", "value": "link"}, {"name": "UPGRADE_ANALYZE", "value": "0"}],
        extra_volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": pvc}},
                       {"name": "old-install", "emptyDir": {}}],
        extra_mounts=[{"name": "data", "mountPath": DATA_MOUNT},
                      {"name": "old-install", "mountPath": OLD_INSTALL_MOUNT}],
        image=image_for(db.spec), annotations={VERSION_ANNOTATION: db.spec.version},
    )
    pod_spec = body["spec"]["template"]["spec"]
    pod_spec["initContainers"] = [{
        "name": "old-binaries",
        "image": old_image,
        "command": ["bash", f"{SCRIPTS_MOUNT}/upgrade.sh", "copy-binaries", OLD_INSTALL_MOUNT],
        "env": [{"name": "RESULT_FILE", "value": "/dev/termination-log"}],
        "volumeMounts": [{"name": "scripts", "mountPath": SCRIPTS_MOUNT, "readOnly": True},
                         {"name": "old-install", "mountPath": OLD_INSTALL_MOUNT}, {"name": "tmp", "mountPath": "/tmp"}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": container_security(read_only_root=True),
    }]
    # A refused setting or check, a failed pg_upgrade or verification will fail again: no retry.
    body["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "upgrade", "operator": "In", "values": [2, 6, 8]}},
    ]}
    return body


def analyze_job(db: SampleDB, *, name: str) -> dict[str, Any]:
    """After a link upgrade: vacuumdb --all --analyze-in-stages against the running new server."""
    return jobs.job(db, name=name, component="upgrade", script="upgrade.sh analyze",
                    env=[{"name": "WAIT_TIMEOUT", "value": "300"}], annotations={VERSION_ANNOTATION: db.spec.version})


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
    return scheduling.run_beside(body, selector_labels(db))
