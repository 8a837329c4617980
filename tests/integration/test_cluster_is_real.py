"""The local control plane is a real Kubernetes: controllers, scheduler, GC, RBAC and watches work.

Each test asserts behaviour that only real components produce: kwok for pods, the
controller-manager for StatefulSets, Jobs, PVC binding and garbage collection, the API server for
RBAC and watch semantics.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.kube import get_or_none, kubeconfig, kubectl, kubectl_argv, kubectl_json, wait_until

pytestmark = pytest.mark.cluster


def apply(manifest: dict[str, Any] | str, namespace: str) -> None:
    text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
    kubectl("apply", "-n", namespace, "-f", "-", input=text)


def test_statefulset_with_volume_claim_template_gets_running_pods_and_bound_pvcs(namespace: str) -> None:
    apply(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "web"},
            "spec": {
                "serviceName": "web",
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "postgres:16.4",
                                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]},
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }],
            },
        },
        namespace,
    )

    def ready() -> bool:
        sts = kubectl_json("get", "statefulset", "web", "-n", namespace)
        return sts.get("status", {}).get("readyReplicas") == 2

    wait_until(ready, timeout=90, what="2 ready replicas")
    pods = kubectl_json("get", "pods", "-n", namespace, "-l", "app=web")["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["web-0", "web-1"]
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert all(p["spec"].get("nodeName", "").startswith("kwok-node-") for p in pods)

    def bound() -> list[str] | None:
        pvcs = kubectl_json("get", "pvc", "-n", namespace)["items"]
        phases = sorted(f"{p['metadata']['name']}={p['status'].get('phase')}" for p in pvcs)
        return phases if phases == ["data-web-0=Bound", "data-web-1=Bound"] else None

    wait_until(bound, timeout=90, what="both PVCs Bound")


def test_job_reaches_complete(namespace: str) -> None:
    apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "once"},
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "postgres:16.4", "command": ["true"]}]}},
            },
        },
        namespace,
    )
    kubectl("wait", "-n", namespace, "--for=condition=Complete", "job/once", "--timeout=90s", timeout=120)
    job = kubectl_json("get", "job", "once", "-n", namespace)
    assert job["status"]["succeeded"] == 1


def test_job_whose_pod_is_marked_to_fail_reaches_failed(namespace: str) -> None:
    apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "doomed"},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": {"testing.sampledb.io/fail": "true"}},
                    "spec": {"restartPolicy": "Never",
                             "containers": [{"name": "c", "image": "postgres:16.4", "command": ["false"]}]},
                },
            },
        },
        namespace,
    )
    kubectl("wait", "-n", namespace, "--for=condition=Failed", "job/doomed", "--timeout=90s", timeout=120)


def test_deleting_an_owner_garbage_collects_its_dependents(namespace: str) -> None:
    kubectl("create", "configmap", "owner", "-n", namespace)
    owner = kubectl_json("get", "configmap", "owner", "-n", namespace)
    apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "dependent",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                     "uid": owner["metadata"]["uid"], "controller": True}],
            },
        },
        namespace,
    )
    assert get_or_none("configmap", "dependent", namespace) is not None
    kubectl("delete", "configmap", "owner", "-n", namespace)
    wait_until(lambda: get_or_none("configmap", "dependent", namespace) is None, timeout=60,
               what="garbage collection of the dependent")


def _kubeconfig_with_token(token: str, directory: Path) -> str:
    """A kubeconfig for the same server that authenticates only with a bearer token, in `directory` (the
    test's own tmp_path: the token never outlives pytest's temporary directories in /tmp)."""
    view = json.loads(kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = view["clusters"][0]["cluster"]
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = directory / "token.kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_service_account_without_role_binding_is_forbidden_and_allowed_after_binding(namespace: str,
                                                                                     tmp_path: Path) -> None:
    kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    token = kubectl("create", "token", "nobody", "-n", namespace).stdout.strip()
    path = _kubeconfig_with_token(token, tmp_path)
    denied = kubectl("get", "pods", "-n", namespace, check=False, env={"KUBECONFIG": path})
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()
    assert f"system:serviceaccount:{namespace}:nobody" in denied.stderr

    kubectl("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", namespace)
    kubectl("create", "rolebinding", "nobody-reads", "--role=pod-reader",
            f"--serviceaccount={namespace}:nobody", "-n", namespace)
    wait_until(lambda: kubectl("get", "pods", "-n", namespace, check=False,
                               env={"KUBECONFIG": path}).returncode == 0,
               timeout=30, what="the RoleBinding to take effect")


def test_watch_sees_added_modified_deleted_and_bookmark_events(namespace: str) -> None:
    initial = json.loads(kubectl("get", "--raw", f"/api/v1/namespaces/{namespace}/configmaps").stdout)
    rv = initial["metadata"]["resourceVersion"]
    url = (f"/api/v1/namespaces/{namespace}/configmaps?watch=1&allowWatchBookmarks=true"
           f"&resourceVersion={rv}&timeoutSeconds=6")
    # The API server ends the watch after timeoutSeconds, sending a BOOKMARK shortly before.
    watcher = subprocess.Popen(
        [*kubectl_argv(), "get", "--raw", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KUBECONFIG": kubeconfig()},
    )
    try:
        kubectl("create", "configmap", "watched", "-n", namespace, "--from-literal=k=1")
        kubectl("patch", "configmap", "watched", "-n", namespace, "-p", '{"data":{"k":"2"}}')
        kubectl("delete", "configmap", "watched", "-n", namespace)
        out, err = watcher.communicate(timeout=30)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    named = [(e["type"], e["object"]["metadata"].get("name")) for e in events if e["type"] != "BOOKMARK"]
    watched = [t for t, name in named if name == "watched"]
    assert watched == ["ADDED", "MODIFIED", "DELETED"]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, f"no BOOKMARK in {[e['type'] for e in events]}"
    last_rv = int(bookmarks[-1]["object"]["metadata"]["resourceVersion"])
    assert last_rv >= int(rv)


def test_fail_annotation_naming_a_component_fails_only_that_components_jobs(namespace: str) -> None:
    def job(name: str, component: str) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": {"app.kubernetes.io/component": component},
                             "annotations": {"testing.sampledb.io/fail": "init,upgrade"}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "c", "image": "postgres:16.4", "command": ["true"]}]}}},
        }

    apply(job("up", "upgrade"), namespace)
    apply(job("bk", "backup"), namespace)
    kubectl("wait", "-n", namespace, "--for=condition=Failed", "job/up", "--timeout=90s", timeout=120)
    kubectl("wait", "-n", namespace, "--for=condition=Complete", "job/bk", "--timeout=90s", timeout=120)
