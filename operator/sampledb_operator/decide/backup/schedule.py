"""Scheduled backups as pure decisions: which slot is due, when the next one is, what retention prunes.

Pure: no I/O, no clock (the caller passes `now`); cron schedules are read in UTC. A slot is due
when it is the latest slot at or before `now`, is not before the SampleDB was created (no backfill),
and has no scheduled backup yet. Only the latest slot is ever due, so a long downtime yields one
backup, not a burst. No new backup is due while an earlier scheduled one is unfinished (at most
one runs at a time). Retention never touches manual or pre-delete backups, backups the operator
did not create for this incarnation, unfinished ones, the newest `retention` Succeeded ones of each
kind it counts (scheduled, pre-upgrade, pre-migration: each kind apart), or the newest Failed ones
after them. `incarnation_backups` picks this incarnation's cached SampleDBBackups (the verification
step's too) and `backup_facts` reads them as the facts all of this works on; decide/backup/schedule_plan.py
makes a pass's plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import CroniterError, croniter

from sampledb_operator.decide.backup.backups import DATABASE_UID_LABEL, SCHEDULED_FOR_ANNOTATION
from sampledb_operator.decide.labels import MANAGED_BY, MANAGED_BY_LABEL
from sampledb_operator.model import timestamps
from sampledb_operator.model.backup import BackupPhase, BackupReason
from sampledb_operator.model.conditions import Condition, ConditionType
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

MAX_REQUEUE = 3600.0  # an idle operator still looks at least hourly
MIN_REQUEUE = 1.0
FAILED_HISTORY = 3  # Failed scheduled backups kept after the newest Succeeded one (the evidence)
FINISHED = (BackupPhase.SUCCEEDED.value, BackupPhase.FAILED.value)
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class BackupFact:
    """One SampleDBBackup of the database, as far as the schedule cares."""

    name: str
    reason: str
    phase: str | None  # Pending, Running, Succeeded, Failed, or None (no status yet)
    slot: datetime | None = None  # the slot a scheduled backup was taken for
    completed_at: datetime | None = None
    message: str = ""
    owned: bool = False  # the operator created it for this incarnation of the database (its labels say so)

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    @property
    def scheduled(self) -> bool:
        return self.reason == BackupReason.SCHEDULED.value and self.slot is not None


@dataclass(frozen=True, slots=True)
class ScheduleDecision:
    """What the schedule asks for now."""

    slot: datetime | None  # the latest slot at or before now, not before creation
    due: bool  # take a backup for `slot` now
    next_slot: datetime | None  # the first slot after now (None: the schedule never fires)
    requeue_after: float | None  # seconds until next_slot, within [MIN_REQUEUE, MAX_REQUEUE]
    prune: tuple[BackupFact, ...]  # scheduled backups retention removes
    problem: str | None = None  # why the schedule cannot be followed


def incarnation_backups(backups: Iterable[Obj], db: SampleDB) -> list[Obj]:
    """The SampleDBBackups of this SampleDB incarnation among `backups` (the cached ones of its
    namespace), in their order; those being deleted are left out.

    A backup counts when its database-uid label names this SampleDB, or, without that label, when
    it was created after the SampleDB.
    """
    name, uid, created = db.metadata.name, db.metadata.uid or "", db.metadata.creation_timestamp
    out = []
    for obj in backups:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if spec.get("database") != name or meta.get("deletionTimestamp"):
            continue
        owner_uid = (meta.get("labels") or {}).get(DATABASE_UID_LABEL)
        if owner_uid is not None and owner_uid != uid:
            continue
        made = timestamps.parse(meta.get("creationTimestamp")) or created
        if owner_uid is None and created is not None and made is not None and made < created:
            continue
        out.append(obj)
    return out


def backup_facts(backups: Iterable[Obj], db: SampleDB) -> list[BackupFact]:
    """The facts of this incarnation's backups (`incarnation_backups`); only the operator's own
    scheduled backups (its labels for this uid) carry a slot, and only its own are `owned`."""
    uid = db.metadata.uid or ""
    out = []
    for obj in incarnation_backups(backups, db):
        meta, status = obj["metadata"], obj.get("status") or {}
        labels = meta.get("labels") or {}
        mine = labels.get(DATABASE_UID_LABEL) == uid and labels.get(MANAGED_BY_LABEL) == MANAGED_BY
        reason = str((obj.get("spec") or {}).get("reason") or BackupReason.MANUAL.value)
        slot_annotation = (meta.get("annotations") or {}).get(SCHEDULED_FOR_ANNOTATION)
        slot = parse_slot(slot_annotation) if mine and reason == BackupReason.SCHEDULED.value else None
        out.append(BackupFact(name=meta["name"], reason=reason, phase=status.get("phase"), slot=slot,
                              completed_at=timestamps.parse(status.get("completedAt")),
                              message=str(status.get("message") or ""), owned=mine))
    return out


def slot_text(slot: datetime) -> str:
    """A slot as RFC 3339 UTC (the value of the scheduled-for annotation)."""
    return slot.astimezone(UTC).strftime(TIME_FORMAT)


def parse_slot(text: str | None) -> datetime | None:
    """The slot of a scheduled-for annotation, or None when it is missing or unreadable."""
    if not text:
        return None
    try:
        return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def latest_slot(schedule: str, now: datetime, created: datetime | None) -> datetime | None:
    """The latest slot at or before `now`, or None when it is before `created` (no backfill)."""
    start = now.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
    slot: datetime = croniter(schedule, start).get_prev(datetime)
    if created is not None and slot < created.astimezone(UTC).replace(microsecond=0):
        return None
    return slot


def next_slot(schedule: str, now: datetime) -> datetime:
    """The first slot strictly after `now`."""
    nxt: datetime = croniter(schedule, now.astimezone(UTC)).get_next(datetime)
    return nxt


def requeue_delay(now: datetime, nxt: datetime | None) -> float:
    """Seconds from `now` to `nxt`, at least MIN_REQUEUE and at most MAX_REQUEUE."""
    if nxt is None:
        return MAX_REQUEUE
    return min(MAX_REQUEUE, max(MIN_REQUEUE, (nxt - now).total_seconds()))


PRE_WORK_REASONS = (BackupReason.PRE_UPGRADE.value, BackupReason.PRE_MIGRATION.value)


def to_prune(backups: Sequence[BackupFact], retention: int) -> tuple[BackupFact, ...]:
    """The scheduled backups that retention removes, oldest first, then the pre-upgrade and
    pre-migration ones it removes (`pre_work_to_prune`).

    Kept: the newest `retention` Succeeded ones; Failed ones newer than the newest Succeeded (at most
    FAILED_HISTORY of them); everything unfinished; everything not scheduled.
    """
    return (*_scheduled_to_prune(backups, retention), *pre_work_to_prune(backups, retention))


def pre_work_to_prune(backups: Sequence[BackupFact], retention: int) -> tuple[BackupFact, ...]:
    """The pre-upgrade and pre-migration backups the operator made that retention removes, oldest first.

    Each reason is counted apart, by completion time, with the rule of scheduled backups: the newest
    `retention` Succeeded ones stay (so the newest, status.lastSnapshot and the one an upgrade or a
    migration under way relies on, always does), and the Failed ones newer than them (at most
    FAILED_HISTORY: a failed attempt's backup is its record). A backup the operator did not make
    (a user's, another incarnation's) is never removed.
    """
    out: list[BackupFact] = []
    for reason in PRE_WORK_REASONS:
        mine = sorted((b for b in backups if b.owned and b.reason == reason), key=_completed_key, reverse=True)
        succeeded = [b for b in mine if b.phase == BackupPhase.SUCCEEDED.value]
        failed = [b for b in mine if b.phase == BackupPhase.FAILED.value]
        recent_failed = [b for b in failed
                         if not succeeded or _completed_key(b) > _completed_key(succeeded[0])][:FAILED_HISTORY]
        keep = {b.name for b in succeeded[:max(retention, 1)]} | {b.name for b in recent_failed}
        out += sorted((b for b in mine if b.finished and b.name not in keep), key=_completed_key)
    return tuple(out)


def _scheduled_to_prune(backups: Sequence[BackupFact], retention: int) -> tuple[BackupFact, ...]:
    scheduled = sorted((b for b in backups if b.scheduled), key=_slot_key, reverse=True)
    succeeded = [b for b in scheduled if b.phase == BackupPhase.SUCCEEDED.value]
    newest_ok = succeeded[0].slot if succeeded else None
    failed = [b for b in scheduled if b.phase == BackupPhase.FAILED.value]
    recent_failed = [b for b in failed if newest_ok is None or _slot_key(b) > newest_ok][:FAILED_HISTORY]
    keep = {b.name for b in succeeded[:max(retention, 1)]} | {b.name for b in recent_failed}
    out = [b for b in scheduled if b.finished and b.name not in keep]
    return tuple(sorted(out, key=_slot_key))


def decide(schedule: str, now: datetime, created: datetime | None, backups: Sequence[BackupFact],
           retention: int) -> ScheduleDecision:
    """The slot that is due (if any), the wait until the next one, and what retention prunes."""
    prune = to_prune(backups, retention)
    try:
        slot = latest_slot(schedule, now, created)
        nxt: datetime | None = next_slot(schedule, now)
    except (CroniterError, ValueError, KeyError):
        return ScheduleDecision(None, False, None, None, prune,
                                problem=f"backup.schedule {schedule!r} never fires (no such date)")
    scheduled = [b for b in backups if b.scheduled]
    taken = slot is not None and any(b.slot == slot for b in scheduled)
    unfinished = any(not b.finished for b in scheduled)
    return ScheduleDecision(slot, slot is not None and not taken and not unfinished, nxt,
                            requeue_delay(now, nxt), prune)


def health(backups: Sequence[BackupFact], *, scheduled_only: bool, generation: int | None) -> Condition | None:
    """BackupHealthy from the newest finished backup (scheduled ones only, or of any reason); None if none."""
    pool = [b for b in backups if b.finished and (b.scheduled or not scheduled_only)]
    if not pool:
        return None
    newest = max(pool, key=_slot_key if scheduled_only else _completed_key)
    kind = "scheduled backup" if newest.scheduled else f"{newest.reason} backup"
    when = f" at {slot_text(newest.completed_at)}" if newest.completed_at else ""
    if newest.phase == BackupPhase.SUCCEEDED.value:
        return _condition("True", "BackupSucceeded", f"the latest {kind} {newest.name} succeeded{when}", generation)
    detail = f": {newest.message}" if newest.message else ""
    return _condition("False", "BackupFailed", f"the latest {kind} {newest.name} failed{when}{detail}", generation)


def awaiting_first(generation: int | None) -> Condition:
    """BackupHealthy while a schedule is set and no scheduled backup has finished yet."""
    return _condition("Unknown", "AwaitingFirstBackup", "no scheduled backup has finished yet", generation)


def schedule_problem(problem: str, generation: int | None) -> Condition:
    return _condition("False", "InvalidSchedule", problem, generation)


def newest_succeeded(backups: Sequence[BackupFact]) -> BackupFact | None:
    """The newest Succeeded backup of any reason (by completion time, then name)."""
    done = [b for b in backups if b.phase == BackupPhase.SUCCEEDED.value]
    return max(done, key=_completed_key) if done else None


def _condition(status: str, reason: str, message: str, generation: int | None) -> Condition:
    return Condition.model_validate({"type": ConditionType.BACKUP_HEALTHY.value, "status": status, "reason": reason,
                                     "message": message[:1000], "observedGeneration": generation})


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _slot_key(b: BackupFact) -> datetime:
    return b.slot or _EPOCH


def _completed_key(b: BackupFact) -> tuple[datetime, str]:
    return b.completed_at or _EPOCH, b.name
