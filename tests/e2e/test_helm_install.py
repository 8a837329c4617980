"""Installing with Helm, as docs/user-guide.md#install-with-helm says, on the cluster.

The chart (charts/sampledb-operator) goes into a fresh namespace that enforces the restricted Pod
Security Standard, with the image of the current sources that `hack/cluster up` built
(tests/support/images.py) and the operator watching one namespace of kwok's fake nodes (so it never
meets the operators other tests run). Its Deployment becomes Available on the real node, runs under
the chart's RBAC and admission policy, and makes a SampleDB Ready; its log has no refused request.
`helm uninstall` then removes everything it installed, the cluster-scoped objects included, and
leaves the CRDs. The release's name prefixes its cluster-scoped objects, so it meets no other install.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support import images
from tests.support.helm import CHART, helm
from tests.support.install import FORBIDDEN
from tests.support.kube import create_namespace, get_or_none, kubeconfig, kubectl, release_finalizers

pytestmark = pytest.mark.cluster

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


@pytest.fixture
def release(cluster: object) -> Iterator[dict[str, str]]:
    """A release name, its namespace (pods run for real, restricted) and a watched kwok namespace;
    the release is uninstalled and both namespaces deleted afterwards, whatever the test reached."""
    token = secrets.token_hex(3)
    names = {"release": f"t-helm-{token}", "operator": f"t-helm-op-{token}", "watched": f"t-helm-db-{token}"}
    create_namespace(names["operator"], kwok=False, labels=RESTRICTED)
    create_namespace(names["watched"], kwok=True)
    try:
        yield names
    finally:
        helm("uninstall", names["release"], "-n", names["operator"], "--ignore-not-found", "--wait",
             "--timeout", "120s", kubeconfig=kubeconfig(), check=False, timeout=150)
        for key in ("watched", "operator"):
            release_finalizers(names[key])
            kubectl("delete", "namespace", names[key], "--wait=false", "--ignore-not-found", check=False)


def operator_log(ns: str, deployment: str) -> str:
    return kubectl("logs", "-n", ns, f"deployment/{deployment}", "--all-containers", "--tail=-1", check=False,
                   timeout=60).stdout


def test_helm_install_runs_the_operator_and_uninstall_removes_it(release: dict[str, str]) -> None:
    name, ns, watched = release["release"], release["operator"], release["watched"]
    repository, _, tag = images.operator_image().rpartition(":")
    out = helm("install", name, str(CHART), "--namespace", ns,
               "--set-json", f"image.repository={json.dumps(repository)}", "--set-json", f"image.tag={json.dumps(tag)}",
               "--set-json", "replicas=1", "--set-json", f"watchNamespaces={json.dumps([watched])}",
               "--set-json", 'extraArgs=["--recheck-period=2"]', kubeconfig=kubeconfig(), timeout=150)
    assert "STATUS: deployed" in out.stdout, out.stdout
    deployment = f"{name}-sampledb-operator"

    done = kubectl("wait", "-n", ns, f"deployment/{deployment}", "--for=condition=Available", "--timeout=180s",
                   check=False, timeout=190)
    if done.returncode != 0:
        pods = kubectl("describe", "pods", "-n", ns, check=False).stdout
        pytest.fail(f"the operator's Deployment did not become Available:\n{done.stderr}\n{pods[-4000:]}\n"
                    f"{operator_log(ns, deployment)[-4000:]}")

    apply(sampledb("helm", watched))
    try:
        wait_ready("helm", watched, timeout=120)
    except AssertionError:
        print(operator_log(ns, deployment)[-5000:])
        raise
    assert get_or_none("statefulset", "helm", watched) is not None
    refused = [line for line in operator_log(ns, deployment).splitlines() if FORBIDDEN.search(line)]
    assert not refused, "the operator was refused requests under the chart's RBAC:\n" + "\n".join(refused[:20])

    out = helm("uninstall", name, "-n", ns, "--wait", "--timeout", "120s", kubeconfig=kubeconfig(), timeout=150)
    assert f'release "{name}" uninstalled' in out.stdout, out.stdout
    for kind, obj, obj_ns in [("deployment", deployment, ns), ("serviceaccount", deployment, ns),
                              ("rolebinding", deployment, watched), ("clusterrole", deployment, None),
                              ("clusterrole", f"{deployment}-cluster-reads", None),
                              ("clusterrole", f"{deployment}-release-finalizers", None),
                              ("validatingadmissionpolicy", f"{deployment}-confinement", None)]:
        assert get_or_none(kind, obj, obj_ns) is None, f"{kind} {obj} is left after helm uninstall"
    for crd in ("sampledbs.sampledb.io", "sampledbbackups.sampledb.io"):
        assert get_or_none("crd", crd) is not None, f"helm uninstall deleted the CRD {crd}"
