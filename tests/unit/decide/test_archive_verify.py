"""decide/backup/archive_verify.py: verifications that the object store restores a database, as a plan, without a
server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from test_archive import NOW, STORE, database, facts

from sampledb_operator.decide import job_ttl
from sampledb_operator.decide.backup import archive as arc
from sampledb_operator.decide.backup import archive_verify as av
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.effects import Create
from sampledb_operator.decide.events import transition_events
from sampledb_operator.decide.labels import COMPONENT_LABEL
from sampledb_operator.model.archive import VERIFY_RECOVERY_ANNOTATION
from sampledb_operator.model.sampledb_status import SampleDBStatus
from sampledb_operator.model.validation import validate_spec

BASE = {"name": "orders-basebackup-1", "backupId": "20261205T100000", "completedAt": "2026-12-05T10:05:00Z"}
VERIFIED = {"outcome": "verified", "point": "sampledb-verify-0123456789abcdef", "pointLsn": "0/3000A8",
            "pointTime": "2026-12-05T11:01:00Z", "walFile": "000000010000000000000003", "backupId": "20261205T100000",
            "archivedSeconds": 41.27, "restoreSeconds": 3.1, "replaySeconds": 1.2, "rtoSeconds": 6.04,
            "tables": 3, "rows": 1000, "message": "restore point sampledb-verify-0123456789abcdef restored and matches"}


def verifying(status: dict[str, Any] | None = None, annotations: dict[str, str] | None = None, **store: Any) -> Any:
    archive = {"lastBaseBackup": BASE, **(status or {})}
    return database({"archive": archive}, annotations, backup={"objectStore": {**STORE, **store}})


def vjob(name: str, request: str, *, created: str = "2026-12-05T11:00:00Z", state: str | None = None,
         reason: str = "") -> dict[str, Any]:
    conditions = [{"type": state, "status": "True", "reason": reason, "message": "the Job failed" if reason else "",
                   "lastTransitionTime": "2026-12-05T11:09:00Z"}] if state else []
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": {av.REQUEST_ANNOTATION: request},
                         "labels": {COMPONENT_LABEL: av.VERIFY_COMPONENT}},
            "status": {"conditions": conditions,
                       **({"completionTime": "2026-12-05T11:10:00Z"} if state == "Complete" else {})}}


def run(db: Any, **kw: Any) -> arc.ArchivePass:
    return arc.plan_archive(facts(db, **kw))


def verify_condition(passed: arc.ArchivePass) -> tuple[str, str, str] | None:
    cond = next((c for c in passed.conditions if c.type == "RecoveryVerified"), None)
    return (cond.status, cond.reason, cond.message) if cond is not None else None


def verify_jobs(passed: arc.ArchivePass) -> list[dict[str, Any]]:
    return [e.obj for e in passed.plan.effects if isinstance(e, Create)
            and e.obj["metadata"]["labels"][COMPONENT_LABEL] == av.VERIFY_COMPONENT]


def test_nothing_is_verified_or_reported_while_nobody_asks() -> None:
    passed = run(verifying())
    assert verify_condition(passed) is None
    assert not verify_jobs(passed)


def test_a_scheduled_verification_starts_with_the_primary_the_store_and_a_scratch_volume() -> None:
    db = verifying(verifySchedule="@daily", archiveTimeoutSeconds=30)
    passed = run(db)
    [body] = verify_jobs(passed)
    assert body["metadata"]["annotations"][av.REQUEST_ANNOTATION] == "slot:2026-12-05T00:00:00Z"
    pod = body["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert "verify-archive.sh" in container["command"][-1]
    assert env["SAMPLEDB_VERIFY_POINT"]["value"] == av.point_name(body["metadata"]["name"])
    assert len(env["SAMPLEDB_VERIFY_POINT"]["value"]) <= 63
    assert env["VERIFY_ARCHIVE_WAIT"]["value"] == str(30 + av.ARCHIVE_WAIT_MARGIN)
    assert env["SAMPLEDB_S3_SERVER"]["value"] == "orders"
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"]  # the primary's, by reference
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "s3-keys"
    assert {"name": "scratch", "emptyDir": {}} in pod["volumes"]
    assert {"name": "scratch", "mountPath": av.SCRATCH_MOUNT} in container["volumeMounts"]
    rules = body["spec"]["podFailurePolicy"]["rules"]
    assert rules[0]["onExitCodes"]["values"] == [2, 5, 6, 8]
    assert verify_condition(passed) == ("Unknown", "Verifying",
                                        "the first verification of a recovery from the store is running")
    [started] = [e.announce for e in passed.plan.effects if isinstance(e, Create) and e.obj is body]
    assert started is not None and started.reason == "RecoveryVerificationStarted"


def test_none_starts_before_the_first_base_backup_or_while_the_database_is_not_ready() -> None:
    db = database({"archive": {}}, backup={"objectStore": {**STORE, "verifySchedule": "@daily"}})
    passed = run(db)
    assert not verify_jobs(passed)
    assert verify_condition(passed) == ("Unknown", "AwaitingBaseBackup",
                                        "a recovery is verified once the first base backup is in the store")
    assert not verify_jobs(run(verifying(verifySchedule="@daily"), db_ready=False))


def test_one_at_a_time_and_each_request_once() -> None:
    db = verifying(verifySchedule="@daily")
    running = vjob("orders-recoveryverify-a", "slot:2026-12-05T00:00:00Z")
    assert not verify_jobs(run(db, verify_jobs=(running,)))
    done = vjob("orders-recoveryverify-a", "slot:2026-12-05T00:00:00Z", state="Complete")
    passed = run(db, verify_jobs=(done,), verify_results={"orders-recoveryverify-a": VERIFIED})
    assert not verify_jobs(passed)
    # an annotation asks again, once per value
    asked = verifying({}, {VERIFY_RECOVERY_ANNOTATION: "now"}, verifySchedule="@daily")
    [body] = verify_jobs(run(asked, verify_jobs=(done,), verify_results={"orders-recoveryverify-a": VERIFIED}))
    assert body["metadata"]["annotations"][av.REQUEST_ANNOTATION] == "manual:now"


def test_an_answered_request_is_not_asked_again_after_its_job_is_gone() -> None:
    record = {"jobName": "orders-recoveryverify-a", "request": "manual:now", "verified": True, "reason": "Verified",
              "finishedAt": "2026-12-05T11:10:00Z"}
    db = verifying({"lastVerification": record}, {VERIFY_RECOVERY_ANNOTATION: "now"})
    passed = run(db)
    assert not verify_jobs(passed)
    assert verify_condition(passed) == ("True", "Verified", "")


def test_a_successful_verification_is_recorded_with_rto_and_rpo() -> None:
    db = verifying(verifySchedule="@daily")
    done = vjob("orders-recoveryverify-a", "slot:2026-12-05T00:00:00Z", state="Complete")
    passed = run(db, verify_jobs=(done,), verify_results={"orders-recoveryverify-a": VERIFIED})
    assert passed.status is not None
    record = passed.status.last_verification
    assert record is not None and record.verified and record.reason == "Verified"
    assert (record.rto_seconds, record.rpo_seconds, record.tables, record.rows) == (6.0, 41.3, 3, 1000)
    assert record.point == VERIFIED["point"] and record.base_backup == "20261205T100000"
    assert record.point_time == datetime(2026, 12, 5, 11, 1, tzinfo=UTC)
    assert passed.status.last_verified_at == datetime(2026, 12, 5, 11, 10, tzinfo=UTC)
    assert verify_condition(passed) == ("True", "Verified", VERIFIED["message"])
    assert av.results_needed(db, (done,)) == ["orders-recoveryverify-a"]
    recorded = db.model_copy(update={"status": db.status.model_copy(update={"archive": passed.status})})
    assert av.results_needed(recorded, (done,)) == []
    assert job_ttl.outcome_recorded(recorded, done)


@pytest.mark.parametrize(("check", "reason"), [
    ("restore", "RestoreFailed"), ("compare", "DataMismatch"), ("point", "PointNotRecorded"),
    ("archive", "PointNotArchived"), (None, "VerificationFailed")])
def test_a_failed_verification_says_why_in_its_own_words(check: str | None, reason: str) -> None:
    db = verifying(verifySchedule="@daily")
    result = {"message": "WAL file 000000010000000000000004 could not be restored"} if check else {}
    if check:
        result["check"] = check
    failed = vjob("orders-recoveryverify-a", "slot:2026-12-05T00:00:00Z", state="Failed", reason="PodFailurePolicy")
    passed = run(db, verify_jobs=(failed,), verify_results={"orders-recoveryverify-a": result})
    status, why, message = verify_condition(passed) or ("", "", "")
    assert (status, why) == ("False", reason)
    assert ("000000010000000000000004" in message) if check else ("PodFailurePolicy" in message)
    assert passed.status is not None and passed.status.last_verified_at is None
    assert not verify_jobs(passed)  # not repeated by itself


def test_an_overdue_verification_turns_false_after_the_grace() -> None:
    record = {"jobName": "orders-recoveryverify-a", "request": "slot:2026-12-03T00:00:00Z", "verified": True,
              "reason": "Verified", "finishedAt": "2026-12-03T00:10:00Z", "message": "ok"}
    db = verifying({"lastVerification": record}, verifySchedule="@daily")
    late = NOW.replace(hour=0, minute=0, second=0) + av.VERIFY_GRACE + timedelta(minutes=1)
    passed = run(db, now=late, db_ready=False)  # nothing can start
    status, reason, _ = verify_condition(passed) or ("", "", "")
    assert (status, reason) == ("False", "VerificationOverdue")
    early = NOW.replace(hour=0, minute=30, second=0)
    assert (verify_condition(run(db, now=early, db_ready=False)) or ("",))[0] == "True"


def test_a_bad_verify_schedule_is_refused_with_a_reason() -> None:
    db = verifying(verifySchedule="0 0 30 2 *x")
    assert "InvalidVerifySchedule" in {p.reason for p in validate_spec(db.spec)}


def test_retention_reaches_the_base_backup_job_only() -> None:
    db = database({"archive": {}}, backup={"objectStore": {**STORE, "retention": "7d"}})
    body = arc.base_backup_job(db, "first", "data-orders-0")
    env = {e["name"]: e.get("value") for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SAMPLEDB_RETENTION"] == "7d"
    assert env["SAMPLEDB_BACKUP_COMPRESSION"] == "lz4"
    sts_env = d.statefulset(db)["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "SAMPLEDB_RETENTION" not in {e["name"] for e in sts_env}  # no restart when it changes


def test_verification_events_announce_failure_and_success() -> None:
    def status(cond: tuple[str, str] | None) -> SampleDBStatus:
        conds = [{"type": "RecoveryVerified", "status": cond[0], "reason": cond[1], "message": "m"}] if cond else []
        return SampleDBStatus.model_validate({"conditions": conds})

    failed = transition_events(status(("Unknown", "Verifying")), status(("False", "RestoreFailed")))
    assert [(e.type, e.reason) for e in failed] == [("Warning", "RestoreFailed")]
    ok = transition_events(status(("False", "RestoreFailed")), status(("True", "Verified")))
    assert [(e.type, e.reason) for e in ok] == [("Normal", "Verified")]
    assert transition_events(status(None), status(("Unknown", "Verifying"))) == []
