"""The `sampledb.io/chaos` annotation against the real operator process (kwok pods): off by default,
on with `--chaos-annotation`.

Off (the `operator` fixture starts it with the defaults): an annotated SampleDB's pod is left alone,
the annotation is removed, and one Warning Event ChaosDisabled names the flag; a new annotation gets
its own Event. On: the fault runs once and ChaosInjected says so. The grants the faults need beyond
the default install's (manifests/components/chaos) are tested under the shipped roles in
tests/e2e/test_rbac.py; here the operator runs with the cluster admin's credentials.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

CHAOS = "sampledb.io/chaos"


def chaos_events(ns: str, name: str) -> list[dict[str, Any]]:
    """The Events about the SampleDB whose reason starts with Chaos, oldest first."""
    return sorted((e for e in kubectl_json("get", "events", "-n", ns)["items"]
                   if str(e.get("reason", "")).startswith("Chaos") and e["involvedObject"].get("name") == name),
                  key=lambda e: str(e["metadata"].get("creationTimestamp")))


def annotations(ns: str, name: str) -> dict[str, str]:
    return dict(((get_or_none("sampledb", name, ns) or {}).get("metadata") or {}).get("annotations") or {})


def pod_uid(ns: str, name: str) -> str:
    return str(kubectl_json("get", "pod", name, "-n", ns)["metadata"]["uid"])


def annotate(ns: str, name: str, fault: str) -> None:
    kubectl("annotate", "sampledb", name, "-n", ns, f"{CHAOS}={fault}", "--overwrite")


@pytest.fixture
def enabled_operator(kubeconfig: str, namespace: str) -> Iterator[OperatorProcess]:
    """The operator watching the test's namespace with the chaos annotation enabled."""
    with OperatorProcess(kubeconfig, "--namespaces", namespace, "--no-leader-elect", "--workers", "2",
                         "--recheck-period", "2", "--chaos-annotation") as op:
        yield op


def test_without_the_setting_the_annotation_injects_nothing_and_is_answered_once(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("db", ns))
    wait_ready("db", ns)
    before = pod_uid(ns, "db-0")
    annotate(ns, "db", "delete-pod")
    wait_until(lambda: chaos_events(ns, "db"), timeout=60, what="the answer to the annotation")
    wait_until(lambda: CHAOS not in annotations(ns, "db"), timeout=30, what="the annotation removed")
    [event] = chaos_events(ns, "db")
    assert (event["type"], event["reason"]) == ("Warning", "ChaosDisabled"), event
    assert f"{CHAOS}=delete-pod" in event["message"] and "--chaos-annotation" in event["message"]
    assert "manifests/overlays/chaos" in event["message"]
    assert (event.get("count") or 1) == 1

    annotate(ns, "db", "kill-postgres")  # a new annotation: its own answer, still nothing injected
    wait_until(lambda: len(chaos_events(ns, "db")) == 2, timeout=60, what="the answer to the second annotation")
    assert [e["reason"] for e in chaos_events(ns, "db")] == ["ChaosDisabled", "ChaosDisabled"]
    assert "kill-postgres" in chaos_events(ns, "db")[1]["message"]
    assert pod_uid(ns, "db-0") == before, "the pod was not deleted"
    wait_ready("db", ns)


def test_with_the_setting_the_annotation_injects_its_fault_once(namespace: str,
                                                                 enabled_operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("db", ns))
    wait_ready("db", ns)
    before = pod_uid(ns, "db-0")
    annotate(ns, "db", "delete-pod")
    wait_until(lambda: chaos_events(ns, "db"), timeout=60, what="the answer to the annotation")
    [event] = chaos_events(ns, "db")
    assert (event["type"], event["reason"]) == ("Normal", "ChaosInjected"), event
    assert "delete-pod: injected Pod db-0" in event["message"]
    assert CHAOS not in annotations(ns, "db")
    wait_until(lambda: (get_or_none("pod", "db-0", ns) or {}).get("metadata", {}).get("uid") not in (None, before),
               timeout=60, what="the StatefulSet's new pod")
    wait_ready("db", ns)
    assert len(chaos_events(ns, "db")) == 1
