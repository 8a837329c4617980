"""Schema migrations of a SampleDB (spec.migrations): pending files -> pre-migration backup -> Job.

(Being implemented; the interface below is what reconcilers/sampledb.py calls.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.sampledb import AppliedMigration, Problem, SampleDB
from sampledb_operator.reconcilers.context import Context


@dataclass(frozen=True)
class MigrationOutcome:
    """What the migration step found or did, for the SampleDB's status."""

    conditions: tuple[Condition, ...] = ()  # e.g. Migrated (True/False with reason)
    applied: tuple[AppliedMigration, ...] | None = None  # new status.appliedMigrations, None = unchanged
    degraded: tuple[Problem, ...] = field(default_factory=tuple)
    busy: bool = False  # a migration (or its backup) is running: phase Migrating
    requeue: bool = False  # look again with backoff (e.g. the ConfigMap is missing)


async def reconcile_migrations(ctx: Context, db: SampleDB, *, db_ready: bool, blocked: bool) -> MigrationOutcome:
    """One pass of the migration step; `blocked` is True while an upgrade is in progress."""
    if db.spec.migrations is None or not db_ready or blocked:
        return MigrationOutcome()
    raise NotImplementedError("schema migrations are not implemented yet")
