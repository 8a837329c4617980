"""decide/backup/backup_files.plan_release: one pass of deleting a backup's files as a plan, without any server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sampledb_operator.decide.backup.backup_files import (
    FILES_FINALIZER,
    FilesFacts,
    database_read_needed,
    namespace_read_needed,
    plan_release,
    volume_read_needed,
)
from sampledb_operator.decide.effects import Create, Emit, Patch
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.status import JobState
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.sampledb import SampleDB

RUNNING = JobState(False, False, "Running", "")
COMPLETE = JobState(True, True, "Complete", "")
FAILED = JobState(True, False, "DeadlineExceeded", "too slow")
LOCATION = {"pvcName": "orders-backups", "path": "/sampledb/backups/b1.dump"}


def backup(*, finalizers: tuple[str, ...] = ("other", FILES_FINALIZER), **status: Any) -> SampleDBBackup:
    return SampleDBBackup.model_validate({
        "metadata": {"name": "b1", "namespace": "shop", "uid": "u-b", "resourceVersion": "9",
                     "deletionTimestamp": "2026-11-30T09:00:00Z", "finalizers": list(finalizers)},
        "spec": {"database": "orders"}, "status": status})


def release_of(effect: object) -> list[str]:
    assert isinstance(effect, Patch) and effect.kind == "SampleDBBackup" and effect.name == "b1"
    assert effect.patch["metadata"]["resourceVersion"] == "9"
    finalizers: list[str] = effect.patch["metadata"]["finalizers"]
    return finalizers


def test_without_the_finalizer_nothing_is_read_or_planned() -> None:
    facts = FilesFacts(backup(finalizers=(), location=LOCATION), backup_job=RUNNING, prune_job=None)
    assert not namespace_read_needed(facts) and not volume_read_needed(facts)
    assert plan_release(facts).effects == ()


def test_a_backup_that_never_wrote_files_is_released_at_once() -> None:
    facts = FilesFacts(backup(phase="Pending"), backup_job=None, prune_job=None)
    assert not namespace_read_needed(facts) and not volume_read_needed(facts)
    [effect] = plan_release(facts).effects
    assert release_of(effect) == ["other"]  # other finalizers kept


def test_a_running_backup_job_is_waited_for_unless_the_namespace_goes() -> None:
    facts = FilesFacts(backup(phase="Running"), backup_job=RUNNING, prune_job=None)
    assert namespace_read_needed(facts)
    waiting = replace(facts, namespace_terminating=False)
    assert not volume_read_needed(waiting)
    assert plan_release(waiting).effects == ()
    going = replace(facts, namespace_terminating=True)
    assert not volume_read_needed(going)
    [effect] = plan_release(going).effects
    assert release_of(effect) == ["other"]


def test_files_on_a_volume_that_is_gone_are_released() -> None:
    facts = FilesFacts(backup(location=LOCATION), backup_job=None, prune_job=None, namespace_terminating=False)
    assert volume_read_needed(facts)
    [effect] = plan_release(replace(facts, volume_exists=False)).effects
    assert release_of(effect) == ["other"]


def test_files_are_pruned_where_the_job_wrote_them_when_the_status_does_not_say() -> None:
    facts = FilesFacts(backup(phase="Running"), backup_job=COMPLETE, prune_job=None, namespace_terminating=False,
                       volume_exists=True)
    assert database_read_needed(facts)
    db = SampleDB.model_validate({"metadata": {"name": "orders", "annotations": {"testing.sampledb.io/x": "1"}},
                                  "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
    [effect] = plan_release(replace(facts, db=db)).effects
    assert isinstance(effect, Create) and effect.announce is None
    pod = effect.obj["spec"]["template"]
    assert "/sampledb/backups/b1.dump" in pod["spec"]["containers"][0]["command"]
    assert pod["spec"]["containers"][0]["image"].endswith(":16.4")
    assert pod["metadata"]["annotations"] == {"testing.sampledb.io/x": "1"}


def test_without_its_database_the_prune_job_uses_the_backups_version() -> None:
    facts = FilesFacts(backup(location=LOCATION, version="17.2"), backup_job=None, prune_job=None,
                       namespace_terminating=False, volume_exists=True)
    [effect] = plan_release(facts).effects
    assert isinstance(effect, Create)
    assert effect.obj["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:17.2"


def test_a_running_prune_job_is_waited_for() -> None:
    facts = FilesFacts(backup(location=LOCATION), backup_job=None, prune_job=RUNNING, namespace_terminating=False,
                       volume_exists=True)
    assert not database_read_needed(facts)
    assert plan_release(facts).effects == ()


def test_a_finished_prune_job_is_announced_then_the_finalizer_goes() -> None:
    facts = FilesFacts(backup(location=LOCATION), backup_job=None, prune_job=COMPLETE, namespace_terminating=False,
                       volume_exists=True)
    event, effect = plan_release(facts).effects
    assert event == Emit(EventSpec("Normal", "BackupFilesDeleted",
                                   "deleted the files of /sampledb/backups/b1.dump on orders-backups"))
    assert release_of(effect) == ["other"]
    event, effect = plan_release(replace(facts, prune_job=FAILED)).effects
    assert event == Emit(EventSpec("Warning", "BackupFilesLeft",
                                   "could not delete /sampledb/backups/b1.dump on orders-backups"
                                   " (DeadlineExceeded: too slow); delete them by hand"))
    assert release_of(effect) == ["other"]
