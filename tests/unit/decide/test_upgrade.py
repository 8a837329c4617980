"""decide/upgrades/upgrade.py: what the StatefulSet runs while a version changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sampledb_operator.decide.upgrades.upgrade import Kind, UpgradeInput, data_dir_for, decide, kind_of, work_token

MINOR = UpgradeInput(wanted="16.6", current="16.4", data_dir="pgdata", backup_required=True, backup_phase=None)
MAJOR = replace(MINOR, wanted="17.2")


@pytest.mark.parametrize(("current", "wanted", "kind"), [
    (None, "16.4", Kind.NONE), ("16.4", "16.4", Kind.NONE), ("16.4", "16.6", Kind.MINOR),
    ("16.6", "16.4", Kind.MINOR), ("16.4", "17.0", Kind.MAJOR), ("15.8", "17.2", Kind.MAJOR),
    ("17.2", "16.4", Kind.REFUSED),
])
def test_kind_of_a_version_change(current: str | None, wanted: str, kind: Kind) -> None:
    assert kind_of(current, wanted) is kind


def test_fresh_database_runs_the_wanted_version_without_an_upgrade() -> None:
    d = decide(replace(MINOR, current=None))
    assert (d.version, d.status, d.start_job) == ("16.6", None, False)


def test_minor_upgrade_waits_for_its_backup_on_the_old_version_then_rolls() -> None:
    waiting = decide(MINOR)
    assert (waiting.version, waiting.status, waiting.reason) == ("16.4", "True", "BackingUp")
    rolling = decide(replace(MINOR, backup_phase="Succeeded"))
    assert (rolling.version, rolling.data_dir, rolling.reason) == ("16.6", "pgdata", "RollingOut")
    done = decide(replace(MINOR, backup_phase="Succeeded", sts_ready=True, sts_version="16.6"))
    assert (done.status, done.reason) == ("False", "UpgradeSucceeded")


def test_minor_upgrade_without_backup_when_not_asked() -> None:
    d = decide(replace(MINOR, backup_required=False))
    assert (d.version, d.reason) == ("16.6", "RollingOut")


def test_failed_backup_stops_the_upgrade_on_the_old_version() -> None:
    d = decide(replace(MAJOR, backup_phase="Failed", backup_message="disk full"))
    assert (d.version, d.status, d.reason, d.failed, d.start_job) == ("16.4", "False", "UpgradeFailed", True, False)
    assert "disk full" in d.message


def test_major_upgrade_backup_then_job_then_switch_to_the_new_directory() -> None:
    assert decide(MAJOR).reason == "BackingUp"
    backed = replace(MAJOR, backup_phase="Succeeded")
    start = decide(backed)
    assert (start.start_job, start.version, start.data_dir) == (True, "16.4", "pgdata")
    running = decide(replace(backed, job_exists=True))
    assert (running.start_job, running.version, running.reason) == (False, "16.4", "UpgradeJobRunning")
    switched = decide(replace(backed, job_exists=True, job_finished=True, job_succeeded=True))
    assert (switched.version, switched.data_dir, switched.reason) == ("17.2", "pgdata-17", "RollingOut")
    assert data_dir_for("17.2") == "pgdata-17"


def test_failed_upgrade_job_rolls_back_to_the_old_version_and_directory() -> None:
    failed = replace(MAJOR, backup_phase="Succeeded", job_exists=True, job_finished=True, job_succeeded=False,
                     job_message="BackoffLimitExceeded: pg_restore failed")
    d = decide(failed)
    assert (d.version, d.data_dir, d.status, d.reason, d.failed) == ("16.4", "pgdata", "False", "UpgradeFailed", True)
    assert not d.start_job
    assert "pg_restore failed" in d.message


def test_major_downgrade_is_refused_and_never_attempted() -> None:
    d = decide(replace(MINOR, current="17.2", wanted="16.4", data_dir="pgdata-17"))
    assert (d.version, d.data_dir, d.reason, d.start_job) == ("17.2", "pgdata-17", "DowngradeRefused", False)


def test_retry_annotation_names_a_new_attempt() -> None:
    assert work_token("16.4", "17.2", "") != work_token("16.4", "17.2", "1") != work_token("16.4", "17.2", "2")


def test_an_upgrade_waits_for_a_running_migration_before_its_backup() -> None:
    d = decide(replace(MAJOR, migration_running=True))
    assert (d.version, d.status, d.reason, d.start_job) == ("16.4", "True", "WaitingForMigration", False)
    # once its backup or Job exists, the attempt is under way and goes on
    assert decide(replace(MAJOR, migration_running=True, backup_phase="Running")).reason == "BackingUp"


def test_one_upgrade_at_a_time_a_new_attempt_waits_for_an_unfinished_job_of_another() -> None:
    waiting = decide(replace(MAJOR, backup_phase="Succeeded", other_job_running="db-upgrade-1"))
    assert (waiting.version, waiting.status, waiting.reason, waiting.start_job) == (
        "16.4", "True", "WaitingForUpgrade", False)
    assert "db-upgrade-1" in waiting.message
    minor = decide(replace(MAJOR, wanted="16.6", backup_required=False, other_job_running="db-upgrade-1"))
    assert (minor.version, minor.reason) == ("16.4", "WaitingForUpgrade")  # no roll under a running dump
    # its own Job, once it exists, is not held back
    assert decide(replace(MAJOR, backup_phase="Succeeded", job_exists=True,
                          other_job_running="db-upgrade-1")).reason == "UpgradeJobRunning"
