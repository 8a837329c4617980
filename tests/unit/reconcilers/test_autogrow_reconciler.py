"""autoGrow on a full volume (fake cluster): one crash grows the data claims once, names the pod it was for, and that
pod is restarted once the claims have grown, rather than left to the kubelet's crash-loop back-off."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster, condition, sampledb

from sampledb_operator.decide.lifecycle import autogrow
from sampledb_operator.model import names

FULL = ("2026-12-05 20:54:19 UTC [41] PANIC:  could not write to file \"pg_wal/xlogtemp.41\":"
        " No space left on device")


def crash_looping(cluster: FakeCluster, uid: str) -> None:
    labels = cluster.get("StatefulSet", names.statefulset_name("orders"))["spec"]["template"]["metadata"]["labels"]
    pod: dict[str, Any] = {"metadata": {"name": names.pod_name("orders"), "labels": labels, "uid": uid},
                           "status": {"containerStatuses": [{
                               "name": "postgres", "restartCount": 3,
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                               "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": FULL}}}]}}
    cluster.put("Pod", pod)


def claim(cluster: FakeCluster) -> dict[str, Any]:
    found = cluster.get("PersistentVolumeClaim", names.data_pvc_name("orders"))
    assert found is not None
    return found


async def test_a_full_volume_grows_once_per_crash_and_its_pod_restarts_once_grown() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(storage={"size": "100Mi", "autoGrow": {
        "thresholdPercent": 80, "stepPercent": 50, "maximum": "1Gi"}}))
    for _ in range(2):
        await cluster.reconcile("orders")
    pvc = names.data_pvc_name("orders")
    cluster.bind(pvc)
    cluster.set_status("PersistentVolumeClaim", pvc, {"phase": "Bound", "capacity": {"storage": "100Mi"}})
    await cluster.reconcile("orders")
    crash_looping(cluster, "pod-1")

    await cluster.reconcile("orders")
    grown = claim(cluster)
    assert grown["spec"]["resources"]["requests"]["storage"] == "150Mi"
    assert grown["metadata"]["annotations"][autogrow.GROWN_FOR_ANNOTATION] == "pod-1"
    assert "StorageAutoGrown" in cluster.recorder.reasons()
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["reason"] == "VolumeFull"

    # the volume still grows: the pod waits, and its crash, still in its status, asks for nothing more
    await cluster.reconcile("orders")
    assert claim(cluster)["spec"]["resources"]["requests"]["storage"] == "150Mi"
    assert cluster.get("Pod", names.pod_name("orders")) is not None

    # grown: the pod is deleted to start at once on the grown volume, and the volume is not grown again
    cluster.set_status("PersistentVolumeClaim", pvc, {"phase": "Bound", "capacity": {"storage": "150Mi"}})
    await cluster.reconcile("orders")
    assert cluster.get("Pod", names.pod_name("orders")) is None
    assert "RestartedOnGrownVolume" in cluster.recorder.reasons()
    assert claim(cluster)["spec"]["resources"]["requests"]["storage"] == "150Mi"

    # the pod made again stops on the grown volume too: that is new evidence, the next step
    crash_looping(cluster, "pod-2")
    await cluster.reconcile("orders")
    again = claim(cluster)
    assert again["spec"]["resources"]["requests"]["storage"] == "225Mi"
    assert again["metadata"]["annotations"][autogrow.GROWN_FOR_ANNOTATION] == "pod-2"
    assert cluster.recorder.reasons().count("StorageAutoGrown") == 2
