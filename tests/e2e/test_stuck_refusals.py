"""A database that the API server refuses a pod, a child or a write says why, and says it no more once the cause
goes: a ResourceQuota, an admission policy, a backup Job's pod refused, a volume expansion that never happens (the
helpers of test_stuck_databases.py; apart so that the suite's workers share the long tests)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from tests.e2e.conftest import apply, sampledb, status, wait_ready
from tests.e2e.test_stuck_databases import cleared, degraded, warning
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


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


def test_a_storage_quota_that_refuses_the_data_claim_is_said_and_cleared_once_raised(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small-disks", "namespace": ns},
             "spec": {"hard": {"requests.storage": "1Gi"}}}
    apply(quota)
    apply(sampledb("bigdisk", ns, storage={"size": "2Gi"}))
    cond = degraded("bigdisk", ns, "QuotaExceeded", timeout=90)
    assert "exceeded quota: small-disks" in cond["message"] and "requests.storage" in cond["message"]
    assert status("bigdisk", ns)["phase"] == "Degraded"
    apply({**quota, "spec": {"hard": {"requests.storage": "20Gi"}}})
    cleared("bigdisk", ns, timeout=180)
    wait_ready("bigdisk", ns, timeout=180)


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
