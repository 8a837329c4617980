"""Deleting a SampleDB: run the deletion policy's steps, then remove the finalizer.

One call does the one step decide/lifecycle.py names and returns; the events of the objects it
creates or deletes bring the next call. Nothing is deleted before the policy's work is done: with
Snapshot, the StatefulSet and the data volume go only after the snapshot's SampleDBBackup
Succeeded; a failed snapshot blocks the deletion (condition DeletionBlocked) and is retried with
backoff, until it succeeds or the user sets the skip-snapshot annotation.
"""

from __future__ import annotations

import contextlib

from sampledb_operator.decide import backups as bk
from sampledb_operator.decide import lifecycle
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.lifecycle import Attempt, DeletionInput, Step
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.conditions import Condition, get_condition, set_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION, dump
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.children import data_children, deletable_children, instance_children
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.namespace import namespace_terminating

log = get_logger(__name__)



def snapshot_attempts(ctx: Context, db: SampleDB) -> list[Attempt]:
    """The pre-delete snapshot attempts of this incarnation (uid) of the database, oldest first."""
    out = []
    selector = {bk.DATABASE_UID_LABEL: db.metadata.uid or "", bk.REASON_LABEL: "pre-delete"}
    for backup in ctx.caches.backups.list(db.metadata.namespace, selector):
        labels = backup["metadata"].get("labels") or {}
        status = backup.get("status") or {}
        completed = status.get("completedAt")
        out.append(Attempt(
            number=int(labels.get(bk.ATTEMPT_LABEL, "1")),
            phase=status.get("phase"),
            completed_at=timestamps.parse(completed),
            message=status.get("message") or "",
        ))
    return sorted(out, key=lambda a: a.number)


def _live(obj: Obj | None) -> bool:
    """Exists and is not already being deleted."""
    return obj is not None and not obj.get("metadata", {}).get("deletionTimestamp")


async def finalize(ctx: Context, db: SampleDB) -> Result | None:
    """One step of the deletion of `db` (which has a deletionTimestamp)."""
    if lifecycle.FINALIZER not in db.metadata.finalizers:
        return None
    ns = db.metadata.namespace or ""
    present = [(k, n) for k, n in data_children(db) if _live(ctx.cached(k, ns, n))]
    attempts = snapshot_attempts(ctx, db)
    policy = str(db.spec.deletion_policy)
    inp = DeletionInput(
        policy=policy,
        skip_requested=db.metadata.annotations.get(lifecycle.SKIP_SNAPSHOT_ANNOTATION) == "true",
        namespace_terminating=policy == "Snapshot" and bool(present) and await namespace_terminating(ctx, ns),
        ever_ran=db.status.current_version is not None,
        data_present=bool(present),
        latest=attempts[-1] if attempts else None,
    )
    decision = lifecycle.deletion_step(inp, ctx.clock.now())
    log.info("deletion step", step=decision.step.value, reason=decision.reason, namespace=ns, name=db.metadata.name)
    if decision.step is Step.START_SNAPSHOT:
        await _start_snapshot(ctx, db, decision.attempt)
        await _deleting_status(ctx, db, blocked=None)
        return None
    if decision.step is Step.WAIT_SNAPSHOT:
        await _deleting_status(ctx, db, blocked=None)
        return None
    if decision.step is Step.RETRY_LATER:
        await _deleting_status(ctx, db, blocked=decision.reason)
        return Result(requeue_after=decision.wait_seconds)
    if decision.step is Step.DELETE_DATA:
        if inp.skip_requested:
            await _event(ctx, db, "Warning", "SnapshotSkipped", decision.reason)
        await _delete_children(ctx, db, keep=set())
        await _event(ctx, db, "Normal", "DataDeleted", decision.reason)
    elif decision.step is Step.RETAIN_DATA:
        data, secret = names.data_pvc_name(db.metadata.name), names.secret_name(db.metadata.name)
        standbys = {n for k, n in instance_children(ctx, db) if k == "PersistentVolumeClaim"}
        for volume in sorted({data} | standbys):
            await _retain(ctx, db, "PersistentVolumeClaim", volume)
        await _retain(ctx, db, "Secret", secret)
        await _delete_children(ctx, db, keep={data, secret} | standbys)
        await _event(ctx, db, "Normal", "DataRetained",
                     f"PVC {data} and Secret {secret} are kept, labelled {lifecycle.RETAINED_FROM_LABEL}="
                     f"{db.metadata.name}; a new SampleDB of this name adopts them")
    else:  # RELEASE: the data is gone; remove what is left of the rest
        await _delete_children(ctx, db, keep=set())
    await _remove_finalizer(ctx, db)
    return None


async def _start_snapshot(ctx: Context, db: SampleDB, attempt: int) -> None:
    name = lifecycle.snapshot_backup_name(db.metadata.name, db.metadata.uid or "", attempt)
    body = bk.backup_request(db, name, "pre-delete", attempt=attempt)
    try:
        await ctx.apis["SampleDBBackup"].create(body)
    except Conflict:
        return  # this attempt exists already (an earlier pass made it): never a second one
    await _event(ctx, db, "Normal", "SnapshotStarted", f"taking the final snapshot (attempt {attempt}): {name}")


async def _delete(ctx: Context, kind: str, namespace: str, name: str) -> None:
    with contextlib.suppress(NotFound):
        await ctx.apis[kind].delete(name, namespace)


async def _delete_children(ctx: Context, db: SampleDB, keep: set[str]) -> None:
    """Delete the database's unowned children (the backup volume is always kept: it holds the backups)."""
    ns = db.metadata.namespace or ""
    for kind, name in [*instance_children(ctx, db), *deletable_children(db)]:
        if name not in keep and _live(ctx.cached(kind, ns, name)):
            await _delete(ctx, kind, ns, name)


async def _retain(ctx: Context, db: SampleDB, kind: str, name: str) -> None:
    patch = {"metadata": {"labels": {lifecycle.RETAINED_FROM_LABEL: db.metadata.name},
                          "annotations": {"sampledb.io/retained-from-uid": db.metadata.uid or ""}}}
    with contextlib.suppress(NotFound):
        await ctx.apis[kind].patch(name, patch, namespace=db.metadata.namespace)


async def _remove_finalizer(ctx: Context, db: SampleDB) -> None:
    remaining = [f for f in db.metadata.finalizers if f != lifecycle.FINALIZER]
    patch = {"metadata": {"finalizers": remaining, "resourceVersion": db.metadata.resource_version}}
    try:
        await ctx.apis["SampleDB"].patch(db.metadata.name, patch, namespace=db.metadata.namespace)
    except NotFound:
        return
    log.info("finalizer removed", namespace=db.metadata.namespace, name=db.metadata.name)


async def _deleting_status(ctx: Context, db: SampleDB, blocked: str | None) -> None:
    """phase Deleting, and DeletionBlocked with the failed snapshot's reason (written only on change)."""
    now = ctx.clock.now()
    gen = db.metadata.generation
    if blocked is None:
        cond = Condition(type="DeletionBlocked", status="False", reason="Snapshotting",
                         message="the final snapshot is in progress", observed_generation=gen)
    else:
        cond = Condition(type="DeletionBlocked", status="True", reason="SnapshotFailed", message=blocked[:1000],
                         observed_generation=gen)
    old = get_condition(db.status.conditions, "DeletionBlocked")
    new = db.status.model_copy(update={"phase": "Deleting",
                                       "conditions": set_condition(db.status.conditions, cond, now)})
    if dump(new) == dump(db.status):
        return
    if blocked is not None and (old is None or old.status != "True"):
        await _event(ctx, db, "Warning", "DeletionBlocked", blocked)
    body = {"metadata": {"resourceVersion": db.metadata.resource_version}, "status": dump(new)}
    with contextlib.suppress(NotFound, Conflict):  # changed since read: the newer object's pass writes it
        await ctx.apis["SampleDB"].patch(db.metadata.name, body, namespace=db.metadata.namespace,
                                         subresource="status")


async def _event(ctx: Context, db: SampleDB, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(db.metadata, API_VERSION, "SampleDB", type_, reason, message)
