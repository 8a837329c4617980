"""The init step of a SampleDB: read the facts, plan the pass (decide/lifecycle/init_plan.py), apply the plan.

One Job per database: the init Job that runs spec.init's SQL, or the restore Job of spec.restore,
created once the database is ready and its source exists; never run again once Initialized says it
is done. The step returns what it found (the Job, whether spec.init changed since it ran, why it
waits) for the status; its only writes are the Job and its Event, both in the plan. This module only
reads: the caches, and the init SQL's ConfigMap or Secret live (the operator does not watch it) only
when the plan depends on it.
"""

from __future__ import annotations

from dataclasses import replace

from sampledb_operator.decide.lifecycle import init_plan as ip
from sampledb_operator.decide.lifecycle.init_plan import InitOutcome
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of

__all__ = ["InitOutcome", "read_facts", "reconcile_init"]


async def read_facts(ctx: Context, db: SampleDB, *, db_ready: bool) -> ip.InitFacts:
    """What one pass of the init step reads: the Job from the cache; the restore's backup while its Job is not
    made, from the cache or, when the cache lacks it, live (it is another database's: a sharded replica with
    filtered caches caches only its shards' backups); and the init SQL's source live, only when the Job could
    start in this pass."""
    ns = db.metadata.namespace
    name = ip.job_name(db)
    facts = ip.InitFacts(db=db, db_ready=db_ready, job=ctx.cached("Job", ns, name) if name is not None else None)
    if db.spec.restore is not None and ip.backup_read_needed(facts):
        backup_name = db.spec.restore.backup_name
        backup = ctx.cached("SampleDBBackup", ns, backup_name) or await _get(ctx, ("SampleDBBackup", backup_name), ns)
        facts = replace(facts, backup=backup)
    ref = ip.source_ref(db)
    if ref is not None and ip.source_read_needed(facts):
        facts = replace(facts, source=await _get(ctx, ref, ns))
    return facts


async def reconcile_init(ctx: Context, db: SampleDB, *, db_ready: bool) -> InitOutcome:
    """The init Job (created once the database is ready and the SQL's source exists); for a database
    created from a backup, the restore Job instead (the init SQL is not run then)."""
    planned = ip.plan_init(await read_facts(ctx, db, db_ready=db_ready))
    applied = await apply_plan(ctx, subject_of(db), planned.plan)
    created = applied.created.get(("Job", planned.creates)) if planned.creates is not None else None
    if created is not None:  # made in this pass: the status says it runs now, not a pass later
        return replace(planned.outcome, job=created)
    return planned.outcome


async def _get(ctx: Context, ref: tuple[str, str], namespace: str | None) -> Obj | None:
    """The object `ref` (kind, name), read live; None when it does not exist."""
    kind, name = ref
    try:
        return await ctx.apis[kind].get(name, namespace)
    except NotFound:
        return None
