"""decide/upgrades/reload.plan_reload: one pass of the reload step as a plan and the outcome for the status."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide.children import pgconfig
from sampledb_operator.decide.effects import Create, Emit, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.status import JobState
from sampledb_operator.decide.upgrades import reload as rl
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

WANTED = pgconfig.parameters_hash({"work_mem": "64MB"})
OLD = pgconfig.parameters_hash({"work_mem": "4MB"})
JOB = names.reload_job_name("orders", "uid-1", WANTED)
RUNNING = JobState(False, False, "Running", "")
SUCCEEDED = JobState(True, True, "Complete", "")
FAILED = JobState(True, False, "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def database(applied: str | None = OLD) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "parameters": {"work_mem": "64MB"}},
        "status": {"appliedParameters": applied} if applied else {}})


def facts(*, applied: str | None = OLD, ready: bool = True, busy: bool = False, existed: bool = True,
          job: JobState | None = None, result: dict[str, Any] | None = None) -> rl.ReloadFacts:
    return rl.ReloadFacts(db=database(applied), db_ready=ready, busy=busy, statefulset_existed=existed, job=job,
                          job_result=result or {})


def test_the_job_is_named_by_the_uid_and_the_wanted_hash() -> None:
    assert rl.wanted_hash(database()) == WANTED and rl.job_name(database()) == JOB


def test_reloaded_parameters_are_nothing() -> None:
    planned = rl.plan_reload(facts(applied=WANTED))
    assert planned.decision.step is rl.Step.NOTHING
    assert (planned.plan, planned.outcome) == (Plan(), rl.ReloadOutcome())


def test_a_new_database_records_the_hash_without_a_job() -> None:
    planned = rl.plan_reload(facts(applied=None, existed=False))
    assert (planned.plan, planned.outcome) == (Plan(), rl.ReloadOutcome(applied=WANTED))


def test_an_edit_on_a_ready_database_creates_the_job_announced() -> None:
    planned = rl.plan_reload(facts())
    [create] = planned.plan.effects
    assert isinstance(create, Create) and create.obj == rl.reload_job(database(), WANTED)
    assert create.obj["metadata"]["name"] == JOB
    assert create.announce == EventSpec("Normal", "ReloadingParameters", f"reloading spec.parameters with Job {JOB}")
    assert planned.outcome == rl.ReloadOutcome() and planned.plan.result is None


@pytest.mark.parametrize("kw", [{"ready": False}, {"busy": True}, {"job": RUNNING}])
def test_waiting_writes_nothing(kw: dict[str, Any]) -> None:
    planned = rl.plan_reload(facts(**kw))
    assert planned.decision.step is rl.Step.WAIT
    assert (planned.plan, planned.outcome) == (Plan(), rl.ReloadOutcome())


def test_the_result_line_is_read_only_for_a_finished_job() -> None:
    assert [rl.result_read_needed(facts(job=j)) for j in (None, RUNNING, SUCCEEDED, FAILED)] == [
        False, False, True, True]
    assert not rl.result_read_needed(facts(applied=WANTED, job=SUCCEEDED))  # recorded already


def test_a_succeeded_job_records_the_hash_and_names_the_settings_pending_a_restart() -> None:
    planned = rl.plan_reload(facts(job=SUCCEEDED, result={"pending_restart": ["shared_buffers", "max_wal_senders"]}))
    assert planned.outcome == rl.ReloadOutcome(applied=WANTED)
    assert planned.plan.effects == (Emit(EventSpec(
        "Normal", "ParametersReloaded",
        "spec.parameters reloaded; shared_buffers, max_wal_senders take effect when the pod restarts")),)
    plain = rl.plan_reload(facts(job=SUCCEEDED))
    assert plain.plan.effects == (Emit(EventSpec("Normal", "ParametersReloaded", "spec.parameters reloaded")),)


def test_a_failed_job_is_a_degraded_problem_with_its_detail_and_no_write() -> None:
    planned = rl.plan_reload(facts(job=FAILED, result={"message": "invalid value for parameter \"work_mem\""}))
    assert planned.plan == Plan() and planned.outcome.applied is None
    [problem] = planned.outcome.degraded
    assert (problem.reason, problem.field) == ("ParametersNotApplied", "spec.parameters")
    assert problem.message == (f'reload Job {JOB} failed: invalid value for parameter "work_mem"; fix'
                               " spec.parameters (or delete the Job to retry)")
    long = rl.plan_reload(facts(job=FAILED, result={"message": "x" * 2000}))
    assert f"failed: {'x' * rl.MESSAGE_LIMIT};" in long.outcome.degraded[0].message
    without = rl.plan_reload(facts(job=FAILED))
    assert f"failed: {FAILED.message};" in without.outcome.degraded[0].message  # the Job's own message
