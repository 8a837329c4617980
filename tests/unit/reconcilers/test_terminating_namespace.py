"""reconcilers/children.py in a namespace being deleted: the API server's refusal is passed on as it is.

The controller treats NamespaceTerminating as a quiet requeue; a reconciler must not turn it into
a status problem of its own (a PVC refused with 403 is otherwise a failed volume expansion).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from sampledb_operator import dataplane
from sampledb_operator.decide.children import desired as d
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NamespaceTerminating
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.children import apply_children
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

KINDS = ("SampleDB", "SampleDBBackup", "StatefulSet", "PersistentVolumeClaim", "Job", "Service", "ConfigMap", "Secret")
REFUSED = NamespaceTerminating(403, "Forbidden", 'persistentvolumeclaims "data-db" is forbidden: unable to create new'
                               " content in namespace ns because it is being terminated")


class Api:
    """The data PVC is refused (the namespace controller deleted it; a new one cannot be made)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def apply(self, obj: Obj, **_options: Any) -> Obj:
        if self.kind == "PersistentVolumeClaim":
            raise REFUSED
        return obj


class Recorder:
    async def event(self, *_args: Any) -> None:
        return None


DB = SampleDB.model_validate({
    "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": "db", "namespace": "ns", "uid": "u"},
    "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
})


async def test_a_child_refused_by_a_terminating_namespace_is_not_a_degraded_problem() -> None:
    sets = {kind: StoreSet({None: Store(kind)}) for kind in KINDS}
    caches = Caches(sampledbs=sets["SampleDB"], backups=sets["SampleDBBackup"], statefulsets=sets["StatefulSet"],
                    pvcs=sets["PersistentVolumeClaim"], jobs=sets["Job"], services=sets["Service"],
                    configmaps=sets["ConfigMap"], secrets=sets["Secret"])
    ctx = Context(client=cast(KubeClient, None), caches=caches, recorder=cast(EventRecorder, Recorder()),
                  clock=FakeClock(wall_start=datetime(2026, 1, 1, tzinfo=UTC)))
    ctx.apis = {kind: cast(Any, Api(kind)) for kind in KINDS}
    with pytest.raises(NamespaceTerminating):  # raised, so no Degraded problem is returned for it
        await apply_children(ctx, DB, {}, d.Inputs(db=DB, scripts=dataplane.all_scripts(),
                                                   running=d.Running("16.4", "postgres:16.4")))
