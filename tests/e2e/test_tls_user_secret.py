"""A certificate of the user's (spec.tls.secretName, as cert-manager writes it) on the real node: served, with the
user's CA verifying it (verify-full); a role logs in with a client certificate from that CA; the operator issues
nothing; and a renewal of the Secret in place (here onto another CA) is loaded by the running server without a
restart: a client trusting only the new CA connects."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess
from tests.support.pem import write_pem_files

from sampledb_operator.decide.children import tls
from sampledb_operator.model import names
from sampledb_operator.pki import certs

pytestmark = pytest.mark.cluster
NAME = "usercert"


def tls_secret(ns: str, server: certs.Pair, ca: certs.Pair) -> dict[str, Any]:
    data = {"tls.crt": server.cert, "tls.key": server.key, "ca.crt": ca.cert}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "mine-tls", "namespace": ns},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def connect(ns: str, ca: str, user: str, **extra: str) -> psycopg.Connection[Any]:
    pod = kubectl_json("get", "pod", f"{NAME}-0", "-n", ns)
    return psycopg.connect(host=f"{NAME}.{ns}.svc", hostaddr=pod["status"]["podIP"], port=5432, dbname="app",
                           user=user, sslmode="verify-full", sslrootcert=ca, connect_timeout=10, autocommit=True,
                           **extra)


def works(ns: str, ca: str, password: str) -> bool:
    try:
        connect(ns, ca, "app", password=password).close()
        return True
    except psycopg.OperationalError:
        return False


def test_a_users_certificate_is_served_and_its_renewal_loaded_without_a_restart(
        real_namespace: str, real_operator: OperatorProcess, tmp_path: Path) -> None:
    ns = real_namespace
    now = datetime.now(UTC)
    ca = certs.issue_ca("users-ca", now)
    apply(tls_secret(ns, certs.issue_server(ca, NAME, tls.dns_names(NAME, ns), now), ca))
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
           "spec": {"version": "15.20", "storage": {"size": "256Mi"}, "tls": {"secretName": "mine-tls"},
                    "roles": [{"name": "etl", "certificate": True}]}})
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: status(NAME, ns).get("rolesApplied"), timeout=180, what="etl applied")
    creds = kubectl_json("get", "secret", names.secret_name(NAME), "-n", ns)["data"]
    password = base64.b64decode(creds["password"]).decode()
    first = write_pem_files(tmp_path / "first", {"ca.crt": ca.cert})
    with connect(ns, first["ca.crt"], "app", password=password) as conn:
        assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() == (True,)
    client = certs.issue_client(ca, "etl", now)  # from the user's CA: the operator has no key to issue one
    mine = write_pem_files(tmp_path / "etl", {"tls.crt": client.cert, "tls.key": client.key})
    with connect(ns, first["ca.crt"], "etl", sslcert=mine["tls.crt"], sslkey=mine["tls.key"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("etl",)
    made = {s["metadata"]["name"] for s in kubectl_json("get", "secrets", "-n", ns)["items"]}
    assert not made & {names.ca_secret_name(NAME), names.tls_secret_name(NAME), names.client_secret_name(NAME, "etl")}

    # renewed in place onto another CA: the running server loads it (no restart); a client of the new CA connects
    pod_uid = kubectl_json("get", "pod", f"{NAME}-0", "-n", ns)["metadata"]["uid"]
    ca2 = certs.issue_ca("users-ca-2", now)
    apply(tls_secret(ns, certs.issue_server(ca2, NAME, tls.dns_names(NAME, ns), now), ca2))
    second = write_pem_files(tmp_path / "second", {"ca.crt": ca2.cert})
    wait_until(lambda: works(ns, second["ca.crt"], password), timeout=240, interval=5,
               what="the renewed certificate served")
    assert not works(ns, first["ca.crt"], password)
    assert kubectl_json("get", "pod", f"{NAME}-0", "-n", ns)["metadata"]["uid"] == pod_uid
    restarts = kubectl("get", "pod", f"{NAME}-0", "-n", ns, "-o",
                       "jsonpath={.status.containerStatuses[?(@.name==\"postgres\")].restartCount}").stdout.strip()
    assert restarts == "0"
