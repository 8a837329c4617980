"""spec.tls on the real node: the operator's own certificate authority, verify-full from a client pod with only
what the operator published, unencrypted connections refused when TLS is required, replication over TLS, and a
certificate replaced under load without a failed query and without a restart."""

from __future__ import annotations

import base64
import socket
import ssl
import struct
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography import x509
from tests.e2e.conftest import apply, condition, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.local_only]
VERSION = "15.20"
SSL_REQUEST = struct.pack("!ii", 8, 80877103)


def secret_value(ns: str, name: str, key: str) -> str:
    return base64.b64decode(kubectl_json("get", "secret", name, "-n", ns)["data"][key]).decode()


def pod_ip(ns: str, pod: str) -> str:
    return str(kubectl_json("get", "pod", pod, "-n", ns)["status"]["podIP"])


def primary(ns: str, name: str) -> str:
    pods = kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/database={name},sampledb.io/role=primary")
    return str(pods["items"][0]["metadata"]["name"])


def served_serial(ip: str) -> int:
    """The serial of the certificate the server at `ip` presents (PostgreSQL's SSLRequest, then a handshake)."""
    with socket.create_connection((ip, 5432), timeout=5) as raw:
        raw.sendall(SSL_REQUEST)
        assert raw.recv(1) == b"S"
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with context.wrap_socket(raw) as wrapped:
            der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def connect(ns: str, name: str, ip: str, *, secret: str = "credentials", **params: Any) -> psycopg.Connection[Any]:
    """A connection to the instance at `ip` by the Service's name, with the Secret `<name>-<secret>`'s user."""
    return psycopg.connect(host=f"{name}.{ns}.svc", hostaddr=ip, port=5432, dbname="app",
                           user=secret_value(ns, f"{name}-{secret}", "username"),
                           password=secret_value(ns, f"{name}-{secret}", "password"), connect_timeout=10,
                           autocommit=True, **params)


def client_pod(ns: str, name: str) -> dict[str, Any]:
    """A pod that mounts only the ConfigMap the operator publishes and the credentials Secret, and connects with
    sslmode=verify-full to the database's Service by its name, then with the Secret's uri alone."""
    security = {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999,
                "seccompProfile": {"type": "RuntimeDefault"}}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": ns},
        "spec": {"restartPolicy": "Never", "securityContext": security, "automountServiceAccountToken": False,
                 "containers": [{
                     "name": "psql", "image": f"postgres:{VERSION}",
                     # verify-full with the ConfigMap's CA, then the Secret's uri alone (sslmode=require)
                     "command": ["sh", "-c", 'psql -X -qAt -c "$Q" && psql "$DATABASE_URL" -X -qAt -c "$Q"'],
                     "env": [{"name": "Q",
                              "value": "SELECT 'ssl=' || ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"},
                             {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": f"{name}-credentials",
                                                                                    "key": "uri"}}},
                             {"name": "PGHOST", "value": f"{name}.{ns}.svc"}, {"name": "PGUSER", "value": "app"},
                             {"name": "PGDATABASE", "value": "app"},
                             {"name": "PGSSLMODE", "valueFrom": {"configMapKeyRef": {"name": f"{name}-config",
                                                                                    "key": "sslmode"}}},
                             {"name": "PGSSLROOTCERT", "value": "/etc/db-ca/ca.crt"},
                             {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": f"{name}-credentials",
                                                                                  "key": "password"}}}],
                     "volumeMounts": [{"name": "ca", "mountPath": "/etc/db-ca", "readOnly": True}],
                     "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                         "readOnlyRootFilesystem": True}}],
                 "volumes": [{"name": "ca", "configMap": {"name": f"{name}-config",
                                                          "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}


def restarts(ns: str, pod: str) -> int:
    statuses = kubectl_json("get", "pod", pod, "-n", ns)["status"]["containerStatuses"]
    return int(next(s["restartCount"] for s in statuses if s["name"] == "postgres"))  # not the exporter's


def rotate_under_load(ns: str, name: str, ip: str, ca: Path, before: int) -> tuple[int, list[str]]:
    """Ask for a new certificate while a client inserts rows on one connection and opens new ones all along; wait
    until the server presents it. Returns the rows inserted and the client's errors."""
    done, failures, written = threading.Event(), [], [0]

    def load() -> None:
        n = 0
        try:
            with connect(ns, name, ip, sslmode="verify-full", sslrootcert=str(ca)) as held:
                while not done.is_set():
                    n += 1
                    held.execute("INSERT INTO ticks VALUES (%s)", (n,))
                    written[0] = n
                    if n % 10 == 0:
                        with connect(ns, name, ip, sslmode="verify-full", sslrootcert=str(ca)) as fresh:
                            fresh.execute("SELECT 1")
        except psycopg.Error as exc:
            failures.append(repr(exc))

    writer = threading.Thread(target=load, daemon=True)
    writer.start()
    try:
        wait_until(lambda: written[0] > 0 or failures, timeout=30, what="the client's first insert")
        kubectl("annotate", "sampledb", name, "-n", ns, "sampledb.io/rotate-certificate=first")
        wait_until(lambda: served_serial(ip) != before, timeout=180, what="the new certificate served")
        count = written[0]
        wait_until(lambda: written[0] > count + 20 or failures, timeout=30, what="inserts on the new certificate")
    finally:
        done.set()
        writer.join(timeout=30)
    return written[0], failures


def test_tls_is_verified_required_used_by_replication_and_rotated_under_load(
        real_namespace: str, real_operator: OperatorProcess, tmp_path: Path) -> None:
    ns, name = real_namespace, "secure"
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": name, "namespace": ns},
           "spec": {"version": VERSION, "replicas": 2, "storage": {"size": "256Mi"}, "tls": {"required": True}}})
    wait_ready(name, ns, timeout=300)
    wait_until(lambda: len(kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/database={name}")["items"]) == 2
               and all(any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
                       for p in kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/database={name}")["items"]),
               timeout=240, what="both instances ready")
    encrypted = wait_until(lambda: (c := condition(name, ns, "Encrypted")).get("status") == "True" and c,
                           timeout=60, what="Encrypted=True")
    assert encrypted["reason"] == "Served" and f"{name}-tls" in encrypted["message"]
    ca = tmp_path / "ca.crt"
    ca.write_text(kubectl_json("get", "configmap", f"{name}-config", "-n", ns)["data"]["ca.crt"])
    assert "PRIVATE KEY" not in ca.read_text()
    ip = pod_ip(ns, primary(ns, name))

    # a client pod with only the published CA verifies the server by its Service's name
    apply(client_pod(ns, name))
    wait_until(lambda: kubectl_json("get", "pod", "client", "-n", ns)["status"].get("phase") in ("Succeeded", "Failed"),
               timeout=120, what="the client pod's query")
    logs = str(kubectl("logs", "client", "-n", ns).stdout)
    assert kubectl_json("get", "pod", "client", "-n", ns)["status"]["phase"] == "Succeeded", logs
    assert logs.split() == ["ssl=true", "ssl=true"]
    assert secret_value(ns, f"{name}-credentials", "uri").endswith("?sslmode=require")

    # verify-full from outside the pod network too; the wrong CA is refused; unencrypted is refused
    with connect(ns, name, ip, sslmode="verify-full", sslrootcert=str(ca)) as conn:
        assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() == (True,)
        conn.execute("CREATE TABLE ticks (n int PRIMARY KEY)")
    # the standby streams over TLS (another role's connections are the superuser's to see)
    with connect(ns, name, ip, secret="superuser", sslmode="verify-full", sslrootcert=str(ca)) as conn:
        replicated = conn.execute("SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid)"
                                  " WHERE s.ssl").fetchone()
        assert replicated == (1,)
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        connect(ns, name, ip, sslmode="disable").close()
    other = tmp_path / "other.crt"
    other.write_text(secret_value(ns, f"{name}-tls", "tls.crt"))  # a certificate, but not the authority
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(ns, name, ip, sslmode="verify-full", sslrootcert=str(other)).close()

    # a new certificate under load: every query answered, the server not restarted
    before = served_serial(ip)
    started = restarts(ns, primary(ns, name))
    written, failures = rotate_under_load(ns, name, ip, ca, before)
    assert failures == []
    assert written > 0
    with connect(ns, name, ip, sslmode="verify-full", sslrootcert=str(ca)) as conn:
        assert conn.execute("SELECT count(*) FROM ticks").fetchone() == (written,)
    assert served_serial(ip) == x509.load_pem_x509_certificate(
        secret_value(ns, f"{name}-tls", "tls.crt").encode()).serial_number
    assert restarts(ns, primary(ns, name)) == started
    events = kubectl_json("get", "events", "-n", ns, "--field-selector",
                          f"involvedObject.name={name},involvedObject.kind=SampleDB")["items"]
    assert any(e["reason"] == "CertificateIssued" and "rotate-certificate" in e["message"] for e in events)
