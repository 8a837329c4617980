"""The OLM bundle installs what the kustomize install installs, checked on the API server.

There is no OLM on the test cluster, so `olm_objects` does what OLM's install and OperatorGroup
controllers do with a registry+v1 CSV (docs/olm.md): the ServiceAccount; `permissions` as a Role and
RoleBinding in the operator's namespace and in each target namespace, or as a ClusterRole and
ClusterRoleBinding for AllNamespaces; `clusterPermissions` as a ClusterRole and ClusterRoleBinding;
the Deployment with the pod annotation olm.targetNamespaces. Then the API server's own answer (a
SelfSubjectRulesReview as the ServiceAccount) is compared with the kustomize install's, applied beside
it under another ServiceAccount, and both Deployments go through a server-side dry run.

Everything lives in the test's namespaces; cluster-scoped objects carry a per-test suffix and are
deleted after.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.e2e.test_install import MANIFESTS, relocated, render
from tests.support.kube import create_namespace, kubectl, release_finalizers

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
CSV = yaml.safe_load((REPO / "bundle/manifests/sampledb-operator.clusterserviceversion.yaml").read_text())
STRATEGY = CSV["spec"]["install"]["spec"]
SA = STRATEGY["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"]
LEASES = ("coordination.k8s.io", "leases")


def olm_objects(mode: str, operator_ns: str, targets: list[str], suffix: str) -> list[dict[str, Any]]:
    """The objects OLM creates for the CSV in `operator_ns` with an OperatorGroup targeting `targets`
    (AllNamespaces: targets == [])."""
    def meta(kind: str, name: str, ns: str | None = None) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"name": name, **({"namespace": ns} if ns else {})}}

    rbac = "rbac.authorization.k8s.io/v1"
    subject = [{"kind": "ServiceAccount", "name": SA, "namespace": operator_ns}]
    objs: list[dict[str, Any]] = [{"apiVersion": "v1", **meta("ServiceAccount", SA, operator_ns)}]

    def grant(rules: list[dict[str, Any]], name: str, namespace: str | None) -> None:
        role, binding = ("Role", "RoleBinding") if namespace else ("ClusterRole", "ClusterRoleBinding")
        objs.append({"apiVersion": rbac, **meta(role, name, namespace), "rules": rules})
        objs.append({"apiVersion": rbac, **meta(binding, name, namespace), "subjects": subject,
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name}})

    for i, p in enumerate(STRATEGY.get("clusterPermissions", [])):
        grant(p["rules"], f"olm-cluster-{i}{suffix}", None)
    for i, p in enumerate(STRATEGY.get("permissions", [])):
        grant(p["rules"], f"olm-{i}", operator_ns)          # always in the operator's namespace
        if mode == "AllNamespaces":
            grant(p["rules"], f"olm-all-{i}{suffix}", None)  # and cluster-wide
        else:
            for ns in targets:
                if ns != operator_ns:
                    grant(p["rules"], f"olm-{i}", ns)       # or in each target namespace
    [d] = STRATEGY["deployments"]
    spec = copy.deepcopy(d["spec"])
    spec["template"]["metadata"].setdefault("annotations", {})["olm.targetNamespaces"] = ",".join(targets)
    objs.append({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": d["name"], "namespace": operator_ns, "labels": d["label"]}, "spec": spec})
    return objs


def grants(namespace: str, operator_ns: str) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) the API server says the operator's ServiceAccount has in `namespace`
    (namespaced grants there, and cluster-wide ones)."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
              "spec": {"namespace": namespace}}
    out = kubectl("create", "--validate=false", f"--as=system:serviceaccount:{operator_ns}:{SA}", "-f", "-",
                  "-o", "json", input=json.dumps(review)).stdout
    status = json.loads(out)["status"]
    assert not status.get("incomplete"), status
    return {(g, r, v) for rule in status["resourceRules"] for g in rule.get("apiGroups", [])
            for r in rule.get("resources", []) for v in rule["verbs"]
            if g not in {"authentication.k8s.io", "authorization.k8s.io"}}   # every user's self-reviews


def without_leases(triples: set[tuple[str, str, str]]) -> set[tuple[str, str, str]]:
    """Without the leader-election Lease grants (get, create, update), which OLM grants wherever the namespaced
    permissions go; the nodes' heartbeat Leases' `list` is cluster-wide in both installs, and stays."""
    return {t for t in triples if t[:2] != LEASES or t[2] == "list"}


class Installs:
    """Applies objects and remembers the cluster-scoped ones for cleanup."""

    def __init__(self) -> None:
        self.cluster_scoped: list[tuple[str, str]] = []

    def apply(self, objs: list[dict[str, Any]]) -> None:
        self.cluster_scoped += [(o["kind"], o["metadata"]["name"]) for o in objs if "namespace" not in o["metadata"]]
        kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objs))


@pytest.fixture
def spaces(cluster: object) -> Iterator[tuple[dict[str, str], Installs]]:
    token = secrets.token_hex(3)
    names = {k: f"t-olm-{k}-{token}" for k in ("olm", "kust", "watched", "other")}
    for name in names.values():
        create_namespace(name, kwok=True)
    installs = Installs()
    yield names, installs
    for kind, name in installs.cluster_scoped:
        kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)
    for name in names.values():
        release_finalizers(name)
        kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def kustomize_rbac(layout: str, ns: dict[str, str], suffix: str) -> list[dict[str, Any]]:
    rbac = relocated(render(MANIFESTS / layout), ns["kust"], {"shop": ns["watched"], "analytics": ns["other"]},
                     suffix)
    # the namespaced overlay's second namespace stands for one that is not watched here
    return [o for o in rbac if not (o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == ns["other"])]


def test_all_namespaces_grants_what_the_default_kustomize_install_grants(
        spaces: tuple[dict[str, str], Installs]) -> None:
    ns, installs = spaces
    suffix = f"-{ns['olm'][-6:]}"
    installs.apply(kustomize_rbac("default", ns, f"{suffix}-k"))
    installs.apply([o for o in olm_objects("AllNamespaces", ns["olm"], [], suffix) if o["kind"] != "Deployment"])

    kust = {k: grants(ns[k], ns["kust"]) for k in ("watched", "other", "kust")}
    olm = {k: grants(ns[k], ns["olm"]) for k in ("watched", "other", "olm")}
    # the comparison means something: namespaced and cluster-wide grants are both there
    assert ("apps", "statefulsets", "create") in kust["watched"]
    assert {("storage.k8s.io", "storageclasses"), ("", "namespaces")} <= {t[:2] for t in kust["other"]}
    # the operator's namespace: the same grants
    assert olm["olm"] == kust["kust"]
    # any other namespace: the same, except that OLM has one list of namespaced permissions, so the
    # leader-election Lease rule is granted wherever the rest is (here: everywhere)
    for where in ("watched", "other"):
        assert without_leases(olm[where]) == kust[where]
        assert {t for t in olm[where] if t[:2] == LEASES} == {t for t in kust["kust"] if t[:2] == LEASES}


@pytest.mark.parametrize("mode", ["OwnNamespace", "MultiNamespace"])
def test_namespaced_modes_grant_what_the_namespaced_overlay_grants(
        mode: str, spaces: tuple[dict[str, str], Installs]) -> None:
    ns, installs = spaces
    suffix = f"-{ns['olm'][-6:]}"
    installs.apply(kustomize_rbac("overlays/namespaced", ns, f"{suffix}-k"))
    targets = [ns["olm"]] if mode == "OwnNamespace" else [ns["watched"]]
    installs.apply([o for o in olm_objects(mode, ns["olm"], targets, suffix) if o["kind"] != "Deployment"])

    overlay_watched = grants(ns["watched"], ns["kust"])
    cluster_wide = grants(ns["other"], ns["kust"])   # the overlay grants nothing namespaced there
    assert ("sampledb.io", "sampledbs", "list") in overlay_watched
    # the overlay's one cluster-wide grant on its own kinds: releasing finalizers (release-finalizers.yaml);
    # a CSV cannot carry it for these modes, so OLM users apply that file too (docs/olm.md)
    release = {t for t in cluster_wide if t[0] == "sampledb.io"}
    kinds = ("sampledbs", "sampledbbackups")
    assert release == {("sampledb.io", r, v) for r in kinds for v in ("list", "watch", "patch")} \
        | {("sampledb.io", f"{r}/status", "patch") for r in kinds}
    cluster_wide -= release
    assert grants(ns["other"], ns["olm"]) == cluster_wide
    if mode == "MultiNamespace":
        assert without_leases(grants(ns["watched"], ns["olm"])) == overlay_watched
    else:
        assert grants(ns["watched"], ns["olm"]) == cluster_wide
    # the operator's namespace: everything a watched namespace gets, and the Lease
    own = grants(ns["olm"], ns["olm"])
    assert without_leases(own) == overlay_watched
    assert {t for t in own if t[:2] == LEASES} == {t for t in grants(ns["kust"], ns["kust"]) if t[:2] == LEASES}


def test_the_csv_deployment_is_the_kustomize_deployment_on_the_api_server(
        spaces: tuple[dict[str, str], Installs]) -> None:
    """Both through a server-side dry run (defaults filled in): equal but for OLM's target namespaces."""
    ns, _ = spaces
    [olm] = [o for o in olm_objects("MultiNamespace", ns["olm"], [ns["watched"]], "") if o["kind"] == "Deployment"]
    [kust] = [o for o in render(MANIFESTS / "default") if o["kind"] == "Deployment"]
    kust["metadata"]["namespace"] = ns["kust"]

    def dry_run(obj: dict[str, Any]) -> dict[str, Any]:
        out = kubectl("create", "--dry-run=server", "-f", "-", "-o", "json", input=json.dumps(obj)).stdout
        result: dict[str, Any] = json.loads(out)
        return result

    got, want = dry_run(olm), dry_run(kust)
    pod = got["spec"]["template"]
    assert pod["metadata"]["annotations"].pop("olm.targetNamespaces") == ns["watched"]
    env = pod["spec"]["containers"][0]["env"]
    env.remove({"name": "SAMPLEDB_NAMESPACES", "valueFrom": {"fieldRef": {
        "apiVersion": "v1", "fieldPath": "metadata.annotations['olm.targetNamespaces']"}}})
    assert got["spec"] == want["spec"]
    assert got["metadata"]["labels"] == want["metadata"]["labels"]
