"""reconcilers/node_heartbeats.py and the failover it starts: the nodes' Leases read while a database has standbys;
a node whose Lease stops changing is silent after --node-silent-seconds, the databases whose primary runs there are
enqueued, and the replication step then fails the primary over without waiting for the node controller (the pod
still says Ready) and stops its server over SQL without waiting for its kubelet; the server is still proven stopped
before the standby is promoted. A read that fails is counted and changes nothing."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import FakeCluster
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    DELAY,
    POD,
    FakeServers,
    ip,
    pod_name,
    status,
    three_instances,
)

from sampledb_operator.kube.api import ListResult
from sampledb_operator.kube.errors import ApiError
from sampledb_operator.observability import metrics
from sampledb_operator.reconcilers.node_heartbeats import NODE_LEASE_NAMESPACE, NodeHeartbeats

SILENT_AFTER = 20.0


class Leases:
    """The kube-node-lease Leases as the API server lists them, and the lists asked for."""

    def __init__(self, *nodes: str) -> None:
        self.renewed = {n: "t0" for n in nodes}
        self.lists = 0
        self.error: Exception | None = None

    def beat(self, *nodes: str) -> None:
        for n in nodes:
            self.renewed[n] = f"t{int(self.renewed[n][1:]) + 1}"

    async def list(self, namespace: str | None = None, *, limit: int = 500) -> ListResult:
        assert namespace == NODE_LEASE_NAMESPACE and limit == 0
        self.lists += 1
        if self.error is not None:
            raise self.error
        items: list[dict[str, Any]] = [{"metadata": {"name": n}, "spec": {"renewTime": r}}
                                       for n, r in self.renewed.items()]
        return ListResult(items=items, resource_version="1", continue_token=None)


def on_nodes(cluster: FakeCluster) -> None:
    """Instance i's pod runs on node n<i>; n0's kubelet is gone, so a deletion of its pod waits on it (here: a
    finalizer)."""
    for i in range(3):
        pod = cluster.get(POD, pod_name(i))
        assert pod is not None
        meta = {**pod["metadata"], "finalizers": ["kubelet.example/held"]} if i == 0 else pod["metadata"]
        cluster.put(POD, {**pod, "metadata": meta, "spec": {**(pod.get("spec") or {}), "nodeName": f"n{i}"}})


def reader(cluster: FakeCluster, leases: Leases, silent: list[str]) -> NodeHeartbeats:
    return NodeHeartbeats(cluster.ctx, leases, silent_after=SILENT_AFTER, on_silent=silent.append)


async def heard_once(servers: FakeServers) -> tuple[FakeCluster, Leases, list[str], NodeHeartbeats]:
    """A running database of three instances on nodes n0 (the primary), n1 and n2, and the heartbeats read once."""
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    on_nodes(cluster)
    leases, told = Leases("n0", "n1", "n2"), []
    heartbeats = reader(cluster, leases, told)
    await heartbeats.read_once()
    return cluster, leases, told, heartbeats


async def test_a_primary_on_a_node_that_stops_beating_fails_over_before_its_pod_says_unready(
        servers: FakeServers) -> None:
    cluster, leases, told, heartbeats = await heard_once(servers)
    for _ in range(3):  # n0's kubelet stops renewing; the others go on
        cluster.clock.advance(6)
        leases.beat("n1", "n2")
        await heartbeats.read_once()
        await cluster.reconcile(DB)
        assert told == [] and cluster.ctx.silent_nodes == {} and status(cluster).get("targetPrimary") is None
    cluster.clock.advance(SILENT_AFTER - 18)
    await heartbeats.read_once()
    assert told == ["n0"] and set(cluster.ctx.silent_nodes) == {"n0"}
    assert metrics.silent_nodes._value.get() == 1

    # the pod still says Ready (no node controller yet): failoverDelaySeconds counts from the silence
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert status(cluster)["targetPrimary"] == pod_name(1)
    assert ("Warning", "FailoverStarted", f"primary {pod_name(0)} runs on node n0, which sends no heartbeat:"
            f" fencing it and promoting {pod_name(1)}, the most advanced standby") in cluster.recorder.events
    pod = cluster.get(POD, pod_name(0))
    assert pod is not None and pod["metadata"].get("deletionTimestamp")  # asked to stop (its kubelet never will)

    # its kubelet is not waited for: the next pass (within the deletion's grace) stops the server over SQL, proves
    # it, and promotes
    assert servers.stopped == []
    cluster.clock.advance(1)
    await cluster.reconcile(DB)
    assert servers.stopped == [ip(0)] and servers.promoted == [ip(1)]
    assert "FencedWithoutKubelet" in cluster.recorder.reasons()

    # the node beats again: not silent any more
    leases.beat("n0", "n1", "n2")
    await heartbeats.read_once()
    assert cluster.ctx.silent_nodes == {} and metrics.silent_nodes._value.get() == 0


async def test_an_unreachable_server_on_a_silent_node_keeps_the_failover_waiting(servers: FakeServers) -> None:
    cluster, leases, _, heartbeats = await heard_once(servers)
    servers.unreachable.add(ip(0))  # the node cut off: its server cannot be told to stop
    cluster.clock.advance(SILENT_AFTER)
    leases.beat("n1", "n2")
    await heartbeats.read_once()
    cluster.clock.advance(DELAY + 1)
    for _ in range(5):
        await cluster.reconcile(DB)
        cluster.clock.advance(5)
    assert status(cluster)["targetPrimary"] == pod_name(1) and status(cluster)["primary"] == pod_name(0)
    assert servers.promoted == []  # never two primaries: silence starts a failover, it never confirms a fence


async def test_nothing_is_read_without_standbys_and_a_failed_read_changes_nothing(servers: FakeServers) -> None:
    cluster = FakeCluster()
    leases, told = Leases("n0", "n1", "n2"), []
    heartbeats = reader(cluster, leases, told)
    await heartbeats.read_once()
    assert leases.lists == 0  # no database at all

    await three_instances(cluster, servers)
    on_nodes(cluster)
    await heartbeats.read_once()
    assert leases.lists == 1
    leases.error = ApiError(403, "Forbidden", "leases is forbidden")
    before = metrics.node_heartbeat_read_errors_total._value.get()
    for _ in range(3):
        cluster.clock.advance(SILENT_AFTER)
        await heartbeats.read_once()  # never raises
    assert metrics.node_heartbeat_read_errors_total._value.get() == before + 3
    assert told == [] and cluster.ctx.silent_nodes == {}  # nothing heard, nothing concluded

    leases.error = None  # readable again: renewTimes unchanged since the last good read are silence
    leases.beat("n1", "n2")
    await heartbeats.read_once()
    assert told == ["n0"]


async def test_the_check_off_reads_nothing(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    leases = Leases("n0")
    off = NodeHeartbeats(cluster.ctx, leases, silent_after=0, on_silent=lambda _n: None)
    await off.read_once()
    assert leases.lists == 0
