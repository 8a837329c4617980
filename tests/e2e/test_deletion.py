"""Deleting a SampleDB: snapshot first, then the data; each policy; failures keep everything.

Real operator, real control plane; kwok marks Job pods Succeeded (or Failed when the SampleDB
carries testing.sampledb.io/fail=true, which the operator copies onto its Jobs' pods).
"""

from __future__ import annotations

import pytest
from tests.e2e.conftest import apply, condition, sampledb, wait_ready
from tests.support.kube import create_namespace, get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster




def gone(kind: str, name: str, ns: str) -> bool:
    return get_or_none(kind, name, ns) is None


def backups(ns: str) -> list[dict]:
    return kubectl_json("get", "sampledbbackups", "-n", ns)["items"]


def snapshot_jobs(ns: str) -> list[dict]:
    return [j for j in kubectl_json("get", "jobs", "-n", ns)["items"]
            if j["metadata"]["labels"].get("app.kubernetes.io/component") == "backup"]


def delete_db(name: str, ns: str) -> None:
    kubectl("delete", "sampledb", name, "-n", ns, "--wait=false")


def test_snapshot_policy_takes_a_snapshot_then_removes_statefulset_and_volume(namespace: str,
                                                                              operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("snap", ns))
    wait_ready("snap", ns)
    db = kubectl_json("get", "sampledb", "snap", "-n", ns)
    assert "sampledb.io/finalizer" in db["metadata"]["finalizers"]
    delete_db("snap", ns)
    wait_until(lambda: gone("sampledb", "snap", ns), timeout=120, what="the SampleDB to be gone")
    assert gone("statefulset", "snap", ns)
    wait_until(lambda: gone("pvc", "data-snap-0", ns), timeout=60, what="the data PVC to be deleted")
    # the namespace's shared scripts ConfigMap goes too: snap was the namespace's last database
    for kind, name in (("secret", "snap-credentials"), ("configmap", "snap-config"), ("configmap", "sampledb-scripts"),
                       ("service", "snap"), ("service", "snap-headless")):
        wait_until(lambda k=kind, n=name: gone(k, n, ns), timeout=60, what=f"{kind} {name} deleted")
    [backup] = backups(ns)
    assert backup["spec"] == {"database": "snap", "reason": "pre-delete", "storage": {"claimName": "snap-backups"}}
    status = backup["status"]
    assert status["phase"] == "Succeeded"
    path = f"/sampledb/backups/{backup['metadata']['name']}.dump"
    assert status["location"] == {"pvcName": "snap-backups", "path": path}
    assert status["version"] == "16.4"
    assert {"startedAt", "completedAt"} <= set(status)
    assert get_or_none("pvc", "snap-backups", ns) is not None  # the backups outlive the database
    assert len(snapshot_jobs(ns)) == 1
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=snap")["items"]
    reasons = {e["reason"] for e in events}
    assert {"SnapshotStarted", "DataDeleted"} <= reasons


def test_retain_policy_keeps_and_labels_the_data_volume(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("keep", ns, deletionPolicy="Retain"))
    wait_ready("keep", ns)
    delete_db("keep", ns)
    wait_until(lambda: gone("sampledb", "keep", ns), timeout=120, what="the SampleDB to be gone")
    assert gone("statefulset", "keep", ns)
    pvc = kubectl_json("get", "pvc", "data-keep-0", "-n", ns)
    assert pvc["metadata"]["labels"]["sampledb.io/retained-from"] == "keep"
    assert pvc["status"]["phase"] == "Bound"
    secret = kubectl_json("get", "secret", "keep-credentials", "-n", ns)  # the data's password
    assert secret["metadata"]["labels"]["sampledb.io/retained-from"] == "keep"
    assert backups(ns) == []
    wait_until(lambda: gone("service", "keep", ns) and gone("configmap", "keep-config", ns), timeout=60,
               what="the other children deleted")
    # A new SampleDB of the same name adopts the retained volume and credentials.
    apply(sampledb("keep", ns, deletionPolicy="Retain"))
    wait_ready("keep", ns)
    assert kubectl_json("get", "pvc", "data-keep-0", "-n", ns)["metadata"]["uid"] == pvc["metadata"]["uid"]
    again = kubectl_json("get", "secret", "keep-credentials", "-n", ns)
    assert (again["metadata"]["uid"], again["data"]["password"]) == (secret["metadata"]["uid"],
                                                                     secret["data"]["password"])
    db = kubectl_json("get", "sampledb", "keep", "-n", ns)
    assert db["status"]["phase"] == "Running"
    assert not [c for c in db["status"]["conditions"] if c["type"] == "Degraded" and c["status"] == "True"]


def test_delete_policy_removes_everything_without_a_snapshot(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("bye", ns, deletionPolicy="Delete"))
    wait_ready("bye", ns)
    delete_db("bye", ns)
    wait_until(lambda: gone("sampledb", "bye", ns), timeout=120, what="the SampleDB to be gone")
    wait_until(lambda: gone("pvc", "data-bye-0", ns) and gone("statefulset", "bye", ns), timeout=60,
               what="data deleted")
    assert backups(ns) == []
    assert snapshot_jobs(ns) == []


def test_failed_snapshot_deletes_nothing_until_skipped_by_annotation(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("stuck", ns))
    wait_ready("stuck", ns)
    kubectl("annotate", "sampledb", "stuck", "-n", ns, "testing.sampledb.io/fail=true")
    delete_db("stuck", ns)

    def blocked() -> dict | None:
        db = get_or_none("sampledb", "stuck", ns) or {}
        return next((c for c in db.get("status", {}).get("conditions", [])
                     if c["type"] == "DeletionBlocked" and c["status"] == "True"), None)

    cond = wait_until(blocked, timeout=120, what="DeletionBlocked=True")
    assert cond["reason"] == "SnapshotFailed"
    assert "BackoffLimitExceeded" in cond["message"]
    assert get_or_none("statefulset", "stuck", ns) is not None
    assert get_or_none("pvc", "data-stuck-0", ns) is not None
    assert kubectl_json("get", "sampledb", "stuck", "-n", ns)["status"]["phase"] == "Deleting"
    [failed] = backups(ns)
    assert failed["status"]["phase"] == "Failed"

    kubectl("annotate", "sampledb", "stuck", "-n", ns, "sampledb.io/skip-snapshot=true")
    wait_until(lambda: gone("sampledb", "stuck", ns), timeout=60, what="the SampleDB to be gone")
    wait_until(lambda: gone("pvc", "data-stuck-0", ns), timeout=60, what="the data PVC deleted")
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "reason=SnapshotSkipped")["items"]
    assert events, "the skipped snapshot is recorded in an Event"


def test_failed_snapshot_is_retried_and_then_succeeds(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("retry", ns))
    wait_ready("retry", ns)
    kubectl("annotate", "sampledb", "retry", "-n", ns, "testing.sampledb.io/fail=true")
    delete_db("retry", ns)
    wait_until(lambda: any(b.get("status", {}).get("phase") == "Failed" for b in backups(ns)), timeout=120,
               what="a failed first attempt")
    kubectl("annotate", "sampledb", "retry", "-n", ns, "testing.sampledb.io/fail-")  # the cause is fixed
    wait_until(lambda: gone("sampledb", "retry", ns), timeout=120, what="the retried snapshot to finish deletion")
    phases = sorted((b["metadata"]["labels"]["sampledb.io/attempt"], b["status"]["phase"]) for b in backups(ns))
    assert phases == [("1", "Failed"), ("2", "Succeeded")]


def test_deleted_while_operator_down_completes_when_it_returns(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    apply(sampledb("later", ns))
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect"):
        wait_ready("later", ns)
    delete_db("later", ns)
    db = kubectl_json("get", "sampledb", "later", "-n", ns)
    assert db["metadata"].get("deletionTimestamp")  # held by the finalizer while nobody acts
    assert get_or_none("statefulset", "later", ns) is not None
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect"):
        wait_until(lambda: gone("sampledb", "later", ns), timeout=120, what="deletion to complete")
    assert [b["status"]["phase"] for b in backups(ns)] == ["Succeeded"]


def test_operator_killed_mid_deletion_resumes_without_a_second_snapshot_job(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    apply(sampledb("midway", ns))
    first = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect").start()
    wait_ready("midway", ns)
    delete_db("midway", ns)
    wait_until(lambda: len(snapshot_jobs(ns)) == 1, timeout=60, what="the snapshot Job")
    first.kill()
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect"):
        wait_until(lambda: gone("sampledb", "midway", ns), timeout=120, what="deletion to complete")
    assert len(snapshot_jobs(ns)) == 1
    assert len(backups(ns)) == 1


def test_deleting_the_namespace_completes(kubeconfig: str, cluster: object) -> None:
    ns = "t-nsdel-" + __import__("secrets").token_hex(3)
    create_namespace(ns)
    apply(sampledb("doomed", ns))
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect"):
        wait_ready("doomed", ns)
        kubectl("delete", "namespace", ns, "--wait=false")
        wait_until(lambda: get_or_none("namespace", ns) is None, timeout=180, what="the namespace to be deleted")


def test_foreground_deletion_keeps_what_the_snapshot_needs_until_it_is_taken(namespace: str,
                                                                              operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("fg", ns))
    wait_ready("fg", ns)
    kubectl("annotate", "sampledb", "fg", "-n", ns, "testing.sampledb.io/fail=backup")  # hold the snapshot
    kubectl("delete", "sampledb", "fg", "-n", ns, "--cascade=foreground", "--wait=false")
    wait_until(lambda: condition("fg", ns, "DeletionBlocked").get("status") == "True", timeout=120,
               what="the first snapshot attempt to fail")
    # The garbage collector has had all this time to delete the SampleDB's dependents: none of these is one.
    for kind, name in (("secret", "fg-credentials"), ("configmap", "fg-config"), ("configmap", "sampledb-scripts"),
                       ("service", "fg"), ("statefulset", "fg"), ("pvc", "data-fg-0")):
        obj = get_or_none(kind, name, ns)
        assert obj is not None and not obj["metadata"].get("deletionTimestamp"), f"{kind} {name}"
    kubectl("annotate", "sampledb", "fg", "-n", ns, "testing.sampledb.io/fail-")
    wait_until(lambda: gone("sampledb", "fg", ns), timeout=120, what="the retried snapshot and the deletion")
    assert sorted(b["status"]["phase"] for b in backups(ns)) == ["Failed", "Succeeded"]
