"""What every reconciler shares: the caches, an API per kind, the event recorder, the clock.

Caches hold only the operator's own children (selected on the server by the managed-by label), every
SampleDB and every SampleDBBackup (a sharded replica with filtered caches: its shards' children, database
pods, SampleDBs and SampleDBBackups, with the database pods made without the bucket label and the SampleDBs
and backups whose bucket label is not set yet merged into their kinds' caches: runtime/storeunion.py; a
restore's backup, another database's, may then be read live). Objects read from a
cache are shared: never mutate them.
Every write through `Context.apis` is read back by the caches until their watches deliver it
(runtime/storeset.py, read-your-writes): a pass never decides from a copy older than its own writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sampledb_operator.decide.events import EventType
from sampledb_operator.decide.jobs import without_test_annotations
from sampledb_operator.decide.replicas.primary_lease import LeaseBook
from sampledb_operator.kube.api import ResourceApi
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.kube.resources import (
    CONFIGMAP,
    DEPLOYMENT,
    EVENT,
    JOB,
    NAMESPACE,
    PDB,
    POD,
    PVC,
    SAMPLEDB,
    SAMPLEDBBACKUP,
    SECRET,
    SERVICE,
    STATEFULSET,
    STORAGECLASS,
    Resource,
)
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.storage_classes import BindingModes
from sampledb_operator.reconcilers.unanswered import UnansweredChecks
from sampledb_operator.runtime.clock import Clock
from sampledb_operator.runtime.rollout_slots import RolloutSlots
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

API_KINDS = (STATEFULSET, PVC, JOB, SERVICE, CONFIGMAP, SECRET, PDB, DEPLOYMENT, SAMPLEDB, SAMPLEDBBACKUP, STORAGECLASS,
             NAMESPACE, POD, EVENT)


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
    # database pods only; with filtered caches a StoreUnion: the shards' pods and those without the bucket label
    pods: StoreSet = field(default_factory=lambda: StoreSet({None: Store("pods")}))
    # the PodDisruptionBudgets of the databases with more than one instance
    pdbs: StoreSet = field(default_factory=lambda: StoreSet({None: Store("poddisruptionbudgets")}))
    # the poolers' Deployments (spec.pooler)
    deployments: StoreSet = field(default_factory=lambda: StoreSet({None: Store("deployments")}))
    # the cordoned nodes (spec.unschedulable), each as its name only (reconcilers/maintenance.py)
    nodes: StoreSet = field(default_factory=lambda: StoreSet({None: Store("nodes")}))

    def cache_of(self, kind: str) -> StoreSet | None:
        """The cache of `kind`, None for a kind the operator does not cache (StorageClass, Namespace)."""
        try:
            return self.for_kind(kind)
        except KeyError:
            return None

    def for_kind(self, kind: str) -> StoreSet:
        return {
            "StatefulSet": self.statefulsets, "PersistentVolumeClaim": self.pvcs, "Job": self.jobs,
            "Service": self.services, "ConfigMap": self.configmaps, "Secret": self.secrets,
            "SampleDB": self.sampledbs, "SampleDBBackup": self.backups, "Pod": self.pods,
            "PodDisruptionBudget": self.pdbs, "Deployment": self.deployments, "Node": self.nodes,
        }[kind]

    def cordoned_nodes(self) -> frozenset[str]:
        """The names of the nodes marked unschedulable (cordoned), as the nodes' watch last showed them."""
        return frozenset(ref.name for ref in self.nodes.refs())


class RememberingApi(ResourceApi):
    """A ResourceApi whose write answers the kind's cache shows until its watch delivers them."""

    def __init__(self, client: KubeClient, resource: Resource, cache: StoreSet | None) -> None:
        super().__init__(client, resource)
        self._cache = cache

    def _remember(self, answer: Obj) -> Obj:
        if self._cache is not None and isinstance(answer, dict) and (answer.get("metadata") or {}).get("name"):
            self._cache.remember(answer)
        return answer

    async def create(self, obj: Obj, namespace: str | None = None, *, field_manager: str | None = None) -> Obj:
        return self._remember(await super().create(obj, namespace, field_manager=field_manager))

    async def apply(self, obj: Obj, *, field_manager: str, force: bool = True, subresource: str | None = None) -> Obj:
        return self._remember(await super().apply(obj, field_manager=field_manager, force=force,
                                                  subresource=subresource))

    async def patch(self, name: str, patch: Any, *, namespace: str | None = None,
                    patch_type: Literal["merge", "json", "strategic"] = "merge", subresource: str | None = None,
                    field_manager: str | None = None) -> Obj:
        return self._remember(await super().patch(name, patch, namespace=namespace, patch_type=patch_type,
                                                  subresource=subresource, field_manager=field_manager))

    async def replace(self, obj: Obj, *, subresource: str | None = None) -> Obj:
        return self._remember(await super().replace(obj, subresource=subresource))

    async def delete(self, name: str, namespace: str | None = None, *, propagation: str = "Background",
                     preconditions: dict[str, Any] | None = None, grace_period_seconds: int | None = None) -> None:
        await super().delete(name, namespace, propagation=propagation, preconditions=preconditions,
                             grace_period_seconds=grace_period_seconds)
        if self._cache is not None:
            self._cache.forget(ObjectRef(namespace or "", name))


@dataclass
class Context:
    """Shared by the reconcilers of one operator process."""

    client: KubeClient
    caches: Caches
    recorder: EventRecorder
    clock: Clock
    field_manager: str = "sampledb-operator"
    recheck_period: float = 60.0  # seconds between looks at unwatched references (migrations ConfigMap)
    label_buckets: bool = False  # sharded replicas: a SampleDB's first pass gives it its bucket label
    chaos_annotation: bool = False  # --chaos-annotation: act on sampledb.io/chaos (reconcilers/chaos.py)
    test_hooks: bool = False  # --test-hooks: testing.sampledb.io/ annotations reach Job pods (decide/jobs.py)
    # --operator-rollouts: the databases rolling an operator-made pod template change (reconcilers/rollout.py)
    rollout_slots: RolloutSlots = field(default_factory=lambda: RolloutSlots(1))

    def for_jobs(self, db: SampleDB) -> SampleDB:
        """`db` as the Jobs it makes may see it: without testing.sampledb.io/ annotations unless --test-hooks."""
        return db if self.test_hooks else without_test_annotations(db)
    apis: dict[str, ResourceApi] = field(init=False)
    binding_modes: BindingModes = field(init=False)  # the StorageClasses' volumeBindingMode, read on demand
    unanswered_tls: UnansweredChecks = field(init=False)  # primaries that did not answer the TLS question
    unanswered_monitoring: UnansweredChecks = field(init=False)  # ... nor the monitoring role's statements
    unanswered_app_role: UnansweredChecks = field(init=False)  # ... nor the application role's
    # spec.tls.secretName: the Secret's resourceVersion last seen per database uid, and when it changed
    tls_secret_versions: dict[str, tuple[str, float]] = field(init=False)
    # the nodes that send no heartbeat, and since when (reconcilers/node_heartbeats.py keeps it; empty without it)
    silent_nodes: dict[str, datetime] = field(init=False)
    leases: LeaseBook = field(init=False)  # the primaries' leases this process renews (reconcilers/replication.py)

    def __post_init__(self) -> None:
        self.apis = {r.kind: RememberingApi(self.client, r, self.caches.cache_of(r.kind)) for r in API_KINDS}
        self.binding_modes = BindingModes(lambda: self.apis["StorageClass"], self.clock)
        self.unanswered_tls = UnansweredChecks()
        self.unanswered_monitoring = UnansweredChecks()
        self.unanswered_app_role = UnansweredChecks()
        self.tls_secret_versions = {}
        self.silent_nodes = {}
        self.leases = LeaseBook()

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
