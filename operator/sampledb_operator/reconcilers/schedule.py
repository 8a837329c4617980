"""Scheduled backups of a SampleDB (spec.backup.schedule and retention), status.lastBackup, BackupHealthy.

One pass reads the SampleDBBackups of the database's namespace from the cache, asks
decide/backup/schedule_plan.py for the pass's plan (the due slot's SampleDBBackup, which the
BackupReconciler runs; what retention prunes; the Event of a BackupHealthy transition) and applies
it. A scheduled backup's name is derived from its slot, so a restart never takes a second one for
the same slot. Only backups of this incarnation count (the database-uid label, or created after the
SampleDB), and only those the operator created are ever deleted. Steady state writes nothing: the
condition's message and lastBackup change only when a backup finishes. This module only reads and
applies; every decision is in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.backup import schedule as sch
from sampledb_operator.decide.backup import schedule_plan
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.sampledb_status import BackupRecord
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of

log = get_logger(__name__)


@dataclass(frozen=True)
class ScheduleOutcome:
    """What the schedule step found or did, for the SampleDB's status and requeue."""

    condition: Condition | None = None  # BackupHealthy
    last_backup: BackupRecord | None = None  # the newest Succeeded backup of any reason; None = unchanged
    last_snapshot: BackupRecord | None = None  # the newest Succeeded pre-upgrade/-migration one; None = unchanged
    requeue_after: float | None = None  # seconds until the next scheduled slot

    @property
    def result(self) -> Result | None:
        """When the pass should come back for this step: the next scheduled slot."""
        return Result(requeue_after=self.requeue_after) if self.requeue_after is not None else None


def read_inputs(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool,
                verification: Condition | None) -> schedule_plan.ScheduleInputs:
    """What one pass of the schedule step reads: the cached SampleDBBackups of the namespace, the time."""
    return schedule_plan.ScheduleInputs(
        db=db, backups=tuple(ctx.caches.backups.list(db.metadata.namespace or "")), now=ctx.clock.now(),
        db_ready=db_ready, busy=busy, verification=verification)


async def reconcile_schedule(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool,
                             verification: Condition | None = None) -> ScheduleOutcome:
    """One pass of the scheduled-backup step; `busy` is True while an upgrade or migration runs;
    `verification` is BackupHealthy as the verification step sees it (decide/backup/verify.merge_health)."""
    planned = schedule_plan.plan_schedule(read_inputs(ctx, db, db_ready=db_ready, busy=busy,
                                                      verification=verification))
    applied = await apply_plan(ctx, subject_of(db), planned.plan)
    if planned.slot is not None and applied.created:
        log.info("scheduled backup created", namespace=db.metadata.namespace, database=db.metadata.name,
                 slot=sch.slot_text(planned.slot))
    return ScheduleOutcome(condition=planned.condition, last_backup=planned.last_backup,
                           last_snapshot=planned.last_snapshot, requeue_after=planned.requeue_after)
