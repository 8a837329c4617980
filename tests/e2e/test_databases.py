"""spec.databases on the real node: a declared database appears with its owner (a declared role, who can then
create tables in it), its owner and connection limit change as written, a database left out of the list keeps its
data (Retained), and a database and its owning role written `ensure: absent` both go; reserved and SQL names are
refused at admission."""

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
NAME = "dbs"
PASSWORD = "reporting 'pw\"; DROP DATABASE app;--"


def db(ns: str, roles: list[dict[str, Any]], databases: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
            "spec": {"version": "15.20", "storage": {"size": "256Mi"}, "roles": roles, "databases": databases}}


def states(ns: str) -> dict[str, str]:
    return {d["name"]: d["state"] for d in status(NAME, ns).get("databases") or []}


def app_sql(ns: str, statement: str, database: str = "app") -> str:
    return str(kubectl("exec", "-n", ns, f"{NAME}-0", "-c", "postgres", "--", "psql", "-X", "-U", "app", "-d",
                       database, "-qAt", "-v", "ON_ERROR_STOP=1", "-c", statement).stdout).strip()


def login(ns: str, database: str) -> psycopg.Connection[Any]:
    pod = kubectl_json("get", "pod", f"{NAME}-0", "-n", ns)
    return psycopg.connect(host=f"{NAME}.{ns}.svc", hostaddr=pod["status"]["podIP"], port=5432, dbname=database,
                           user="reporting", password=PASSWORD, connect_timeout=10, autocommit=True)


REPORTING = {"name": "reporting", "passwordSecret": {"name": "reporting-pw", "key": "password"}}


def test_declared_databases_appear_change_and_go_only_when_asked(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reporting-pw", "namespace": ns},
           "data": {"password": base64.b64encode(PASSWORD.encode()).decode()}})
    apply(db(ns, [REPORTING], [{"name": "reports", "owner": "reporting"}, {"name": "scratch"}]))
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: states(ns) == {"reports": "Ready", "scratch": "Ready"}, timeout=120,
               what="both databases Ready")
    assert app_sql(ns, "SELECT datname, pg_get_userbyid(datdba), datconnlimit FROM pg_database"
                       " WHERE datname IN ('reports', 'scratch') ORDER BY 1") == "reports|reporting|-1\nscratch|app|-1"
    with login(ns, "reports") as conn:  # the owner creates and fills tables in its database
        conn.execute("CREATE TABLE daily AS SELECT g AS id FROM generate_series(1, 100) g")
        assert conn.execute("SELECT count(*), sum(id) FROM daily").fetchone() == (100, 5050)

    # owner and limit changed as written; scratch left out of the list: kept with its data (Retained)
    app_sql(ns, "CREATE TABLE kept AS SELECT g AS id FROM generate_series(1, 7) g", database="scratch")
    apply(db(ns, [REPORTING], [{"name": "reports", "owner": "app", "connectionLimit": 4}]))
    wait_until(lambda: states(ns) == {"reports": "Ready", "scratch": "Retained"}, timeout=120,
               what="reports changed, scratch Retained")
    assert app_sql(ns, "SELECT pg_get_userbyid(datdba), datconnlimit FROM pg_database WHERE datname = 'reports'") \
        == "app|4"
    assert app_sql(ns, "SELECT count(*) FROM kept", database="scratch") == "7"

    # a database and its owner written absent together: both go, in the order that lets them (database first)
    apply(db(ns, [REPORTING], [{"name": "reports", "owner": "reporting"}]))
    wait_until(lambda: app_sql(ns, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'reports'")
               == "reporting", timeout=120, what="reports owned by reporting again")
    apply(db(ns, [{**REPORTING, "ensure": "absent"}], [{"name": "reports", "ensure": "absent"}]))
    wait_until(lambda: states(ns).get("reports") == "Dropped"
               and {r["name"]: r["state"] for r in status(NAME, ns).get("roles") or []} == {"reporting": "Dropped"},
               timeout=120, what="reports and reporting dropped")
    assert app_sql(ns, "SELECT count(*) FROM pg_database WHERE datname = 'reports'") == "0"
    assert app_sql(ns, "SELECT count(*) FROM pg_roles WHERE rolname = 'reporting'") == "0"
    assert not any(c["type"] == "Degraded" and c["status"] == "True" for c in status(NAME, ns)["conditions"])

    # hostile names: refused by the API server, the object unchanged
    for name, words in (("template1", "reserved"), ("app", "reserved"), ('x"; DROP DATABASE app;--', "should match")):
        refused = kubectl("apply", "-f", "-", input=json.dumps(db(ns, [], [{"name": name}])), check=False)
        assert refused.returncode != 0 and words in refused.stderr, refused.stderr
    refused = kubectl("apply", "-f", "-", input=json.dumps(db(ns, [], [{"name": "x", "owner": "pg_monitor"}])),
                      check=False)
    assert refused.returncode != 0 and "PostgreSQL's own" in refused.stderr, refused.stderr
    assert states(ns).get("scratch") == "Retained"
