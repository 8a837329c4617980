"""The primary's lease in the replication step, on the fake cluster (the servers scripted by FakeServers).

Each pass renews the lease of the primary of a database with standbys, and of no other instance; a failover renews
none until its promotion, and renews the target just before pg_promote() (a lease left in its pod must not stop it
once promoted); a self-fenced primary that no standby can replace has its pod deleted (the fence released), with an
Event; a single-instance database has no lease.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster, sampledb
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    DELAY,
    POD,
    FakeServers,
    ip,
    pod_name,
    run_pod,
    three_instances,
)

from sampledb_operator.observability import metrics


def self_fenced(cluster: FakeCluster, i: int) -> None:
    """Instance i's pod as its kubelet shows it once its server stopped itself: running again, unready, the reason
    in its container's last termination."""
    pod = run_pod(cluster, i, ready=False)
    pod["status"]["containerStatuses"] = [{"name": "postgres", "state": {"running": {}}, "lastState": {
        "terminated": {"exitCode": 0, "message": "sampledb: self-fenced: the operator's lease ended"}}}]
    cluster.put(POD, pod)


def renewed() -> float:
    return metrics.primary_lease_renewals_total.labels(result="renewed")._value.get()


async def test_each_pass_renews_the_primarys_lease_only(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.renewed.clear()
    before = renewed()
    await cluster.reconcile(DB)
    assert servers.renewed == [ip(0)]
    assert renewed() == before + 1


async def test_a_failover_renews_nothing_but_the_target_just_before_its_promotion(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.silent(0)
    run_pod(cluster, 0, ready=False)
    cluster.clock.advance(DELAY + 1)
    servers.renewed.clear()
    await cluster.reconcile(DB)  # fenced; not yet promoted
    assert servers.renewed == []
    await cluster.reconcile(DB)  # promoted
    assert servers.renewed == [ip(1), f"promote {ip(1)}"]


async def test_a_self_fenced_primary_is_failed_over_with_the_reason(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.silent(0)
    self_fenced(cluster, 0)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    messages = [message for _, reason, message in cluster.recorder.events if reason == "FailoverStarted"]
    assert messages and "stopped itself" in messages[0]


async def test_a_self_fenced_primary_no_standby_can_replace_is_released(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.silent(0)
    self_fenced(cluster, 0)
    for i in (1, 2):
        run_pod(cluster, i, ready=False)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert ("delete", POD, pod_name(0)) in cluster.written()
    assert "SelfFenceReleased" in cluster.recorder.reasons()
    assert "FailoverStarted" not in cluster.recorder.reasons()


async def test_a_single_instance_has_no_lease(servers: FakeServers) -> None:
    cluster = FakeCluster()
    spec: dict[str, Any] = {"replicas": 1}
    cluster.put("SampleDB", sampledb(DB, **spec))
    await cluster.reconcile(DB)
    servers.primary(0)
    cluster.statefulset_ready(DB)
    run_pod(cluster, 0)
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert servers.renewed == []


async def test_a_scale_down_to_one_instance_turns_the_lease_off(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    db = cluster.get("SampleDB", DB)
    assert db is not None
    cluster.put("SampleDB", {**db, "spec": {**db["spec"], "replicas": 1}})
    servers.renewed.clear()
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert f"disarm {ip(0)}" in servers.renewed and ip(0) not in servers.renewed
