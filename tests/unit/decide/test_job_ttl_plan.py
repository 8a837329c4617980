"""decide/job_ttl.plan_expiry: the TTL patches of one pass, once per finished Job whose outcome is recorded."""

from __future__ import annotations

from typing import Any

from sampledb_operator.decide import job_ttl as ttl
from sampledb_operator.decide.effects import Patch, Plan
from sampledb_operator.model.sampledb import SampleDB

COMPLETE = {"conditions": [{"type": "Complete", "status": "True"}]}
FAILED = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
TTL = {"spec": {"ttlSecondsAfterFinished": ttl.FINISHED_JOB_TTL_SECONDS}}


def database(*conditions: tuple[str, str, str]) -> SampleDB:
    return SampleDB.model_validate({
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
        "status": {"currentVersion": "16.4",
                   "conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]}})


def job(name: str, component: str, status: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
            "spec": spec, "status": status or {}}


def test_only_finished_jobs_without_a_ttl_whose_outcome_is_recorded_expire_in_order() -> None:
    db = database(("Initialized", "True", "InitSucceeded"), ("Migrated", "True", "MigrationsApplied"))
    jobs = (job("m1", "migrate", COMPLETE), job("running", "init", None), job("i1", "init", COMPLETE),
            job("has-ttl", "init", COMPLETE, ttlSecondsAfterFinished=60), job("b1", "backup", COMPLETE),
            job("m2", "migrate", FAILED))
    assert ttl.plan_expiry(ttl.ExpiryFacts(db=db, jobs=jobs)) == Plan((
        Patch("Job", "m1", TTL), Patch("Job", "i1", TTL), Patch("Job", "m2", TTL)))


def test_a_failed_init_job_is_kept_while_the_status_reports_the_failure() -> None:
    db = database(("Initialized", "False", "InitFailed"))
    assert ttl.plan_expiry(ttl.ExpiryFacts(db=db, jobs=(job("i1", "init", FAILED),))) == Plan()
    assert not ttl.expires(db, job("i1", "init", FAILED))
    assert ttl.expires(database(("Initialized", "True", "InitSucceeded")), job("i1", "init", COMPLETE))


def test_no_jobs_is_an_empty_plan() -> None:
    assert ttl.plan_expiry(ttl.ExpiryFacts(db=database(), jobs=())) == Plan()
