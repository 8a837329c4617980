"""decide/lifecycle/init_plan.py: one pass of the init step (the init or restore Job) as a plan, without any server."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide.effects import Create, Plan
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.jobs import INIT_SQL_OPT_IN_LABEL
from sampledb_operator.decide.labels import INIT_SOURCE_ANNOTATION
from sampledb_operator.decide.lifecycle import init_plan as ip
from sampledb_operator.model import names
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB

CM_INIT = {"configMapKeyRef": {"name": "orders-sql", "key": "init.sql"}}
SECRET_INIT = {"secretKeyRef": {"name": "orders-sql", "key": "init.sql"}}
CM = {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "SELECT 1;"}}
INIT_JOB = names.init_job_name("orders", "uid-1")
DONE = {"conditions": [{"type": "Initialized", "status": "True", "reason": "InitSucceeded", "message": "done",
                        "lastTransitionTime": "2026-11-30T09:00:00Z"}]}
RESTORED = {"conditions": [{**DONE["conditions"][0], "reason": "Restored"}]}


def database(status: dict[str, Any] | None = None, **spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1", "resourceVersion": "7"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, **spec}, "status": status or {}})


def backup(phase: str = "Succeeded", location: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "nightly"}, "spec": {"database": "orders"},
            "status": {"phase": phase, "location": {"pvcName": "orders-backups", "path": "/b/nightly.dump"}
                       if location is None else location}}


def facts(db: SampleDB, *, ready: bool = True, **kw: Any) -> ip.InitFacts:
    return ip.InitFacts(db=db, db_ready=ready, **kw)


def test_no_init_sql_and_no_restore_is_nothing() -> None:
    db = database()
    assert ip.job_name(db) is None and ip.source_ref(db) is None
    assert ip.plan_init(facts(db)) == ip.InitPlan(Plan(), ip.InitOutcome())
    assert not ip.source_read_needed(facts(db))


def test_a_new_ready_database_with_a_usable_source_creates_the_init_job_unannounced() -> None:
    """A new database's init Job is its provisioning's routine: Initialized and DatabaseReady tell of it."""
    db = database(init=CM_INIT)
    f = facts(db, source=CM)
    assert ip.source_read_needed(f) and ip.source_ref(db) == ("ConfigMap", "orders-sql")
    planned = ip.plan_init(f)
    [create] = planned.plan.effects
    assert isinstance(create, Create) and create.obj["metadata"]["name"] == INIT_JOB == ip.job_name(db)
    assert create.obj["metadata"]["annotations"][INIT_SOURCE_ANNOTATION] == "configmap/orders-sql/init.sql"
    assert create.announce is None
    assert planned.creates == INIT_JOB and planned.outcome == ip.InitOutcome() and planned.plan.result is None


NO_INIT_SQL = {"type": "Initialized", "status": "True", "reason": "NoInitSQL", "message": "no init SQL to run",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_init_sql_added_to_a_database_that_has_run_is_announced() -> None:
    planned = ip.plan_init(facts(database({"currentVersion": "16.4", "conditions": [NO_INIT_SQL]}, init=CM_INIT),
                                 source=CM))
    [create] = planned.plan.effects
    assert isinstance(create, Create) and create.obj["metadata"]["name"] == INIT_JOB
    assert create.announce == EventSpec("Normal", "CreatedInitJob", f"created init Job {INIT_JOB}")


def test_a_new_database_ready_once_before_its_init_job_is_made_does_not_announce_it() -> None:
    """currentVersion is set by the first ready status, which may come a pass before the Job (an operator restart
    between them, the SQL's ConfigMap not cached yet): still a new database's routine, not announced."""
    waiting = {"type": "Initialized", "status": "False", "reason": "InitPending", "message": "waiting",
               "lastTransitionTime": "2026-01-01T00:00:00Z"}
    planned = ip.plan_init(facts(database({"currentVersion": "16.4", "conditions": [waiting]}, init=CM_INIT),
                                 source=CM))
    [create] = planned.plan.effects
    assert isinstance(create, Create) and create.announce is None


@pytest.mark.parametrize(("source", "reason"), [
    (None, "InitSourceMissing"),
    ({"metadata": {"name": "orders-sql"}, "data": {"other.sql": "x"}}, "InitSourceMissing"),
])
def test_a_missing_source_or_key_blocks_with_a_rate_limited_requeue(source: Any, reason: str) -> None:
    planned = ip.plan_init(facts(database(init=CM_INIT), source=source))
    assert planned.plan.effects == () and planned.creates is None
    assert [b.reason for b in planned.outcome.blockers] == [reason]
    assert planned.plan.result == planned.outcome.result == Result(requeue=True)


def test_a_secret_runs_only_when_opted_in() -> None:
    db = database(init=SECRET_INIT)
    assert ip.source_ref(db) == ("Secret", "orders-sql")
    secret = {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "U0VMRUNUIDE7"}}
    [blocker] = ip.plan_init(facts(db, source=secret)).outcome.blockers
    assert blocker.reason == "InitSecretNotOptedIn"
    opted = {**secret, "metadata": {"name": "orders-sql", "labels": {INIT_SQL_OPT_IN_LABEL: "true"}}}
    assert ip.plan_init(facts(db, source=opted)).creates == INIT_JOB


def test_the_source_is_read_only_when_the_job_could_start() -> None:
    db = database(init=CM_INIT)
    assert ip.source_read_needed(facts(db))
    assert not ip.source_read_needed(facts(db, ready=False))
    assert not ip.source_read_needed(facts(db, job={"metadata": {"name": INIT_JOB}}))
    assert not ip.source_read_needed(facts(database(DONE, init=CM_INIT)))
    assert not ip.source_read_needed(facts(database(init=CM_INIT, restore={"backupName": "nightly"})))
    # not ready: nothing, and no blocker from a source that was not read
    assert ip.plan_init(facts(db, ready=False)) == ip.InitPlan(Plan(), ip.InitOutcome())


def test_an_existing_job_is_reported_with_whether_spec_init_changed_since() -> None:
    job = {"metadata": {"name": INIT_JOB, "annotations": {INIT_SOURCE_ANNOTATION: "configmap/orders-sql/init.sql"}}}
    same = ip.plan_init(facts(database(init=CM_INIT), job=job))
    assert same == ip.InitPlan(Plan(), ip.InitOutcome(job=job, changed=False))
    changed = ip.plan_init(facts(database(init={"configMapKeyRef": {"name": "orders-sql", "key": "b.sql"}}), job=job))
    assert changed == ip.InitPlan(Plan(), ip.InitOutcome(job=job, changed=True))


def test_a_done_init_never_runs_again() -> None:
    assert ip.plan_init(facts(database(DONE, init=CM_INIT), source=CM)) == ip.InitPlan(Plan(), ip.InitOutcome())


def test_a_restore_creates_its_job_once_the_database_and_the_backup_are_ready() -> None:
    db = database(init=CM_INIT, restore={"backupName": "nightly"})
    name = ip.job_name(db)
    assert name == names.restore_job_name("orders", "uid-1/nightly")
    planned = ip.plan_init(facts(db, backup=backup()))
    [create] = planned.plan.effects
    assert isinstance(create, Create) and create.obj["metadata"]["name"] == name == planned.creates
    assert create.obj["metadata"]["labels"]["app.kubernetes.io/component"] == "restore"  # never the init SQL
    assert create.announce == EventSpec("Normal", "CreatedRestoreJob",
                                        f"restoring SampleDBBackup nightly with Job {name}")
    assert ip.plan_init(facts(db, ready=False, backup=backup())) == ip.InitPlan(Plan(), ip.InitOutcome())


@pytest.mark.parametrize(("found", "reason"), [
    (None, "RestoreSourceMissing"),
    (backup("Running"), "RestoreSourceNotReady"),
    (backup(location={}), "RestoreSourceMissing"),
])
def test_a_restore_source_not_usable_blocks_even_before_the_database_is_ready(found: Any, reason: str) -> None:
    for ready in (True, False):
        planned = ip.plan_init(facts(database(restore={"backupName": "nightly"}), ready=ready, backup=found))
        assert planned.plan.effects == () and [b.reason for b in planned.outcome.blockers] == [reason]
        assert planned.plan.result == Result(requeue=True)


def test_a_restored_database_or_its_existing_job_starts_nothing() -> None:
    job = {"metadata": {"name": "r"}}
    db = database(restore={"backupName": "nightly"})
    assert ip.plan_init(facts(db, job=job, backup=backup())) == ip.InitPlan(Plan(), ip.InitOutcome(job=job))
    restored = database(RESTORED, restore={"backupName": "nightly"})
    assert ip.plan_init(facts(restored, backup=backup())) == ip.InitPlan(Plan(), ip.InitOutcome())

