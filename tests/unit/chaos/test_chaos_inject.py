"""Injecting each fault on the in-memory fake cluster: what is touched (only the target's objects),
what recovery means, and the outcomes when the means are missing."""

from __future__ import annotations

from typing import Any, cast

import pytest
from tests.support.chaos_world import (
    FakeExec,
    MiB,
    backup_job,
    chaos_apis,
    database_pod,
    databases,
    operator_and_kubelet,
    unique_uids,
)
from tests.support.fake_cluster import NS, FakeCluster

from sampledb_operator.chaos.faults import HEADROOM, Fault
from sampledb_operator.chaos.inject import FILL_PATH, Injector, NewLeader, OutOfScope, PodBack, Recreated
from sampledb_operator.chaos.plan import Target
from sampledb_operator.chaos.recovery import holds
from sampledb_operator.chaos.report import FAILED, INJECTED, SKIPPED, UNSUPPORTED
from sampledb_operator.decide.labels import DATABASE_LABEL
from sampledb_operator.kube.errors import Forbidden, KubeTransportError

ORDERS, BILLING = Target(NS, "orders"), Target(NS, "billing")
Deletes = list[tuple[str, str, str, dict[str, Any]]]


@pytest.fixture
async def world() -> tuple[FakeCluster, Deletes, dict[str, Any], FakeExec]:
    cluster = FakeCluster()
    unique_uids(cluster)
    await databases(cluster, "orders", "billing")
    deletes: Deletes = []
    return cluster, deletes, chaos_apis(cluster, deletes), FakeExec(cluster)


async def test_delete_pod_deletes_only_the_target_pod_with_its_uid_as_precondition(world: Any) -> None:
    cluster, deletes, apis, executor = world
    pod_uid = cluster.get("Pod", "orders-0")["metadata"]["uid"]
    injection = await Injector(apis, executor, [ORDERS]).inject(Fault.DELETE_POD, ORDERS)
    assert injection.outcome == INJECTED and injection.target == "Pod orders-0"
    assert deletes == [("Pod", NS, "orders-0", {"preconditions": {"uid": pod_uid}, "grace_period_seconds": None})]
    assert cluster.get("Pod", "orders-0") is None and cluster.get("Pod", "billing-0") is not None
    assert injection.checks == [PodBack(NS, "orders-0", pod_uid)]
    assert not await holds(apis, ORDERS, injection.checks)
    await operator_and_kubelet(cluster, ["orders"])
    assert await holds(apis, ORDERS, injection.checks), "a new Ready pod: recovered"


@pytest.mark.parametrize(("fault", "kind", "name"), [
    (Fault.DELETE_SERVICE, "Service", "orders"),
    (Fault.DELETE_CONFIGMAP, "ConfigMap", "orders-config"),
    (Fault.DELETE_STATEFULSET, "StatefulSet", "orders"),
])
async def test_a_deleted_child_has_recovered_when_the_operator_recreated_it(world: Any, fault: Fault, kind: str,
                                                                            name: str) -> None:
    cluster, deletes, apis, executor = world
    before = cluster.get(kind, name)
    assert before is not None, f"the fake's {kind} is named {name}"
    injection = await Injector(apis, executor, [ORDERS]).inject(fault, ORDERS)
    assert injection.outcome == INJECTED
    assert [(k, n) for k, _ns, n, _o in deletes] == [(kind, name)]
    assert injection.checks == [Recreated(kind, NS, name, before["metadata"]["uid"])]
    assert not await holds(apis, ORDERS, injection.checks)
    await operator_and_kubelet(cluster, ["orders"])
    assert cluster.get(kind, name)["metadata"]["uid"] != before["metadata"]["uid"]
    assert await holds(apis, ORDERS, injection.checks)


async def test_kill_postgres_signals_pid_1_of_the_postgres_container_and_waits_for_its_restart(world: Any) -> None:
    cluster, deletes, apis, executor = world
    injection = await Injector(apis, executor, [ORDERS]).inject(Fault.KILL_POSTGRES, ORDERS)
    assert injection.outcome == INJECTED and not deletes
    assert executor.calls == [(NS, "orders-0", "postgres", ["sh", "-c", "kill -QUIT 1"])]
    check = injection.checks[0]
    assert isinstance(check, PodBack) and check.restarts_before == 0
    assert await holds(apis, ORDERS, injection.checks), "the fake container restarted (restartCount 1)"
    database_pod(cluster, "orders", restarts=0)  # as if it had not restarted
    assert not await holds(apis, ORDERS, injection.checks)


async def test_an_exec_the_cluster_refuses_is_reported_unsupported(world: Any) -> None:
    _cluster, deletes, apis, executor = world
    executor.refuse = True
    injection = await Injector(apis, executor, [ORDERS]).inject(Fault.KILL_POSTGRES, ORDERS)
    assert injection.outcome == UNSUPPORTED and "pods/exec failed" in injection.detail and not deletes
    no_exec = await Injector(apis, None, [ORDERS]).inject(Fault.FILL_VOLUME, ORDERS)
    assert no_exec.outcome == UNSUPPORTED


async def test_fill_volume_fills_to_the_headroom_within_the_volume_size_and_registers_its_removal(world: Any) -> None:
    _cluster, _deletes, apis, executor = world
    injector = Injector(apis, executor, [ORDERS])
    injection = await injector.inject(Fault.FILL_VOLUME, ORDERS)
    assert injection.outcome == INJECTED, injection.detail
    # the PVC asks for 1Gi; 40 MiB are used; the filesystem (no quota) shows 100 GiB free
    assert executor.files == {FILL_PATH: 1024 * MiB - 40 * MiB - HEADROOM}
    assert injection.cleanup is not None and injection.cleanup.path == FILL_PATH
    assert FILL_PATH.startswith("/var/lib/postgresql/data/") and "/pgdata" not in FILL_PATH
    line = await injector.remove_fill(injection.cleanup)
    assert executor.files == {} and line == f"{ORDERS}: removed {FILL_PATH}"


async def test_fail_backup_job_deletes_the_running_backup_pod_at_once(world: Any) -> None:
    cluster, deletes, apis, executor = world
    backup_job(cluster, "orders", "orders-backup-1")
    backup_job(cluster, "billing", "billing-backup-1")
    injection = await Injector(apis, executor, [ORDERS]).inject(Fault.FAIL_BACKUP_JOB, ORDERS)
    assert injection.outcome == INJECTED
    assert [(k, n, o["grace_period_seconds"]) for k, _ns, n, o in deletes] == [("Pod", "orders-backup-1-abcde", 0)]
    assert cluster.get("Job", "orders-backup-1") is not None, "the Job stays; its attempt fails"


async def test_faults_with_nothing_to_act_on_are_skipped(world: Any) -> None:
    cluster, deletes, apis, executor = world
    injector = Injector(apis, executor, [ORDERS])
    assert (await injector.inject(Fault.DELETE_JOB, ORDERS)).outcome == SKIPPED
    assert (await injector.inject(Fault.FAIL_BACKUP_JOB, ORDERS)).outcome == SKIPPED
    cluster.remove(("Pod", NS, "orders-0"))
    assert (await injector.inject(Fault.KILL_POSTGRES, ORDERS)).outcome == SKIPPED
    assert not deletes and not executor.calls


async def test_nothing_outside_the_scope_is_ever_touched(world: Any) -> None:
    cluster, deletes, apis, executor = world
    injector = Injector(apis, executor, [ORDERS])
    with pytest.raises(OutOfScope):
        await injector.inject(Fault.DELETE_POD, BILLING)
    # an object with the target's name that another database's label claims is not the target's
    cluster.patch("Service", "orders", {"metadata": {"labels": {DATABASE_LABEL: "billing"}}})
    with pytest.raises(OutOfScope):
        await injector.inject(Fault.DELETE_SERVICE, ORDERS)
    assert not deletes and not executor.calls
    assert cluster.get("Service", "orders") is not None and cluster.get("Pod", "billing-0") is not None


async def test_an_api_refusal_or_no_answer_is_reported_failed(world: Any) -> None:
    cluster, _deletes, apis, executor = world
    cluster.fail("Pod", "delete", Forbidden(403, "Forbidden", "cannot delete pods"))
    injection = await Injector(apis, executor, [ORDERS]).inject(Fault.DELETE_POD, ORDERS)
    assert injection.outcome == FAILED and "403" in injection.detail
    cluster.fail("Service", "get", cast(Any, KubeTransportError("GET /api/v1/...: connection refused")))
    injection = await Injector(apis, executor, [ORDERS]).inject(Fault.DELETE_SERVICE, ORDERS)
    assert injection.outcome == FAILED and "no answer from the API" in injection.detail


async def test_kill_leader_deletes_the_lease_holders_pod_and_waits_for_a_new_holder(world: Any) -> None:
    cluster, deletes, apis, executor = world
    cluster.put("Lease", {"metadata": {"name": "sampledb-operator", "namespace": "sampledb-system"},
                          "spec": {"holderIdentity": "sampledb-operator-7d9f-abcde_1a2b3c4d"}})
    cluster.put("Pod", {"metadata": {"name": "sampledb-operator-7d9f-abcde", "namespace": "sampledb-system"}})
    injector = Injector(apis, executor, [ORDERS], lease=("sampledb-system", "sampledb-operator"))
    injection = await injector.inject(Fault.KILL_LEADER, None)
    assert injection.outcome == INJECTED
    assert [(k, ns, n, o["grace_period_seconds"]) for k, ns, n, o in deletes] == \
        [("Pod", "sampledb-system", "sampledb-operator-7d9f-abcde", 0)]
    holder = "sampledb-operator-7d9f-abcde_1a2b3c4d"
    assert injection.checks == [NewLeader("sampledb-system", "sampledb-operator", holder)]
    assert not await holds(apis, None, injection.checks)
    lease = cluster.objects[("Lease", "sampledb-system", "sampledb-operator")]
    cluster.store_object("Lease", {**lease, "spec": {"holderIdentity": "sampledb-operator-7d9f-fghij_99"}},
                         previous=lease)  # the standby took over
    assert await holds(apis, None, injection.checks)


async def test_a_leader_that_is_no_pod_is_skipped(world: Any) -> None:
    cluster, deletes, apis, executor = world
    cluster.put("Lease", {"metadata": {"name": "sampledb-operator", "namespace": "ops"},
                          "spec": {"holderIdentity": "laptop_1a2b3c4d"}})
    injection = await Injector(apis, executor, [ORDERS], lease=("ops", "sampledb-operator")).inject(
        Fault.KILL_LEADER, None)
    assert injection.outcome == SKIPPED and "not a pod" in injection.detail and not deletes
