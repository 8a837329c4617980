"""What every reconciler shares: the caches, an API per kind, the event recorder, the clock.

Caches hold only the operator's own children (selected on the server by the managed-by label),
every SampleDB and every SampleDBBackup. Objects read from a cache are shared: never mutate them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sampledb_operator.decide.events import EventType
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.kube.resources import (
    CONFIGMAP,
    JOB,
    NAMESPACE,
    POD,
    PVC,
    SAMPLEDB,
    SAMPLEDBBACKUP,
    SECRET,
    SERVICE,
    STATEFULSET,
    STORAGECLASS,
)
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.clock import Clock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

API_KINDS = (STATEFULSET, PVC, JOB, SERVICE, CONFIGMAP, SECRET, SAMPLEDB, SAMPLEDBBACKUP, STORAGECLASS, NAMESPACE,
             POD)


@dataclass(frozen=True)
class Caches:
    """The informer caches the reconcilers read."""

    sampledbs: StoreSet
    backups: StoreSet
    statefulsets: StoreSet
    pvcs: StoreSet
    jobs: StoreSet
    services: StoreSet
    configmaps: StoreSet
    secrets: StoreSet
    pods: StoreSet = field(default_factory=lambda: StoreSet({None: Store("pods")}))  # database pods only

    def for_kind(self, kind: str) -> StoreSet:
        return {
            "StatefulSet": self.statefulsets, "PersistentVolumeClaim": self.pvcs, "Job": self.jobs,
            "Service": self.services, "ConfigMap": self.configmaps, "Secret": self.secrets,
            "SampleDB": self.sampledbs, "SampleDBBackup": self.backups, "Pod": self.pods,
        }[kind]


@dataclass
class Context:
    """Shared by the reconcilers of one operator process."""

    client: KubeClient
    caches: Caches
    recorder: EventRecorder
    clock: Clock
    field_manager: str = "sampledb-operator"
    recheck_period: float = 60.0  # seconds between looks at unwatched references (migrations ConfigMap)
    apis: dict[str, ResourceApi] = field(init=False)

    def __post_init__(self) -> None:
        self.apis = {r.kind: ResourceApi(self.client, r) for r in API_KINDS}

    def cached(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        return self.caches.for_kind(kind).get(ObjectRef(namespace or "", name))

    async def event(self, obj_meta: Any, api_version: str, kind: str, type_: EventType, reason: str,  # noqa: PLR0917
                    message: str) -> None:
        """An Event about an object (given its metadata model or dict); never raises."""
        meta = obj_meta if isinstance(obj_meta, dict) else {
            "name": obj_meta.name, "namespace": obj_meta.namespace, "uid": obj_meta.uid,
            "resourceVersion": obj_meta.resource_version}
        ref = {"apiVersion": api_version, "kind": kind,
               "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}}
        await self.recorder.event(ref, type_, reason, message)
