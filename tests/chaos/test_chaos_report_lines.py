"""What a chaos report says about a run that did not settle: why each SampleDB is not Ready (its Ready
condition) and which pods are stuck and why (so a pod the scheduler never placed is told apart from an
operator that stopped acting)."""

from __future__ import annotations

from tests.chaos.world import pod_trouble, why_not_ready


def _pod(phase: str, **conditions: tuple[str, str, str]) -> dict[str, object]:
    return {"metadata": {"namespace": "ns", "name": "db-0"},
            "status": {"phase": phase, "conditions": [{"type": t, "status": s, "reason": r, "message": m}
                                                      for t, (s, r, m) in conditions.items()]}}


def test_a_pending_pod_says_why_it_was_not_scheduled() -> None:
    pod = _pod("Pending", PodScheduled=("False", "Unschedulable", "0/3 nodes are available"))
    assert pod_trouble(pod) == "ns/db-0 Pending (PodScheduled Unschedulable: 0/3 nodes are available)"


def test_ready_and_finished_pods_are_not_trouble_but_an_unready_running_one_is() -> None:
    assert pod_trouble(_pod("Running", Ready=("True", "", ""))) is None
    assert pod_trouble(_pod("Succeeded")) is None
    assert pod_trouble(_pod("Running", PodScheduled=("True", "", ""), Ready=("False", "ContainersNotReady", "x"))) \
        == "ns/db-0 Running (Ready ContainersNotReady: x)"


def test_a_sampledb_not_ready_says_what_its_ready_condition_says() -> None:
    db = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "PodNotReady",
                                     "message": "pod db-0 is Pending"}]}}
    assert why_not_ready(db) == "PodNotReady: pod db-0 is Pending"
    assert why_not_ready({"status": {}}) == "no Ready condition"
    assert why_not_ready(None) == "the SampleDB is missing"
