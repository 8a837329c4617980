"""Deleting a SampleDBBackup deletes its files: the finalizer and the prune Job around it.

The finalizer is added before the backup's Job may write anything; on deletion a prune Job removes
the files and the finalizer goes, never while the backup's own Job still runs (it could write files
after the prune). Nothing blocks a deletion for good: with no files (the backup
never finished), no volume, a terminating namespace, or a failed prune Job (Warning event naming
the files left), the finalizer is removed at once.
"""

from __future__ import annotations

import contextlib

from sampledb_operator.decide import backup_files as bf
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.jobs import test_annotations
from sampledb_operator.decide.status import job_state
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB, image_for
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.namespace import namespace_terminating


async def ensure_finalizer(ctx: Context, backup: SampleDBBackup) -> SampleDBBackup:
    """Add the files finalizer (optimistic: a stale object gets Conflict and the pass is retried); the
    backup with the resourceVersion it has now, for the pass's later writes' precondition."""
    if bf.FILES_FINALIZER in backup.metadata.finalizers:
        return backup
    finalizers = [*backup.metadata.finalizers, bf.FILES_FINALIZER]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": backup.metadata.resource_version}}
    answer = await ctx.apis["SampleDBBackup"].patch(backup.metadata.name, patch, namespace=backup.metadata.namespace)
    rv = (answer.get("metadata") or {}).get("resourceVersion") or backup.metadata.resource_version
    meta = backup.metadata.model_copy(update={"finalizers": finalizers, "resource_version": rv})
    return backup.model_copy(update={"metadata": meta})


async def finalize(ctx: Context, backup: SampleDBBackup) -> Result | None:
    """One step of deleting a SampleDBBackup that has a deletionTimestamp."""
    if bf.FILES_FINALIZER not in backup.metadata.finalizers:
        return None
    ns = backup.metadata.namespace or ""
    backup_job = ctx.cached("Job", ns, names.backup_job_name(backup.spec.database, backup.metadata.name))
    backup_state = job_state(backup_job)
    if backup_state is not None and not backup_state.finished and not await namespace_terminating(ctx, ns):
        return None  # its Job may still be writing files: wait for it (the Job's events bring the backup back)
    location = backup.status.location
    if location is None and (backup_job is not None or backup.status.phase == "Running"):
        location = bf.expected_location(backup)  # it ran (or runs no more) without recording where: prune there
    if location is None or await namespace_terminating(ctx, ns) or not await _volume_exists(ctx, ns, location.pvc_name):
        await _release(ctx, backup)
        return None
    job = ctx.cached("Job", ns, names.prune_job_name(backup.spec.database, backup.metadata.name))
    state = job_state(job)
    if state is None:
        db_obj = ctx.cached("SampleDB", ns, backup.spec.database)
        db = SampleDB.model_validate(db_obj) if db_obj is not None else None
        image = image_for(db.spec) if db else f"postgres:{backup.status.version or '16'}"
        body = bf.prune_job(backup, image=image, pod_annotations=test_annotations(db) if db else None,
                            location=location)
        with contextlib.suppress(Conflict):  # created by an earlier pass
            await ctx.apis["Job"].create(body)
        return None
    if not state.finished:
        return None
    if state.succeeded:
        await _event(ctx, backup, "Normal", "BackupFilesDeleted", f"deleted the files of {location.path} on"
                     f" {location.pvc_name}")
    else:
        await _event(ctx, backup, "Warning", "BackupFilesLeft", f"could not delete {location.path} on"
                     f" {location.pvc_name} ({state.reason}: {state.message}); delete them by hand")
    await _release(ctx, backup)
    return None


async def _volume_exists(ctx: Context, namespace: str, claim: str) -> bool:
    if ctx.cached("PersistentVolumeClaim", namespace, claim) is not None:
        return True
    try:
        await ctx.apis["PersistentVolumeClaim"].get(claim, namespace)
    except NotFound:
        return False
    return True


async def _release(ctx: Context, backup: SampleDBBackup) -> None:
    remaining = [f for f in backup.metadata.finalizers if f != bf.FILES_FINALIZER]
    patch = {"metadata": {"finalizers": remaining, "resourceVersion": backup.metadata.resource_version}}
    try:
        await ctx.apis["SampleDBBackup"].patch(backup.metadata.name, patch, namespace=backup.metadata.namespace)
    except NotFound:
        return


async def _event(ctx: Context, backup: SampleDBBackup, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(backup.metadata, API_VERSION, "SampleDBBackup", type_, reason, message)
