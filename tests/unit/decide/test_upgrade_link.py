"""decide/upgrades/upgrade.py, the Link method: stop, pg_upgrade --link, switch, analyze; a refused check falls back
to Dump; a failure after the point of no return keeps the instance stopped and never falls back."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sampledb_operator.decide.upgrades import upgrade_step as us
from sampledb_operator.decide.upgrades.upgrade import UpgradeInput, decide
from sampledb_operator.model.sampledb import SampleDB, UpgradeMethod

LINK = UpgradeInput(wanted="18.1", current="15.8", data_dir="pgdata", backup_required=True, backup_phase="Succeeded",
                    method=UpgradeMethod.LINK, sts_ready=True, sts_version="15.8")
FAILED = replace(LINK, old_stopped=True, link_job_exists=True, link_job_finished=True,
                 link_job_message="pg_upgrade failed: could not link file (BackoffLimitExceeded)")


def test_the_backup_comes_first_with_the_server_running() -> None:
    d = decide(replace(LINK, backup_phase="Running"))
    assert (d.reason, d.stop, d.start_link_job) == ("BackingUp", False, False)


def test_the_server_is_stopped_before_the_link_job_and_stays_stopped_while_it_runs() -> None:
    stopping = decide(LINK)
    assert (stopping.reason, stopping.stop, stopping.start_link_job, stopping.start_job) == (
        "StoppingServer", True, False, False)
    assert (stopping.version, stopping.data_dir) == ("15.8", "pgdata")
    start = decide(replace(LINK, old_stopped=True))
    assert (start.reason, start.stop, start.start_link_job, start.start_job) == ("UpgradeJobRunning", True, True, False)
    running = decide(replace(LINK, old_stopped=True, link_job_exists=True))
    assert (running.stop, running.start_link_job, running.status) == (True, False, "True")


def test_a_succeeded_link_job_switches_to_the_new_directory_then_analyzes_after_ready() -> None:
    done = replace(LINK, old_stopped=True, link_job_exists=True, link_job_finished=True, link_job_succeeded=True,
                   sts_ready=False)
    rolling = decide(done)
    assert (rolling.version, rolling.data_dir, rolling.stop, rolling.reason, rolling.analyze) == (
        "18.1", "pgdata-18", False, "RollingOut", False)
    ready = decide(replace(done, sts_ready=True, sts_version="18.1"))
    assert (ready.status, ready.reason, ready.analyze, ready.stop) == ("False", "UpgradeSucceeded", True, False)


def test_a_failure_before_the_point_of_no_return_starts_the_old_version_again() -> None:
    d = decide(FAILED)
    assert (d.version, d.data_dir, d.stop, d.failed, d.reason) == ("15.8", "pgdata", False, True, "UpgradeFailed")
    assert not (d.start_job or d.start_link_job)
    assert "could not link file" in d.message and "rolled back" in d.message


def test_a_failure_after_the_point_of_no_return_keeps_the_instance_stopped_and_never_falls_back() -> None:
    d = decide(replace(FAILED, link_old_usable=False))
    assert (d.version, d.stop, d.failed, d.reason, d.start_job) == ("15.8", True, True, "UpgradeFailed", False)
    assert "point of no return" in d.message and "pg_control.old" in d.message and "backup" in d.message
    # even with a check_failed flag (never written then), no Dump starts on a disabled directory
    assert not decide(replace(FAILED, link_old_usable=False, link_check_failed=False)).start_job


def test_a_refused_check_falls_back_to_dump_once_the_old_server_is_ready_again() -> None:
    refused = replace(FAILED, link_check_failed=True, link_job_message="pg_upgrade --check refused: pgcrypto",
                      sts_ready=False)
    waiting = decide(refused)
    assert (waiting.reason, waiting.stop, waiting.start_job, waiting.status) == ("FallingBackToDump", False, False,
                                                                               "True")
    assert "pgcrypto" in waiting.message
    start = decide(replace(refused, sts_ready=True))
    assert (start.start_job, start.fallback, start.stop, start.version) == (True, True, False, "15.8")
    dumping = decide(replace(refused, sts_ready=True, job_exists=True))
    assert (dumping.start_job, dumping.fallback, dumping.reason) == (False, False, "UpgradeJobRunning")
    failed = decide(replace(refused, sts_ready=True, job_exists=True, job_finished=True, job_message="pgcrypto"))
    assert (failed.reason, failed.failed, failed.stop) == ("UpgradeFailed", True, False)
    switched = decide(replace(refused, sts_ready=True, job_exists=True, job_finished=True, job_succeeded=True))
    assert (switched.data_dir, switched.version, switched.analyze) == ("pgdata-18", "18.1", False)


def test_dump_never_stops_the_server_and_a_minor_upgrade_never_does() -> None:
    dump = decide(replace(LINK, method=UpgradeMethod.DUMP))
    assert (dump.start_job, dump.stop, dump.start_link_job) == (True, False, False)
    minor = decide(replace(LINK, wanted="15.9"))
    assert (minor.reason, minor.stop) == ("RollingOut", False)


def test_the_old_server_counts_as_stopped_only_when_the_statefulset_and_the_pod_say_so() -> None:
    db = SampleDB.model_validate({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                  "metadata": {"name": "orders", "namespace": "shop", "uid": "u"},
                                  "spec": {"version": "18.1", "storage": {"size": "1Gi"}},
                                  "status": {"currentVersion": "15.8"}})

    def facts(**kw: Any) -> us.UpgradeFacts:
        return us.UpgradeFacts(db=db, statefulset_ready=False, data_volume=None, major_blocked=None, upgrade_jobs=(),
                               migrate_jobs=(), now=datetime(2026, 11, 30, tzinfo=UTC), **kw)

    sts: dict[str, Any] = {"metadata": {"name": "orders"}, "spec": {"replicas": 1}}
    zero = {**sts, "metadata": {**sts["metadata"], "generation": 3},
            "spec": {**sts["spec"], "replicas": 0}, "status": {"observedGeneration": 3, "replicas": 0}}
    assert us._stopped(facts(statefulset=zero, pod_exists=False))
    assert not us._stopped(facts(statefulset=zero, pod_exists=True))  # its pod is still terminating
    assert not us._stopped(facts(statefulset={**zero, "status": {"observedGeneration": 2, "replicas": 0}},
                                 pod_exists=False))
    assert not us._stopped(facts(statefulset={**zero, "status": {"observedGeneration": 3, "replicas": 1}},
                                 pod_exists=False))
    assert not us._stopped(facts(statefulset=sts, pod_exists=False))  # still asked for one replica


def test_a_pg_upgrade_failure_before_the_point_of_no_return_may_fall_back_but_not_after_it() -> None:
    db = SampleDB.model_validate({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                  "metadata": {"name": "orders", "namespace": "shop", "uid": "u"},
                                  "spec": {"version": "18.1", "storage": {"size": "1Gi"}},
                                  "status": {"currentVersion": "15.8"}})
    attempt = us.attempt_of(db)
    assert attempt is not None
    failed = {"metadata": {"name": attempt.link}, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "m"}]}}
    base = us.UpgradeFacts(db=db, statefulset=None, statefulset_ready=False, data_volume=None, major_blocked=None,
                           upgrade_jobs=(), migrate_jobs=(), now=datetime(2026, 11, 30, tzinfo=UTC),
                           backup={"status": {"phase": "Succeeded"}}, link_job=failed)

    def reason(result: dict[str, Any]) -> str:
        cond = us.plan_upgrade_step(replace(base, link_result=result)).outcome.condition
        assert cond is not None
        return cond.reason

    assert reason({"code": 6, "old_usable": True, "message": "pg_restore: error"}) == "FallingBackToDump"
    assert reason({"code": 6, "check_failed": True, "old_usable": True, "message": "x"}) == "FallingBackToDump"
    assert reason({"code": 6, "old_usable": False, "message": "x"}) == "UpgradeFailed"  # past the point of no return
    assert reason({"code": 1, "old_usable": True, "message": "x"}) == "UpgradeFailed"  # not pg_upgrade's refusal
    assert reason({}) == "UpgradeFailed"  # no result line: nothing known, no fallback
