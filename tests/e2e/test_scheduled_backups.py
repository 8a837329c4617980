"""Scheduled backups end to end: one backup per slot, retention, lastBackup, BackupHealthy.

Real operator and control plane with an every-minute schedule, so each test waits for one or two
minute boundaries (kwok runs the backup Jobs: they succeed, or fail when the SampleDB carries
testing.sampledb.io/fail=backup). The backup script itself is tested in tests/dataplane/.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.decide.sharding import bucket_of

pytestmark = pytest.mark.cluster

EVERY_MINUTE = "* * * * *"








def backups(ns: str, reason: str) -> list[dict[str, Any]]:
    items = kubectl_json("get", "sampledbbackups", "-n", ns)["items"]
    return sorted((b for b in items if b["spec"]["reason"] == reason), key=lambda b: b["metadata"]["name"])


def phase(b: dict[str, Any]) -> str | None:
    return (b.get("status") or {}).get("phase")


def succeeded_scheduled(ns: str, count: int) -> list[dict[str, Any]] | None:
    done = [b for b in backups(ns, "scheduled") if phase(b) == "Succeeded"]
    return done if len(done) >= count else None


def manual_backup(name: str, db: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"database": db, "reason": "manual"}}


def stable_writes(op: OperatorProcess) -> float | None:
    """The write count, once a full reconcile of the database has passed without a write."""
    first = op.writes()
    seen = op.metric("controller_runtime_reconcile_total", controller="sampledb")
    wait_until(lambda: op.metric("controller_runtime_reconcile_total", controller="sampledb") > seen + 1,
               timeout=20, what="two reconciles")
    return first if op.writes() == first else None


def test_every_slot_gets_one_backup_and_retention_keeps_the_newest(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    apply(sampledb("cron", ns, backup={"schedule": EVERY_MINUTE, "retention": 1}))
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--resync-period", "1") as op:
        wait_ready("cron", ns)
        [first] = wait_until(lambda: succeeded_scheduled(ns, 1), timeout=150, what="the first scheduled backup")
        name = first["metadata"]["name"]
        slot = first["metadata"]["annotations"]["sampledb.io/scheduled-for"]
        assert name == f"cron-scheduled-{datetime.strptime(slot, '%Y-%m-%dT%H:%M:%SZ'):%Y%m%d%H%M%S}"
        assert slot.endswith(":00Z")  # a minute boundary
        assert first["metadata"]["labels"] == {
            "app.kubernetes.io/managed-by": "sampledb-operator", "sampledb.io/database": "cron",
            "sampledb.io/database-uid": kubectl_json("get", "sampledb", "cron", "-n", ns)["metadata"]["uid"],
            "sampledb.io/backup-reason": "scheduled", "sampledb.io/bucket": str(bucket_of(ns, "cron"))}
        wait_until(lambda: (status("cron", ns).get("lastBackup") or {}).get("name") == name, timeout=30,
                   what="status.lastBackup naming the first scheduled backup")
        healthy = condition("cron", ns, "BackupHealthy")
        assert (healthy["status"], healthy["reason"]) == ("True", "BackupSucceeded")
        assert name in healthy["message"]

        # A manual backup is not counted by retention and never deleted by it.
        apply(manual_backup("by-hand", "cron", ns))
        wait_until(lambda: phase(get_or_none("sampledbbackup", "by-hand", ns) or {}) == "Succeeded", timeout=60,
                   what="the manual backup")

        [second] = wait_until(lambda: [b for b in backups(ns, "scheduled")
                                       if b["metadata"]["name"] != name and phase(b) == "Succeeded"] or None,
                              timeout=120, what="the second slot's backup")
        wait_until(lambda: get_or_none("sampledbbackup", name, ns) is None, timeout=30,
                   what="retention to delete the first scheduled backup")
        remaining = [b["metadata"]["name"] for b in backups(ns, "scheduled") if phase(b) == "Succeeded"]
        assert remaining == [second["metadata"]["name"]]
        assert get_or_none("sampledbbackup", "by-hand", ns) is not None
        wait_until(lambda: (status("cron", ns).get("lastBackup") or {}).get("name") == second["metadata"]["name"],
                   timeout=30, what="status.lastBackup naming the second scheduled backup")
        events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=cron")["items"]
        assert {"BackupScheduled", "BackupPruned"} <= {e["reason"] for e in events}

        # A schedule whose next slot is far away: resyncs create nothing, delete nothing, write nothing.
        kubectl("patch", "sampledb", "cron", "-n", ns, "--type=merge", "-p",
                json.dumps({"spec": {"backup": {"schedule": "0 0 1 1 *"}}}))
        wait_until(lambda: status("cron", ns).get("observedGeneration") == 2, timeout=30, what="the edit seen")
        baseline = wait_until(lambda: stable_writes(op), timeout=60, what="writes to settle")
        names_before = sorted(b["metadata"]["name"] for b in kubectl_json("get", "sampledbbackups", "-n", ns)["items"])
        seen = op.metric("controller_runtime_reconcile_total", controller="sampledb")
        wait_until(lambda: op.metric("controller_runtime_reconcile_total", controller="sampledb") >= seen + 5,
                   timeout=30, what="five more reconciles (resyncs)")
        assert op.writes() == baseline
        assert sorted(b["metadata"]["name"]
                      for b in kubectl_json("get", "sampledbbackups", "-n", ns)["items"]) == names_before
        assert condition("cron", ns, "BackupHealthy")["reason"] == "BackupSucceeded"


def test_failed_scheduled_backup_makes_backups_unhealthy_not_the_database(namespace: str,
                                                                          operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("shaky", ns, backup={"schedule": EVERY_MINUTE, "retention": 1})
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "backup"}  # only backup Jobs fail
    apply(db)
    wait_ready("shaky", ns)
    assert condition("shaky", ns, "BackupHealthy").get("status") in (None, "Unknown")
    wait_until(lambda: condition("shaky", ns, "BackupHealthy").get("reason") == "BackupFailed", timeout=170,
               what="BackupHealthy=False BackupFailed")
    cond = condition("shaky", ns, "BackupHealthy")
    assert cond["status"] == "False"
    failed = [b["metadata"]["name"] for b in backups(ns, "scheduled") if phase(b) == "Failed"]
    assert any(name in cond["message"] for name in failed)
    assert "BackoffLimitExceeded" in cond["message"]  # the backup's own status.message
    assert condition("shaky", ns, "Ready")["status"] == "True"
    assert status("shaky", ns)["phase"] == "Running"
    assert "lastBackup" not in status("shaky", ns)
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=shaky")["items"]
    assert any(e["reason"] == "BackupFailed" and e["type"] == "Warning" for e in events)


def test_a_new_database_takes_no_backup_for_slots_before_it_existed(namespace: str,
                                                                    operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("fresh", ns, backup={"schedule": "@daily"}))  # today's slot (00:00 UTC) is already past
    wait_ready("fresh", ns)
    cond = wait_until(lambda: condition("fresh", ns, "BackupHealthy") or None, timeout=30, what="BackupHealthy")
    assert (cond["status"], cond["reason"]) == ("Unknown", "AwaitingFirstBackup")
    assert backups(ns, "scheduled") == []
