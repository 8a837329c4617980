"""`kubectl sampledb hibernate | wake | restart | reload` on the real node, judged on the data and the pods: a
hibernated database has no pod and keeps its volumes; woken, the same primary serves every row, the standby streams,
and no failover happened; a restart gives every instance a new pod; a reload is taken by every instance."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.e2e.test_plugin import ok, plugin
from tests.support.kube import kubectl, kubectl_argv, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster
NAME = "sleepy"


def pods(ns: str) -> list[dict[str, Any]]:
    selector = f"sampledb.io/database={NAME},app.kubernetes.io/component=database"
    return list(kubectl_json("get", "pods", "-n", ns, "-l", selector)["items"])


def psql(ns: str, pod: str, statement: str) -> str:
    return str(kubectl("exec", "-n", ns, pod, "-c", "postgres", "--", "psql", "-X", "-U", "postgres", "-d", "app",
                       "-qAt", "-v", "ON_ERROR_STOP=1", "-c", statement).stdout).strip()


def both_ready(ns: str) -> bool:
    found = pods(ns)
    return len(found) == 2 and all(
        any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        for p in found)


def test_hibernate_wake_restart_reload(real_namespace: str, kubeconfig: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply(sampledb(NAME, ns, version="15.20", replicas=2, storage={"size": "256Mi"},
                   replication={"failoverDelaySeconds": 5}))
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: both_ready(ns), timeout=240, what="both instances ready")
    primary = str(status(NAME, ns)["primary"])
    psql(ns, primary, "CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 5000) g")
    checksum = psql(ns, primary, "SELECT md5(string_agg(v, ',' ORDER BY id)) FROM t")
    claims = sorted(c["metadata"]["name"] for c in kubectl_json("get", "pvc", "-n", ns)["items"])

    # hibernate: every pod gone, the claims kept, the status says so
    out = ok(plugin(kubeconfig, "hibernate", NAME, "-n", ns, "--wait", "--timeout", "240", timeout=300))
    assert "hibernated" in out
    assert pods(ns) == []
    st = status(NAME, ns)
    assert st["phase"] == "Hibernated" and st["instances"] == [] and st["primary"] == primary
    assert condition(NAME, ns, "Hibernated")["status"] == "True"
    assert sorted(c["metadata"]["name"] for c in kubectl_json("get", "pvc", "-n", ns)["items"]) == claims
    assert [s["spec"]["replicas"] for s in kubectl_json("get", "statefulsets", "-n", ns)["items"]] == [0, 0]
    refused = plugin(kubeconfig, "restart", NAME, "-n", ns)
    assert refused.returncode != 0 and "hibernated" in refused.stderr

    # wake: the same primary, every row, the standby streaming, no failover
    ok(plugin(kubeconfig, "wake", NAME, "-n", ns, "--wait", "--timeout", "300", timeout=360))
    wait_until(lambda: both_ready(ns), timeout=240, what="both instances ready after the wake")
    assert status(NAME, ns)["primary"] == primary
    assert psql(ns, primary, "SELECT md5(string_agg(v, ',' ORDER BY id)) FROM t") == checksum
    wait_until(lambda: psql(ns, primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == "1",
               timeout=120, what="the standby streaming again")
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={NAME}")["items"]
    reasons = {e["reason"] for e in events}
    assert "Hibernating" in reasons and "FailoverStarted" not in reasons
    wait_until(lambda: condition(NAME, ns, "Hibernated").get("reason") == "Awake", timeout=60, what="Awake")

    # restart: every instance a new pod, ready, data intact
    before = {str(p["metadata"]["name"]): str(p["metadata"]["uid"]) for p in pods(ns)}
    ok(plugin(kubeconfig, "restart", NAME, "-n", ns, "--wait", "--timeout", "300", timeout=360))
    after = {str(p["metadata"]["name"]): str(p["metadata"]["uid"]) for p in pods(ns)}
    assert after.keys() == before.keys() and all(after[k] != before[k] for k in before)
    assert psql(ns, str(status(NAME, ns)["primary"]), "SELECT count(*) FROM t") == "5000"

    # reload: taken by each running instance
    kubectl_cmd = shlex.join(kubectl_argv())
    out = ok(plugin(kubeconfig, "reload", NAME, "-n", ns, env={"SAMPLEDB_KUBECTL": kubectl_cmd}, timeout=120))
    assert sorted(line.split(":")[0] for line in out.splitlines() if line.endswith("reloaded")) == sorted(after)
