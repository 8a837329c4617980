"""reconcilers/backup.py: a SampleDBBackup the backup script would refuse fails at once, without a Job; and
the whole run of a backup on the fake cluster (label, finalizer, Job, status, Events, metrics)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from tests.support.fake_cluster import FakeCluster, running_database

from sampledb_operator.decide.backup.backup_files import FILES_FINALIZER
from sampledb_operator.decide.backup.backups import pre_work_backup_name
from sampledb_operator.decide.labels import bucket_label
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability import metrics
from sampledb_operator.reconcilers.backup import BackupReconciler
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.reconcilers.effects import LOOK_AGAIN_AFTER_CONFLICT
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
                         "labels": {"sampledb.io/database": "db", **bucket_label(NS, "db")}},
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


# ---------------------------------------------------------------- the whole run, on the fake cluster

JOB = names.backup_job_name("orders", "b1")
SHA = "c" * 64


def _count(result: str, reason: str = "manual") -> float:
    return cast(float, metrics.backups_total.labels(reason=reason, result=result)._value.get())  # type: ignore[attr-defined]


async def _cluster_with_backup(**spec: Any) -> tuple[FakeCluster, BackupReconciler, ObjectRef]:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders", **spec}})
    cluster.writes.clear()
    return cluster, BackupReconciler(cluster.ctx), ObjectRef(NS, "b1")


def _pod_result(cluster: FakeCluster, line: str) -> None:
    """The backup Job's pod, its script's result line in the termination message."""
    cluster.put("Pod", {"metadata": {"name": f"{JOB}-x", "labels": {"job-name": JOB}},
                        "status": {"containerStatuses": [{"state": {"terminated": {"message": line}}}]}})


async def test_a_new_backup_is_labelled_guarded_and_started_in_one_pass_and_left_alone_after() -> None:
    cluster, backups, ref = await _cluster_with_backup()
    assert await backups(ref) is None
    assert cluster.written() == [("patch", "SampleDBBackup", "b1"), ("patch", "SampleDBBackup", "b1"),
                                 ("create", "Job", JOB), ("patch/status", "SampleDBBackup", "b1")]
    stored = cluster.get("SampleDBBackup", "b1")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"sampledb.io/database": "orders", **bucket_label(NS, "orders")}
    assert stored["metadata"]["finalizers"] == [FILES_FINALIZER]
    assert (stored["status"]["phase"], stored["status"]["message"]) == ("Running", f"Job {JOB} started")
    assert cluster.recorder.events[-1] == ("Normal", "BackupStarted", f"started Job {JOB}")
    job = cluster.get("Job", JOB)
    assert job is not None and job["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]

    cluster.writes.clear()
    events = len(cluster.recorder.events)
    await backups(ref)  # the Job runs: the status already says Running
    assert cluster.written("patch/status") == [("patch/status", "SampleDBBackup", "b1")]  # "is running"
    await backups(ref)
    assert len(cluster.written()) == 1  # nothing more to write
    assert len(cluster.recorder.events) == events


async def test_a_succeeded_job_records_its_result_line_once() -> None:
    cluster, backups, ref = await _cluster_with_backup()
    await backups(ref)
    started = cluster.get("SampleDBBackup", "b1")["status"]["startedAt"]  # type: ignore[index]
    cluster.clock.advance(90)
    _pod_result(cluster, 'pg_dump done\n{"size_bytes": 4096, "sha256": "' + SHA + '"}')
    cluster.finish_job(JOB)
    before = _count("succeeded")
    assert await backups(ref) is None
    status = cluster.get("SampleDBBackup", "b1")["status"]  # type: ignore[index]
    assert (status["phase"], status["sizeBytes"], status["checksum"]) == ("Succeeded", 4096, SHA)
    assert status["location"] == {"pvcName": "orders-backups", "path": "/sampledb/backups/b1.dump"}
    assert (status["startedAt"], status["version"]) == (started, "16.4")
    assert cluster.recorder.events[-1] == ("Normal", "BackupSucceeded", "backup of orders completed")
    assert _count("succeeded") == before + 1

    cluster.writes.clear()
    await backups(ref)  # finished: never touched again
    assert cluster.written() == []
    assert _count("succeeded") == before + 1


async def test_a_failed_job_fails_the_backup_with_a_warning() -> None:
    cluster, backups, ref = await _cluster_with_backup()
    await backups(ref)
    _pod_result(cluster, '{"message": "could not connect"}')
    cluster.finish_job(JOB, succeeded=False)
    before = _count("failed")
    await backups(ref)
    message = f"Job {JOB} failed: BackoffLimitExceeded: could not connect"
    status = cluster.get("SampleDBBackup", "b1")["status"]  # type: ignore[index]
    assert (status["phase"], status["message"]) == ("Failed", message)
    assert cluster.recorder.events[-1] == ("Warning", "BackupFailed", message)
    assert _count("failed") == before + 1


async def test_a_backup_waits_for_its_database_to_be_ready_without_a_job() -> None:
    cluster, backups, ref = await _cluster_with_backup()
    db = cluster.get("SampleDB", "orders")
    assert db is not None
    cluster.set_status("SampleDB", "orders", {**db["status"], "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodNotReady", "message": "",
         "lastTransitionTime": "2026-11-30T09:00:00Z"}]})
    assert await backups(ref) is None
    status = cluster.get("SampleDBBackup", "b1")["status"]  # type: ignore[index]
    assert (status["phase"], status["message"]) == ("Pending", "waiting for SampleDB orders to be Ready")
    assert cluster.get("Job", JOB) is None
    assert cluster.written("create") == []
    assert FILES_FINALIZER not in (cluster.get("SampleDBBackup", "b1") or {})["metadata"].get("finalizers", [])


async def test_a_volume_outside_the_cache_is_read_live_and_a_missing_one_requeues() -> None:
    cluster, backups, ref = await _cluster_with_backup(storage={"claimName": "mine"})
    assert await backups(ref) == Result(requeue=True)
    status = cluster.get("SampleDBBackup", "b1")["status"]  # type: ignore[index]
    assert status["message"] == "backup volume mine does not exist"
    assert cluster.get("Job", JOB) is None

    cluster.put("PersistentVolumeClaim", {"metadata": {"name": "mine"}})  # a user's volume: never cached
    assert cluster.ctx.cached("PersistentVolumeClaim", NS, "mine") is None
    assert await backups(ref) is None
    job = cluster.get("Job", JOB)
    assert job is not None
    assert {"name": "backups", "persistentVolumeClaim": {"claimName": "mine"}} in \
        job["spec"]["template"]["spec"]["volumes"]


async def test_a_stale_label_patch_ends_the_pass() -> None:
    cluster, backups, ref = await _cluster_with_backup()
    cluster.freeze_cache()
    cluster.patch("SampleDBBackup", "b1", {"metadata": {"annotations": {"note": "x"}}})  # not seen yet
    assert await backups(ref) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    assert cluster.written() == [("patch", "SampleDBBackup", "b1")]  # refused: nothing after it
    assert cluster.get("Job", JOB) is None
    cluster.sync_cache()
    await backups(ref)
    assert cluster.get("Job", JOB) is not None
