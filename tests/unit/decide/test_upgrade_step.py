"""decide/upgrades/upgrade_step.py: one pass of the upgrade step as a plan, without any server.

The effects come in the order they are applied (the pre-upgrade backup, the upgrade Job, the thaw
Job), each Create announced by its Event; the outcome says what the StatefulSet runs and the
Upgrading condition; the step never asks for a Result of its own.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.decide.effects import Create, Effect
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.upgrades import upgrade as up
from sampledb_operator.decide.upgrades import upgrade_step as us
from sampledb_operator.model.sampledb import SampleDB

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
UID = "uid-1"


def database(version: str = "17.2", current: str | None = "16.4", *, annotations: dict[str, str] | None = None,
             conditions: list[dict[str, Any]] | None = None, **spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": UID, "generation": 4,
                     "annotations": annotations or {}},
        "spec": {"version": version, "storage": {"size": "1Gi"}, **spec},
        "status": {"currentVersion": current, "conditions": conditions or []},
    })


def statefulset(version: str = "16.4", image: str = "postgres:16.4", data_dir: str = "pgdata") -> dict[str, Any]:
    return {"metadata": {"name": "orders", "annotations": {"sampledb.io/version": version}},
            "spec": {"template": {"spec": {"containers": [{"name": "postgres", "image": image, "env": [
                {"name": "PGDATA", "value": f"/var/lib/postgresql/data/{data_dir}"}]}]}}}}


def job(name: str, *, component: str = "upgrade", finished: bool = False, succeeded: bool = False,
        owner: str = UID) -> dict[str, Any]:
    conditions = ([{"type": "Complete" if succeeded else "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                    "message": "backoff limit"}] if finished else [])
    return {"metadata": {"name": name, "labels": {"app.kubernetes.io/component": component},
                         "ownerReferences": [{"uid": owner}]},
            "status": {"conditions": conditions}}


def backup(phase: str | None, message: str = "") -> dict[str, Any]:
    return {"metadata": {"name": "b"}, "status": {"phase": phase, "message": message} if phase else {}}


def facts(db: SampleDB | None = None, **kw: Any) -> us.UpgradeFacts:
    base = us.UpgradeFacts(db=db or database(), statefulset=statefulset(), statefulset_ready=True, data_volume=None,
                           major_blocked=None, upgrade_jobs=(), migrate_jobs=(), now=NOW)
    return replace(base, **kw)


def creates(effects: tuple[Effect, ...]) -> list[tuple[str, str]]:
    return [(e.obj["kind"], e.obj["metadata"]["name"]) for e in effects if isinstance(e, Create)]


def announced(effects: tuple[Effect, ...]) -> list[EventSpec | None]:
    return [e.announce for e in effects if isinstance(e, Create)]


ATTEMPT = us.attempt_of(database())
assert ATTEMPT is not None
DUMP = {"upgrade": {"method": "Dump"}}  # the Dump method (the default is Link: tests/unit/decide/test_upgrade_link.py)


def test_no_version_change_runs_the_wanted_version_and_plans_nothing() -> None:
    planned = us.plan_upgrade_step(facts(database("16.4")))
    assert planned.plan.effects == () and planned.plan.result is None
    assert planned.outcome.running.version == "16.4" and planned.outcome.condition is None
    assert planned.outcome.result is None and us.attempt_of(database("16.4")) is None


def test_a_major_upgrade_requests_its_backup_first_and_no_job() -> None:
    planned = us.plan_upgrade_step(facts())
    assert creates(planned.plan.effects) == [("SampleDBBackup", ATTEMPT.backup)]
    [request] = planned.plan.effects
    assert isinstance(request, Create) and request.obj["spec"]["reason"] == "pre-upgrade"
    assert announced(planned.plan.effects) == [
        EventSpec("Normal", "BackupRequested", f"pre-upgrade backup {ATTEMPT.backup} requested")]
    cond = planned.outcome.condition
    assert cond is not None and (cond.status, cond.reason) == ("True", "BackingUp")
    assert planned.outcome.busy and planned.outcome.running.version == "16.4"


def test_a_backup_that_exists_is_waited_for_not_requested_again() -> None:
    planned = us.plan_upgrade_step(facts(backup=backup("Running")))
    assert planned.plan.effects == ()
    assert planned.outcome.condition is not None and planned.outcome.condition.reason == "BackingUp"


def test_the_job_starts_only_after_the_backup_succeeded() -> None:
    planned = us.plan_upgrade_step(facts(database(**DUMP), backup=backup("Succeeded")))
    assert creates(planned.plan.effects) == [("Job", ATTEMPT.job)]
    [create] = planned.plan.effects
    assert isinstance(create, Create)
    assert create.obj["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:17.2"
    assert announced(planned.plan.effects) == [
        EventSpec("Normal", "UpgradeJobCreated", f"created upgrade Job {ATTEMPT.job} (data into pgdata-17)")]
    assert planned.outcome.condition is not None and planned.outcome.condition.reason == "UpgradeJobRunning"
    # once the Job is cached, it is not created again
    running = us.plan_upgrade_step(facts(database(**DUMP), backup=backup("Succeeded"), job=job(ATTEMPT.job)))
    assert running.plan.effects == ()
    assert not running.outcome.stop  # Dump dumps the running server


def test_a_failed_backup_fails_the_upgrade_without_a_job() -> None:
    planned = us.plan_upgrade_step(facts(backup=backup("Failed", "disk full")))
    assert planned.plan.effects == ()
    cond = planned.outcome.condition
    assert cond is not None and (cond.status, cond.reason) == ("False", "UpgradeFailed") and "disk full" in cond.message
    assert [p.reason for p in planned.outcome.degraded] == ["UpgradeFailed"]


def test_a_failed_job_starts_the_thaw_job_once_with_the_scripts_reason() -> None:
    failed = job(ATTEMPT.job, finished=True)
    base = facts(database(**DUMP), backup=backup("Succeeded"), job=failed, upgrade_jobs=(failed,))
    assert us.result_read_needed(base) == (ATTEMPT.job,)
    planned = us.plan_upgrade_step(replace(base, job_result={"message": "pg_restore: error: relation exists"}))
    assert creates(planned.plan.effects) == [("Job", ATTEMPT.thaw)]
    [thaw] = planned.plan.effects
    assert isinstance(thaw, Create) and thaw.obj["metadata"]["labels"]["app.kubernetes.io/component"] == "thaw"
    assert announced(planned.plan.effects) == [EventSpec(
        "Normal", "ThawJobCreated",
        f"created Job {ATTEMPT.thaw}: the old server accepts writes again after the failed upgrade")]
    cond = planned.outcome.condition
    assert cond is not None and cond.reason == "UpgradeFailed"
    assert "pg_restore: error: relation exists (BackoffLimitExceeded)" in cond.message
    assert planned.outcome.running.version == "16.4" and not planned.outcome.busy
    # the thaw Job exists: nothing more
    again = us.plan_upgrade_step(replace(base, thaw=job(ATTEMPT.thaw, component="thaw")))
    assert again.plan.effects == ()


def test_the_result_line_is_read_only_for_a_finished_failed_job() -> None:
    assert us.result_read_needed(facts()) == ()
    assert us.result_read_needed(facts(job=job(ATTEMPT.job))) == ()
    assert us.result_read_needed(facts(job=job(ATTEMPT.job, finished=True, succeeded=True))) == ()
    assert us.result_read_needed(facts(link_job=job(ATTEMPT.link, finished=True))) == (ATTEMPT.link,)


def test_another_attempts_unfinished_job_holds_the_new_target_back_without_a_backup() -> None:
    other = job("orders-upgrade-other")
    planned = us.plan_upgrade_step(facts(upgrade_jobs=(other,)))
    assert planned.plan.effects == ()
    cond = planned.outcome.condition
    assert cond is not None and cond.reason == "WaitingForUpgrade" and "orders-upgrade-other" in cond.message
    # a Job of another database (another owner) does not count; nor does a finished one
    assert creates(us.plan_upgrade_step(facts(upgrade_jobs=(job("x", owner="uid-2"),))).plan.effects) == [
        ("SampleDBBackup", ATTEMPT.backup)]
    assert creates(us.plan_upgrade_step(facts(upgrade_jobs=(job("x", finished=True),))).plan.effects) == [
        ("SampleDBBackup", ATTEMPT.backup)]


def test_a_running_migration_holds_the_upgrade_back_before_its_backup() -> None:
    planned = us.plan_upgrade_step(facts(migrate_jobs=(job("orders-migrate-x", component="migrate"),)))
    assert planned.plan.effects == ()
    assert planned.outcome.condition is not None and planned.outcome.condition.reason == "WaitingForMigration"


def test_a_blocked_major_upgrade_keeps_the_running_image_and_plans_nothing() -> None:
    planned = us.plan_upgrade_step(facts(major_blocked="scale to one instance first"))
    assert planned.plan.effects == ()
    assert (planned.outcome.running.version, planned.outcome.running.image) == ("16.4", "postgres:16.4")
    cond = planned.outcome.condition
    assert cond is not None and (cond.status, cond.reason) == ("False", "UpgradeBlocked")
    # its own Job already runs: the attempt goes on
    running = us.plan_upgrade_step(facts(database(**DUMP), major_blocked="x", backup=backup("Succeeded"),
                                         job=job(ATTEMPT.job), upgrade_jobs=(job(ATTEMPT.job),)))
    assert running.outcome.condition is not None and running.outcome.condition.reason == "UpgradeJobRunning"


def test_a_minor_upgrade_without_a_backup_rolls_the_image_and_reports_the_duration_once() -> None:
    started = NOW - timedelta(seconds=90)
    upgrading = [{"type": "Upgrading", "status": "True", "reason": "RollingOut", "message": "m",
                  "lastTransitionTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}]
    minor = database("16.6", conditions=upgrading, upgrade={"backupBeforeMinor": False})
    rolling = us.plan_upgrade_step(facts(minor))
    assert rolling.plan.effects == () and rolling.duration is None
    assert (rolling.outcome.running.version, rolling.outcome.running.image) == ("16.6", "postgres:16.6")
    done = us.plan_upgrade_step(facts(minor, statefulset=statefulset("16.6", "postgres:16.6")))
    assert done.outcome.condition is not None and done.outcome.condition.reason == "UpgradeSucceeded"
    assert (done.kind, done.duration) == (up.Kind.MINOR, 90.0)


def test_the_data_directory_comes_from_the_statefulset_or_an_adopted_volume() -> None:
    assert us.current_data_dir(statefulset(data_dir="pgdata-17")) == "pgdata-17"
    pvc = {"metadata": {"annotations": {"sampledb.io/data-dir": "pgdata-17"}}}
    planned = us.plan_upgrade_step(facts(database("17.2", current=None), statefulset=None, data_volume=pvc))
    assert planned.outcome.running.data_dir == us.adopted_data_dir(pvc)
