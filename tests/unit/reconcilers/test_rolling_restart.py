"""Rolling restarts on the fake cluster (reconcilers/rollout.py): a restart asked for on a database of three
instances rolls the standbys one at a time, each once its predecessor runs ready, then switches over to an
upgraded standby so that the old primary restarts last, as a standby, stopped cleanly; one instance restarts in
place at once; a second pass asks for nothing more. A new operator's template (the spec unchanged) rolls one
database at a time, or, with --operator-rollouts=0, only once a restart is asked; the OperatorUpdate condition
says so."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.fake_cluster import FakeCluster, condition, running_database
from tests.unit.reconcilers.test_replication_reconciler import (
    DB,
    POD,
    FakeServers,
    ip,
    pod_name,
    replicas,
    run_pod,
    status,
    sts_name,
    three_instances,
)

from sampledb_operator.decide.children import pgconfig
from sampledb_operator.decide.labels import RESTART_ANNOTATION, RESTARTED_FOR_ANNOTATION
from sampledb_operator.decide.replicas import operator_rollout as op
from sampledb_operator.decide.replicas import replication as rep
from sampledb_operator.model import names
from sampledb_operator.runtime.rollout_slots import RolloutSlots

STS = "StatefulSet"
ASKED = "2026-12-06T00:00:00Z"


def restarted(cluster: FakeCluster) -> list[bool]:
    """Per instance: its pod template carries the restart asked for."""
    out = []
    for i in range(3):
        sts = cluster.get(STS, sts_name(i))
        assert sts is not None
        out.append((sts["spec"]["template"]["metadata"].get("annotations") or {}).get(RESTARTED_FOR_ANNOTATION)
                   == ASKED)
    return out


def annotations(cluster: FakeCluster) -> dict[str, Any]:
    obj = cluster.get("SampleDB", DB)
    assert obj is not None
    return dict(obj["metadata"].get("annotations") or {})


def rolled(cluster: FakeCluster, i: int) -> None:
    """The StatefulSet controller and kubelet: instance i's pod runs its new template and is ready."""
    cluster.statefulset_ready(sts_name(i))
    run_pod(cluster, i)


async def test_a_restart_rolls_the_standbys_one_at_a_time_then_switches_over(servers: FakeServers) -> None:
    cluster = FakeCluster()
    await three_instances(cluster, servers)
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {RESTART_ANNOTATION: ASKED}}})
    await cluster.reconcile(DB)
    assert restarted(cluster) == [False, True, False]
    assert cluster.recorder.reasons().count("RollingRestart") == 1
    await cluster.reconcile(DB)  # instance 1's StatefulSet has not rolled its pod yet: the others wait
    assert restarted(cluster) == [False, True, False]
    rolled(cluster, 1)
    await cluster.reconcile(DB)
    assert restarted(cluster) == [False, True, True]
    rolled(cluster, 2)
    await cluster.reconcile(DB)  # every standby is done: a switchover, the primary still on its template
    assert restarted(cluster) == [False, True, True]
    assert annotations(cluster).get(rep.SWITCHOVER_ANNOTATION) == pod_name(1)
    assert "RollingSwitchover" in cluster.recorder.reasons()

    await cluster.reconcile(DB)  # the switchover: the old primary stopped by its StatefulSet, with the new template
    assert "SwitchoverStarted" in cluster.recorder.reasons()
    assert replicas(cluster, 0) == 0 and restarted(cluster) == [True, True, True]
    assert ("delete", POD, pod_name(0)) not in cluster.written()
    cluster.remove((POD, "shop", pod_name(0)))
    servers.silent(0)
    await cluster.reconcile(DB)
    assert servers.promoted == [ip(1)]
    await cluster.reconcile(DB)
    assert status(cluster)["primary"] == pod_name(1)
    await cluster.reconcile(DB)  # the status records it: the old primary returns, the annotation goes
    assert replicas(cluster, 0) == 1 and rep.SWITCHOVER_ANNOTATION not in annotations(cluster)
    servers.standby(0, 100)
    rolled(cluster, 0)
    writes = len(cluster.written(kind=STS))
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert len(cluster.written(kind=STS)) == writes  # nothing more to roll
    assert cluster.recorder.reasons().count("RollingRestart") == 2
    assert cluster.recorder.reasons().count("RollingSwitchover") == 1


async def test_one_instance_restarts_in_place_at_once() -> None:
    cluster = FakeCluster()
    await running_database(cluster, DB)
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {RESTART_ANNOTATION: ASKED}}})
    await cluster.reconcile(DB)
    sts = cluster.get(STS, sts_name(0))
    assert sts is not None
    assert sts["spec"]["template"]["metadata"]["annotations"][RESTARTED_FOR_ANNOTATION] == ASKED
    assert "RollingRestart" not in cluster.recorder.reasons()


def template_hash(cluster: FakeCluster, db: str) -> str:
    sts = cluster.get(STS, names.statefulset_name(db))
    assert sts is not None
    return str(sts["spec"]["template"]["metadata"]["annotations"][pgconfig.RESTART_ANNOTATION])


def update_condition(cluster: FakeCluster, db: str) -> tuple[str, str]:
    cond = condition(cluster.get("SampleDB", db), "OperatorUpdate")
    return cond.get("status", ""), cond.get("reason", "")


async def test_a_new_operator_template_rolls_one_database_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster()
    for db in ("a", "b"):
        await running_database(cluster, db)
    assert update_condition(cluster, "a") == ("", "")
    monkeypatch.setattr(pgconfig, "restart_hash", lambda *_a, **_k: "new-version")  # a new operator's template
    for db in ("a", "b"):
        await cluster.reconcile(db)
    assert template_hash(cluster, "a") == "new-version" and template_hash(cluster, "b") != "new-version"
    assert update_condition(cluster, "a") == ("True", op.ROLLING)
    assert update_condition(cluster, "b") == ("True", op.WAITING_FOR_TURN)
    assert "shop/a" in condition(cluster.get("SampleDB", "b"), "OperatorUpdate")["message"]
    await cluster.reconcile("b")
    assert template_hash(cluster, "b") != "new-version"  # a's pod has not rolled yet
    cluster.statefulset_ready(names.statefulset_name("a"))
    await cluster.reconcile("a")
    assert update_condition(cluster, "a") == ("False", op.APPLIED)
    await cluster.reconcile("b")
    assert template_hash(cluster, "b") == "new-version" and update_condition(cluster, "b") == ("True", op.ROLLING)
    cluster.statefulset_ready(names.statefulset_name("b"))
    await cluster.reconcile("b")
    assert update_condition(cluster, "b") == ("False", op.APPLIED)


async def test_with_no_operator_rollouts_a_new_template_waits_for_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster()
    cluster.ctx.rollout_slots = RolloutSlots(0)
    await running_database(cluster, DB)
    monkeypatch.setattr(pgconfig, "restart_hash", lambda *_a, **_k: "new-version")
    await cluster.reconcile(DB)
    await cluster.reconcile(DB)
    assert template_hash(cluster, DB) != "new-version"
    assert update_condition(cluster, DB) == ("True", op.WAITING_FOR_RESTART)
    cluster.patch("SampleDB", DB, {"metadata": {"annotations": {RESTART_ANNOTATION: ASKED}}})  # sampledb restart
    await cluster.reconcile(DB)
    assert template_hash(cluster, DB) == "new-version"
    assert update_condition(cluster, DB)[0] == "False"
