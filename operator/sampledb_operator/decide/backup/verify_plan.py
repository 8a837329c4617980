"""One pass of the backup-verification step as a plan: records, Verifying marks, the next verify Job.

Pure. The pass reads the cached SampleDBBackups of the database's namespace, the cached verify
Jobs `jobs_to_read` names, and the JSON results of the finished ones `results_to_read` names (a
live read of their pods); `plan_verification` turns that into the writes about each backup, in
the order they are applied:
1. each finished Job's outcome, then each explicit request for a backup without a location (it
   cannot be verified): the backup's status patched with the resourceVersion the pass read as
   precondition, then BackupVerified or BackupVerificationFailed; once written, the metric counts
   it; a refused write (the backup changed) makes the step look again, and counts nothing;
2. Verified=Unknown/Verifying on the backups whose Job runs (a refused write is left to the next pass);
3. the next verify Job when none runs, announced by VerificationStarted (only when this pass created
   it), and its backup marked Verifying (also when an earlier pass had created the Job already).
Every write is about one SampleDBBackup, the subject of its Events: the writes come as one
`BackupWrites` per backup and step. BackupHealthy (the verification's view) counts the outcomes
this pass records, as if written: a refused write is retried by the next pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from sampledb_operator.decide.backup import verify
from sampledb_operator.decide.backup.schedule import incarnation_backups
from sampledb_operator.decide.effects import Create, Effect, Emit, Patch, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.status import job_state
from sampledb_operator.model.backup import SampleDBBackupStatus
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

KIND = "SampleDBBackup"


@dataclass(frozen=True)
class VerificationInputs:
    """What one pass of the verification step reads."""

    db: SampleDB
    backups: tuple[Obj, ...]  # every cached SampleDBBackup of the database's namespace
    jobs: Mapping[str, Obj | None]  # the cached verify Jobs `jobs_to_read` names (None: not there)
    results: Mapping[str, Mapping[str, Any]]  # the JSON results of the Jobs `results_to_read` names
    now: datetime


@dataclass(frozen=True)
class BackupWrites:
    """The writes about one SampleDBBackup, and the Events about it, applied in order."""

    subject: Obj  # the backup's name, namespace, uid and resourceVersion
    plan: Plan
    verdict: bool | None = None  # a verification recorded (verified or not): the metric counts it once written
    retry_if_stale: bool = False  # a refused write makes the step look again (a rate-limited requeue)


@dataclass(frozen=True)
class VerificationPlan:
    """Everything one pass of the verification step does, and what it reports to the SampleDB pass."""

    writes: tuple[BackupWrites, ...]
    condition: Condition | None  # BackupHealthy=False/VerificationFailed, or None (no opinion)
    init_metrics: bool  # export the database's verification series (it has or may have verifications)


def jobs_to_read(db: SampleDB, backups: Sequence[Obj]) -> tuple[str, ...]:
    """The verify Jobs a pass looks at: those of the backups waiting for a verification."""
    return tuple(c.job_name for c in _candidates(db, _views(db, backups)))


def results_to_read(inputs: VerificationInputs) -> tuple[str, ...]:
    """The finished verify Jobs whose results (their pods' termination messages) the plan needs."""
    return tuple(c.job_name for c in _candidates(inputs.db, _views(inputs.db, inputs.backups))
                 if (state := job_state(inputs.jobs.get(c.job_name))) is not None and state.finished)


def plan_verification(inputs: VerificationInputs) -> VerificationPlan:
    """The whole plan of one pass of the verification step."""
    db, now = inputs.db, inputs.now
    objs = {str(o["metadata"]["name"]): o for o in incarnation_backups(inputs.backups, db)}
    views = {name: verify.BackupView.of(obj) for name, obj in objs.items()}
    cands = _candidates(db, list(views.values()))
    states = {c.job_name: job_state(inputs.jobs.get(c.job_name)) for c in cands}
    step = verify.plan(cands, states)
    writes: list[BackupWrites] = []
    recorded = [(c, verify.outcome(c.job_name, state, inputs.results.get(c.job_name) or {}))
                for c in step.finished if (state := states[c.job_name]) is not None]
    recorded += [(c, verify.not_verifiable(c)) for c in step.unverifiable]
    for c, result in recorded:
        writes.append(record(objs[c.backup.name], c, result, now))
        views[c.backup.name] = verify.after_record(views[c.backup.name], c, result, now)
    for c in step.running:
        marked = mark_verifying(objs[c.backup.name], c, now)
        if marked is not None:
            writes.append(BackupWrites(subject_of(objs[c.backup.name]), Plan((marked,))))
    if step.start is not None:
        writes.append(start(db, objs[step.start.backup.name], step.start, now))
    return VerificationPlan(tuple(writes), verify.health(list(views.values()), db.metadata.generation),
                            init_metrics=db.spec.backup.verify or bool(cands))


def record(backup: Obj, c: verify.Candidate, result: verify.Outcome, now: datetime) -> BackupWrites:
    """The outcome on the backup's status (if it is still the one read), then its Event."""
    status = verify.recorded_status(conditions_of(backup), c, result, now)
    detail = f"{result.reason.value}: {result.message}"
    event = EventSpec("Normal", "BackupVerified", detail) if result.verified else \
        EventSpec("Warning", "BackupVerificationFailed", detail)
    return BackupWrites(subject_of(backup), Plan((_status_patch(backup, status), Emit(event))),
                        verdict=result.verified, retry_if_stale=True)


def start(db: SampleDB, backup: Obj, c: verify.Candidate, now: datetime) -> BackupWrites:
    """The verify Job of `c` (announced when this pass created it), then its backup marked Verifying."""
    what = f"request {c.request!r}" if c.explicit else "spec.backup.verify"
    effects: list[Effect] = [Create(verify.verify_job(db, backup, c), announce=EventSpec(
        "Normal", "VerificationStarted", f"verifying with Job {c.job_name} ({what})"))]
    marked = mark_verifying(backup, c, now)
    if marked is not None:
        effects.append(marked)
    return BackupWrites(subject_of(backup), Plan(tuple(effects)))


def mark_verifying(backup: Obj, c: verify.Candidate, now: datetime) -> Patch | None:
    """Verified=Unknown/Verifying while `c`'s Job runs; None when the backup says so already."""
    status = verify.verifying_status(conditions_of(backup), c, now)
    return _status_patch(backup, status) if status is not None else None


def subject_of(backup: Obj) -> Obj:
    """A SampleDBBackup as the subject of a plan (what apply_plan needs of its metadata)."""
    meta = backup.get("metadata") or {}
    return {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}


def conditions_of(backup: Obj) -> list[Condition]:
    """The conditions of a backup's status ([] when its status does not read as one)."""
    try:
        return SampleDBBackupStatus.model_validate(backup.get("status") or {}).conditions
    except ValidationError:
        return []


def _status_patch(backup: Obj, status: Obj) -> Patch:
    """A merge patch of the backup's status, refused if the backup changed since it was read."""
    meta = backup["metadata"]
    return Patch(KIND, str(meta["name"]), {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                                           "status": status}, subresource="status")


def _views(db: SampleDB, backups: Sequence[Obj]) -> list[verify.BackupView]:
    return [verify.BackupView.of(o) for o in incarnation_backups(backups, db)]


def _candidates(db: SampleDB, views: Sequence[verify.BackupView]) -> list[verify.Candidate]:
    return verify.candidates(db.metadata.name, views, auto=db.spec.backup.verify)
