"""Installing the operator in the cluster the way docs/user-guide.md tells users to.

The CRDs, the namespace, the shipped RBAC and admission policy and the Deployment (2 replicas, leader
election), with two changes a user makes too: the image (the local build of the current sources, or
$SAMPLEDB_TEST_OPERATOR_IMAGE) and the namespaces it serves (`--namespaces`, so that it never meets
the operator processes other end-to-end tests run in their own namespaces). The install is
idempotent (kubectl apply), so several test processes may ask for it; it is left installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from tests.support.cluster import CRD_DIR, install_crds
from tests.support.kube import kubectl, kubectl_json

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
NAMESPACE = "sampledb-system"
DEPLOYMENT = "sampledb-operator"
LABEL = "app.kubernetes.io/name=sampledb-operator"
# A served namespace shared by the real-data tests; each test names its databases apart.
REAL_DATA_NAMESPACE = "sampledb-e2e-real"
# Pod Security Admission: every pod in the namespace must meet the restricted standard.
RESTRICTED_LABELS = {"pod-security.kubernetes.io/enforce": "restricted"}
# Lines of the operator's logs that mean a request was refused for lack of a permission.
FORBIDDEN = re.compile(r'("code":\s*403|\b403\b.*[Ff]orbidden|[Ff]orbidden.*\b403\b|"reason":\s*"Forbidden")')


def _deployment_docs(image: str, args: list[str]) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((MANIFESTS / "operator" / "deployment.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "Deployment":
            container = doc["spec"]["template"]["spec"]["containers"][0]
            container["image"] = image
            container["imagePullPolicy"] = "IfNotPresent"
            container["args"] = [*container.get("args", ["run"]), *args]
    return docs


def install_operator(image: str, namespaces: list[str], *extra_args: str) -> None:
    """Install (or update) the operator serving `namespaces` and wait for its rollout."""
    assert CRD_DIR.exists()
    install_crds()
    kubectl("apply", "-f", str(MANIFESTS / "operator" / "namespace.yaml"))
    kubectl("apply", "-f", str(MANIFESTS / "rbac"))
    kubectl("apply", "-f", str(MANIFESTS / "policy"))
    for ns in namespaces:
        if kubectl("get", "namespace", ns, check=False).returncode != 0:
            kubectl("create", "namespace", ns, check=False)
    if REAL_DATA_NAMESPACE in namespaces:  # its pods run for real: the restricted standard is enforced
        kubectl("label", "namespace", REAL_DATA_NAMESPACE, *(f"{k}={v}" for k, v in RESTRICTED_LABELS.items()),
                "--overwrite")
    docs = _deployment_docs(image, ["--namespaces", ",".join(namespaces), *extra_args])
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    kubectl("rollout", "status", f"deployment/{DEPLOYMENT}", "-n", NAMESPACE, "--timeout=240s", timeout=260)


def operator_pods() -> list[dict[str, Any]]:
    return list(kubectl_json("get", "pods", "-n", NAMESPACE, "-l", LABEL)["items"])


def operator_logs() -> dict[str, str]:
    """Every operator container's log (previous instances included), by pod name."""
    out: dict[str, str] = {}
    for pod in operator_pods():
        name = pod["metadata"]["name"]
        text = kubectl("logs", "-n", NAMESPACE, name, check=False).stdout
        restarts = sum(s.get("restartCount", 0) for s in pod.get("status", {}).get("containerStatuses", []))
        if restarts:
            text = kubectl("logs", "-n", NAMESPACE, name, "--previous", check=False).stdout + text
        out[name] = text
    return out


def forbidden_lines(logs: dict[str, str]) -> list[str]:
    return [f"{pod}: {line}" for pod, text in logs.items() for line in text.splitlines() if FORBIDDEN.search(line)]


def leader() -> str | None:
    """The identity holding the operator's Lease."""
    leases = kubectl_json("get", "leases", "-n", NAMESPACE)["items"]
    for lease in leases:
        holder = lease.get("spec", {}).get("holderIdentity")
        if holder:
            return str(holder)
    return None


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)
