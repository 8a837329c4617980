"""decide/backup/backup_run.py and decide/backup/schedule_plan.py while a database's data volume is full (its SampleDB's
Degraded=True/VolumeFull): a running backup is stopped, one not started waits saying why, and the scheduled
backup of a due slot is postponed (BackupHealthy False/BackupsPostponed) until the database is Ready again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sampledb_operator.decide.backup.backup_files import FILES_FINALIZER
from sampledb_operator.decide.backup.backup_run import (
    BackupFacts,
    plan_backup,
    result_read_needed,
    volume_read_needed,
)
from sampledb_operator.decide.backup.schedule import slot_text
from sampledb_operator.decide.backup.schedule_plan import POSTPONED, ScheduleInputs, SchedulePlan, plan_schedule
from sampledb_operator.decide.effects import Create, Delete, Emit, Patch
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import bucket_label
from sampledb_operator.decide.lifecycle import stuck
from sampledb_operator.decide.status import JobState
from sampledb_operator.decide.volume_full import volume_full
from sampledb_operator.model import names
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB

SAID = '2026-11-30 08:59:01 UTC [41] PANIC:  could not write to file "pg_wal/xlogtemp.41": No space left on device'


def full_message(said: str = SAID, pod: str = "orders-0") -> str:
    """The Degraded message decide/lifecycle/stuck.py gives a pod that stops on a full volume."""
    cs = {"name": "postgres", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
          "lastState": {"terminated": {"exitCode": 1, "message": said}}}
    [problem] = stuck.pod_problems([{"metadata": {"name": pod}, "status": {"containerStatuses": [cs]}}])
    assert problem.reason == "VolumeFull"
    return problem.message


FULL = {"type": "Degraded", "status": "True", "reason": "VolumeFull", "message": full_message()}
NOT_READY = {"type": "Ready", "status": "False", "reason": "PodNotReady"}
READY = {"type": "Ready", "status": "True", "reason": "DatabaseReady"}
SHORT = "pod orders-0: container postgres stops because a volume is full"


# ---------------------------------------------------------------- the SampleDB's words

def test_the_degraded_message_is_shortened_to_the_words_naming_the_pod() -> None:
    assert volume_full(database([FULL])) == SHORT
    later = {**FULL, "message": full_message(SAID.replace("08:59:01", "09:04:12"))}
    assert volume_full(database([later])) == SHORT  # the server's changing last lines are left out


@pytest.mark.parametrize("conditions", [
    [],
    [{**FULL, "status": "False", "reason": "AsExpected"}],
    [{**FULL, "reason": "CrashLoopBackOff"}],
])
def test_no_full_volume_without_degraded_volume_full(conditions: list[dict[str, Any]]) -> None:
    assert volume_full(database(conditions)) is None


def test_another_wording_is_bounded() -> None:
    long = {**FULL, "message": "x" * 2000}
    said = volume_full(database([long]))
    assert said is not None and len(said) == 300 and said.endswith("...")


# ---------------------------------------------------------------- a SampleDBBackup

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
JOB = names.backup_job_name("orders", "b1")
RUNNING_JOB = JobState(False, False, "Running", "")
FAILED_JOB = JobState(True, False, "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def database(conditions: list[dict[str, Any]], schedule: str | None = None, *,
             backup_healthy: dict[str, Any] | None = None) -> SampleDB:
    backup: dict[str, Any] = {"retention": 2, **({"schedule": schedule} if schedule else {})}
    conds = [*conditions, *([backup_healthy] if backup_healthy else [])]
    return SampleDB.model_validate({
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-db", "generation": 2,
                     "creationTimestamp": "2026-03-01T00:00:00Z"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "backup": backup},
        "status": {"currentVersion": "16.4", "conditions": conds}})


def backup(reason: str = "manual", **status: Any) -> SampleDBBackup:
    meta = {"name": "b1", "namespace": "shop", "uid": "u-b", "generation": 1, "resourceVersion": "7",
            "labels": {"sampledb.io/database": "orders", **bucket_label("shop", "orders")},
            "finalizers": [FILES_FINALIZER]}
    return SampleDBBackup.model_validate({"metadata": meta, "spec": {"database": "orders", "reason": reason},
                                          "status": status})


def facts(b: SampleDBBackup, db: SampleDB, job: JobState | None) -> BackupFacts:
    return BackupFacts(backup=b, db=db, job=job, now=NOW, volume_exists=True)


def written_status(effect: object) -> dict[str, Any]:
    assert isinstance(effect, Patch) and effect.subresource == "status", effect
    assert effect.patch["metadata"] == {"resourceVersion": "7"}
    status: dict[str, Any] = effect.patch["status"]
    return status


RUNNING = {"phase": "Running", "startedAt": "2026-11-30T08:50:00Z", "message": f"Job {JOB} is running",
           "observedGeneration": 1}


def test_a_running_backup_is_stopped_its_job_deleted_then_failed_volume_full_with_a_warning() -> None:
    f = facts(backup(**RUNNING), database([FULL, NOT_READY]), RUNNING_JOB)
    assert not volume_read_needed(f) and not result_read_needed(f)  # nothing read live for it
    planned = plan_backup(f)
    delete, patch, emit = planned.plan.effects
    assert delete == Delete("Job", JOB)  # first: nothing the operator started keeps writing
    status = written_status(patch)
    assert (status["phase"], status["startedAt"], status["completedAt"]) == (
        "Failed", "2026-11-30T08:50:00Z", "2026-11-30T09:00:00Z")
    message = status["message"]
    assert message.startswith(f"Job {JOB} stopped: VolumeFull: the data volume of SampleDB orders is full")
    assert SHORT in message and "grow spec.storage.size or raise spec.storage.autoGrow.maximum" in message
    assert emit == Emit(EventSpec("Warning", "BackupFailed", message))
    assert planned.counted == ("manual", "failed")
    assert planned.plan.result is None


def test_a_running_backup_whose_job_is_gone_already_is_failed_too() -> None:
    """An earlier pass deleted the Job, and its status write was refused (a newer backup): this pass ends it."""
    planned = plan_backup(facts(backup(**RUNNING), database([FULL, NOT_READY]), None))
    delete, patch, _ = planned.plan.effects
    assert delete == Delete("Job", JOB)  # NotFound then: gone already
    assert written_status(patch)["phase"] == "Failed"


def test_a_job_that_finished_is_recorded_as_it_ended() -> None:
    planned = plan_backup(facts(backup(**RUNNING), database([FULL, NOT_READY]), FAILED_JOB))
    assert not any(isinstance(e, Delete) for e in planned.plan.effects)
    assert "failed: BackoffLimitExceeded" in written_status(planned.plan.effects[0])["message"]


def test_a_backup_not_started_waits_naming_the_full_volume() -> None:
    f = facts(backup(), database([FULL, NOT_READY]), None)
    assert not volume_read_needed(f)
    planned = plan_backup(f)
    [effect] = planned.plan.effects
    status = written_status(effect)
    assert status["phase"] == "Pending"
    assert status["message"] == (f"waiting for SampleDB orders to be Ready: its data volume is full ({SHORT});"
                                 " grow spec.storage.size or raise spec.storage.autoGrow.maximum")
    assert planned.plan.result is None  # the SampleDB's next change brings it back


def test_a_pre_delete_snapshot_is_left_as_it_is() -> None:
    running = plan_backup(facts(backup("pre-delete", **RUNNING), database([FULL, NOT_READY]), RUNNING_JOB))
    assert running.plan.effects == ()  # its Job runs on: not stopped
    f = facts(backup("pre-delete"), database([FULL, NOT_READY]), None)
    assert volume_read_needed(f)
    assert isinstance(plan_backup(f).plan.effects[0], Create)  # it does not wait for Ready


def test_a_ready_database_is_not_held_by_a_degraded_volume_full() -> None:
    """A replica's full volume (or a status a pass behind) while the database is Ready: the backup runs."""
    running = plan_backup(facts(backup(**RUNNING), database([FULL, READY]), RUNNING_JOB))
    assert running.plan.effects == ()  # the status already says it runs
    started = plan_backup(facts(backup(), database([FULL, READY]), None))
    assert isinstance(started.plan.effects[0], Create)


# ---------------------------------------------------------------- the schedule

SNOW = datetime(2026, 3, 10, 14, 37, 25, tzinfo=UTC)
SLOT = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
EARLIER = SLOT - timedelta(hours=1)


def scheduled(slot: datetime, phase: str | None = "Succeeded") -> Obj:
    status: Obj = {"phase": phase} if phase else {}
    if phase in ("Succeeded", "Failed"):
        status["completedAt"] = slot_text(slot + timedelta(seconds=30))
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": f"orders-scheduled-{slot:%Y%m%d%H%M%S}", "namespace": "shop",
                         "creationTimestamp": "2026-03-02T00:00:00Z",
                         "labels": {"sampledb.io/database": "orders", "sampledb.io/database-uid": "u-db",
                                    "app.kubernetes.io/managed-by": "sampledb-operator"},
                         "annotations": {"sampledb.io/scheduled-for": slot_text(slot)}},
            "spec": {"database": "orders", "reason": "scheduled"}, "status": status}


def schedule_pass(db: SampleDB, backups: tuple[Obj, ...] = (), *, ready: bool = False,
                  verification: Condition | None = None) -> SchedulePlan:
    return plan_schedule(ScheduleInputs(db=db, backups=backups, now=SNOW, db_ready=ready, busy=False,
                                        verification=verification))


def emitted(p: SchedulePlan) -> list[EventSpec]:
    return [e.event for e in p.plan.effects if isinstance(e, Emit)]


def held(p: SchedulePlan) -> dict[str, Any]:
    assert p.condition is not None
    return p.condition.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_a_due_slot_on_a_full_volume_is_postponed_with_a_warning_once() -> None:
    ok = scheduled(EARLIER)
    p = schedule_pass(database([FULL, NOT_READY], "@hourly"), (ok,))
    assert not any(isinstance(e, Create) for e in p.plan.effects) and p.slot is None
    assert p.condition is not None
    assert (p.condition.status, p.condition.reason) == ("False", POSTPONED)
    assert p.condition.message == (
        f"the scheduled backup of 2026-03-10T14:00:00Z is postponed: {SHORT}; it is taken once the database is"
        " Ready again (grow spec.storage.size or raise spec.storage.autoGrow.maximum)")
    assert p.condition.observed_generation == 2
    assert emitted(p) == [EventSpec("Warning", POSTPONED, p.condition.message)]
    # said once: the next pass finds it in the status, and the server's new last lines change nothing
    later = {**FULL, "message": full_message(SAID.replace("08:59:01", "09:04:12"))}
    again = schedule_pass(database([later, NOT_READY], "@hourly", backup_healthy=held(p)), (ok,))
    assert again.condition == p.condition and emitted(again) == []


def test_a_scheduled_backup_not_started_yet_is_postponed_too() -> None:
    waiting = scheduled(SLOT, phase="Pending")  # taken while the database was Ready, then the volume filled
    p = schedule_pass(database([FULL, NOT_READY], "@hourly"), (scheduled(EARLIER), waiting))
    assert p.condition is not None and p.condition.reason == POSTPONED
    assert "backup of 2026-03-10T14:00:00Z is postponed" in p.condition.message


def test_a_running_or_finished_slot_is_not_said_postponed() -> None:
    """The backup step stops a running one (Failed/VolumeFull): BackupHealthy says that outcome then."""
    for phase in ("Running", "Failed"):
        p = schedule_pass(database([FULL, NOT_READY], "@hourly"), (scheduled(EARLIER), scheduled(SLOT, phase)))
        assert p.condition is not None and p.condition.reason != POSTPONED, phase


def test_not_ready_for_another_reason_is_not_postponed() -> None:
    degraded = {**FULL, "reason": "CrashLoopBackOff", "message": "pod orders-0: keeps failing"}
    p = schedule_pass(database([degraded, NOT_READY], "@hourly"), (scheduled(EARLIER),))
    assert p.condition is not None and (p.condition.status, p.condition.reason) == ("True", "BackupSucceeded")
    assert emitted(p) == []


def test_a_failed_verification_does_not_hide_the_postponement() -> None:
    verification = Condition.model_validate({"type": "BackupHealthy", "status": "False",
                                             "reason": "VerificationFailed", "message": "bad"})
    p = schedule_pass(database([FULL, NOT_READY], "@hourly"), (scheduled(EARLIER),), verification=verification)
    assert p.condition is not None and p.condition.reason == POSTPONED


def test_ready_again_the_slot_is_taken_and_the_condition_holds_until_its_backup_succeeds() -> None:
    ok = scheduled(EARLIER)
    postponed = held(schedule_pass(database([FULL, NOT_READY], "@hourly"), (ok,)))
    recovered = [{**FULL, "status": "False", "reason": "AsExpected", "message": "no problems found"}, READY]

    taking = schedule_pass(database(recovered, "@hourly", backup_healthy=postponed), (ok,), ready=True)
    assert [type(e).__name__ for e in taking.plan.effects] == ["Create"]  # the slot's backup, no Event
    assert taking.slot == SLOT
    assert taking.condition is not None and taking.condition.reason == POSTPONED

    running = schedule_pass(database(recovered, "@hourly", backup_healthy=postponed),
                            (ok, scheduled(SLOT, "Running")), ready=True)
    assert running.condition is not None and running.condition.reason == POSTPONED and emitted(running) == []

    done = schedule_pass(database(recovered, "@hourly", backup_healthy=postponed), (ok, scheduled(SLOT)),
                         ready=True)
    assert done.condition is not None
    assert (done.condition.status, done.condition.reason) == ("True", "BackupSucceeded")
    assert emitted(done) == [EventSpec("Normal", "BackupRecovered", done.condition.message)]


def test_ready_again_a_failed_backup_says_so() -> None:
    postponed = held(schedule_pass(database([FULL, NOT_READY], "@hourly"), (scheduled(EARLIER),)))
    p = schedule_pass(database([READY], "@hourly", backup_healthy=postponed),
                      (scheduled(EARLIER), scheduled(SLOT, "Failed")), ready=True)
    assert p.condition is not None and (p.condition.status, p.condition.reason) == ("False", "BackupFailed")
    assert emitted(p) == [EventSpec("Warning", "BackupFailed", p.condition.message)]
