"""Backup verification as pure decisions: what to verify next, its Job, what a finished Job means.

Pure: no I/O, no clock (the caller passes `now`). A backup needs a verification when it has
Succeeded, is not being deleted, and either carries a sampledb.io/verify request other than the one
its status says was answered, or its database has spec.backup.verify and it was never verified.
At most one verify Job per database is unfinished at a time; the next one to start is an explicit
request before an automatic one, the newest backup first. A Job's name comes from the backup's uid
and the request, so a restart finds the same Job instead of starting a second one. BackupHealthy is
False while any backup's latest verification failed; a failed backup itself (from the schedule's
view) still takes precedence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.status import JobState
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.backup import BackupPhase
from sampledb_operator.model.conditions import Condition, ConditionType, set_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION, dump
from sampledb_operator.model.verification import (
    REQUEST_ANNOTATION,
    VERIFICATION_FAILED_HEALTH,
    VERIFIED_CONDITION,
    VERIFY_ANNOTATION,
    VerifyReason,
)

SCRATCH_MOUNT = "/sampledb/scratch"
BACKUP_ANNOTATION = "sampledb.io/backup"
# verify.sh's exit codes a retry cannot change: config (2), integrity (4), restore (6), data (8).
VERIFY_FATAL_EXIT_CODES = (2, 4, 6, 8)
FAILURE_REASONS: Mapping[int, VerifyReason] = MappingProxyType({
    4: VerifyReason.CHECKSUM_MISMATCH, 6: VerifyReason.RESTORE_FAILED, 8: VerifyReason.DATA_MISMATCH})
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class BackupView:
    """One SampleDBBackup, as far as verification cares."""

    name: str
    uid: str
    phase: str | None
    completed_at: datetime | None = None
    deleting: bool = False
    has_location: bool = False
    request: str | None = None  # the sampledb.io/verify annotation (None when absent or empty)
    recorded: bool = False  # status.verification exists: some verification has finished
    answered: str | None = None  # the request the latest one answered (None: the automatic one)
    verified: bool | None = None
    verified_at: datetime | None = None
    reason: str = ""  # of the Verified condition
    message: str = ""
    generation: int | None = None

    @classmethod
    def of(cls, obj: Obj) -> BackupView:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        record = status.get("verification")
        cond: Obj = next((c for c in status.get("conditions") or [] if c.get("type") == VERIFIED_CONDITION), {})
        request = str((meta.get("annotations") or {}).get(VERIFY_ANNOTATION) or "").strip()
        verified = status.get("verified")
        return cls(
            name=str(meta.get("name")), uid=str(meta.get("uid") or ""), phase=status.get("phase"),
            completed_at=timestamps.parse(status.get("completedAt")), deleting=bool(meta.get("deletionTimestamp")),
            has_location=bool((status.get("location") or {}).get("pvcName")), request=request or None,
            recorded=isinstance(record, dict),
            answered=(record or {}).get("request") if isinstance(record, dict) else None,
            verified=verified if isinstance(verified, bool) else None,
            verified_at=timestamps.parse(status.get("verifiedAt")), reason=str(cond.get("reason") or ""),
            message=str(cond.get("message") or ""), generation=meta.get("generation"))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A backup that needs a verification, for one request ("" for spec.backup.verify's)."""

    backup: BackupView
    request: str
    job_name: str

    @property
    def explicit(self) -> bool:
        return self.request != ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a finished verify Job found."""

    verified: bool
    reason: VerifyReason
    message: str
    tables: int | None = None
    rows: int | None = None
    compared: bool | None = None


@dataclass(frozen=True, slots=True)
class VerifyPlan:
    """What one pass does about verification."""

    finished: tuple[Candidate, ...]  # Jobs done: read their results and record them
    running: tuple[Candidate, ...]  # Jobs still running
    start: Candidate | None  # the Job to create now
    unverifiable: tuple[Candidate, ...]  # explicit requests for a backup without a location


def pending_request(backup: BackupView, *, auto: bool) -> str | None:
    """The request a backup has not had answered yet ("" for the automatic one), or None."""
    if backup.phase != BackupPhase.SUCCEEDED.value or backup.deleting:
        return None
    if backup.request is not None and not (backup.recorded and backup.answered == backup.request):
        return backup.request
    if auto and not backup.recorded:
        return ""
    return None


def candidates(db_name: str, backups: Sequence[BackupView], *, auto: bool) -> list[Candidate]:
    """Backups waiting for a verification, in the order they are taken: explicit requests first,
    then automatic ones, newest backup first within each."""
    out = []
    for b in backups:
        request = pending_request(b, auto=auto)
        if request is not None:
            out.append(Candidate(b, request, names.verify_job_name(db_name, b.uid, request)))
    out.sort(key=lambda c: (not c.explicit, -(c.backup.completed_at or _EPOCH).timestamp(), c.backup.name))
    return out


def plan(cands: Sequence[Candidate], job_states: Mapping[str, JobState | None]) -> VerifyPlan:
    """Record finished Jobs; start the first candidate without a Job unless one is still running."""
    finished: list[Candidate] = []
    running: list[Candidate] = []
    fresh: list[Candidate] = []
    unverifiable: list[Candidate] = []
    for c in cands:
        state = job_states.get(c.job_name)
        if state is not None:
            (finished if state.finished else running).append(c)
        elif not c.backup.has_location:
            if c.explicit:
                unverifiable.append(c)
        else:
            fresh.append(c)
    start = fresh[0] if fresh and not running else None
    return VerifyPlan(tuple(finished), tuple(running), start, tuple(unverifiable))


def outcome(job_name: str, state: JobState, result: Mapping[str, Any]) -> Outcome:
    """The verdict of a finished verify Job from its state and the script's JSON result (may be {})."""
    message = str(result.get("message") or "")
    tables, rows = _count(result.get("tables")), _count(result.get("rows"))
    compared = result.get("compared") if isinstance(result.get("compared"), bool) else None
    if state.succeeded:
        reason = VerifyReason.RESTORE_ONLY if compared is False else VerifyReason.VERIFIED
        return Outcome(True, reason, message or f"verify Job {job_name} succeeded", tables, rows, compared)
    code = result.get("code")
    reason = FAILURE_REASONS.get(code, VerifyReason.VERIFICATION_FAILED) if isinstance(code, int) else \
        VerifyReason.VERIFICATION_FAILED
    detail = message or f"{state.reason}: {state.message}".strip(": ")
    return Outcome(False, reason, f"verify Job {job_name} failed: {detail}", tables, rows, compared)


def not_verifiable(c: Candidate) -> Outcome:
    return Outcome(False, VerifyReason.NOT_VERIFIABLE,
                   f"backup {c.backup.name} has no location (status.location): there is nothing to verify")


def recorded_status(conditions: Sequence[Condition], c: Candidate, result: Outcome, now: datetime) -> Obj:
    """The status members a finished verification writes on its SampleDBBackup (a merge patch)."""
    cond = _verified_condition("True" if result.verified else "False", result.reason, result.message,
                               c.backup.generation)
    record: Obj = {"request": c.request or None, "jobName": c.job_name, "dataCompared": result.compared,
                   "tables": result.tables, "rows": result.rows}
    return {"verified": result.verified, "verifiedAt": now.strftime(TIME_FORMAT),
            "verification": {k: v for k, v in record.items() if v is not None},
            "conditions": [dump(x) for x in set_condition(conditions, cond, now)]}


def verifying_status(conditions: Sequence[Condition], c: Candidate, now: datetime) -> Obj | None:
    """The Verified=Unknown/Verifying condition while `c`'s Job runs; None when already there."""
    message = f"Job {c.job_name} is verifying the backup"
    current = next((x for x in conditions if x.type == VERIFIED_CONDITION), None)
    if current is not None and (current.status, current.reason, current.message) == (
            "Unknown", VerifyReason.VERIFYING.value, message):
        return None
    cond = _verified_condition("Unknown", VerifyReason.VERIFYING, message, c.backup.generation)
    return {"conditions": [dump(x) for x in set_condition(conditions, cond, now)]}


def after_record(view: BackupView, c: Candidate, result: Outcome, now: datetime) -> BackupView:
    """The view of a backup once its verification is recorded (the cache may not show it yet)."""
    return replace(view, recorded=True, answered=c.request or None, verified=result.verified,
                   verified_at=now.replace(microsecond=0), reason=result.reason.value, message=result.message)


def health(backups: Sequence[BackupView], generation: int | None) -> Condition | None:
    """BackupHealthy=False while any backup's latest verification failed (the newest is named); else None."""
    failed = [b for b in backups if not b.deleting and b.verified is False]
    if not failed:
        return None
    newest = max(failed, key=lambda b: (b.verified_at or _EPOCH, b.name))
    when = f" at {newest.verified_at.strftime(TIME_FORMAT)}" if newest.verified_at else ""
    more = f"; {len(failed) - 1} more backups failed their latest verification" if len(failed) > 1 else ""
    message = f"backup {newest.name} failed verification{when}: {newest.reason}: {newest.message}{more}"
    return Condition.model_validate({
        "type": ConditionType.BACKUP_HEALTHY.value, "status": "False", "reason": VERIFICATION_FAILED_HEALTH,
        "message": message[:1000], "observedGeneration": generation})


def merge_health(schedule: Condition | None, verification: Condition | None) -> Condition | None:
    """BackupHealthy from both sources: a failed backup first, then a failed verification, then the schedule's."""
    if verification is None or (schedule is not None and schedule.status == "False"):
        return schedule
    return verification


def verify_job(db: SampleDB, backup: Obj, c: Candidate) -> Obj:
    """The Job verifying `backup` (a Succeeded SampleDBBackup with a location) with verify.sh.

    Owned by the SampleDBBackup (it goes with it); runs the database's image alone (no connection,
    no password), mounts the backup's volume read-only and an emptyDir as $TMPDIR for the throw-away
    server. Exit codes a retry cannot change fail the Job at once (podFailurePolicy).
    """
    location = backup["status"]["location"]
    file_name = str(location.get("path") or "").rsplit("/", 1)[-1]
    stem = file_name.removesuffix(".dump") if file_name.endswith(".dump") else backup["metadata"]["name"]
    owner = {"apiVersion": API_VERSION, "kind": "SampleDBBackup", "name": backup["metadata"]["name"],
             "uid": backup["metadata"].get("uid") or "", "controller": True, "blockOwnerDeletion": True}
    body = jobs.job(
        db, name=c.job_name, component="verify", script="verify.sh",
        env=[{"name": "BACKUP_DIR", "value": jobs.BACKUP_MOUNT}, {"name": "BACKUP_NAME", "value": stem},
             {"name": "TMPDIR", "value": SCRATCH_MOUNT}],
        extra_volumes=[{"name": "backups", "persistentVolumeClaim": {"claimName": location["pvcName"],
                                                                     "readOnly": True}},
                       {"name": "scratch", "emptyDir": {}}],
        extra_mounts=[{"name": "backups", "mountPath": jobs.BACKUP_MOUNT, "readOnly": True},
                      {"name": "scratch", "mountPath": SCRATCH_MOUNT}],
        annotations={REQUEST_ANNOTATION: c.request, BACKUP_ANNOTATION: backup["metadata"]["name"]},
        owner=owner, connect=False,
    )
    body["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "FailJob",
         "onExitCodes": {"containerName": "verify", "operator": "In", "values": list(VERIFY_FATAL_EXIT_CODES)}},
    ]}
    return body




def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _verified_condition(status: str, reason: VerifyReason, message: str, generation: int | None) -> Condition:
    return Condition.model_validate({"type": VERIFIED_CONDITION, "status": status, "reason": reason.value,
                                     "message": message[:1000], "observedGeneration": generation})

