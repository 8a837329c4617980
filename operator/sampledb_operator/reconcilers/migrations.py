"""Schema migrations of a SampleDB (spec.migrations): pending files -> pre-migration backup -> Job.

One pass reads the user's ConfigMap (not cached: it is not the operator's), asks
decide/migrations.py what is pending, and moves one step: take the pre-migration backup, then
snapshot the files into an immutable ConfigMap and start the migrate Job on it, then record the
Job's outcome in status.appliedMigrations. Every name is derived from the database's uid and the
digest of the pending files, so a restart finds the same backup, snapshot and Job; a failed Job
is never run again: only a changed ConfigMap (a new digest) makes a new attempt. One migrate Job
runs at a time per database. Nothing watches the user's ConfigMap, so every pass that waits for
the user asks for a rate-limited requeue (reads only). Steady state writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from sampledb_operator.decide import desired as d
from sampledb_operator.decide import jobs
from sampledb_operator.decide import migrations as mig
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.status import JobState, job_state
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.conditions import Condition, get_condition, is_true
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result, combine
from sampledb_operator.model.sampledb import AppliedMigration, Problem, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.backup_request import ensure_backup
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.job_result import job_result

log = get_logger(__name__)
MIGRATED = "Migrated"
COMPONENT = "migrate"
BACKUP_REASON = "pre-migration"
MESSAGE_LIMIT = 1000
DETAIL_LIMIT = 600  # of the script's message, so the advice after it always fits


# Nothing watches the user's ConfigMap (it carries no label of ours); a database whose migrations
# wait for an edit of it looks again every ctx.recheck_period seconds (--recheck-period): a GET, no write.


@dataclass(frozen=True)
class MigrationOutcome:
    """What the migration step found or did, for the SampleDB's status."""

    conditions: tuple[Condition, ...] = ()  # e.g. Migrated (True/False with reason)
    applied: tuple[AppliedMigration, ...] | None = None  # new status.appliedMigrations, None = unchanged
    degraded: tuple[Problem, ...] = field(default_factory=tuple)
    busy: bool = False  # a migration (or its backup) is running: phase Migrating
    requeue: bool = False  # look again with backoff (e.g. the ConfigMap is missing)
    recheck_after: float | None = None  # look at the user's ConfigMap again after this many seconds

    @property
    def result(self) -> Result | None:
        """When the pass should come back for this step."""
        return combine(Result(requeue=self.requeue), Result(requeue_after=self.recheck_after))


def _condition(db: SampleDB, ok: bool, reason: str, message: str) -> Condition:
    return Condition(type=MIGRATED, status="True" if ok else "False", reason=reason,
                     message=message[:MESSAGE_LIMIT], observed_generation=db.metadata.generation)


def _waiting_for_user(ctx: Context, db: SampleDB, problem: Problem, *, degraded: bool = True) -> MigrationOutcome:
    """A stop only an edit of the ConfigMap can lift; nothing watches it, so look again with backoff."""
    return MigrationOutcome(conditions=(_condition(db, False, problem.reason, problem.message),),
                            degraded=(problem,) if degraded else (), recheck_after=ctx.recheck_period)


def _busy(db: SampleDB, reason: str, message: str) -> MigrationOutcome:
    return MigrationOutcome(conditions=(_condition(db, False, reason, message),), busy=True)


def _names(files: Sequence[mig.MigrationFile]) -> str:
    return mig.quote_names([f.name for f in files])


async def reconcile_migrations(ctx: Context, db: SampleDB, *, db_ready: bool, blocked: bool) -> MigrationOutcome:
    """One pass of the migration step; `blocked` is True while an upgrade is in progress."""
    if db.spec.migrations is None:
        return await _not_configured(ctx, db)
    if not db_ready or blocked:
        return MigrationOutcome()
    if not is_true(db.status.conditions, "Ready"):
        # The pre-migration backup needs a Ready database, and init SQL runs before any migration.
        return MigrationOutcome(conditions=(_condition(
            db, False, "WaitingForDatabase", "migrations run once the database is ready and initialized"),))
    ns = db.metadata.namespace or ""
    source_name = db.spec.migrations.config_map_name
    try:
        source = await ctx.apis["ConfigMap"].get(source_name, ns)
    except NotFound:
        missing = Problem("MigrationsSourceMissing", f"ConfigMap {source_name} with the migrations does not exist",
                          mig.FIELD)
        # a missing reference, like a missing init ConfigMap: look again with backoff
        return MigrationOutcome(conditions=(_condition(db, False, missing.reason, missing.message),), requeue=True)
    plan = mig.plan_migrations(mig.source_files(source), db.status.applied_migrations)
    if plan.problem is not None:
        return _waiting_for_user(ctx, db, plan.problem)
    if not plan.pending:
        await _remove_stale_snapshots(ctx, db)
        return _up_to_date(ctx, db)
    return await _apply_pending(ctx, db, plan, source)


async def _not_configured(ctx: Context, db: SampleDB) -> MigrationOutcome:
    """spec.migrations was removed: say so if a Migrated condition is left from before, else stay silent."""
    if get_condition(db.status.conditions, MIGRATED) is None:
        return MigrationOutcome()
    await _remove_stale_snapshots(ctx, db)
    return MigrationOutcome(conditions=(_condition(
        db, True, "NotConfigured",
        f"spec.migrations is not set; {len(db.status.applied_migrations)} migrations applied earlier"),))


def _up_to_date(ctx: Context, db: SampleDB) -> MigrationOutcome:
    """Nothing pending. The condition of the run that applied the last files is kept as it is."""
    old = get_condition(db.status.conditions, MIGRATED)
    if old is not None and old.status == "True" and old.reason == "MigrationsApplied":
        cond = old.model_copy(update={"observed_generation": db.metadata.generation})
    else:
        cond = _condition(db, True, "UpToDate", f"{len(db.status.applied_migrations)} migrations applied")
    return MigrationOutcome(conditions=(cond,), recheck_after=ctx.recheck_period)  # to notice new files


async def _apply_pending(ctx: Context, db: SampleDB, plan: mig.MigrationPlan, source: Obj) -> MigrationOutcome:
    ns = db.metadata.namespace or ""
    job_name = names.migration_job_name(db.metadata.name, mig.job_token(db.metadata.uid or "", plan.digest))
    job = ctx.cached("Job", ns, job_name)
    if job is None:
        others = [n for n in _unfinished_jobs(ctx, db) if n != job_name]
        if others:
            return _busy(db, "Migrating", f"waiting for the migration Job {others[0]} to finish")
        return await _start(ctx, db, plan, source, job_name)
    state = job_state(job)
    assert state is not None
    if not state.finished:
        return _busy(db, "Migrating", f"Job {job_name} is applying {len(plan.pending)} migration(s):"
                                      f" {_names(plan.pending)}")
    await _remove_stale_snapshots(ctx, db)
    if state.succeeded:
        return await _succeeded(ctx, db, plan, job)
    return await _failed(ctx, db, plan, job_name, state)


async def _start(ctx: Context, db: SampleDB, plan: mig.MigrationPlan, source: Obj, job_name: str) -> MigrationOutcome:
    """The pre-migration backup first; once it Succeeded, the snapshot ConfigMap and the Job."""
    ns = db.metadata.namespace or ""
    backup, phase = await ensure_backup(ctx, db, reason=BACKUP_REASON, token=plan.digest)
    if phase == "Failed":
        detail = ((ctx.cached("SampleDBBackup", ns, backup) or {}).get("status") or {}).get("message") or "failed"
        return _waiting_for_user(ctx, db, Problem(
            "PreMigrationBackupFailed",
            f"the pre-migration backup {backup} failed ({detail}); no migration runs without it. Changing the"
            " migrations ConfigMap makes a new attempt", mig.FIELD))
    if phase != "Succeeded":
        return _busy(db, "BackingUp", f"taking the pre-migration backup {backup} before applying"
                                      f" {_names(plan.pending)}")
    snapshot = mig.snapshot_configmap(db, plan.files, source)
    snapshot_name = snapshot["metadata"]["name"]
    if ctx.cached("ConfigMap", ns, snapshot_name) is None:
        with contextlib.suppress(Conflict):  # an earlier pass made it; its content is its name
            await ctx.apis["ConfigMap"].create(snapshot)
    body = jobs.migration_job(db, name=job_name, snapshot_configmap=snapshot_name, digest=plan.digest)
    try:
        await ctx.apis["Job"].create(body)
        log.info("migration job created", namespace=ns, name=db.metadata.name, job=job_name,
                 pending=[f.name for f in plan.pending])
        await _event(ctx, db, "Normal", "MigrationStarted",
                     f"Job {job_name} applies {len(plan.pending)} migration(s): {_names(plan.pending)}")
    except Conflict:
        pass
    return _busy(db, "Migrating", f"Job {job_name} is applying {len(plan.pending)} migration(s):"
                                  f" {_names(plan.pending)}")


async def _succeeded(ctx: Context, db: SampleDB, plan: mig.MigrationPlan, job: Obj) -> MigrationOutcome:
    """The records of a completed run. The database's own table is the truth of what ran: the files
    migrate.sh found already recorded there ("already": a database adopted from a retained volume, whose
    new SampleDB has no records) are recorded as applied earlier, not by this Job."""
    at = timestamps.parse((job.get("status") or {}).get("completionTime")) or ctx.clock.now()
    result = await job_result(ctx, db.metadata.namespace or "", str(job["metadata"]["name"]))
    before = frozenset(v for v in result.get("already") or [] if isinstance(v, int))
    ran = [f for f in plan.pending if f.version not in before]
    earlier = [f for f in plan.pending if f.version in before]
    applied = mig.with_applied(db.status.applied_migrations, plan.pending, at, recorded_before=before)
    message = f"applied {len(ran)} migration(s): {_names(ran)}" if ran else "no migration needed to run"
    if earlier:
        message += (f"; {len(earlier)} already recorded in the database (sampledb_meta.schema_migrations),"
                    f" not run again: {_names(earlier)}")
    message += f"; {len(applied)} migrations applied"
    await _event(ctx, db, "Normal", "MigrationsApplied", message)
    return MigrationOutcome(conditions=(_condition(db, True, "MigrationsApplied", message),), applied=applied,
                            recheck_after=ctx.recheck_period)


async def _failed(ctx: Context, db: SampleDB, plan: mig.MigrationPlan, job_name: str,
                  state: JobState) -> MigrationOutcome:
    """The failed Job's reason (the script's own message when it ran), kept until the ConfigMap changes."""
    prefix = f"migration Job {job_name} failed"
    old = get_condition(db.status.conditions, MIGRATED)
    if old is not None and old.reason == "MigrationFailed" and old.message.startswith(prefix):
        message = old.message  # already read: no second look at the pods
    else:
        result = await job_result(ctx, db.metadata.namespace or "", job_name)
        if isinstance(result.get("message"), str) and result["message"]:
            message = f"{prefix}: {result['message'][:DETAIL_LIMIT]}"
            versions = {v for v in result.get("applied") or [] if isinstance(v, int)}
            done = [f for f in plan.pending if f.version in versions]
            if done:
                # Each file commits on its own: the database records them (sampledb_meta), and the
                # next run, after the ConfigMap is fixed, finds them there ("already").
                message += f" (applied before the failure: {', '.join(f.name for f in done)})"
        else:
            message = f"{prefix}: {state.reason}: {state.message} (applying {_names(plan.pending)})"
        message += (f". Fix the migrations ConfigMap to try again, or delete Job {job_name} to retry the same"
                    " files")
    return _waiting_for_user(ctx, db, Problem("MigrationFailed", message[:MESSAGE_LIMIT], mig.FIELD))




# ---------------------------------------------------------------- the database's migrate Jobs and snapshots


def _owned(obj: Obj, db: SampleDB) -> bool:
    return any(ref.get("uid") == db.metadata.uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def _selector(db: SampleDB, component: str) -> dict[str, str]:
    return {d.DATABASE_LABEL: db.metadata.name, d.COMPONENT_LABEL: component}


def _migrate_jobs(ctx: Context, db: SampleDB) -> list[Obj]:
    return [j for j in ctx.caches.jobs.list(db.metadata.namespace, _selector(db, COMPONENT)) if _owned(j, db)]


def _unfinished_jobs(ctx: Context, db: SampleDB) -> list[str]:
    out = []
    for job in _migrate_jobs(ctx, db):
        state = job_state(job)
        if state is not None and not state.finished:
            out.append(str(job["metadata"]["name"]))
    return sorted(out)


def in_progress(ctx: Context, db: SampleDB) -> bool:
    """A migrate Job of this database is running (an upgrade should wait for it)."""
    return bool(_unfinished_jobs(ctx, db))


def _mounted_snapshots(job: Obj) -> set[str]:
    volumes = job.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []
    return {str(v["configMap"]["name"]) for v in volumes if v.get("name") == "migrations" and v.get("configMap")}


async def _remove_stale_snapshots(ctx: Context, db: SampleDB) -> None:
    """Delete the snapshot ConfigMaps that no unfinished migrate Job mounts (writes only when some exist)."""
    snapshots = [c["metadata"]["name"] for c in
                 ctx.caches.configmaps.list(db.metadata.namespace, _selector(db, mig.SNAPSHOT_COMPONENT))
                 if _owned(c, db)]
    if not snapshots:
        return
    in_use: set[str] = set()
    for job in _migrate_jobs(ctx, db):
        state = job_state(job)
        if state is not None and not state.finished:
            in_use |= _mounted_snapshots(job)
    for name in mig.stale_snapshots(snapshots, in_use):
        with contextlib.suppress(NotFound):
            await ctx.apis["ConfigMap"].delete(name, db.metadata.namespace)


async def _event(ctx: Context, db: SampleDB, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(db.metadata, API_VERSION, "SampleDB", type_, reason, message)
