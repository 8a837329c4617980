"""One pass of the scheduled-backup step as a plan: the due slot's backup, retention, BackupHealthy.

Pure: `plan_schedule` turns what the pass read (the SampleDB, the cached SampleDBBackups of its
namespace, the time, whether the database is ready and not busy, and the verification step's
BackupHealthy) into the effects to apply, in order, and what the step tells the SampleDB pass:
1. the SampleDBBackup of the due slot, announced by BackupScheduled (only when the pass created
   it: an existing object of its name, ours or not, is never overwritten); nothing while the
   database is not Ready or an upgrade or migration runs;
2. what retention prunes, oldest first, each announced by BackupPruned when this pass deleted it;
3. the Event of a BackupHealthy transition (`health_event`), announced once: the next pass sees
   the condition the SampleDB's status holds by then.
The backup the pass creates has no phase yet, so it changes neither BackupHealthy nor lastBackup
or lastSnapshot. Steady state plans no effect at all.

A scheduled backup held back because the database's data volume is full (the database not ready,
its SampleDB's Degraded=True with reason VolumeFull: its server has stopped) makes BackupHealthy
False/BackupsPostponed (`postponed`): the due slot, or a scheduled backup not started yet, waits,
and the message says why and what to do. It stays so until a scheduled backup finishes once the
database is Ready again (the slot's backup is taken then, as usual): BackupRecovered if it
succeeded, BackupFailed if not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sampledb_operator.decide.backup import schedule as sch
from sampledb_operator.decide.backup.backups import SCHEDULED_FOR_ANNOTATION, backup_request
from sampledb_operator.decide.backup.verify import merge_health
from sampledb_operator.decide.effects import Create, Delete, Effect, Emit, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.volume_full import GROW_VOLUME, volume_full
from sampledb_operator.model import names
from sampledb_operator.model.backup import BackupPhase, BackupReason
from sampledb_operator.model.conditions import Condition, ConditionType, get_condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import after
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.sampledb_status import BackupRecord

SCHEDULED = BackupReason.SCHEDULED.value
SNAPSHOT_REASONS = (BackupReason.PRE_UPGRADE.value, BackupReason.PRE_MIGRATION.value)
POSTPONED = "BackupsPostponed"  # BackupHealthy's reason while scheduled backups wait for a full data volume
NOT_STARTED = (None, BackupPhase.PENDING.value)


@dataclass(frozen=True)
class ScheduleInputs:
    """What one pass of the schedule step reads."""

    db: SampleDB
    backups: tuple[Obj, ...]  # every cached SampleDBBackup of the database's namespace
    now: datetime
    db_ready: bool
    busy: bool  # an upgrade or a migration runs
    verification: Condition | None = None  # BackupHealthy as the verification step sees it


@dataclass(frozen=True)
class SchedulePlan:
    """The step's effects and Result (the next slot), and what it reports to the SampleDB pass."""

    plan: Plan
    condition: Condition | None  # BackupHealthy
    last_backup: BackupRecord | None  # None: status.lastBackup stays as it is
    last_snapshot: BackupRecord | None  # None: status.lastSnapshot stays as it is
    requeue_after: float | None  # seconds until the next slot (None: no schedule)
    slot: datetime | None = None  # the slot whose backup the plan creates


def plan_schedule(inputs: ScheduleInputs) -> SchedulePlan:
    """The whole plan of one pass of the schedule step."""
    db, spec = inputs.db, inputs.db.spec.backup
    gen = db.metadata.generation
    facts = sch.backup_facts(inputs.backups, db)
    effects: list[Effect] = []
    slot: datetime | None = None
    requeue_after: float | None = None
    condition: Condition | None
    if spec.schedule is None:
        pruned = sch.to_prune(facts, spec.retention)
        condition = sch.health(facts, scheduled_only=False, generation=gen)
    else:
        decision = sch.decide(spec.schedule, inputs.now, db.metadata.creation_timestamp, facts, spec.retention)
        taken = {str((o.get("metadata") or {}).get("name")) for o in inputs.backups}
        if decision.due and decision.slot is not None and inputs.db_ready and not inputs.busy:
            create = scheduled_backup(db, decision.slot)
            if create.obj["metadata"]["name"] not in taken:  # another's object of that name is left alone
                effects.append(create)
                slot = decision.slot
        pruned, requeue_after = decision.prune, decision.requeue_after
        full = None if inputs.db_ready else volume_full(db)
        waiting = waiting_slot(decision, facts) if full is not None else None
        if decision.problem is not None:
            condition = sch.schedule_problem(decision.problem, gen)
        elif full is not None and waiting is not None:
            condition = postponed(waiting, full, gen)
        else:
            condition = (still_postponed(db, facts, created=slot is not None)
                         or sch.health(facts, scheduled_only=True, generation=gen) or sch.awaiting_first(gen))
    effects += [prune(db, fact) for fact in pruned]
    condition = merge_health(condition, inputs.verification)
    event = health_event(get_condition(db.status.conditions, condition.type) if condition else None, condition)
    if event is not None:
        effects.append(Emit(event))
    return SchedulePlan(Plan(tuple(effects), after(requeue_after)), condition, last_backup(db, facts),
                        last_snapshot(db, facts), requeue_after, slot)


def waiting_slot(decision: sch.ScheduleDecision, facts: Sequence[sch.BackupFact]) -> datetime | None:
    """The slot whose scheduled backup the database's state holds back: the due one, else the newest scheduled
    backup not started yet (its Job waits for Ready); None when none waits."""
    if decision.due and decision.slot is not None:
        return decision.slot
    slots = [f.slot for f in facts if f.scheduled and f.slot is not None and f.phase in NOT_STARTED]
    return max(slots) if slots else None


def postponed(slot: datetime, detail: str, generation: int | None) -> Condition:
    """BackupHealthy while the scheduled backup of `slot` waits for a full data volume (`detail`: the SampleDB's
    Degraded message, shortened)."""
    message = (f"the scheduled backup of {sch.slot_text(slot)} is postponed: {detail}; it is taken once the database"
               f" is Ready again ({GROW_VOLUME})")
    return Condition.model_validate({"type": ConditionType.BACKUP_HEALTHY.value, "status": "False",
                                     "reason": POSTPONED, "message": message[:1000],
                                     "observedGeneration": generation})


def still_postponed(db: SampleDB, facts: Sequence[sch.BackupFact], *, created: bool) -> Condition | None:
    """BackupHealthy as the status holds it while it says BackupsPostponed and the backup taken once the database
    is Ready again has not finished (this pass creates it, or a scheduled one is unfinished): no transition until
    a scheduled backup's outcome says how backups fare. None otherwise."""
    old = get_condition(db.status.conditions, ConditionType.BACKUP_HEALTHY.value)
    if old is None or old.reason != POSTPONED:
        return None
    if not created and not any(f.scheduled and not f.finished for f in facts):
        return None
    return old.model_copy(update={"observed_generation": db.metadata.generation})


def scheduled_backup(db: SampleDB, slot: datetime) -> Create:
    """The create of `slot`'s SampleDBBackup (the BackupReconciler runs it), announced by BackupScheduled."""
    name = names.backup_name(db.metadata.name, SCHEDULED, slot)
    body = backup_request(db, name, SCHEDULED, annotations={SCHEDULED_FOR_ANNOTATION: sch.slot_text(slot)})
    return Create(body, announce=EventSpec("Normal", "BackupScheduled",
                                           f"scheduled backup {name} for {sch.slot_text(slot)} requested"))


def prune(db: SampleDB, fact: sch.BackupFact) -> Delete:
    """The delete of a backup retention removes (its Job goes with it: the backup owns it)."""
    return Delete("SampleDBBackup", fact.name, announce=EventSpec(
        "Normal", "BackupPruned",
        f"deleted {fact.phase} {fact.reason} backup {fact.name} (retention {db.spec.backup.retention})"))


def health_event(old: Condition | None, new: Condition | None) -> EventSpec | None:
    """The Event announcing BackupHealthy's change from `old` (the status's) to `new`, or None.

    | old -> new                                   | event                       |
    |----------------------------------------------|-----------------------------|
    | new is None, or same status/reason/message   | none                        |
    | anything -> False                            | Warning <new reason>        |
    | False -> True                                | Normal BackupRecovered      |
    | otherwise (-> Unknown, absent/Unknown -> True)| none                       |
    """
    if new is None:
        return None
    if old is not None and (old.status, old.reason, old.message) == (new.status, new.reason, new.message):
        return None
    if new.status == "False":
        return EventSpec("Warning", new.reason, new.message)
    if new.status == "True" and old is not None and old.status == "False":
        return EventSpec("Normal", "BackupRecovered", new.message)
    return None


def last_backup(db: SampleDB, facts: Sequence[sch.BackupFact]) -> BackupRecord | None:
    """The newest Succeeded backup as status.lastBackup, or None when that is what the status says."""
    return _record(sch.newest_succeeded(facts), db.status.last_backup)


def last_snapshot(db: SampleDB, facts: Sequence[sch.BackupFact]) -> BackupRecord | None:
    """The newest Succeeded snapshot taken before an upgrade or a migration, as status.lastSnapshot,
    or None when that is what the status says (a pre-delete one is moot: the SampleDB is going)."""
    return _record(sch.newest_succeeded([f for f in facts if f.reason in SNAPSHOT_REASONS]), db.status.last_snapshot)


def _record(newest: sch.BackupFact | None, current: BackupRecord | None) -> BackupRecord | None:
    if newest is None:
        return None
    record = BackupRecord(name=newest.name, completed_at=newest.completed_at)
    return None if record == current else record
