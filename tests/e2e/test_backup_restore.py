"""Manual backups and restoring a new database from one, end to end (real operator and control plane)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster




def manual_backup(name: str, db: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"database": db, "reason": "manual"}}


def backup_phase(name: str, ns: str) -> str | None:
    return ((get_or_none("sampledbbackup", name, ns) or {}).get("status") or {}).get("phase")


def initialized(name: str, ns: str) -> dict[str, Any]:
    db = get_or_none("sampledb", name, ns) or {}
    return next((c for c in (db.get("status") or {}).get("conditions", []) if c["type"] == "Initialized"), {})


def test_manual_backup_runs_a_job_and_records_where_the_file_is(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("src", ns))
    wait_ready("src", ns)
    apply(manual_backup("src-before-change", "src", ns))
    wait_until(lambda: backup_phase("src-before-change", ns) == "Succeeded", timeout=90, what="backup Succeeded")
    backup = kubectl_json("get", "sampledbbackup", "src-before-change", "-n", ns)
    assert backup["status"]["location"] == {"pvcName": "src-backups",
                                            "path": "/sampledb/backups/src-before-change.dump"}
    [job] = [j for j in kubectl_json("get", "jobs", "-n", ns)["items"]
             if j["metadata"]["labels"].get("app.kubernetes.io/component") == "backup"]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "SampleDBBackup"
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes["backups"]["persistentVolumeClaim"]["claimName"] == "src-backups"
    printed = kubectl("get", "sdbb", "-n", ns).stdout
    assert "src-before-change" in printed and "Succeeded" in printed and "manual" in printed


def test_new_database_is_restored_from_a_backup_instead_of_running_init(namespace: str,
                                                                        operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("orig", ns))
    wait_ready("orig", ns)
    apply(manual_backup("orig-snap", "orig", ns))
    wait_until(lambda: backup_phase("orig-snap", ns) == "Succeeded", timeout=90, what="backup Succeeded")
    apply(sampledb("copy", ns, restore={"backupName": "orig-snap"},
                   init={"configMapKeyRef": {"name": "never-read", "key": "init.sql"}}))
    wait_ready("copy", ns)
    cond = initialized("copy", ns)
    assert (cond["status"], cond["reason"]) == ("True", "Restored")
    jobs = kubectl_json("get", "jobs", "-n", ns)["items"]
    restores = [j for j in jobs if j["metadata"]["labels"].get("app.kubernetes.io/component") == "restore"]
    assert len(restores) == 1
    spec = restores[0]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["BACKUP_NAME"] == "orig-snap"
    assert {"name": "restore-source", "persistentVolumeClaim": {"claimName": "orig-backups", "readOnly": True}} in \
        spec["volumes"]
    assert [j for j in jobs if j["metadata"]["labels"].get("app.kubernetes.io/component") == "init"
            and j["metadata"]["labels"].get("sampledb.io/database") == "copy"] == []
    # The restore ran once: deleting its Job never runs it again over live data.
    def reconciles() -> float:
        return operator.metric("controller_runtime_reconcile_total", controller="sampledb")

    def restore_jobs() -> list[dict[str, Any]]:
        return [j for j in kubectl_json("get", "jobs", "-n", ns)["items"]
                if j["metadata"]["labels"].get("app.kubernetes.io/component") == "restore"]

    seen = reconciles()
    kubectl("delete", "job", restores[0]["metadata"]["name"], "-n", ns)  # its watch event wakes the database
    wait_until(lambda: reconciles() >= seen + 1, timeout=60, what="a reconcile after the Job's deletion")
    assert restore_jobs() == []
    seen = reconciles()
    kubectl("annotate", "sampledb", "copy", "-n", ns, "example.com/poke=1")
    wait_until(lambda: reconciles() >= seen + 1, timeout=60, what="a reconcile after the annotation")
    assert restore_jobs() == []
    assert initialized("copy", ns)["reason"] == "Restored"


def test_restore_from_a_missing_backup_waits_and_says_why(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("orphan", ns, restore={"backupName": "not-there"}))
    wait_until(lambda: initialized("orphan", ns).get("reason") == "RestoreSourceMissing", timeout=60,
               what="Initialized=False RestoreSourceMissing")
    db = kubectl_json("get", "sampledb", "orphan", "-n", ns)
    ready = next(c for c in db["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"


def test_deleting_a_backup_deletes_its_files_with_a_prune_job(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("pr", ns))
    wait_ready("pr", ns)
    apply(manual_backup("pr-one", "pr", ns))
    wait_until(lambda: backup_phase("pr-one", ns) == "Succeeded", timeout=90, what="backup Succeeded")
    assert "sampledb.io/backup-files" in kubectl_json("get", "sdbb", "pr-one", "-n", ns)["metadata"]["finalizers"]
    kubectl("delete", "sdbb", "pr-one", "-n", ns, "--wait=false")
    wait_until(lambda: get_or_none("sampledbbackup", "pr-one", ns) is None, timeout=90,
               what="the SampleDBBackup to be gone after its files")
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=pr-one")["items"]
    assert "BackupFilesDeleted" in {e["reason"] for e in events}


def test_a_failed_prune_never_blocks_the_deletion_and_says_what_is_left(namespace: str,
                                                                          operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("pf", ns)
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "prune"}
    apply(db)
    wait_ready("pf", ns)
    apply(manual_backup("pf-one", "pf", ns))
    wait_until(lambda: backup_phase("pf-one", ns) == "Succeeded", timeout=90, what="backup Succeeded")
    kubectl("delete", "sdbb", "pf-one", "-n", ns, "--wait=false")
    wait_until(lambda: get_or_none("sampledbbackup", "pf-one", ns) is None, timeout=120,
               what="the SampleDBBackup to be gone")
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=pf-one")["items"]
    left = [e for e in events if e["reason"] == "BackupFilesLeft"]
    assert left and "/sampledb/backups/pf-one.dump" in left[0]["message"]
