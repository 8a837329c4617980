"""reconcilers/verification.py in the SampleDB pass, on the in-memory cluster: verify Jobs one at a time,
results on the SampleDBBackup, the metric, events and BackupHealthy."""

from __future__ import annotations

import json

from tests.support.fake_cluster import NS, FakeCluster, condition, running_database

from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.verification import VERIFY_ANNOTATION
from sampledb_operator.observability.metrics import REGISTRY


def succeeded_backup(cluster: FakeCluster, name: str, *, completed: str = "2026-11-30T09:00:00Z",
                     annotations: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": {"sampledb.io/database": "orders"}}
    if annotations:
        meta["annotations"] = annotations
    cluster.put("SampleDBBackup", {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "metadata": meta,
                                   "spec": {"database": "orders", "reason": "manual"}})
    return cluster.set_status("SampleDBBackup", name, {
        "phase": "Succeeded", "completedAt": completed,
        "location": {"pvcName": "orders-backups", "path": f"/sampledb/backups/{name}.dump"}})


def verify_jobs(cluster: FakeCluster) -> list[Obj]:
    return [j for j in cluster.of_kind("Job")
            if j["metadata"]["labels"].get("app.kubernetes.io/component") == "verify"]


def job_for(cluster: FakeCluster, backup: str, request: str = "") -> str:
    obj = cluster.get("SampleDBBackup", backup)
    assert obj is not None
    return names.verify_job_name("orders", obj["metadata"]["uid"], request)


def report(cluster: FakeCluster, job: str, result: Obj, *, succeeded: bool) -> None:
    """The kubelet's part: the pod's termination message; then the Job controller's verdict."""
    cluster.put("Pod", {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{job}-pod", "labels": {"job-name": job},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"name": "verify", "state": {"terminated": {
                            "exitCode": result.get("code", 0), "message": json.dumps(result)}}}]}})
    cluster.finish_job(job, succeeded=succeeded)


def metric(result: str) -> float:
    value = REGISTRY.get_sample_value("sampledb_backup_verifications_total",
                                      {"namespace": NS, "database": "orders", "result": result})
    return value or 0.0


async def test_spec_verify_verifies_each_successful_backup_one_at_a_time() -> None:
    cluster = FakeCluster()
    await running_database(cluster, backup={"verify": True})
    succeeded_backup(cluster, "orders-manual-a", completed="2026-11-30T08:00:00Z")
    succeeded_backup(cluster, "orders-manual-b", completed="2026-11-30T08:30:00Z")
    before = metric("succeeded")

    await cluster.reconcile("orders")

    jobs = verify_jobs(cluster)
    assert [j["metadata"]["name"] for j in jobs] == [job_for(cluster, "orders-manual-b")]  # the newest first
    assert jobs[0]["metadata"]["ownerReferences"][0]["name"] == "orders-manual-b"
    assert condition(cluster.get("SampleDBBackup", "orders-manual-b"), "Verified")["reason"] == "Verifying"
    assert "VerificationStarted" in cluster.recorder.reasons()
    assert REGISTRY.get_sample_value("sampledb_backup_verifications_total",
                                     {"namespace": NS, "database": "orders", "result": "failed"}) is not None

    await cluster.reconcile("orders")
    assert len(verify_jobs(cluster)) == 1  # never two at once

    report(cluster, job_for(cluster, "orders-manual-b"),
           {"code": 0, "ok": True, "compared": True, "tables": 3, "rows": 110009, "message": "verified"},
           succeeded=True)
    await cluster.reconcile("orders")

    done = cluster.get("SampleDBBackup", "orders-manual-b")
    assert done is not None
    assert done["status"]["verified"] is True
    assert done["status"]["verifiedAt"] == "2026-11-30T09:00:00Z"
    assert done["status"]["verification"] == {"jobName": job_for(cluster, "orders-manual-b"), "dataCompared": True,
                                              "tables": 3, "rows": 110009}
    assert condition(done, "Verified")["status"] == "True"
    assert metric("succeeded") == before + 1
    assert "BackupVerified" in cluster.recorder.reasons()
    assert sorted(j["metadata"]["name"] for j in verify_jobs(cluster)) == sorted(
        [job_for(cluster, "orders-manual-b"), job_for(cluster, "orders-manual-a")])

    report(cluster, job_for(cluster, "orders-manual-a"), {"code": 0, "compared": True}, succeeded=True)
    await cluster.reconcile("orders")
    await cluster.reconcile("orders")

    assert len(verify_jobs(cluster)) == 2  # each backup verified once: nothing more to do
    assert metric("succeeded") == before + 2
    assert condition(cluster.get("SampleDB", "orders"), "BackupHealthy").get("reason") != "VerificationFailed"


async def test_without_spec_verify_nothing_is_verified() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    succeeded_backup(cluster, "orders-manual-a")

    await cluster.reconcile("orders")

    assert verify_jobs(cluster) == []


async def test_failed_verification_makes_backups_unhealthy_until_a_new_request_passes() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    succeeded_backup(cluster, "orders-manual-a", annotations={VERIFY_ANNOTATION: "first"})
    await cluster.reconcile("orders")
    job = job_for(cluster, "orders-manual-a", "first")
    assert [j["metadata"]["name"] for j in verify_jobs(cluster)] == [job]
    failed_before = metric("failed")

    report(cluster, job, {"code": 4, "ok": False, "check": "integrity",
                          "message": "checksum mismatch for orders-manual-a.dump: metadata says 1, file is 2"},
           succeeded=False)
    await cluster.reconcile("orders")

    backup = cluster.get("SampleDBBackup", "orders-manual-a")
    assert backup is not None and backup["status"]["verified"] is False
    assert backup["status"]["verification"]["request"] == "first"
    verified = condition(backup, "Verified")
    assert (verified["status"], verified["reason"]) == ("False", "ChecksumMismatch")
    assert "checksum mismatch" in verified["message"]
    health = condition(cluster.get("SampleDB", "orders"), "BackupHealthy")
    assert (health["status"], health["reason"]) == ("False", "VerificationFailed")
    assert "orders-manual-a" in health["message"] and "ChecksumMismatch" in health["message"]
    assert metric("failed") == failed_before + 1
    warnings = [(r, m) for t, r, m in cluster.recorder.events if t == "Warning"]
    assert any(r == "BackupVerificationFailed" for r, _ in warnings)
    assert any(r == "VerificationFailed" and "orders-manual-a" in m for r, m in warnings)  # on the SampleDB

    await cluster.reconcile("orders")
    assert len(verify_jobs(cluster)) == 1  # an answered request is not repeated

    cluster.patch("SampleDBBackup", "orders-manual-a", {"metadata": {"annotations": {VERIFY_ANNOTATION: "second"}}})
    await cluster.reconcile("orders")
    second = job_for(cluster, "orders-manual-a", "second")
    assert second in [j["metadata"]["name"] for j in verify_jobs(cluster)]
    report(cluster, second, {"code": 0, "compared": True}, succeeded=True)
    await cluster.reconcile("orders")

    health = condition(cluster.get("SampleDB", "orders"), "BackupHealthy")
    assert health["reason"] == "BackupSucceeded"
    assert "BackupRecovered" in cluster.recorder.reasons()


async def test_a_simulated_failed_job_without_result_is_a_failed_verification() -> None:
    cluster = FakeCluster()
    await running_database(cluster, backup={"verify": True})
    succeeded_backup(cluster, "orders-manual-a")
    await cluster.reconcile("orders")

    cluster.finish_job(job_for(cluster, "orders-manual-a"), succeeded=False)
    await cluster.reconcile("orders")

    verified = condition(cluster.get("SampleDBBackup", "orders-manual-a"), "Verified")
    assert (verified["status"], verified["reason"]) == ("False", "VerificationFailed")
    assert "BackoffLimitExceeded" in verified["message"]


async def test_a_conflicting_status_write_is_retried_and_counted_once() -> None:
    cluster = FakeCluster()
    await running_database(cluster, backup={"verify": True})
    succeeded_backup(cluster, "orders-manual-a")
    await cluster.reconcile("orders")
    report(cluster, job_for(cluster, "orders-manual-a"), {"code": 0, "compared": True}, succeeded=True)
    before = metric("succeeded")
    cluster.fail("SampleDBBackup", "patch", Conflict(409, "Conflict", "the object has been modified"))

    result = await cluster.reconcile("orders")

    assert result is not None and result.requeue
    assert metric("succeeded") == before
    cluster.fail("SampleDBBackup", "patch", None)
    await cluster.reconcile("orders")
    assert metric("succeeded") == before + 1
    backup = cluster.get("SampleDBBackup", "orders-manual-a")
    assert backup is not None and backup["status"]["verified"] is True


async def test_a_stale_cache_starts_no_second_job() -> None:
    cluster = FakeCluster()
    await running_database(cluster, backup={"verify": True})
    succeeded_backup(cluster, "orders-manual-a", completed="2026-11-30T08:00:00Z")
    succeeded_backup(cluster, "orders-manual-b", completed="2026-11-30T08:30:00Z")
    cluster.freeze_cache()

    await cluster.reconcile("orders")
    await cluster.reconcile("orders")  # the Job's watch event has not arrived

    assert len(verify_jobs(cluster)) == 1


async def test_a_backup_without_location_fails_an_explicit_request() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    succeeded_backup(cluster, "orders-manual-a", annotations={VERIFY_ANNOTATION: "now"})
    obj = cluster.get("SampleDBBackup", "orders-manual-a")
    assert obj is not None
    cluster.set_status("SampleDBBackup", "orders-manual-a", {k: v for k, v in obj["status"].items() if k != "location"})

    await cluster.reconcile("orders")

    assert verify_jobs(cluster) == []
    assert condition(cluster.get("SampleDBBackup", "orders-manual-a"), "Verified")["reason"] == "NotVerifiable"
