"""Scheduled backups of a SampleDB (spec.backup.schedule and retention).

(Being implemented; the interface below is what reconcilers/sampledb.py calls.)
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.sampledb import BackupRecord, SampleDB
from sampledb_operator.reconcilers.context import Context


@dataclass(frozen=True)
class ScheduleOutcome:
    """What the schedule step found or did, for the SampleDB's status and requeue."""

    condition: Condition | None = None  # BackupHealthy
    last_backup: BackupRecord | None = None  # the newest Succeeded backup of any reason; None = unchanged
    requeue_after: float | None = None  # seconds until the next scheduled slot


async def reconcile_schedule(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool) -> ScheduleOutcome:
    """One pass of the scheduled-backup step; `busy` is True while an upgrade or migration runs."""
    return ScheduleOutcome()
