"""reconcilers/maintenance.py on the fake cluster: a node cordoned under the primary brings the switchover
annotation (Event NodeMaintenanceSwitchover) naming the standby furthest ahead on a schedulable node, which the
replication step then carries out; no standby to move to is a Warning that says why a drain waits; nothing
happens on an uncordoned node or a database of one instance."""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster, sampledb
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    POD,
    FakeServers,
    ip,
    pod_name,
    run_pod,
    status,
    three_instances,
)

from sampledb_operator.decide.replicas import replication as rep


def place(cluster: FakeCluster, *nodes: str) -> None:
    """Instance i's pod runs on nodes[i] (the scheduler's binding)."""
    for i, node in enumerate(nodes):
        pod = cluster.get(POD, pod_name(i))
        assert pod is not None
        cluster.put(POD, {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}})


def cordon(cluster: FakeCluster, node: str, unschedulable: bool = True) -> None:
    cluster.put("Node", {"metadata": {"name": node}, "spec": {"unschedulable": unschedulable}})


def switchover_asked(cluster: FakeCluster) -> str | None:
    obj = cluster.get("SampleDB", DB)
    assert obj is not None
    return (obj["metadata"].get("annotations") or {}).get(rep.SWITCHOVER_ANNOTATION)


async def test_a_cordoned_primary_node_brings_a_switchover_to_the_standby_furthest_ahead_elsewhere(
        servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)  # 0 primary; standbys 1 at 90, 2 at 80
    place(cluster, "node-a", "node-b", "node-c")
    cordon(cluster, "node-b", unschedulable=False)  # a node that is not cordoned is not in the cache
    await cluster.reconcile(DB)
    assert switchover_asked(cluster) is None
    assert cluster.ctx.caches.cordoned_nodes() == frozenset()

    cordon(cluster, "node-a")
    assert cluster.ctx.caches.cordoned_nodes() == {"node-a"}
    await cluster.reconcile(DB)
    assert switchover_asked(cluster) == pod_name(1)
    assert cluster.recorder.events[-1] == (
        "Normal", "NodeMaintenanceSwitchover",
        f"the primary {pod_name(0)} runs on a cordoned node: switching over to {pod_name(1)}, so that a drain of"
        " that node stops no primary")

    # The replication step carries it out as any switchover: the old primary stops cleanly, the target is promoted.
    await cluster.reconcile(DB)
    assert status(cluster)["targetPrimary"] == pod_name(1)
    cluster.remove((POD, "shop", pod_name(0)))
    servers.silent(0)
    await cluster.reconcile(DB)
    assert servers.promoted == [ip(1)]
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert status(cluster)["primary"] == pod_name(1)
    assert switchover_asked(cluster) is None
    assert cluster.recorder.reasons().count("NodeMaintenanceSwitchover") == 1

    # The old primary back as a standby on its cordoned node: the new primary is elsewhere, nothing more to do.
    servers.standby(0, 120)
    run_pod(cluster, 0)
    place(cluster, "node-a", "node-b", "node-c")
    await cluster.reconcile(DB)
    assert switchover_asked(cluster) is None


async def test_a_standby_on_a_cordoned_node_is_no_target_and_without_one_the_drain_waits_said(
        servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    place(cluster, "node-a", "node-a", "node-c")  # standby 1, furthest ahead, shares the primary's node
    cordon(cluster, "node-a")
    await cluster.reconcile(DB)
    assert switchover_asked(cluster) == pod_name(2)

    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: None}}})
    cordon(cluster, "node-c")
    await cluster.reconcile(DB)
    assert switchover_asked(cluster) is None
    assert cluster.recorder.events[-1][:2] == ("Warning", "PrimaryOnCordonedNode")
    assert "a drain of the node waits" in cluster.recorder.events[-1][2]
    assert status(cluster)["primary"] == pod_name(0)


async def test_one_instance_is_never_switched_over(servers: FakeServers) -> None:
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb(DB))
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    cluster.statefulset_ready(DB)
    servers.primary(0)
    run_pod(cluster, 0)
    place(cluster, "node-a")
    cordon(cluster, "node-a")
    await cluster.reconcile(DB)
    assert switchover_asked(cluster) is None
    assert "PrimaryOnCordonedNode" not in cluster.recorder.reasons()
