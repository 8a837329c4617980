"""Backup verification of one SampleDB's backups: cache -> decide/verify.py -> Jobs and backup statuses.

A step of the SampleDB pass (so verifications of one database are serialised by its work queue
key, and BackupHealthy is computed in one place). It reads the database's SampleDBBackups and their
verify Jobs from the caches, records what finished Jobs found on their SampleDBBackup's status
(with the resourceVersion it read as precondition, then the metric and an event), marks running
ones Verifying, and starts the next Job when none runs. A verify Job is owned by its SampleDBBackup
and labelled with the database, so its changes wake this step. Nothing is remembered between
passes: the answered request lives in the backup's status.verification.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from sampledb_operator.decide import verify
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model.backup import SampleDBBackupStatus
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import verification_metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.job_result import job_result
from sampledb_operator.reconcilers.schedule import backup_facts

log = get_logger(__name__)


@dataclass(frozen=True)
class VerificationOutcome:
    """What the verification step found, for the SampleDB's status and requeue."""

    condition: Condition | None = None  # BackupHealthy=False/VerificationFailed, or None (no opinion)
    requeue: bool = False  # a backup's status moved on under a write: look again

    @property
    def result(self) -> Result | None:
        """When the pass should come back for this step."""
        return Result(requeue=True) if self.requeue else None


async def reconcile_verification(ctx: Context, db: SampleDB) -> VerificationOutcome:
    """One pass of the verification step for `db`'s backups."""
    ns, db_name = db.metadata.namespace or "", db.metadata.name
    objs = {f.name: obj for f in backup_facts(ctx, db)
            if (obj := ctx.cached("SampleDBBackup", ns, f.name)) is not None}
    views = {name: verify.BackupView.of(obj) for name, obj in objs.items()}
    auto = db.spec.backup.verify
    cands = verify.candidates(db_name, list(views.values()), auto=auto)
    if auto or cands:
        verification_metrics.init_database(ns, db_name)
    states = {c.job_name: job_state(ctx.cached("Job", ns, c.job_name)) for c in cands}
    step = verify.plan(cands, states)
    requeue = False
    for c in step.finished:
        state = states[c.job_name]
        assert state is not None
        result = verify.outcome(c.job_name, state, await job_result(ctx, ns, c.job_name))
        requeue |= not await _record(ctx, db, objs[c.backup.name], c, result)
        views[c.backup.name] = verify.after_record(views[c.backup.name], c, result, ctx.clock.now())
    for c in step.unverifiable:
        result = verify.not_verifiable(c)
        requeue |= not await _record(ctx, db, objs[c.backup.name], c, result)
        views[c.backup.name] = verify.after_record(views[c.backup.name], c, result, ctx.clock.now())
    for c in step.running:
        await _mark_verifying(ctx, objs[c.backup.name], c)
    if step.start is not None:
        await _start(ctx, db, objs[step.start.backup.name], step.start)
    return VerificationOutcome(condition=verify.health(list(views.values()), db.metadata.generation),
                               requeue=requeue)


async def _start(ctx: Context, db: SampleDB, backup: Obj, c: verify.Candidate) -> None:
    body = verify.verify_job(db, backup, c)
    try:
        await ctx.apis["Job"].create(body)
    except Conflict:
        return  # created by an earlier pass whose watch event has not arrived yet
    what = f"request {c.request!r}" if c.explicit else "spec.backup.verify"
    log.info("verify Job created", namespace=db.metadata.namespace, database=db.metadata.name,
             backup=c.backup.name, job=c.job_name, request=c.request)
    await _event(ctx, backup, "Normal", "VerificationStarted", f"verifying with Job {c.job_name} ({what})")
    await _mark_verifying(ctx, backup, c)


async def _record(ctx: Context, db: SampleDB, backup: Obj, c: verify.Candidate, result: verify.Outcome) -> bool:
    """Write the outcome on the backup's status; then the metric and an event. False on Conflict."""
    patch = verify.recorded_status(_conditions(backup), c, result, ctx.clock.now())
    if not await _patch_status(ctx, backup, patch):
        return False
    ns, db_name = db.metadata.namespace or "", db.metadata.name
    verification_metrics.observe(ns, db_name, succeeded=result.verified)
    log.info("backup verification recorded", namespace=ns, database=db_name, backup=c.backup.name,
             verified=result.verified, reason=result.reason.value)
    if result.verified:
        await _event(ctx, backup, "Normal", "BackupVerified", f"{result.reason.value}: {result.message}")
    else:
        await _event(ctx, backup, "Warning", "BackupVerificationFailed", f"{result.reason.value}: {result.message}")
    return True


async def _mark_verifying(ctx: Context, backup: Obj, c: verify.Candidate) -> None:
    patch = verify.verifying_status(_conditions(backup), c, ctx.clock.now())
    if patch is not None:
        await _patch_status(ctx, backup, patch)


async def _patch_status(ctx: Context, backup: Obj, status: Obj) -> bool:
    """A merge patch of the backup's status, refused if the backup changed since it was read."""
    meta = backup["metadata"]
    body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
    try:
        await ctx.apis["SampleDBBackup"].patch(meta["name"], body, namespace=meta.get("namespace"),
                                               subresource="status")
    except Conflict:
        return False  # its watch event brings the newer object, and this step runs again
    except NotFound:
        return True  # deleted meanwhile: nothing left to record
    return True


def _conditions(backup: Obj) -> list[Condition]:
    try:
        return SampleDBBackupStatus.model_validate(backup.get("status") or {}).conditions
    except ValidationError:
        return []


async def _event(ctx: Context, backup: Obj, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(backup["metadata"], API_VERSION, "SampleDBBackup", type_, reason, message)
