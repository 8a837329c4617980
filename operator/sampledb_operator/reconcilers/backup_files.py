"""Deleting a SampleDBBackup deletes its files: the finalizer and the prune Job around it.

The finalizer is added before the backup's Job may write anything; on deletion a prune Job removes
the files and the finalizer goes, never while the backup's own Job still runs (it could write files
after the prune). Nothing blocks a deletion for good: with no files (the backup
never finished), no volume, a terminating namespace, or a failed prune Job (Warning event naming
the files left), the finalizer is removed at once.

The finalizer itself is added by the backup's own plan (decide/backup/backup_run.py) before its Job is
created. This module only reads and applies: the deletion's decisions are decide/backup/backup_files.plan_release.
"""

from __future__ import annotations

from dataclasses import replace

from sampledb_operator.decide.backup import backup_files as bf
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.model import names
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan
from sampledb_operator.reconcilers.namespace import namespace_terminating


def subject(backup: SampleDBBackup) -> Obj:
    """The subject dict of a SampleDBBackup: what apply_plan needs of its metadata."""
    meta = backup.metadata
    return {"name": meta.name, "namespace": meta.namespace, "uid": meta.uid, "resourceVersion": meta.resource_version}


async def read_facts(ctx: Context, backup: SampleDBBackup) -> bf.FilesFacts:
    """What one pass of the deletion of `backup`'s files reads: its Jobs from the cache; the namespace
    (live), the volume (cache, else live) and the database (cache), each only when the pass depends on it."""
    ns, db_name = backup.metadata.namespace or "", backup.spec.database
    facts = bf.FilesFacts(
        backup=backup,
        backup_job=job_state(ctx.cached("Job", ns, names.backup_job_name(db_name, backup.metadata.name))),
        prune_job=job_state(ctx.cached("Job", ns, names.prune_job_name(db_name, backup.metadata.name))))
    if bf.namespace_read_needed(facts):
        facts = replace(facts, namespace_terminating=await namespace_terminating(ctx, ns))
    location = bf.files_location(facts)
    if location is not None and bf.volume_read_needed(facts):
        facts = replace(facts, volume_exists=await volume_exists(ctx, ns, location.pvc_name))
    if bf.database_read_needed(facts):
        db_obj = ctx.cached("SampleDB", ns, db_name)
        facts = replace(facts, db=ctx.for_jobs(SampleDB.model_validate(db_obj)) if db_obj is not None else None)
    return facts


async def finalize(ctx: Context, backup: SampleDBBackup) -> Result | None:
    """One step of deleting a SampleDBBackup that has a deletionTimestamp."""
    if not bf.holds(backup):
        return None
    plan = bf.plan_release(await read_facts(ctx, backup))
    await apply_plan(ctx, subject(backup), plan, kind=bf.KIND)
    return plan.result


async def volume_exists(ctx: Context, namespace: str, claim: str) -> bool:
    """The volume `claim` exists: in the cache, else read live (a volume not made by the operator)."""
    if ctx.cached("PersistentVolumeClaim", namespace, claim) is not None:
        return True
    try:
        await ctx.apis["PersistentVolumeClaim"].get(claim, namespace)
    except NotFound:
        return False
    return True
