"""End-to-end fixtures: the real operator process watching the test's namespace."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.support.kube import kubectl
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


def sampledb(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}}
    body.update(spec)
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def apply(obj: dict[str, Any] | list[dict[str, Any]]) -> None:
    docs = obj if isinstance(obj, list) else [obj]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
