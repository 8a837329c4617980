"""decide/upgrades/migration_step.py: one pass of the migration step as a plan, without any server.

Pending files -> the pre-migration backup (BackupRequested) -> once it Succeeded, the snapshot
ConfigMap and the Job (MigrationStarted) -> the records (MigrationsApplied) or the failure's
condition; the stale snapshots are deleted once the Job finished; the plan's Result is the outcome's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sampledb_operator.decide.effects import Create, Delete, Effect, Emit
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.upgrades import migration_step as ms
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
UID = "uid-1"
INIT, INDEX = "CREATE TABLE t (id int);", "CREATE INDEX t_id ON t (id);"
SOURCE = {"metadata": {"name": "orders-sql"}, "data": {"0001_init.sql": INIT, "0002_index.sql": INDEX}}


def database(*, ready: bool = True, migrations: bool = True, conditions: list[dict[str, Any]] | None = None
             ) -> SampleDB:
    spec: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}}
    if migrations:
        spec["migrations"] = {"configMapName": "orders-sql"}
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": UID, "generation": 2},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "R"},
                                  *(conditions or [])]},
    })


def job(name: str, *, finished: bool = False, succeeded: bool = False, snapshot: str = "") -> dict[str, Any]:
    conditions = ([{"type": "Complete" if succeeded else "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                    "message": "backoff limit"}] if finished else [])
    status: dict[str, Any] = {"conditions": conditions}
    if succeeded:
        status["completionTime"] = "2026-11-30T09:05:00Z"
    volumes = [{"name": "migrations", "configMap": {"name": snapshot}}] if snapshot else []
    return {"metadata": {"name": name, "ownerReferences": [{"uid": UID}]},
            "spec": {"template": {"spec": {"volumes": volumes}}}, "status": status}


def snapshot_cm(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "ownerReferences": [{"uid": UID}]}}


def backup(phase: str, message: str = "") -> dict[str, Any]:
    return {"metadata": {"name": "b"}, "status": {"phase": phase, "message": message}}


def facts(db: SampleDB | None = None, **kw: Any) -> ms.MigrationFacts:
    base = ms.MigrationFacts(db=db or database(), db_ready=True, blocked=False, jobs=(), snapshots=(), now=NOW,
                             recheck_period=60.0, source=SOURCE)
    return replace(base, **kw)


WORK = ms.work_of(database(), SOURCE)
assert WORK is not None


def created(effects: tuple[Effect, ...]) -> list[tuple[str, str, EventSpec | None]]:
    return [(e.obj["kind"], e.obj["metadata"]["name"], e.announce) for e in effects if isinstance(e, Create)]


def migrated(step: ms.MigrationStep) -> tuple[str, str, str]:
    [cond] = [c for c in step.outcome.conditions if c.type == "Migrated"]
    return cond.status, cond.reason, cond.message


def test_pending_files_request_the_backup_first_and_start_nothing_else() -> None:
    step = ms.plan_migration_step(facts())
    assert created(step.plan.effects) == [("SampleDBBackup", WORK.backup, EventSpec(
        "Normal", "BackupRequested", f"pre-migration backup {WORK.backup} requested"))]
    assert migrated(step)[:2] == ("False", "BackingUp") and step.outcome.busy
    assert step.plan.result is None and step.started_job == ""


def test_after_the_backup_succeeded_the_snapshot_and_the_job_with_its_announce_event() -> None:
    step = ms.plan_migration_step(facts(backup=backup("Succeeded")))
    message = f"Job {WORK.job} applies 2 migration(s): 0001_init.sql, 0002_index.sql"
    assert created(step.plan.effects) == [("ConfigMap", WORK.snapshot, None),
                                          ("Job", WORK.job, EventSpec("Normal", "MigrationStarted", message))]
    snapshot, job_create = step.plan.effects
    assert isinstance(snapshot, Create) and snapshot.obj["immutable"] is True
    assert snapshot.obj["data"] == SOURCE["data"]
    assert isinstance(job_create, Create)
    volumes = job_create.obj["spec"]["template"]["spec"]["volumes"]
    assert {"name": "migrations", "configMap": {"name": WORK.snapshot}} in volumes
    assert migrated(step)[1] == "Migrating" and step.outcome.busy
    assert (step.started_job, step.started_files) == (WORK.job, ("0001_init.sql", "0002_index.sql"))
    # the snapshot cached already: only the Job
    again = ms.plan_migration_step(facts(backup=backup("Succeeded"), snapshot=snapshot_cm(WORK.snapshot)))
    assert [name for _k, name, _e in created(again.plan.effects)] == [WORK.job]


def test_a_running_job_writes_nothing_and_another_sets_job_holds_the_next_back() -> None:
    running = job(WORK.job)
    step = ms.plan_migration_step(facts(job=running, jobs=(running,)))
    assert step.plan.effects == () and migrated(step)[1] == "Migrating"
    waiting = ms.plan_migration_step(facts(jobs=(job("orders-migrate-old"),)))
    assert waiting.plan.effects == ()
    assert "waiting for the migration Job orders-migrate-old to finish" in migrated(waiting)[2]


def test_a_failed_backup_is_a_problem_for_the_user_and_starts_no_job() -> None:
    step = ms.plan_migration_step(facts(backup=backup("Failed", "disk full")))
    assert step.plan.effects == ()
    status, reason, message = migrated(step)
    assert (status, reason) == ("False", "PreMigrationBackupFailed") and "disk full" in message
    assert step.plan.result == Result(requeue_after=60.0) == step.outcome.result


def test_a_completed_job_records_the_files_drops_stale_snapshots_and_announces_it() -> None:
    done = job(WORK.job, finished=True, succeeded=True, snapshot=WORK.snapshot)
    base = facts(job=done, jobs=(done,), snapshots=(snapshot_cm(WORK.snapshot),))
    assert ms.result_read_needed(base) == WORK.job
    step = ms.plan_migration_step(replace(base, job_result={"already": [1]}))
    delete, emit = step.plan.effects
    assert delete == Delete("ConfigMap", WORK.snapshot)
    assert isinstance(emit, Emit) and emit.event.reason == "MigrationsApplied"
    assert emit.event.message.startswith("applied 1 migration(s): 0002_index.sql; 1 already recorded")
    assert migrated(step) == ("True", "MigrationsApplied", emit.event.message)
    assert step.outcome.applied is not None
    assert [(a.name, a.applied_at) for a in step.outcome.applied] == [
        ("0001_init.sql", None), ("0002_index.sql", datetime(2026, 11, 30, 9, 5, tzinfo=UTC))]


def test_a_failed_job_gives_the_condition_and_a_degraded_problem_and_reads_its_result_once() -> None:
    failed = job(WORK.job, finished=True)
    base = facts(job=failed, jobs=(failed,))
    assert ms.result_read_needed(base) == WORK.job
    step = ms.plan_migration_step(replace(base, job_result={"message": "ERROR: boom", "applied": [1]}))
    status, reason, message = migrated(step)
    assert (status, reason) == ("False", "MigrationFailed")
    assert message.startswith(f"migration Job {WORK.job} failed: ERROR: boom (applied before the failure: 0001_init")
    assert [p.reason for p in step.outcome.degraded] == ["MigrationFailed"]
    assert step.plan.effects == () and step.outcome.applied is None
    # The condition holds the failure: no second read, the same message.
    recorded = database(conditions=[{"type": "Migrated", "status": "False", "reason": "MigrationFailed",
                                     "message": message}])
    later = replace(base, db=recorded)
    assert ms.result_read_needed(later) is None
    assert migrated(ms.plan_migration_step(later)) == (status, reason, message)


def test_waiting_for_the_database_or_the_user() -> None:
    assert migrated(ms.plan_migration_step(facts(database(ready=False))))[1] == "WaitingForDatabase"
    assert not ms.source_read_needed(facts(database(ready=False)))
    missing = ms.plan_migration_step(facts(source=None))
    assert migrated(missing)[1] == "MigrationsSourceMissing" and missing.plan.result == Result(requeue=True)
    bad = ms.plan_migration_step(facts(source={"data": {"notes.txt": "x"}}))
    assert migrated(bad)[1] == "InvalidMigrationName" and bad.plan.result == Result(requeue_after=60.0)
    held = ms.plan_migration_step(facts(blocked=True))
    assert held.outcome == ms.MigrationOutcome() and held.plan.effects == ()


def test_nothing_pending_is_up_to_date_and_removed_migrations_say_not_configured() -> None:
    applied = facts(database(), source={"data": {}}, snapshots=(snapshot_cm("orders-migrations-old"),))
    step = ms.plan_migration_step(applied)
    assert step.plan.effects == (Delete("ConfigMap", "orders-migrations-old"),)
    assert migrated(step)[:2] == ("True", "UpToDate") and step.plan.result == Result(requeue_after=60.0)
    silent = ms.plan_migration_step(facts(database(migrations=False)))
    assert silent.outcome == ms.MigrationOutcome() and silent.plan.effects == ()
    left = database(migrations=False, conditions=[{"type": "Migrated", "status": "True", "reason": "UpToDate",
                                                   "message": "m"}])
    assert migrated(ms.plan_migration_step(facts(left)))[1] == "NotConfigured"
