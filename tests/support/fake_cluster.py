"""An in-memory cluster for reconciler unit tests: the REST verbs of every kind the operator uses,
over one dict of objects, and the informer caches the reconcilers read.

What it keeps of the API server's behaviour (the parts a reconciler's correctness depends on):
- every write gives the object a new resourceVersion; a merge patch or apply carrying
  metadata.resourceVersion is refused with Conflict when the object has moved on (the optimistic
  concurrency the operator relies on); a create of an existing name is Conflict (AlreadyExists);
- a merge patch follows RFC 7386 (null removes a key); a patch of the status subresource changes
  only the status; a spec change bumps metadata.generation;
- a delete of an object with finalizers only sets its deletionTimestamp; removing the last
  finalizer of such an object deletes it;
- a PVC's requested storage cannot shrink (422), as the API server refuses it;
- a Secret's stringData is stored base64-encoded in its data (and is not kept itself).

The caches are fed like the watches feed them: the kinds the operator watches with its managed-by
selector hold only labelled objects (the database Pods too); SampleDBs and SampleDBBackups are all
cached; StorageClasses and Namespaces are not cached; Nodes are, the cordoned ones only (spec.unschedulable), as the
operator's field-selected watch holds them. By default every write reaches the caches at once (as
if the watch event arrived before the next pass); `freeze_cache()` stops that, so a test can run a
pass on a stale cache, and `sync_cache()` delivers what the watches would have.
"""

from __future__ import annotations

import base64
import copy
import itertools
from datetime import UTC, datetime
from typing import Any, cast

from sampledb_operator.decide.labels import DATABASE_LABEL, MANAGED_BY
from sampledb_operator.kube.api import ListResult
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import ApiError, Conflict, Invalid, NotFound
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model import names
from sampledb_operator.model.quantity import parse_quantity
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.context import API_KINDS, Caches, Context
from sampledb_operator.reconcilers.sampledb import SampleDBReconciler, watched_resources
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace, name)
NS = "shop"
MANAGED_LABEL = "app.kubernetes.io/managed-by"
CLUSTER_SCOPED = frozenset({"StorageClass", "Namespace", "Node"})
CACHED = (*(r.kind for r, _ in watched_resources()), "Node")  # the nodes' cache: cordoned ones only
SELECTED = frozenset(r.kind for r, selector in watched_resources() if selector)
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` applied to `target` (a new value; neither argument is changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _storage(obj: Obj) -> Any:
    return ((obj.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")


class FakeApi:
    """One kind's REST verbs over the fake cluster."""

    def __init__(self, cluster: FakeCluster, kind: str) -> None:
        self.cluster, self.kind = cluster, kind

    def _key(self, name: str, namespace: str | None) -> Key:
        return (self.kind, "" if self.kind in CLUSTER_SCOPED else (namespace or NS), name)

    async def get(self, name: str, namespace: str | None = None) -> Obj:
        self.cluster.check_failure(self.kind, "get")
        obj = self.cluster.objects.get(self._key(name, namespace))
        if obj is None:
            raise NotFound(404, "NotFound", f"{self.kind} {name} not found")
        return copy.deepcopy(obj)

    async def list(self, namespace: str | None = None, *, label_selector: str | None = None,
                   **_options: Any) -> ListResult:
        self.cluster.check_failure(self.kind, "list")
        self.cluster.lists.append((self.kind, label_selector or ""))
        wanted = dict(part.split("=", 1) for part in (label_selector or "").split(",") if part)
        items = [copy.deepcopy(o) for (k, ns, _n), o in self.cluster.objects.items()
                 if k == self.kind and (namespace is None or ns == namespace)
                 and all((o["metadata"].get("labels") or {}).get(lk) == lv for lk, lv in wanted.items())]
        return ListResult(items, str(self.cluster.last_rv), None)

    async def create(self, obj: Obj, namespace: str | None = None) -> Obj:
        key = self._key(obj["metadata"]["name"], obj["metadata"].get("namespace") or namespace)
        self.cluster.writes.append(("create", self.kind, key[2]))  # a write request, even when refused
        self.cluster.check_failure(self.kind, "create")
        if key in self.cluster.objects:
            raise Conflict(409, "AlreadyExists", f"{self.kind} {key[2]} already exists")
        return copy.deepcopy(self.cluster.put(self.kind, obj))

    async def apply(self, obj: Obj, *, field_manager: str = "", force: bool = True, **_options: Any) -> Obj:
        """Server-side apply, approximated: the applied fields merged over the object (lists replaced)."""
        key = self._key(obj["metadata"]["name"], obj["metadata"].get("namespace"))
        self.cluster.writes.append(("apply", self.kind, key[2]))
        self.cluster.check_failure(self.kind, "apply")
        have = self.cluster.objects.get(key)
        if have is None:
            return copy.deepcopy(self.cluster.put(self.kind, obj))
        self.cluster.check_precondition(have, obj)
        new = merge_patch(have, obj)
        if self.kind == "PersistentVolumeClaim" and _storage(have) is not None and _storage(new) is not None \
                and parse_quantity(str(_storage(new))) < parse_quantity(str(_storage(have))):
            raise Invalid(422, "Invalid", f'PersistentVolumeClaim "{key[2]}" is invalid: spec.resources.requests'
                          ".storage: Forbidden: field can not be less than previous value")
        return copy.deepcopy(self.cluster.store_object(self.kind, new, previous=have))

    async def patch(self, name: str, patch: Any, *, namespace: str | None = None, patch_type: str = "merge",
                    subresource: str | None = None) -> Obj:
        assert patch_type == "merge", "the fake cluster speaks merge patches only"
        key = self._key(name, namespace)
        self.cluster.writes.append(("patch" if subresource is None else f"patch/{subresource}", self.kind, name))
        self.cluster.check_failure(self.kind, "patch")
        have = self.cluster.objects.get(key)
        if have is None:
            raise NotFound(404, "NotFound", f"{self.kind} {name} not found")
        self.cluster.check_precondition(have, patch)
        if subresource == "status":
            new = {**have, "status": merge_patch(have.get("status") or {}, patch.get("status") or {})}
        else:
            body = {k: v for k, v in patch.items() if k != "status"}
            new = merge_patch(have, body)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.cluster.remove(key)
            return copy.deepcopy(new)
        return copy.deepcopy(self.cluster.store_object(self.kind, new, previous=have))

    async def delete(self, name: str, namespace: str | None = None, **_options: Any) -> Obj:
        key = self._key(name, namespace)
        self.cluster.writes.append(("delete", self.kind, name))
        self.cluster.check_failure(self.kind, "delete")
        obj = self.cluster.objects.get(key)
        if obj is None:
            raise NotFound(404, "NotFound", f"{self.kind} {name} not found")
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                stamp = self.cluster.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
                self.cluster.store_object(self.kind, merge_patch(obj, {"metadata": {"deletionTimestamp": stamp}}),
                                          previous=obj)
            return copy.deepcopy(self.cluster.objects[key])
        self.cluster.remove(key)
        return obj


class FakeRecorder:
    """Events as (type, reason, message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _type, reason, _message in self.events]


class FakeCluster:
    """Objects, caches, a fake clock and a Context whose APIs are the fake ones."""

    def __init__(self, *, now: datetime = START) -> None:
        self.objects: dict[Key, Obj] = {}
        self.stores = {kind: Store(kind, index_labels=(DATABASE_LABEL,)) for kind in CACHED}
        self.writes: list[tuple[str, str, str]] = []
        self.lists: list[tuple[str, str]] = []
        self.failures: dict[tuple[str, str], ApiError] = {}
        self.recorder = FakeRecorder()
        self.last_rv = 0
        self._rv = itertools.count(1)
        self._frozen = False
        sets = {kind: StoreSet({None: store}) for kind, store in self.stores.items()}
        caches = Caches(sampledbs=sets["SampleDB"], backups=sets["SampleDBBackup"], statefulsets=sets["StatefulSet"],
                        pvcs=sets["PersistentVolumeClaim"], jobs=sets["Job"], services=sets["Service"],
                        configmaps=sets["ConfigMap"], secrets=sets["Secret"],
                        **({"pods": sets["Pod"]} if "Pod" in sets else {}),
                        **({"pdbs": sets["PodDisruptionBudget"]} if "PodDisruptionBudget" in sets else {}),
                        **({"deployments": sets["Deployment"]} if "Deployment" in sets else {}),
                        nodes=sets["Node"])
        self.clock = FakeClock(wall_start=now)
        self.ctx = Context(client=cast(KubeClient, None), caches=caches,
                           recorder=cast(EventRecorder, self.recorder), clock=self.clock)
        self.ctx.apis = {r.kind: cast(Any, FakeApi(self, r.kind)) for r in API_KINDS}
        self.put("Namespace", {"metadata": {"name": NS}, "status": {"phase": "Active"}})

    # ------------------------------------------------------------------ writing objects

    def put(self, kind: str, obj: Obj) -> Obj:
        """Store `obj` as the server would (a test's setup, or a create): defaults filled in."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if kind not in CLUSTER_SCOPED:
            meta.setdefault("namespace", NS)
        key = (kind, meta.get("namespace", ""), meta["name"])
        previous = self.objects.get(key)
        if previous is None:
            meta.setdefault("uid", f"uid-{kind.lower()}-{meta['name']}")
            meta.setdefault("creationTimestamp", self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"))
            meta.setdefault("generation", 1)
        return self.store_object(kind, obj, previous=previous)

    def store_object(self, kind: str, obj: Obj, *, previous: Obj | None) -> Obj:
        """Write `obj` with a new resourceVersion (and generation, when its spec changed); echo to the cache."""
        obj = {**obj, "kind": kind}
        if kind == "Secret" and "stringData" in obj:
            obj["data"] = {**(obj.get("data") or {}), **{k: base64.b64encode(str(v).encode()).decode()
                                                          for k, v in (obj.pop("stringData") or {}).items()}}
        meta = obj["metadata"] = dict(obj["metadata"])
        if previous is not None:
            meta["uid"] = previous["metadata"].get("uid")
            meta["generation"] = previous["metadata"].get("generation", 1)
            if obj.get("spec") != previous.get("spec"):
                meta["generation"] += 1
        self.last_rv = next(self._rv)
        meta["resourceVersion"] = str(self.last_rv)
        self.objects[(kind, meta.get("namespace", ""), meta["name"])] = obj
        if not self._frozen:
            self._echo(kind, obj)
        return obj

    def remove(self, key: Key) -> None:
        self.objects.pop(key, None)
        self.last_rv = next(self._rv)
        if not self._frozen and key[0] in self.stores:
            self.stores[key[0]].delete(ObjectRef(key[1], key[2]))

    def _echo(self, kind: str, obj: Obj) -> None:
        if kind not in self.stores:
            return
        if kind == "Node" and not (obj.get("spec") or {}).get("unschedulable"):  # the watch's field selector
            self.stores[kind].delete(ObjectRef("", obj["metadata"]["name"]))
            return
        labels = obj["metadata"].get("labels") or {}
        if kind in SELECTED and labels.get(MANAGED_LABEL) != MANAGED_BY:
            return
        self.stores[kind].upsert(obj)

    def set_status(self, kind: str, name: str, status: Obj) -> Obj:
        """Replace an object's status (a controller or kubelet writing it)."""
        key = (kind, "" if kind in CLUSTER_SCOPED else NS, name)
        obj = self.objects[key]
        return self.store_object(kind, {**obj, "status": status}, previous=obj)

    def patch(self, kind: str, name: str, patch: Obj) -> Obj:
        """A user's merge patch (no precondition); the spec and metadata only."""
        key = (kind, "" if kind in CLUSTER_SCOPED else NS, name)
        obj = self.objects[key]
        return self.store_object(kind, merge_patch(obj, patch), previous=obj)

    # ------------------------------------------------------------------ server behaviour

    def check_precondition(self, have: Obj, body: Any) -> None:
        wanted = ((body or {}).get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if wanted and wanted != have["metadata"].get("resourceVersion"):
            raise Conflict(409, "Conflict", f"Operation cannot be fulfilled on {have.get('kind')}"
                           f' "{have["metadata"]["name"]}": the object has been modified; please apply your'
                           " changes to the latest version and try again")

    def fail(self, kind: str, verb: str, error: ApiError | None) -> None:
        """Make every `verb` on `kind` raise `error` (None: stop failing)."""
        if error is None:
            self.failures.pop((kind, verb), None)
        else:
            self.failures[(kind, verb)] = error

    def check_failure(self, kind: str, verb: str) -> None:
        error = self.failures.get((kind, verb))
        if error is not None:
            raise error

    # ------------------------------------------------------------------ caches

    def freeze_cache(self) -> None:
        """From now on writes do not reach the caches (their watch events are late)."""
        self._frozen = True

    def sync_cache(self) -> None:
        """Deliver what the watches would have: the caches hold the server's objects again."""
        self._frozen = False
        for kind, store in self.stores.items():
            store.replace([o for (k, _ns, _n), o in self.objects.items() if k == kind
                           and (kind not in SELECTED
                                or (o["metadata"].get("labels") or {}).get(MANAGED_LABEL) == MANAGED_BY)
                           and (kind != "Node" or (o.get("spec") or {}).get("unschedulable"))])

    # ------------------------------------------------------------------ reading

    def get(self, kind: str, name: str) -> Obj | None:
        return self.objects.get((kind, "" if kind in CLUSTER_SCOPED else NS, name))

    def of_kind(self, kind: str) -> list[Obj]:
        return [o for (k, _ns, _n), o in self.objects.items() if k == kind]

    def written(self, verb: str | None = None, kind: str | None = None) -> list[tuple[str, str, str]]:
        return [w for w in self.writes if (verb is None or w[0] == verb) and (kind is None or w[1] == kind)]

    # ------------------------------------------------------------------ the SampleDB reconciler and its world

    def reconciler(self) -> SampleDBReconciler:
        return SampleDBReconciler(self.ctx)

    async def reconcile(self, name: str) -> Any:
        """One pass of the SampleDB reconciler for `name`."""
        return await self.reconciler()(ObjectRef(NS, name))

    def statefulset_ready(self, name: str) -> Obj:
        """The StatefulSet controller and kubelet's verdict: the pod runs the current template and is ready."""
        sts = self.objects[("StatefulSet", NS, name)]
        gen = sts["metadata"].get("generation", 1)
        return self.set_status("StatefulSet", name, {
            "observedGeneration": gen, "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1,
            "currentRevision": f"{name}-{gen}", "updateRevision": f"{name}-{gen}"})

    def bind(self, pvc: str) -> Obj:
        return self.set_status("PersistentVolumeClaim", pvc, {"phase": "Bound"})

    def finish_job(self, name: str, *, succeeded: bool = True, message: str = "") -> Obj:
        cond = ({"type": "Complete", "status": "True"} if succeeded
                else {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                      "message": message or "Job has reached the specified backoff limit"})
        status: Obj = {"conditions": [cond]}
        if succeeded:
            status["completionTime"] = self.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        return self.set_status("Job", name, status)


def sampledb(name: str = "orders", *, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    """A SampleDB object as a user applies it (version 16.4 and a 1Gi volume unless `spec` says otherwise)."""
    body: Obj = {"version": "16.4", "storage": {"size": "1Gi"}}
    body.update(spec)
    meta: Obj = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": meta, "spec": body}


async def running_database(cluster: FakeCluster, name: str = "orders", **spec: Any) -> Obj:
    """A SampleDB taken to Ready (children created, volumes bound, pod ready); its stored object."""
    cluster.put("SampleDB", sampledb(name, **spec))
    await cluster.reconcile(name)
    await cluster.reconcile(name)
    for pvc in (names.data_pvc_name(name), names.backup_pvc_name(name)):
        cluster.bind(pvc)
    cluster.statefulset_ready(names.statefulset_name(name))
    await cluster.reconcile(name)
    obj = cluster.get("SampleDB", name)
    assert obj is not None and obj["status"]["phase"] == "Running", obj and obj.get("status")
    return obj


def condition(obj: Obj | None, type_: str) -> Obj:
    """One condition of an object's status ({} when absent)."""
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), {})
