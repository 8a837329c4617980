"""Status writes carry the resourceVersion the pass read (issue #11, item 6).

A pass on a stale cache must not put older fields back over what a newer pass wrote, count a
finished backup a second time, or rewrite a backup's startedAt: its status write is refused with
Conflict, and it comes back for the newer object.
"""

from __future__ import annotations

from tests.support.fake_cluster import NS, FakeCluster, condition, running_database, sampledb

from sampledb_operator.decide.lifecycle.lifecycle import FINALIZER
from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model import names
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.model.result import Result
from sampledb_operator.observability import metrics
from sampledb_operator.reconcilers.backup import BackupReconciler
from sampledb_operator.reconcilers.effects import LOOK_AGAIN_AFTER_CONFLICT
from sampledb_operator.reconcilers.sampledb import STATUS_RECHECK_SECONDS

STS = names.statefulset_name("orders")


async def test_a_stale_pass_does_not_write_back_older_status_fields() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.freeze_cache()
    # A newer pass recorded a migration; this process's cache has not seen it yet.
    stored = cluster.get("SampleDB", "orders")
    assert stored is not None
    applied = [{"name": "0001_init.sql", "appliedAt": "2026-11-30T09:05:00Z"}]
    cluster.set_status("SampleDB", "orders", {**stored["status"], "appliedMigrations": applied})
    # Meanwhile the pod went unready in the cache: the stale pass has a status change to write.
    sts = cluster.ctx.caches.statefulsets.get(ObjectRef(NS, STS))
    assert sts is not None
    cluster.stores["StatefulSet"].upsert({**sts, "status": {**sts["status"], "readyReplicas": 0}})

    events = len(cluster.recorder.events)
    result = await cluster.reconcile("orders")
    assert result == Result(requeue=True)
    assert cluster.get("SampleDB", "orders")["status"]["appliedMigrations"] == applied  # type: ignore[index]
    assert len(cluster.recorder.events) == events  # no transition events for a write that did not happen

    cluster.sync_cache()  # the newer object arrives: its pass writes on top of it
    await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    assert db is not None and db["status"]["appliedMigrations"] == applied
    assert condition(db, "Ready")["status"] == "True"


def _succeeded_total(reason: str = "manual") -> float:
    return metrics.backups_total.labels(reason=reason, result="succeeded")._value.get()  # type: ignore[attr-defined]


async def test_a_stale_backup_pass_neither_counts_it_twice_nor_rewrites_started_at() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders"}})
    backups = BackupReconciler(cluster.ctx)
    ref = ObjectRef(NS, "b1")
    await backups(ref)  # finalizer, Job, Running
    started = cluster.get("SampleDBBackup", "b1")["status"]["startedAt"]  # type: ignore[index]
    job = names.backup_job_name("orders", "b1")
    cluster.clock.advance(60)
    cluster.finish_job(job)
    before = _succeeded_total()

    cluster.freeze_cache()  # two passes see the backup still Running
    await backups(ref)
    await backups(ref)
    assert _succeeded_total() == before + 1
    assert cluster.recorder.reasons().count("BackupSucceeded") == 1
    status = cluster.get("SampleDBBackup", "b1")["status"]  # type: ignore[index]
    assert (status["phase"], status["startedAt"]) == ("Succeeded", started)


async def test_a_pass_that_changed_the_status_looks_again_and_a_quiet_one_does_not() -> None:
    """Its own status event does not wake the controller (triggers.unless_own_write), so the steps that read
    the status (migrations wait for Initialized=True) get their next pass from the Result."""
    cluster = FakeCluster()
    await running_database(cluster)  # the pass that made it Ready wrote the status
    assert cluster.written("patch/status", "SampleDB")
    before = len(cluster.written("patch/status", "SampleDB"))
    quiet = await cluster.reconcile("orders")
    assert len(cluster.written("patch/status", "SampleDB")) == before
    assert quiet is None or quiet.requeue_after != STATUS_RECHECK_SECONDS
    cluster.patch("SampleDB", "orders", {"spec": {"storage": {"size": "2Gi"}}})  # a change the status reports
    changed = await cluster.reconcile("orders")
    assert len(cluster.written("patch/status", "SampleDB")) > before
    assert changed is not None and changed.requeue_after == STATUS_RECHECK_SECONDS


async def test_a_refused_backup_status_write_comes_back_even_when_no_newer_backup_exists() -> None:
    """The chaos suite's lost wake-up: a 409 on the write that records a finished backup, with no newer object
    behind it, so no watch event follows. The pass must ask to look again itself, or the backup (and a
    deletion waiting for its snapshot) stays Running for good."""
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.put("SampleDBBackup", {"metadata": {"name": "b1"}, "spec": {"database": "orders"}})
    backups = BackupReconciler(cluster.ctx)
    ref = ObjectRef(NS, "b1")
    await backups(ref)
    cluster.finish_job(names.backup_job_name("orders", "b1"))
    cluster.fail("SampleDBBackup", "patch", Conflict(409, "Conflict", "the object has been modified"))
    assert await backups(ref) == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    assert cluster.get("SampleDBBackup", "b1")["status"]["phase"] == "Running"  # type: ignore[index]
    cluster.fail("SampleDBBackup", "patch", None)
    assert await backups(ref) is None
    assert cluster.get("SampleDBBackup", "b1")["status"]["phase"] == "Succeeded"  # type: ignore[index]


async def test_a_refused_finalizer_write_ends_the_pass_quietly_and_it_looks_again() -> None:
    """The first pass adds the finalizer before anything else: refused, it writes nothing more and is not
    an error (no traceback, no error count, no ReconcileError), and it comes back by itself."""
    cluster = FakeCluster()
    cluster.put("SampleDB", sampledb("orders"))
    cluster.fail("SampleDB", "patch", Conflict(409, "Conflict", "the object has been modified"))
    assert await cluster.reconcile("orders") == Result(requeue_after=LOOK_AGAIN_AFTER_CONFLICT)
    assert cluster.written() == [("patch", "SampleDB", "orders")]
    cluster.fail("SampleDB", "patch", None)
    await cluster.reconcile("orders")
    stored = cluster.get("SampleDB", "orders")
    assert stored is not None and stored["metadata"]["finalizers"] == [FINALIZER]
    assert cluster.get("StatefulSet", STS) is not None
