"""What backup, restore, upgrade, pause and resume would send: objects and merge patches, and refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sampledb_operator.plugin.actions import (
    ActionError,
    backup_object,
    paused_patch,
    restore_object,
    upgrade_kind,
    upgrade_patch,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_backup_is_a_manual_sampledbbackup_named_like_the_operators() -> None:
    assert backup_object("orders", "shop", NOW) == {
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
        "metadata": {"name": "orders-manual-20260102030405", "namespace": "shop"},
        "spec": {"database": "orders", "reason": "manual"}}
    assert backup_object("orders", "shop", NOW, "before-change")["metadata"]["name"] == "before-change"


@pytest.mark.parametrize("name", ["Bad Name", "UPPER", "-dash", "a" * 202, "x_y"])
def test_a_backup_name_kubernetes_or_the_backup_script_would_refuse_is_refused_here(name: str) -> None:
    with pytest.raises(ActionError, match="backup name"):
        backup_object("orders", "shop", NOW, name)


def backup(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "orders-manual-1"}, "spec": {"database": "orders"},
            "status": {"phase": "Succeeded", "version": "16.4", **status}}


SOURCE = {"spec": {"version": "17.2", "image": "registry.example/pg:17.2", "storage": {"size": "5Gi",
                                                                                      "storageClassName": "fast"},
                   "resources": {"requests": {"cpu": "1"}}, "parameters": {"max_connections": "50"},
                   "init": {"configMapKeyRef": {"name": "i", "key": "k"}}, "migrations": {"configMapName": "m"},
                   "backup": {"schedule": "@daily"}, "paused": True, "deletionPolicy": "Retain",
                   "upgrade": {"backupBeforeMinor": False}}}


def test_a_restore_is_a_new_sampledb_with_spec_restore_and_only_the_safe_settings_of_the_source() -> None:
    obj = restore_object(backup(), SOURCE, "orders-copy", "shop")
    assert obj["metadata"] == {"name": "orders-copy", "namespace": "shop"}
    assert obj["spec"] == {
        "version": "16.4",                         # the backup's version, not the source's newer one
        "storage": {"size": "5Gi", "storageClassName": "fast"},
        "restore": {"backupName": "orders-manual-1"},
        "resources": {"requests": {"cpu": "1"}}, "parameters": {"max_connections": "50"},
        "upgrade": {"backupBeforeMinor": False},
    }   # no image (it runs 17.2), init, migrations, schedule, paused or deletionPolicy


def test_the_sources_image_is_kept_only_for_the_same_version() -> None:
    obj = restore_object(backup(version="17.2"), SOURCE, "copy", "shop")
    assert obj["spec"]["image"] == "registry.example/pg:17.2"


def test_restore_options_override_and_a_gone_source_needs_them() -> None:
    obj = restore_object(backup(), None, "copy", "shop", version="17.2", storage_size="20Gi")
    assert (obj["spec"]["version"], obj["spec"]["storage"]) == ("17.2", {"size": "20Gi"})
    with pytest.raises(ActionError, match="--storage-size"):
        restore_object(backup(), None, "copy", "shop")
    with pytest.raises(ActionError, match="--version"):
        restore_object(backup(version=None), None, "copy", "shop", storage_size="1Gi")
    with pytest.raises(ActionError, match=r"MAJOR\.MINOR"):
        restore_object(backup(), SOURCE, "copy", "shop", version="17")


def test_a_failed_backup_is_not_restored() -> None:
    with pytest.raises(ActionError, match="failed"):
        restore_object(backup(phase="Failed", message="disk full"), SOURCE, "copy", "shop")


def test_upgrade_patches_spec_version_and_nothing_when_already_asked() -> None:
    db = {"spec": {"version": "16.4"}}
    assert upgrade_patch(db, "17.2") == {"spec": {"version": "17.2"}}
    assert upgrade_patch(db, "16.4") is None
    with pytest.raises(ActionError, match=r"MAJOR\.MINOR"):
        upgrade_patch(db, "seventeen")


def test_upgrade_of_a_pinned_image_needs_an_image_or_the_default() -> None:
    db = {"spec": {"version": "16.4", "image": "registry.example/pg:16.4"}}
    with pytest.raises(ActionError, match="--image"):
        upgrade_patch(db, "17.2")
    assert upgrade_patch(db, "17.2", image="registry.example/pg:17.2") == {
        "spec": {"version": "17.2", "image": "registry.example/pg:17.2"}}
    assert upgrade_patch(db, "17.2", default_image=True) == {"spec": {"version": "17.2", "image": None}}
    with pytest.raises(ActionError, match="not both"):
        upgrade_patch(db, "17.2", image="x:17.2", default_image=True)


@pytest.mark.parametrize(("current", "wanted", "kind"), [
    ("16.4", "17.2", "major"), ("17.2", "17.4", "minor"), ("17.4", "17.2", "minor"), (None, "17.2", "unknown"),
])
def test_upgrade_kind(current: str | None, wanted: str, kind: str) -> None:
    assert upgrade_kind(current, wanted) == kind


def test_pause_and_resume_patch_spec_paused_only_when_it_changes() -> None:
    assert paused_patch({"spec": {}}, True) == {"spec": {"paused": True}}
    assert paused_patch({"spec": {"paused": True}}, True) is None
    assert paused_patch({"spec": {"paused": True}}, False) == {"spec": {"paused": False}}
    assert paused_patch({"spec": {}}, False) is None


ARCHIVED = {"metadata": {"name": "orders", "namespace": "prod"},
            "spec": {"version": "17.2", "storage": {"size": "5Gi"}, "parameters": {"work_mem": "8MB"},
                     "init": {"configMapKeyRef": {"name": "i", "key": "k"}},
                     "backup": {"objectStore": {"endpoint": "https://s3.example", "bucket": "pg-archive",
                                                "credentials": {"secretName": "keys"}, "archiveTimeoutSeconds": 30,
                                                "baseBackupSchedule": "@hourly"}}}}


def test_a_recovery_names_the_sources_store_and_path_and_one_target_without_archiving_settings() -> None:
    from sampledb_operator.model.sampledb import SampleDB
    from sampledb_operator.plugin.actions import recovery_object

    obj = recovery_object("orders", ARCHIVED, "orders-then", "prod", time="2026-12-05T07:30:00Z")
    assert obj["spec"]["recovery"] == {
        "objectStore": {"endpoint": "https://s3.example", "bucket": "pg-archive", "credentials": {"secretName": "keys"},
                        "path": "prod"},
        "database": "orders", "targetTime": "2026-12-05T07:30:00Z"}
    assert "init" not in obj["spec"] and obj["spec"]["parameters"] == {"work_mem": "8MB"}
    SampleDB.model_validate(obj)  # what the CRD's models accept
    to_end = recovery_object("orders", ARCHIVED, "x", "other-ns", path="old-ns")["spec"]["recovery"]
    assert to_end["objectStore"]["path"] == "old-ns" and set(to_end) == {"objectStore", "database"}


def test_a_recovery_refuses_two_targets_and_a_database_without_a_store() -> None:
    from sampledb_operator.plugin.actions import recovery_object

    with pytest.raises(ActionError, match="at most one"):
        recovery_object("orders", ARCHIVED, "x", "prod", time="2026-12-05T07:30:00Z", lsn="0/1")
    with pytest.raises(ActionError, match=r"no spec\.backup\.objectStore"):
        recovery_object("orders", SOURCE | {"metadata": {"name": "orders"}}, "x", "prod")


def test_a_verification_is_asked_with_a_new_annotation_value_and_needs_a_store() -> None:
    from sampledb_operator.plugin.actions import verify_recovery_patch

    patch, request = verify_recovery_patch(ARCHIVED, datetime(2026, 12, 5, 7, 30, tzinfo=UTC))
    assert patch == {"metadata": {"annotations": {"sampledb.io/verify-recovery": "20261205T073000Z"}}}
    assert request == "manual:20261205T073000Z"
    with pytest.raises(ActionError, match=r"no spec\.backup\.objectStore"):
        verify_recovery_patch(SOURCE | {"metadata": {"name": "orders"}}, datetime(2026, 12, 5, tzinfo=UTC))
