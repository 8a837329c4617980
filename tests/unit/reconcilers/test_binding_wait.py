"""A new database's StatefulSet is created once its data volume's claim is bound, when the claim's class binds
immediately (decide/children/binding.py): its pod is then never refused by the scheduler for an unbound claim. Under
WaitForFirstConsumer, or when the class cannot be read, the StatefulSet is created at once, as before. The
classes' modes are read once for many databases (reconcilers/storage_classes.py)."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import NS, FakeApi, FakeCluster, condition, sampledb

from sampledb_operator.decide.status import REVISION_LABEL
from sampledb_operator.kube.errors import Forbidden, Invalid
from sampledb_operator.model import names
from sampledb_operator.reconcilers import children
from sampledb_operator.reconcilers.storage_classes import TTL_SECONDS

DENIED = Forbidden(403, "Forbidden", 'storageclasses.storage.k8s.io "fast" is forbidden')
REFUSED = Invalid(422, "Invalid", 'StatefulSet.apps "orders" is invalid')


class CountingApi(FakeApi):
    """The StorageClasses' API, counting its reads."""

    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(cluster, "StorageClass")
        self.gets = 0

    async def get(self, name: str, namespace: str | None = None) -> Any:
        self.gets += 1
        return await super().get(name, namespace)


def cluster_with(mode: str | None) -> tuple[FakeCluster, CountingApi]:
    cluster = FakeCluster()
    body: dict[str, Any] = {"metadata": {"name": "fast"}, "provisioner": "example.com/disk"}
    if mode is not None:
        body["volumeBindingMode"] = mode
    cluster.put("StorageClass", body)
    api = CountingApi(cluster)
    cluster.ctx.apis["StorageClass"] = api  # type: ignore[assignment]
    return cluster, api


def database(cluster: FakeCluster, name: str = "orders", **spec: Any) -> None:
    cluster.put("SampleDB", sampledb(name, storage={"size": "1Gi", "storageClassName": "fast"}, **spec))


def statefulset(cluster: FakeCluster, name: str = "orders") -> Any:
    return cluster.get("StatefulSet", names.statefulset_name(name))


async def made_once_bound() -> FakeCluster:
    """A database whose claim binds immediately, taken through its first pass, the binding and the pass after."""
    cluster, _api = cluster_with("Immediate")
    database(cluster)
    await cluster.reconcile("orders")
    cluster.bind(names.data_pvc_name("orders"))
    await cluster.reconcile("orders")
    return cluster


async def test_the_statefulset_waits_for_an_immediate_claim_then_comes_in_the_pass_after_its_binding() -> None:
    cluster, _api = cluster_with("Immediate")
    database(cluster)
    result = await cluster.reconcile("orders")
    assert statefulset(cluster) is None
    assert cluster.get("PersistentVolumeClaim", names.data_pvc_name("orders")) is not None
    ready = condition(cluster.get("SampleDB", "orders"), "Ready")
    assert ready["reason"] == "VolumeNotBound" and names.data_pvc_name("orders") in ready["message"]
    assert result is not None and result.requeue_after is not None
    assert result.requeue_after <= children.BINDING_RECHECK_SECONDS  # a bound on the wait, should an event be lost
    sts, claim = names.statefulset_name("orders"), names.data_pvc_name("orders")
    created = [m for _t, reason, m in cluster.recorder.events if reason == "CreatedChildren"]
    assert len(created) == 1 and f"StatefulSet {sts}," not in created[0]
    assert created[0].endswith(f"; StatefulSet {sts} waits for its claim {claim} to be bound")

    await cluster.reconcile("orders")  # nothing bound yet: still waiting, nothing written again
    assert statefulset(cluster) is None

    cluster.bind(names.data_pvc_name("orders"))
    await cluster.reconcile("orders")
    assert statefulset(cluster) is not None
    # the first Event named it: a database being provisioned announces its StatefulSet once
    assert [m for _t, reason, m in cluster.recorder.events if reason == "CreatedChildren"] == created


async def test_a_statefulset_made_again_after_the_database_has_run_is_announced() -> None:
    cluster = await made_once_bound()
    ran = cluster.get("SampleDB", "orders")
    cluster.put("SampleDB", {**ran, "status": {**ran["status"], "currentVersion": "16.4"}})
    cluster.remove(("StatefulSet", NS, names.statefulset_name("orders")))  # deleted by hand: a repair
    await cluster.reconcile("orders")
    assert statefulset(cluster) is not None
    created = [m for _t, reason, m in cluster.recorder.events if reason == "CreatedChildren"]
    assert created[-1] == f"created StatefulSet {names.statefulset_name('orders')}"


async def test_the_pass_that_makes_the_statefulset_reports_its_pod_awaited_in_its_one_status_write() -> None:
    """Ready's reason after the StatefulSet's creation describes the children as that pass leaves them: the pod
    is awaited (DatabaseNotReady), not the StatefulSet (Provisioning). The next pass, with nothing new, writes no
    status: one status write for the step, not two."""
    cluster, _api = cluster_with("Immediate")
    database(cluster)
    await cluster.reconcile("orders")
    cluster.bind(names.data_pvc_name("orders"))
    before = len(cluster.written("patch/status", "SampleDB"))
    await cluster.reconcile("orders")
    assert statefulset(cluster) is not None
    db = cluster.get("SampleDB", "orders")
    assert condition(db, "Ready")["reason"] == "DatabaseNotReady"
    assert condition(db, "Progressing")["reason"] == "DatabaseNotReady"
    assert db["status"]["phase"] == "Provisioning"
    assert len(cluster.written("patch/status", "SampleDB")) == before + 1
    await cluster.reconcile("orders")  # the StatefulSet's pod is not ready yet: nothing to report
    assert len(cluster.written("patch/status", "SampleDB")) == before + 1


async def test_a_statefulset_the_api_server_refused_is_still_to_be_made() -> None:
    cluster, _api = cluster_with("WaitForFirstConsumer")
    cluster.fail("StatefulSet", "apply", REFUSED)
    database(cluster)
    await cluster.reconcile("orders")
    cluster.bind(names.data_pvc_name("orders"))
    await cluster.reconcile("orders")
    assert statefulset(cluster) is None
    assert condition(cluster.get("SampleDB", "orders"), "Ready")["reason"] == "Provisioning"


async def test_the_look_again_without_an_event_grows_with_the_claim_s_wait() -> None:
    cluster, _api = cluster_with("Immediate")
    database(cluster)
    await cluster.reconcile("orders")  # the first pass, whose status change looks again at once
    first = await cluster.reconcile("orders")  # waiting, nothing else to do: the wait's own look again
    assert first is not None and first.requeue_after == children.BINDING_RECHECK_SECONDS
    cluster.clock.advance(1000)  # the claim has waited 1,000 s: the next look is as far again
    later = await cluster.reconcile("orders")
    assert statefulset(cluster) is None
    assert later is not None and later.requeue_after == 1000
    cluster.clock.advance(5 * 3600)
    last = await cluster.reconcile("orders")
    assert last is not None and last.requeue_after == children.BINDING_RECHECK_MAX_SECONDS

    cluster.bind(names.data_pvc_name("orders"))  # bound: nothing waits, no look again for it
    done = await cluster.reconcile("orders")
    assert statefulset(cluster) is not None
    assert done is None or done.requeue_after is None or done.requeue_after < children.BINDING_RECHECK_SECONDS


async def test_a_class_that_does_not_say_binds_immediately() -> None:
    cluster, _api = cluster_with(None)
    database(cluster)
    await cluster.reconcile("orders")
    assert statefulset(cluster) is None


async def test_under_wait_for_first_consumer_the_statefulset_comes_at_once() -> None:
    cluster, _api = cluster_with("WaitForFirstConsumer")
    database(cluster)
    await cluster.reconcile("orders")
    assert statefulset(cluster) is not None  # its pod is what binds the claim


async def test_a_class_the_operator_cannot_read_holds_nothing_back() -> None:
    cluster, api = cluster_with("Immediate")
    cluster.fail("StorageClass", "get", DENIED)
    database(cluster)
    await cluster.reconcile("orders")
    assert statefulset(cluster) is not None and api.gets == 1


async def test_an_existing_statefulset_is_never_held_back() -> None:
    cluster = await made_once_bound()
    cluster.set_status("PersistentVolumeClaim", names.data_pvc_name("orders"), {"phase": "Lost"})
    cluster.patch("SampleDB", "orders", {"spec": {"resources": {"limits": {"memory": "1Gi"}}}})
    writes = len(cluster.writes)
    await cluster.reconcile("orders")
    assert ("apply", "StatefulSet", names.statefulset_name("orders")) in cluster.writes[writes:]  # kept in shape


async def test_the_class_is_read_once_for_many_databases_and_again_after_a_while() -> None:
    cluster, api = cluster_with("Immediate")
    for i in range(5):
        database(cluster, f"db{i}")
        await cluster.reconcile(f"db{i}")
    assert api.gets == 1
    assert all(statefulset(cluster, f"db{i}") is None for i in range(5))

    cluster.put("StorageClass", {"metadata": {"name": "fast"}, "volumeBindingMode": "WaitForFirstConsumer"})
    cluster.clock.advance(TTL_SECONDS)  # the class made again with another mode: seen once its answer is old
    await cluster.reconcile("db0")
    assert api.gets == 2 and statefulset(cluster, "db0") is not None


async def test_a_standby_s_statefulset_waits_for_its_own_claim() -> None:
    cluster, _api = cluster_with("Immediate")
    database(cluster, replicas=2)
    await cluster.reconcile("orders")
    standby = names.instance_statefulset_name("orders", 1)
    standby_claim = names.instance_data_pvc_name("orders", 1)
    assert cluster.get("PersistentVolumeClaim", standby_claim) is not None
    cluster.bind(names.data_pvc_name("orders"))
    await cluster.reconcile("orders")
    assert statefulset(cluster) is not None and cluster.get("StatefulSet", standby) is None
    cluster.bind(standby_claim)
    await cluster.reconcile("orders")
    assert cluster.get("StatefulSet", standby) is not None


async def test_the_pod_s_readiness_starts_the_init_job_before_the_statefulset_controller_counts_it() -> None:
    """The kubelet's report that the pod is ready reaches the operator before the StatefulSet controller's count:
    that pass starts the init Job and writes Initializing with readyInstances 1/1 in one status write."""
    cluster, _api = cluster_with("WaitForFirstConsumer")
    cluster.put("ConfigMap", {"metadata": {"name": "orders-sql"}, "data": {"init.sql": "CREATE TABLE t (id int)"}})
    database(cluster, init={"configMapKeyRef": {"name": "orders-sql", "key": "init.sql"}})
    await cluster.reconcile("orders")
    cluster.bind(names.data_pvc_name("orders"))
    sts = statefulset(cluster)
    revision = "orders-r1"
    cluster.set_status("StatefulSet", sts["metadata"]["name"], {
        "observedGeneration": sts["metadata"]["generation"], "replicas": 1, "readyReplicas": 0,
        "currentRevision": revision, "updateRevision": revision})
    await cluster.reconcile("orders")
    assert cluster.written("create", "Job") == []  # the pod is not there yet
    labels = {**sts["spec"]["template"]["metadata"]["labels"], REVISION_LABEL: revision}
    cluster.put("Pod", {"metadata": {"name": names.pod_name("orders"), "labels": labels, "ownerReferences": [
        {"kind": "StatefulSet", "name": sts["metadata"]["name"], "uid": sts["metadata"]["uid"], "controller": True}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    before = len(cluster.written("patch/status", "SampleDB"))
    await cluster.reconcile("orders")
    uid = cluster.get("SampleDB", "orders")["metadata"]["uid"]
    assert [n for _v, _k, n in cluster.written("create", "Job")] == [names.init_job_name("orders", uid)]
    db = cluster.get("SampleDB", "orders")
    assert db["status"]["phase"] == "Initializing" and db["status"]["readyInstances"] == "1/1"
    assert len(cluster.written("patch/status", "SampleDB")) == before + 1
