"""Schema migrations of a SampleDB (spec.migrations): read the facts, plan the pass
(decide/upgrades/migration_step.py), apply the plan.

Reads the caches (the database's migrate Jobs and snapshot ConfigMaps; the pending files' Job,
pre-migration backup and snapshot), the user's ConfigMap live (it is not the operator's, so not
cached) when the step looks at it, and a finished Job's result line live when the plan needs it.
Every decision, and every write (backup, snapshot, Job, deletes, Events), is in the plan. Nothing
watches the user's ConfigMap, so every pass that waits for the user asks to look again after
ctx.recheck_period seconds (--recheck-period): a GET, no write.
"""

from __future__ import annotations

from dataclasses import replace

from sampledb_operator.decide.upgrades import migration_step as step
from sampledb_operator.decide.upgrades import migrations as mig
from sampledb_operator.decide.upgrades.migration_step import MigrationOutcome
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of
from sampledb_operator.reconcilers.job_result import job_result

__all__ = ["MigrationOutcome", "read_facts", "reconcile_migrations"]

log = get_logger(__name__)


async def read_facts(ctx: Context, db: SampleDB, *, db_ready: bool, blocked: bool) -> step.MigrationFacts:
    """What one pass of the migration step reads: the caches, the user's ConfigMap and a finished Job's
    result line (both live) when the step needs them."""
    ns = db.metadata.namespace
    facts = step.MigrationFacts(
        db=db, db_ready=db_ready, blocked=blocked, jobs=tuple(ctx.caches.jobs.list(ns, mig.job_selector(db))),
        snapshots=tuple(ctx.caches.configmaps.list(ns, mig.snapshot_selector(db))), now=ctx.clock.now(),
        recheck_period=ctx.recheck_period)
    if not step.source_read_needed(facts) or db.spec.migrations is None:
        return facts
    try:
        source = await ctx.apis["ConfigMap"].get(db.spec.migrations.config_map_name, ns or "")
    except NotFound:
        return facts  # no source: MigrationsSourceMissing
    facts = replace(facts, source=source)
    work = step.work_of(db, source)
    if work is not None:
        facts = replace(facts, job=ctx.cached("Job", ns, work.job),
                        backup=ctx.cached("SampleDBBackup", ns, work.backup),
                        snapshot=ctx.cached("ConfigMap", ns, work.snapshot))
    finished = step.result_read_needed(facts)
    if finished is not None:
        facts = replace(facts, job_result=await job_result(ctx, ns or "", finished))
    return facts


async def reconcile_migrations(ctx: Context, db: SampleDB, *, db_ready: bool, blocked: bool) -> MigrationOutcome:
    """One pass of the migration step; `blocked` is True while an upgrade is in progress."""
    planned = step.plan_migration_step(await read_facts(ctx, db, db_ready=db_ready, blocked=blocked))
    applied = await apply_plan(ctx, subject_of(db), planned.plan)
    if ("Job", planned.started_job) in applied.created:
        log.info("migration job created", namespace=db.metadata.namespace, name=db.metadata.name,
                 job=planned.started_job, pending=list(planned.started_files))
    return planned.outcome
