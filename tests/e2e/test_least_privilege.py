"""Least privilege inside PostgreSQL, on the real node: the application's role `app` owns its database and what its
init SQL made, and cannot read the server's files, run programs, make roles, change the server's settings or
replicate; the superuser `postgres` is in a Secret of its own, which the standby streams with. A database whose
credentials Secret predates the split (no annotation naming a superuser Secret) keeps `app` as its superuser, with a
superuser Secret that copies it."""

from __future__ import annotations

import base64
import json
from typing import Any

import psycopg
import pytest
from psycopg import errors
from tests.e2e.conftest import apply, sampledb, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children.desired_config import APPLICATION_SUPERUSER_ANNOTATION
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

pytestmark = pytest.mark.cluster
NAME, EARLIER, MOVED = "least", "earlier", "moved"
CHECKSUM = "SELECT count(*), md5(string_agg(id || ':' || amount, ',' ORDER BY id)) FROM ledger"


def secret(ns: str, name: str) -> dict[str, str]:
    data = kubectl_json("get", "secret", name, "-n", ns)["data"]
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def connect(ns: str, creds: dict[str, str], pod: str, **extra: Any) -> psycopg.Connection[Any]:
    ip = kubectl_json("get", "pod", pod, "-n", ns)["status"]["podIP"]
    return psycopg.connect(host=ip, port=5432, dbname="app", user=creds["username"], password=creds["password"],
                           connect_timeout=10, autocommit=True, **extra)


def logs_in(ns: str, creds: dict[str, str], pod: str) -> bool:
    try:
        connect(ns, creds, pod).close()
    except psycopg.OperationalError:
        return False
    return True


def refused(conn: psycopg.Connection[Any], statement: str) -> str:
    """The server's refusal of `statement` (an insufficient privilege); fails when it runs."""
    with pytest.raises(errors.InsufficientPrivilege) as raised:
        conn.execute(statement)
    return str(raised.value)


def test_the_application_role_owns_its_data_and_nothing_of_the_server(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "least-init", "namespace": ns},
            "data": {"init.sql": "CREATE TABLE orders (id bigint PRIMARY KEY, total numeric);"
                                 " INSERT INTO orders SELECT g, g * 1.5 FROM generate_series(1, 100) g;"}},
           sampledb(NAME, ns, version="15.20", storage={"size": "256Mi"}, replicas=2,
                    init={"configMapKeyRef": {"name": "least-init", "key": "init.sql"}})])
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: status(NAME, ns).get("phase") == "Running", timeout=180, what="the init SQL ran")
    app = secret(ns, names.secret_name(NAME))
    superuser = secret(ns, names.superuser_secret_name(NAME))
    assert (app["username"], superuser["username"]) == ("app", "postgres")
    assert app["password"] != superuser["password"] and superuser["password"] not in str(app)
    primary = names.instance_pod_name(NAME, 0)

    with connect(ns, app, primary) as conn:
        attributes = conn.execute("SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls"
                                  " FROM pg_roles WHERE rolname = current_user").fetchone()
        assert attributes == (False, False, False, False, False)
        owners = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'app'"
                              " UNION ALL SELECT tableowner FROM pg_tables WHERE tablename = 'orders'").fetchall()
        assert owners == [("app",), ("app",)]  # the database, and the table the init SQL made
        assert conn.execute("SELECT count(*), sum(total) FROM orders").fetchone() == (100, 7575)
        conn.execute("CREATE TABLE notes (id int)")  # its own schema: it creates and owns
        conn.execute("CREATE EXTENSION pgcrypto")  # a trusted extension: the database's owner may
        refused(conn, "SELECT pg_read_file('PG_VERSION')")
        refused(conn, "COPY (SELECT 1) TO PROGRAM 'true'")
        refused(conn, "CREATE ROLE intruder LOGIN SUPERUSER")
        refused(conn, "ALTER ROLE app SUPERUSER")
        refused(conn, "ALTER SYSTEM SET work_mem = '1GB'")
        refused(conn, "SELECT pg_create_physical_replication_slot('stolen')")
    with pytest.raises(psycopg.OperationalError) as raised:  # no replication connection: it is not a replication role
        connect(ns, app, primary, replication="true")
    assert "replication" in str(raised.value)

    with connect(ns, superuser, primary) as conn:  # the superuser's Secret is the superuser, and the standby streams
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (True,)
        wait_until(lambda: conn.execute("SELECT usename, state FROM pg_stat_replication").fetchall()
                   == [("postgres", "streaming")], timeout=120, what="the standby streams as postgres")
    with connect(ns, app, primary) as conn:  # nor may it stop the replication
        refused(conn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'postgres'")

    # a new password in the credentials Secret is the role's: the old one no longer logs in, the uri follows
    kubectl("patch", "secret", names.secret_name(NAME), "-n", ns, "--type", "merge",
            "-p", json.dumps({"stringData": {"password": "rotated-" + app["password"][:8]}}))
    rotated = {**app, "password": "rotated-" + app["password"][:8]}
    wait_until(lambda: logs_in(ns, rotated, primary), timeout=120, what="app logs in with the new password")
    assert not logs_in(ns, app, primary)
    wait_until(lambda: rotated["password"] in secret(ns, names.secret_name(NAME))["uri"], timeout=60,
               what="the uri with the new password")
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={NAME}")["items"]
    assert "ApplicationPasswordApplied" in {e["reason"] for e in events}


def test_a_database_made_before_the_split_keeps_its_application_role_as_superuser_and_moves_by_a_restore(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    body = sampledb(EARLIER, ns, version="15.20", storage={"size": "256Mi"})
    earlier = d.secret(SampleDB.model_validate(body), "earlier-pw")
    del earlier["metadata"]["annotations"]  # the credentials Secret as earlier versions wrote it
    apply([earlier, body])
    wait_ready(EARLIER, ns, timeout=300)
    copy = kubectl_json("get", "secret", names.superuser_secret_name(EARLIER), "-n", ns)
    assert copy["metadata"]["annotations"] == {APPLICATION_SUPERUSER_ANNOTATION: "true"}
    assert secret(ns, names.superuser_secret_name(EARLIER)) == {"username": "app", "password": "earlier-pw"}
    with connect(ns, secret(ns, names.secret_name(EARLIER)), names.instance_pod_name(EARLIER, 0)) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'app'").fetchone() == (True,)
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'postgres'").fetchone() == (0,)
        conn.execute("CREATE TABLE ledger (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, amount numeric)")
        conn.execute("INSERT INTO ledger (amount) SELECT g * 0.25 FROM generate_series(1, 500) g")
        conn.execute("CREATE VIEW big_entries AS SELECT * FROM ledger WHERE amount > 100")
        before = conn.execute(CHECKSUM).fetchone()

    # the user guide's move: a logical backup, restored into a new SampleDB, whose app owns what it restored
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
           "metadata": {"name": "move", "namespace": ns}, "spec": {"database": EARLIER, "reason": "manual"}})
    wait_until(lambda: ((kubectl_json("get", "sampledbbackup", "move", "-n", ns).get("status") or {})
                        .get("phase") == "Succeeded"), timeout=180, what="the backup Succeeded")
    apply(sampledb(MOVED, ns, version="15.20", storage={"size": "256Mi"}, restore={"backupName": "move"}))
    wait_until(lambda: any(c["type"] == "Initialized" and c.get("reason") == "Restored"
                           for c in status(MOVED, ns).get("conditions", [])), timeout=300, what="the restore done")
    with connect(ns, secret(ns, names.secret_name(MOVED)), names.instance_pod_name(MOVED, 0)) as conn:
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
        assert conn.execute(CHECKSUM).fetchone() == before
        owners = conn.execute("SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class c JOIN pg_namespace n"
                              " ON n.oid = c.relnamespace WHERE n.nspname = 'public'").fetchall()
        assert owners == [("app",)]  # the table, its identity sequence, its index and the view
        conn.execute("INSERT INTO ledger (amount) VALUES (1)")  # and it writes, as its owner
        refused(conn, "CREATE ROLE intruder")
