"""Upgrade guards end to end: one upgrade at a time (issue #11, item 2), and a pinned image that
disagrees with spec.version refused instead of reported as upgraded (item 3).

An upgrade Job that does not finish (its pod can never be scheduled) stands for a long-running
major upgrade: a new spec.version meanwhile starts no second upgrade Job on the same volume, the
new target waits with Upgrading=True/WaitingForUpgrade, and goes on once the first Job is gone.
"""

from __future__ import annotations

import json

import pytest
from tests.e2e.conftest import apply, condition, jobs_of, sampledb, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def stuck_upgrade_job(ns: str, db: dict[str, object]) -> dict[str, object]:
    """An upgrade Job of an earlier attempt, owned by the SampleDB, whose pod never runs."""
    meta = db["metadata"]
    assert isinstance(meta, dict)
    labels = {"app.kubernetes.io/managed-by": "sampledb-operator", "app.kubernetes.io/component": "upgrade",
              "sampledb.io/database": meta["name"], "app.kubernetes.io/instance": meta["name"]}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{meta['name']}-upgrade-earlier", "namespace": ns, "labels": labels,
                     "ownerReferences": [{"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True}]},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
            "restartPolicy": "Never", "nodeSelector": {"sampledb.io/no-such-node": "true"},
            "containers": [{"name": "upgrade", "image": "postgres:17.2"}]}}},
    }


def test_a_new_target_waits_while_an_upgrade_job_runs(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("serial", ns))
    wait_ready("serial", ns)
    apply(stuck_upgrade_job(ns, kubectl_json("get", "sampledb", "serial", "-n", ns)))
    kubectl("patch", "sampledb", "serial", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"version": "17.2"}}))
    wait_until(lambda: condition("serial", ns, "Upgrading").get("reason") == "WaitingForUpgrade", timeout=60,
               what="Upgrading=True WaitingForUpgrade")
    assert "serial-upgrade-earlier" in condition("serial", ns, "Upgrading")["message"]
    assert [j["metadata"]["name"] for j in jobs_of(ns, "upgrade")] == ["serial-upgrade-earlier"]
    assert kubectl_json("get", "sampledbbackups", "-n", ns)["items"] == []

    kubectl("delete", "job", "serial-upgrade-earlier", "-n", ns)
    wait_until(lambda: condition("serial", ns, "Upgrading").get("reason") in ("BackingUp", "UpgradeJobRunning",
                                                                             "RollingOut", "UpgradeSucceeded"),
               timeout=60, what="the upgrade to go on")


def test_a_pinned_image_of_another_minor_is_refused_and_nothing_rolls(namespace: str,
                                                                      operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("pinned", ns, image="postgres:16.4"))
    wait_ready("pinned", ns)
    kubectl("patch", "sampledb", "pinned", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"version": "16.6"}}))
    wait_until(lambda: condition("pinned", ns, "SpecValid").get("reason") == "ImageVersionMismatch", timeout=60,
               what="SpecValid=False ImageVersionMismatch")
    db = kubectl_json("get", "sampledb", "pinned", "-n", ns)
    assert db["status"]["currentVersion"] == "16.4"
    assert not [c for c in db["status"]["conditions"] if c["type"] == "Upgrading"]
    sts = kubectl_json("get", "statefulset", "pinned", "-n", ns)
    assert sts["metadata"]["annotations"]["sampledb.io/version"] == "16.4"
    # Changing both together is an ordinary minor upgrade.
    kubectl("patch", "sampledb", "pinned", "-n", ns, "--type=merge", "-p",
            json.dumps({"spec": {"version": "16.6", "image": "postgres:16.6"}}))
    wait_until(lambda: kubectl_json("get", "sampledb", "pinned", "-n", ns)["status"].get("currentVersion") == "16.6",
               timeout=120, what="currentVersion 16.6")
