"""decide.urgency: which child events make their database's next pass urgent."""

from __future__ import annotations

import pytest

from sampledb_operator.decide.labels import COMPONENT_LABEL, DATA_COMPONENT
from sampledb_operator.decide.urgency import urgent
from sampledb_operator.model.objects import Obj

READY_STS: Obj = {"kind": "StatefulSet", "metadata": {"generation": 2}, "spec": {"replicas": 1},
                  "status": {"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 1,
                             "currentRevision": "r2", "updateRevision": "r2"}}
ROLLING_STS: Obj = {**READY_STS, "status": {**READY_STS["status"], "updateRevision": "r3"}}
COUNTING_STS: Obj = {**READY_STS, "status": {"observedGeneration": 2, "replicas": 1}}


def job(*conditions: tuple[str, str]) -> Obj:
    return {"kind": "Job", "status": {"active": 0 if conditions else 1,
                                      "conditions": [{"type": t, "status": s} for t, s in conditions]}}


def pod(phase: str | None, *, deleting: bool = False) -> Obj:
    meta: Obj = {"name": "orders-0"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {"kind": "Pod", "metadata": meta, "status": {"phase": phase} if phase else {}}


@pytest.mark.parametrize(("kind", "obj", "expected"), [
    ("StatefulSet", READY_STS, True),
    ("StatefulSet", ROLLING_STS, False),  # a rollout not finished: the pods are not all on the template yet
    ("StatefulSet", COUNTING_STS, False),
    ("Job", job(("Complete", "True")), True),
    ("Job", job(("Failed", "True")), True),
    ("Job", job(), False),  # started, running
    ("Job", job(("Complete", "False")), False),
    ("Pod", pod(None), False),  # just created
    ("Pod", pod("Pending"), False),  # scheduled, pulling
    ("Pod", pod("Running"), True),  # ready or not: roles and failover read it
    ("Pod", pod("Failed"), True),
    ("Pod", pod("Pending", deleting=True), True),
    ("PersistentVolumeClaim", {"kind": "PersistentVolumeClaim", "status": {"phase": "Bound"}}, False),
    ("Service", {"kind": "Service", "spec": {}}, False),
    # no step reads a disruption budget's status (it follows the pods, whose own events are urgent)
    ("PodDisruptionBudget", {"kind": "PodDisruptionBudget", "status": {"disruptionsAllowed": 0}}, False),
])
def test_a_modified_child_is_urgent_when_a_step_acts_on_its_state(kind: str, obj: Obj, expected: bool) -> None:
    assert urgent(kind, "MODIFIED", obj) is expected
    assert urgent(kind, "ADDED", obj) is expected


@pytest.mark.parametrize("kind", ["StatefulSet", "Job", "Pod", "PersistentVolumeClaim", "Service", "ConfigMap",
                                  "Secret", "PodDisruptionBudget"])
def test_a_deleted_child_is_always_urgent(kind: str) -> None:
    assert urgent(kind, "DELETED", {"kind": kind, "metadata": {"name": "x"}})


def pvc(component: str, phase: str) -> Obj:
    return {"kind": "PersistentVolumeClaim", "metadata": {"labels": {COMPONENT_LABEL: component}},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("event_type", "obj", "expected"), [
    ("MODIFIED", pvc(DATA_COMPONENT, "Bound"), True),  # bound: a StatefulSet waiting for it is created
    ("MODIFIED", pvc(DATA_COMPONENT, "Pending"), False),
    ("ADDED", pvc(DATA_COMPONENT, "Bound"), False),  # a listing (a restart), not a binding
    ("MODIFIED", pvc("backups", "Bound"), False),  # no StatefulSet waits for the backups volume
])
def test_a_data_volume_s_binding_is_urgent(event_type: str, obj: Obj, expected: bool) -> None:
    assert urgent("PersistentVolumeClaim", event_type, obj) is expected
