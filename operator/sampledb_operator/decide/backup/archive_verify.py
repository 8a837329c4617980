"""Proven recoveries, as a plan: verifications that the object store restores a database to a point in time.

Pure: no I/O, no clock (the caller passes `now`). A verification is a Job running dataplane/verify-archive.sh in
the database's image: it records a restore point on the primary together with a checksum of every table (taken
while writes to them are held for an instant, so the point and the checksums describe the same data), waits for
the point's WAL to reach the store by itself (the time it takes is the RPO at that moment), recovers the newest
base backup before the point plus the WAL into a throw-away server in its own scratch volume (the time until it
answers is the RTO) and compares every table. `plan_verification` decides, from the Jobs and their result lines:

- status.archive.lastVerification (the newest finished one) and lastVerifiedAt (the newest successful one);
- RecoveryVerified: True/Verified; False/RestoreFailed (the store lacks a WAL segment or holds a damaged one:
  named), DataMismatch (tables named), PointNotRecorded (the tables could not be locked for an instant),
  PointNotArchived (the point's WAL did not reach the store in time), VerificationFailed (anything else: the
  Job's own words); False/VerificationOverdue (a slot of spec.backup.objectStore.verifySchedule passed more than
  VERIFY_GRACE ago without a verification); Unknown/Verifying, Unknown/AwaitingBaseBackup. Absent while nothing
  asks for verifications (no verifySchedule, never requested);
- at most one verification Job at a time, named after its request (each request makes one Job, ever): each new
  value of the annotation sampledb.io/verify-recovery, then each slot of verifySchedule after the newest
  verification. None starts before the first base backup, while the database is not ready or is being deleted.

Invariants: a failed verification is not repeated by itself (the next slot or a new annotation value is); a
request already answered (its Job gone after its time to live) is never asked again, since the status records
the request the newest verification answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup import schedule
from sampledb_operator.decide.children import archive_config
from sampledb_operator.decide.effects import Create
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import db_name, namespace_of
from sampledb_operator.decide.status import JobState, job_state
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.archive import (
    VERIFY_RECOVERY_ANNOTATION,
    ArchiveSpec,
    ArchiveStatus,
    RecoveryVerification,
)
from sampledb_operator.model.conditions import Condition, ConditionStatus, ConditionType
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

VERIFY_COMPONENT = "recoveryverify"
REQUEST_ANNOTATION = "sampledb.io/verify-recovery-request"  # on a verification Job: the request it answers
SCRATCH_MOUNT = "/sampledb/scratch"
VERIFY_DEADLINE_SECONDS = 6 * 3600
VERIFY_GRACE = timedelta(hours=1)
ARCHIVE_WAIT_MARGIN = 300  # seconds beyond archive_timeout the point's WAL may take to reach the store
# verify-archive.sh's exit codes a retry cannot change: settings (2), the point or its archiving (5), the
# recovery (6), the data (8). A connection refused (9) or an internal error (1) is retried once.
FATAL_EXIT_CODES = (2, 5, 6, 8)
CHECK_REASONS: Mapping[str, str] = MappingProxyType({
    "point": "PointNotRecorded", "archive": "PointNotArchived", "restore": "RestoreFailed", "compare": "DataMismatch"})


@dataclass(frozen=True, slots=True)
class VerifyFacts:
    """What one pass of verification planning reads."""

    db: SampleDB
    now: datetime
    db_ready: bool = False
    jobs: tuple[Obj, ...] = ()  # this database's verification Jobs, from the cache
    results: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # finished Job -> its result line


@dataclass(frozen=True, slots=True)
class VerifyPass:
    """The status with the newest verification, the RecoveryVerified condition (None: nobody asks), the Job."""

    status: ArchiveStatus
    condition: Condition | None = None
    effects: tuple[Create, ...] = ()


def results_needed(db: SampleDB, jobs_: Sequence[Obj]) -> list[str]:
    """The finished verification Job whose result line the pass needs: the newest one, unless recorded."""
    finished = [j for j in _by_creation(jobs_) if (s := job_state(j)) is not None and s.finished]
    if not finished:
        return []
    name = str(finished[-1]["metadata"]["name"])
    last = db.status.archive.last_verification if db.status.archive is not None else None
    return [] if last is not None and last.job_name == name else [name]


def plan_verification(facts: VerifyFacts, status: ArchiveStatus) -> VerifyPass:
    """The pass (see the module docstring); `status` is status.archive as this pass has it so far."""
    db = facts.db
    spec = db.spec.backup.object_store
    if spec is None:
        return VerifyPass(status)
    jobs_ = _by_creation(facts.jobs)
    status = _with_result(status, jobs_, facts.results)
    running = [j for j in jobs_ if (s := job_state(j)) is None or not s.finished]
    request = _request(facts, spec, status, jobs_)
    effects: tuple[Create, ...] = ()
    if request is not None and not running and facts.db_ready and status.last_base_backup is not None \
            and db.metadata.deletion_timestamp is None:
        body = verify_job(db, request)
        effects = (Create(body, EventSpec("Normal", "RecoveryVerificationStarted", (
            f"verification Job {body['metadata']['name']} started ({_why(request)}): it records a restore point,"
            " recovers it from the store into a throw-away server and compares every table"))),)
    asked = spec.verify_schedule is not None or status.last_verification is not None or bool(jobs_) \
        or bool(db.metadata.annotations.get(VERIFY_RECOVERY_ANNOTATION))
    if not asked:
        return VerifyPass(status, None, effects)
    return VerifyPass(status, _condition(facts, spec, status, bool(running or effects)), effects)


# ------------------------------------------------------------------ results


def _with_result(status: ArchiveStatus, jobs_: Sequence[Obj],
                 results: Mapping[str, Mapping[str, Any]]) -> ArchiveStatus:
    """The newest finished Job's outcome, when the status does not hold it yet."""
    finished = [j for j in jobs_ if (s := job_state(j)) is not None and s.finished]
    if not finished:
        return status
    job = finished[-1]
    name = str(job["metadata"]["name"])
    last = status.last_verification
    if last is not None and last.job_name == name:
        return status
    state = job_state(job)
    assert state is not None
    record = _record(job, state, results.get(name) or {})
    update: dict[str, Any] = {"last_verification": record}
    if record.verified:
        update["last_verified_at"] = record.finished_at
    return status.model_copy(update=update)


def _record(job: Obj, state: JobState, result: Mapping[str, Any]) -> RecoveryVerification:
    meta = job["metadata"]
    verified = bool(state.succeeded and result.get("outcome") == "verified")
    reason = "Verified" if verified else CHECK_REASONS.get(str(result.get("check") or ""), "VerificationFailed")
    said = result.get("message")
    message = str(said) if said else (
        f"the Job {state.reason or 'failed'}: {state.message}" if not state.succeeded
        else "the Job succeeded but reported no result")
    finished = timestamps.parse((job.get("status") or {}).get("completionTime")) or _condition_time(job)
    return RecoveryVerification(
        job_name=str(meta["name"]), request=_str((meta.get("annotations") or {}).get(REQUEST_ANNOTATION), 300),
        verified=verified, reason=reason, message=message[:1024], finished_at=finished,
        point=_str(result.get("point"), 63), point_time=timestamps.parse(result.get("pointTime")),
        point_lsn=_str(result.get("pointLsn"), 32), base_backup=_str(result.get("backupId"), 64),
        rto_seconds=_number(result.get("rtoSeconds")), rpo_seconds=_number(result.get("archivedSeconds")),
        tables=_count(result.get("tables")), rows=_count(result.get("rows")))


# ------------------------------------------------------------------ requests and the Job


def _request(facts: VerifyFacts, spec: ArchiveSpec, status: ArchiveStatus, jobs_: Sequence[Obj]) -> str | None:
    """The request the next verification answers, or None: the annotation's new value first, then the schedule's
    latest slot after the newest verification."""
    asked = {str((j["metadata"].get("annotations") or {}).get(REQUEST_ANNOTATION, "")) for j in jobs_}
    last = status.last_verification
    if last is not None and last.request:
        asked.add(last.request)
    value = str(facts.db.metadata.annotations.get(VERIFY_RECOVERY_ANNOTATION) or "").strip()
    if value and f"manual:{value}" not in asked:
        return f"manual:{value}"
    slot = _slot(spec, facts.now, facts.db)
    if slot is None or (last is not None and last.finished_at is not None and last.finished_at >= slot):
        return None
    token = f"slot:{schedule.slot_text(slot)}"
    return token if token not in asked else None


def verify_job(db: SampleDB, request: str) -> Obj:
    """The Job verifying a recovery from the store (dataplane/verify-archive.sh): the primary's connection
    settings (it records the point there), the store's settings, and a scratch volume for the recovered copy (an
    emptyDir: the node's ephemeral storage needs room for the database). Failures a retry cannot change fail it at
    once (podFailurePolicy)."""
    spec = db.spec.backup.object_store
    assert spec is not None
    name = names.job_name(db_name(db), names.JobKind.RECOVERYVERIFY, f"{db.metadata.uid or ''}/{request}")
    ns = namespace_of(db)
    ca_volumes, ca_mounts = archive_config.ca_volumes(db.spec.model_copy(update={"recovery": None}))
    body = jobs.job(
        db, name=name, component=VERIFY_COMPONENT, script="verify-archive.sh",
        env=[{"name": "SAMPLEDB_VERIFY_POINT", "value": point_name(name)},
             {"name": "VERIFY_SCRATCH", "value": SCRATCH_MOUNT},
             {"name": "VERIFY_ARCHIVE_WAIT", "value": str(spec.archive_timeout_seconds + ARCHIVE_WAIT_MARGIN)},
             {"name": "WAIT_TIMEOUT", "value": "120"},
             *archive_config.archive_env(spec, ns, db_name(db))],
        extra_volumes=[{"name": "scratch", "emptyDir": {}}, *ca_volumes],
        extra_mounts=[{"name": "scratch", "mountPath": SCRATCH_MOUNT}, *ca_mounts],
        annotations={REQUEST_ANNOTATION: request},
    )
    body["spec"]["activeDeadlineSeconds"] = VERIFY_DEADLINE_SECONDS
    body["spec"]["backoffLimit"] = 1
    body["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "FailJob",
         "onExitCodes": {"containerName": VERIFY_COMPONENT, "operator": "In", "values": list(FATAL_EXIT_CODES)}},
    ]}
    return body


def point_name(job_name: str) -> str:
    """The restore point a verification Job records: unique per Job (recovery stops at the first point of a
    name), at most 63 bytes."""
    return f"sampledb-verify-{names.short_hash(job_name, length=16)}"


# ------------------------------------------------------------------ the condition


def _condition(facts: VerifyFacts, spec: ArchiveSpec, status: ArchiveStatus, running: bool) -> Condition:
    gen = facts.db.metadata.generation
    last = status.last_verification
    if last is None:
        if running:
            return _cond("Unknown", "Verifying", "the first verification of a recovery from the store is running", gen)
        if status.last_base_backup is None:
            return _cond("Unknown", "AwaitingBaseBackup",
                         "a recovery is verified once the first base backup is in the store", gen)
        return _cond("Unknown", "Verifying", "the first verification starts once the database is ready", gen)
    doing = "; another verification is running" if running else ""
    if not last.verified:
        return _cond("False", last.reason, f"verification {last.job_name} failed: {last.message}{doing}", gen)
    slot = _slot(spec, facts.now, facts.db)
    if not running and slot is not None and last.finished_at is not None and last.finished_at < slot \
            and facts.now - slot > VERIFY_GRACE:
        return _cond("False", "VerificationOverdue",
                     f"no verification since {_text(last.finished_at)}; the schedule's slot {_text(slot)} passed more"
                     f" than {int(VERIFY_GRACE.total_seconds() // 60)} min ago", gen)
    return _cond("True", "Verified", f"{last.message}{doing}", gen)


# ------------------------------------------------------------------ helpers


def _slot(spec: ArchiveSpec, now: datetime, db: SampleDB) -> datetime | None:
    if spec.verify_schedule is None:
        return None
    try:
        return schedule.latest_slot(spec.verify_schedule, now, db.metadata.creation_timestamp)
    except (ValueError, KeyError):
        return None


def _why(request: str) -> str:
    kind, _, value = request.partition(":")
    if kind == "manual":
        return f"asked by the annotation {VERIFY_RECOVERY_ANNOTATION}={value}"
    return f"scheduled for {value}"


def _by_creation(jobs_: Sequence[Obj]) -> list[Obj]:
    return sorted(jobs_, key=lambda j: (str(j["metadata"].get("creationTimestamp") or ""), str(j["metadata"]["name"])))


def _condition_time(job: Obj) -> datetime | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Failed", "Complete") and cond.get("status") == "True":
            return timestamps.parse(cond.get("lastTransitionTime"))
    return None


def _str(value: object, limit: int) -> str | None:
    return str(value)[:limit] if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) else None


def _number(value: object) -> float | None:
    return round(float(value), 1) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and value >= 0 else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else "an unknown time"


def _cond(status: ConditionStatus, reason: str, message: str, gen: int | None) -> Condition:
    return Condition(type=ConditionType.RECOVERY_VERIFIED.value, status=status, reason=reason,
                     message=message[:32768], observed_generation=gen)
