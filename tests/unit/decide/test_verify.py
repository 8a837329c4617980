"""decide/backup/verify.py: which backup is verified next, the verify Job, outcomes, statuses and BackupHealthy;
decide/backup/verify_plan.py: one pass of the verification step as a plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.decide.backup import verify, verify_plan
from sampledb_operator.decide.effects import Create, Emit, Patch
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.status import JobState
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.verification import VERIFY_ANNOTATION, VerifyReason

NOW = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
RUNNING = JobState(False, False, "Running", "")
DONE = JobState(True, True, "Complete", "")
FAILED = JobState(True, False, "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def view(name: str = "b1", *, minutes: int = 0, **fields: Any) -> verify.BackupView:
    base: dict[str, Any] = {"uid": f"uid-{name}", "phase": "Succeeded", "has_location": True,
                            "completed_at": NOW - timedelta(minutes=minutes)}
    return verify.BackupView(name=name, **{**base, **fields})


def db(**spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "u-db",
                     "annotations": {"testing.sampledb.io/fail": "verify"}},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, **spec}})


def backup_obj(name: str = "orders-manual-1", **status: Any) -> Obj:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": name, "namespace": "shop", "uid": "u-b", "generation": 1,
                         "resourceVersion": "7"},
            "spec": {"database": "orders"},
            "status": {"phase": "Succeeded", "completedAt": "2026-03-10T13:00:00Z",
                       "location": {"pvcName": "orders-backups", "path": f"/sampledb/backups/{name}.dump"}, **status}}


# ---------------------------------------------------------------- what needs a verification


@pytest.mark.parametrize(("fields", "auto", "expected"), [
    ({}, False, None),  # nothing asked
    ({}, True, ""),  # spec.backup.verify, never verified
    ({"recorded": True, "verified": True}, True, None),  # verified once: auto never repeats
    ({"recorded": True, "verified": False}, True, None),  # nor after a failure
    ({"request": "2026-03-10"}, False, "2026-03-10"),  # an explicit request
    ({"request": "x", "recorded": True, "answered": "x"}, False, None),  # already answered
    ({"request": "y", "recorded": True, "answered": "x"}, False, "y"),  # a new value: again
    ({"request": "x", "recorded": True, "answered": None}, True, "x"),  # auto answered, then asked by hand
    ({"phase": "Running"}, True, None),  # only finished, successful backups
    ({"phase": "Failed", "request": "x"}, True, None),
    ({"deleting": True, "request": "x"}, True, None),
])
def test_pending_request(fields: dict[str, Any], auto: bool, expected: str | None) -> None:
    assert verify.pending_request(view(**fields), auto=auto) == expected


def test_view_reads_the_annotation_status_and_condition() -> None:
    obj = backup_obj(verified=False, verifiedAt="2026-03-10T13:05:00Z", verification={"request": "r1"},
                     conditions=[{"type": "Verified", "status": "False", "reason": "DataMismatch", "message": "m"}])
    obj["metadata"]["annotations"] = {VERIFY_ANNOTATION: "  r2 "}

    got = verify.BackupView.of(obj)

    assert (got.request, got.recorded, got.answered, got.verified) == ("r2", True, "r1", False)
    assert got.verified_at == datetime(2026, 3, 10, 13, 5, tzinfo=UTC)
    assert (got.reason, got.message, got.has_location) == ("DataMismatch", "m", True)
    assert verify.BackupView.of({**obj, "metadata": {**obj["metadata"], "annotations": {VERIFY_ANNOTATION: " "}}}
                                ).request is None


def test_candidates_put_explicit_requests_first_then_the_newest() -> None:
    backups = [view("old", minutes=60), view("new", minutes=1), view("asked", minutes=120, request="now")]

    got = verify.candidates("orders", backups, auto=True)

    assert [(c.backup.name, c.request) for c in got] == [("asked", "now"), ("new", ""), ("old", "")]
    assert got[0].job_name == names.verify_job_name("orders", "uid-asked", "now")


def test_job_names_differ_per_request_and_backup_incarnation_and_fit_a_label() -> None:
    long_db = "d" * 63
    made = {names.verify_job_name(long_db, uid, req) for uid in ("u1", "u2") for req in ("", "a", "b")}

    assert len(made) == 6
    assert all(len(n) <= 63 for n in made)
    assert names.verify_job_name("orders", "u1", "a") == names.verify_job_name("orders", "u1", "a")


# ---------------------------------------------------------------- one at a time


def test_plan_starts_the_first_candidate_when_no_job_runs() -> None:
    cands = verify.candidates("orders", [view("a", minutes=2), view("b", minutes=1)], auto=True)

    step = verify.plan(cands, {})

    assert step.start is cands[0] and step.start.backup.name == "b"
    assert step.finished == step.running == step.unverifiable == ()


def test_plan_starts_nothing_while_a_verification_runs() -> None:
    cands = verify.candidates("orders", [view("a", minutes=2), view("b", minutes=1)], auto=True)

    step = verify.plan(cands, {cands[1].job_name: RUNNING})

    assert step.start is None
    assert step.running == (cands[1],)


def test_plan_records_a_finished_job_and_starts_the_next() -> None:
    cands = verify.candidates("orders", [view("a", minutes=2), view("b", minutes=1)], auto=True)

    step = verify.plan(cands, {cands[0].job_name: DONE})

    assert step.finished == (cands[0],)
    assert step.start is cands[1]


def test_a_backup_without_location_fails_an_explicit_request_and_is_skipped_otherwise() -> None:
    cands = verify.candidates("orders", [view("x", has_location=False, request="r"),
                                         view("y", has_location=False)], auto=True)

    step = verify.plan(cands, {})

    assert [c.backup.name for c in step.unverifiable] == ["x"]
    assert step.start is None
    assert verify.not_verifiable(step.unverifiable[0]).reason == VerifyReason.NOT_VERIFIABLE


backups_st = st.lists(
    st.builds(lambda i, phase, request, recorded, minutes: view(f"b{i}", phase=phase, request=request,
                                                                 recorded=recorded, minutes=minutes),
              st.integers(0, 5), st.sampled_from(["Succeeded", "Failed", "Running"]),
              st.sampled_from([None, "r1", "r2"]), st.booleans(), st.integers(0, 100)),
    max_size=6, unique_by=lambda b: b.name)


@given(backups_st, st.booleans(), st.data())
def test_plan_never_leaves_two_jobs_unfinished(backups: list[verify.BackupView], auto: bool,
                                               data: st.DataObject) -> None:
    cands = verify.candidates("orders", backups, auto=auto)
    drawn = {c.job_name: data.draw(st.sampled_from([None, RUNNING, DONE, FAILED])) for c in cands}
    states = {k: v for k, v in drawn.items() if v is not None}
    if sum(1 for s in states.values() if not s.finished) > 1:
        return  # not a state this plan produces

    step = verify.plan(cands, states)

    unfinished = [c for c in cands if (s := states.get(c.job_name)) is not None and not s.finished]
    assert len(unfinished) + (step.start is not None) <= 1
    if step.start is not None:
        assert step.start.job_name not in states


@given(backups_st, st.booleans())
def test_a_recorded_verification_answers_its_request(backups: list[verify.BackupView], auto: bool) -> None:
    for c in verify.candidates("orders", backups, auto=auto):
        done = verify.after_record(c.backup, c, verify.Outcome(True, VerifyReason.VERIFIED, "ok"), NOW)

        assert verify.pending_request(done, auto=auto) is None


# ---------------------------------------------------------------- outcomes


@pytest.mark.parametrize(("state", "result", "verified", "reason"), [
    (DONE, {"code": 0, "compared": True, "message": "verified"}, True, VerifyReason.VERIFIED),
    (DONE, {"code": 0, "compared": False, "message": "no stats"}, True, VerifyReason.RESTORE_ONLY),
    (DONE, {}, True, VerifyReason.VERIFIED),  # a simulated cluster's Job reports nothing
    (FAILED, {"code": 4, "message": "checksum mismatch"}, False, VerifyReason.CHECKSUM_MISMATCH),
    (FAILED, {"code": 6, "message": "does not restore"}, False, VerifyReason.RESTORE_FAILED),
    (FAILED, {"code": 8, "message": "2 tables differ"}, False, VerifyReason.DATA_MISMATCH),
    (FAILED, {"code": 2, "message": "needs PostgreSQL 18"}, False, VerifyReason.VERIFICATION_FAILED),
    (FAILED, {}, False, VerifyReason.VERIFICATION_FAILED),
])
def test_outcome_of_a_finished_job(state: JobState, result: Obj, verified: bool, reason: VerifyReason) -> None:
    got = verify.outcome("orders-verify-1", state, result)

    assert (got.verified, got.reason) == (verified, reason)
    assert got.message
    if not verified and not result:
        assert "BackoffLimitExceeded" in got.message


def test_outcome_keeps_the_counts() -> None:
    got = verify.outcome("j", DONE, {"compared": True, "tables": 3, "rows": 110009, "message": "ok"})

    assert (got.tables, got.rows, got.compared) == (3, 110009, True)
    assert verify.outcome("j", DONE, {"tables": True, "rows": -1}).tables is None


# ---------------------------------------------------------------- statuses


def test_recorded_status_of_an_automatic_verification() -> None:
    c = verify.candidates("orders", [view("b")], auto=True)[0]
    result = verify.Outcome(True, VerifyReason.VERIFIED, "matches", tables=3, rows=9, compared=True)

    got = verify.recorded_status([], c, result, NOW)

    assert got["verified"] is True and got["verifiedAt"] == "2026-03-10T14:00:00Z"
    assert got["verification"] == {"jobName": c.job_name, "dataCompared": True, "tables": 3, "rows": 9}
    assert [(x["type"], x["status"], x["reason"]) for x in got["conditions"]] == [("Verified", "True", "Verified")]


def test_verifying_status_is_written_once() -> None:
    c = verify.candidates("orders", [view("b", request="r")], auto=False)[0]
    first = verify.verifying_status([], c, NOW)
    assert first is not None
    conds = [Condition.model_validate(x) for x in first["conditions"]]

    assert conds[0].status == "Unknown" and conds[0].reason == "Verifying"
    assert verify.verifying_status(conds, c, NOW + timedelta(minutes=1)) is None


# ---------------------------------------------------------------- BackupHealthy


def test_health_has_no_opinion_without_a_failed_verification() -> None:
    assert verify.health([view("a", verified=True), view("b")], 1) is None


def test_health_names_the_newest_failed_verification() -> None:
    backups = [
        view("old", verified=False, verified_at=NOW - timedelta(hours=2), reason="ChecksumMismatch", message="m1"),
        view("new", verified=False, verified_at=NOW, reason="DataMismatch", message="2 tables differ"),
        view("ok", verified=True, verified_at=NOW),
        view("going", verified=False, verified_at=NOW, deleting=True),
    ]

    got = verify.health(backups, 4)

    assert got is not None
    assert (got.status, got.reason, got.observed_generation) == ("False", "VerificationFailed", 4)
    assert got.message.startswith("backup new failed verification at 2026-03-10T14:00:00Z: DataMismatch: 2 tables")
    assert "1 more backups" in got.message


def _cond(status: str, reason: str) -> Condition:
    return Condition.model_validate({"type": "BackupHealthy", "status": status, "reason": reason})


@pytest.mark.parametrize(("schedule", "verification", "expected"), [
    (None, None, None),
    (_cond("True", "BackupSucceeded"), None, "BackupSucceeded"),
    (None, _cond("False", "VerificationFailed"), "VerificationFailed"),
    (_cond("True", "BackupSucceeded"), _cond("False", "VerificationFailed"), "VerificationFailed"),
    (_cond("Unknown", "AwaitingFirstBackup"), _cond("False", "VerificationFailed"), "VerificationFailed"),
    (_cond("False", "BackupFailed"), _cond("False", "VerificationFailed"), "BackupFailed"),
])
def test_merge_health(schedule: Condition | None, verification: Condition | None, expected: str | None) -> None:
    got = verify.merge_health(schedule, verification)

    assert (got.reason if got else None) == expected


# ---------------------------------------------------------------- the Job


def test_verify_job_runs_the_script_alone_without_credentials() -> None:
    backup = backup_obj()
    c = verify.candidates("orders", [verify.BackupView.of({**backup, "metadata": {
        **backup["metadata"], "annotations": {VERIFY_ANNOTATION: "r"}}})], auto=False)[0]

    body = verify.verify_job(db(), backup, c)

    spec = body["spec"]["template"]["spec"]
    container = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert body["metadata"]["name"] == c.job_name
    assert container["command"] == ["bash", "/sampledb/scripts/verify.sh"]
    assert env == {"RESULT_FILE": "/dev/termination-log", "BACKUP_DIR": "/sampledb/backups",
                   "BACKUP_NAME": "orders-manual-1", "TMPDIR": "/sampledb/scratch"}
    assert "PGPASSWORD" not in str(body)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["backups"]["persistentVolumeClaim"] == {"claimName": "orders-backups", "readOnly": True}
    assert volumes["scratch"] == {"name": "scratch", "emptyDir": {}}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["backups"]["readOnly"] is True and mounts["scratch"]["mountPath"] == "/sampledb/scratch"
    assert body["metadata"]["ownerReferences"] == [{
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "name": "orders-manual-1", "uid": "u-b",
        "controller": True, "blockOwnerDeletion": True}]
    labels = body["metadata"]["labels"]
    assert labels["sampledb.io/database"] == "orders" and labels["app.kubernetes.io/component"] == "verify"
    assert body["metadata"]["annotations"] == {"sampledb.io/verify-request": "r",
                                               "sampledb.io/backup": "orders-manual-1"}
    assert body["spec"]["template"]["metadata"]["annotations"] == {"testing.sampledb.io/fail": "verify"}
    rule = body["spec"]["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [2, 4, 6, 8]
    assert spec["restartPolicy"] == "Never"
    assert container["image"] == "postgres:16.4"


def test_verify_job_reads_the_file_name_from_the_location() -> None:
    backup = backup_obj(location={"pvcName": "elsewhere", "path": "/sampledb/backups/renamed.dump"})
    c = verify.candidates("orders", [verify.BackupView.of(backup)], auto=True)[0]

    body = verify.verify_job(db(), backup, c)

    env = {e["name"]: e.get("value") for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BACKUP_NAME"] == "renamed"
    assert body["spec"]["template"]["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"] == "elsewhere"


# ---------------------------------------------------------------- one pass as a plan (decide/backup/verify_plan.py)


def labelled(name: str, *, completed: str, uid: str = "u-db", rv: str = "7", **status: Any) -> Obj:
    obj = backup_obj(name, completedAt=completed, **status)
    obj["metadata"].update(uid=f"uid-{name}", resourceVersion=rv,
                           labels={"sampledb.io/database": "orders", "sampledb.io/database-uid": uid})
    return obj


A = labelled("orders-manual-a", completed="2026-03-10T12:00:00Z")
B = labelled("orders-manual-b", completed="2026-03-10T13:00:00Z")
COMPLETE: Obj = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
FAILED_JOB: Obj = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}


def inputs(database: SampleDB, backups: tuple[Obj, ...], jobs: dict[str, Obj | None] | None = None,
           results: dict[str, Obj] | None = None) -> verify_plan.VerificationInputs:
    return verify_plan.VerificationInputs(db=database, backups=backups, jobs=jobs or {}, results=results or {},
                                          now=NOW)


def job_of(backup: Obj, request: str = "") -> str:
    return names.verify_job_name("orders", backup["metadata"]["uid"], request)


def test_a_pass_starts_the_newest_backups_job_and_marks_it_verifying() -> None:
    database = db(backup={"verify": True})
    assert verify_plan.jobs_to_read(database, (A, B)) == (job_of(B), job_of(A))

    planned = verify_plan.plan_verification(inputs(database, (A, B)))

    [writes] = planned.writes
    assert writes.subject == {"name": "orders-manual-b", "namespace": "shop", "uid": "uid-orders-manual-b",
                              "resourceVersion": "7"}
    create, mark = writes.plan.effects
    assert isinstance(create, Create) and create.obj["metadata"]["name"] == job_of(B)
    assert create.obj["metadata"]["ownerReferences"][0]["name"] == "orders-manual-b"
    assert create.announce == EventSpec("Normal", "VerificationStarted",
                                        f"verifying with Job {job_of(B)} (spec.backup.verify)")
    assert isinstance(mark, Patch) and (mark.kind, mark.name, mark.subresource) == (
        "SampleDBBackup", "orders-manual-b", "status")
    assert mark.patch["metadata"] == {"resourceVersion": "7"}
    assert mark.patch["status"]["conditions"][0]["reason"] == "Verifying"
    assert (writes.verdict, writes.retry_if_stale) == (None, False)
    assert planned.init_metrics and planned.condition is None


def test_a_running_job_marks_its_backup_verifying_once_and_starts_no_other() -> None:
    database = db(backup={"verify": True})
    running = verify_plan.plan_verification(inputs(database, (A, B), jobs={job_of(B): {"status": {}}}))
    [writes] = running.writes
    assert [type(e).__name__ for e in writes.plan.effects] == ["Patch"]
    assert verify_plan.results_to_read(inputs(database, (A, B), jobs={job_of(B): {"status": {}}})) == ()

    marked = labelled("orders-manual-b", completed="2026-03-10T13:00:00Z",
                      conditions=writes.plan.effects[0].patch["status"]["conditions"])  # type: ignore[union-attr]
    assert verify_plan.plan_verification(inputs(database, (A, marked), jobs={job_of(B): {"status": {}}})).writes == ()


def test_a_finished_job_is_recorded_with_a_precondition_then_announced_and_the_next_one_starts() -> None:
    database = db(backup={"verify": True})
    base = inputs(database, (A, B), jobs={job_of(B): COMPLETE})
    assert verify_plan.results_to_read(base) == (job_of(B),)

    planned = verify_plan.plan_verification(inputs(database, (A, B), jobs={job_of(B): COMPLETE}, results={
        job_of(B): {"code": 0, "compared": True, "tables": 3, "rows": 10, "message": "verified"}}))

    record, start = planned.writes
    patch, emit = record.plan.effects
    assert isinstance(patch, Patch) and patch.patch["metadata"] == {"resourceVersion": "7"}
    assert patch.patch["status"]["verified"] is True
    assert patch.patch["status"]["verification"] == {"jobName": job_of(B), "dataCompared": True, "tables": 3,
                                                     "rows": 10}
    assert emit == Emit(EventSpec("Normal", "BackupVerified", "Verified: verified"))
    assert (record.subject["name"], record.verdict, record.retry_if_stale) == ("orders-manual-b", True, True)
    assert start.subject["name"] == "orders-manual-a"
    assert isinstance(start.plan.effects[0], Create)
    assert planned.condition is None


def test_a_failed_verification_is_announced_as_a_warning_and_makes_backups_unhealthy() -> None:
    database = db(backup={"verify": True})
    planned = verify_plan.plan_verification(inputs(
        database, (B,), jobs={job_of(B): FAILED_JOB}, results={job_of(B): {"code": 4, "message": "bad sum"}}))

    [record] = planned.writes
    assert record.verdict is False
    assert record.plan.effects[-1] == Emit(EventSpec("Warning", "BackupVerificationFailed",
                                                     f"ChecksumMismatch: verify Job {job_of(B)} failed: bad sum"))
    cond = planned.condition  # counts the outcome this pass records, as if written
    assert cond is not None and (cond.status, cond.reason) == ("False", "VerificationFailed")
    assert "orders-manual-b" in cond.message


def test_an_explicit_request_for_a_backup_without_location_is_recorded_not_verifiable() -> None:
    nowhere = labelled("orders-manual-c", completed="2026-03-10T13:00:00Z")
    del nowhere["status"]["location"]
    nowhere["metadata"]["annotations"] = {VERIFY_ANNOTATION: "now"}

    planned = verify_plan.plan_verification(inputs(db(), (nowhere,)))

    [record] = planned.writes
    assert not any(isinstance(e, Create) for e in record.plan.effects)
    patch = record.plan.effects[0]
    assert isinstance(patch, Patch) and patch.patch["status"]["verification"]["request"] == "now"
    assert record.plan.effects[-1].event.reason == "BackupVerificationFailed"  # type: ignore[union-attr]
    assert record.verdict is False and planned.init_metrics


def test_nothing_to_do_without_spec_verify_or_requests_nor_for_another_incarnations_backups() -> None:
    assert verify_plan.plan_verification(inputs(db(), (A, B))) == verify_plan.VerificationPlan((), None, False)
    old = labelled("orders-manual-old", completed="2026-03-10T13:00:00Z", uid="u-older")
    planned = verify_plan.plan_verification(inputs(db(backup={"verify": True}), (old,)))
    assert (planned.writes, verify_plan.jobs_to_read(db(backup={"verify": True}), (old,))) == ((), ())
