"""What the operator made for a piece of work does not stay forever (issue #11, item 13d).

On the fake cluster: a failed init Job keeps no TTL (it is the failure's record; deleting it
retries); once the run succeeded and the status says so, the Job gets ttlSecondsAfterFinished.
Pre-upgrade and pre-migration backups fall under spec.backup.retention like scheduled ones.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster, condition, running_database, sampledb

from sampledb_operator.decide.job_ttl import FINISHED_JOB_TTL_SECONDS
from sampledb_operator.decide.labels import MANAGED_BY
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.job_ttl import expire_finished_jobs


def init_jobs(cluster: FakeCluster) -> list[dict[str, object]]:
    return [j for j in cluster.of_kind("Job") if j["metadata"]["labels"]["app.kubernetes.io/component"] == "init"]


async def test_an_init_job_expires_after_its_success_is_recorded_and_a_failed_one_never() -> None:
    cluster = FakeCluster()
    cluster.put("ConfigMap", {"metadata": {"name": "orders-init"}, "data": {"init.sql": "SELECT 1;"}})
    cluster.put("SampleDB", sampledb(init={"configMapKeyRef": {"name": "orders-init", "key": "init.sql"}}))
    for _ in range(2):
        await cluster.reconcile("orders")
    for pvc in (names.data_pvc_name("orders"), names.backup_pvc_name("orders")):
        cluster.bind(pvc)
    cluster.statefulset_ready("orders")
    await cluster.reconcile("orders")
    [job] = init_jobs(cluster)
    name = str(job["metadata"]["name"])  # type: ignore[index]

    cluster.finish_job(name, succeeded=False)
    for _ in range(3):
        await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Initialized")["reason"] == "InitFailed"
    assert "ttlSecondsAfterFinished" not in cluster.get("Job", name)["spec"]  # type: ignore[index]

    await cluster.ctx.apis["Job"].delete(name, "shop")  # the documented retry
    await cluster.reconcile("orders")
    cluster.finish_job(name)
    await cluster.reconcile("orders")  # records InitSucceeded
    assert condition(cluster.get("SampleDB", "orders"), "Initialized")["reason"] == "InitSucceeded"
    await cluster.reconcile("orders")  # reads it, and lets the Job go
    assert cluster.get("Job", name)["spec"]["ttlSecondsAfterFinished"] == FINISHED_JOB_TTL_SECONDS  # type: ignore[index]


async def test_pre_work_backups_beyond_retention_are_deleted() -> None:
    cluster = FakeCluster()
    await running_database(cluster, backup={"retention": 1})
    uid = cluster.get("SampleDB", "orders")["metadata"]["uid"]  # type: ignore[index]
    for i, name in enumerate(("orders-pre-upgrade-a", "orders-pre-upgrade-b", "orders-pre-upgrade-c")):
        cluster.put("SampleDBBackup", {
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "sampledb-operator",
                                                  "sampledb.io/database": "orders", "sampledb.io/database-uid": uid,
                                                  "sampledb.io/backup-reason": "pre-upgrade"}},
            "spec": {"database": "orders", "reason": "pre-upgrade"},
            "status": {"phase": "Succeeded", "completedAt": f"2026-11-30T09:0{i}:00Z"}})
    await cluster.reconcile("orders")
    assert [b["metadata"]["name"] for b in cluster.of_kind("SampleDBBackup")] == ["orders-pre-upgrade-c"]
    assert "BackupPruned" in cluster.recorder.reasons()


def owned_job(cluster: FakeCluster, name: str, component: str, uid: str, *, finished: bool = True) -> None:
    cluster.put("Job", {"metadata": {"name": name, "ownerReferences": [{"uid": uid, "kind": "SampleDB"}],
                                     "labels": {"app.kubernetes.io/managed-by": MANAGED_BY,
                                                "app.kubernetes.io/component": component}},
                        "spec": {}, "status": {"conditions": [{"type": "Complete", "status": "True"}]}
                        if finished else {}})


async def test_expire_patches_each_recorded_finished_job_once_and_skips_one_gone_meanwhile() -> None:
    cluster = FakeCluster()
    status: dict[str, Any] = {"conditions": [{"type": "Initialized", "status": "True", "reason": "InitSucceeded"},
                                             {"type": "Migrated", "status": "True", "reason": "MigrationsApplied"}]}
    obj = cluster.put("SampleDB", {**sampledb(), "status": status})
    uid = obj["metadata"]["uid"]
    owned_job(cluster, "a-init", "init", uid)
    owned_job(cluster, "b-migrate", "migrate", uid)
    owned_job(cluster, "c-migrate-running", "migrate", uid, finished=False)
    owned_job(cluster, "d-backup", "backup", uid)
    owned_job(cluster, "e-other-db", "init", "uid-other")
    cluster.freeze_cache()
    await cluster.ctx.apis["Job"].delete("a-init", "shop")  # gone, and the cache does not know yet
    db = SampleDB.model_validate(obj)

    await expire_finished_jobs(cluster.ctx, db)
    assert cluster.written("patch", "Job") == [("patch", "Job", "a-init"), ("patch", "Job", "b-migrate")]
    assert cluster.get("Job", "b-migrate")["spec"] == {"ttlSecondsAfterFinished": FINISHED_JOB_TTL_SECONDS}  # type: ignore[index]
    assert cluster.recorder.events == []

    cluster.sync_cache()
    await expire_finished_jobs(cluster.ctx, db)  # the TTL is set: never patched again
    assert len(cluster.written("patch", "Job")) == 2
