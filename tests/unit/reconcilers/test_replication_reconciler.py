"""reconcilers/replication.py on the fake cluster, with the SQL layer (pg/client.py) replaced by a script.

Each pod's server answers what `FakeServers` says for its pod IP; pg_promote() flips a standby to a
primary. What is checked is the I/O around decide/replicas/replication.py: the instances' StatefulSets and
volumes, the Services' role selectors, role labels on pods, the fence (StatefulSet at 0, pod deleted)
before a promotion, the status record, the live-read guard against a stale cache, scale-down, and a
major upgrade with standbys (started; held while the primary is not the first instance).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.support.fake_cluster import FakeCluster, Obj, condition, sampledb

from sampledb_operator.decide.labels import PRIMARY_ROLE, REPLICA_ROLE
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.model import names
from sampledb_operator.model.instances import LeaseRenewal, ServerState
from sampledb_operator.pg import client as pg

DB = "orders"
STS, PVC, POD = "StatefulSet", "PersistentVolumeClaim", "Pod"
DELAY = 10


def sts_name(i: int) -> str:
    return names.instance_statefulset_name(DB, i)


def pod_name(i: int) -> str:
    return names.instance_pod_name(DB, i)


def ip(i: int) -> str:
    return f"10.0.0.{10 + i}"


class FakeServers:
    """The servers' answers by pod IP (absent: no answer), and the SQL calls made."""

    def __init__(self) -> None:
        self.states: dict[str, ServerState] = {}
        self.unreachable: set[str] = set()  # hosts that do not answer at all (a connection times out)
        self.stopped: list[str] = []  # stop_server calls
        self.promoted: list[str] = []
        self.slots: list[tuple[str, frozenset[str]]] = []
        self.reloaded: list[str] = []
        self.renewed: list[str] = []  # renew_lease calls, by host, in order (with promote: "promote <host>")

    def primary(self, i: int, lsn: int = 100) -> None:
        self.states[ip(i)] = ServerState(in_recovery=False, current_lsn=lsn)

    def standby(self, i: int, lsn: int = 90, *, receiving: bool = True) -> None:
        """Instance i a standby at `lsn`, its WAL receiver streaming from a primary unless `receiving` is False."""
        self.states[ip(i)] = ServerState(in_recovery=True, receive_lsn=lsn, replay_lsn=lsn, receiving=receiving)

    def silent(self, i: int) -> None:
        self.states.pop(ip(i), None)

    async def server_state(self, target: pg.Target, within: float = 3.0) -> ServerState | None:
        return None if target.host in self.unreachable else self.states.get(target.host)

    async def stop_server(self, target: pg.Target, within: float = 5.0) -> bool:
        """A server that answers takes the order and stops; none other does."""
        if target.host in self.unreachable or target.host not in self.states:
            return False
        self.stopped.append(target.host)
        self.states.pop(target.host)
        return True

    async def refused_within(self, target: pg.Target, within: float) -> bool:
        """A reachable host whose server does not run refuses; an unreachable one says nothing."""
        return target.host not in self.unreachable and target.host not in self.states

    async def renew_lease(self, target: pg.Target, ttl: float, transit: float, sending: Callable[[], None],
                          within: float = 5.0) -> LeaseRenewal | None:
        """A server that answers renews, its self-fence watching, wal_sender_timeout 60 s; one that does not is
        never sent the renewal."""
        self.renewed.append(target.host)
        if target.host not in self.states or target.host in self.unreachable:
            return None
        sending()
        return LeaseRenewal(watched=True, sender_timeout=60.0)

    async def disarm_lease(self, target: pg.Target, within: float = 5.0) -> bool:
        self.renewed.append(f"disarm {target.host}")
        return target.host in self.states

    async def promote(self, target: pg.Target, within: float = 60.0) -> bool:
        self.promoted.append(target.host)
        self.renewed.append(f"promote {target.host}")
        state = self.states.get(target.host)
        if state is None or not state.in_recovery:
            return False
        self.states[target.host] = ServerState(in_recovery=False, current_lsn=state.position)
        return True

    async def sync_slots(self, target: pg.Target, wanted: frozenset[str], within: float = 5.0) -> bool:
        self.slots.append((target.host, wanted))
        return True

    async def reload_config(self, target: pg.Target, within: float = 5.0) -> bool:
        self.reloaded.append(target.host)
        return target.host in self.states


def stamp(cluster: FakeCluster) -> str:
    return cluster.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def run_pod(cluster: FakeCluster, i: int, *, ready: bool = True) -> Obj:
    """Instance i's pod as the StatefulSet controller and kubelet make it: the template's labels, an IP, Ready."""
    sts = cluster.get(STS, sts_name(i))
    assert sts is not None, sts_name(i)
    labels = dict(sts["spec"]["template"]["metadata"]["labels"])
    have = cluster.get(POD, pod_name(i))
    annotations: dict[str, str] = {}
    if have is not None:  # keep the labels and annotations the operator set
        labels = dict(have["metadata"].get("labels") or {})
        annotations = dict(have["metadata"].get("annotations") or {})
    return cluster.put(POD, {
        "metadata": {"name": pod_name(i), "labels": labels, "annotations": annotations},
        "status": {"podIP": ip(i), "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp(cluster)}]}})


def role(cluster: FakeCluster, i: int) -> str | None:
    obj = cluster.get(POD, pod_name(i))
    return None if obj is None else (obj["metadata"].get("labels") or {}).get(names.ROLE_LABEL)


def status(cluster: FakeCluster) -> dict[str, Any]:
    obj = cluster.get("SampleDB", DB)
    assert obj is not None
    return dict(obj.get("status") or {})


def replicas(cluster: FakeCluster, i: int) -> int | None:
    sts = cluster.get(STS, sts_name(i))
    return None if sts is None else int(sts["spec"].get("replicas", 1))


async def three_instances(cluster: FakeCluster, servers: FakeServers, **spec: Any) -> None:
    """A running database of three instances: 0 the primary, 1 and 2 standbys at 90 and 80."""
    spec = {"replicas": 3, "replication": {"failoverDelaySeconds": DELAY}, **spec}
    cluster.put("SampleDB", sampledb(DB, **spec))
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    for i in range(3):
        cluster.bind(names.instance_data_pvc_name(DB, i))
        cluster.statefulset_ready(sts_name(i))
    cluster.bind(names.backup_pvc_name(DB))
    servers.primary(0)
    servers.standby(1, 90)
    servers.standby(2, 80)
    for i in range(3):
        run_pod(cluster, i)
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert status(cluster)["phase"] == "Running", status(cluster)


async def test_three_replicas_make_three_instances_and_role_services(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    assert [sts_name(i) for i in range(3)] == [DB, f"{DB}-i1", f"{DB}-i2"]
    assert {s["metadata"]["name"] for s in cluster.of_kind(STS)} == {DB, f"{DB}-i1", f"{DB}-i2"}
    volumes = {p["metadata"]["name"] for p in cluster.of_kind(PVC)}
    assert {f"data-{DB}-0", f"data-{DB}-i1-0", f"data-{DB}-i2-0"} <= volumes
    assert [replicas(cluster, i) for i in range(3)] == [1, 1, 1]
    client, ro = cluster.get("Service", DB), cluster.get("Service", names.replica_service_name(DB))
    assert client is not None and client["spec"]["selector"][names.ROLE_LABEL] == PRIMARY_ROLE
    assert ro is not None and ro["spec"]["selector"][names.ROLE_LABEL] == REPLICA_ROLE
    assert [role(cluster, i) for i in range(3)] == [PRIMARY_ROLE, REPLICA_ROLE, REPLICA_ROLE]
    st = status(cluster)
    assert (st["primary"], st.get("targetPrimary"), st["readyInstances"]) == (pod_name(0), None, "3/3")
    assert [(x["name"], x["role"]) for x in st["instances"]] == [
        (pod_name(0), "primary"), (pod_name(1), "replica"), (pod_name(2), "replica")]
    assert servers.slots and servers.slots[-1] == (ip(0), frozenset({"sdb_i1", "sdb_i2"}))
    assert servers.promoted == []


async def test_failover_fences_then_promotes_then_records_the_new_primary(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)

    # The primary's server dies; its pod turns unready. Within the delay: nothing but a look later.
    servers.silent(0)
    run_pod(cluster, 0, ready=False)
    await cluster.reconcile(DB)
    assert "FailoverStarted" not in cluster.recorder.reasons()
    assert replicas(cluster, 0) == 1 and cluster.get(POD, pod_name(0)) is not None

    # Past the delay: fenced (StatefulSet at 0, pod deleted) and the most advanced standby is the target.
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert "FailoverStarted" in cluster.recorder.reasons()
    assert replicas(cluster, 0) == 0
    assert ("delete", POD, pod_name(0)) in cluster.written()
    assert cluster.get(POD, pod_name(0)) is None
    st = status(cluster)
    assert (st["primary"], st["targetPrimary"]) == (pod_name(0), pod_name(1))
    assert servers.promoted == []  # the fence was not yet confirmed when this pass decided
    assert all(role(cluster, i) != PRIMARY_ROLE for i in range(3))

    # The next pass reads live that the old primary is gone: the target is promoted.
    await cluster.reconcile(DB)
    assert servers.promoted == [ip(1)]
    assert status(cluster)["targetPrimary"] == pod_name(1)

    # Its server now says it is the primary: recorded; the Services follow the labels.
    await cluster.reconcile(DB)
    assert "Promoted" in cluster.recorder.reasons()
    st = status(cluster)
    assert (st["primary"], st.get("targetPrimary")) == (pod_name(1), None)
    assert role(cluster, 1) == PRIMARY_ROLE and role(cluster, 2) == REPLICA_ROLE
    assert replicas(cluster, 0) == 0  # still fenced in the pass that recorded the new primary

    # Then the old primary comes back, as a standby; the new primary keeps its slots.
    await cluster.reconcile(DB)
    assert replicas(cluster, 0) == 1
    assert servers.slots[-1] == (ip(1), frozenset({"sdb_i0", "sdb_i2"}))
    assert servers.promoted == [ip(1)]  # once


async def test_no_promotion_while_the_old_primary_pod_still_exists(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.silent(0)
    run_pod(cluster, 0, ready=False)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert status(cluster)["targetPrimary"] == pod_name(1)

    # The kubelet has not stopped it yet: the pod is still there, terminating (a finalizer holds it).
    cluster.put(POD, {"metadata": {"name": pod_name(0), "finalizers": ["example.com/hold"],
                                   "deletionTimestamp": stamp(cluster), "deletionGracePeriodSeconds": 5,
                                   "labels": {**cluster.get(STS, DB)["spec"]["template"]["metadata"]["labels"]}},
                      "status": {"podIP": ip(0)}})
    for _ in range(2):
        await cluster.reconcile(DB)
    assert servers.promoted == []
    assert status(cluster)["targetPrimary"] == pod_name(1)
    # With the pod gone but its StatefulSet scaled up again (by hand), the fence is not confirmed either.
    cluster.remove((POD, "shop", pod_name(0)))
    cluster.patch(STS, DB, {"spec": {"replicas": 1}})
    await cluster.reconcile(DB)
    assert servers.promoted == []
    assert replicas(cluster, 0) == 0  # the operator fenced it again; the next pass confirms the fence
    await cluster.reconcile(DB)
    assert servers.promoted == [ip(1)]


async def test_a_stale_cached_sampledb_never_fences_or_promotes(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.silent(0)
    run_pod(cluster, 0, ready=False)
    cluster.clock.advance(DELAY + 1)
    cluster.freeze_cache()
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {"note": "a newer object"}}})
    writes = len(cluster.writes)

    await cluster.reconcile(DB)
    assert replicas(cluster, 0) == 1
    assert cluster.get(POD, pod_name(0)) is not None
    assert not [w for w in cluster.writes[writes:] if w[1] == POD]
    assert "FailoverStarted" not in cluster.recorder.reasons()
    assert servers.promoted == []
    assert status(cluster).get("targetPrimary") is None

    # With the cache caught up, the failover goes ahead.
    cluster.sync_cache()
    await cluster.reconcile(DB)
    assert "FailoverStarted" in cluster.recorder.reasons() and replicas(cluster, 0) == 0


async def test_a_stale_cache_during_a_failover_does_not_promote(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    servers.silent(0)
    run_pod(cluster, 0, ready=False)
    cluster.clock.advance(DELAY + 1)
    await cluster.reconcile(DB)
    assert status(cluster)["targetPrimary"] == pod_name(1)
    cluster.freeze_cache()
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {"note": "a newer object"}}})
    await cluster.reconcile(DB)
    assert servers.promoted == []
    cluster.sync_cache()
    await cluster.reconcile(DB)
    assert servers.promoted == [ip(1)]


async def test_switchover_by_annotation_stops_the_old_primary_without_deleting_its_pod(
        servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: pod_name(2)}}})
    await cluster.reconcile(DB)
    assert "SwitchoverStarted" in cluster.recorder.reasons()
    assert replicas(cluster, 0) == 0
    assert ("delete", POD, pod_name(0)) not in cluster.written()  # its StatefulSet stops it cleanly
    assert status(cluster)["targetPrimary"] == pod_name(2)

    cluster.remove((POD, "shop", pod_name(0)))  # the StatefulSet controller stopped it
    servers.silent(0)
    await cluster.reconcile(DB)
    assert servers.promoted == [ip(2)]
    await cluster.reconcile(DB)
    assert status(cluster)["primary"] == pod_name(2)
    obj = cluster.get("SampleDB", DB)
    assert obj is not None and rep.SWITCHOVER_ANNOTATION in obj["metadata"].get("annotations", {})
    await cluster.reconcile(DB)  # the status records it: the annotation goes
    obj = cluster.get("SampleDB", DB)
    assert obj is not None and rep.SWITCHOVER_ANNOTATION not in (obj["metadata"].get("annotations") or {})
    assert role(cluster, 2) == PRIMARY_ROLE


@pytest.mark.parametrize(("policy", "kept"), [("Delete", False), ("Retain", True)])
async def test_scale_down_removes_the_other_instances_and_their_volumes_per_the_policy(
        servers: FakeServers, policy: str, kept: bool) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers, deletionPolicy=policy)
    cluster.patch("SampleDB", DB, {"spec": {"replicas": 1}})
    await cluster.reconcile(DB)
    assert {s["metadata"]["name"] for s in cluster.of_kind(STS)} == {DB}
    for i in (1, 2):
        assert (cluster.get(PVC, names.instance_data_pvc_name(DB, i)) is not None) is kept
    assert cluster.get(PVC, names.data_pvc_name(DB)) is not None
    assert cluster.recorder.reasons().count("InstanceRemoved") == 2
    assert servers.slots[-1] == (ip(0), frozenset())
    assert status(cluster)["primary"] == pod_name(0)


async def test_a_major_upgrade_with_standbys_starts_with_its_backup(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    cluster.patch("SampleDB", DB, {"spec": {"version": "17.2"}})
    await cluster.reconcile(DB)
    obj = cluster.get("SampleDB", DB)
    upgrading = condition(obj, "Upgrading")
    assert upgrading.get("reason") != "UpgradeBlocked" and condition(obj, "Degraded").get("status") != "True"
    backups = [b for b in cluster.of_kind("SampleDBBackup") if b["spec"].get("reason") == "pre-upgrade"]
    assert len(backups) == 1  # the first step of the upgrade, as with one instance


async def test_a_major_upgrade_waits_for_the_primary_on_the_first_instance(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: pod_name(2)}}})
    await cluster.reconcile(DB)
    cluster.remove((POD, "shop", pod_name(0)))
    servers.silent(0)
    for _ in range(3):
        await cluster.reconcile(DB)
    assert status(cluster)["primary"] == pod_name(2)
    cluster.patch("SampleDB", DB, {"spec": {"version": "17.2"}})
    await cluster.reconcile(DB)
    upgrading = condition(cluster.get("SampleDB", DB), "Upgrading")
    assert (upgrading["status"], upgrading["reason"]) == ("False", "UpgradeBlocked")
    assert "switch over to the first instance" in upgrading["message"]
    assert not [j for j in cluster.of_kind("Job") if "upgrade" in j["metadata"]["name"]]


async def test_an_inactive_slot_holding_wal_is_in_the_status_and_degraded(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)  # 1Gi data volumes
    servers.states[ip(0)] = ServerState(in_recovery=False, current_lsn=100, idle_slot="cdc",
                                        idle_slot_retained=300 * 2**20)
    await cluster.reconcile(DB)
    primary = next(i for i in status(cluster)["instances"] if i["role"] == "primary")
    assert (primary["inactiveSlot"], primary["inactiveSlotRetainedBytes"]) == ("cdc", 300 * 2**20)
    degraded = condition(cluster.get("SampleDB", DB), "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InactiveSlotRetainingWAL")
    servers.primary(0)  # the slot dropped
    await cluster.reconcile(DB)
    assert condition(cluster.get("SampleDB", DB), "Degraded")["status"] == "False"


async def test_a_switchover_pauses_the_poolers_pools_before_the_old_primary_stops_and_resumes_them_after(
        servers: FakeServers, monkeypatch: pytest.MonkeyPatch) -> None:
    from sampledb_operator.pg import pooler_admin

    sent: list[tuple[str, str, int | None]] = []  # (pooler pod IP, command, the old primary's replicas then)

    async def command(host: str, password: str, statement: str, within: float = 3.0) -> bool:
        sent.append((host, statement, replicas(cluster, 0)))
        return True

    monkeypatch.setattr(pooler_admin, "command", command)
    cluster = FakeCluster()
    await three_instances(cluster, servers, pooler={"instances": 1})
    pooler = cluster.get("Deployment", names.pooler_name(DB))
    assert pooler is not None
    cluster.put(POD, {"metadata": {"name": "orders-pooler-a", "labels": pooler["spec"]["selector"]["matchLabels"]},
                      "status": {"podIP": "10.0.1.1", "conditions": [{"type": "Ready", "status": "True"}]}})
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {rep.SWITCHOVER_ANNOTATION: pod_name(2)}}})
    await cluster.reconcile(DB)  # started and recorded; the old primary untouched until the record is stored
    assert status(cluster)["targetPrimary"] == pod_name(2)
    assert status(cluster)["poolerPause"] == {"target": pod_name(2), "resumed": False}
    assert replicas(cluster, 0) == 1 and role(cluster, 0) == PRIMARY_ROLE and sent == []
    await cluster.reconcile(DB)  # paused while the old primary still ran, then stopped
    assert sent == [("10.0.1.1", "PAUSE", 1)] and replicas(cluster, 0) == 0
    assert status(cluster)["poolerPause"]["pausedAt"]

    cluster.remove((POD, "shop", pod_name(0)))  # the StatefulSet controller stopped it
    servers.silent(0)
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert status(cluster)["primary"] == pod_name(2)
    assert sent[-1][:2] == ("10.0.1.1", "RESUME") and "poolerPause" not in status(cluster)
    assert [s for _, s, _ in sent].count("RESUME") == 1
