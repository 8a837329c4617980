"""manifests/admission: the MutatingAdmissionPolicy that gives a new SampleDB the operator's finalizer at creation
(admissionregistration.k8s.io/v1, Kubernetes 1.36+, as the local cluster is).

The shipped policy, renamed for this test and bound to its namespace only (other tests' SampleDBs are not
touched): a SampleDB created there has the finalizer in the API server's answer to its creation (a paused one
has none; one with other finalizers keeps them, ours after), a server-side re-apply of the user's manifest keeps
it (admission's additions belong to no field manager), and the operator, running, makes the database Ready
without ever writing the SampleDB's metadata (no field manager of its own on anything but the status).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.e2e.conftest import sampledb, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.rbac import render

from sampledb_operator.decide.lifecycle.lifecycle import FINALIZER

pytestmark = pytest.mark.cluster

POLICY_KINDS = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")


@pytest.fixture
def policy(namespace: str) -> Iterator[str]:
    """The shipped finalizer policy, as this test's copy bound to `namespace`; its name."""
    objs = render(REPO / "manifests" / "admission")
    assert sorted(o["kind"] for o in objs) == sorted(POLICY_KINDS)
    name = f"sampledb-finalizer-{secrets.token_hex(3)}"
    for o in objs:
        o["metadata"] = {"name": name}
        if o["kind"] == "MutatingAdmissionPolicyBinding":
            o["spec"]["policyName"] = name
            o["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": namespace}}}
    kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objs))
    try:
        # the API server loads policies asynchronously: wait until a dry-run creation shows it at work
        probe = yaml.safe_dump(sampledb("probe", namespace))
        wait_until(lambda: FINALIZER in created(probe, dry_run=True).get("metadata", {}).get("finalizers", []),
                   timeout=60, what="the policy to add the finalizer")
        yield name
    finally:
        for kind in POLICY_KINDS:
            kubectl("delete", f"{kind.lower()}.admissionregistration.k8s.io", name, "--ignore-not-found", check=False)


def created(manifest: str, *, dry_run: bool = False) -> dict[str, Any]:
    """The API server's answer to `kubectl create` of `manifest` (a YAML document)."""
    args = ["create", "-f", "-", "-o", "json"] + (["--dry-run=server"] if dry_run else [])
    out = kubectl(*args, input=manifest).stdout
    return dict(yaml.safe_load(out))


def stored(name: str, namespace: str) -> dict[str, Any]:
    """The SampleDB as stored, its managedFields included."""
    return dict(kubectl_json("get", "sampledb", name, "-n", namespace, "--show-managed-fields"))


def with_metadata(name: str, namespace: str, **metadata: Any) -> str:
    body = sampledb(name, namespace)
    body["metadata"].update(metadata)
    return yaml.safe_dump(body)


def test_a_new_sampledb_has_the_finalizer_from_its_creation(policy: str, namespace: str) -> None:
    plain = created(with_metadata("plain", namespace))
    assert plain["metadata"]["finalizers"] == [FINALIZER]
    held = created(with_metadata("held", namespace, finalizers=["example.com/hold"]))
    assert held["metadata"]["finalizers"] == ["example.com/hold", FINALIZER]
    twice = created(with_metadata("twice", namespace, finalizers=[FINALIZER]))
    assert twice["metadata"]["finalizers"] == [FINALIZER]
    paused = sampledb("paused", namespace, paused=True)
    assert "finalizers" not in created(yaml.safe_dump(paused))["metadata"]  # pausing promises no new hold
    # made by a user's server-side apply, then applied again changed (the size): the finalizer, which is
    # nobody's field, stays
    for size in ("1Gi", "2Gi"):
        manifest = yaml.safe_dump(sampledb("applied", namespace, storage={"size": size}))
        kubectl("apply", "--server-side", "--field-manager", "user", "-f", "-", input=manifest)
    applied = stored("applied", namespace)
    assert applied["metadata"]["finalizers"] == [FINALIZER]
    managers = applied["metadata"]["managedFields"]
    assert [m["manager"] for m in managers] == ["user"]
    assert not any("f:finalizers" in (m.get("fieldsV1") or {}).get("f:metadata", {}) for m in managers)


def test_the_operator_writes_no_metadata_of_a_sampledb_the_policy_held(policy: str, namespace: str,
                                                                        kubeconfig: str) -> None:
    created(with_metadata("orders", namespace))
    op = OperatorProcess(kubeconfig, "--namespaces", namespace, "--no-leader-elect", "--workers", "2")
    with op:
        try:
            wait_ready("orders", namespace, timeout=120)
        except AssertionError:
            print(op.log_text()[-5000:])
            raise
    orders = stored("orders", namespace)
    assert orders["metadata"]["finalizers"] == [FINALIZER]
    operator_fields = [m for m in orders["metadata"]["managedFields"] if m["manager"] == "sampledb-operator"]
    assert operator_fields, "the operator wrote the status"
    assert all(m.get("subresource") == "status" for m in operator_fields), operator_fields
