"""An init, a restore, an upgrade or a verification Job of a database that cannot get a pod, or whose pod never runs, is
said on the database's Degraded condition with the pod's cause and the Job's name, within a bound, and said no
more once the cause goes, without a restart of the operator (issue: status explains stuck databases).

Each Job's pod alone is kept from running, never the database's own pod: a ResourceQuota with room for the
databases' pods and no more (the restore Job's pod refused: QuotaExceeded after POD_GRACE), a
ValidatingAdmissionPolicy refusing only the verification Jobs' pods (AdmissionRefused after POD_GRACE), a
MutatingAdmissionPolicy giving only the upgrade Jobs' pods a node selector no node meets until a node is labelled
(Unschedulable after JOB_GRACE: a pod that waits makes no event the operator would wake on). The real operator and
control plane, kwok's nodes (a Job's pod that runs succeeds at once)."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, jobs_of, sampledb, status, wait_ready
from tests.e2e.test_stuck_databases import cleared, degraded
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

POD_GRACE = 10  # seconds: a Job without its pod this long has its FailedCreate Events read (decide/lifecycle/stuck.py)
JOB_GRACE = 120  # seconds: a Job without a ready pod this long has its pods read (decide/lifecycle/stuck.py)
BOUND = 30  # seconds: past its grace, a Job's cause is said this soon
COMPONENT = "app.kubernetes.io/component"


def backup(name: str, db: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"database": db, "reason": "manual"}}


def backup_status(name: str, ns: str) -> dict[str, Any]:
    return (get_or_none("sampledbbackup", name, ns) or {}).get("status") or {}


def the_job(ns: str, component: str, timeout: float = 90) -> str:
    """The name of the one Job of `component` in the namespace, once it exists."""
    def one() -> str | None:
        found = jobs_of(ns, component)
        return found[0]["metadata"]["name"] if len(found) == 1 else None
    return wait_until(one, timeout=timeout, what=f"the {component} Job")


def at(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")


def pod_of(job: str, ns: str) -> dict[str, Any] | None:
    pods = kubectl_json("get", "pods", "-n", ns, "-l", f"job-name={job}")["items"]
    return pods[0] if pods else None


def probe_pod(ns: str, component: str) -> subprocess.CompletedProcess[str]:
    """A pod of the component's labels created with a server-side dry run: what admission makes of it."""
    return kubectl("create", "--dry-run=server", "-o", "json", "-n", ns, "-f", "-", check=False, input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"probe-{component}", "labels": {COMPONENT: component}},
        "spec": {"containers": [{"name": "c", "image": "postgres:16.4"}]}}))


def in_namespace(ns: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}


def of_component(component: str) -> list[dict[str, str]]:
    return [{"name": "component", "expression": (
        f"has(object.metadata.labels) && '{COMPONENT}' in object.metadata.labels"
        f" && object.metadata.labels['{COMPONENT}'] == '{component}'")}]


PODS = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}


@pytest.fixture
def refused_verifications(namespace: str) -> Iterator[str]:
    """A ValidatingAdmissionPolicy refusing the pods of verification Jobs in the test's namespace (every other pod
    is let through), in force; yields its binding's name."""
    name = f"t-noverify-{secrets.token_hex(3)}"
    apply([{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [PODS]},
                     "matchConditions": of_component("verify"),
                     "validations": [{"expression": "false", "message": "no verifications here"}]}},
           {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": in_namespace(namespace)}}])
    try:
        wait_until(lambda: probe_pod(namespace, "verify").returncode != 0, timeout=30, what="the policy in force")
        assert probe_pod(namespace, "backup").returncode == 0  # a backup's pod is let through
        yield name
    finally:
        kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found", check=False)
        kubectl("delete", "validatingadmissionpolicy", name, "--ignore-not-found", check=False)


@pytest.fixture
def held_upgrades(namespace: str) -> Iterator[str]:
    """A MutatingAdmissionPolicy giving the pods of upgrade Jobs in the test's namespace a node selector on a
    label no node has (other pods are left as they are), in force; yields that label ("key=value"), which the
    test may put on a node: it is taken off every node afterwards."""
    name = f"t-hold-{secrets.token_hex(3)}"
    key = f"sampledb.io/{name}"
    apply([{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                     "matchConstraints": {"resourceRules": [PODS]}, "matchConditions": of_component("upgrade"),
                     "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": (
                         # a node selector is one value to an apply configuration: a JSON patch adds to it
                         f'has(object.spec.nodeSelector) ? [JSONPatch{{op: "add", path: "/spec/nodeSelector/'
                         f'{key.replace("/", "~1")}", value: "yes"}}] : [JSONPatch{{op: "add", path:'
                         f' "/spec/nodeSelector", value: {{"{key}": "yes"}}}}]')}}]}},
           {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": name, "matchResources": in_namespace(namespace)}}])

    def selector_of(component: str) -> dict[str, str]:
        made = probe_pod(namespace, component)
        assert made.returncode == 0, made.stderr
        return dict(json.loads(made.stdout)["spec"].get("nodeSelector") or {})

    try:
        wait_until(lambda: selector_of("upgrade").get(key) == "yes", timeout=30, what="the policy in force")
        assert key not in selector_of("database")  # the database's own pod is left as it is
        yield f"{key}=yes"
    finally:
        kubectl("delete", "mutatingadmissionpolicybinding", name, "--ignore-not-found", check=False)
        kubectl("delete", "mutatingadmissionpolicy", name, "--ignore-not-found", check=False)
        kubectl("label", "nodes", "-l", key, f"{key}-", check=False)


def test_a_restore_job_refused_its_pod_by_a_quota_is_said_on_the_new_database_and_cleared_once_lifted(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("orig", ns))
    wait_ready("orig", ns, timeout=180)
    apply(backup("orig-snap", "orig", ns))
    wait_until(lambda: backup_status("orig-snap", ns).get("phase") == "Succeeded", timeout=90, what="the backup")
    # room for the two databases' own pods (the backup's has finished: it counts no more), none for a Job's
    apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "two-pods", "namespace": ns},
           "spec": {"hard": {"pods": "2"}}})
    wait_until(lambda: ((kubectl_json("get", "resourcequota", "two-pods", "-n", ns).get("status") or {}).get("used")
                        or {}).get("pods") == "1", timeout=30, what="the quota counting the first database's pod")
    apply(sampledb("copy", ns, restore={"backupName": "orig-snap"}))
    job = the_job(ns, "restore")  # made once the new database's own pod runs
    cond = degraded("copy", ns, "QuotaExceeded", timeout=POD_GRACE + BOUND)
    assert cond["message"].startswith(f"Job {job} cannot create its pod: ")
    assert "exceeded quota: two-pods" in cond["message"]
    assert status("copy", ns)["phase"] == "Degraded"
    assert condition("orig", ns, "Degraded").get("status") != "True"  # the other database is not stuck
    kubectl("delete", "resourcequota", "two-pods", "-n", ns)
    cleared("copy", ns, timeout=120)  # the Job controller's next retry makes the pod
    wait_ready("copy", ns, timeout=120)
    restored = condition("copy", ns, "Initialized")
    assert (restored["status"], restored["reason"]) == ("True", "Restored")


def test_an_init_job_refused_its_pod_by_a_quota_is_said_and_cleared_once_lifted(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    # room for the database's own pod, none for its init Job's
    apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod", "namespace": ns},
           "spec": {"hard": {"pods": "1"}}})
    apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db-init", "namespace": ns},
           "data": {"init.sql": "CREATE TABLE notes (id serial PRIMARY KEY, body text);"}})
    apply(sampledb("inited", ns, init={"configMapKeyRef": {"name": "db-init", "key": "init.sql"}}))
    job = the_job(ns, "init", timeout=120)  # made once the database's own pod runs
    cond = degraded("inited", ns, "QuotaExceeded", timeout=POD_GRACE + BOUND)
    assert cond["message"].startswith(f"Job {job} cannot create its pod: ")
    assert "exceeded quota: one-pod" in cond["message"]
    kubectl("delete", "resourcequota", "one-pod", "-n", ns)
    cleared("inited", ns, timeout=120)
    wait_ready("inited", ns, timeout=120)
    done = condition("inited", ns, "Initialized")
    assert (done["status"], done["reason"]) == ("True", "InitSucceeded")


def test_a_verification_job_refused_its_pod_by_an_admission_policy_is_said_on_the_database_and_cleared(
        namespace: str, operator: OperatorProcess, refused_verifications: str) -> None:
    ns = namespace
    apply(sampledb("vdb", ns, backup={"verify": True}))
    wait_ready("vdb", ns, timeout=180)
    apply(backup("vdb-snap", "vdb", ns))
    job = the_job(ns, "verify")  # spec.backup.verify: once the backup has Succeeded
    assert backup_status("vdb-snap", ns)["phase"] == "Succeeded"
    cond = degraded("vdb", ns, "AdmissionRefused", timeout=POD_GRACE + BOUND)
    assert cond["message"].startswith(f"Job {job} cannot create its pod: ")
    assert "no verifications here" in cond["message"]
    kubectl("delete", "validatingadmissionpolicybinding", refused_verifications)
    cleared("vdb", ns, timeout=120)  # the Job controller's next retry makes the pod
    wait_until(lambda: backup_status("vdb-snap", ns).get("verified") is True, timeout=60, what="the backup verified")


def test_an_upgrade_job_whose_pod_no_node_can_take_is_said_after_the_grace_and_cleared_once_a_node_can(
        namespace: str, operator: OperatorProcess, held_upgrades: str) -> None:
    ns = namespace
    apply(sampledb("up", ns))
    wait_ready("up", ns, timeout=180)
    node = kubectl_json("get", "pod", "up-0", "-n", ns)["spec"]["nodeName"]  # the volume's node
    kubectl("patch", "sampledb", "up", "-n", ns, "--type=merge", "-p", '{"spec": {"version": "17.2"}}')
    job = the_job(ns, "upgrade", timeout=120)  # after the pre-upgrade backup
    pod = wait_until(lambda: pod_of(job, ns), timeout=30, what="the upgrade Job's pod")
    # nothing about the pod changes after the scheduler's verdict: the operator looks again at the grace's end
    cond = degraded("up", ns, "Unschedulable", timeout=JOB_GRACE + BOUND)
    started = kubectl_json("get", "job", job, "-n", ns)["status"]["startTime"]
    assert JOB_GRACE <= (at(cond["lastTransitionTime"]) - at(started)).total_seconds() <= JOB_GRACE + BOUND
    assert cond["message"].startswith(f"Job {job}: pod {pod['metadata']['name']} cannot be scheduled: ")
    assert "didn't match Pod's node affinity/selector" in cond["message"]
    assert status("up", ns).get("currentVersion") == "16.4"
    # the upgrade Job must run where the database's volume is (with Link, the default, the database's pod
    # is stopped meanwhile): that node is given the label
    kubectl("label", "node", node, held_upgrades)
    cleared("up", ns, timeout=60)
    wait_until(lambda: status("up", ns).get("currentVersion") == "17.2", timeout=120, what="currentVersion 17.2")
    wait_ready("up", ns, timeout=120)
