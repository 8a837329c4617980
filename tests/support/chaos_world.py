"""The fake cluster of tests/support/fake_cluster.py as a world for chaos tests.

What the fake cluster lacks and chaos needs: database pods (the StatefulSet controller's), Jobs'
pods, new uids for re-created objects, a pods/exec that behaves like the postgres container, and
a clock whose sleep lets the world move (the operator's passes, kubelet) instead of waiting.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from tests.support.fake_cluster import NS, FakeApi, FakeCluster, running_database

from sampledb_operator.chaos.inject import JOB_NAME_LABEL
from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.kube.errors import Forbidden
from sampledb_operator.kube.exec import ExecResult
from sampledb_operator.model import names

Obj = dict[str, Any]
MiB = 2**20


def unique_uids(cluster: FakeCluster) -> None:
    """Objects created after this get a uid never used before (the fake reuses uid-<kind>-<name>)."""
    counter = itertools.count(1)
    put = cluster.put

    def put_unique(kind: str, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        if (kind, meta.get("namespace") or NS, meta["name"]) not in cluster.objects:
            meta.setdefault("uid", f"uid-{kind.lower()}-{meta['name']}-{next(counter)}")
        return put(kind, obj)

    cluster.put = put_unique  # type: ignore[method-assign]


def database_pod(cluster: FakeCluster, db: str, *, restarts: int = 0) -> Obj:
    """The database's pod, Ready, as the StatefulSet controller and kubelet make it."""
    return cluster.put("Pod", {
        "metadata": {"name": names.pod_name(db), "namespace": NS,
                     "labels": {DATABASE_LABEL: db, COMPONENT_LABEL: "database"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "postgres", "restartCount": restarts, "ready": True}]}})


def backup_job(cluster: FakeCluster, db: str, name: str) -> Obj:
    """A running backup Job of `db` and its running pod."""
    labels = {DATABASE_LABEL: db, COMPONENT_LABEL: "backup", "app.kubernetes.io/managed-by": "sampledb-operator"}
    job = cluster.put("Job", {"metadata": {"name": name, "namespace": NS, "labels": labels},
                              "status": {"active": 1}})
    cluster.put("Pod", {"metadata": {"name": f"{name}-abcde", "namespace": NS,
                                     "labels": {**labels, JOB_NAME_LABEL: name}},
                        "status": {"phase": "Running"}})
    return job


async def databases(cluster: FakeCluster, *dbs: str, labels: dict[str, str] | None = None) -> None:
    """Running databases with their pods; `labels` on the SampleDBs."""
    for db in dbs:
        await running_database(cluster, db)
        if labels:
            cluster.patch("SampleDB", db, {"metadata": {"labels": labels}})
        database_pod(cluster, db)


class FakeExec:
    """pods/exec on the fake postgres containers: records every call; SIGQUIT restarts the container,
    df/du answer from `volume`, fallocate and rm change it. `refuse` makes every call Forbidden."""

    def __init__(self, cluster: FakeCluster, *, capacity: int = 256 * MiB, used: int = 40 * MiB,
                 available: int = 100 * 1024 * MiB) -> None:
        self.cluster = cluster
        self.calls: list[tuple[str, str, str, list[str]]] = []
        self.refuse = False
        self.capacity, self.used, self.available = capacity, used, available
        self.files: dict[str, int] = {}

    async def __call__(self, namespace: str, pod: str, container: str, argv: Sequence[str]) -> ExecResult:
        self.calls.append((namespace, pod, container, list(argv)))
        if self.refuse:
            raise Forbidden(403, "Forbidden", 'pods "x" is forbidden: cannot create resource "pods/exec"')
        script = argv[-1]
        if argv[:2] == ["sh", "-c"] and script == "kill -QUIT 1":
            obj = self.cluster.objects[("Pod", namespace, pod)]
            statuses = [{**s, "restartCount": s["restartCount"] + 1} for s in obj["status"]["containerStatuses"]]
            self.cluster.store_object("Pod", {**obj, "status": {**obj["status"], "containerStatuses": statuses}},
                                      previous=obj)
            return ExecResult(None, "", "")
        if script.startswith("df "):
            return ExecResult(0, f"/dev/sda1 {self.capacity // 1024} 0 {self.available // 1024} 1% /data\n"
                                 f"{self.used // 1024}\t/var/lib/postgresql/data\n", "")
        if script.startswith("fallocate"):
            size = int(script.split()[2])
            self.files[script.split()[3]] = size
            return ExecResult(0, "", "")
        if argv[:2] == ["rm", "-f"]:
            self.files.pop(argv[2], None)
            return ExecResult(0, "", "")
        return ExecResult(127, "", f"unexpected command {argv}")


class AutoClock:
    """A clock whose sleep advances time at once, then lets the world take a step."""

    def __init__(self, step: Callable[[], Any] | None = None) -> None:
        self.now = 0.0
        self.step = step
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.step is not None:
            result = self.step()
            if hasattr(result, "__await__"):
                await result


async def operator_and_kubelet(cluster: FakeCluster, dbs: Sequence[str]) -> None:
    """One step of the world: the operator's pass per database, the StatefulSet controller's
    pod (re-created with a new uid when gone), and the StatefulSet's readiness."""
    for db in dbs:
        if cluster.get("SampleDB", db) is None:
            continue
        await cluster.reconcile(db)
        sts = cluster.get("StatefulSet", names.statefulset_name(db))
        if sts is None:
            continue
        if cluster.get("Pod", names.pod_name(db)) is None:
            database_pod(cluster, db)
        if not (sts.get("status") or {}).get("readyReplicas"):
            cluster.statefulset_ready(names.statefulset_name(db))
        await cluster.reconcile(db)


class SpyApi:
    """A fake kind's API that records every delete with its options."""

    def __init__(self, inner: Any, deletes: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        self.inner, self.deletes = inner, deletes

    async def get(self, name: str, namespace: str | None = None) -> Obj:
        result: Obj = await self.inner.get(name, namespace)
        return result

    async def list(self, namespace: str | None = None, *, label_selector: str | None = None,
                   continue_token: str | None = None) -> Any:
        return await self.inner.list(namespace, label_selector=label_selector)

    async def delete(self, name: str, namespace: str | None = None, **options: Any) -> Any:
        self.deletes.append((self.inner.kind, namespace or "", name, options))
        return await self.inner.delete(name, namespace, **options)


def chaos_apis(cluster: FakeCluster, deletes: list[tuple[str, str, str, dict[str, Any]]]) -> dict[str, Any]:
    """The kinds chaos uses, over the fake cluster, deletes recorded."""
    kinds = ("SampleDB", "Pod", "Service", "ConfigMap", "StatefulSet", "Job", "PersistentVolumeClaim", "Lease")
    return {kind: SpyApi(FakeApi(cluster, kind), deletes) for kind in kinds}
