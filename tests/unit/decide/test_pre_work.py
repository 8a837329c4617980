"""decide/lifecycle/pre_work.py: the backup before a piece of work is requested only while none of its name is cached,
announced BackupRequested, and then only looked at (its phase and message)."""

from __future__ import annotations

from sampledb_operator.decide.backup.backups import pre_work_backup_name
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.decide.lifecycle import pre_work
from sampledb_operator.model.sampledb import SampleDB

DB = SampleDB.model_validate({
    "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
    "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1"},
    "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
})


def test_a_missing_backup_is_requested_with_its_event() -> None:
    name = pre_work_backup_name(DB, "pre-upgrade", "16.4->17.2")
    found = pre_work.pre_work_backup(DB, "pre-upgrade", name, None, may_request=True)
    assert (found.name, found.phase, found.message) == (name, None, "")
    assert found.request is not None
    assert found.request.obj["spec"] == {"database": "orders", "reason": "pre-upgrade",
                                         "storage": {"claimName": "orders-backups"}}
    assert found.request.obj["metadata"]["labels"]["sampledb.io/database"] == "orders"
    assert found.request.announce == EventSpec("Normal", "BackupRequested", f"pre-upgrade backup {name} requested")


def test_a_cached_backup_is_only_looked_at() -> None:
    cached = {"metadata": {"name": "b"}, "status": {"phase": "Failed", "message": "disk full"}}
    found = pre_work.pre_work_backup(DB, "pre-migration", "b", cached, may_request=True)
    assert (found.phase, found.message, found.request) == ("Failed", "disk full", None)
    fresh = pre_work.pre_work_backup(DB, "pre-migration", "b", {"metadata": {"name": "b"}}, may_request=True)
    assert (fresh.phase, fresh.request) == (None, None)


def test_no_request_when_the_work_may_not_start() -> None:
    assert pre_work.pre_work_backup(DB, "pre-upgrade", "b", None, may_request=False).request is None


def test_another_piece_of_work_gets_another_name() -> None:
    assert pre_work_backup_name(DB, "pre-upgrade", "a") != pre_work_backup_name(DB, "pre-upgrade", "b") != \
        pre_work_backup_name(DB, "pre-migration", "b")
