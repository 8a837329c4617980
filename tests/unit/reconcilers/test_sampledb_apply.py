"""reconcilers/children.py: a child the API server refuses (422) becomes a Degraded problem, not a silent retry loop.

Admission refuses what the CRD's rules know of; this is the net under them, for whatever a rule
does not cover (a hugepages limit that is not a whole number of pages, say).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from sampledb_operator import dataplane
from sampledb_operator.decide.children import desired as d
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import Forbidden, Invalid, ServerError
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import Problem, SampleDB
from sampledb_operator.reconcilers.children import REFUSED_RECHECK_SECONDS, apply_children
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

KINDS = ("SampleDB", "SampleDBBackup", "StatefulSet", "PersistentVolumeClaim", "Job", "Service", "ConfigMap", "Secret")
MESSAGE = 'StatefulSet.apps "db" is invalid: resources.limits[hugepages-2Mi]: Invalid value: "3Mi"'


class Api:
    def __init__(self, kind: str, applied: list[str], refuse: dict[str, Exception]) -> None:
        self.kind, self.applied, self.refuse = kind, applied, refuse

    async def apply(self, obj: Obj, **_options: Any) -> Obj:
        if self.kind in self.refuse:
            raise self.refuse[self.kind]
        self.applied.append(self.kind)
        return obj


class Recorder:
    async def event(self, *_args: Any) -> None:
        return None


def _context(refuse: dict[str, Exception]) -> tuple[Context, list[str]]:
    sets = {kind: StoreSet({None: Store(kind)}) for kind in KINDS}
    caches = Caches(sampledbs=sets["SampleDB"], backups=sets["SampleDBBackup"], statefulsets=sets["StatefulSet"],
                    pvcs=sets["PersistentVolumeClaim"], jobs=sets["Job"], services=sets["Service"],
                    configmaps=sets["ConfigMap"], secrets=sets["Secret"])
    ctx = Context(client=cast(KubeClient, None), caches=caches, recorder=cast(EventRecorder, Recorder()),
                  clock=FakeClock(wall_start=datetime(2026, 1, 1, tzinfo=UTC)))
    applied: list[str] = []
    ctx.apis = {kind: cast(Any, Api(kind, applied, refuse)) for kind in KINDS}
    return ctx, applied


DB = SampleDB.model_validate({
    "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": "db", "namespace": "ns", "uid": "u"},
    "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
})
INPUTS = d.Inputs(db=DB, scripts=dataplane.all_scripts(), running=d.Running("16.4", "postgres:16.4"))


async def test_a_refused_statefulset_is_a_degraded_problem_and_the_other_children_are_applied() -> None:
    ctx, applied = _context({"StatefulSet": Invalid(422, "Invalid", MESSAGE)})
    outcome = await apply_children(ctx, DB, {}, INPUTS)
    assert outcome.problems == (Problem("ChildRejected", f"StatefulSet db refused: {MESSAGE}", "spec"),)
    assert "StatefulSet" not in applied and {"Service", "ConfigMap", "PersistentVolumeClaim"} <= set(applied)


async def test_a_child_refused_by_a_quota_or_admission_names_the_cause() -> None:
    quota = 'persistentvolumeclaims "data-db-0" is forbidden: exceeded quota: q, requested: requests.storage=1Gi'
    ctx, applied = _context({"PersistentVolumeClaim": Forbidden(403, "Forbidden", quota),
                             "StatefulSet": Invalid(422, "Invalid", "ValidatingAdmissionPolicy 'p' with binding 'b'"
                                                                    " denied request: no")})
    outcome = await apply_children(ctx, DB, {}, INPUTS)
    assert sorted({p.reason for p in outcome.problems}) == ["AdmissionRefused", "QuotaExceeded"]
    assert any(p.message == f"PersistentVolumeClaim data-db-0 refused: {quota}" for p in outcome.problems)
    assert outcome.recheck_after == REFUSED_RECHECK_SECONDS  # nothing watched says when the refusal is lifted
    assert {"Service", "ConfigMap"} <= set(applied)


async def test_other_api_errors_still_raise_for_a_retry() -> None:
    ctx, _ = _context({"StatefulSet": ServerError(500, "InternalError", "etcd")})
    with pytest.raises(ServerError):
        await apply_children(ctx, DB, {}, INPUTS)
