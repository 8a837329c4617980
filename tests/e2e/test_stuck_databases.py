"""A database that does not progress says why, in Kubernetes' words, and says it no more once the cause goes
(issue: status explains stuck databases). The real operator and control plane; kwok's nodes where nothing needs to
run, the real node where the failure is the kubelet's or PostgreSQL's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.e2e.test_plugin import plugin
from tests.support import images
from tests.support.cluster import tag_node_image
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster
BOUND = 30  # seconds: a cause is said this soon after Kubernetes knows it


def degraded(name: str, ns: str, reason: str, timeout: float = BOUND) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        cond = condition(name, ns, "Degraded")
        return cond if (cond.get("status"), cond.get("reason")) == ("True", reason) else None
    return wait_until(seen, timeout=timeout,
                      what=f"{ns}/{name} Degraded={reason} (now {condition(name, ns, 'Degraded')})")


def cleared(name: str, ns: str, timeout: float = 60) -> None:
    wait_until(lambda: condition(name, ns, "Degraded").get("status") == "False", timeout=timeout,
               what=f"{ns}/{name} Degraded cleared (now {condition(name, ns, 'Degraded')})")


def warning(name: str, ns: str, reason: str) -> bool:
    items = kubectl_json("get", "events", "-n", ns, "--field-selector",
                         f"involvedObject.name={name},involvedObject.kind=SampleDB")["items"]
    return any(e.get("reason") == reason and e.get("type") == "Warning" for e in items)


@pytest.fixture
def storage_class() -> Iterator[str]:
    name = f"t-stuck-{secrets.token_hex(3)}"
    yield name
    kubectl("delete", "storageclass", name, "--ignore-not-found", "--wait=false", check=False)


def test_a_missing_storage_class_is_said_and_cleared_once_the_class_exists(
        namespace: str, operator: OperatorProcess, storage_class: str) -> None:
    ns = namespace
    apply(sampledb("nosc", ns, storage={"size": "1Gi", "storageClassName": storage_class}))
    cond = degraded("nosc", ns, "StorageClassNotFound")
    assert repr(storage_class) in cond["message"] and "data-nosc-0" in cond["message"]
    assert status("nosc", ns)["phase"] == "Degraded"
    wait_until(lambda: warning("nosc", ns, "StorageClassNotFound"), timeout=30, what="a Warning Event")
    apply({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
           "provisioner": "sampledb.io/hostpath", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"})
    cleared("nosc", ns, timeout=90)
    wait_ready("nosc", ns, timeout=180)


def test_a_provisioner_that_cannot_make_the_volume_is_said_in_its_words_and_cleared_once_the_class_is_fixed(
        namespace: str, operator: OperatorProcess, storage_class: str) -> None:
    ns = namespace
    bad = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
           "provisioner": "sampledb.io/hostpath", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
           "parameters": {"type": "ssd"}}
    apply(bad)
    apply(sampledb("noprov", ns, storage={"size": "1Gi", "storageClassName": storage_class}))
    cond = degraded("noprov", ns, "ProvisioningFailed")
    assert 'unknown parameter "type"' in cond["message"]
    assert "data-noprov-0" in cond["message"] and repr(storage_class) in cond["message"]
    wait_until(lambda: warning("noprov", ns, "ProvisioningFailed"), timeout=30, what="a Warning Event")
    # a StorageClass's parameters cannot change: it is made again without them, and the provisioner's retry binds
    kubectl("delete", "storageclass", storage_class)
    apply({**bad, "parameters": {}})
    cleared("noprov", ns, timeout=90)
    wait_ready("noprov", ns, timeout=180)


def test_requests_no_node_can_meet_are_said_with_the_schedulers_words_and_cleared_after_the_edit(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("huge", ns, resources={"requests": {"cpu": "900", "memory": "256Mi"}}))
    # the scheduler waits for the claim to bind first (no problem of the pod), then says why no node fits
    cond = degraded("huge", ns, "Unschedulable", timeout=90)
    assert "Insufficient cpu" in cond["message"] and "huge-0" in cond["message"]
    kubectl("patch", "sampledb", "huge", "-n", ns, "--type", "merge", "-p",
            '{"spec": {"resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}}')
    cleared("huge", ns, timeout=120)
    wait_ready("huge", ns, timeout=180)
    # the StatefulSet's rolling update never replaces a pod that was never ready: the operator did
    events = kubectl_json("get", "events", "-n", ns, "--field-selector",
                          "involvedObject.name=huge,involvedObject.kind=SampleDB")["items"]
    assert any(e.get("reason") == "RecreatedStuckPod" for e in events)


def test_a_node_selector_no_node_meets_is_said_with_the_schedulers_words_and_cleared_after_the_edit(
        namespace: str, operator: OperatorProcess, kubeconfig: str) -> None:
    ns = namespace
    apply(sampledb("nowhere", ns, scheduling={"nodeSelector": {"pool": "nowhere"}}))
    cond = degraded("nowhere", ns, "Unschedulable", timeout=90)
    assert "nowhere-0" in cond["message"] and "node affinity/selector" in cond["message"]
    # `kubectl sampledb status` says it first
    screen = plugin(kubeconfig, "-n", ns, "status", "nowhere").stdout.splitlines()
    assert screen[1].split()[:2] == ["Problem:", "Unschedulable:"] and "node affinity/selector" in screen[1], screen
    kubectl("patch", "sampledb", "nowhere", "-n", ns, "--type", "json", "-p",
            '[{"op": "remove", "path": "/spec/scheduling/nodeSelector"}]')
    cleared("nowhere", ns, timeout=120)
    wait_ready("nowhere", ns, timeout=180)


def test_a_taint_no_instance_tolerates_is_said_with_the_schedulers_words_and_cleared_after_the_edit(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    # the only nodes of type kwok carry the taint kwok.x-k8s.io/node=fake:NoSchedule
    apply(sampledb("tainted", ns, version="15.20", storage={"size": "256Mi"},
                   scheduling={"nodeSelector": {"type": "kwok"}}))
    cond = degraded("tainted", ns, "Unschedulable", timeout=90)
    assert "untolerated taint" in cond["message"] and "tainted-0" in cond["message"]
    kubectl("patch", "sampledb", "tainted", "-n", ns, "--type", "json", "-p",
            '[{"op": "remove", "path": "/spec/scheduling/nodeSelector"}]')
    cleared("tainted", ns, timeout=120)
    wait_ready("tainted", ns, timeout=240)


def test_an_image_that_cannot_be_pulled_is_said_with_the_kubelets_words(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply(sampledb("nopull", ns, version="16.4", image="registry.invalid/sampledb/postgres:16.4"))
    cond = degraded("nopull", ns, "ImagePullFailed", timeout=180)
    assert "registry.invalid/sampledb/postgres:16.4" in cond["message"]
    assert status("nopull", ns)["phase"] == "Degraded"
    wait_until(lambda: warning("nopull", ns, "ImagePullFailed"), timeout=30, what="a Warning Event")


@pytest.mark.local_only
def test_an_image_of_another_major_under_a_name_the_operator_cannot_check_is_said_and_cleared_once_set_back(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    unchecked = "localhost/sampledb-test/unchecked:18"  # PostgreSQL 18, under a name that says nothing
    tag_node_image(images.POSTGRES_18, unchecked)
    apply(sampledb("major", ns, version="15.20", storage={"size": "256Mi"}))
    wait_ready("major", ns, timeout=240)
    kubectl("patch", "sampledb", "major", "-n", ns, "--type", "merge", "-p",
            f'{{"spec": {{"image": "{unchecked}"}}}}')
    cond = degraded("major", ns, "ImageMajorMismatch", timeout=240)
    assert "data is of PostgreSQL 15 but the image" in cond["message"] and "runs PostgreSQL 18" in cond["message"]
    kubectl("patch", "sampledb", "major", "-n", ns, "--type", "json", "-p",
            '[{"op": "remove", "path": "/spec/image"}]')
    cleared("major", ns, timeout=240)
    wait_ready("major", ns, timeout=240)


def test_a_server_that_refuses_to_start_is_said_with_its_own_last_lines(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply(sampledb("nostart", ns, version="15.20", parameters={"shared_buffers": "64TB"}))
    cond = degraded("nostart", ns, "CrashLoopBackOff", timeout=240)
    assert "nostart-0" in cond["message"] and "last exit 1" in cond["message"]
    assert "FATAL:" in cond["message"] and "shared_buffers" in cond["message"]  # its log's own words
    kubectl("patch", "sampledb", "nostart", "-n", ns, "--type", "merge", "-p",
            '{"spec": {"parameters": {"shared_buffers": "32MB"}}}')
    cleared("nostart", ns, timeout=240)
    wait_ready("nostart", ns, timeout=240)


@pytest.fixture
def no_default_class() -> Iterator[None]:
    """The cluster without a default StorageClass (the local cluster's `standard` unmarked), marked again after."""
    kubectl("annotate", "storageclass", "standard", "storageclass.kubernetes.io/is-default-class-")
    try:
        yield
    finally:
        kubectl("annotate", "--overwrite", "storageclass", "standard",
                "storageclass.kubernetes.io/is-default-class=true")


@pytest.mark.disruptive  # no default class for a while: every other test's claim would wait too
@pytest.mark.local_only
def test_no_default_storage_class_is_said_soon_and_cleared_once_a_class_is_made_default(
        namespace: str, operator: OperatorProcess, no_default_class: None) -> None:
    ns = namespace
    apply(sampledb("nodefault", ns, storage={"size": "1Gi"}))
    cond = degraded("nodefault", ns, "NoDefaultStorageClass", timeout=10 + BOUND)
    assert "data-nodefault-0" in cond["message"] and "storageClassName" in cond["message"]
    kubectl("annotate", "--overwrite", "storageclass", "standard", "storageclass.kubernetes.io/is-default-class=true")
    # Kubernetes gives a claim without a class the new default (retroactively), and it binds
    cleared("nodefault", ns, timeout=120)
    wait_ready("nodefault", ns, timeout=180)
