"""A failover whose old primary's kubelet does not act (its node does not answer the control plane): the fenced pod
stays terminating past its deletion's deadline. reconcilers/replication.py then confirms the fence by the server
itself: it takes a shutdown over SQL (pg/client.stop_server), then its address refuses connections
(pg/client.refused_within), with the Warning FencedWithoutKubelet; before KUBELET_SILENT_SECONDS past the deadline
nothing of the kind happens, and a server that does not answer at all (its node cut off), or whose address refuses
connections before it was told to stop (a refusal alone is no proof), confirms nothing: no promotion while it is
so."""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    DELAY,
    POD,
    FakeServers,
    ip,
    pod_name,
    run_pod,
    status,
    three_instances,
)

from sampledb_operator.decide.replicas.replication import FENCE_UNCONFIRMED_SECONDS, KUBELET_SILENT_SECONDS
from sampledb_operator.reconcilers.replication import STOPPED_ANNOTATION


def kubelet_gone(cluster: FakeCluster) -> None:
    """The primary's pod as its node's kubelet left it: a deletion waits on the kubelet (here: a finalizer), and
    the node controller marked it not ready; its server still runs."""
    pod = run_pod(cluster, 0, ready=False)
    cluster.put(POD, {**pod, "metadata": {**pod["metadata"], "finalizers": ["kubelet.example/held"]}})


async def test_a_server_left_by_its_kubelet_is_stopped_over_sql_then_the_standby_is_promoted(
        servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    kubelet_gone(cluster)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)  # fenced: StatefulSet at 0, the pod asked to stop (it stays, terminating)
    assert status(cluster)["targetPrimary"] == pod_name(1)
    pod = cluster.get(POD, pod_name(0))
    assert pod is not None and pod["metadata"].get("deletionTimestamp")

    # within KUBELET_SILENT_SECONDS of the deadline: the kubelet may still act; nothing is stopped by hand
    cluster.clock.advance(KUBELET_SILENT_SECONDS - 1)
    await cluster.reconcile(DB)
    assert servers.stopped == [] and servers.promoted == []

    cluster.clock.advance(2)
    await cluster.reconcile(DB)
    assert servers.stopped == [ip(0)]
    assert servers.promoted == [ip(1)]
    assert cluster.recorder.events.count(
        ("Warning", "FencedWithoutKubelet",
         f"the old primary {pod_name(0)} is still terminating past its deletion's deadline (its node's kubelet does"
         " not act): its server was stopped over SQL and its address refuses connections")) == 1
    pod = cluster.get(POD, pod_name(0))
    assert pod is not None and STOPPED_ANNOTATION in pod["metadata"]["annotations"]  # the proof, for later passes
    await cluster.reconcile(DB)  # the fence still confirmed (annotated, refusing): the promotion is recorded
    assert status(cluster)["primary"] == pod_name(1)
    assert servers.promoted == [ip(1)]  # once
    assert servers.stopped == [ip(0)]


async def test_a_server_that_does_not_answer_or_only_refuses_keeps_the_failover_waiting(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    kubelet_gone(cluster)
    servers.unreachable.add(ip(0))  # its node cut off: no answer at all
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    for _ in range(5):
        cluster.clock.advance(KUBELET_SILENT_SECONDS)
        await cluster.reconcile(DB)
    assert servers.promoted == []
    assert status(cluster)["targetPrimary"] == pod_name(1) and status(cluster)["primary"] == pod_name(0)
    assert "FencedWithoutKubelet" not in cluster.recorder.reasons()
    cluster.clock.advance(FENCE_UNCONFIRMED_SECONDS)
    await cluster.reconcile(DB)
    [degraded] = [c for c in status(cluster)["conditions"] if c["type"] == "Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "FenceUnconfirmed")
    assert f"promotion of {pod_name(1)} waits (never two primaries)" in degraded["message"]

    # its address refuses connections, but the server was never reached: no proof it stopped (a firewall may refuse)
    servers.unreachable.discard(ip(0))
    servers.silent(0)
    for _ in range(3):
        cluster.clock.advance(KUBELET_SILENT_SECONDS)
        await cluster.reconcile(DB)
    assert servers.stopped == [] and servers.promoted == []

    # the server answers: it takes the order, stops, and the standby is promoted
    servers.primary(0)
    await cluster.reconcile(DB)
    assert servers.stopped == [ip(0)]
    assert servers.promoted == [ip(1)]
    assert "FencedWithoutKubelet" in cluster.recorder.reasons()
    await cluster.reconcile(DB)
    assert not [c for c in status(cluster)["conditions"] if c["type"] == "Degraded" and c["status"] == "True"]
