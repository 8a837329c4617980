"""spec.roles on the real node: declared roles appear with their password, limit and memberships; a password
rotated in its Secret is applied; a role left out of the list is kept; ensure: absent drops it; names that are
SQL or reserved are refused at admission."""

from __future__ import annotations

import base64
import json
from typing import Any

import psycopg
import pytest
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster
NAME = "roled"


def secret(ns: str, password: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reporting-pw", "namespace": ns},
            "data": {"password": base64.b64encode(password.encode()).decode()}}


def db(ns: str, roles: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
            "spec": {"version": "15.20", "storage": {"size": "256Mi"}, "roles": roles}}


def role_states(ns: str) -> dict[str, str]:
    return {r["name"]: r["state"] for r in status(NAME, ns).get("roles") or []}


def login(ns: str, user: str, password: str) -> psycopg.Connection[Any]:
    pod = kubectl_json("get", "pod", f"{NAME}-0", "-n", ns)
    return psycopg.connect(host=f"{NAME}.{ns}.svc", hostaddr=pod["status"]["podIP"], port=5432, dbname="app",
                           user=user, password=password, connect_timeout=10, autocommit=True)


def server_sql(ns: str, statement: str) -> str:
    return str(kubectl("exec", "-n", ns, f"{NAME}-0", "-c", "postgres", "--", "psql", "-X", "-U", "postgres",
                       "-d", "app", "-qAt", "-v", "ON_ERROR_STOP=1", "-c", statement).stdout).strip()


def can_login(ns: str, user: str, password: str) -> bool:
    try:
        login(ns, user, password).close()
        return True
    except psycopg.OperationalError:
        return False


REPORTING = {"name": "reporting", "connectionLimit": 2, "inRoles": ["pg_read_all_data"],
             "passwordSecret": {"name": "reporting-pw", "key": "password"}}


def test_declared_roles_appear_change_rotate_and_go_only_when_asked(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply(secret(ns, "first 'pw\"; DROP ROLE app;--"))
    apply(db(ns, [REPORTING, {"name": "auditors", "login": False}]))
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: role_states(ns) == {"reporting": "Ready", "auditors": "Ready"}, timeout=120,
               what="both roles Ready")
    server_sql(ns, "CREATE TABLE orders AS SELECT g AS id FROM generate_series(1, 10) g")
    with login(ns, "reporting", "first 'pw\"; DROP ROLE app;--") as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (10,)  # pg_read_all_data
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO orders VALUES (11)")
    assert server_sql(ns, "SELECT rolcanlogin, rolconnlimit FROM pg_roles WHERE rolname = 'reporting'") == "t|2"
    assert server_sql(ns, "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'auditors'") == "f"
    assert server_sql(ns, "SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = 'reporting'") == "t"

    # rotation: a new password in the Secret is applied; the old one no longer logs in
    apply(secret(ns, "second pw"))
    wait_until(lambda: can_login(ns, "reporting", "second pw"), timeout=120, what="the rotated password")
    assert not can_login(ns, "reporting", "first 'pw\"; DROP ROLE app;--")

    # left out of the list: kept, as it was (Retained); ensure absent: dropped
    apply(db(ns, [{**REPORTING, "connectionLimit": 5}]))
    wait_until(lambda: role_states(ns) == {"reporting": "Ready", "auditors": "Retained"}, timeout=120,
               what="auditors Retained")
    assert server_sql(ns, "SELECT count(*) FROM pg_roles WHERE rolname = 'auditors'") == "1"
    wait_until(lambda: server_sql(ns, "SELECT rolconnlimit FROM pg_roles WHERE rolname = 'reporting'") == "5",
               timeout=60, what="the new connection limit")
    apply(db(ns, [{**REPORTING, "ensure": "absent"}]))
    wait_until(lambda: role_states(ns).get("reporting") == "Dropped", timeout=120, what="reporting dropped")
    assert server_sql(ns, "SELECT count(*) FROM pg_roles WHERE rolname = 'reporting'") == "0"

    # hostile names: refused by the API server, the object unchanged
    for name, words in (("pg_evil", "reserved by PostgreSQL"), ("app", "reserved"),
                        ('x"; DROP ROLE app;--', "should match")):
        refused = kubectl("apply", "-f", "-", input=json.dumps(db(ns, [{"name": name}])), check=False)
        assert refused.returncode != 0 and words in refused.stderr, refused.stderr
    assert "reporting" in role_states(ns)
