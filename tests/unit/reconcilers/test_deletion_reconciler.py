"""Deleting a SampleDB on the fake cluster (reconcilers/deletion.py applying decide/lifecycle/deletion.py's plan).

The user's delete only sets the deletionTimestamp (the operator's finalizer holds the object); each
cluster.reconcile is one pass of the deletion step. The backup reconciler does not run here: a test
writes the snapshot backup's status as it would.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import NS, FakeCluster, condition, running_database, sampledb

from sampledb_operator.decide.children.desired_config import SCRIPTS_CONFIGMAP
from sampledb_operator.decide.labels import DATABASE_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from sampledb_operator.decide.lifecycle import lifecycle
from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model import names
from sampledb_operator.model.result import Result
from sampledb_operator.reconcilers.effects import LOOK_AGAIN_AFTER_CONFLICT

DB = "orders"
UID = "uid-sampledb-orders"  # the fake cluster's uid of the SampleDB
PVC, STS, BACKUP = "PersistentVolumeClaim", "StatefulSet", "SampleDBBackup"


async def delete_db(cluster: FakeCluster) -> None:
    """kubectl delete sampledb: the finalizer keeps it, with a deletionTimestamp."""
    await cluster.ctx.apis["SampleDB"].delete(DB, NS)
    obj = cluster.get("SampleDB", DB)
    assert obj is not None and obj["metadata"]["deletionTimestamp"] and obj["metadata"]["uid"] == UID


def snapshot_name(cluster: FakeCluster, attempt: int) -> str:
    return lifecycle.snapshot_backup_name(DB, UID, attempt)


def finish_snapshot(cluster: FakeCluster, attempt: int, phase: str, message: str = "") -> None:
    stamp = cluster.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.set_status(BACKUP, snapshot_name(cluster, attempt), {"phase": phase, "completedAt": stamp,
                                                                  "message": message})


def children(cluster: FakeCluster) -> set[tuple[str, str]]:
    return {(kind, str(o["metadata"]["name"])) for kind in (STS, PVC, "Service", "ConfigMap", "Secret")
            for o in cluster.of_kind(kind)}


def child_deletes(cluster: FakeCluster) -> list[tuple[str, str]]:
    """The operator's deletes (the user's delete of the SampleDB left out)."""
    return [(kind, name) for _verb, kind, name in cluster.written("delete") if kind != "SampleDB"]


def events(cluster: FakeCluster, reason: str) -> list[tuple[str, str, str]]:
    return [e for e in cluster.recorder.events if e[1] == reason]


GONE = {(PVC, names.backup_pvc_name(DB))}  # what every deletion leaves: the backups volume (it holds the backups)


def standby(cluster: FakeCluster) -> tuple[str, str]:
    """Instance 1's StatefulSet and data volume, as the replication step labels them."""
    labels: dict[str, Any] = {MANAGED_BY_LABEL: MANAGED_BY, DATABASE_LABEL: DB, names.INSTANCE_LABEL: "1"}
    sts, pvc = names.instance_statefulset_name(DB, 1), names.instance_data_pvc_name(DB, 1)
    cluster.put(STS, {"metadata": {"name": sts, "labels": labels}, "spec": {}})
    cluster.put(PVC, {"metadata": {"name": pvc, "labels": labels}, "spec": {}})
    return sts, pvc


async def test_snapshot_policy_takes_one_snapshot_and_deletes_only_after_it_succeeded() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    before = children(cluster)
    status_writes = len(cluster.written("patch/status", "SampleDB"))
    await delete_db(cluster)
    for _ in range(3):
        assert await cluster.reconcile(DB) is None
    assert [b["metadata"]["name"] for b in cluster.of_kind(BACKUP)] == [snapshot_name(cluster, 1)]
    assert len(cluster.written("create", BACKUP)) == 1  # the later passes wait, they do not create again
    started = events(cluster, "SnapshotStarted")
    assert [m for _t, _r, m in started] == [f"taking the final snapshot (attempt 1): {snapshot_name(cluster, 1)}"]
    obj = cluster.get("SampleDB", DB)
    assert obj is not None and obj["status"]["phase"] == "Deleting"
    assert (condition(obj, "DeletionBlocked")["status"], condition(obj, "DeletionBlocked")["reason"]) == \
        ("False", "Snapshotting")
    assert len(cluster.written("patch/status", "SampleDB")) == status_writes + 1  # written once, not on every pass

    cluster.set_status(BACKUP, snapshot_name(cluster, 1), {"phase": "Running"})
    await cluster.reconcile(DB)
    assert children(cluster) == before and not child_deletes(cluster)

    finish_snapshot(cluster, 1, "Succeeded")
    await cluster.reconcile(DB)
    assert children(cluster) == GONE
    assert set(child_deletes(cluster)) == before - GONE
    assert cluster.writes[-1] == ("patch", "SampleDB", DB)  # the finalizer, after the deletes
    assert cluster.get("SampleDB", DB) is None
    assert [(t, m) for t, _r, m in events(cluster, "DataDeleted")] == [("Normal", "snapshot attempt 1 succeeded")]
    assert [b["metadata"]["name"] for b in cluster.of_kind(BACKUP)] == [snapshot_name(cluster, 1)]  # kept


async def test_a_failed_snapshot_blocks_the_deletion_warns_once_and_retries_after_the_backoff() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    before = children(cluster)
    await delete_db(cluster)
    await cluster.reconcile(DB)
    finish_snapshot(cluster, 1, "Failed", "pg_dump: connection refused")

    result = await cluster.reconcile(DB)
    assert result == Result(requeue_after=lifecycle.retry_delay(1))
    blocked = condition(cluster.get("SampleDB", DB), "DeletionBlocked")
    message = "snapshot attempt 1 failed: pg_dump: connection refused"
    assert (blocked["status"], blocked["reason"], blocked["message"]) == ("True", "SnapshotFailed", message)
    cluster.clock.advance(4)
    assert await cluster.reconcile(DB) == Result(requeue_after=lifecycle.retry_delay(1) - 4)
    assert events(cluster, "DeletionBlocked") == [("Warning", "DeletionBlocked", message)]  # once
    assert children(cluster) == before and len(cluster.of_kind(BACKUP)) == 1

    cluster.clock.advance(lifecycle.retry_delay(1))
    assert await cluster.reconcile(DB) is None
    second = cluster.get(BACKUP, snapshot_name(cluster, 2))
    assert second is not None and second["metadata"]["labels"]["sampledb.io/attempt"] == "2"
    assert condition(cluster.get("SampleDB", DB), "DeletionBlocked")["status"] == "False"
    assert children(cluster) == before

    finish_snapshot(cluster, 2, "Succeeded")
    await cluster.reconcile(DB)
    assert cluster.get("SampleDB", DB) is None and children(cluster) == GONE


async def test_the_skip_snapshot_annotation_ends_a_blocked_deletion_without_a_snapshot() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    await delete_db(cluster)
    await cluster.reconcile(DB)
    finish_snapshot(cluster, 1, "Failed", "disk full")
    await cluster.reconcile(DB)
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {lifecycle.SKIP_SNAPSHOT_ANNOTATION: "true"}}})
    await cluster.reconcile(DB)
    assert cluster.get("SampleDB", DB) is None and children(cluster) == GONE
    reasons = cluster.recorder.reasons()
    assert reasons.index("SnapshotSkipped") < reasons.index("DataDeleted")
    assert events(cluster, "SnapshotSkipped") == [
        ("Warning", "SnapshotSkipped", f"the {lifecycle.SKIP_SNAPSHOT_ANNOTATION} annotation skips the snapshot")]
    assert len(cluster.of_kind(BACKUP)) == 1


async def test_retain_keeps_and_labels_every_data_volume_and_the_secret_and_deletes_the_rest() -> None:
    cluster = FakeCluster()
    await running_database(cluster, deletionPolicy="Retain")
    standby_sts, standby_pvc = standby(cluster)
    await delete_db(cluster)
    await cluster.reconcile(DB)
    data, secret, superuser = names.data_pvc_name(DB), names.secret_name(DB), names.superuser_secret_name(DB)
    kept = {(PVC, data), (PVC, standby_pvc), ("Secret", secret), ("Secret", superuser)}
    assert children(cluster) == GONE | kept
    for kind, name in kept:
        meta = cluster.get(kind, name)["metadata"]  # type: ignore[index]
        assert meta["labels"][lifecycle.RETAINED_FROM_LABEL] == DB
        assert meta["annotations"]["sampledb.io/retained-from-uid"] == UID
    assert (STS, standby_sts) in child_deletes(cluster)
    assert cluster.get("SampleDB", DB) is None and not cluster.of_kind(BACKUP)
    assert [m for _t, _r, m in events(cluster, "DataRetained")] == [
        f"PVC {data} and Secrets {secret}, {superuser} are kept, labelled {lifecycle.RETAINED_FROM_LABEL}={DB};"
        " a new SampleDB of this name adopts them"]


async def test_delete_policy_deletes_everything_at_once_without_a_snapshot() -> None:
    cluster = FakeCluster()
    await running_database(cluster, deletionPolicy="Delete")
    standby_sts, standby_pvc = standby(cluster)
    await delete_db(cluster)
    assert await cluster.reconcile(DB) is None
    assert cluster.get("SampleDB", DB) is None and children(cluster) == GONE
    assert not cluster.of_kind(BACKUP)
    assert events(cluster, "DataDeleted") == [("Normal", "DataDeleted", "deletionPolicy Delete: no snapshot")]
    assert child_deletes(cluster)[:2] == [(STS, standby_sts), (PVC, standby_pvc)]  # the instances' first


async def test_a_database_that_never_ran_is_deleted_without_a_snapshot() -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(DB))
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)  # children created; no pod ever ready, no currentVersion
    assert "currentVersion" not in (cluster.get("SampleDB", DB) or {}).get("status", {})
    assert cluster.of_kind(STS)
    await delete_db(cluster)
    await cluster.reconcile(DB)
    assert cluster.get("SampleDB", DB) is None and children(cluster) == GONE
    assert not cluster.of_kind(BACKUP)
    assert [m for _t, _r, m in events(cluster, "DataDeleted")] == [
        "the database never ran: there is nothing to snapshot"]


async def test_a_stale_finalizer_removal_stops_and_looks_again_and_the_next_pass_releases() -> None:
    cluster = FakeCluster()
    await running_database(cluster, deletionPolicy="Delete")
    await delete_db(cluster)
    cluster.freeze_cache()
    cluster.patch("SampleDB", DB, {"metadata": {"labels": {"team": "a"}}})  # the cache has an older version
    assert await cluster.reconcile(DB) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    obj = cluster.get("SampleDB", DB)
    assert obj is not None and lifecycle.FINALIZER in obj["metadata"]["finalizers"]
    assert child_deletes(cluster)  # the deletes came first
    cluster.sync_cache()
    await cluster.reconcile(DB)
    assert cluster.get("SampleDB", DB) is None and children(cluster) == GONE
    assert len(events(cluster, "DataDeleted")) == 1  # the second pass only released the finalizer


async def test_a_refused_finalizer_removal_with_no_newer_object_still_comes_back() -> None:
    """A 409 that no newer object explains (a proxy's, a webhook's: no watch event will follow) must not
    leave the deletion waiting for an event: the pass asks to look again, and that pass releases."""
    cluster = FakeCluster()
    await running_database(cluster, deletionPolicy="Delete")
    await delete_db(cluster)
    cluster.fail("SampleDB", "patch", Conflict(409, "Conflict", "the object has been modified"))
    assert await cluster.reconcile(DB) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    assert lifecycle.FINALIZER in cluster.get("SampleDB", DB)["metadata"]["finalizers"]  # type: ignore[index]
    cluster.fail("SampleDB", "patch", None)
    assert await cluster.reconcile(DB) is None
    assert cluster.get("SampleDB", DB) is None and children(cluster) == GONE


async def test_a_snapshot_in_a_terminating_namespace_is_skipped() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.patch("Namespace", NS, {"metadata": {"deletionTimestamp": "2026-11-30T09:00:00Z"}})
    await delete_db(cluster)
    await cluster.reconcile(DB)
    assert cluster.get("SampleDB", DB) is None and not cluster.of_kind(BACKUP)
    assert [m for _t, _r, m in events(cluster, "DataDeleted")] == [
        "the namespace is being deleted: no snapshot can be taken there"]


async def test_only_a_snapshot_with_data_left_reads_the_namespace() -> None:
    cluster = FakeCluster()
    await running_database(cluster, deletionPolicy="Retain")
    reads: list[str] = []
    api = cluster.ctx.apis["Namespace"]
    real_get = api.get

    async def get(name: str, namespace: str | None = None) -> Any:
        reads.append(name)
        return await real_get(name, namespace)

    api.get = get  # type: ignore[method-assign]
    await delete_db(cluster)
    await cluster.reconcile(DB)
    assert reads == [] and cluster.get("SampleDB", DB) is None


async def test_the_shared_scripts_configmap_stays_while_another_database_of_the_namespace_exists() -> None:
    cluster = FakeCluster()
    await running_database(cluster, deletionPolicy="Delete")
    await running_database(cluster, "billing", deletionPolicy="Delete")
    await delete_db(cluster)
    await cluster.reconcile(DB)
    assert cluster.get("SampleDB", DB) is None
    assert cluster.get("ConfigMap", SCRIPTS_CONFIGMAP) is not None  # billing's pods mount it
    assert ("ConfigMap", SCRIPTS_CONFIGMAP) not in child_deletes(cluster)

    await cluster.ctx.apis["SampleDB"].delete("billing", NS)
    await cluster.reconcile("billing")
    assert cluster.get("SampleDB", "billing") is None
    assert cluster.get("ConfigMap", SCRIPTS_CONFIGMAP) is None  # the namespace's last database took it along


async def test_an_earlier_versions_own_scripts_configmap_goes_with_its_database() -> None:
    cluster = FakeCluster()
    db = await running_database(cluster, deletionPolicy="Delete")
    legacy = f"{DB}-scripts"
    assert db["metadata"]["name"] == DB
    labels = {MANAGED_BY_LABEL: MANAGED_BY, DATABASE_LABEL: DB}
    cluster.put("ConfigMap", {"metadata": {"name": legacy, "labels": labels}, "data": {"lib.sh": "old"}})
    await delete_db(cluster)
    await cluster.reconcile(DB)
    assert cluster.get("ConfigMap", legacy) is None and children(cluster) == GONE
