"""`sampledb-operator chaos` end to end, run as a user runs it (the command line, a kubeconfig).

On kwok's fake nodes, with the operator as a local process: the API-level faults (a pod, the
Service, the ConfigMap, the StatefulSet deleted) on the selected database; the other database of
the namespace is never touched; every fault recovers and the JSON report says so; a dry run
changes nothing. On the real node: kill-postgres and fill-volume against a running PostgreSQL;
the database is Ready again and the report says so, and the fill file is gone at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support import images
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess

pytestmark = pytest.mark.cluster

KINDS = "pods,services,configmaps,statefulsets,persistentvolumeclaims,secrets"


def chaos(kubeconfig: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sampledb_operator", "chaos", "--kubeconfig", kubeconfig, *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)


def uids(ns: str, database: str) -> dict[str, str]:
    """kind/name -> uid of every object of one database."""
    items = kubectl_json("get", KINDS, "-n", ns, "-l", f"sampledb.io/database={database}")["items"]
    return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["uid"] for o in items}


def test_api_faults_recover_and_touch_only_the_selected_database(kubeconfig: str, namespace: str,
                                                                 operator: OperatorProcess) -> None:
    ns = namespace
    picked = sampledb("picked", ns)
    picked["metadata"]["labels"] = {"chaos": "yes"}
    apply([picked, sampledb("spared", ns)])
    wait_ready("picked", ns)
    wait_ready("spared", ns)
    spared, before = uids(ns, "spared"), uids(ns, "picked")
    assert {"Pod/spared-0", "Service/spared", "StatefulSet/spared"} <= set(spared)

    faults = "delete-pod,delete-service,delete-configmap,delete-statefulset"
    dry = chaos(kubeconfig, "-n", ns, "-l", "chaos=yes", "--seed", "5", "--duration", "12s", "--rate", "30",
                "--faults", faults, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing touched" in dry.stdout and "6 faults planned" in dry.stdout
    assert uids(ns, "picked") == before, "a dry run touches nothing"

    run = chaos(kubeconfig, "-n", ns, "-l", "chaos=yes", "--seed", "5", "--duration", "12s", "--rate", "30",
                "--faults", faults, "--recovery-timeout", "120s", "--output", "json")
    assert run.returncode == 0, run.stdout + run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    assert report["seed"] == 5 and report["databases"] == [f"{ns}/picked"]
    assert report["summary"]["planned"] == 6
    injected = [f for f in report["faults"] if f["outcome"] == "injected"]
    assert len(injected) == 6 and all(f["database"] == "picked" for f in injected)
    assert all(f["recovered"] and f["recoverySeconds"] is not None for f in injected), injected
    assert report["summary"]["recovered"] == 6

    assert uids(ns, "spared") == spared, "nothing of the unselected database was touched"
    after = uids(ns, "picked")
    replaced = {f"{f['target'].split()[0]}/{f['target'].split()[1]}" for f in injected}
    assert replaced and all(after.get(key) not in (None, before[key]) for key in replaced), (replaced, before, after)
    wait_ready("picked", ns)


@pytest.fixture
def operator_on_real_node(kubeconfig: str, real_namespace: str) -> Iterator[OperatorProcess]:
    with OperatorProcess(kubeconfig, "--namespaces", real_namespace, "--no-leader-elect", "--recheck-period", "5") \
            as op:
        yield op


def test_kill_postgres_and_fill_volume_on_a_real_database(kubeconfig: str, real_namespace: str,
                                                          operator_on_real_node: OperatorProcess) -> None:
    ns = real_namespace
    db = sampledb("victim", ns, version="15.20", storage={"size": "256Mi"}, deletionPolicy="Delete")
    db["metadata"]["labels"] = {"chaos": "yes"}
    apply(db)
    wait_ready("victim", ns, timeout=300)
    pod = kubectl_json("get", "pod", "victim-0", "-n", ns)
    restarts = next(s["restartCount"] for s in pod["status"]["containerStatuses"] if s["name"] == "postgres")
    pid1 = kubectl("exec", "-n", ns, "victim-0", "-c", "postgres", "--", "cat", "/proc/1/comm").stdout.strip()
    assert pid1 == "postgres", "PID 1 of the container is the postmaster"

    run = chaos(kubeconfig, "-n", ns, "-l", "chaos=yes", "--seed", "1", "--duration", "4s", "--rate", "30",
                "--faults", "kill-postgres,fill-volume", "--recovery-timeout", "240s", "--output", "json")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    by_kind = {f["fault"]: f for f in report["faults"]}
    assert set(by_kind) == {"kill-postgres", "fill-volume"}, report["faults"]
    for fault in by_kind.values():
        assert fault["outcome"] == "injected" and fault["recovered"] is True, fault
    assert by_kind["fill-volume"]["detail"].startswith("wrote ")
    assert report["cleanup"] == [f"{ns}/victim: removed /var/lib/postgresql/data/sampledb-chaos-fill"]

    pod = kubectl_json("get", "pod", "victim-0", "-n", ns)
    after = next(s["restartCount"] for s in pod["status"]["containerStatuses"] if s["name"] == "postgres")
    assert after > restarts, "the postgres container was restarted by the kill"
    ls = kubectl("exec", "-n", ns, "victim-0", "-c", "postgres", "--", "ls", "/var/lib/postgresql/data").stdout
    assert "sampledb-chaos-fill" not in ls.split()
    wait_ready("victim", ns)
    kubectl("delete", "sampledb", "victim", "-n", ns, "--wait=false")


def test_kill_leader_deletes_the_lease_holders_pod_and_waits_for_the_next_holder(kubeconfig: str,
                                                                                  namespace: str) -> None:
    """The operator's Lease and pods stood in for by a Lease and a pod in the test's namespace
    (kwok); the test plays the standby that takes the Lease over."""
    ns = namespace
    now = "2026-01-01T00:00:00.000000Z"
    apply([{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "op-lease", "namespace": ns},
            "spec": {"holderIdentity": "op-leader_1a2b3c4d", "leaseDurationSeconds": 15, "renewTime": now}},
           {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "op-leader", "namespace": ns},
            "spec": {"containers": [{"name": "op", "image": images.BUSYBOX}]}}])
    proc = subprocess.Popen(
        [sys.executable, "-m", "sampledb_operator", "chaos", "--kubeconfig", kubeconfig, "-n", ns, "--all",
         "--faults", "kill-leader", "--lease-namespace", ns, "--lease-name", "op-lease", "--duration", "1s",
         "--rate", "60", "--recovery-timeout", "60s", "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        wait_until(lambda: get_or_none("pod", "op-leader", ns) is None, timeout=60, what="the leader pod deleted")
        kubectl("patch", "lease", "op-lease", "-n", ns, "--type=merge",
                "-p", json.dumps({"spec": {"holderIdentity": "op-standby_5e6f7a8b"}}))
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, out + err
    [fault] = json.loads(out)["faults"]
    assert (fault["fault"], fault["outcome"], fault["recovered"]) == ("kill-leader", "injected", True), fault
    assert fault["target"] == f"Pod {ns}/op-leader" and fault["detail"] == "leader op-leader_1a2b3c4d"
