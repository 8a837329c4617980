"""Backup verification orchestrated end to end on kwok: verify Jobs, one at a time, results on the
SampleDBBackup, the metric, BackupHealthy and events.

kwok runs the Jobs: they succeed, or fail when the SampleDB carries testing.sampledb.io/fail=verify
(only verify Jobs fail then, backups still succeed). What verify.sh itself proves is tested on real
PostgreSQL in tests/dataplane/test_dataplane_verify.py and on the real node in
tests/e2e/test_verification_real_node.py.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, jobs_of, sampledb, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

VERIFY = "sampledb.io/verify"


def manual_backup(name: str, db: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"database": db, "reason": "manual"}}


def backup_status(name: str, ns: str) -> dict[str, Any]:
    return (get_or_none("sampledbbackup", name, ns) or {}).get("status") or {}


def backup_condition(name: str, ns: str, type_: str) -> dict[str, Any]:
    return next((c for c in backup_status(name, ns).get("conditions", []) if c["type"] == type_), {})


def events_of(name: str, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl_json("get", "events", "-n", ns,
                                                "--field-selector", f"involvedObject.name={name}")["items"]
    return items


def _time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def test_spec_verify_verifies_every_backup_one_job_at_a_time(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("vdb", ns, backup={"verify": True}))
    wait_ready("vdb", ns)
    apply([manual_backup("vdb-one", "vdb", ns), manual_backup("vdb-two", "vdb", ns)])

    for name in ("vdb-one", "vdb-two"):
        wait_until(lambda n=name: backup_status(n, ns).get("verified") is True, timeout=120,  # type: ignore[misc]
                   what=f"{name} verified")
        cond = backup_condition(name, ns, "Verified")
        assert (cond["status"], cond["reason"]) == ("True", "Verified")
        assert backup_status(name, ns)["verification"]["jobName"].startswith("vdb-verify-")
        assert "request" not in backup_status(name, ns)["verification"]  # the automatic one
        assert any(e["reason"] == "BackupVerified" for e in events_of(name, ns))

    jobs = sorted(jobs_of(ns, "verify"), key=lambda j: j["metadata"]["creationTimestamp"])
    assert len(jobs) == 2
    assert {j["metadata"]["ownerReferences"][0]["name"] for j in jobs} == {"vdb-one", "vdb-two"}
    first, second = jobs
    assert _time(second["metadata"]["creationTimestamp"]) >= _time(first["status"]["completionTime"])  # one at a time
    container = first["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["bash", "/sampledb/scripts/verify.sh"]
    assert not any(e["name"].startswith("PG") for e in container["env"])
    assert operator.metric("sampledb_backup_verifications_total", namespace=ns, database="vdb",
                           result="succeeded") == 2
    assert operator.metric("sampledb_backup_verifications_total", namespace=ns, database="vdb", result="failed") == 0
    printed = kubectl("get", "sdbb", "vdb-one", "-n", ns).stdout
    assert "VERIFIED" in printed and "true" in printed


def test_failed_verification_makes_backups_unhealthy_and_a_new_request_recovers(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("shaky", ns)
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "verify"}  # only verify Jobs fail
    apply(db)
    wait_ready("shaky", ns)
    apply(manual_backup("shaky-b", "shaky", ns))
    wait_until(lambda: backup_status("shaky-b", ns).get("phase") == "Succeeded", timeout=60, what="the backup")
    assert jobs_of(ns, "verify") == []  # spec.backup.verify is off: nothing until asked

    kubectl("annotate", "sdbb", "shaky-b", "-n", ns, f"{VERIFY}=first")
    wait_until(lambda: backup_status("shaky-b", ns).get("verified") is False, timeout=150,
               what="the verification to fail")
    cond = backup_condition("shaky-b", ns, "Verified")
    assert (cond["status"], cond["reason"]) == ("False", "VerificationFailed")
    assert "BackoffLimitExceeded" in cond["message"]
    assert backup_status("shaky-b", ns)["verification"]["request"] == "first"
    health = wait_until(lambda: condition("shaky", ns, "BackupHealthy") or None, timeout=30, what="BackupHealthy")
    assert (health["status"], health["reason"]) == ("False", "VerificationFailed")
    assert "shaky-b" in health["message"]
    assert condition("shaky", ns, "Ready")["status"] == "True"
    assert any(e["reason"] == "VerificationFailed" and e["type"] == "Warning" for e in events_of("shaky", ns))
    assert any(e["reason"] == "BackupVerificationFailed" and e["type"] == "Warning" for e in events_of("shaky-b", ns))
    assert operator.metric("sampledb_backup_verifications_total", namespace=ns, database="shaky", result="failed") == 1

    # The same request is not answered twice; a new value is a new verification (now passing).
    kubectl("annotate", "sampledb", "shaky", "-n", ns, "testing.sampledb.io/fail-")
    kubectl("annotate", "sdbb", "shaky-b", "-n", ns, "--overwrite", f"{VERIFY}=second")
    wait_until(lambda: backup_status("shaky-b", ns).get("verified") is True, timeout=120,
               what="the second verification to pass")
    assert len(jobs_of(ns, "verify")) == 2
    wait_until(lambda: condition("shaky", ns, "BackupHealthy").get("reason") == "BackupSucceeded", timeout=30,
               what="BackupHealthy to recover")
    assert any(e["reason"] == "BackupRecovered" for e in events_of("shaky", ns))
    assert json.loads(kubectl("get", "sdbb", "shaky-b", "-n", ns, "-o", "json").stdout)["status"]["verification"][
        "request"] == "second"
