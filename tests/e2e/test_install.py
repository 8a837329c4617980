"""Installing with kustomize, as docs/user-guide.md#install says: every layout under manifests/
renders, the API server accepts every object it knows (server-side dry run), the monitoring objects
whose CRDs are not installed here are checked by parsing, and the shipped RBAC is enough for the
real operator: run under the ServiceAccount's own token it makes a database Ready in a watched
namespace and gets no 403, while the namespaced overlay grants nothing outside its namespaces.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import create_namespace, get_or_none, kubectl, release_finalizers
from tests.support.operator import REPO, OperatorProcess
from tests.support.rbac import POLICY_KINDS, can_i, relocated, render, token_kubeconfig

pytestmark = pytest.mark.cluster

MANIFESTS = REPO / "manifests"
OPERATOR_NS = "sampledb-system"
WATCHED = ("shop", "analytics")  # the namespaces manifests/overlays/namespaced lists
MONITORING_GROUP = "monitoring.coreos.com/v1"
SA = "sampledb-operator"


def kinds(objs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objs}


def dry_run(objs: list[dict[str, Any]]) -> str:
    """Server-side dry-run apply of `objs`; kubectl's output (fails the test when refused)."""
    return kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-",
                   input=yaml.safe_dump_all(objs)).stdout


@pytest.fixture(scope="module")
def install_namespaces(cluster: object) -> Iterator[None]:
    """sampledb-system and the namespaced overlay's namespaces exist (a dry run does not create a
    namespace, so objects inside it would be refused). The watched ones created here are deleted
    after; sampledb-system never is: tests that install the operator in the cluster may have put it
    there meanwhile."""
    created = []
    for ns in (OPERATOR_NS, *WATCHED):
        found = get_or_none("namespace", ns)
        if found is not None and found["metadata"].get("deletionTimestamp"):   # an earlier run's, going away
            kubectl("wait", "--for=delete", f"namespace/{ns}", "--timeout=120s", timeout=130)
            found = None
        if found is None:
            kubectl("create", "namespace", ns, check=False)   # another test may create it at the same time
            if ns != OPERATOR_NS:
                created.append(ns)
    yield
    for ns in created:
        kubectl("delete", "namespace", ns, "--wait=false", check=False)


BASE_OBJECTS = {
    ("Namespace", OPERATOR_NS), ("CustomResourceDefinition", "sampledbs.sampledb.io"),
    ("CustomResourceDefinition", "sampledbbackups.sampledb.io"), ("ServiceAccount", SA),
    ("ClusterRole", "sampledb-operator"), ("ClusterRole", "sampledb-operator-cluster-reads"),
    ("ClusterRoleBinding", "sampledb-operator-cluster-reads"), ("Role", "sampledb-operator-leader-election"),
    ("RoleBinding", "sampledb-operator-leader-election"), ("Deployment", "sampledb-operator"),
    ("Service", "sampledb-operator-metrics"), ("ValidatingAdmissionPolicy", "sampledb-operator-confinement"),
    ("ValidatingAdmissionPolicyBinding", "sampledb-operator-confinement"),
}
FINALIZER_POLICY = {("MutatingAdmissionPolicy", "sampledb-finalizer"),
                    ("MutatingAdmissionPolicyBinding", "sampledb-finalizer")}
RELEASE = {("ClusterRole", "sampledb-operator-release-finalizers"),
           ("ClusterRoleBinding", "sampledb-operator-release-finalizers")}


def test_default_installs_everything_and_the_api_server_accepts_it(install_namespaces: None) -> None:
    objs = render(MANIFESTS / "default")
    assert kinds(objs) == BASE_OBJECTS | {("ClusterRoleBinding", "sampledb-operator")}
    for o in objs:
        if o["kind"] not in {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                             "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}:
            assert o["metadata"]["namespace"] == OPERATOR_NS, o["metadata"]
    # exactly the documented command, as a dry run
    out = kubectl("apply", "--dry-run=server", "-k", str(MANIFESTS / "default")).stdout
    assert "deployment.apps/sampledb-operator created (server dry run)" in out \
        or "deployment.apps/sampledb-operator configured (server dry run)" in out \
        or "deployment.apps/sampledb-operator unchanged (server dry run)" in out, out


@pytest.mark.parametrize(("base", "count"), [("crd", 2), ("rbac", 7), ("policy", 2), ("admission", 2),
                                                    ("operator", 3)])
def test_each_base_still_applies_with_kubectl_apply_f(base: str, count: int, install_namespaces: None) -> None:
    """The bases' kustomization files are named `Kustomization`: `apply -f <dir>/` reads only *.yaml."""
    out = kubectl("apply", "--dry-run=server", "-f", str(MANIFESTS / base)).stdout
    assert len(out.splitlines()) == count, out


def test_namespaced_overlay_binds_the_role_per_watched_namespace(install_namespaces: None) -> None:
    objs = render(MANIFESTS / "overlays" / "namespaced")
    assert kinds(objs) == BASE_OBJECTS | {("RoleBinding", SA)} | RELEASE
    bindings = [o for o in objs if (o["kind"], o["metadata"]["name"]) == ("RoleBinding", SA)]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(WATCHED)
    for b in bindings:
        assert b["roleRef"]["name"] == "sampledb-operator"
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": OPERATOR_NS}]
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["run", f"--namespaces={','.join(WATCHED)}"]
    dry_run(objs)


def test_the_admission_overlay_adds_the_finalizer_policy_to_the_default(install_namespaces: None) -> None:
    objs = render(MANIFESTS / "overlays" / "admission")
    assert kinds(objs) == BASE_OBJECTS | {("ClusterRoleBinding", "sampledb-operator")} | FINALIZER_POLICY
    assert all(o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "sampledb-operator" for o in objs)
    [binding] = [o for o in objs if o["kind"] == "MutatingAdmissionPolicyBinding"]
    assert "matchResources" not in binding["spec"]  # every namespace, as the operator watches every one
    dry_run(objs)


def test_the_namespaced_overlay_binds_the_finalizer_policy_to_the_watched_namespaces(tmp_path: Path,
                                                                                      install_namespaces: None) -> None:
    """Its documented line uncommented (in a copy of manifests/): the policy holds only the watched namespaces'
    SampleDBs, which this install's operator releases."""
    copy = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, copy)
    path = copy / "overlays" / "namespaced" / "kustomization.yaml"
    text = path.read_text()
    assert "\n# - ../../admission " in text
    path.write_text(text.replace("\n# - ../../admission ", "\n- ../../admission   "))
    objs = render(copy / "overlays" / "namespaced")
    assert kinds(objs) == BASE_OBJECTS | {("RoleBinding", SA)} | RELEASE | FINALIZER_POLICY
    [binding] = [o for o in objs if o["kind"] == "MutatingAdmissionPolicyBinding"]
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(WATCHED)}]}
    dry_run(objs)


def test_monitoring_overlay_adds_prometheus_objects_and_the_dashboard(install_namespaces: None) -> None:
    objs = render(MANIFESTS / "overlays" / "monitoring")
    monitoring = [o for o in objs if o["apiVersion"] == MONITORING_GROUP]
    assert kinds(monitoring) == {("ServiceMonitor", "sampledb-operator"), ("PrometheusRule", "sampledb-operator"),
                                 ("PodMonitor", "sampledb-postgres"), ("PodMonitor", "sampledb-pooler")}
    assert all(o["metadata"]["namespace"] == OPERATOR_NS for o in monitoring)
    # their CRDs are not on this cluster: the objects are checked as data (tests/unit/manifests), the
    # rest by the API server
    rest = [o for o in objs if o["apiVersion"] != MONITORING_GROUP]
    assert kinds(rest) == BASE_OBJECTS | {("ClusterRoleBinding", "sampledb-operator"),
                                          ("ConfigMap", "sampledb-operator-dashboard"),
                                          ("ConfigMap", "sampledb-operator-postgres-dashboard")}
    dashboards = {o["metadata"]["name"]: o for o in rest if o["kind"] == "ConfigMap"}
    for name, key in (("sampledb-operator-dashboard", "sampledb-operator.json"),
                      ("sampledb-operator-postgres-dashboard", "sampledb-postgres.json")):
        assert dashboards[name]["metadata"]["labels"]["grafana_dashboard"] == "1"
        shipped = (MANIFESTS / "components" / "monitoring" / "dashboards" / key).read_text()
        assert json.loads(dashboards[name]["data"][key]) == json.loads(shipped)
    dry_run(rest)


def test_monitoring_component_combines_with_the_namespaced_overlay(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [relative(MANIFESTS / "overlays" / "namespaced", tmp_path)],
        "components": [relative(MANIFESTS / "components" / "monitoring", tmp_path)],
    }))
    objs = render(tmp_path)
    assert ("ServiceMonitor", "sampledb-operator") in kinds(objs)
    assert ("ClusterRoleBinding", "sampledb-operator") not in kinds(objs)


def relative(target: Path, start: Path) -> str:
    """kustomize accepts only relative paths to other kustomizations."""
    return os.path.relpath(target, start)


def docs_snippet(marker: str) -> str:
    """The yaml block that follows `marker` in docs/user-guide.md."""
    text = (REPO / "docs" / "user-guide.md").read_text()
    match = re.search(re.escape(marker) + r".*?```yaml\n(.*?)```", text, re.S)
    assert match, f"no yaml block after {marker!r} in docs/user-guide.md"
    return match.group(1)


def test_the_documented_images_override_changes_the_deployments_image(tmp_path: Path) -> None:
    doc = yaml.safe_load(docs_snippet("kustomization.yaml of your own"))
    doc["resources"] = [relative(MANIFESTS / "default", tmp_path) if r.endswith("manifests/default") else r
                        for r in doc["resources"]]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    [deployment] = [o for o in render(tmp_path) if o["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    want = doc["images"][0]
    assert image == f"{want['newName']}:{want['newTag']}"


# -- the RBAC is enough, and no more ----------------------------------------------------------------


@pytest.fixture
def test_namespaces(cluster: object) -> Iterator[dict[str, str]]:
    token = secrets.token_hex(3)
    names = {"operator": f"t-install-op-{token}", "watched": f"t-install-db-{token}",
             "other": f"t-install-other-{token}"}
    for name in names.values():
        create_namespace(name, kwok=True)
    yield names
    for name in names.values():
        release_finalizers(name)
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.mark.parametrize("layout", ["default", "overlays/namespaced"])
def test_the_operator_runs_under_the_shipped_rbac(layout: str, test_namespaces: dict[str, str],
                                                  tmp_path: Path) -> None:
    ns = test_namespaces
    suffix = f"-{ns['operator'][-6:]}"
    rbac = relocated(render(MANIFESTS / layout), ns["operator"], {WATCHED[0]: ns["watched"], WATCHED[1]: ns["other"]},
                     suffix)
    if layout == "overlays/namespaced":
        # the overlay's second namespace stands for one that is *not* watched in this test
        rbac = [o for o in rbac if not (o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == ns["other"])]
    rbac = [o for o in rbac if o["kind"] not in POLICY_KINDS]  # the admission policy: tests/e2e/test_rbac.py
    cluster_scoped = [o for o in rbac if o["kind"] in {"ClusterRole", "ClusterRoleBinding"}]
    try:
        kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(rbac))
        assert can_i("create", "statefulsets.apps", ns["watched"], ns["operator"])
        assert can_i("patch", "sampledbs.sampledb.io/status", ns["watched"], ns["operator"])
        assert not can_i("update", "sampledbs.sampledb.io/status", ns["watched"], ns["operator"])
        assert can_i("create", "leases.coordination.k8s.io", ns["operator"], ns["operator"])
        assert can_i("get", "namespaces", ns["other"], ns["operator"])
        assert can_i("get", "storageclasses.storage.k8s.io", "", ns["operator"])
        assert not can_i("list", "storageclasses.storage.k8s.io", "", ns["operator"])
        assert not can_i("create", "leases.coordination.k8s.io", ns["watched"], ns["operator"])
        assert not can_i("delete", "nodes", "", ns["operator"])
        assert can_i("watch", "nodes", "", ns["operator"])  # the cordoned nodes: node maintenance
        assert not can_i("get", "nodes", "", ns["operator"])
        if layout == "overlays/namespaced":
            assert not can_i("get", "secrets", ns["other"], ns["operator"])
            assert not can_i("create", "statefulsets.apps", ns["other"], ns["operator"])
            # releasing finalizers stays cluster-wide (release-finalizers.yaml), and nothing more on SampleDBs
            assert can_i("patch", "sampledbs.sampledb.io", ns["other"], ns["operator"])
            assert not can_i("create", "sampledbbackups.sampledb.io", ns["other"], ns["operator"])
        else:
            assert can_i("list", "sampledbs.sampledb.io", ns["other"], ns["operator"])

        config = token_kubeconfig(tmp_path / "operator.kubeconfig", ns["operator"])
        op = OperatorProcess(config, "--namespaces", ns["watched"], "--leader-elect", "--lease-namespace",
                             ns["operator"], "--identity", "rbac-test", "--lease-duration", "4",
                             "--renew-deadline", "3", "--retry-period", "1")
        with op:
            apply(sampledb("rbac", ns["watched"]))
            try:
                wait_ready("rbac", ns["watched"], timeout=120)
            except AssertionError:
                print(op.log_text()[-5000:])
                raise
            assert op.metric("leader_election_master_status") == 1
            assert op.metric("rest_client_requests_total", code="403") == 0, op.log_text()[-5000:]
            assert op.metric("rest_client_requests_total", code="401") == 0
    finally:
        for o in cluster_scoped:
            kubectl("delete", o["kind"].lower(), o["metadata"]["name"], "--ignore-not-found", check=False)


def test_relocated_keeps_bindings_pointing_at_the_renamed_roles() -> None:
    objs = [
        {"kind": "ClusterRole", "metadata": {"name": "r"}},
        {"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "shop"},
         "roleRef": {"kind": "ClusterRole", "name": "r"},
         "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": OPERATOR_NS}]},
        {"kind": "Deployment", "metadata": {"name": "d", "namespace": OPERATOR_NS}},
    ]
    out = relocated(objs, "op", {"shop": "db"}, "-x")
    assert [o["kind"] for o in out] == ["ClusterRole", "RoleBinding"]
    assert out[0]["metadata"]["name"] == "r-x"
    assert out[1]["metadata"]["namespace"] == "db"
    assert out[1]["roleRef"]["name"] == "r-x"
    assert out[1]["subjects"][0]["namespace"] == "op"
