"""reconcilers/migrations.py against an in-memory cluster: the steps, their writes, and their messages.

The fake cluster (tests/support/fake_cluster.py) writes straight into the caches (as the watch echo
would), so each test drives the step pass by pass and checks exactly which objects it created or
deleted. The real script's termination message, which kwok cannot produce, is exercised here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from tests.support.fake_cluster import NS, FakeCluster, condition, running_database

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.sampledb_status import AppliedMigration
from sampledb_operator.reconcilers import migrations

INIT, INDEX = "CREATE TABLE t (id int);", "CREATE INDEX t_id ON t (id);"


def make_db(*, ready: bool = True, applied: list[AppliedMigration] | None = None,
            conditions: list[Obj] | None = None, annotations: dict[str, str] | None = None) -> SampleDB:
    conds = [{"type": "Ready", "status": "True" if ready else "False", "reason": "R"}, *(conditions or [])]
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": NS, "uid": "uid-1", "generation": 1,
                     "annotations": annotations or {}},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "migrations": {"configMapName": "orders-sql"}},
        "status": {"conditions": conds, "appliedMigrations": [a.model_dump(by_alias=True, mode="json")
                                                              for a in applied or []]},
    })


def source(files: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "metadata": {"name": "orders-sql", "namespace": NS}, "data": files}


async def run(cluster: FakeCluster, db: SampleDB) -> migrations.MigrationOutcome:
    return await migrations.reconcile_migrations(cluster.ctx, db, db_ready=True, blocked=False)


def migrated(outcome: migrations.MigrationOutcome) -> tuple[str, str, str]:
    [cond] = [c for c in outcome.conditions if c.type == "Migrated"]
    return cond.status, cond.reason, cond.message


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


async def until_job_created(cluster: FakeCluster, db: SampleDB) -> Obj:
    """The passes up to a running migrate Job: backup requested, backup Succeeded, Job created."""
    first = await run(cluster, db)
    assert first.busy and migrated(first)[1] == "BackingUp"
    [backup] = cluster.of_kind("SampleDBBackup")
    assert backup["spec"]["reason"] == "pre-migration"
    assert cluster.of_kind("Job") == []
    cluster.set_status("SampleDBBackup", backup["metadata"]["name"], {"phase": "Succeeded"})
    second = await run(cluster, db)
    assert second.busy and migrated(second)[1] == "Migrating"
    [job] = cluster.of_kind("Job")
    return job


async def test_nothing_runs_before_the_database_is_ready(cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT}))
    outcome = await run(cluster, make_db(ready=False))
    assert migrated(outcome)[:2] == ("False", "WaitingForDatabase")
    assert cluster.writes == []


async def test_a_missing_configmap_is_reported_and_looked_at_again(cluster: FakeCluster) -> None:
    outcome = await run(cluster, make_db())
    assert migrated(outcome)[:2] == ("False", "MigrationsSourceMissing")
    assert outcome.requeue and not outcome.busy
    assert cluster.writes == []


async def test_backup_first_then_a_snapshot_and_one_job_and_repeated_passes_write_nothing_more(
        cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0002_index.sql": INDEX, "0001_init.sql": INIT}))
    db = make_db()
    job = await until_job_created(cluster, db)
    [snapshot] = [c for c in cluster.of_kind("ConfigMap") if c["metadata"]["name"] != "orders-sql"]
    assert snapshot["immutable"] is True
    assert snapshot["data"] == {"0001_init.sql": INIT, "0002_index.sql": INDEX}
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"name": "migrations", "configMap": {"name": snapshot["metadata"]["name"]}} in volumes
    assert [w[:2] for w in cluster.writes] == [("create", "SampleDBBackup"), ("create", "ConfigMap"),
                                               ("create", "Job")]
    assert [e[1] for e in cluster.recorder.events] == ["BackupRequested", "MigrationStarted"]
    writes = len(cluster.writes)
    again = await run(cluster, db)
    assert again.busy and migrated(again)[1] == "Migrating"
    assert len(cluster.writes) == writes
    # An edit of the user's ConfigMap mid-run does not touch the Job's copy.
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "0002_index.sql": INDEX + " -- edited"}))
    assert cluster.objects[("ConfigMap", NS, snapshot["metadata"]["name"])]["data"]["0002_index.sql"] == INDEX


async def test_a_completed_job_records_the_files_at_its_completion_time_and_drops_the_snapshot(
        cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "0002_index.sql": INDEX}))
    db = make_db()
    job = await until_job_created(cluster, db)
    cluster.set_status("Job", job["metadata"]["name"], {
        "completionTime": "2026-11-30T09:05:00Z", "conditions": [{"type": "Complete", "status": "True"}]})
    outcome = await run(cluster, db)
    assert migrated(outcome)[:2] == ("True", "MigrationsApplied")
    assert outcome.applied is not None
    assert [(a.name, a.applied_at) for a in outcome.applied] == [
        ("0001_init.sql", datetime(2026, 11, 30, 9, 5, tzinfo=UTC)),
        ("0002_index.sql", datetime(2026, 11, 30, 9, 5, tzinfo=UTC))]
    assert not outcome.busy and not outcome.degraded
    assert [c["metadata"]["name"] for c in cluster.of_kind("ConfigMap")] == ["orders-sql"]
    assert cluster.recorder.events[-1][1] == "MigrationsApplied"

    # The next pass sees them applied: nothing pending, nothing written, the condition kept.
    done = make_db(applied=list(outcome.applied), conditions=[outcome.conditions[0].model_dump(by_alias=True,
                                                                                                mode="json")])
    writes = len(cluster.writes)
    steady = await run(cluster, done)
    assert migrated(steady)[:2] == ("True", "MigrationsApplied")
    assert steady.applied is None and not steady.busy
    assert len(cluster.writes) == writes


async def test_a_failed_job_names_the_file_and_error_from_the_scripts_result_and_is_not_rerun(
        cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "0002_index.sql": INDEX}))
    db = make_db()
    job = await until_job_created(cluster, db)
    name = job["metadata"]["name"]
    cluster.set_status("Job", name, {"conditions": [
        {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "exit code 6"}]})
    result = {"script": "migrate", "ok": False, "code": 6, "applied": [1], "failed": "0002_index.sql",
              "message": 'migration 0002_index.sql failed: ERROR: relation "t" does not exist'}
    cluster.put("Pod", {"metadata": {"name": f"{name}-x", "labels": {"job-name": name},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"state": {"terminated": {
                            "exitCode": 6, "message": json.dumps(result) + "\n"}}}]}})
    outcome = await run(cluster, db)
    status, reason, message = migrated(outcome)
    assert (status, reason) == ("False", "MigrationFailed")
    assert name in message
    assert 'migration 0002_index.sql failed: ERROR: relation "t" does not exist' in message
    assert "applied before the failure: 0001_init.sql" in message
    assert [p.reason for p in outcome.degraded] == ["MigrationFailed"]
    assert outcome.applied is None  # the records change only with a completed run
    assert outcome.recheck_after == 60.0 and not outcome.requeue and not outcome.busy

    # Later passes keep the message without reading the pods again, and start nothing.
    failed = make_db(conditions=[outcome.conditions[0].model_dump(by_alias=True, mode="json")])
    lists, writes = len(cluster.lists), len(cluster.writes)
    again = await run(cluster, failed)
    assert migrated(again) == migrated(outcome)
    assert (len(cluster.lists), len(cluster.writes)) == (lists, writes)


async def test_deleting_the_failed_job_retries_the_same_files_on_the_same_backup(cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT}))
    db = make_db()
    job = await until_job_created(cluster, db)
    name = job["metadata"]["name"]
    cluster.set_status("Job", name, {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "backoff limit"}]})
    failed = await run(cluster, db)
    assert f"delete Job {name} to retry" in migrated(failed)[2]
    await cluster.ctx.apis["Job"].delete(name, NS)
    again = await run(cluster, db)
    assert again.busy and migrated(again)[1] == "Migrating"
    assert [j["metadata"]["name"] for j in cluster.of_kind("Job")] == [name]
    assert len(cluster.of_kind("SampleDBBackup")) == 1


async def test_a_failed_job_without_a_result_reports_the_jobs_reason_and_the_pending_files(
        cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT}))
    db = make_db()
    job = await until_job_created(cluster, db)
    cluster.set_status("Job", job["metadata"]["name"], {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "backoff limit"}]})
    message = migrated(await run(cluster, db))[2]
    assert "BackoffLimitExceeded: backoff limit" in message
    assert "0001_init.sql" in message


async def test_a_failed_backup_stops_the_migration_without_a_job(cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT}))
    db = make_db()
    await run(cluster, db)
    [backup] = cluster.of_kind("SampleDBBackup")
    cluster.set_status("SampleDBBackup", backup["metadata"]["name"], {"phase": "Failed", "message": "disk full"})
    outcome = await run(cluster, db)
    assert migrated(outcome)[:2] == ("False", "PreMigrationBackupFailed")
    assert "disk full" in migrated(outcome)[2]
    assert [p.reason for p in outcome.degraded] == ["PreMigrationBackupFailed"]
    assert cluster.of_kind("Job") == []


async def test_a_new_set_of_files_waits_for_the_running_job_of_the_previous_one(cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT}))
    db = make_db()
    await until_job_created(cluster, db)
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "0002_index.sql": INDEX}))
    writes = len(cluster.writes)
    outcome = await run(cluster, db)
    assert outcome.busy
    assert "waiting for the migration Job" in migrated(outcome)[2]
    assert len(cluster.writes) == writes


async def test_problems_of_the_files_start_nothing_and_are_looked_at_again(cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "notes.txt": "x"}))
    outcome = await run(cluster, make_db())
    assert migrated(outcome)[:2] == ("False", "InvalidMigrationName")
    assert outcome.recheck_after == 60.0 and [p.reason for p in outcome.degraded] == ["InvalidMigrationName"]
    assert cluster.writes == []


async def test_upgrades_and_an_unready_database_hold_the_step_without_a_verdict(cluster: FakeCluster) -> None:
    cluster.put("ConfigMap", source({"0001_init.sql": INIT}))
    blocked = await migrations.reconcile_migrations(cluster.ctx, make_db(), db_ready=True, blocked=True)
    down = await migrations.reconcile_migrations(cluster.ctx, make_db(), db_ready=False, blocked=False)
    assert blocked == down == migrations.MigrationOutcome()
    assert cluster.writes == []


async def test_files_the_database_already_recorded_are_not_claimed_as_applied_by_the_job(
        cluster: FakeCluster) -> None:
    """Issue #11, item 12: a SampleDB adopting a retained volume has no records of its own; the database's
    sampledb_meta.schema_migrations has them, migrate.sh runs none of them again and says so."""
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "0002_index.sql": INDEX, "0003_more.sql": INDEX}))
    db = make_db()
    job = await until_job_created(cluster, db)
    name = job["metadata"]["name"]
    cluster.set_status("Job", name, {
        "completionTime": "2026-11-30T09:05:00Z", "conditions": [{"type": "Complete", "status": "True"}]})
    result = {"script": "migrate", "ok": True, "code": 0, "applied": [3], "already": [1, 2], "current_version": 3,
              "message": "applied 1 migration(s); schema at version 3; 2 already recorded"}
    cluster.put("Pod", {"metadata": {"name": f"{name}-x", "labels": {"job-name": name},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"state": {"terminated": {
                            "exitCode": 0, "message": json.dumps(result) + "\n"}}}]}})
    outcome = await run(cluster, db)
    assert outcome.applied is not None
    assert [(a.name, a.applied_at) for a in outcome.applied] == [
        ("0001_init.sql", None), ("0002_index.sql", None),
        ("0003_more.sql", datetime(2026, 11, 30, 9, 5, tzinfo=UTC))]
    status, reason, message = migrated(outcome)
    assert (status, reason) == ("True", "MigrationsApplied")
    assert message.startswith("applied 1 migration(s): 0003_more.sql; 2 already recorded in the database")


async def test_the_sampledb_pass_runs_the_step_backup_then_snapshot_and_job_then_the_records() -> None:
    """Through cluster.reconcile: the step's API calls and Events, and what the status records."""
    cluster = FakeCluster()
    cluster.put("ConfigMap", source({"0001_init.sql": INIT, "0002_index.sql": INDEX}))
    await running_database(cluster, migrations={"configMapName": "orders-sql"})
    cluster.writes.clear()
    await cluster.reconcile("orders")
    [backup] = cluster.of_kind("SampleDBBackup")
    backup_name = backup["metadata"]["name"]
    assert cluster.written("create") == [("create", "SampleDBBackup", backup_name)]
    assert "BackupRequested" in cluster.recorder.reasons()
    db = cluster.get("SampleDB", "orders")
    assert (db or {})["status"]["phase"] == "Migrating"
    assert condition(db, "Migrated")["reason"] == "BackingUp"

    cluster.set_status("SampleDBBackup", backup_name, {"phase": "Succeeded"})
    await cluster.reconcile("orders")
    [job] = cluster.of_kind("Job")
    [snapshot] = [c["metadata"]["name"] for c in cluster.of_kind("ConfigMap")
                  if c["metadata"]["name"].startswith("orders-migrations-")]
    assert cluster.written("create")[1:] == [("create", "ConfigMap", snapshot),
                                             ("create", "Job", job["metadata"]["name"])]
    assert cluster.recorder.events[-1][:2] == ("Normal", "MigrationStarted")
    assert condition(cluster.get("SampleDB", "orders"), "Migrated")["reason"] == "Migrating"
    writes = len(cluster.written("create"))
    await cluster.reconcile("orders")
    assert len(cluster.written("create")) == writes  # the running Job: nothing more

    cluster.finish_job(job["metadata"]["name"])
    await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    assert [a["name"] for a in (db or {})["status"]["appliedMigrations"]] == ["0001_init.sql", "0002_index.sql"]
    assert condition(db, "Migrated")["reason"] == "MigrationsApplied"
    assert cluster.written("delete", "ConfigMap") == [("delete", "ConfigMap", snapshot)]
    assert "MigrationsApplied" in cluster.recorder.reasons()
    assert ("Pod", f"job-name={job['metadata']['name']}") in cluster.lists  # the result line, read once done

    writes = len(cluster.written("create")) + len(cluster.written("delete"))
    await cluster.reconcile("orders")
    assert len(cluster.written("create")) + len(cluster.written("delete")) == writes
    assert cluster.recorder.reasons().count("MigrationsApplied") == 1
