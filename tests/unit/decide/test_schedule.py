"""decide/backup/schedule.py and decide/backup/schedule_plan.py: due slots, no backfill or burst, next-slot delay,
retention, BackupHealthy; the cached backups as facts; one pass of the schedule step as a plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.decide.backup.schedule import (
    FAILED_HISTORY,
    MAX_REQUEUE,
    MIN_REQUEUE,
    BackupFact,
    awaiting_first,
    backup_facts,
    decide,
    health,
    incarnation_backups,
    latest_slot,
    newest_succeeded,
    next_slot,
    parse_slot,
    requeue_delay,
    slot_text,
    to_prune,
)
from sampledb_operator.decide.backup.schedule_plan import ScheduleInputs, SchedulePlan, health_event, plan_schedule
from sampledb_operator.decide.effects import Create, Delete, Emit
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB

NOW = datetime(2026, 3, 10, 14, 37, 25, tzinfo=UTC)
LONG_AGO = datetime(2026, 1, 1, tzinfo=UTC)


def sched(slot: datetime, phase: str | None = "Succeeded", name: str | None = None, message: str = "") -> BackupFact:
    return BackupFact(name=name or f"db-scheduled-{slot:%Y%m%d%H%M%S}", reason="scheduled", phase=phase, slot=slot,
                      completed_at=slot + timedelta(seconds=30) if phase in ("Succeeded", "Failed") else None,
                      message=message)


def minutes_ago(n: int) -> datetime:
    return NOW.replace(second=0) - timedelta(minutes=n)


# ---------------------------------------------------------------- slots


@pytest.mark.parametrize(("schedule", "expected"), [
    ("* * * * *", datetime(2026, 3, 10, 14, 37, tzinfo=UTC)),
    ("@hourly", datetime(2026, 3, 10, 14, 0, tzinfo=UTC)),
    ("0 3 * * *", datetime(2026, 3, 10, 3, 0, tzinfo=UTC)),
    ("@daily", datetime(2026, 3, 10, 0, 0, tzinfo=UTC)),
    ("30 15 * * *", datetime(2026, 3, 9, 15, 30, tzinfo=UTC)),  # today's is still ahead: yesterday's
])
def test_latest_slot_is_the_last_one_at_or_before_now(schedule: str, expected: datetime) -> None:
    assert latest_slot(schedule, NOW, LONG_AGO) == expected


def test_a_slot_exactly_at_now_is_due_now() -> None:
    on_the_hour = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
    assert latest_slot("@hourly", on_the_hour, LONG_AGO) == on_the_hour
    assert latest_slot("@hourly", on_the_hour - timedelta(milliseconds=1), LONG_AGO) == on_the_hour - timedelta(hours=1)


def test_no_backfill_of_slots_before_the_database_existed() -> None:
    created = datetime(2026, 3, 10, 14, 10, tzinfo=UTC)
    assert latest_slot("@hourly", NOW, created) is None
    d = decide("@hourly", NOW, created, [], retention=7)
    assert (d.slot, d.due) == (None, False)
    assert d.next_slot == datetime(2026, 3, 10, 15, 0, tzinfo=UTC)


def test_a_slot_at_the_creation_second_counts() -> None:
    created = datetime(2026, 3, 10, 14, 0, 0, 400_000, tzinfo=UTC)  # creationTimestamp has whole seconds
    assert latest_slot("@hourly", NOW, created) == datetime(2026, 3, 10, 14, 0, tzinfo=UTC)


def test_the_current_slot_without_a_backup_is_due() -> None:
    d = decide("@hourly", NOW, LONG_AGO, [sched(datetime(2026, 3, 10, 13, 0, tzinfo=UTC))], retention=7)
    assert d.due
    assert d.slot == datetime(2026, 3, 10, 14, 0, tzinfo=UTC)


def test_a_slot_with_a_backup_is_not_due_again_whatever_its_phase() -> None:
    slot = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    for phase in (None, "Pending", "Running", "Succeeded", "Failed"):
        assert not decide("@hourly", NOW, LONG_AGO, [sched(slot, phase)], retention=7).due


def test_after_downtime_only_the_latest_missed_slot_is_taken_no_burst() -> None:
    last_taken = sched(NOW - timedelta(hours=9))  # the operator was down for nine hourly slots
    d = decide("@hourly", NOW, LONG_AGO, [last_taken], retention=7)
    assert d.due
    assert d.slot == datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    taken = sched(d.slot, None)  # once that one exists, nothing else is due until the next slot
    assert not decide("@hourly", NOW + timedelta(minutes=5), LONG_AGO, [last_taken, taken], retention=7).due


def test_no_new_backup_while_an_earlier_scheduled_one_is_unfinished() -> None:
    running = sched(minutes_ago(1), "Running")
    assert not decide("* * * * *", NOW, LONG_AGO, [running], retention=7).due
    done = sched(minutes_ago(1), "Failed")
    assert decide("* * * * *", NOW, LONG_AGO, [done], retention=7).due


def test_manual_and_pre_work_backups_do_not_fill_a_slot() -> None:
    manual = BackupFact(name="mine", reason="manual", phase="Succeeded", completed_at=NOW)
    pre = BackupFact(name="pre", reason="pre-upgrade", phase="Running")
    assert decide("@hourly", NOW, LONG_AGO, [manual, pre], retention=7).due


# ---------------------------------------------------------------- next slot and requeue


@pytest.mark.parametrize(("schedule", "expected"), [
    ("* * * * *", 35.0),
    ("@hourly", 22 * 60 + 35.0),
    ("0 3 * * *", MAX_REQUEUE),  # twelve hours away: look again within the hour anyway
])
def test_requeue_waits_until_the_next_slot_capped_at_an_hour(schedule: str, expected: float) -> None:
    d = decide(schedule, NOW, LONG_AGO, [], retention=7)
    assert d.requeue_after == pytest.approx(expected)


def test_requeue_is_at_least_a_second_even_just_before_a_slot() -> None:
    just_before = datetime(2026, 3, 10, 14, 59, 59, 999_000, tzinfo=UTC)
    assert next_slot("@hourly", just_before) == datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
    assert requeue_delay(just_before, next_slot("@hourly", just_before)) == MIN_REQUEUE


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)),
       st.sampled_from(["* * * * *", "*/7 * * * *", "@hourly", "15 4 * * 1-5", "@daily", "@monthly"]))
def test_latest_slot_and_next_slot_bracket_now(now: datetime, schedule: str) -> None:
    last = latest_slot(schedule, now, None)
    nxt = next_slot(schedule, now)
    assert last is not None
    assert last <= now < nxt
    assert next_slot(schedule, last) == nxt  # no slot between the latest one and now
    assert MIN_REQUEUE <= requeue_delay(now, nxt) <= MAX_REQUEUE


def test_a_schedule_that_never_fires_is_a_problem_not_a_crash() -> None:
    d = decide("0 0 30 2 *", NOW, LONG_AGO, [], retention=7)  # February 30th
    assert not d.due
    assert d.problem is not None
    assert "never fires" in d.problem


# ---------------------------------------------------------------- retention


def test_retention_keeps_the_newest_succeeded_scheduled_backups() -> None:
    backups = [sched(minutes_ago(n)) for n in range(5)]
    pruned = to_prune(backups, retention=2)
    assert [b.slot for b in pruned] == [minutes_ago(4), minutes_ago(3), minutes_ago(2)]  # oldest first


def test_retention_never_touches_manual_pre_work_or_unfinished_backups() -> None:
    others = [BackupFact(name=f"x-{r}", reason=r, phase="Succeeded", completed_at=LONG_AGO)
              for r in ("manual", "pre-upgrade", "pre-migration", "pre-delete")]
    unfinished = [sched(minutes_ago(10), "Running"), sched(minutes_ago(11), None)]
    backups = [*others, *unfinished, sched(minutes_ago(1)), sched(minutes_ago(2))]
    assert [b.slot for b in to_prune(backups, retention=1)] == [minutes_ago(2)]


def test_a_scheduled_backup_without_a_slot_is_not_pruned() -> None:
    foreign = BackupFact(name="user-made", reason="scheduled", phase="Succeeded", completed_at=LONG_AGO)
    assert to_prune([foreign, sched(minutes_ago(1))], retention=1) == ()


def test_failed_backups_older_than_the_newest_success_are_pruned() -> None:
    old_failed = sched(minutes_ago(3), "Failed")
    ok = sched(minutes_ago(2))
    new_failed = sched(minutes_ago(1), "Failed")
    assert to_prune([old_failed, ok, new_failed], retention=5) == (old_failed,)


def test_only_a_few_failed_backups_are_kept_while_backups_keep_failing() -> None:
    failing = [sched(minutes_ago(n), "Failed") for n in range(10)]
    kept = set(failing) - set(to_prune(failing, retention=7))
    assert {b.slot for b in kept} == {minutes_ago(n) for n in range(FAILED_HISTORY)}


def test_nothing_is_pruned_within_retention() -> None:
    assert to_prune([sched(minutes_ago(n)) for n in range(3)], retention=3) == ()


# ---------------------------------------------------------------- BackupHealthy and lastBackup


def test_healthy_when_the_newest_finished_scheduled_backup_succeeded() -> None:
    cond = health([sched(minutes_ago(2), "Failed"), sched(minutes_ago(1), name="newest")], scheduled_only=True,
                  generation=4)
    assert cond is not None
    assert (cond.type, cond.status, cond.reason, cond.observed_generation) == ("BackupHealthy", "True",
                                                                               "BackupSucceeded", 4)
    assert "newest" in cond.message


def test_unhealthy_with_the_failure_message_when_the_newest_one_failed() -> None:
    cond = health([sched(minutes_ago(2)), sched(minutes_ago(1), "Failed", message="pg_dump: disk full")],
                  scheduled_only=True, generation=1)
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", "BackupFailed")
    assert "pg_dump: disk full" in cond.message


def test_a_running_backup_does_not_hide_the_last_outcome() -> None:
    cond = health([sched(minutes_ago(2), "Failed"), sched(minutes_ago(1), "Running")], scheduled_only=True,
                  generation=1)
    assert cond is not None
    assert cond.reason == "BackupFailed"


def test_no_condition_until_a_backup_finished() -> None:
    assert health([sched(minutes_ago(1), "Running")], scheduled_only=True, generation=1) is None
    assert awaiting_first(1).status == "Unknown"


def test_manual_backups_count_for_health_only_without_a_schedule() -> None:
    manual = BackupFact(name="m", reason="manual", phase="Failed", completed_at=NOW, message="boom")
    assert health([manual], scheduled_only=True, generation=1) is None
    cond = health([manual], scheduled_only=False, generation=1)
    assert cond is not None
    assert (cond.status, cond.reason) == ("False", "BackupFailed")


def test_last_backup_is_the_newest_success_of_any_reason() -> None:
    manual = BackupFact(name="m", reason="manual", phase="Succeeded", completed_at=NOW)
    failed = BackupFact(name="f", reason="manual", phase="Failed", completed_at=NOW + timedelta(minutes=1))
    newest = newest_succeeded([sched(minutes_ago(5)), manual, failed])
    assert newest is not None
    assert newest.name == "m"
    assert newest_succeeded([failed]) is None


def test_slot_annotation_round_trips_and_rejects_garbage() -> None:
    slot = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    assert parse_slot(slot_text(slot)) == slot
    assert parse_slot("yesterday") is None
    assert parse_slot(None) is None


def test_retention_keeps_the_newest_pre_work_backups_of_each_reason_the_operator_made() -> None:
    """Issue #11, item 13d: pre-upgrade and pre-migration backups were never pruned."""

    def pre(name: str, reason: str, minutes: int, phase: str = "Succeeded", owned: bool = True) -> BackupFact:
        return BackupFact(name=name, reason=reason, phase=phase, completed_at=minutes_ago(minutes), owned=owned)

    backups = [pre("u1", "pre-upgrade", 50), pre("u2", "pre-upgrade", 40), pre("u3", "pre-upgrade", 30),
               pre("u4-failed", "pre-upgrade", 20, "Failed"), pre("u5-running", "pre-upgrade", 0, "Running"),
               pre("m1", "pre-migration", 45), pre("m2-failed", "pre-migration", 44, "Failed"),
               pre("m3", "pre-migration", 10),
               pre("users", "pre-upgrade", 90, owned=False), pre("d1", "pre-delete", 99)]
    pruned = [b.name for b in to_prune(backups, retention=2)]
    # the two newest Succeeded of each reason stay, the failure after them (its attempt's record), the
    # unfinished one, a user's and pre-delete ones; an older failure goes with the old successes
    assert pruned == ["u1", "m2-failed"]


# ---------------------------------------------------------------- the cached objects as facts

DB_CREATED = "2026-03-01T00:00:00Z"


def database(schedule: str | None = "@hourly", *, retention: int = 2, conditions: list[dict[str, Any]] | None = None,
             last_backup: dict[str, Any] | None = None) -> SampleDB:
    backup: dict[str, Any] = {"retention": retention, **({"schedule": schedule} if schedule else {})}
    status: dict[str, Any] = {"conditions": conditions or []}
    if last_backup:
        status["lastBackup"] = last_backup
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "db", "namespace": "shop", "uid": "uid-db", "generation": 2,
                     "creationTimestamp": DB_CREATED},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "backup": backup}, "status": status})


def backup_obj(name: str, *, reason: str = "scheduled", slot: datetime | None = None, phase: str | None = None,
               completed: datetime | None = None, uid: str | None = "uid-db", managed: bool = True,
               created: str = "2026-03-02T00:00:00Z", database_name: str = "db", deleting: bool = False,
               message: str = "") -> Obj:
    labels = {"sampledb.io/database": database_name}
    if uid is not None:
        labels["sampledb.io/database-uid"] = uid
    if managed:
        labels["app.kubernetes.io/managed-by"] = "sampledb-operator"
    meta: Obj = {"name": name, "namespace": "shop", "labels": labels, "creationTimestamp": created}
    if slot is not None:
        meta["annotations"] = {"sampledb.io/scheduled-for": slot_text(slot)}
    if deleting:
        meta["deletionTimestamp"] = "2026-03-10T00:00:00Z"
    status: Obj = {}
    if phase:
        status["phase"] = phase
    if completed:
        status["completedAt"] = slot_text(completed)
    if message:
        status["message"] = message
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "metadata": meta,
            "spec": {"database": database_name, "reason": reason}, "status": status}


def scheduled_obj(slot: datetime, phase: str | None = "Succeeded", **kw: Any) -> Obj:
    done = phase in ("Succeeded", "Failed")
    return backup_obj(f"db-scheduled-{slot:%Y%m%d%H%M%S}", slot=slot, phase=phase,
                      completed=slot + timedelta(seconds=30) if done else None, **kw)


def test_backup_facts_count_this_incarnations_backups_only() -> None:
    slot = datetime(2026, 3, 10, 13, 0, tzinfo=UTC)
    objs = [
        scheduled_obj(slot),  # ours: a scheduled backup with its slot
        backup_obj("other-incarnation", uid="uid-old"),
        backup_obj("unlabelled-older", uid=None, managed=False, reason="manual", created="2026-02-01T00:00:00Z"),
        backup_obj("unlabelled-newer", uid=None, managed=False, reason="manual"),
        backup_obj("going", deleting=True),
        backup_obj("other-db", database_name="other"),
        backup_obj("users-scheduled", slot=slot, managed=False),  # a user's object carrying our annotation
    ]
    facts = {f.name: f for f in backup_facts(objs, database())}
    assert sorted(facts) == ["db-scheduled-20260310130000", "unlabelled-newer", "users-scheduled"]
    ours = facts["db-scheduled-20260310130000"]
    assert (ours.slot, ours.owned, ours.phase, ours.completed_at) == (slot, True, "Succeeded",
                                                                      slot + timedelta(seconds=30))
    assert (facts["users-scheduled"].slot, facts["users-scheduled"].owned) == (None, False)
    assert facts["unlabelled-newer"].reason == "manual"
    assert [o["metadata"]["name"] for o in incarnation_backups(objs, database())] == [
        "db-scheduled-20260310130000", "unlabelled-newer", "users-scheduled"]


# ---------------------------------------------------------------- one pass as a plan


def plan(db: SampleDB | None = None, backups: tuple[Obj, ...] = (), *, ready: bool = True, busy: bool = False,
         verification: Condition | None = None, now: datetime = NOW) -> SchedulePlan:
    return plan_schedule(ScheduleInputs(db=db or database(), backups=backups, now=now, db_ready=ready, busy=busy,
                                        verification=verification))


def emitted(p: SchedulePlan) -> list[EventSpec]:
    return [e.event for e in p.plan.effects if isinstance(e, Emit)]


def test_the_due_slot_creates_exactly_one_backup_with_its_slot_annotation() -> None:
    p = plan(backups=(scheduled_obj(datetime(2026, 3, 10, 13, 0, tzinfo=UTC)),))
    creates = [e for e in p.plan.effects if isinstance(e, Create)]
    assert len(creates) == 1
    [create] = creates
    meta = create.obj["metadata"]
    assert meta["name"] == "db-scheduled-20260310140000"
    assert meta["annotations"] == {"sampledb.io/scheduled-for": "2026-03-10T14:00:00Z"}
    assert meta["labels"]["sampledb.io/database-uid"] == "uid-db"
    assert create.obj["spec"]["reason"] == "scheduled"
    assert create.announce == EventSpec(
        "Normal", "BackupScheduled", "scheduled backup db-scheduled-20260310140000 for 2026-03-10T14:00:00Z requested")
    assert p.slot == datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    assert p.requeue_after == pytest.approx(22 * 60 + 35.0)  # until 15:00
    assert p.plan.result == Result(requeue_after=p.requeue_after)


@pytest.mark.parametrize(("ready", "busy"), [(False, False), (True, True)])
def test_no_backup_while_the_database_is_not_ready_or_busy(ready: bool, busy: bool) -> None:
    p = plan(ready=ready, busy=busy)
    assert not any(isinstance(e, Create) for e in p.plan.effects)
    assert p.slot is None
    assert p.plan.result == Result(requeue_after=22 * 60 + 35.0)  # still comes back at the next slot


def test_a_slot_whose_backup_exists_is_counted_once() -> None:
    """An earlier pass created the slot's backup (whether its create answered or was refused as
    AlreadyExists): once it is in the cache, nothing is created again and it is not a second slot."""
    taken = scheduled_obj(datetime(2026, 3, 10, 14, 0, tzinfo=UTC), phase=None)
    p = plan(backups=(taken,))
    assert p.plan.effects == ()
    assert p.plan.result == Result(requeue_after=22 * 60 + 35.0)
    cond = p.condition
    assert cond is not None and cond.reason == "AwaitingFirstBackup"


def test_an_object_of_the_slots_name_that_is_not_ours_is_never_overwritten() -> None:
    foreign = backup_obj("db-scheduled-20260310140000", uid="uid-old")  # another incarnation's
    p = plan(backups=(foreign,))
    assert not any(isinstance(e, Create) for e in p.plan.effects)


def test_retention_prunes_only_owned_scheduled_backups_oldest_first_with_events() -> None:
    slots = [datetime(2026, 3, 10, h, 0, tzinfo=UTC) for h in (10, 11, 12, 13)]
    users = backup_obj("users-scheduled", slot=slots[0], phase="Succeeded", completed=slots[0], managed=False)
    manual = backup_obj("db-manual", reason="manual", phase="Succeeded", completed=slots[0])
    p = plan(database(retention=2), backups=(*(scheduled_obj(s) for s in reversed(slots)), users, manual))
    kinds = [type(e).__name__ for e in p.plan.effects]
    assert kinds == ["Create", "Delete", "Delete"]  # the slot's backup first, then the prunes
    deletes = [e for e in p.plan.effects if isinstance(e, Delete)]
    assert [(d.kind, d.name) for d in deletes] == [("SampleDBBackup", "db-scheduled-20260310100000"),
                                                   ("SampleDBBackup", "db-scheduled-20260310110000")]
    assert deletes[0].announce == EventSpec(
        "Normal", "BackupPruned", "deleted Succeeded scheduled backup db-scheduled-20260310100000 (retention 2)")


def test_without_a_schedule_retention_still_prunes_and_the_pass_does_not_come_back() -> None:
    old = backup_obj("db-pre-upgrade-a", reason="pre-upgrade", phase="Succeeded",
                     completed=datetime(2026, 3, 9, tzinfo=UTC))
    new = backup_obj("db-pre-upgrade-b", reason="pre-upgrade", phase="Succeeded",
                     completed=datetime(2026, 3, 10, tzinfo=UTC))
    p = plan(database(None, retention=1), backups=(old, new))
    assert [(type(e).__name__, getattr(e, "name", None)) for e in p.plan.effects] == [("Delete", "db-pre-upgrade-a")]
    assert (p.requeue_after, p.plan.result, p.slot) == (None, None, None)
    assert p.last_snapshot is not None and p.last_snapshot.name == "db-pre-upgrade-b"
    assert p.condition is not None and p.condition.reason == "BackupSucceeded"


def test_last_backup_is_reported_only_when_the_status_says_otherwise() -> None:
    done = scheduled_obj(datetime(2026, 3, 10, 14, 0, tzinfo=UTC))
    p = plan(backups=(done,))
    assert p.last_backup is not None
    assert (p.last_backup.name, p.last_backup.completed_at) == ("db-scheduled-20260310140000",
                                                                datetime(2026, 3, 10, 14, 0, 30, tzinfo=UTC))
    same = database(last_backup={"name": "db-scheduled-20260310140000", "completedAt": "2026-03-10T14:00:30Z"})
    assert plan(same, backups=(done,)).last_backup is None


def _cond(status: str, reason: str, message: str = "m") -> Condition:
    return Condition.model_validate({"type": "BackupHealthy", "status": status, "reason": reason, "message": message})


@pytest.mark.parametrize(("old", "new", "expected"), [
    (None, None, None),
    (None, _cond("Unknown", "AwaitingFirstBackup"), None),
    (None, _cond("True", "BackupSucceeded"), None),
    (None, _cond("False", "BackupFailed", "boom"), EventSpec("Warning", "BackupFailed", "boom")),
    (_cond("True", "BackupSucceeded"), _cond("False", "VerificationFailed", "bad"),
     EventSpec("Warning", "VerificationFailed", "bad")),
    (_cond("False", "BackupFailed", "a failed"), _cond("False", "BackupFailed", "b failed"),
     EventSpec("Warning", "BackupFailed", "b failed")),  # another failed backup is announced too
    (_cond("False", "BackupFailed", "boom"), _cond("False", "BackupFailed", "boom"), None),  # said already
    (_cond("False", "BackupFailed"), _cond("True", "BackupSucceeded", "ok"),
     EventSpec("Normal", "BackupRecovered", "ok")),
    (_cond("Unknown", "AwaitingFirstBackup"), _cond("True", "BackupSucceeded", "ok"), None),
    (_cond("True", "BackupSucceeded", "ok"), _cond("True", "BackupSucceeded", "newer ok"), None),
    (_cond("False", "BackupFailed"), _cond("Unknown", "AwaitingFirstBackup"), None),
])
def test_health_transitions_and_their_events(old: Condition | None, new: Condition | None,
                                             expected: EventSpec | None) -> None:
    assert health_event(old, new) == expected


def test_a_failed_backup_is_announced_once_the_status_holds_it_nothing_more() -> None:
    failed = scheduled_obj(datetime(2026, 3, 10, 14, 0, tzinfo=UTC), "Failed", message="pg_dump: disk full")
    p = plan(backups=(failed,))
    assert p.condition is not None and (p.condition.status, p.condition.reason) == ("False", "BackupFailed")
    assert emitted(p) == [EventSpec("Warning", "BackupFailed", p.condition.message)]
    assert isinstance(p.plan.effects[-1], Emit)  # after the writes
    held = database(conditions=[p.condition.model_dump(by_alias=True, mode="json", exclude_none=True)])
    assert emitted(plan(held, backups=(failed,))) == []


def test_a_failed_verification_is_merged_into_backup_healthy() -> None:
    ok = scheduled_obj(datetime(2026, 3, 10, 14, 0, tzinfo=UTC))
    failed_verification = _cond("False", "VerificationFailed", "backup x failed verification")
    p = plan(backups=(ok,), verification=failed_verification)
    assert p.condition == failed_verification
    assert emitted(p) == [EventSpec("Warning", "VerificationFailed", "backup x failed verification")]


def test_a_schedule_that_never_fires_says_so_and_creates_nothing() -> None:
    p = plan(database("0 0 30 2 *"))
    assert p.condition is not None and (p.condition.status, p.condition.reason) == ("False", "InvalidSchedule")
    assert [type(e).__name__ for e in p.plan.effects] == ["Emit"]
    assert (p.requeue_after, p.plan.result) == (None, None)
