"""Hibernation on the fake cluster: every instance stopped through its StatefulSet, volumes and primary kept, the
status Hibernated with no instance listed; waiting while a Job runs; a bad value refused; the wake starts the
instances with no failover while the primary starts. (A restart asked for: test_rolling_restart.py.)"""

from __future__ import annotations

from tests.support.fake_cluster import MANAGED_LABEL, NS, FakeCluster, condition
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    DELAY,
    POD,
    PVC,
    FakeServers,
    pod_name,
    replicas,
    run_pod,
    status,
    sts_name,
    three_instances,
)

from sampledb_operator.decide.replicas import hibernation

STS = "StatefulSet"


def annotate(cluster: FakeCluster, value: str | None, key: str = hibernation.HIBERNATION_ANNOTATION) -> None:
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {key: value}}})


def hibernated_condition(cluster: FakeCluster) -> tuple[str, str]:
    cond = condition(cluster.get("SampleDB", DB), "Hibernated")
    return cond.get("status", ""), cond.get("reason", "")


async def test_hibernation_stops_every_instance_keeps_the_volumes_and_the_primary(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    claims = sorted(p["metadata"]["name"] for p in cluster.of_kind(PVC))
    annotate(cluster, "on")
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [0, 0, 0]
    assert cluster.recorder.reasons().count("Hibernating") == 1
    st = status(cluster)
    assert st["phase"] == "Hibernated" and st["instances"] == [] and st["readyInstances"] == "0/3"
    assert st["primary"] == pod_name(0)
    assert hibernated_condition(cluster) == ("True", "Hibernated")
    assert "3 pods still stopping" in condition(cluster.get("SampleDB", DB), "Hibernated")["message"]
    assert condition(cluster.get("SampleDB", DB), "Ready")["reason"] == "Hibernated"
    # the pods go (the StatefulSet controller's work): no failover, nothing applied, nothing deleted
    for i in range(3):
        cluster.remove((POD, NS, pod_name(i)))
        servers.silent(i)
    writes = len(cluster.written())
    cluster.clock.advance(DELAY * 10)
    await cluster.reconcile(DB)
    assert "FailoverStarted" not in cluster.recorder.reasons()
    assert "stopping" not in condition(cluster.get("SampleDB", DB), "Hibernated")["message"]
    assert [w for w in cluster.written()[writes:] if w[1] != "SampleDB"] == []
    assert sorted(p["metadata"]["name"] for p in cluster.of_kind(PVC)) == claims

    # wake: the instances start; no failover while the primary is not ready yet, even past the delay
    annotate(cluster, None)
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [1, 1, 1]
    assert hibernated_condition(cluster) == ("False", "Waking")
    run_pod(cluster, 0, ready=False)
    servers.standby(1, 90)
    servers.standby(2, 80)
    run_pod(cluster, 1)
    run_pod(cluster, 2)
    cluster.clock.advance(DELAY * 3)
    await cluster.reconcile(DB)
    assert "FailoverStarted" not in cluster.recorder.reasons()
    assert hibernated_condition(cluster) == ("False", "Waking")
    servers.primary(0)
    run_pod(cluster, 0)
    for i in range(3):
        cluster.statefulset_ready(sts_name(i))
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert hibernated_condition(cluster) == ("False", "Awake")
    assert status(cluster)["phase"] == "Running" and status(cluster)["primary"] == pod_name(0)
    # awake: a failover is possible again
    servers.silent(0)
    run_pod(cluster, 0, ready=False)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert "FailoverStarted" in cluster.recorder.reasons()


async def test_hibernation_waits_for_a_running_job_then_stops(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    cluster.put("Job", {"metadata": {"name": f"{DB}-backup-1", "labels": {"sampledb.io/database": DB,
                                                                       MANAGED_LABEL: "sampledb-operator"}},
                        "status": {"active": 1}})
    annotate(cluster, "on")
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [1, 1, 1]
    assert hibernated_condition(cluster) == ("False", "HibernationPending")
    assert f"{DB}-backup-1" in condition(cluster.get("SampleDB", DB), "Hibernated")["message"]
    assert status(cluster)["phase"] == "Running"
    cluster.finish_job(f"{DB}-backup-1")
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [0, 0, 0]
    assert status(cluster)["phase"] == "Hibernated"


async def test_a_bad_value_is_refused_and_changes_nothing(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    annotate(cluster, "sleep")
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [1, 1, 1]
    degraded = condition(cluster.get("SampleDB", DB), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidHibernation")
    assert "'sleep'" in degraded["message"]
    assert condition(cluster.get("SampleDB", DB), "Hibernated") == {}
    annotate(cluster, "off")
    await cluster.reconcile(DB)
    assert condition(cluster.get("SampleDB", DB), "Degraded")["status"] == "False"


async def test_deleting_a_hibernated_database_with_a_snapshot_starts_it_for_the_snapshot(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    annotate(cluster, "on")
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [0, 0, 0]
    obj = cluster.get("SampleDB", DB)
    assert obj is not None and (obj["spec"].get("deletionPolicy") or "Snapshot") == "Snapshot"
    cluster.patch("SampleDB", DB, {"metadata": {"deletionTimestamp": "2026-12-06T00:00:00Z"}})
    await cluster.reconcile(DB)
    assert [replicas(cluster, i) for i in range(3)] == [1, 1, 1]
    assert "WakingForSnapshot" in cluster.recorder.reasons()
    assert any(b["metadata"]["name"].startswith(DB) for b in cluster.of_kind("SampleDBBackup"))
