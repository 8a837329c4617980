"""Logical backups in the object store: the backup Job's copy settings (decide/jobs.backup_job with
archive_config.backup_copy), the restore Job from a copy (decide/backup/restore, init_plan) and the checks of the
restore store's credentials, without any server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sampledb_operator.decide import jobs
from sampledb_operator.decide.backup.backup_files import FILES_FINALIZER
from sampledb_operator.decide.backup.backup_run import BackupFacts, plan_backup
from sampledb_operator.decide.children import archive_config as cfg
from sampledb_operator.decide.effects import Create, Patch
from sampledb_operator.decide.labels import bucket_label
from sampledb_operator.decide.lifecycle import init_plan as ip
from sampledb_operator.decide.status import JobState
from sampledb_operator.model.archive import CREDENTIALS_OPT_IN_LABEL
from sampledb_operator.model.backup import SampleDBBackup
from sampledb_operator.model.sampledb import SampleDB

STORE = {"endpoint": "https://s3.example:9000", "bucket": "backups", "credentials": {"secretName": "s3-keys"},
         "ca": {"name": "s3-ca", "key": "ca.crt"}}
DONE = {"conditions": [{"type": "Initialized", "status": "True", "reason": "Restored", "message": "done",
                        "lastTransitionTime": "2026-11-30T09:00:00Z"}]}


def database(status: dict[str, Any] | None = None, name: str = "orders", **spec: Any) -> SampleDB:
    return SampleDB.model_validate({
        "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
        "metadata": {"name": name, "namespace": "shop", "uid": "uid-1", "resourceVersion": "7"},
        "spec": {"version": "16.4", "storage": {"size": "1Gi"}, **spec}, "status": status or {}})


def env_of(job: dict[str, Any]) -> dict[str, Any]:
    [container] = job["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def backup_job(db: SampleDB, reason: str) -> dict[str, Any]:
    return jobs.backup_job(db, backup_name="b1", backup_uid="u-b", claim_name="orders-backups", reason=reason)


@pytest.mark.parametrize(("reason", "keep"), [("scheduled", "5"), ("pre-upgrade", "5"), ("pre-migration", "5"),
                                              ("manual", "0"), ("pre-delete", "0")])
def test_the_backup_job_copies_to_the_store_and_keeps_the_retained_kinds(reason: str, keep: str) -> None:
    db = database(backup={"retention": 5, "objectStore": STORE})
    job = backup_job(db, reason)
    env = env_of(job)
    assert env["SAMPLEDB_S3_DESTINATION"] == "s3://backups/shop" and env["SAMPLEDB_S3_SERVER"] == "orders"
    assert (env["BACKUP_REASON"], env["BACKUP_STORE_KEEP"]) == (reason, keep)
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "s3-keys", "key": "secretAccessKey"}}
    assert env["AWS_CA_BUNDLE"] == f"{cfg.CA_MOUNT}/ca.crt"
    pod = job["spec"]["template"]["spec"]
    assert {"name": cfg.CA_VOLUME, "configMap": {"name": "s3-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}} \
        in pod["volumes"]
    assert {"name": cfg.CA_VOLUME, "mountPath": cfg.CA_MOUNT, "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_without_a_store_or_with_copies_off_the_backup_job_is_what_it_was() -> None:
    plain = backup_job(database(), "scheduled")
    off = backup_job(database(backup={"objectStore": {**STORE, "copyBackups": False}}), "scheduled")
    assert plain == off
    assert not {"SAMPLEDB_S3_DESTINATION", "BACKUP_REASON", "BACKUP_STORE_KEEP"} & set(env_of(plain))
    assert [v["name"] for v in plain["spec"]["template"]["spec"]["volumes"]] == ["scripts", "backups", "tmp"]


def test_a_succeeded_backup_records_its_copy_in_the_store() -> None:
    db = database({"currentVersion": "16.4", "conditions": [{"type": "Ready", "status": "True", "reason": "R"}]})
    backup = SampleDBBackup.model_validate({
        "metadata": {"name": "b1", "namespace": "shop", "uid": "u-b", "generation": 1, "resourceVersion": "7",
                     "labels": {"sampledb.io/database": "orders", **bucket_label("shop", "orders")},
                     "finalizers": [FILES_FINALIZER]},
        "spec": {"database": "orders"}, "status": {"phase": "Running"}})
    url = "s3://backups/shop/orders/logical/manual/b1.dump"
    for result, recorded in (({"store": url}, url), ({"store": "/not/a/url"}, None), ({}, None)):
        planned = plan_backup(BackupFacts(backup=backup, db=db, job=JobState(True, True, "Complete", ""),
                                          now=datetime(2026, 12, 5, tzinfo=UTC), volume_exists=True,
                                          job_result=result))
        patch = planned.plan.effects[0]
        assert isinstance(patch, Patch)
        assert patch.patch["status"].get("storeLocation") == recorded


def test_a_restore_from_a_store_needs_no_backup_object_and_downloads_into_scratch() -> None:
    db = database(name="orders-again", restore={"backupName": "nightly-7", "database": "orders",
                                                "objectStore": {**STORE, "path": "old-shop"}})
    f = ip.InitFacts(db=db, db_ready=True)
    assert not ip.backup_read_needed(f)
    planned = ip.plan_init(f)
    [create] = planned.plan.effects
    assert isinstance(create, Create) and planned.creates == ip.job_name(db) == create.obj["metadata"]["name"]
    assert create.announce is not None and "nightly-7 from the object store" in create.announce.message
    env = env_of(create.obj)
    assert env["RESTORE_FROM_STORE"] == "1" and env["BACKUP_NAME"] == "nightly-7"
    assert env["SAMPLEDB_S3_DESTINATION"] == "s3://backups/old-shop" and env["SAMPLEDB_S3_SERVER"] == "orders"
    assert env["AWS_CA_BUNDLE"] == f"{cfg.CA_MOUNT}/ca.crt"
    volumes = create.obj["spec"]["template"]["spec"]["volumes"]
    assert {"name": "restore-source", "emptyDir": {}} in volumes
    assert not any("persistentVolumeClaim" in v for v in volumes)
    assert ip.plan_init(ip.InitFacts(db=db, db_ready=False)).plan.effects == ()
    assert ip.plan_init(ip.InitFacts(db=database(DONE, restore=db.spec.restore.model_dump(by_alias=True)
                                                 if db.spec.restore else None), db_ready=True)).plan.effects == ()


def test_the_source_database_defaults_to_the_restored_ones_name() -> None:
    db = database(restore={"backupName": "nightly-7", "objectStore": STORE})
    [create] = ip.plan_init(ip.InitFacts(db=db, db_ready=True)).plan.effects
    assert isinstance(create, Create)
    assert env_of(create.obj)["SAMPLEDB_S3_SERVER"] == "orders"
    assert env_of(create.obj)["SAMPLEDB_S3_DESTINATION"] == "s3://backups/shop"


def test_the_restore_stores_credentials_are_checked_until_the_restore_is_done() -> None:
    spec = database(restore={"backupName": "n", "objectStore": {**STORE, "credentials": {"secretName": "old"}}}).spec
    assert cfg.credential_secrets(spec) == ["old"]
    [problem] = cfg.credentials_problems(spec, {"old": None})
    assert (problem.reason, problem.field) == ("ObjectStoreCredentialsMissing", "spec.restore.objectStore.credentials")
    opted = {"metadata": {"labels": {CREDENTIALS_OPT_IN_LABEL: "true"}},
             "data": {"accessKeyId": "eA==", "secretAccessKey": "eQ=="}}
    assert cfg.credentials_problems(spec, {"old": opted}) == []
    assert cfg.credential_secrets(spec, restoring=False) == []
    assert cfg.credentials_problems(spec, {"old": None}, restoring=False) == []
