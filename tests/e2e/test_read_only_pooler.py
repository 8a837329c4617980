"""spec.pooler.readOnlyInstances on the real node: PgBouncer pods in front of the standbys at <name>-pooler-ro send
every connection to a standby (reads answered, writes refused), log clients in with their own passwords, are
verified with the published CA under their Service's name, and go when readOnlyInstances goes to 0 while the
read-write pooler stays.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.e2e.conftest import apply, condition, status, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.model import names

pytestmark = pytest.mark.cluster
NAME = "reads"
RO = names.read_only_pooler_name(NAME)


def ready_pod_ips(ns: str, selector: str) -> list[str]:
    pods = kubectl_json("get", "pods", "-n", ns, "-l", selector)["items"]
    return sorted(p["status"]["podIP"] for p in pods if p["status"].get("podIP") and not p["metadata"].get(
        "deletionTimestamp") and any(c.get("type") == "Ready" and c.get("status") == "True"
                                     for c in p["status"].get("conditions") or []))


def login(ip: str, password: str, **extra: Any) -> psycopg.Connection[Any]:
    return psycopg.connect(host=ip, port=5432, dbname="app", user="app", password=password, connect_timeout=30,
                           autocommit=True, **extra)


def test_the_read_only_pooler_reaches_only_standbys_and_goes_with_read_only_instances(
        real_namespace: str, real_operator: OperatorProcess, tmp_path: Path) -> None:
    ns = real_namespace
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
           "spec": {"version": "15.20", "storage": {"size": "512Mi"}, "replicas": 2,
                    "pooler": {"instances": 1, "readOnlyInstances": 1}}})
    wait_ready(NAME, ns, timeout=420)
    wait_until(lambda: condition(NAME, ns, "PoolerReady").get("status") == "True", timeout=300,
               what="both poolers ready")
    assert RO in condition(NAME, ns, "PoolerReady")["message"]
    password = base64.b64decode(kubectl_json("get", "secret", names.secret_name(NAME), "-n", ns)["data"][
        "password"]).decode()
    [rw] = ready_pod_ips(ns, f"sampledb.io/pooler={NAME}")
    [ro] = ready_pod_ips(ns, f"sampledb.io/pooler-ro={NAME}")
    with login(rw, password) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS seen (id int)")
        conn.execute("INSERT INTO seen VALUES (1)")
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)

    def standby_answers() -> bool:  # the row reaches the standby
        with login(ro, password) as conn:
            return conn.execute("SELECT pg_is_in_recovery(), count(*) FROM seen").fetchone() == (True, 1)

    wait_until(standby_answers, timeout=60, what="the read-only pooler to answer from the standby")
    with login(ro, password) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("INSERT INTO seen VALUES (2)")
    ca = tmp_path / "ca.crt"
    ca.write_text(kubectl_json("get", "configmap", names.configmap_name(NAME), "-n", ns)["data"]["ca.crt"])

    def verified() -> bool:  # the server certificate names the read-only pooler's Service
        try:
            with psycopg.connect(host=f"{RO}.{ns}.svc", hostaddr=ro, port=5432, dbname="app", user="app",
                                 password=password, sslmode="verify-full", sslrootcert=str(ca),
                                 connect_timeout=30) as conn:
                return conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        except psycopg.OperationalError as exc:
            print(f"not yet: {exc}")
            return False

    wait_until(verified, timeout=180, what="a verify-full login through the read-only pooler")

    kubectl("patch", "sampledb", NAME, "-n", ns, "--type=merge", "-p", '{"spec":{"pooler":{"readOnlyInstances":0}}}')
    wait_until(lambda: all(get_or_none(kind, RO, ns) is None for kind in ("deployment", "service", "configmap")),
               timeout=120, what="the read-only pooler's children gone")
    assert get_or_none("deployment", names.pooler_name(NAME), ns) is not None
    wait_until(lambda: condition(NAME, ns, "PoolerReady").get("status") == "True"
               and RO not in condition(NAME, ns, "PoolerReady")["message"], timeout=60, what="PoolerReady again")
    assert status(NAME, ns).get("poolerApplied")
