"""End-to-end fixtures: the real operator process watching the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.e2e.real_data import installed_operator
from tests.support.cluster import Cluster
from tests.support.kube import get_or_none, kubectl, kubectl_json
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


@pytest.fixture
def operator(kubeconfig: str, namespace: str) -> Iterator[OperatorProcess]:
    """The operator, watching only this test's namespace (tests never see each other's objects)."""
    op = OperatorProcess(kubeconfig, "--namespaces", namespace, "--no-leader-elect", "--workers", "2",
                         "--recheck-period", "2")
    op.start()
    try:
        yield op
    finally:
        if op.running:
            op.stop()
        if getattr(op, "_keep_log", False):
            print(op.log_text()[-5000:])


@pytest.fixture
def real_operator(kubeconfig: str, real_namespace: str) -> Iterator[OperatorProcess]:
    """The operator, watching only this test's namespace whose pods run for real."""
    op = OperatorProcess(kubeconfig, "--namespaces", real_namespace, "--no-leader-elect", "--recheck-period", "2")
    op.start()
    try:
        yield op
    finally:
        if op.running:
            op.stop()


@pytest.fixture(scope="module")
def installed(cluster: Cluster) -> Iterator[str]:
    """The operator installed in the cluster as users install it, serving the real-data namespace
    (tests/e2e/real_data.py); fails the module's last test if its logs show a refused request."""
    yield from installed_operator(cluster)


def sampledb(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}}
    body.update(spec)
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def apply(obj: dict[str, Any] | list[dict[str, Any]]) -> None:
    docs = obj if isinstance(obj, list) else [obj]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def wait_ready(name: str, namespace: str, timeout: float = 120) -> None:
    """`kubectl wait --for=condition=Ready` on a SampleDB, as a user would."""
    kubectl("wait", "-n", namespace, f"sampledb/{name}", "--for=condition=Ready", f"--timeout={int(timeout)}s",
            timeout=timeout + 10)


def status(name: str, namespace: str) -> dict[str, Any]:
    """A SampleDB's status ({} when it or its status is absent)."""
    return (get_or_none("sampledb", name, namespace) or {}).get("status") or {}


def condition(name: str, namespace: str, type_: str) -> dict[str, Any]:
    """One condition of a SampleDB ({} when absent)."""
    return next((c for c in status(name, namespace).get("conditions", []) if c["type"] == type_), {})


def jobs_of(namespace: str, component: str) -> list[dict[str, Any]]:
    """The operator's Jobs of one component (init, backup, restore, upgrade, migrate) in a namespace."""
    return [j for j in kubectl_json("get", "jobs", "-n", namespace)["items"]
            if j["metadata"]["labels"].get("app.kubernetes.io/component") == component]
