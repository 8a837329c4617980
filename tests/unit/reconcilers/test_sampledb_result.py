"""reconcilers/sampledb.py: when several parts of one pass ask to come back, the earliest time wins.

A missing reference asks for a rate-limited requeue; the backup schedule asks to come back at the
next slot. Neither may drop the other, or a scheduled backup runs late (issue #11).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from sampledb_operator.decide.lifecycle import lifecycle
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.result import Result
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.reconcilers.sampledb import STATUS_RECHECK_SECONDS, SampleDBReconciler
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

KINDS = ("SampleDB", "SampleDBBackup", "StatefulSet", "PersistentVolumeClaim", "Job", "Service", "ConfigMap", "Secret")


class Api:
    """Accepts every write; nothing exists to GET (so the init SQL's ConfigMap is missing). Keeps the last
    status written."""

    status: Obj | None = None

    async def get(self, name: str, namespace: str | None = None) -> Obj:
        raise NotFound(404, "NotFound", f"{name} not found")

    async def _accept(self, obj: Obj, *_args: Any, **_options: Any) -> Obj:
        return obj

    create = apply = _accept

    async def patch(self, name: str, body: Obj, **options: Any) -> Obj:
        if options.get("subresource") == "status":
            Api.status = body["status"]
        return body


class Recorder:
    async def event(self, *_args: Any) -> None:
        return None


def _reconciler(now: datetime) -> SampleDBReconciler:
    sets = {kind: StoreSet({None: Store(kind)}) for kind in KINDS}
    caches = Caches(sampledbs=sets["SampleDB"], backups=sets["SampleDBBackup"], statefulsets=sets["StatefulSet"],
                    pvcs=sets["PersistentVolumeClaim"], jobs=sets["Job"], services=sets["Service"],
                    configmaps=sets["ConfigMap"], secrets=sets["Secret"])
    ctx = Context(client=cast(KubeClient, None), caches=caches, recorder=cast(EventRecorder, Recorder()),
                  clock=FakeClock(wall_start=now))
    ctx.apis = {kind: cast(Any, Api()) for kind in (*KINDS, "StorageClass", "Namespace", "Pod")}
    return SampleDBReconciler(ctx)


async def test_a_missing_reference_keeps_the_next_scheduled_backups_time() -> None:
    db = {
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": "db", "namespace": "ns", "uid": "u", "generation": 1, "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z", "finalizers": [lifecycle.FINALIZER]},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "backup": {"schedule": "0 * * * *"},
                 "init": {"configMapKeyRef": {"name": "missing", "key": "init.sql"}}},
    }
    reconciler = _reconciler(datetime(2026, 1, 1, 0, 50, tzinfo=UTC))
    # the database runs (a ready StatefulSet): its init SQL's source is looked up, and is missing
    reconciler.ctx.caches.statefulsets._stores[None].upsert({  # type: ignore[attr-defined]
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ns", "generation": 1,
                     "labels": {"sampledb.io/database": "db", "app.kubernetes.io/component": "database"}},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 1, "currentRevision": "r",
                   "updateRevision": "r"}})
    first = await reconciler._reconcile(db)
    assert first is not None and first.requeue_after == STATUS_RECHECK_SECONDS  # it wrote a status: looks again
    assert Api.status is not None
    for pvc in ("data-db-0", "db-backups"):  # the volumes it applied exist (the database has run on them)
        reconciler.ctx.caches.pvcs._stores[None].upsert({  # type: ignore[attr-defined]
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "namespace": "ns", "labels": {"sampledb.io/database": "db"}},
            "spec": {"resources": {"requests": {"storage": "1Gi"}}}, "status": {"phase": "Bound"}})
    second = await reconciler._reconcile({**db, "status": Api.status})
    assert second is not None and second.requeue_after == STATUS_RECHECK_SECONDS  # the volumes' news
    result = await reconciler._reconcile({**db, "status": Api.status})  # the status it wrote: nothing changes
    # InitSourceMissing asks for a rate-limited requeue; the 01:00 backup slot is 600 s away
    assert result == Result(requeue_after=600.0, requeue=True)
