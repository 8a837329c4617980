"""decide/backup/backup_run.py: one pass of a SampleDBBackup as a plan, without any server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sampledb_operator.decide.backup.backup_files import FILES_FINALIZER
from sampledb_operator.decide.backup.backup_run import (
    BackupFacts,
    plan_backup,
    result_read_needed,
    volume_read_needed,
    with_resource_version,
)
from sampledb_operator.decide.effects import Create, Emit, Patch
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.labels import bucket_label
from sampledb_operator.decide.status import JobState
from sampledb_operator.model import names
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
JOB = names.backup_job_name("orders", "b1")
RUNNING = JobState(False, False, "Running", "")
COMPLETE = JobState(True, True, "Complete", "")
FAILED = JobState(True, False, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
SHA = "a" * 64
LABELS = {"sampledb.io/database": "orders", **bucket_label("shop", "orders")}  # what every backup carries


def backup(name: str = "b1", *, labelled: bool = True, finalizer: bool = True, reason: str = "manual",
           **status: Any) -> SampleDBBackup:
    meta: dict[str, Any] = {"name": name, "namespace": "shop", "uid": "u-b", "generation": 1,
                            "resourceVersion": "7"}
    if labelled:
        meta["labels"] = dict(LABELS)
    if finalizer:
        meta["finalizers"] = [FILES_FINALIZER]
    return SampleDBBackup.model_validate({"metadata": meta, "spec": {"database": "orders", "reason": reason},
                                          "status": status})


def db(*, ready: bool = True) -> SampleDB:
    return SampleDB.model_validate({
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-db"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
        "status": {"currentVersion": "16.4",
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "R"}]}})


def facts(b: SampleDBBackup | None = None, *, database: SampleDB | None = None, job: JobState | None = None,
          volume: bool | None = True, result: dict[str, Any] | None = None) -> BackupFacts:
    return BackupFacts(backup=b or backup(), db=database, job=job, now=NOW, volume_exists=volume,
                       job_result=result or {})


def status_patch(effect: object) -> dict[str, Any]:
    assert isinstance(effect, Patch) and effect.subresource == "status", effect
    assert effect.patch["metadata"] == {"resourceVersion": "7"}  # written only over the object read
    status: dict[str, Any] = effect.patch["status"]
    return status


def test_a_pending_backup_of_a_database_not_ready_waits_without_a_job() -> None:
    f = facts(database=db(ready=False))
    assert not volume_read_needed(f)  # no Job is started: the volume does not matter yet
    planned = plan_backup(f)
    [effect] = planned.plan.effects
    status = status_patch(effect)
    assert (status["phase"], status["message"]) == ("Pending", "waiting for SampleDB orders to be Ready")
    assert "startedAt" not in status
    assert planned.plan.result is None  # the SampleDB's next change brings it back


def test_a_pre_delete_snapshot_does_not_wait_for_ready() -> None:
    f = facts(backup(reason="pre-delete"), database=db(ready=False))
    assert volume_read_needed(f)
    assert isinstance(plan_backup(f).plan.effects[0], Create)


def test_a_ready_database_gets_the_job_announced_then_running() -> None:
    f = facts(database=db())
    assert volume_read_needed(f) and not result_read_needed(f)
    planned = plan_backup(f)
    create, effect = planned.plan.effects
    assert isinstance(create, Create)
    assert create.obj["metadata"]["name"] == JOB
    assert create.obj["metadata"]["ownerReferences"][0]["uid"] == "u-b"
    volumes = create.obj["spec"]["template"]["spec"]["volumes"]
    assert {"name": "backups", "persistentVolumeClaim": {"claimName": "orders-backups"}} in volumes
    assert create.announce == EventSpec("Normal", "BackupStarted", f"started Job {JOB}")
    status = status_patch(effect)
    assert (status["phase"], status["message"], status["startedAt"]) == ("Running", f"Job {JOB} started",
                                                                         "2026-11-30T09:00:00Z")
    assert planned.plan.result is None and planned.counted is None


def test_a_missing_backup_volume_keeps_it_pending_and_requeues() -> None:
    planned = plan_backup(facts(database=db(), volume=False))
    [effect] = planned.plan.effects
    assert status_patch(effect)["message"] == "backup volume orders-backups does not exist"
    assert planned.plan.result == Result(requeue=True)


def test_a_missing_database_keeps_it_pending_and_requeues() -> None:
    planned = plan_backup(facts(database=None))
    [effect] = planned.plan.effects
    assert status_patch(effect)["message"] == "SampleDB orders does not exist"
    assert planned.plan.result == Result(requeue=True)


def test_the_files_finalizer_comes_alone_before_the_job_then_the_pass_plans_again() -> None:
    planned = plan_backup(facts(backup(finalizer=False), database=db()))
    [effect] = planned.plan.effects
    assert isinstance(effect, Patch) and effect.subresource is None
    assert effect.patch == {"metadata": {"finalizers": [FILES_FINALIZER], "resourceVersion": "7"}}
    assert planned.patched is not None and planned.patched.metadata.finalizers == [FILES_FINALIZER]
    again = with_resource_version(planned.patched, {"metadata": {"resourceVersion": "8"}})
    create, status = plan_backup(facts(again, database=db())).plan.effects
    assert isinstance(create, Create)
    assert isinstance(status, Patch) and status.patch["metadata"] == {"resourceVersion": "8"}


def test_an_unlabelled_backup_is_labelled_first_finished_or_not() -> None:
    for b in (backup(labelled=False), backup(labelled=False, phase="Succeeded")):
        planned = plan_backup(facts(b, database=db()))
        [effect] = planned.plan.effects
        assert isinstance(effect, Patch)
        assert effect.patch == {"metadata": {"labels": LABELS, "resourceVersion": "7"}}
        assert planned.patched is not None
        assert planned.patched.metadata.labels == LABELS


def test_a_backup_made_before_the_bucket_label_or_with_another_databases_bucket_is_relabelled() -> None:
    other = str((int(LABELS["sampledb.io/bucket"]) + 1) % 60)
    for labels in ({"sampledb.io/database": "orders", "team": "a"},
                   {**LABELS, "sampledb.io/bucket": other}):
        b = backup(phase="Succeeded")
        b = b.model_copy(update={"metadata": b.metadata.model_copy(update={"labels": labels})})
        planned = plan_backup(facts(b, database=db()))
        [effect] = planned.plan.effects
        assert isinstance(effect, Patch) and effect.patch["metadata"]["labels"] == LABELS
        assert planned.patched is not None and planned.patched.metadata.labels == {**labels, **LABELS}
    assert plan_backup(facts(backup(phase="Succeeded"), database=db())).plan.effects == ()  # labelled: nothing


def test_a_running_job_keeps_it_running_and_a_second_pass_writes_nothing() -> None:
    f = facts(database=db(), job=RUNNING)
    assert not volume_read_needed(f) and not result_read_needed(f)
    [effect] = plan_backup(f).plan.effects
    status = status_patch(effect)
    assert (status["phase"], status["message"]) == ("Running", f"Job {JOB} is running")
    again = backup(phase="Running", message=f"Job {JOB} is running", startedAt="2026-11-30T08:00:00Z",
                   observedGeneration=1)
    assert plan_backup(facts(again, database=db(), job=RUNNING)).plan.effects == ()


def test_a_succeeded_job_records_size_checksum_and_location_then_announces_it() -> None:
    running = backup(phase="Running", startedAt="2026-11-30T08:00:00Z")
    f = facts(running, database=db(), job=COMPLETE, result={"size_bytes": 1234, "sha256": SHA})
    assert result_read_needed(f)
    planned = plan_backup(f)
    effect, event = planned.plan.effects
    status = status_patch(effect)
    assert status["phase"] == "Succeeded" and status["message"] == "backup completed"
    assert (status["sizeBytes"], status["checksum"], status["version"]) == (1234, SHA, "16.4")
    assert status["location"] == {"pvcName": "orders-backups", "path": "/sampledb/backups/b1.dump"}
    assert (status["startedAt"], status["completedAt"]) == ("2026-11-30T08:00:00Z", "2026-11-30T09:00:00Z")
    assert event == Emit(EventSpec("Normal", "BackupSucceeded", "backup of orders completed"))
    assert planned.counted == ("manual", "succeeded") and planned.snapshot_seconds is None


def test_a_result_line_without_a_valid_size_or_checksum_records_neither() -> None:
    f = facts(backup(phase="Running"), database=db(), job=COMPLETE, result={"size_bytes": "1", "sha256": "x"})
    status = status_patch(plan_backup(f).plan.effects[0])
    assert "sizeBytes" not in status and "checksum" not in status


def test_a_pre_delete_snapshot_reports_its_duration() -> None:
    running = backup(reason="pre-delete", phase="Running", startedAt="2026-11-30T08:59:00Z")
    planned = plan_backup(facts(running, database=db(), job=COMPLETE))
    assert planned.counted == ("pre-delete", "succeeded") and planned.snapshot_seconds == 60.0


def test_a_failed_job_fails_the_backup_with_a_warning() -> None:
    f = facts(backup(phase="Running"), database=db(), job=FAILED, result={"message": "pg_dump: no space"})
    planned = plan_backup(f)
    effect, event = planned.plan.effects
    message = f"Job {JOB} failed: BackoffLimitExceeded: pg_dump: no space"
    status = status_patch(effect)
    assert (status["phase"], status["message"], status["completedAt"]) == ("Failed", message, "2026-11-30T09:00:00Z")
    assert event == Emit(EventSpec("Warning", "BackupFailed", message))
    assert planned.counted == ("manual", "failed")


def test_a_failed_job_without_a_result_line_says_what_the_job_controller_said() -> None:
    planned = plan_backup(facts(backup(phase="Running"), database=db(), job=FAILED))
    assert status_patch(planned.plan.effects[0])["message"] == (
        f"Job {JOB} failed: BackoffLimitExceeded: Job has reached the specified backoff limit")


def test_a_finished_backup_gets_an_empty_plan_and_reads_nothing() -> None:
    for phase, job in (("Succeeded", COMPLETE), ("Failed", FAILED)):
        f = facts(backup(phase=phase), database=db(), job=job)
        assert not volume_read_needed(f) and not result_read_needed(f)
        planned = plan_backup(f)
        assert planned.plan.effects == () and planned.plan.result is None and planned.patched is None


def test_a_name_the_script_refuses_fails_without_a_job() -> None:
    name = "b" * (names.BACKUP_NAME_MAX + 1)
    f = facts(backup(name), database=db())
    assert not volume_read_needed(f)
    planned = plan_backup(f)
    effect, event = planned.plan.effects
    assert not any(isinstance(e, Create) for e in planned.plan.effects)
    status = status_patch(effect)
    assert status["phase"] == "Failed"
    assert f"must be at most {names.BACKUP_NAME_MAX} characters" in status["message"]
    assert isinstance(event, Emit) and (event.event.type, event.event.reason) == ("Warning", "BackupFailed")
    assert planned.counted == ("manual", "failed")


def test_a_long_message_is_cut_to_the_schema_limit() -> None:
    f = facts(backup(phase="Running"), database=db(), job=FAILED, result={"message": "x" * 5000})
    planned = plan_backup(f)
    assert len(status_patch(planned.plan.effects[0])["message"]) == 1000
    event = planned.plan.effects[1]
    assert isinstance(event, Emit) and len(event.event.message) > 1000  # the Event keeps the whole message
