"""reconcilers/init.py and reconcilers/children.py's Secret: each step returns what it found (the Job,
whether spec.init changed, the blockers, the problems) instead of appending to a list it was given.

On the fake cluster, through the step: which Job is created (once; announced once when the database has
run before), and that the init SQL's source is read live only when the Job could start (decide/lifecycle/init_plan.py
plans; these check the I/O).
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.fake_cluster import FakeCluster, sampledb

from sampledb_operator.kube.errors import Forbidden
from sampledb_operator.model import names
from sampledb_operator.model.conditions import Condition
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers import children
from sampledb_operator.reconcilers.init import InitOutcome, reconcile_init

CM_INIT = {"configMapKeyRef": {"name": "orders-sql", "key": "init.sql"}}


def stored(cluster: FakeCluster, **spec: Any) -> SampleDB:
    return SampleDB.model_validate(cluster.put("SampleDB", sampledb(**spec)))


def initialized(db: SampleDB, reason: str) -> SampleDB:
    cond = Condition(type="Initialized", status="True", reason=reason, message="done")
    return db.model_copy(update={"status": db.status.model_copy(update={"conditions": [cond]})})


def ran(db: SampleDB) -> SampleDB:
    """`db` as a database that has run before without init SQL (status.currentVersion set, Initialized
    True/NoInitSQL)."""
    no_sql = Condition.model_validate({"type": "Initialized", "status": "True", "reason": "NoInitSQL",
                                       "message": "no init SQL to run", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    return db.model_copy(update={"status": db.status.model_copy(update={"current_version": db.spec.version,
                                                                        "conditions": [no_sql]})})


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
    assert created.job == cluster.get("Job", init_jobs(cluster)[0])  # the stored Job, its resourceVersion too
    assert len(init_jobs(cluster)) == 1
    assert cluster.recorder.events == []  # a new database's init: Initialized and DatabaseReady tell of it
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


async def test_the_init_sql_source_is_read_live_only_when_the_job_could_start() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "SELECT 1;"}})
    cluster.fail("ConfigMap", "get", Forbidden(403, "Forbidden", "no get"))  # any live read would raise
    db = stored(cluster, init=CM_INIT)
    assert await reconcile_init(cluster.ctx, db, db_ready=False) == InitOutcome()
    assert await reconcile_init(cluster.ctx, initialized(db, "InitSucceeded"), db_ready=True) == InitOutcome()
    with pytest.raises(Forbidden):  # ready, no Job, not done: now the source is read
        await reconcile_init(cluster.ctx, db, db_ready=True)
    cluster.fail("ConfigMap", "get", None)
    await reconcile_init(cluster.ctx, db, db_ready=True)
    cluster.fail("ConfigMap", "get", Forbidden(403, "Forbidden", "no get"))
    outcome = await reconcile_init(cluster.ctx, db, db_ready=True)  # the Job exists: no read
    assert outcome.job is not None and len(init_jobs(cluster)) == 1


async def test_a_pass_on_a_stale_cache_neither_creates_nor_announces_a_second_job() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "SELECT 1;"}})
    db = ran(stored(cluster, init=CM_INIT))  # init SQL added to a database that has run: its Job is announced
    cluster.freeze_cache()  # the Job's watch event is late
    await reconcile_init(cluster.ctx, db, db_ready=True)
    again = await reconcile_init(cluster.ctx, db, db_ready=True)  # AlreadyExists: an earlier pass's Job
    assert again == InitOutcome()
    assert len(init_jobs(cluster)) == 2 and len(cluster.of_kind("Job")) == 1  # two requests, one Job
    assert cluster.recorder.reasons() == ["CreatedInitJob"]


async def test_a_restore_job_is_created_once_the_database_is_ready_and_announced() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDBBackup", {"metadata": {"name": "nightly"}, "spec": {"database": "orders"},
                                   "status": {"phase": "Succeeded", "location": {
                                       "pvcName": names.backup_pvc_name("orders"), "path": "/b/nightly.dump"}}})
    db = stored(cluster, restore={"backupName": "nightly"}, init=CM_INIT)
    assert await reconcile_init(cluster.ctx, db, db_ready=False) == InitOutcome()
    outcome = await reconcile_init(cluster.ctx, db, db_ready=True)
    name = names.restore_job_name("orders", f"{db.metadata.uid}/nightly")
    assert init_jobs(cluster) == [name] and outcome.job == cluster.get("Job", name)
    assert outcome.job is not None and outcome.job["metadata"]["labels"]["app.kubernetes.io/component"] == "restore"
    assert cluster.recorder.events == [("Normal", "CreatedRestoreJob",
                                        f"restoring SampleDBBackup nightly with Job {name}")]
    again = await reconcile_init(cluster.ctx, db, db_ready=True)
    assert again == InitOutcome(job=cluster.get("Job", name)) and len(init_jobs(cluster)) == 1


def test_the_data_children_are_named_and_a_deletion_keeps_the_backups_volume() -> None:
    db = stored(FakeCluster())
    assert children.data_children(db) == [("StatefulSet", names.statefulset_name("orders")),
                                           ("PersistentVolumeClaim", names.data_pvc_name("orders"))]
    backups = ("PersistentVolumeClaim", names.backup_pvc_name("orders"))
    assert backups in children.unowned_children(db) and backups not in children.deletable_children(db)
    assert set(children.deletable_children(db)) == set(children.unowned_children(db)) - {backups}


async def test_a_restore_reads_a_backup_its_cache_lacks_live_and_only_until_its_job_is_made() -> None:
    """A sharded replica with filtered caches caches only its shards' backups: the backup to restore is
    another database's, so it may be missing from the cache while it exists."""
    cluster = FakeCluster()
    db = stored(cluster, restore={"backupName": "nightly"})
    cluster.freeze_cache()  # from here on, the cache does not see what is written
    cluster.put("SampleDBBackup", {"metadata": {"name": "nightly"}, "spec": {"database": "inventory"},
                                   "status": {"phase": "Succeeded", "location": {
                                       "pvcName": names.backup_pvc_name("inventory"), "path": "/b/nightly.dump"}}})
    assert cluster.ctx.cached("SampleDBBackup", db.metadata.namespace, "nightly") is None
    outcome = await reconcile_init(cluster.ctx, db, db_ready=True)
    name = names.restore_job_name("orders", f"{db.metadata.uid}/nightly")
    assert outcome.blockers == () and init_jobs(cluster) == [name]
    cluster.sync_cache()  # the Job's event arrives; the backup stays out of the cache
    cluster.stores["SampleDBBackup"].delete(ObjectRef(db.metadata.namespace or "", "nightly"))
    cluster.fail("SampleDBBackup", "get", Forbidden(403, "Forbidden", "no get"))  # any live read would raise
    again = await reconcile_init(cluster.ctx, db, db_ready=True)  # the Job is made: the backup is not read
    assert again.job is not None and init_jobs(cluster) == [name]
    assert await reconcile_init(cluster.ctx, initialized(db, "Restored"), db_ready=True) == InitOutcome(
        job=again.job)
