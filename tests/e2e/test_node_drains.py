"""A database of more than one instance has two PodDisruptionBudgets, and the real control plane enforces them (kwok
pods, the disruption controller and the eviction API): the primary is never evicted while ready, a drain takes one
standby at a time, and scaling down to one instance removes both budgets. (The switchover that moves the primary
off a cordoned node needs real servers: tests/e2e/test_node_maintenance.py.)

kwok brings an evicted pod back (deleted, made again by its StatefulSet, Running and Ready) within a fraction of a
second: a ResourceQuota of two pods keeps the first evicted instance without a pod while the second eviction is
tried, as an instance whose pod cannot be made again at once would be. (The budget is a count of available pods
for that case: with maxUnavailable, the disruption controller would no longer count that instance, whose
StatefulSet it finds only through its pod, and would let the second eviction through.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, status, wait_ready
from tests.support.kube import get_or_none, kubeconfig, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import ApiError

pytestmark = pytest.mark.cluster

DB = "ha"
PRIMARY_BUDGET = "ha-primary"
HOLD = "hold-pods"


def budget(ns: str, name: str = DB) -> dict[str, Any] | None:
    return get_or_none("poddisruptionbudget", name, ns)


def instance_pods(ns: str) -> list[dict[str, Any]]:
    return list(kubectl_json("get", "pods", "-n", ns, "-l",
                             f"sampledb.io/database={DB},app.kubernetes.io/component=database")["items"])


def evict(ns: str, *pods: str) -> list[tuple[int, str]]:
    """Ask the eviction API to evict each of `pods` in turn, as `kubectl drain` does, back to back on one
    connection: the HTTP status of each answer (201: evicted) and the API server's message."""

    async def run() -> list[tuple[int, str]]:
        client = await KubeClient.connect(kubeconfig())
        answers: list[tuple[int, str]] = []
        try:
            for pod in pods:
                body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}}
                try:
                    await client.request("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction", body=body)
                    answers.append((201, ""))
                except ApiError as err:
                    answers.append((err.status, err.message))
        finally:
            await client.close()
        return answers

    return asyncio.run(run())


def hold_pods(ns: str) -> None:
    """No new pod in `ns` until the ResourceQuota HOLD goes: an evicted pod is not made again (kwok would bring it
    back Running and Ready within a fraction of a second), as a pod that takes its time to come back elsewhere."""
    kubectl("create", "resourcequota", HOLD, "-n", ns, "--hard=pods=2")
    wait_until(lambda: ((get_or_none("resourcequota", HOLD, ns) or {}).get("status") or {}).get("hard"),
               timeout=30, what="the quota's status")


def counted(ns: str) -> tuple[int, int] | None:
    """(currentHealthy, disruptionsAllowed) of the budget's status."""
    state = (budget(ns) or {}).get("status") or {}
    return state.get("currentHealthy"), state.get("disruptionsAllowed")


def settled(ns: str) -> dict[str, Any] | None:
    """The standbys' budget once the disruption controller counts two healthy standbys of two and allows one
    disruption, and the primary's counts its one pod and allows none."""
    pdb, primary = budget(ns), budget(ns, PRIMARY_BUDGET)
    state, primary_state = (pdb or {}).get("status") or {}, (primary or {}).get("status") or {}
    done = ((state.get("expectedPods"), state.get("currentHealthy"), state.get("disruptionsAllowed")) == (2, 2, 1)
            and (primary_state.get("expectedPods"), primary_state.get("currentHealthy"),
                 primary_state.get("disruptionsAllowed")) == (1, 1, 0))
    return pdb if done else None


def test_a_drain_never_takes_the_primary_takes_one_standby_at_a_time_and_one_instance_has_no_budget(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb(DB, ns, replicas=3, deletionPolicy="Delete"))
    wait_ready(DB, ns, timeout=180)
    pdb: dict[str, Any] = wait_until(lambda: settled(ns), timeout=120, what="the budgets over three healthy pods")
    primary_pdb = budget(ns, PRIMARY_BUDGET)
    assert primary_pdb is not None
    base = {"app.kubernetes.io/instance": DB, "sampledb.io/database": DB, "app.kubernetes.io/component": "database"}
    assert pdb["spec"]["minAvailable"] == 1  # all standbys but one of two
    assert pdb["spec"]["selector"]["matchLabels"] == {**base, "sampledb.io/role": "replica"}
    assert primary_pdb["spec"]["minAvailable"] == 1
    assert primary_pdb["spec"]["selector"]["matchLabels"] == {**base, "sampledb.io/role": "primary"}
    uid = kubectl_json("get", "sampledb", DB, "-n", ns)["metadata"]["uid"]
    for made in (pdb, primary_pdb):
        assert made["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        assert [(o["kind"], o["uid"]) for o in made["metadata"]["ownerReferences"]] == [("SampleDB", uid)]
        assert made["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sampledb-operator"

    # the primary is never evicted while ready (its node's drain waits for the switchover its cordon starts)
    primary = status(DB, ns)["primary"]
    [(refused, message)] = evict(ns, primary)
    assert refused == 429 and "disruption budget" in message, (refused, message)

    # a drain of two nodes at once: the first standby goes, the second is refused while the first is not back
    standbys = sorted(p["metadata"]["name"] for p in instance_pods(ns) if p["metadata"]["name"] != primary)
    assert len(standbys) == 2
    first, second = standbys
    hold_pods(ns)
    try:
        [(evicted, _), (refused, message)] = evict(ns, first, second)
        assert evicted == 201
        assert refused == 429 and "disruption budget" in message, (refused, message)
        # the disruption controller counts one healthy standby, the one it needs: still no second eviction
        wait_until(lambda: counted(ns) == (1, 0), timeout=60, what="the budget counting the evicted pod gone")
        assert first not in {p["metadata"]["name"] for p in instance_pods(ns)}  # not back
        [(refused, message)] = evict(ns, second)
        assert refused == 429, message
    finally:
        kubectl("delete", "resourcequota", HOLD, "-n", ns, "--ignore-not-found")
    # once the first is back and ready, the budget lets the next one go
    wait_until(lambda: settled(ns), timeout=180, what="the evicted standby back and the budget healthy again")
    [(evicted, message)] = evict(ns, second)
    assert evicted == 201, message
    wait_until(lambda: settled(ns), timeout=180, what="the second standby back")
    wait_ready(DB, ns, timeout=120)
    assert status(DB, ns)["primary"] == primary  # standbys evicted: no failover

    # one instance: no budget (one that kept a single instance up would block every drain of its node)
    kubectl("patch", "sampledb", DB, "-n", ns, "--type", "merge", "-p", '{"spec": {"replicas": 1}}')
    wait_until(lambda: budget(ns) is None and budget(ns, PRIMARY_BUDGET) is None, timeout=120,
               what="the budgets deleted at one instance")
    assert get_or_none("sampledb", DB, ns) is not None  # deleted by the operator, not with its owner
    reasons = {e.get("reason") for e in kubectl_json("get", "events", "-n", ns)["items"]
               if e["involvedObject"].get("name") == DB and e["involvedObject"].get("kind") == "SampleDB"}
    assert "DeletedPodDisruptionBudget" in reasons
