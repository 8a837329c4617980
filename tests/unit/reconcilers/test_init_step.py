"""reconcilers/init.py and reconcilers/children.py's Secret: each step returns what it found (the Job,
whether spec.init changed, the blockers, the problems) instead of appending to a list it was given."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster, sampledb

from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers import children
from sampledb_operator.reconcilers.init import InitOutcome, reconcile_init

CM_INIT = {"configMapKeyRef": {"name": "orders-sql", "key": "init.sql"}}


def stored(cluster: FakeCluster, **spec: Any) -> SampleDB:
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb(**spec)))


def initialized(db: SampleDB, reason: str) -> SampleDB:
    cond = Condition(type="Initialized", status="True", reason=reason, message="done")
    return db.model_copy(update={"status": db.status.model_copy(update={"conditions": [cond]})})


def init_jobs(cluster: FakeCluster) -> list[str]:
    return [n for verb, kind, n in cluster.written("create", "Job")]


async def test_no_init_sql_is_no_job_and_no_blocker() -> None:
    cluster = FakeCluster()
    assert await reconcile_init(cluster.ctx, stored(cluster), db_ready=True) == InitOutcome()
    assert init_jobs(cluster) == []


async def test_a_missing_init_source_is_a_blocker_and_no_job() -> None:
    cluster = FakeCluster()
    outcome = await reconcile_init(cluster.ctx, stored(cluster, init=CM_INIT), db_ready=True)
    assert outcome.job is None and not outcome.changed
    assert [b.reason for b in outcome.blockers] == ["InitSourceMissing"]
    assert init_jobs(cluster) == []


async def test_the_init_job_waits_for_a_ready_database_then_is_created_once() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "SELECT 1;"}})
    db = stored(cluster, init=CM_INIT)
    assert await reconcile_init(cluster.ctx, db, db_ready=False) == InitOutcome()
    assert init_jobs(cluster) == []
    created = await reconcile_init(cluster.ctx, db, db_ready=True)  # the status says it runs in this pass already
    assert created.job is not None and created.job["metadata"]["name"] == init_jobs(cluster)[0]
    assert len(init_jobs(cluster)) == 1
    assert "CreatedInitJob" in cluster.recorder.reasons()
    cluster.sync_cache()
    outcome = await reconcile_init(cluster.ctx, db, db_ready=True)
    assert outcome.job is not None and outcome.job["metadata"]["name"] == init_jobs(cluster)[0]
    assert outcome.blockers == () and not outcome.changed
    assert len(init_jobs(cluster)) == 1


async def test_a_changed_init_source_is_reported_not_rerun() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "SELECT 1;", "b.sql": "x"}})
    db = stored(cluster, init=CM_INIT)
    await reconcile_init(cluster.ctx, db, db_ready=True)
    cluster.sync_cache()
    changed = stored(cluster, init={"configMapKeyRef": {"name": "orders-sql", "key": "b.sql"}})
    outcome = await reconcile_init(cluster.ctx, changed, db_ready=True)
    assert outcome.job is not None and outcome.changed
    assert len(init_jobs(cluster)) == 1


async def test_an_init_that_is_done_never_runs_again_after_its_job_is_gone() -> None:
    cluster = FakeCluster()
    db = initialized(stored(cluster, init=CM_INIT), "InitSucceeded")  # and the source is gone as well
    assert await reconcile_init(cluster.ctx, db, db_ready=True) == InitOutcome()
    assert init_jobs(cluster) == []


async def test_a_restore_from_a_missing_backup_is_a_blocker() -> None:
    cluster = FakeCluster()
    outcome = await reconcile_init(cluster.ctx, stored(cluster, restore={"backupName": "nightly"}), db_ready=True)
    assert outcome.job is None
    assert [b.reason for b in outcome.blockers] == ["RestoreSourceMissing"]
    assert init_jobs(cluster) == []


async def test_a_restored_database_starts_no_restore_job() -> None:
    cluster = FakeCluster()
    db = initialized(stored(cluster, restore={"backupName": "nightly"}), "Restored")
    assert await reconcile_init(cluster.ctx, db, db_ready=True) == InitOutcome()
    assert init_jobs(cluster) == []


async def test_the_secret_is_created_once_and_its_loss_after_the_data_volume_is_a_problem() -> None:
    cluster = FakeCluster()
    db = stored(cluster)
    made = await children.ensure_secret(cluster.ctx, db, {})
    assert made == children.SecretOutcome(created=f"Secret {names.secret_name('orders')}")
    assert cluster.written("create", "Secret") == [("create", "Secret", names.secret_name("orders"))]
    secret = cluster.get("Secret", names.secret_name("orders"))
    again = await children.ensure_secret(cluster.ctx, db, {})  # a pass on a cache without it: AlreadyExists
    assert again == children.SecretOutcome()
    assert cluster.get("Secret", names.secret_name("orders")) == secret  # not overwritten
    data = ("PersistentVolumeClaim", names.data_pvc_name("orders"))
    [problem] = (await children.ensure_secret(cluster.ctx, db, {data: {}})).problems
    assert problem.reason == "CredentialsMissing" and names.secret_name("orders") in problem.message
    assert len(cluster.written("create", "Secret")) == 2


def test_the_data_children_are_named_and_a_deletion_keeps_the_backups_volume() -> None:
    db = stored(FakeCluster())
    assert children.data_children(db) == [("StatefulSet", names.statefulset_name("orders")),
                                           ("PersistentVolumeClaim", names.data_pvc_name("orders"))]
    backups = ("PersistentVolumeClaim", names.backup_pvc_name("orders"))
    assert backups in children.unowned_children(db) and backups not in children.deletable_children(db)
    assert set(children.deletable_children(db)) == set(children.unowned_children(db)) - {backups}
