"""tests/support/fake_cluster.py keeps the API server's behaviour the reconcilers depend on."""

from __future__ import annotations

import pytest
from tests.support.fake_cluster import NS, FakeCluster

from sampledb_operator.kube.errors import Conflict, Invalid
from sampledb_operator.model.refs import ObjectRef


async def test_a_patch_carrying_an_old_resource_version_is_refused() -> None:
    cluster = FakeCluster()
    first = cluster.put("SampleDB", {"metadata": {"name": "db"}, "spec": {"version": "16.4"}})
    cluster.patch("SampleDB", "db", {"spec": {"version": "16.6"}})
    api = cluster.ctx.apis["SampleDB"]
    with pytest.raises(Conflict):
        await api.patch("db", {"metadata": {"resourceVersion": first["metadata"]["resourceVersion"]},
                               "status": {"phase": "Running"}}, namespace=NS, subresource="status")
    current = cluster.get("SampleDB", "db")
    assert current is not None and current["metadata"]["generation"] == 2
    await api.patch("db", {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                           "status": {"phase": "Running"}}, namespace=NS, subresource="status")
    assert cluster.get("SampleDB", "db")["status"] == {"phase": "Running"}  # type: ignore[index]


async def test_a_frozen_cache_keeps_the_old_object_until_synced() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", {"metadata": {"name": "db"}, "spec": {"version": "16.4"}})
    cluster.freeze_cache()
    cluster.patch("SampleDB", "db", {"spec": {"version": "16.6"}})
    assert cluster.ctx.caches.sampledbs.get(ObjectRef(NS, "db"))["spec"]["version"] == "16.4"  # type: ignore[index]
    cluster.sync_cache()
    assert cluster.ctx.caches.sampledbs.get(ObjectRef(NS, "db"))["spec"]["version"] == "16.6"  # type: ignore[index]


async def test_deleting_an_object_with_finalizers_marks_it_and_releasing_them_deletes_it() -> None:
    cluster = FakeCluster()
    cluster.put("PersistentVolumeClaim", {"metadata": {"name": "v", "finalizers": ["kubernetes.io/pvc-protection"],
                                                       "labels": {"app.kubernetes.io/managed-by": "sampledb-operator"}},
                                          "spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    api = cluster.ctx.apis["PersistentVolumeClaim"]
    await api.delete("v", NS)
    assert cluster.get("PersistentVolumeClaim", "v")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    with pytest.raises(Invalid):  # a volume never shrinks
        await api.apply({"metadata": {"name": "v", "namespace": NS},
                         "spec": {"resources": {"requests": {"storage": "1Gi"}}}})
    await api.patch("v", {"metadata": {"finalizers": None}}, namespace=NS)
    assert cluster.get("PersistentVolumeClaim", "v") is None
    assert cluster.ctx.caches.pvcs.get(ObjectRef(NS, "v")) is None
