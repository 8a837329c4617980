"""Backup verification of one SampleDB's backups: read -> decide/backup/verify_plan.py -> apply.

A step of the SampleDB pass (so verifications of one database are serialised by its work queue
key, and BackupHealthy is computed in one place). It reads the database's SampleDBBackups and their
verify Jobs from the caches, and the results of the finished Jobs from their pods (live); the plan
records what finished Jobs found on their SampleDBBackup's status (with the resourceVersion it read
as precondition, then an event; the metric once written), marks running ones Verifying, and starts
the next Job when none runs. Each backup's writes are applied with that backup as their subject (the
Events are about it). A verify Job is owned by its SampleDBBackup and labelled with the database, so
its changes wake this step. Nothing is remembered between passes: the answered request lives in the
backup's status.verification. This module only reads and applies; every decision is in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sampledb_operator.decide.backup import verify_plan
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability import verification_metrics
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan
from sampledb_operator.reconcilers.job_result import job_result

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


async def read_inputs(ctx: Context, db: SampleDB) -> verify_plan.VerificationInputs:
    """What one pass reads: the cached backups of the namespace and their verify Jobs, then (live)
    the results of the finished Jobs."""
    ns = db.metadata.namespace or ""
    backups = tuple(ctx.caches.backups.list(ns))
    jobs = {name: ctx.cached("Job", ns, name) for name in verify_plan.jobs_to_read(db, backups)}
    inputs = verify_plan.VerificationInputs(db=db, backups=backups, jobs=jobs, results={}, now=ctx.clock.now())
    results = {name: await job_result(ctx, ns, name) for name in verify_plan.results_to_read(inputs)}
    return replace(inputs, results=results) if results else inputs


async def reconcile_verification(ctx: Context, db: SampleDB) -> VerificationOutcome:
    """One pass of the verification step for `db`'s backups."""
    ns, db_name = db.metadata.namespace or "", db.metadata.name
    planned = verify_plan.plan_verification(await read_inputs(ctx, db))
    if planned.init_metrics:
        verification_metrics.init_database(ns, db_name)
    requeue = False
    for writes in planned.writes:
        applied = await apply_plan(ctx, writes.subject, writes.plan, kind="SampleDBBackup", api_version=API_VERSION)
        requeue |= applied.stale and writes.retry_if_stale
        if writes.verdict is not None and not applied.stale:
            verification_metrics.observe(ns, db_name, succeeded=writes.verdict)
            log.info("backup verification recorded", namespace=ns, database=db_name,
                     backup=writes.subject.get("name"), verified=writes.verdict)
    return VerificationOutcome(condition=planned.condition, requeue=requeue)
