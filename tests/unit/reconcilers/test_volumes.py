"""A volume being deleted or gone is never silently replaced by an empty one (issue #11, item 14).

On the fake cluster: a running database whose data (or backups) PVC is Terminating is Degraded
with a reason naming the volume and a Warning Event; once the PVC is gone the operator does not
create an empty one until the accept-empty-volume annotation says so, and that acceptance is
consumed once the volume exists again.
"""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster, condition, running_database

from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.volumes import release_acceptance

PVC = "PersistentVolumeClaim"
DATA = names.data_pvc_name("orders")
BACKUPS = names.backup_pvc_name("orders")


def _pvc_finalized(cluster: FakeCluster, name: str) -> None:
    """kubectl delete pvc while the pod uses it: the pvc-protection finalizer keeps it, Terminating."""
    cluster.patch(PVC, name, {"metadata": {"finalizers": ["kubernetes.io/pvc-protection"]}})


async def test_a_terminating_data_volume_is_degraded_and_its_loss_never_creates_an_empty_one() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    _pvc_finalized(cluster, DATA)
    await cluster.ctx.apis[PVC].delete(DATA, "shop")

    await cluster.reconcile("orders")
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "DataVolumeTerminating")
    assert DATA in degraded["message"] and vol.ACCEPT_EMPTY_ANNOTATION in degraded["message"]
    assert ("Warning", "DataVolumeTerminating") in [(t, r) for t, r, _ in cluster.recorder.events]
    assert sorted(cluster.written("apply", PVC)) == [("apply", PVC, DATA), ("apply", PVC, BACKUPS)]  # only at creation

    # The pod goes, the finalizer with it: the volume is gone. No empty one takes its place.
    await cluster.ctx.apis[PVC].patch(DATA, {"metadata": {"finalizers": None}}, namespace="shop")
    for _ in range(2):
        await cluster.reconcile("orders")
    assert cluster.get(PVC, DATA) is None
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "DataVolumeLost")
    assert cluster.get("SampleDB", "orders")["status"]["phase"] == "Degraded"  # type: ignore[index]


async def test_the_annotation_accepts_an_empty_data_volume_once() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    await cluster.ctx.apis[PVC].delete(DATA, "shop")
    await cluster.reconcile("orders")
    assert cluster.get(PVC, DATA) is None

    stored = cluster.get("SampleDB", "orders")
    assert stored is not None
    cluster.set_status("SampleDB", "orders", {**stored["status"], "appliedMigrations": [{"name": "0001_a.sql"}]})
    cluster.patch("SampleDB", "orders", {"metadata": {"annotations": {vol.ACCEPT_EMPTY_ANNOTATION: "data"}}})
    await cluster.reconcile("orders")
    assert cluster.get(PVC, DATA) is not None
    # a new, empty database: the migrations recorded for the lost one are applied again
    assert not cluster.get("SampleDB", "orders")["status"].get("appliedMigrations")  # type: ignore[index]
    assert ("Warning", "EmptyVolumeCreated") in [(t, r) for t, r, _ in cluster.recorder.events]
    annotations = cluster.get("SampleDB", "orders")["metadata"].get("annotations") or {}  # type: ignore[index]
    assert vol.ACCEPT_EMPTY_ANNOTATION not in annotations  # consumed: a later loss stops again

    await cluster.ctx.apis[PVC].delete(DATA, "shop")
    for _ in range(2):
        await cluster.reconcile("orders")
    assert cluster.get(PVC, DATA) is None
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["reason"] == "DataVolumeLost"


async def test_a_database_that_never_ran_gets_its_volume_back_without_asking() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", {"metadata": {"name": "orders"}, "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
    await cluster.reconcile("orders")
    await cluster.ctx.apis[PVC].delete(DATA, "shop")
    await cluster.reconcile("orders")
    assert cluster.get(PVC, DATA) is not None


async def test_a_lost_backups_volume_that_held_backups_is_not_recreated_empty() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "orders-manual"}, "spec": {"database": "orders"},
                                   "status": {"phase": "Succeeded", "location": {"pvcName": BACKUPS,
                                                                                 "path": "/b/orders-manual.dump"}}})
    _pvc_finalized(cluster, BACKUPS)
    await cluster.ctx.apis[PVC].delete(BACKUPS, "shop")
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["reason"] == "BackupVolumeTerminating"
    await cluster.ctx.apis[PVC].patch(BACKUPS, {"metadata": {"finalizers": None}}, namespace="shop")
    await cluster.reconcile("orders")
    assert cluster.get(PVC, BACKUPS) is None
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert degraded["reason"] == "BackupVolumeLost" and BACKUPS in degraded["message"]
    cluster.patch("SampleDB", "orders", {"metadata": {"annotations": {vol.ACCEPT_EMPTY_ANNOTATION: "backups"}}})
    await cluster.reconcile("orders")
    assert cluster.get(PVC, BACKUPS) is not None


async def test_a_hand_expanded_data_volume_is_never_applied_smaller() -> None:
    """Issue #11, item 13b: re-applying the PVC for another field must not ask for the spec's smaller size
    (the API server refuses it; before, that became a false StorageExpansionFailed)."""
    cluster = FakeCluster()
    await running_database(cluster)
    pvc = cluster.get(PVC, DATA)
    assert pvc is not None
    cluster.patch(PVC, DATA, {"spec": {"resources": {"requests": {"storage": "5Gi"}}},
                              "metadata": {"annotations": None}})  # expanded by hand, annotation lost
    await cluster.reconcile("orders")
    pvc = cluster.get(PVC, DATA)
    assert pvc is not None and pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert pvc["metadata"]["annotations"] == {"sampledb.io/data-dir": "pgdata"}
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["status"] == "False"


async def test_growing_the_data_volume_leaves_a_backups_volume_without_its_own_size_alone() -> None:
    """Issue #11, item 10: the backups volume followed the data size onto a class that cannot expand, and
    the Degraded message spoke of "the data volume"."""
    cluster = FakeCluster()
    await running_database(cluster, storage={"size": "1Gi", "storageClassName": "fast"})
    cluster.put("StorageClass", {"metadata": {"name": "fast"}, "allowVolumeExpansion": True})
    cluster.patch("SampleDB", "orders", {"spec": {"storage": {"size": "2Gi"}}})
    await cluster.reconcile("orders")
    assert cluster.get(PVC, DATA)["spec"]["resources"]["requests"]["storage"] == "2Gi"  # type: ignore[index]
    assert cluster.get(PVC, BACKUPS)["spec"]["resources"]["requests"]["storage"] == "1Gi"  # type: ignore[index]
    assert condition(cluster.get("SampleDB", "orders"), "Degraded")["status"] == "False"

    # An explicit backups size is grown, and a class that cannot is reported for that volume.
    cluster.patch("SampleDB", "orders", {"spec": {"backup": {"storage": {"size": "3Gi"}}}})
    await cluster.reconcile("orders")
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "StorageExpansionUnsupported")
    assert degraded["message"] == f"the backups volume {BACKUPS} has no StorageClass; it cannot be expanded"


async def test_release_acceptance_drops_only_the_live_roles_and_only_on_the_written_version() -> None:
    cluster = FakeCluster()
    obj = cluster.put("SampleDB", {"metadata": {"name": "orders", "annotations": {
        vol.ACCEPT_EMPTY_ANNOTATION: "data,backups"}}, "spec": {"version": "16.4", "storage": {"size": "1Gi"}}})
    db = SampleDB.model_validate(obj)
    version = obj["metadata"]["resourceVersion"]

    await release_acceptance(cluster.ctx, db, frozenset({vol.DATA}), resource_version=None)  # gone or stale
    await release_acceptance(cluster.ctx, db, frozenset(), resource_version=version)  # nothing exists again
    assert cluster.written("patch", "SampleDB") == []

    cluster.patch("SampleDB", "orders", {"metadata": {"labels": {"x": "y"}}})  # a newer object
    await release_acceptance(cluster.ctx, db, frozenset({vol.DATA}), resource_version=version)  # refused, no raise
    assert cluster.written("patch", "SampleDB") == [("patch", "SampleDB", "orders")]
    assert cluster.get("SampleDB", "orders")["metadata"]["annotations"] == {  # type: ignore[index]
        vol.ACCEPT_EMPTY_ANNOTATION: "data,backups"}

    newer = cluster.get("SampleDB", "orders")["metadata"]["resourceVersion"]  # type: ignore[index]
    await release_acceptance(cluster.ctx, db, frozenset({vol.DATA}), resource_version=newer)
    assert cluster.get("SampleDB", "orders")["metadata"]["annotations"] == {  # type: ignore[index]
        vol.ACCEPT_EMPTY_ANNOTATION: "backups"}
    assert cluster.recorder.events == []

    await cluster.ctx.apis["SampleDB"].delete("orders", "shop")
    await release_acceptance(cluster.ctx, db, frozenset({vol.BACKUPS}), resource_version=newer)  # gone: no raise
