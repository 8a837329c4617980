"""Degraded explains a database that does not progress, and clears when the cause goes (fake cluster)."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster, condition, sampledb

from sampledb_operator.model import names
from sampledb_operator.reconcilers import storage_classes


def pending(cluster: FakeCluster, name: str) -> None:
    cluster.patch("PersistentVolumeClaim", name, {"status": {"phase": "Pending"}})


async def test_a_missing_storage_class_is_said_at_once_and_cleared_once_the_class_exists() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(storage={"size": "1Gi", "storageClassName": "nosuch"}))
    await cluster.reconcile("orders")
    pending(cluster, names.data_pvc_name("orders"))
    await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    degraded = condition(db, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "StorageClassNotFound"), degraded
    assert "'nosuch'" in degraded["message"]
    assert db["status"]["phase"] == "Degraded"

    cluster.put("StorageClass", {"metadata": {"name": "nosuch"}, "provisioner": "example.com/disk"})
    cluster.clock.advance(storage_classes.MISSING_TTL_SECONDS + 1)
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["status"] == "False"


async def test_pod_problems_reach_degraded_with_kubernetes_words_and_go_with_their_cause() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb())
    for _ in range(2):
        await cluster.reconcile("orders")
    cluster.bind(names.data_pvc_name("orders"))
    await cluster.reconcile("orders")
    labels = cluster.get("StatefulSet", names.statefulset_name("orders"))["spec"]["template"]["metadata"]["labels"]
    pod: dict[str, Any] = {"metadata": {"name": names.pod_name("orders"), "labels": labels},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": "0/1 nodes are available: 1 Insufficient cpu."}]}}
    cluster.put("Pod", pod)
    await cluster.reconcile("orders")
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "Unschedulable")
    assert "Insufficient cpu" in degraded["message"]
    cluster.patch("Pod", names.pod_name("orders"), {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True"}]}})
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["status"] == "False"


async def test_a_jobs_pod_that_cannot_start_is_named_with_its_job() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb())
    await cluster.reconcile("orders")
    uid = cluster.get("SampleDB", "orders")["metadata"]["uid"]
    started = cluster.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.put("Job", {"metadata": {"name": "orders-reload-1", "labels": {"app.kubernetes.io/managed-by":
                                                                             "sampledb-operator"},
                                     "ownerReferences": [{"kind": "SampleDB", "name": "orders", "uid": uid,
                                                          "controller": True}]},
                        "status": {"active": 1, "startTime": started}})
    cluster.put("Pod", {"metadata": {"name": "orders-reload-1-abcde", "labels": {"job-name": "orders-reload-1"}},
                        "status": {"containerStatuses": [{"name": "reload", "image": "r/pg:16",
                                                          "state": {"waiting": {"reason": "ImagePullBackOff",
                                                                                "message": "no such image"}}}]}})
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["status"] == "False"  # within the grace
    cluster.clock.advance(150)
    await cluster.reconcile("orders")
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ImagePullFailed"), degraded
    assert degraded["message"].startswith("Job orders-reload-1: pod orders-reload-1-abcde")
