"""decide/status.database_ready: the database is ready when its StatefulSet's counters say so, or, sooner,
when the StatefulSet's one pod is Ready, made from its current template, and no rollout is under way. A pod
of another revision, of another StatefulSet, being deleted, or a rollout not yet seen by the controller is
never taken for a ready database."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide.status import REVISION_LABEL, database_ready
from sampledb_operator.model.objects import Obj

UID = "uid-sts-orders"


def sts(*, generation: int = 1, observed: int = 1, current: str = "orders-r1", update: str = "orders-r1",
        ready: int = 0, replicas: int = 1) -> Obj:
    return {"metadata": {"name": "orders", "uid": UID, "generation": generation}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "replicas": 1, "readyReplicas": ready,
                       "updatedReplicas": ready, "currentRevision": current, "updateRevision": update}}


def pod(*, revision: str = "orders-r1", ready: bool = True, owner: str = UID, deleting: bool = False) -> Obj:
    meta: dict[str, Any] = {"name": "orders-0", "labels": {REVISION_LABEL: revision},
                            "ownerReferences": [{"kind": "StatefulSet", "uid": owner, "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-04T12:00:00Z"
    return {"metadata": meta, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_the_statefulset_s_counters_alone_say_ready() -> None:
    assert database_ready(sts(ready=1), None)


def test_a_new_statefulset_s_ready_pod_is_a_ready_database_before_the_controller_counts_it() -> None:
    assert database_ready(sts(ready=0), pod())


@pytest.mark.parametrize(("the_sts", "the_pod"), [
    (sts(), pod(ready=False)),                                      # the pod is not ready
    (sts(), pod(revision="orders-r0")),                             # made from another template
    (sts(current="orders-r0", update="orders-r1"), pod()),          # a rollout under way: the counters decide
    (sts(generation=2, observed=1), pod()),                         # a change the controller has not seen
    (sts(), pod(deleting=True)),                                    # being deleted
    (sts(), pod(owner="uid-another-statefulset")),                  # another StatefulSet's (one made before)
    (sts(replicas=0), pod()),                                       # scaled to zero (stopped)
    (None, pod()),
    (sts(), None),
])
def test_anything_else_is_not_ready(the_sts: Obj | None, the_pod: Obj | None) -> None:
    assert not database_ready(the_sts, the_pod)


def test_a_statefulset_without_revisions_yet_is_not_ready() -> None:
    fresh = sts()
    fresh["status"] = {}
    assert not database_ready(fresh, pod())
