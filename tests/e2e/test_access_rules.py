"""spec.pgHba on the real node: rules added, reordered and removed take effect on the primary and the standby by a
reload (no restart), in their order, and never lock out the operator's user."""

from __future__ import annotations

import base64
import json
from typing import Any

import psycopg
import pytest
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.decide.upgrades import reload as rl
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

pytestmark = pytest.mark.cluster
NAME = "guarded"
PASSWORD = "rep0rt-pw"
PODS = (names.instance_pod_name(NAME, 0), names.instance_pod_name(NAME, 1))
ONLY_FROM_TEST_NET = [  # reporting only from 192.0.2.0/24 (TEST-NET-1: no client is there), refused elsewhere
    {"users": ["reporting"], "address": "192.0.2.0/24"},
    {"type": "host", "users": ["reporting"], "address": "all", "method": "reject"},
]


def can_login(ns: str, pod: str, user: str, password: str) -> str | None:
    """None when `user` logs in to the pod's server over TCP, else the server's refusal."""
    ip = kubectl_json("get", "pod", pod, "-n", ns)["status"]["podIP"]
    try:
        with psycopg.connect(host=ip, port=5432, dbname="app", user=user, password=password, connect_timeout=10):
            return None
    except psycopg.OperationalError as exc:
        return str(exc)


def started_at(ns: str, pod: str) -> str:
    return str(kubectl("exec", "-n", ns, pod, "-c", "postgres", "--", "psql", "-X", "-U", "app", "-d", "app", "-qAt",
                       "-c", "SELECT pg_postmaster_start_time()").stdout).strip()


def app_password(ns: str) -> str:
    secret = kubectl_json("get", "secret", names.secret_name(NAME), "-n", ns)
    return base64.b64decode(secret["data"]["password"]).decode()


def set_rules(ns: str, rules: list[dict[str, Any]] | None) -> None:
    kubectl("patch", "sampledb", NAME, "-n", ns, "--type", "merge", "-p", json.dumps({"spec": {"pgHba": rules}}))


def applied_as_wanted(ns: str) -> bool:
    db = SampleDB.model_validate(kubectl_json("get", "sampledb", NAME, "-n", ns))
    return status(NAME, ns).get("appliedParameters") == rl.wanted_hash(db)


def test_access_rules_apply_in_order_on_every_instance_without_a_restart(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reporting-pw", "namespace": ns},
           "stringData": {"password": PASSWORD}})
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
           "spec": {"version": "15.20", "storage": {"size": "256Mi"}, "replicas": 2,
                    "roles": [{"name": "reporting", "passwordSecret": {"name": "reporting-pw", "key": "password"}}]}})
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: status(NAME, ns).get("rolesApplied") is not None
               and all(can_login(ns, pod, "reporting", PASSWORD) is None for pod in PODS),
               timeout=180, what="reporting logs in to both instances")
    before = {pod: started_at(ns, pod) for pod in PODS}

    set_rules(ns, ONLY_FROM_TEST_NET)
    wait_until(lambda: all(can_login(ns, pod, "reporting", PASSWORD) is not None for pod in PODS), timeout=180,
               what="reporting refused by both instances")
    refusal = can_login(ns, PODS[0], "reporting", PASSWORD)
    assert refusal is not None and "pg_hba.conf rejects connection" in refusal, refusal
    wait_until(lambda: applied_as_wanted(ns), timeout=120, what="status.appliedParameters has the rules")
    for pod in PODS:  # the operator's user comes first: no rule locks it out
        assert can_login(ns, pod, "app", app_password(ns)) is None

    # the first matching line decides: with the first rule admitting every address, reporting is back
    set_rules(ns, [{**ONLY_FROM_TEST_NET[0], "address": "all"}, ONLY_FROM_TEST_NET[1]])
    wait_until(lambda: all(can_login(ns, pod, "reporting", PASSWORD) is None for pod in PODS), timeout=180,
               what="reporting admitted by the first rule")

    # back to the first rules at once, maybe before the last edit's reload is recorded: reloaded again all the same
    set_rules(ns, ONLY_FROM_TEST_NET)
    wait_until(lambda: all(can_login(ns, pod, "reporting", PASSWORD) is not None for pod in PODS), timeout=180,
               what="reporting refused again")
    set_rules(ns, None)  # no rules: the default admits every role with its password
    wait_until(lambda: all(can_login(ns, pod, "reporting", PASSWORD) is None for pod in PODS), timeout=180,
               what="reporting admitted once the rules are gone")
    wait_until(lambda: applied_as_wanted(ns), timeout=120, what="status.appliedParameters without the rules")
    assert {pod: started_at(ns, pod) for pod in PODS} == before  # reloads, never a restart
