"""spec.scheduling on the real control plane and scheduler (kwok's two fake nodes): the instances of a database
spread over nodes, the user's pod labels pass through, and a spread no node can meet is said with the scheduler's
words and resolved by relaxing it."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def instance_pods(name: str, ns: str) -> list[dict[str, Any]]:
    pods = kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/database={name}")["items"]
    return [p for p in pods if p["metadata"]["labels"].get("app.kubernetes.io/component") == "database"]


def test_instances_spread_over_nodes_and_an_impossible_spread_is_said_then_relaxed(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("spread", ns, replicas=3, scheduling={"instanceSpread": "Required",
                                                          "podLabels": {"team": "payments"}}))
    # two kwok nodes: the third instance can go nowhere without sharing one
    cond = wait_until(lambda: (c := condition("spread", ns, "Degraded")).get("reason") == "Unschedulable" and c,
                      timeout=120, what="an instance Unschedulable")
    # whichever pod the scheduler placed last waits (on a new database, any of the three)
    placed = [p for p in instance_pods("spread", ns) if p["spec"].get("nodeName")]
    assert len(placed) == 2 and len({p["spec"]["nodeName"] for p in placed}) == 2
    [waiting] = [p for p in instance_pods("spread", ns) if not p["spec"].get("nodeName")]
    assert f"pod {waiting['metadata']['name']} cannot be scheduled" in cond["message"]
    scheduled = next(c for c in waiting["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "anti-affinity" in scheduled["message"]
    assert all(p["metadata"]["labels"]["team"] == "payments" for p in instance_pods("spread", ns))
    kubectl("patch", "sampledb", "spread", "-n", ns, "--type", "merge", "-p",
            '{"spec": {"scheduling": {"instanceSpread": "Preferred"}}}')
    wait_until(lambda: len([p for p in instance_pods("spread", ns) if p["spec"].get("nodeName")]) == 3,
               timeout=120, what="all three instances placed")
    wait_ready("spread", ns, timeout=180)
