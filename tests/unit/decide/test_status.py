"""decide/status.py: phase and conditions follow the observed children."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sampledb_operator.decide import status as st
from sampledb_operator.model.conditions import get_condition
from sampledb_operator.model.sampledb import Problem, SampleDB

NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def make_db(**spec: Any) -> SampleDB:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}, **spec}
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "db", "namespace": "ns", "uid": "u", "generation": 3}, "spec": body,
    })


def sts(ready: bool) -> dict[str, Any]:
    return {"metadata": {"generation": 2}, "spec": {"replicas": 1},
            "status": {"observedGeneration": 2, "readyReplicas": 1 if ready else 0, "updatedReplicas": 1,
                       "currentRevision": "r1", "updateRevision": "r1"}}


def job(outcome: str | None) -> dict[str, Any]:
    conds = []
    if outcome == "Complete":
        conds = [{"type": "Complete", "status": "True"}]
    elif outcome == "Failed":
        conds = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                  "message": "Job has reached the specified backoff limit"}]
    return {"metadata": {"name": "j"}, "status": {"conditions": conds}}


def cond(status: Any, type_: str) -> tuple[str, str]:
    c = get_condition(status.conditions, type_)
    assert c is not None, type_
    return c.status, c.reason


def test_new_database_is_provisioning_until_its_pod_is_ready() -> None:
    s = st.compute(make_db(), st.Observed(), NOW)
    assert s.phase == "Provisioning"
    assert cond(s, "Ready") == ("False", "Provisioning")
    waiting = st.compute(make_db(), st.Observed(statefulset=sts(False)), NOW)
    assert cond(waiting, "Ready") == ("False", "DatabaseNotReady")
    assert cond(s, "Progressing")[0] == "True"
    assert s.observed_generation == 3
    assert s.endpoint == "db.ns.svc:5432"
    assert s.secret_name == "db-credentials"
    assert s.current_version is None


def test_ready_pod_without_init_sql_is_running_and_ready() -> None:
    s = st.compute(make_db(), st.Observed(statefulset=sts(True)), NOW)
    assert s.phase == "Running"
    assert cond(s, "Ready") == ("True", "DatabaseReady")
    assert cond(s, "Initialized") == ("True", "NoInitSQL")
    assert cond(s, "Progressing") == ("False", "Reconciled")
    assert s.current_version == "16.4"


def test_init_running_then_complete_then_failed() -> None:
    db = make_db(init={"configMapKeyRef": {"name": "i", "key": "k"}})
    running = st.compute(db, st.Observed(statefulset=sts(True), init_job=job(None)), NOW)
    assert running.phase == "Initializing"
    assert cond(running, "Initialized") == ("False", "InitRunning")
    done = st.compute(db, st.Observed(statefulset=sts(True), init_job=job("Complete")), NOW)
    assert done.phase == "Running"
    assert cond(done, "Initialized") == ("True", "InitSucceeded")
    failed = st.compute(db, st.Observed(statefulset=sts(True), init_job=job("Failed")), NOW)
    assert failed.phase == "Degraded"
    assert cond(failed, "Initialized") == ("False", "InitFailed")
    assert cond(failed, "Degraded") == ("True", "InitFailed")
    c = get_condition(failed.conditions, "Initialized")
    assert c is not None and "BackoffLimitExceeded" in c.message


def test_missing_init_source_is_reported_with_its_reason() -> None:
    db = make_db(init={"configMapKeyRef": {"name": "i", "key": "k"}})
    blocked = st.Observed(statefulset=sts(True),
                          blockers=(Problem("InitSourceMissing", "ConfigMap i does not exist", "spec.init"),))
    s = st.compute(db, blocked, NOW)
    assert cond(s, "Initialized") == ("False", "InitSourceMissing")
    assert cond(s, "Ready")[0] == "False"


def test_invalid_spec_fails_with_the_problem_reason() -> None:
    s = st.compute(make_db(), st.Observed(problems=(Problem("InvalidResources", "too big", "spec.resources"),)),
                   NOW)
    assert s.phase == "Failed"
    assert cond(s, "SpecValid") == ("False", "InvalidResources")
    assert cond(s, "Ready") == ("False", "InvalidSpec")


def test_paused_database_says_so() -> None:
    s = st.compute(make_db(paused=True), st.Observed(statefulset=sts(True)), NOW)
    assert s.phase == "Paused"
    assert cond(s, "Progressing") == ("False", "Paused")


def test_recomputing_an_unchanged_world_changes_nothing_and_keeps_transition_times() -> None:
    db = make_db()
    first = st.compute(db, st.Observed(statefulset=sts(True)), NOW)
    again_db = db.model_copy(update={"status": first})
    second = st.compute(again_db, st.Observed(statefulset=sts(True)), NOW + timedelta(minutes=5))
    assert not st.status_changed(first, second)


def test_transition_time_moves_only_when_status_changes() -> None:
    db = make_db()
    first = st.compute(db, st.Observed(statefulset=sts(False)), NOW)
    later = NOW + timedelta(minutes=1)
    second = st.compute(db.model_copy(update={"status": first}), st.Observed(statefulset=sts(True)), later)
    ready = get_condition(second.conditions, "Ready")
    valid = get_condition(second.conditions, "SpecValid")
    assert ready is not None and ready.last_transition_time == later
    assert valid is not None and valid.last_transition_time == NOW


def test_unbound_volume_is_named_as_the_reason_for_waiting() -> None:
    pvc = {"metadata": {"name": "data-db-0"}, "spec": {"storageClassName": "slow"}, "status": {"phase": "Pending"}}
    s = st.compute(make_db(), st.Observed(statefulset=sts(False), pvc=pvc), NOW)
    assert cond(s, "Ready") == ("False", "VolumeNotBound")
    c = get_condition(s.conditions, "Ready")
    assert c is not None and "data-db-0" in c.message and "slow" in c.message


def test_restored_database_reports_restore_progress_instead_of_init() -> None:
    db = make_db(restore={"backupName": "b1"}, init={"configMapKeyRef": {"name": "i", "key": "k"}})
    running = st.compute(db, st.Observed(statefulset=sts(True), init_job=job(None)), NOW)
    assert running.phase == "Restoring"
    assert cond(running, "Initialized") == ("False", "Restoring")
    done = st.compute(db, st.Observed(statefulset=sts(True), init_job=job("Complete")), NOW)
    assert cond(done, "Initialized") == ("True", "Restored")
    failed = st.compute(db, st.Observed(statefulset=sts(True), init_job=job("Failed")), NOW)
    assert cond(failed, "Initialized") == ("False", "RestoreFailed")
    assert failed.phase == "Degraded"


def test_initialized_stays_true_after_its_job_is_removed() -> None:
    db = make_db(init={"configMapKeyRef": {"name": "i", "key": "k"}})
    done = st.compute(db, st.Observed(statefulset=sts(True), init_job=job("Complete")), NOW)
    later = st.compute(db.model_copy(update={"status": done}), st.Observed(statefulset=sts(True)), NOW)
    assert cond(later, "Initialized") == ("True", "InitSucceeded")
    assert later.phase == "Running"


def test_every_phase_has_a_pre_initialised_metric_series() -> None:
    from sampledb_operator.model.sampledb_status import Phase
    from sampledb_operator.observability import metrics

    assert set(metrics.PHASES) == {p.value for p in Phase}
