"""Deleting a SampleDB: read the facts, plan the pass (decide/lifecycle/deletion.py), apply the plan.

One call does the one step decide/lifecycle/lifecycle.py names and returns; the events of the objects it
creates or deletes bring the next call. Nothing is deleted before the policy's work is done: with
Snapshot, the StatefulSet and the data volume go only after the snapshot's SampleDBBackup
Succeeded; a failed snapshot blocks the deletion (condition DeletionBlocked) and is retried with
backoff, until it succeeds or the user sets the skip-snapshot annotation. This module only reads:
the caches, and the namespace live when the step depends on it; every write is in the plan.
"""

from __future__ import annotations

from dataclasses import replace

from sampledb_operator.decide.lifecycle import deletion as decide_deletion
from sampledb_operator.decide.lifecycle.lifecycle import Attempt, Step
from sampledb_operator.decide.replicas import hibernation as hib
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers import hibernation
from sampledb_operator.reconcilers.children import (
    data_children,
    deletable_children,
    instance_children,
    shared_children,
)
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of
from sampledb_operator.reconcilers.namespace import namespace_terminating

log = get_logger(__name__)
SNAPSHOT_STEPS = (Step.START_SNAPSHOT, Step.WAIT_SNAPSHOT, Step.RETRY_LATER)  # a final snapshot is to be taken


def snapshot_attempts(ctx: Context, db: SampleDB) -> list[Attempt]:
    """The pre-delete snapshot attempts of this incarnation (uid) of the database, oldest first."""
    found = ctx.caches.backups.list(db.metadata.namespace, decide_deletion.snapshot_selector(db))
    return sorted((decide_deletion.attempt_of(backup) for backup in found), key=lambda a: a.number)


def _live(obj: Obj | None) -> bool:
    """Exists and is not already being deleted."""
    return obj is not None and not obj.get("metadata", {}).get("deletionTimestamp")


async def read_facts(ctx: Context, db: SampleDB) -> decide_deletion.DeletionFacts:
    """What one pass of the deletion of `db` reads: the caches, and the namespace (live) when needed."""
    ns = db.metadata.namespace or ""
    data, instances = data_children(db), instance_children(ctx, db)
    deletable = [*deletable_children(db), *shared_children(ctx, db)]  # the shared scripts: the namespace's last
    live = frozenset(child for child in {*data, *instances, *deletable} if _live(ctx.cached(child[0], ns, child[1])))
    facts = decide_deletion.DeletionFacts(
        db=db, data_children=tuple(data), instance_children=tuple(instances), deletable_children=tuple(deletable),
        live=live, attempts=tuple(snapshot_attempts(ctx, db)), namespace_terminating=False, now=ctx.clock.now())
    if decide_deletion.namespace_read_needed(facts):
        facts = replace(facts, namespace_terminating=await namespace_terminating(ctx, ns))
    return facts


async def finalize(ctx: Context, db: SampleDB) -> Result | None:
    """One step of the deletion of `db` (which has a deletionTimestamp)."""
    if not decide_deletion.finalizing(db):
        return None
    ns, name = db.metadata.namespace, db.metadata.name
    planned = decide_deletion.plan_deletion(await read_facts(ctx, db))
    decision = planned.decision
    if decision.step in SNAPSHOT_STEPS and hib.hibernating(db.status):
        await hibernation.start_for_snapshot(ctx, db)
    log.info("deletion step", step=decision.step.value, reason=decision.reason, namespace=ns, name=name)
    applied = await apply_plan(ctx, subject_of(db), planned.plan)
    if planned.releases and ("SampleDB", name) in applied.patched:
        log.info("finalizer removed", namespace=ns, name=name)
    return planned.plan.result
