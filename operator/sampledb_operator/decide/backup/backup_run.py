"""One pass of a SampleDBBackup (not being deleted) as a plan: its label, its Job, its status, its Events.

Pure: no I/O, no clock (the facts carry `now`). The reconciler (reconcilers/backup.py) gathers
`BackupFacts` from the caches, reads live only what `volume_read_needed` / `result_read_needed` ask
for, and `plan_backup` returns the pass:

| the backup                                   | plan                                                      |
|----------------------------------------------|-----------------------------------------------------------|
| without label sampledb.io/database=<db>      | that label alone (then planned again, see below)          |
| Succeeded or Failed                          | nothing: a finished backup is never touched again         |
| a name the backup script refuses             | Failed, Warning BackupFailed; no Job                      |
| its SampleDB missing                         | Pending; a rate-limited requeue                           |
| Job running (or Running, its Job gone),      | the Job deleted (background propagation); Failed, "Job    |
| database not Ready, data volume full (*)     | <job> stopped: VolumeFull: ..."; Warning BackupFailed     |
| no Job, database not Ready, data volume full | Pending "waiting for SampleDB <db> to be Ready: its data  |
| (*)                                          | volume is full (...); grow spec.storage.size or ..."      |
| no Job, database not Ready (not pre-delete)  | Pending "waiting for SampleDB <db> to be Ready"           |
| no Job, backup volume missing                | Pending; a rate-limited requeue                           |
| no Job, no files finalizer                   | that finalizer alone (then planned again)                 |
| no Job                                       | create it (announced BackupStarted), Running              |
| Job running                                  | Running                                                   |
| Job succeeded                                | Succeeded with location, version, size, checksum; Event   |
| Job failed                                   | Failed with the Job's reason; Warning BackupFailed        |

(*) not pre-delete. A full data volume is the SampleDB's Degraded=True with reason VolumeFull
(decide/lifecycle/stuck.py): its server has stopped, so a backup that runs then is stopped (the Job goes: nothing the
operator started keeps writing) and one not started waits, saying why and what to do. A pre-delete snapshot is left as
it is then, as before: it does not wait for Ready, and its Job fails visibly if the server never answers.

Invariants: the status is written only when it changes, with the resourceVersion it was computed from
(a pass on a stale copy writes nothing, so it never rewrites startedAt nor records an end twice), and
an end's Event follows its status write. A patch of the backup's metadata (the label, the finalizer
added before anything can write files) is a plan of its own, with `patched` set: every later write of
the pass needs the resourceVersion that patch answers, so the reconciler plans again from `patched`
with that resourceVersion (`with_resource_version`). Each such plan puts in place what the next one
finds, so a pass plans at most three times.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup.backup_files import FILES_FINALIZER, expected_location
from sampledb_operator.decide.effects import Create, Delete, Effect, Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import DATABASE_LABEL, bucket_label
from sampledb_operator.decide.status import JobState
from sampledb_operator.decide.volume_full import GROW_VOLUME, VOLUME_FULL, volume_full
from sampledb_operator.model import names
from sampledb_operator.model.backup import BackupPhase, SampleDBBackup
from sampledb_operator.model.conditions import is_true
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import dump
from sampledb_operator.model.validation import validate_backup

KIND = "SampleDBBackup"
FINAL = (BackupPhase.SUCCEEDED.value, BackupPhase.FAILED.value)
MESSAGE_LIMIT = 1000  # of status.message
MAX_PLANS = 3  # per pass: the label, the finalizer, the rest
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class BackupFacts:
    """Everything one pass of a SampleDBBackup reads."""

    backup: SampleDBBackup  # as read (no deletionTimestamp), or as this pass's metadata patch left it
    db: SampleDB | None  # spec.database, from the cache (read only when database_read_needed)
    job: JobState | None  # the backup's Job (job_name), from the cache; None: there is none
    now: datetime
    volume_exists: bool | None = None  # the backup volume (claim_name): read only when volume_read_needed
    job_result: Mapping[str, Any] = field(default_factory=dict)  # the finished Job's result line, read
    # (live) only when result_read_needed; {} when it has none


@dataclass(frozen=True, slots=True)
class BackupPass:
    """One plan of the pass, and what the reconciler does with its outcome.

    `patched`: the plan is a patch of the backup's metadata alone; the backup it leaves (but for its
    resourceVersion, which the server's answer gives): plan again from it. `counted`: the labels
    (reason, result) of backups_total, counted when the plan's status write was made.
    `snapshot_seconds`: a pre-delete snapshot's duration, observed with that count.
    """

    plan: Plan
    patched: SampleDBBackup | None = None
    counted: tuple[str, str] | None = None
    snapshot_seconds: float | None = None


def claim_name(backup: SampleDBBackup) -> str:
    """The volume the backup is written to: spec.storage.claimName, else the database's backups volume."""
    return expected_location(backup).pvc_name


def job_name(backup: SampleDBBackup) -> str:
    """The name of the backup's Job (derived from the backup's: a restart never starts a second one)."""
    return names.backup_job_name(backup.spec.database, backup.metadata.name)


def database_read_needed(backup: SampleDBBackup) -> bool:
    """The pass gets past the finished phases and a refused name: it looks at the database."""
    return backup.status.phase not in FINAL and not validate_backup(backup)


def _runs(facts: BackupFacts) -> bool:
    """The pass gets past the finished phases, a refused name and a missing database (whatever its label
    and finalizers: the facts are read once, before the pass patches those)."""
    return database_read_needed(facts.backup) and facts.db is not None


def _may_start(backup: SampleDBBackup, db: SampleDB) -> bool:
    """A pre-delete snapshot does not wait for Ready (a database being deleted is not reconciled back to
    Ready): its Job waits for the server itself and fails visibly if it never answers."""
    return str(backup.spec.reason) == "pre-delete" or is_true(db.status.conditions, "Ready")


def _held_by_full_volume(backup: SampleDBBackup, db: SampleDB) -> str | None:
    """Why `backup` must not run now: its database is not Ready and its data volume is full (volume_full's
    words); None otherwise, and always for a pre-delete snapshot (it does not wait for Ready: _may_start)."""
    return None if _may_start(backup, db) else volume_full(db)


def volume_read_needed(facts: BackupFacts) -> bool:
    """The pass would start the Job: whether the backup volume exists decides it."""
    return _runs(facts) and facts.job is None and facts.db is not None and _may_start(facts.backup, facts.db)


def result_read_needed(facts: BackupFacts) -> bool:
    """The pass records the end of the Job: its result line gives the size, checksum or failure detail."""
    return _runs(facts) and facts.job is not None and facts.job.finished


def plan_backup(facts: BackupFacts) -> BackupPass:
    """The plan of this pass of `facts.backup`."""
    backup = facts.backup
    if _labels(backup).items() - backup.metadata.labels.items():
        return _label(backup)
    if backup.status.phase in FINAL:
        return BackupPass(Plan())
    problems = validate_backup(backup)  # stored before the CRD refused it: the script would refuse it too
    if problems:
        return _failed(facts, "; ".join(p.message for p in problems))
    db = facts.db
    if db is None:
        return _status(facts, BackupPhase.PENDING, f"SampleDB {backup.spec.database} does not exist",
                       result=Result(requeue=True))
    full = _held_by_full_volume(backup, db)
    if full is not None and (backup.status.phase == BackupPhase.RUNNING.value if facts.job is None
                             else not facts.job.finished):
        return _stop(facts, db, full)
    if facts.job is None:
        return _start(facts, db, full)
    name = job_name(backup)
    if not facts.job.finished:
        return _status(facts, BackupPhase.RUNNING, f"Job {name} is running", started=True)
    if facts.job.succeeded:
        return _succeeded(facts, db)
    detail = facts.job_result.get("message") or facts.job.message
    return _failed(facts, f"Job {name} failed: {facts.job.reason}: {detail}")


def with_resource_version(backup: SampleDBBackup, answer: Obj) -> SampleDBBackup:
    """`backup` with the resourceVersion of the server's `answer` to a patch of it (unchanged without one)."""
    rv = (answer.get("metadata") or {}).get("resourceVersion") or backup.metadata.resource_version
    return backup.model_copy(update={"metadata": backup.metadata.model_copy(update={"resource_version": rv})})


def _labels(backup: SampleDBBackup) -> dict[str, str]:
    """The labels every backup carries: sampledb.io/database=<spec.database>, so `kubectl get sdbb -l
    sampledb.io/database=<db>` lists them all, and its database's bucket label (a sharded replica with
    filtered caches selects the backups of its shards' databases by it, decide.sharding)."""
    database = backup.spec.database  # never empty (the schema's minLength)
    return {DATABASE_LABEL: database, **bucket_label(backup.metadata.namespace or "", database)}


def _label(backup: SampleDBBackup) -> BackupPass:
    """Labels a backup that lacks _labels (a manual one may come without them; one made before the bucket
    label existed), in one patch, before anything else; other labels are kept."""
    wanted = _labels(backup)
    patch = {"metadata": {"labels": wanted, "resourceVersion": backup.metadata.resource_version}}
    labels = {**backup.metadata.labels, **wanted}
    return BackupPass(Plan((Patch(KIND, backup.metadata.name, patch),)),
                      patched=backup.model_copy(update={"metadata": backup.metadata.model_copy(
                          update={"labels": labels})}))


def _finalizer(backup: SampleDBBackup) -> BackupPass:
    """The files finalizer, added before anything can write files (decide/backup/backup_files.py)."""
    finalizers = [*backup.metadata.finalizers, FILES_FINALIZER]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": backup.metadata.resource_version}}
    return BackupPass(Plan((Patch(KIND, backup.metadata.name, patch),)),
                      patched=backup.model_copy(update={"metadata": backup.metadata.model_copy(
                          update={"finalizers": finalizers})}))


def _start(facts: BackupFacts, db: SampleDB, full: str | None) -> BackupPass:
    backup = facts.backup
    if not _may_start(backup, db):  # the SampleDB's next change brings this backup back (app.py's mapping)
        waiting = f"waiting for SampleDB {db.metadata.name} to be Ready"
        if full is not None:
            waiting += f": its data volume is full ({full}); {GROW_VOLUME}"
        return _status(facts, BackupPhase.PENDING, waiting)
    claim = claim_name(backup)
    if not facts.volume_exists:
        return _status(facts, BackupPhase.PENDING, f"backup volume {claim} does not exist",
                       result=Result(requeue=True))
    if FILES_FINALIZER not in backup.metadata.finalizers:
        return _finalizer(backup)
    body = jobs.backup_job(db, backup_name=backup.metadata.name, backup_uid=backup.metadata.uid or "",
                           claim_name=claim, reason=str(backup.spec.reason))
    name = str(body["metadata"]["name"])
    create = Create(body, EventSpec("Normal", "BackupStarted", f"started Job {name}"))
    running = _status(facts, BackupPhase.RUNNING, f"Job {name} started", started=True)
    return BackupPass(Plan((create, *running.plan.effects)))


def _stop(facts: BackupFacts, db: SampleDB, full: str) -> BackupPass:
    """The backup's Job deleted (it may be gone already: a refused status write of an earlier pass), then the
    backup Failed with reason VolumeFull and its Warning."""
    name = job_name(facts.backup)
    failed = _failed(facts, (
        f"Job {name} stopped: {VOLUME_FULL}: the data volume of SampleDB {db.metadata.name} is full and its server"
        f" stopped ({full}); {GROW_VOLUME}, then take the backup again once the database is Ready (scheduled"
        " backups resume at their next slot)"))
    return replace(failed, plan=Plan((Delete("Job", name), *failed.plan.effects), failed.plan.result))


def _succeeded(facts: BackupFacts, db: SampleDB) -> BackupPass:
    backup, result = facts.backup, facts.job_result
    extra: dict[str, Any] = {
        "location": {"pvcName": claim_name(backup), "path": f"{jobs.BACKUP_MOUNT}/{backup.metadata.name}.dump"},
        "version": db.status.current_version or db.spec.version,
    }
    if isinstance(result.get("size_bytes"), int):
        extra["sizeBytes"] = result["size_bytes"]
    if isinstance(result.get("sha256"), str) and len(result["sha256"]) == 64:
        extra["checksum"] = result["sha256"]
    if isinstance(result.get("store"), str) and result["store"].startswith("s3://"):
        extra["storeLocation"] = result["store"][:1200]
    written = _status(facts, BackupPhase.SUCCEEDED, "backup completed", completed=True, extra=extra)
    if not written.plan.effects:
        return written
    reason = str(backup.spec.reason)
    seconds = None
    if reason == "pre-delete" and backup.status.started_at is not None:
        seconds = max((facts.now - backup.status.started_at).total_seconds(), 0.0)
    event = Emit(EventSpec("Normal", "BackupSucceeded", f"backup of {db.metadata.name} completed"))
    return BackupPass(Plan((*written.plan.effects, event)), counted=(reason, "succeeded"), snapshot_seconds=seconds)


def _failed(facts: BackupFacts, message: str) -> BackupPass:
    written = _status(facts, BackupPhase.FAILED, message, completed=True)
    if not written.plan.effects:
        return written
    return BackupPass(Plan((*written.plan.effects, Emit(EventSpec("Warning", "BackupFailed", message)))),
                      counted=(str(facts.backup.spec.reason), "failed"))


def _status(facts: BackupFacts, phase: BackupPhase, message: str, *, started: bool = False,
            completed: bool = False, extra: Mapping[str, Any] | None = None,
            result: Result | None = None) -> BackupPass:
    """Write the backup's whole status, on the condition that the object is the one this pass read (its
    resourceVersion); no write when nothing changes."""
    backup = facts.backup
    stamp = facts.now.strftime(TIME_FORMAT)
    old = dump(backup.status)
    new: dict[str, Any] = {**old, "phase": phase.value, "message": message[:MESSAGE_LIMIT],
                           "observedGeneration": backup.metadata.generation}
    if started and "startedAt" not in new:
        new["startedAt"] = stamp
    if completed:
        new["completedAt"] = stamp
    new.update(extra or {})
    if new == old:
        return BackupPass(Plan(result=result))
    body = {"metadata": {"resourceVersion": backup.metadata.resource_version}, "status": new}
    effects: tuple[Effect, ...] = (Patch(KIND, backup.metadata.name, body, subresource="status"),)
    return BackupPass(Plan(effects, result))
