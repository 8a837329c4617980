"""Real PostgreSQL on three real nodes, operator installed in the cluster: the primary's node loses its kubelet.

`hack/real-node fault NODE stop` stops the kubelet and containerd of the primary's node: its containers run on and
serve, but the control plane hears nothing of the node, which goes NotReady after the controller-manager's grace
period; the node controller marks its pods not ready, and the operator fails over (failoverDelaySeconds 0). The
fence deletes the old primary's pod, which stays terminating (no kubelet to stop it); past its deletion's deadline
the operator stops its server over SQL and promotes once its address refuses connections (FencedWithoutKubelet),
with no human. Synchronous replication, a writer through the Service on another node: every accepted write is
there afterwards, and the old primary's address refuses connections once a new primary runs (never two). Healed, the
node's kubelet finishes the old pod, and the old primary comes back as a standby of the new one (rewound), streaming.

A network cut of the primary's node (`cut`): its server runs on but nothing reaches it, so its stop cannot be
confirmed; the failover starts and waits (Degraded/FenceUnconfirmed), never promoting beside a primary that may still
run. Healed, the node's kubelet finishes the old pod, the fence is confirmed, the standby chosen is promoted and
the old primary comes back as its standby; every accepted write is there.

Disruptive (a node goes away) and local only (it runs hack/real-node on this host).
"""

from __future__ import annotations

import time

import pytest
from tests.e2e.real_data import (
    NS,
    delete,
    sql,
    start_writer,
    status,
    unique,
    wait_accepted,
    write_downtime,
)
from tests.e2e.test_node_maintenance import node_of, one_per_node, pods, reasons
from tests.support.cluster import host_refuses, real_node_fault
from tests.support.kube import kubectl, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.local_only]

# node-monitor-grace-period (60 s, hack/cluster) + the fence's grace (5 s) + KUBELET_SILENT_SECONDS (10 s) + a stop,
# a promotion and the passes between them
FAILOVER_BOUND_S = 150.0


def three_with_a_writer(name: str) -> tuple[str, str, str]:
    """A synchronous database of three instances, one per real node, failing over at once, and a pod on another
    node than the primary's writing through its Service: (the primary, its node, its address)."""
    one_per_node(name, replication={"synchronous": True, "failoverDelaySeconds": 0})
    primary = status(name)["primary"]
    node = node_of(name, primary)
    assert node is not None
    old_ip = str(pods(name)[primary]["status"]["podIP"])
    sql(name, "CREATE TABLE heartbeat (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())")
    start_writer(name, avoid=node)
    return primary, node, old_ip


def degraded_reason(name: str) -> str | None:
    return next((c.get("reason") for c in status(name).get("conditions") or []
                 if c["type"] == "Degraded" and c["status"] == "True"), None)


def test_a_primary_whose_kubelet_stops_is_failed_over_without_a_human_and_comes_back_as_a_standby(
        installed: str) -> None:
    name = unique("nodeloss")
    faulted: str | None = None
    try:
        primary, node, old_ip = three_with_a_writer(name)
        started = time.monotonic()
        real_node_fault(node, "stop")
        faulted = node
        wait_until(lambda: (st := status(name)).get("primary") != primary and not st.get("targetPrimary"),
                   timeout=FAILOVER_BOUND_S + 60, interval=1.0, what="a new primary, with no human")
        took = time.monotonic() - started
        new_primary = status(name)["primary"]
        assert node_of(name, new_primary) not in (None, node)
        seen = reasons(name)
        assert seen.count("FailoverStarted") == 1 and "FencedWithoutKubelet" in seen, seen
        assert host_refuses(old_ip, 5432), "the old primary's server still listens beside the new primary"
        wait_accepted(name, timeout=120)

        real_node_fault(node, "heal")
        faulted = None
        wait_until(lambda: status(name).get("readyInstances") == "3/3", timeout=300,
                   what="the old primary back as a standby")
        wait_until(lambda: sql(name, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                               superuser=True) == "2", timeout=180, what="both standbys streaming")
        assert status(name)["primary"] == new_primary
        downtime, accepted = write_downtime(name)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
        assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # synchronous: every accepted write
        print(f"\nkubelet of the primary's node {node} stopped: new primary {new_primary} after {took:.0f} s;"
              f" longest time without an accepted write: {downtime:.1f} s")
        assert took < FAILOVER_BOUND_S, f"the failover took {took:.0f} s"
    finally:
        if faulted is not None:
            real_node_fault(faulted, "heal")
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)


def test_a_primary_cut_off_is_never_promoted_over_and_the_failover_ends_once_the_node_is_back(installed: str) -> None:
    name = unique("nodecut")
    faulted: str | None = None
    try:
        primary, node, _ = three_with_a_writer(name)
        real_node_fault(node, "cut")
        faulted = node
        wait_until(lambda: status(name).get("targetPrimary"), timeout=180, interval=1.0,
                   what="the failover started (the node NotReady)")
        target = status(name)["targetPrimary"]
        wait_until(lambda: degraded_reason(name) == "FenceUnconfirmed", timeout=120, interval=1.0,
                   what="Degraded/FenceUnconfirmed")
        st = status(name)
        assert (st["primary"], st["targetPrimary"]) == (primary, target)  # waiting: nothing promoted
        in_recovery = kubectl("exec", "-n", NS, target, "-c", "postgres", "--", "psql", "-X", "-U", "postgres",
                              "-qAt", "-c", "SELECT pg_is_in_recovery()").stdout.strip()
        assert in_recovery == "t", "a standby was promoted while the old primary may still run"
        assert "FencedWithoutKubelet" not in reasons(name)

        real_node_fault(node, "heal")
        faulted = None
        wait_until(lambda: (s := status(name)).get("primary") == target and not s.get("targetPrimary"),
                   timeout=300, interval=1.0, what="the failover done once the node is back")
        wait_until(lambda: status(name).get("readyInstances") == "3/3", timeout=300,
                   what="the old primary back as a standby")
        wait_until(lambda: sql(name, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                               superuser=True) == "2", timeout=180, what="both standbys streaming")
        wait_accepted(name, timeout=120)
        _, accepted = write_downtime(name)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
        assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # synchronous: every accepted write
        assert degraded_reason(name) is None
    finally:
        if faulted is not None:
            real_node_fault(faulted, "heal")
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)
