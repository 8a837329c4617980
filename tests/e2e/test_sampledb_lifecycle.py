"""A SampleDB end to end: the real operator, the real control plane, kwok running the pods.

Create -> every child with the right shape -> pod Running -> init Job Complete -> Ready; edits
flow to the children; a resync writes nothing; drift is repaired; names never clash.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.support.kube import create_namespace, get_or_none, kubectl, kubectl_json, release_finalizers, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster








def init_configmap(ns: str, name: str = "db-init") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": {"init.sql": "CREATE TABLE greetings (id serial PRIMARY KEY, text text);"}}


def test_created_database_gets_every_child_then_becomes_ready(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply([init_configmap(ns), sampledb("shop", ns, parameters={"max_connections": "50"},
                                        init={"configMapKeyRef": {"name": "db-init", "key": "init.sql"}})])
    wait_ready("shop", ns)

    st = status("shop", ns)
    assert st["phase"] == "Running"
    assert st["currentVersion"] == "16.4"
    assert st["endpoint"] == f"shop.{ns}.svc:5432"
    assert st["secretName"] == "shop-credentials"
    assert st["observedGeneration"] == 1
    init = condition("shop", ns, "Initialized")
    assert init is not None and (init["status"], init["reason"]) == ("True", "InitSucceeded")

    db = kubectl_json("get", "sampledb", "shop", "-n", ns)
    uid = db["metadata"]["uid"]

    def owned(kind: str, name: str) -> dict[str, Any]:
        obj = kubectl_json("get", kind, name, "-n", ns)
        refs = obj["metadata"]["ownerReferences"]
        assert [(r["kind"], r["uid"], r.get("controller")) for r in refs] == [("SampleDB", uid, True)], kind
        return obj

    def child(kind: str, name: str) -> dict[str, Any]:
        """Labelled for the database but never garbage collected: only the deletion steps remove it."""
        obj = kubectl_json("get", kind, name, "-n", ns)
        assert "ownerReferences" not in obj["metadata"], kind
        assert obj["metadata"]["labels"]["sampledb.io/database"] == "shop"
        return obj

    secret = child("secret", "shop-credentials")
    assert set(secret["data"]) >= {"username", "password", "uri", "host", "port", "database"}
    cm = child("configmap", "shop-config")
    assert cm["data"]["host"] == f"shop.{ns}.svc"
    assert "password" not in json.dumps(cm["data"]).lower()
    pvc = child("pvc", "data-shop-0")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert pvc["status"]["phase"] == "Bound"
    assert child("service", "shop-headless")["spec"]["clusterIP"] == "None"
    assert child("service", "shop")["spec"]["ports"][0]["port"] == 5432
    sts = child("statefulset", "shop")
    assert child("pvc", "shop-backups")["status"]["phase"] == "Bound"
    c = sts["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == "postgres:16.4"
    assert c["args"] == ["postgres", "-c", "config_file=/etc/sampledb/postgresql.conf"]
    assert "max_connections = '50'" in child("configmap", "shop-config")["data"]["postgresql.conf"]
    assert sts["status"]["readyReplicas"] == 1
    pod = kubectl_json("get", "pod", "shop-0", "-n", ns)
    assert pod["status"]["phase"] == "Running"
    jobs = kubectl_json("get", "jobs", "-n", ns, "-l", "app.kubernetes.io/component=init")["items"]
    assert len(jobs) == 1
    owned("job", jobs[0]["metadata"]["name"])
    assert any(cond["type"] == "Complete" and cond["status"] == "True" for cond in jobs[0]["status"]["conditions"])

    # a creation announces its first children, then that it is ready, naming its initialization (no init Job Event)
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=shop")["items"]
    assert "CreatedChildren" in kubectl("describe", "sampledb", "shop", "-n", ns).stdout and not [
        e for e in events if e["reason"] == "CreatedInitJob"]
    assert any("initialized: InitSucceeded" in e["message"] for e in events if e["reason"] == "DatabaseReady")
    password = secret["data"]["password"]
    assert password not in operator.log_text()


def test_edits_to_version_parameters_and_storage_reach_the_children(namespace: str,
                                                                    operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("edit", ns, storage={"size": "1Gi", "storageClassName": "expandable"}))
    wait_ready("edit", ns)
    kubectl("patch", "sampledb", "edit", "-n", ns, "--type=merge", "-p",
            json.dumps({"spec": {"version": "16.6", "parameters": {"work_mem": "8MB"},
                                 "storage": {"size": "2Gi"}}}))

    def followed() -> bool:
        sts = kubectl_json("get", "statefulset", "edit", "-n", ns)
        c = sts["spec"]["template"]["spec"]["containers"][0]
        pvc = kubectl_json("get", "pvc", "data-edit-0", "-n", ns)
        conf = kubectl_json("get", "configmap", "edit-config", "-n", ns)["data"]["postgresql.conf"]
        return (c["image"] == "postgres:16.6" and "work_mem = '8MB'" in conf
                and pvc["spec"]["resources"]["requests"]["storage"] == "2Gi")

    wait_until(followed, timeout=60, what="StatefulSet and PVC to follow the edit")
    wait_until(lambda: status("edit", ns).get("currentVersion") == "16.6"
               and status("edit", ns).get("observedGeneration") == 2, timeout=120,
               what="currentVersion 16.6 after the rollout")
    wait_ready("edit", ns)


def test_storage_growth_on_a_class_that_cannot_expand_is_reported_not_retried(namespace: str,
                                                                                operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("fixed", ns))  # default class "standard": allowVolumeExpansion unset
    wait_ready("fixed", ns)
    kubectl("patch", "sampledb", "fixed", "-n", ns, "--type=merge", "-p", '{"spec":{"storage":{"size":"3Gi"}}}')
    wait_until(lambda: (condition("fixed", ns, "Degraded") or {}).get("reason") == "StorageExpansionUnsupported",
               timeout=60, what="Degraded StorageExpansionUnsupported")
    assert kubectl_json("get", "pvc", "data-fixed-0", "-n", ns)["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert status("fixed", ns)["phase"] == "Degraded"


def test_a_resync_of_a_ready_database_writes_nothing(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    apply(sampledb("calm", ns))
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--resync-period", "1") as op:
        wait_ready("calm", ns)
        # Let the last status write and its watch echo settle: the write count stops moving.
        baseline = wait_until(lambda: _stable_writes(op), timeout=60, what="writes to settle")
        reconciles = op.metric("controller_runtime_reconcile_total", controller="sampledb")
        wait_until(lambda: op.metric("controller_runtime_reconcile_total", controller="sampledb") >= reconciles + 3,
                   timeout=30, what="three more reconciles (resyncs)")
        kubectl("annotate", "sampledb", "calm", "-n", ns, "example.com/touched=yes")  # a no-op event
        wait_until(lambda: op.metric("controller_runtime_reconcile_total", controller="sampledb") >= reconciles + 5,
                   timeout=30, what="more reconciles")
        assert op.writes() == baseline[0]


def _stable_writes(op: OperatorProcess, samples: list[float] | None = None) -> tuple[float] | None:
    first = op.writes()
    reconciles = op.metric("controller_runtime_reconcile_total", controller="sampledb")
    wait_until(lambda: op.metric("controller_runtime_reconcile_total", controller="sampledb") > reconciles,
               timeout=10, what="one reconcile")
    return (first,) if op.writes() == first else None


def test_deleted_service_and_hand_edited_statefulset_are_restored(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("drift", ns))
    wait_ready("drift", ns)
    old_uid = kubectl_json("get", "service", "drift", "-n", ns)["metadata"]["uid"]
    kubectl("delete", "service", "drift", "-n", ns)
    def recreated() -> bool:
        svc = get_or_none("service", "drift", ns)
        return svc is not None and svc["metadata"]["uid"] != old_uid

    wait_until(recreated, timeout=60, what="the Service to be recreated")
    kubectl("set", "image", "statefulset/drift", "-n", ns, "postgres=postgres:9.6")
    wait_until(lambda: kubectl_json("get", "statefulset", "drift", "-n", ns)["spec"]["template"]["spec"]
               ["containers"][0]["image"] == "postgres:16.4", timeout=60, what="the image to be restored")


def test_same_name_in_two_namespaces_does_not_clash(kubeconfig: str, namespace: str) -> None:
    other = f"{namespace[:50]}-b"
    create_namespace(other)
    try:
        apply([sampledb("twin", namespace), sampledb("twin", other, version="15.8")])
        with OperatorProcess(kubeconfig, "--namespaces", f"{namespace},{other}", "--no-leader-elect"):
            wait_ready("twin", namespace)
            wait_ready("twin", other)
        a = kubectl_json("get", "statefulset", "twin", "-n", namespace)
        b = kubectl_json("get", "statefulset", "twin", "-n", other)
        assert a["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:16.4"
        assert b["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:15.8"
        ca = kubectl_json("get", "configmap", "twin-config", "-n", namespace)
        cb = kubectl_json("get", "configmap", "twin-config", "-n", other)
        assert ca["data"]["host"] == f"twin.{namespace}.svc" and cb["data"]["host"] == f"twin.{other}.svc"
    finally:
        release_finalizers(other)
        kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_missing_init_configmap_is_reported_and_database_becomes_ready_once_it_appears(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("late", ns, init={"configMapKeyRef": {"name": "late-init", "key": "init.sql"}}))
    wait_until(lambda: (condition("late", ns, "Initialized") or {}).get("reason") == "InitSourceMissing",
               timeout=60, what="Initialized=False InitSourceMissing")
    assert (condition("late", ns, "Ready") or {}).get("status") == "False"
    apply(init_configmap(ns, "late-init"))
    wait_ready("late", ns, timeout=180)


def test_failed_init_job_shows_the_jobs_reason(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("broken", ns, init={"configMapKeyRef": {"name": "db-init", "key": "init.sql"}})
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "true"}  # kwok fails this database's Job pods
    apply([init_configmap(ns), db])
    wait_until(lambda: (condition("broken", ns, "Initialized") or {}).get("reason") == "InitFailed",
               timeout=120, what="Initialized=False InitFailed")
    init = condition("broken", ns, "Initialized")
    assert init is not None and "BackoffLimitExceeded" in init["message"]
    assert status("broken", ns)["phase"] == "Degraded"
    assert (condition("broken", ns, "Ready") or {}).get("status") == "False"


def test_paused_database_is_left_alone_until_resumed(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("nap", ns))
    wait_ready("nap", ns)
    kubectl("patch", "sampledb", "nap", "-n", ns, "--type=merge", "-p", '{"spec":{"paused":true}}')
    wait_until(lambda: status("nap", ns).get("phase") == "Paused", timeout=60, what="phase Paused")
    kubectl("delete", "service", "nap", "-n", ns)
    kubectl("patch", "sampledb", "nap", "-n", ns, "--type=merge", "-p", '{"spec":{"parameters":{"a_b":"1"}}}')
    wait_until(lambda: status("nap", ns).get("observedGeneration") == 3, timeout=60, what="the edit observed")
    assert get_or_none("service", "nap", ns) is None
    kubectl("patch", "sampledb", "nap", "-n", ns, "--type=merge", "-p", '{"spec":{"paused":false}}')
    wait_until(lambda: get_or_none("service", "nap", ns) is not None, timeout=60, what="the Service back")
    wait_ready("nap", ns)


def test_operator_killed_mid_reconcile_converges_without_a_duplicate_job(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    apply([init_configmap(ns), sampledb("crash", ns, init={"configMapKeyRef": {"name": "db-init",
                                                                                "key": "init.sql"}})])
    first = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect").start()
    # Kill it as soon as it has started writing children, before the database is ready.
    wait_until(lambda: get_or_none("statefulset", "crash", ns) is not None, timeout=60, what="a StatefulSet")
    first.kill()
    def events() -> list[dict[str, Any]]:
        return list(kubectl_json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=crash")["items"])

    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect"):
        wait_ready("crash", ns)
        # a new database's init Job is not announced on its own: DatabaseReady (posted after the status write,
        # off the pass) names the initialization
        wait_until(lambda: any(e["reason"] == "DatabaseReady" for e in events()), timeout=30,
                   what="the DatabaseReady Event")
    jobs = kubectl_json("get", "jobs", "-n", ns)["items"]
    assert len([j for j in jobs if j["metadata"]["labels"].get("app.kubernetes.io/component") == "init"]) == 1
    ready = [e for e in events() if e["reason"] == "DatabaseReady"]
    assert any("initialized: InitSucceeded" in e["message"] for e in ready)
    assert not [e for e in events() if e["reason"] == "CreatedInitJob"]


def test_a_63_character_name_yields_valid_children_and_becomes_ready(namespace: str,
                                                                   operator: OperatorProcess) -> None:
    ns = namespace
    name = "l" + "o" * 61 + "g"
    assert len(name) == 63
    apply(sampledb(name, ns))
    wait_ready(name, ns)
    sts = kubectl_json("get", "statefulsets", "-n", ns)["items"]
    assert len(sts) == 1 and len(sts[0]["metadata"]["name"]) <= 52
    # the database's pod (a Job's pod, e.g. a reload right after creation, may run beside it)
    pods = kubectl_json("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=database")["items"]
    assert len(pods) == 1 and pods[0]["status"]["phase"] == "Running"
    assert len(pods[0]["metadata"]["name"]) <= 63
    services = sorted(s["metadata"]["name"] for s in kubectl_json("get", "services", "-n", ns)["items"])
    assert name in services and all(len(s) <= 63 for s in services)


def test_an_owner_reference_on_a_long_lived_child_is_removed(namespace: str, operator: OperatorProcess) -> None:
    """Objects made by an earlier version carried the SampleDB as owner; the garbage collector must
    never be able to delete them, so the operator removes that reference."""
    ns = namespace
    apply(sampledb("legacy", ns))
    wait_ready("legacy", ns)
    uid = kubectl_json("get", "sampledb", "legacy", "-n", ns)["metadata"]["uid"]
    owner = {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "name": "legacy", "uid": uid,
             "controller": True, "blockOwnerDeletion": True}
    kubectl("patch", "service", "legacy", "-n", ns, "--type=merge",
            "-p", json.dumps({"metadata": {"ownerReferences": [owner]}}))
    wait_until(lambda: "ownerReferences" not in kubectl_json("get", "service", "legacy", "-n", ns)["metadata"],
               timeout=60, what="the ownerReference removed")
