"""A declared role that logs in with a client certificate, on the real node: the operator issues the certificate
(Secret <db>-client.<role>), the server admits the role by it over TLS with no password (verify-full with the
published CA), refuses it without a certificate or with one for another name from the same CA, and once the role
stops asking the certificate's Secret goes and the old certificate no longer logs in."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess
from tests.support.pem import write_pem_files

from sampledb_operator.model import names
from sampledb_operator.pki import certs

pytestmark = pytest.mark.cluster
NAME = "certlogin"


def db(ns: str, certificate: bool) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
            "spec": {"version": "15.20", "storage": {"size": "256Mi"},
                     "roles": [{"name": "reporting", "certificate": certificate, "inRoles": ["pg_read_all_data"]}]}}


def secret_data(ns: str, name: str) -> dict[str, str]:
    found = kubectl_json("get", "secret", name, "-n", ns)
    return {k: base64.b64decode(v).decode() for k, v in found["data"].items()}


def connect(ns: str, ca: str, cert: str | None = None, key: str | None = None) -> psycopg.Connection[Any]:
    pod = kubectl_json("get", "pod", f"{NAME}-0", "-n", ns)
    extra = {"sslcert": cert, "sslkey": key} if cert and key else {}
    return psycopg.connect(host=f"{NAME}.{ns}.svc", hostaddr=pod["status"]["podIP"], port=5432, dbname="app",
                           user="reporting", sslmode="verify-full", sslrootcert=ca, connect_timeout=10,
                           autocommit=True, **extra)


def test_a_role_logs_in_with_the_certificate_the_operator_issued_and_only_with_it(
        real_namespace: str, real_operator: OperatorProcess, tmp_path: Path) -> None:
    ns = real_namespace
    apply(db(ns, certificate=True))
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: (status(NAME, ns).get("roles") or [{}])[0].get("state") == "Ready"
               and status(NAME, ns).get("rolesApplied"), timeout=180,
               what="reporting Ready and applied (every instance runs the pg_hba line)")
    client = secret_data(ns, names.client_secret_name(NAME, "reporting"))
    files = write_pem_files(tmp_path, client)
    with connect(ns, files["ca.crt"], files["tls.crt"], files["tls.key"]) as conn:
        assert conn.execute("SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() \
            == ("reporting", True)
        assert conn.execute("SELECT count(*) FROM pg_roles").fetchone() is not None  # pg_read_all_data

    with pytest.raises(psycopg.OperationalError):  # no certificate: refused (no password either)
        connect(ns, files["ca.crt"]).close()
    ca = secret_data(ns, names.ca_secret_name(NAME))
    forged = certs.issue_client(certs.Pair(ca["ca.crt"], ca["ca.key"]), "app", datetime.now(UTC))
    other = write_pem_files(tmp_path / "other", {"tls.crt": forged.cert, "tls.key": forged.key})
    with pytest.raises(psycopg.OperationalError):  # signed by the CA, but for another name
        connect(ns, files["ca.crt"], other["tls.crt"], other["tls.key"]).close()

    apply(db(ns, certificate=False))
    wait_until(lambda: not kubectl_json("get", "secrets", "-n", ns, "--field-selector",
                                        f"metadata.name={names.client_secret_name(NAME, 'reporting')}")["items"],
               timeout=120, what="the client certificate's Secret deleted")
    wait_until(lambda: not can_connect(ns, files), timeout=120, what="the old certificate refused")

    # refused at admission: a certificate login without TLS, and without login
    no_tls = db(ns, certificate=True)
    no_tls["spec"]["tls"] = {"enabled": False}
    refused = kubectl("apply", "-f", "-", input=json.dumps(no_tls), check=False)
    assert refused.returncode != 0 and "needs spec.tls.enabled" in refused.stderr, refused.stderr
    no_login = db(ns, certificate=True)
    no_login["spec"]["roles"][0]["login"] = False
    refused = kubectl("apply", "-f", "-", input=json.dumps(no_login), check=False)
    assert refused.returncode != 0 and "must be able to log in" in refused.stderr, refused.stderr


def can_connect(ns: str, files: dict[str, str]) -> bool:
    try:
        connect(ns, files["ca.crt"], files["tls.crt"], files["tls.key"]).close()
        return True
    except psycopg.OperationalError:
        return False
