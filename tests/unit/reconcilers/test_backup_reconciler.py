"""reconcilers/backup.py: a SampleDBBackup the backup script would refuse fails at once, without a Job."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from tests.support.fake_cluster import FakeCluster, running_database

from sampledb_operator.decide.backups import pre_work_backup_name
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.backup import BackupReconciler
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

NS = "shop"
KINDS = ("SampleDB", "SampleDBBackup", "StatefulSet", "PersistentVolumeClaim", "Job", "Service", "ConfigMap", "Secret")


class RecordingApi:
    """Records every write; a backup's status patch is all this test expects."""

    def __init__(self, kind: str, writes: list[tuple[str, str, Obj]]) -> None:
        self.kind, self.writes = kind, writes

    async def patch(self, name: str, body: Obj, **_options: Any) -> Obj:
        self.writes.append(("patch", f"{self.kind}/{name}", body))
        return body

    async def get(self, name: str, _namespace: str | None = None) -> Obj:
        raise NotFound(404, "NotFound", f"{self.kind} {name} not found")

    async def create(self, body: Obj, **_options: Any) -> Obj:
        self.writes.append(("create", f"{self.kind}/{body['metadata']['name']}", body))
        return body


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def event(self, _obj: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


def _context(objects: list[Obj]) -> tuple[Context, list[tuple[str, str, Obj]], Recorder]:
    stores = {kind: Store(kind) for kind in KINDS}
    for obj in objects:
        stores[obj["kind"]].upsert(obj)
    sets = {kind: StoreSet({None: store}) for kind, store in stores.items()}
    caches = Caches(sampledbs=sets["SampleDB"], backups=sets["SampleDBBackup"], statefulsets=sets["StatefulSet"],
                    pvcs=sets["PersistentVolumeClaim"], jobs=sets["Job"], services=sets["Service"],
                    configmaps=sets["ConfigMap"], secrets=sets["Secret"])
    recorder = Recorder()
    ctx = Context(client=cast(KubeClient, None), caches=caches, recorder=cast(EventRecorder, recorder),
                  clock=FakeClock(wall_start=datetime(2026, 1, 1, tzinfo=UTC)))
    writes: list[tuple[str, str, Obj]] = []
    ctx.apis = {kind: cast(Any, RecordingApi(kind, writes)) for kind in KINDS}
    return ctx, writes, recorder


def _db() -> Obj:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
            "metadata": {"name": "db", "namespace": NS, "uid": "u-db"},
            "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "DatabaseReady"}]}}


def _backup(name: str) -> Obj:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": name, "namespace": NS, "uid": "u-b", "generation": 1,
                         "labels": {"sampledb.io/database": "db"}},
            "spec": {"database": "db"}}


async def test_backup_stored_with_a_name_the_script_refuses_fails_without_a_job() -> None:
    name = "b" * (names.BACKUP_NAME_MAX + 1)
    ctx, writes, recorder = _context([_db(), _backup(name)])
    assert await BackupReconciler(ctx)(ObjectRef(NS, name)) is None
    [(verb, target, body)] = writes
    assert (verb, target) == ("patch", f"SampleDBBackup/{name}")
    assert body["status"]["phase"] == "Failed"
    assert f"must be at most {names.BACKUP_NAME_MAX} characters" in body["status"]["message"]
    assert [(t, r) for t, r, _ in recorder.events] == [("Warning", "BackupFailed")]


async def test_backup_with_the_longest_name_the_script_accepts_is_not_refused() -> None:
    name = "b" * names.BACKUP_NAME_MAX
    ctx, writes, _ = _context([_db(), _backup(name)])
    await BackupReconciler(ctx)(ObjectRef(NS, name))  # goes on to look for the backup volume
    [(_, _, body)] = writes
    assert body["status"]["phase"] == "Pending"
    assert body["status"]["message"] == "backup volume db-backups does not exist"


def test_pre_work_backup_names_fit_the_script() -> None:
    db = SampleDB.model_validate({**_db(), "metadata": {"name": "d" * names.MAX_NAME_LENGTH, "uid": "u"}})
    assert len(pre_work_backup_name(db, "pre-migration", "token")) <= names.BACKUP_NAME_MAX


async def test_every_backup_gets_its_database_label_finished_or_not() -> None:
    """Issue #11, item 11: `kubectl get sdbb -l sampledb.io/database=<db>` lists manual backups too."""
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "by-hand"}, "spec": {"database": "orders"}})
    cluster.put("SampleDBBackup", {"metadata": {"name": "old", "labels": {"team": "a"}},
                                   "spec": {"database": "orders"}, "status": {"phase": "Succeeded"}})
    for name in ("by-hand", "old"):
        await BackupReconciler(cluster.ctx)(ObjectRef(NS, name))
    listed = await cluster.ctx.apis["SampleDBBackup"].list(NS, label_selector="sampledb.io/database=orders")
    assert sorted(b["metadata"]["name"] for b in listed.items) == ["by-hand", "old"]
    old = cluster.get("SampleDBBackup", "old")
    assert old is not None and old["metadata"]["labels"]["team"] == "a"  # other labels kept
    by_hand = cluster.get("SampleDBBackup", "by-hand")
    assert by_hand is not None and by_hand["status"]["phase"] == "Running"  # and the pass went on
