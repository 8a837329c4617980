"""A database that does not progress says why, in Kubernetes' words, and says it no more once the cause goes
(issue: status explains stuck databases). The real operator and control plane; kwok's nodes where nothing needs to
run, the real node where the failure is the kubelet's or PostgreSQL's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster
BOUND = 30  # seconds: a cause is said this soon after Kubernetes knows it


def degraded(name: str, ns: str, reason: str, timeout: float = BOUND) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        cond = condition(name, ns, "Degraded")
        return cond if (cond.get("status"), cond.get("reason")) == ("True", reason) else None
    return wait_until(seen, timeout=timeout,
                      what=f"{ns}/{name} Degraded={reason} (now {condition(name, ns, 'Degraded')})")


def cleared(name: str, ns: str, timeout: float = 60) -> None:
    wait_until(lambda: condition(name, ns, "Degraded").get("status") == "False", timeout=timeout,
               what=f"{ns}/{name} Degraded cleared (now {condition(name, ns, 'Degraded')})")


def warning(name: str, ns: str, reason: str) -> bool:
    items = kubectl_json("get", "events", "-n", ns, "--field-selector",
                         f"involvedObject.name={name},involvedObject.kind=SampleDB")["items"]
    return any(e.get("reason") == reason and e.get("type") == "Warning" for e in items)


@pytest.fixture
def storage_class() -> Iterator[str]:
    name = f"t-stuck-{secrets.token_hex(3)}"
    yield name
    kubectl("delete", "storageclass", name, "--ignore-not-found", "--wait=false", check=False)


def test_a_missing_storage_class_is_said_and_cleared_once_the_class_exists(
        namespace: str, operator: OperatorProcess, storage_class: str) -> None:
    ns = namespace
    apply(sampledb("nosc", ns, storage={"size": "1Gi", "storageClassName": storage_class}))
    cond = degraded("nosc", ns, "StorageClassNotFound")
    assert repr(storage_class) in cond["message"] and "data-nosc-0" in cond["message"]
    assert status("nosc", ns)["phase"] == "Degraded"
    wait_until(lambda: warning("nosc", ns, "StorageClassNotFound"), timeout=30, what="a Warning Event")
    apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
           "provisioner": "sampledb.io/hostpath", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
    cleared("nosc", ns, timeout=90)
    wait_ready("nosc", ns, timeout=180)


def test_requests_no_node_can_meet_are_said_with_the_schedulers_words_and_cleared_after_the_edit(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("huge", ns, resources={"requests": {"cpu": "900", "memory": "256Mi"}}))
    cond = degraded("huge", ns, "Unschedulable", timeout=90)  # the claim binds, then the pod is made
    assert "Insufficient cpu" in cond["message"] and "huge-0" in cond["message"]
    kubectl("patch", "sampledb", "huge", "-n", ns, "--type", "merge", "-p",
            '{"spec": {"resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}}')
    cleared("huge", ns, timeout=120)
    wait_ready("huge", ns, timeout=180)
    # the StatefulSet's rolling update never replaces a pod that was never ready: the operator did
    events = kubectl_json("get", "events", "-n", ns, "--field-selector",
                          "involvedObject.name=huge,involvedObject.kind=SampleDB")["items"]
    assert any(e.get("reason") == "RecreatedStuckPod" for e in events)


def test_an_image_that_cannot_be_pulled_is_said_with_the_kubelets_words(
        real_namespace: str, kubeconfig: str) -> None:
    ns = real_namespace
    op = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--recheck-period", "2")
    op.start()
    try:
        apply(sampledb("nopull", ns, version="16.4", image="registry.invalid/sampledb/postgres:16.4"))
        cond = degraded("nopull", ns, "ImagePullFailed", timeout=180)
        assert "registry.invalid/sampledb/postgres:16.4" in cond["message"]
        assert status("nopull", ns)["phase"] == "Degraded"
        wait_until(lambda: warning("nopull", ns, "ImagePullFailed"), timeout=30, what="a Warning Event")
    finally:
        op.stop()


def test_a_server_that_refuses_to_start_is_said_with_its_own_last_lines(real_namespace: str, kubeconfig: str) -> None:
    ns = real_namespace
    op = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--recheck-period", "2")
    op.start()
    try:
        apply(sampledb("nostart", ns, version="15.20", parameters={"shared_buffers": "64TB"}))
        cond = degraded("nostart", ns, "CrashLoopBackOff", timeout=240)
        assert "nostart-0" in cond["message"] and "last exit 1" in cond["message"]
        assert "FATAL:" in cond["message"] and "shared_buffers" in cond["message"]  # its log's own words
        kubectl("patch", "sampledb", "nostart", "-n", ns, "--type", "merge", "-p",
                '{"spec": {"parameters": {"shared_buffers": "32MB"}}}')
        cleared("nostart", ns, timeout=240)
        wait_ready("nostart", ns, timeout=240)
    finally:
        op.stop()


def test_a_quota_that_refuses_the_pod_is_said_and_cleared_once_lifted(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods", "namespace": ns},
           "spec": {"hard": {"pods": "0"}}})
    apply(sampledb("quota", ns))
    cond = degraded("quota", ns, "QuotaExceeded", timeout=90)  # the claim binds, the StatefulSet is made
    assert cond["message"].startswith("StatefulSet quota cannot create its pod: ")
    assert "exceeded quota: no-pods" in cond["message"]
    wait_until(lambda: warning("quota", ns, "QuotaExceeded"), timeout=30, what="a Warning Event")
    kubectl("delete", "resourcequota", "no-pods", "-n", ns)
    cleared("quota", ns, timeout=180)  # the StatefulSet controller's next retry makes the pod
    wait_ready("quota", ns, timeout=180)


@pytest.fixture
def deny_statefulsets(namespace: str) -> Iterator[str]:
    """A ValidatingAdmissionPolicy refusing StatefulSets in the test's namespace until it is removed."""
    name = f"t-deny-{secrets.token_hex(3)}"
    apply([{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name},
           "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [{
               "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
               "resources": ["statefulsets"]}]},
               "validations": [{"expression": "false", "message": "no StatefulSets here"}]}},
          {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": name},
           "spec": {"policyName": name, "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}}}}}])
    yield name
    kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found", check=False)
    kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)


def test_an_admission_policy_that_refuses_a_child_is_said_and_cleared_once_removed(
        namespace: str, operator: OperatorProcess, deny_statefulsets: str) -> None:
    ns = namespace
    # a policy takes effect once the API server has loaded it: a StatefulSet of our own shows when
    wait_until(lambda: kubectl("create", "-n", ns, "-f", "-", check=False, input=(
        '{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "probe"}, "spec": {"selector":'
        ' {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers":'
        ' [{"name": "c", "image": "x"}]}}}}')).returncode != 0, timeout=30, what="the policy in force")
    apply(sampledb("denied", ns))
    cond = degraded("denied", ns, "AdmissionRefused", timeout=90)
    assert "StatefulSet denied refused" in cond["message"] and "no StatefulSets here" in cond["message"]
    kubectl("delete", "validatingadmissionpolicybinding", deny_statefulsets)
    cleared("denied", ns, timeout=120)  # the recheck period applies it again
    wait_ready("denied", ns, timeout=180)


def test_a_backup_job_refused_its_pod_by_a_quota_is_said_on_the_database(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("jobs", ns))
    wait_ready("jobs", ns, timeout=180)
    apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod", "namespace": ns},
           "spec": {"hard": {"pods": "1"}}})  # the database's own pod
    wait_until(lambda: (kubectl_json("get", "resourcequota", "one-pod", "-n", ns).get("status") or {}).get("used"),
               timeout=30, what="the quota counted")
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
           "metadata": {"name": "jobs-refused", "namespace": ns}, "spec": {"database": "jobs"}})
    cond = degraded("jobs", ns, "QuotaExceeded", timeout=60)
    assert "cannot create its pod" in cond["message"] and "exceeded quota: one-pod" in cond["message"]
    assert cond["message"].startswith("Job jobs-backup-")
    kubectl("delete", "resourcequota", "one-pod", "-n", ns)
    cleared("jobs", ns, timeout=120)


@pytest.fixture
def unresizable_class(namespace: str) -> Iterator[str]:
    """A StorageClass that allows expansion but whose resizer never acts, and a volume made for the first
    instance's claim of the database `grow` in the test's namespace (nothing provisions this class)."""
    name = f"t-noresize-{secrets.token_hex(3)}"
    apply([{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "example.com/no-resizer", "allowVolumeExpansion": True, "volumeBindingMode": "Immediate"},
           {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": name,
                     "hostPath": {"path": f"/tmp/{name}"}, "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": namespace, "name": "data-grow-0"}}}])
    yield name
    kubectl("delete", "persistentvolume", name, "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "storageclass", name, "--ignore-not-found", "--wait=false", check=False)


def test_a_volume_expansion_that_never_happens_is_said_after_the_grace(
        namespace: str, operator: OperatorProcess, unresizable_class: str) -> None:
    ns = namespace
    apply(sampledb("grow", ns, storage={"size": "1Gi", "storageClassName": unresizable_class},
                   backup={"storage": {"size": "1Gi", "storageClassName": "standard"}}))
    wait_ready("grow", ns, timeout=180)
    kubectl("patch", "sampledb", "grow", "-n", ns, "--type", "merge", "-p", '{"spec": {"storage": {"size": "2Gi"}}}')
    cond = degraded("grow", ns, "StorageExpansionStuck", timeout=200)  # the grace is 120 s
    assert cond["message"].startswith("the data volume data-grow-0 asked for 2Gi ")
    assert "still has 1Gi" in cond["message"]
