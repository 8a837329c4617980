"""Scheduled backups of a SampleDB (spec.backup.schedule and retention), status.lastBackup, BackupHealthy.

One pass reads the SampleDBBackups of the database from the cache, asks decide/schedule.py what
is due, creates the due slot's SampleDBBackup (the BackupReconciler runs it) and deletes what
retention prunes. A scheduled backup's name is derived from its slot, so a restart never takes a
second one for the same slot. Only backups of this incarnation count (the database-uid label, or
created after the SampleDB), and only those the operator created are ever deleted. Steady state
writes nothing: the condition's message and lastBackup change only when a backup finishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide import backups as bk
from sampledb_operator.decide import schedule as sch
from sampledb_operator.decide.desired import MANAGED_BY, MANAGED_BY_LABEL
from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.verify import merge_health
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names, timestamps
from sampledb_operator.model.backup import BackupReason
from sampledb_operator.model.conditions import Condition, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import BackupRecord, SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)

SCHEDULED = BackupReason.SCHEDULED.value


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


async def reconcile_schedule(ctx: Context, db: SampleDB, *, db_ready: bool, busy: bool,
                             verification: Condition | None = None) -> ScheduleOutcome:
    """One pass of the scheduled-backup step; `busy` is True while an upgrade or migration runs;
    `verification` is BackupHealthy as the verification step sees it (decide/verify.merge_health)."""
    facts = backup_facts(ctx, db)
    spec = db.spec.backup
    gen = db.metadata.generation
    condition: Condition | None
    if spec.schedule is None:
        await _prune(ctx, db, sch.to_prune(facts, spec.retention))
        condition = merge_health(sch.health(facts, scheduled_only=False, generation=gen), verification)
        await _health_event(ctx, db, condition)
        return ScheduleOutcome(condition=condition, last_backup=_last_backup(db, facts),
                               last_snapshot=_last_snapshot(db, facts))
    decision = sch.decide(spec.schedule, ctx.clock.now(), db.metadata.creation_timestamp, facts, spec.retention)
    if decision.due and decision.slot is not None and db_ready and not busy:
        created = await _create(ctx, db, decision.slot)
        if created is not None:
            facts = [*facts, created]
    await _prune(ctx, db, decision.prune)
    if decision.problem is not None:
        condition = sch.schedule_problem(decision.problem, gen)
    else:
        condition = sch.health(facts, scheduled_only=True, generation=gen) or sch.awaiting_first(gen)
    condition = merge_health(condition, verification)
    await _health_event(ctx, db, condition)
    return ScheduleOutcome(condition=condition, last_backup=_last_backup(db, facts),
                           last_snapshot=_last_snapshot(db, facts), requeue_after=decision.requeue_after)


def backup_facts(ctx: Context, db: SampleDB) -> list[sch.BackupFact]:
    """The SampleDBBackups of this SampleDB incarnation in the cache (those being deleted left out).

    A backup counts when its database-uid label names this SampleDB, or, without that label, when
    it was created after the SampleDB. Only the operator's own scheduled backups carry a slot.
    """
    ns, name, uid = db.metadata.namespace or "", db.metadata.name, db.metadata.uid or ""
    created = db.metadata.creation_timestamp
    out = []
    for obj in ctx.caches.backups.list(ns):
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if spec.get("database") != name or meta.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") or {}
        owner_uid = labels.get(bk.DATABASE_UID_LABEL)
        if owner_uid is not None and owner_uid != uid:
            continue
        made = timestamps.parse(meta.get("creationTimestamp")) or created
        if owner_uid is None and created is not None and made is not None and made < created:
            continue
        out.append(_fact(obj, mine=owner_uid == uid and labels.get(MANAGED_BY_LABEL) == MANAGED_BY))
    return out


def _fact(obj: Obj, *, mine: bool) -> sch.BackupFact:
    meta, status = obj["metadata"], obj.get("status") or {}
    reason = str((obj.get("spec") or {}).get("reason") or BackupReason.MANUAL.value)
    slot_text = (meta.get("annotations") or {}).get(bk.SCHEDULED_FOR_ANNOTATION)
    slot = sch.parse_slot(slot_text) if mine and reason == SCHEDULED else None
    return sch.BackupFact(name=meta["name"], reason=reason, phase=status.get("phase"), slot=slot,
                          completed_at=timestamps.parse(status.get("completedAt")),
                          message=str(status.get("message") or ""), owned=mine)




SNAPSHOT_REASONS = ("pre-upgrade", "pre-migration")


def _last_snapshot(db: SampleDB, facts: list[sch.BackupFact]) -> BackupRecord | None:
    """The newest Succeeded snapshot taken before an upgrade or a migration, as status.lastSnapshot,
    or None when that is what the status says (a pre-delete one is moot: the SampleDB is going)."""
    newest = sch.newest_succeeded([f for f in facts if f.reason in SNAPSHOT_REASONS])
    if newest is None:
        return None
    record = BackupRecord(name=newest.name, completed_at=newest.completed_at)
    return None if record == db.status.last_snapshot else record


def _last_backup(db: SampleDB, facts: list[sch.BackupFact]) -> BackupRecord | None:
    """The newest Succeeded backup as status.lastBackup, or None when that is what the status says."""
    newest = sch.newest_succeeded(facts)
    if newest is None:
        return None
    record = BackupRecord(name=newest.name, completed_at=newest.completed_at)
    return None if record == db.status.last_backup else record


async def _create(ctx: Context, db: SampleDB, slot: datetime) -> sch.BackupFact | None:
    """The scheduled SampleDBBackup of `slot` (the BackupReconciler takes it); None if it was not created."""
    ns, db_name = db.metadata.namespace or "", db.metadata.name
    name = names.backup_name(db_name, SCHEDULED, slot)
    if ctx.cached("SampleDBBackup", ns, name) is not None:
        return None  # not ours (another incarnation or a user's object): never overwritten
    body = bk.backup_request(db, name, SCHEDULED, annotations={bk.SCHEDULED_FOR_ANNOTATION: sch.slot_text(slot)})
    try:
        await ctx.apis["SampleDBBackup"].create(body)
    except Conflict:
        return None  # created by an earlier pass whose watch event has not arrived yet
    log.info("scheduled backup created", namespace=ns, database=db_name, backup=name, slot=sch.slot_text(slot))
    await _event(ctx, db, "Normal", "BackupScheduled", f"scheduled backup {name} for {sch.slot_text(slot)} requested")
    return sch.BackupFact(name=name, reason=SCHEDULED, phase=None, slot=slot)


async def _prune(ctx: Context, db: SampleDB, pruned: tuple[sch.BackupFact, ...]) -> None:
    """Delete what retention removes (the backup's Job goes with it: the backup owns it)."""
    ns = db.metadata.namespace or ""
    for fact in pruned:
        try:
            await ctx.apis["SampleDBBackup"].delete(fact.name, ns)
        except NotFound:
            continue  # already gone (an earlier pass, before its watch event arrived)
        log.info("backup pruned", namespace=ns, database=db.metadata.name, backup=fact.name, reason=fact.reason)
        await _event(ctx, db, "Normal", "BackupPruned",
                     f"deleted {fact.phase} {fact.reason} backup {fact.name} (retention {db.spec.backup.retention})")


async def _health_event(ctx: Context, db: SampleDB, new: Condition | None) -> None:
    """A Warning when BackupHealthy turns False (or names another failed backup), Normal when it recovers."""
    if new is None:
        return
    old = get_condition(db.status.conditions, new.type)
    if old is not None and (old.status, old.reason, old.message) == (new.status, new.reason, new.message):
        return
    if new.status == "False":
        await _event(ctx, db, "Warning", new.reason, new.message)
    elif new.status == "True" and old is not None and old.status == "False":
        await _event(ctx, db, "Normal", "BackupRecovered", new.message)


async def _event(ctx: Context, db: SampleDB, type_: EventType, reason: str, message: str) -> None:
    await ctx.event(db.metadata, API_VERSION, "SampleDB", type_, reason, message)
