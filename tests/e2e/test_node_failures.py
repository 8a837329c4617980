"""Real PostgreSQL on three real nodes, operator installed in the cluster: the primary's node loses its kubelet.

`hack/real-node fault NODE stop` stops the kubelet and containerd of the primary's node: its containers run on and
serve, but the node's heartbeat Lease is no longer renewed. After --node-silent-seconds (20 s) the operator counts
the node silent and fails over (failoverDelaySeconds 0), before the controller-manager's grace period (60 s on the
local cluster) would mark the node NotReady: the new primary runs in less than that grace. The fence deletes the old
primary's pod, which stays terminating (no kubelet to stop it); the operator stops its server over SQL at once and
promotes once its address refuses connections (FencedWithoutKubelet), with no human. Asynchronous replication, a
writer through the Service on another node: every accepted write is there afterwards (the old primary's fast
shutdown sends its last WAL to the standbys still connected before it stops), and the old primary's address
refuses connections once a new primary runs (never two). Healed, the node's kubelet finishes the old pod, and the
old primary comes back as a standby of the new one (rewound), streaming.

A network cut of the primary's node (`cut`): nothing reaches its server. Hearing neither the operator nor a standby,
it stops itself (dataplane/self-fence.sh) within max(lease, wal_sender_timeout) plus a few seconds, read from this
host in its pod's run directory (the emptyDir on the node's disk): its clients get errors, not commits. The operator
cannot reach it, but once its lease has ended and no standby has received WAL for longer than wal_sender_timeout it
counts on that stop (FencedBySelfFence) and promotes the standby chosen with the node still cut off; the writer writes
to the new primary. Healed, the node's kubelet finishes the old pod and the old primary comes back as a standby;
every accepted write is there.

A power cut of the primary's node (`crash`) with wal_sender_timeout 0 (the old primary's own stop cannot be counted
on), the documented way on: the failover waits (FenceUnconfirmed) until a person taints the node
`node.kubernetes.io/out-of-service`; the control plane then removes its pods, the fence is confirmed
by the pod being gone, and the standby chosen is promoted with the node still down; every accepted write is there.

Throughout, a sampler asks every instance from the host, every 0.3 s, whether it is a primary (not in recovery):
the old primary is last seen a primary before the new one is first seen one (never two at once).

Disruptive (a node goes away) and local only (it runs hack/real-node on this host).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
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
from tests.e2e.test_node_maintenance import node_of, one_per_node, pods, reasons, whole_again
from tests.support.cluster import host_refuses, local_state_dir, real_node_fault
from tests.support.kube import kubectl, kubectl_json, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.disruptive, pytest.mark.local_only]

# the local cluster's node-monitor-grace-period (hack/cluster): a failover that waited for the node controller takes
# longer than this; one started by the node's silent heartbeat (20 s + the 5 s between reads + a stop, a promotion
# and the passes between them) does not
NODE_GRACE_S = 60.0


def messages(name: str, reason: str) -> list[str]:
    """The messages of the database's Events of `reason`."""
    events = kubectl_json("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    return [str(e.get("message") or "") for e in events if e.get("reason") == reason]


def three_with_a_writer(name: str, *, synchronous: bool = True, **spec: Any) -> tuple[str, str, str]:
    """A database of three instances, one per real node, failing over at once, and a pod on another node than the
    primary's writing through its Service: (the primary, its node, its address)."""
    one_per_node(name, replication={"synchronous": synchronous, "failoverDelaySeconds": 0}, **spec)
    primary = status(name)["primary"]
    node = node_of(name, primary)
    assert node is not None
    old_ip = str(pods(name)[primary]["status"]["podIP"])
    sql(name, "CREATE TABLE heartbeat (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp())")
    start_writer(name, avoid=node)
    return primary, node, old_ip


class PrimarySampler:
    """Every instance asked from this host, in turn, every SAMPLE_EVERY seconds, whether it is a primary; the
    times (monotonic) each was seen one."""

    SAMPLE_EVERY = 0.3

    def __init__(self, name: str) -> None:
        secret = kubectl_json("get", "secret", "-n", NS, f"{name}-superuser")["data"]
        self.user = base64.b64decode(secret["username"]).decode()
        self.password = base64.b64decode(secret["password"]).decode()
        self.ips = {pod: str(p["status"]["podIP"]) for pod, p in pods(name).items()}
        self.seen: dict[str, list[float]] = {pod: [] for pod in self.ips}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def primary(self, ip: str) -> bool:
        try:
            with psycopg.connect(host=ip, port=5432, user=self.user, password=self.password, dbname="postgres",
                                 connect_timeout=1, autocommit=True) as conn:
                row = conn.execute("SELECT NOT pg_is_in_recovery()").fetchone()
                return bool(row and row[0])
        except psycopg.Error:
            return False

    def run(self) -> None:
        while not self.stopped.is_set():
            for pod, ip in self.ips.items():
                if self.primary(ip):
                    self.seen[pod].append(time.monotonic())
            self.stopped.wait(self.SAMPLE_EVERY)

    def never_two(self, old: str, new: str) -> None:
        """The old primary was last seen a primary before the new one was first seen one."""
        assert self.seen[old] and self.seen[new], {pod: len(times) for pod, times in self.seen.items()}
        assert max(self.seen[old]) < min(self.seen[new]), "two instances were primaries at once"
        assert not [pod for pod, times in self.seen.items() if times and pod not in (old, new)]


@contextmanager
def sampling(name: str) -> Iterator[PrimarySampler]:
    sampler = PrimarySampler(name)
    sampler.thread.start()
    try:
        yield sampler
    finally:
        sampler.stopped.set()
        sampler.thread.join(timeout=30)


def degraded_reason(name: str) -> str | None:
    return next((c.get("reason") for c in status(name).get("conditions") or []
                 if c["type"] == "Degraded" and c["status"] == "True"), None)


def test_a_primary_whose_kubelet_stops_is_failed_over_without_a_human_and_comes_back_as_a_standby(
        installed: str) -> None:
    name = unique("nodeloss")
    faulted: str | None = None
    try:
        primary, node, old_ip = three_with_a_writer(name, synchronous=False)
        with sampling(name) as sampler:
            started = time.monotonic()
            real_node_fault(node, "stop")
            faulted = node
            wait_until(lambda: (st := status(name)).get("primary") != primary and not st.get("targetPrimary"),
                       timeout=NODE_GRACE_S + 150, interval=1.0, what="a new primary, with no human")
            took = time.monotonic() - started
            new_primary = status(name)["primary"]
            wait_accepted(name, timeout=120)
        sampler.never_two(primary, new_primary)
        assert node_of(name, new_primary) not in (None, node)
        seen = reasons(name)
        assert seen.count("FailoverStarted") == 1 and "FencedWithoutKubelet" in seen, seen
        assert any(f"runs on node {node}, which sends no heartbeat" in m for m in messages(name, "FailoverStarted"))
        assert host_refuses(old_ip, 5432), "the old primary's server still listens beside the new primary"

        real_node_fault(node, "heal")
        faulted = None
        whole_again(name, new_primary)
        downtime, accepted = write_downtime(name)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
        # asynchronous, and still every accepted write: the old primary's fast shutdown sent its last WAL to the
        # standbys before it stopped
        assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted
        print(f"\nkubelet of the primary's node {node} stopped: new primary {new_primary} after {took:.0f} s;"
              f" longest time without an accepted write: {downtime:.1f} s")
        assert took < NODE_GRACE_S, f"the failover took {took:.0f} s: not started by the node's silent heartbeat"
    finally:
        if faulted is not None:
            real_node_fault(faulted, "heal")
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)


def test_a_primary_cut_off_stops_itself_and_is_failed_over_with_its_node_still_cut_off(installed: str) -> None:
    name = unique("nodecut")
    faulted: str | None = None
    try:
        primary, node, _ = three_with_a_writer(name)
        fenced_marker = run_dir_on_host(node, pods(name)[primary]) / "sampledb-self-fenced"
        assert not fenced_marker.exists()
        with sampling(name) as sampler:
            real_node_fault(node, "cut")
            faulted = node
            cut_at = uptime_s()
            wait_until(lambda: status(name).get("targetPrimary"), timeout=180, interval=1.0,
                       what="the failover started (the node silent)")
            target = status(name)["targetPrimary"]
            assert not sampler.seen[target], "a standby was promoted while the old primary may still run"
            # cut off from the operator and from its standbys, the old primary stops itself
            wait_until(fenced_marker.exists, timeout=SELF_FENCE_BOUND_S + 10, interval=1.0,
                       what="the cut-off primary stopped by its self-fence")
            marker = fenced_marker.read_text()  # "self-fenced at uptime <ms> ms: <why>" (the host's uptime)
            assert "no standby receives WAL" in marker, marker
            stopped = int(marker.split()[3]) / 1000 - cut_at
            assert stopped <= SELF_FENCE_BOUND_S, marker
            # and the operator, which cannot reach it, counts on that stop once its bound has passed
            wait_until(lambda: (s := status(name)).get("primary") == target and not s.get("targetPrimary"),
                       timeout=PROMOTED_BOUND_S, interval=1.0, what="the failover done with the node still cut off")
            promoted = uptime_s() - cut_at
            assert "FencedBySelfFence" in reasons(name) and "FencedWithoutKubelet" not in reasons(name)
            assert pods(name)[primary]["metadata"]["annotations"].get("sampledb.io/server-stopped-itself")
            wait_accepted(name, timeout=120)  # the writer writes to the new primary, the node still cut off
            print(f"\nthe cut-off primary {primary} stopped itself {stopped:.1f} s after the cut; {target} was the"
                  f" primary {promoted:.0f} s after it")

            real_node_fault(node, "heal")
            faulted = None
        sampler.never_two(primary, target)
        whole_again(name, target)
        wait_accepted(name, timeout=120)
        downtime, accepted = write_downtime(name)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
        assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # synchronous: every accepted write
        assert degraded_reason(name) is None
        print(f"longest time without an accepted write: {downtime:.1f} s")
    finally:
        if faulted is not None:
            real_node_fault(faulted, "heal")
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)


# a cut-off primary stops itself once both its lease (45 s past the last renewal, every 10 s) and its WAL senders
# (wal_sender_timeout, 15 s) have ended, within a few seconds more (self-fence.sh's look, the immediate shutdown)
SELF_FENCE_BOUND_S = 45 + 7
# the operator promotes once the old primary's lease has ended and no standby has received WAL for wal_sender_timeout
# (counted from 10 s after the old pod's deletion, itself about 25 s after the cut), plus 10 s: about 60 s
PROMOTED_BOUND_S = 120


def uptime_s() -> float:
    """This host's uptime, the clock of the self-fence's marker (the real nodes share this host's kernel)."""
    return float(Path("/proc/uptime").read_text().split()[0])


def run_dir_on_host(node: str, pod: dict[str, Any]) -> Path:
    """A real node's pod's run directory (its emptyDir `run`) on this host's disk, under the node's kubelet."""
    return (local_state_dir() / "node" / node / "kubelet" / "pods" / pod["metadata"]["uid"] / "volumes"
            / "kubernetes.io~empty-dir" / "run")


OUT_OF_SERVICE = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"


def test_a_powered_off_primary_is_failed_over_once_a_person_taints_its_node_out_of_service(installed: str) -> None:
    """The documented way on for a node certainly down when the old primary's own stop cannot be counted on (here:
    wal_sender_timeout 0, WAL senders that never time out): the failover waits (FenceUnconfirmed) until a person
    taints the node out-of-service; the control plane then removes its pods, the fence is confirmed by the pod being
    gone, and the standby chosen is promoted with the node still down. Synchronous: every accepted write is there."""
    name = unique("nodeoff")
    faulted: str | None = None
    tainted: str | None = None
    try:
        primary, node, _ = three_with_a_writer(name, parameters={"wal_sender_timeout": "0"})
        with sampling(name) as sampler:
            real_node_fault(node, "crash")  # every process of the node killed, its network down
            faulted = node
            wait_until(lambda: degraded_reason(name) == "FenceUnconfirmed", timeout=240, interval=1.0,
                       what="Degraded/FenceUnconfirmed")
            target = status(name)["targetPrimary"]
            kubectl("taint", "node", node, OUT_OF_SERVICE)
            tainted = node
            wait_until(lambda: (s := status(name)).get("primary") == target and not s.get("targetPrimary"),
                       timeout=240, interval=1.0, what="the failover done with the node still down")
            wait_accepted(name, timeout=120)
        sampler.never_two(primary, target)
        assert "FencedWithoutKubelet" not in reasons(name)  # the pod went: no stop over SQL was needed

        real_node_fault(node, "heal")
        faulted = None
        kubectl("taint", "node", node, f"{OUT_OF_SERVICE}-")
        tainted = None
        whole_again(name, target)
        _, accepted = write_downtime(name)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
        assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # synchronous: every accepted write
    finally:
        if faulted is not None:
            real_node_fault(faulted, "heal")
        if tainted is not None:
            kubectl("taint", "node", tainted, f"{OUT_OF_SERVICE}-", check=False)
        kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--ignore-not-found", "--wait=false", check=False)
        delete(name)
