"""spec.pooler on the real node: PgBouncer in front of a database of max_connections 50 answers 500 clients at once,
logs clients in with their own roles (auth_query, no password file), loses no committed transaction when a pooler
pod goes, and leaves with spec.pooler. pgbench through the pooler and directly, side by side (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from pathlib import Path

import psycopg
import pytest
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.prometheus import PrometheusServer, as_grafana_would, dashboard_queries

from sampledb_operator.model import names
from sampledb_operator.model.monitoring import POOLER_EXPORTER_PORT

pytestmark = pytest.mark.cluster
NAME = "pooled"
POOLER = names.pooler_name(NAME)
PASSWORD = "p00led-reporting"
CLIENTS = 500
POOLER_JOB = "sampledb-pooler"
DASHBOARD = REPO / "manifests" / "components" / "monitoring" / "dashboards" / "sampledb-postgres.json"


def pooler_ips(ns: str) -> list[str]:
    pods = kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/pooler={NAME}")["items"]
    return sorted(p["status"]["podIP"] for p in pods if p["status"].get("podIP") and not p["metadata"].get(
        "deletionTimestamp") and any(c.get("type") == "Ready" and c.get("status") == "True"
                                     for c in p["status"].get("conditions") or []))


def app_password(ns: str) -> str:
    return base64.b64decode(kubectl_json("get", "secret", names.secret_name(NAME), "-n", ns)["data"]["password"]
                            ).decode()


def direct_ip(ns: str) -> str:
    return str(kubectl_json("get", "pod", names.pod_name(NAME), "-n", ns)["status"]["podIP"])


async def many_clients(ips: list[str], user: str, password: str, n: int) -> list[str]:
    """n clients at once over the pooler pods, each holding its connection while all the others connect, then one
    query each; the errors (empty: all answered)."""
    connected = asyncio.Event()
    ready = 0
    errors: list[str] = []

    async def one(i: int) -> None:
        nonlocal ready
        try:
            conn = await psycopg.AsyncConnection.connect(host=ips[i % len(ips)], port=5432, dbname="app", user=user,
                                                         password=password, connect_timeout=60, autocommit=True)
        except psycopg.OperationalError as exc:
            errors.append(str(exc).splitlines()[0])
            if ready + len(errors) == n:
                connected.set()
            return
        try:
            ready += 1
            if ready + len(errors) == n:
                connected.set()
            await asyncio.wait_for(connected.wait(), 120)
            cur = await conn.execute("SELECT %s::int + count(*) FROM pg_stat_activity WHERE false", (i,))
            row = await cur.fetchone()
            if row != (i,):
                errors.append(f"client {i}: {row}")
        except (psycopg.Error, TimeoutError) as exc:
            errors.append(f"client {i}: {exc}")
        finally:
            await conn.close()

    await asyncio.gather(*(one(i) for i in range(n)))
    return errors


def server_connections(ns: str) -> dict[str, int]:
    """The server's client connections, by role (as the superuser: another role's backend_type is hidden from app)."""
    out = kubectl("exec", "-n", ns, names.pod_name(NAME), "-c", "postgres", "--", "psql", "-X", "-U", "postgres", "-d",
                  "app", "-qAt", "-F", " ", "-c", "SELECT usename, count(*) FROM pg_stat_activity WHERE backend_type ="
                  " 'client backend' GROUP BY usename").stdout
    return {user: int(n) for user, n in (line.split() for line in out.splitlines() if line.strip())}


def pgbench(ns: str, host: str, *args: str) -> dict[str, float]:
    """pgbench in the database pod, as app (its password from the container's environment, never in argv)."""
    script = f'PGPASSWORD="$SAMPLEDB_APP_PASSWORD" exec pgbench -h {host} -U app {" ".join(args)} app'
    out = kubectl("exec", "-n", ns, names.pod_name(NAME), "-c", "postgres", "--", "sh", "-c", script,
                  timeout=300).stdout
    tps = re.search(r"tps = ([0-9.]+)", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    assert tps, out
    return {"tps": float(tps.group(1)), "failed": float(failed.group(1)) if failed else 0.0}


def _verified_login(ns: str, ip: str, ca: Path) -> str | None:
    """A login through the pooler pod at `ip` as if by its Service's name, sslmode=verify-full; None if refused
    (PgBouncer reads a reissued certificate at its restart: the pods roll when the Secret's names change)."""
    try:
        with psycopg.connect(host=f"{POOLER}.{ns}.svc", hostaddr=ip, port=5432, dbname="app", user="reporting",
                             password=PASSWORD, sslmode="verify-full", sslrootcert=str(ca), connect_timeout=10) as conn:
            return f"{conn.execute('SELECT current_user').fetchone()[0]} over TLS" if conn.info.pgconn.ssl_in_use \
                else "not encrypted"
    except psycopg.OperationalError:
        return None


def _no_commit_lost_when_a_pooler_pod_goes(ns: str) -> None:
    """A writer commits row after row over both pooler pods while one is deleted: every acknowledged row is there."""
    kubectl("exec", "-n", ns, names.pod_name(NAME), "-c", "postgres", "--", "psql", "-X", "-U", "app", "-d", "app",
            "-qc", "CREATE TABLE ledger (id int PRIMARY KEY)")
    acked: list[int] = []
    password = app_password(ns)
    victim = kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/pooler={NAME}")["items"][0]["metadata"]["name"]
    deleted_at: float | None = None
    i, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline and (deleted_at is None or time.monotonic() < deleted_at + 15):
        i += 1
        ips = pooler_ips(ns)
        try:
            with psycopg.connect(host=ips[i % len(ips)], port=5432, dbname="app", user="app", password=password,
                                 connect_timeout=5) as conn:
                conn.execute("INSERT INTO ledger VALUES (%s)", (i,))
            acked.append(i)
        except (psycopg.Error, ZeroDivisionError):
            pass  # not acknowledged (or no pooler pod ready this moment): may or may not be there
        if deleted_at is None and len(acked) >= 20:
            kubectl("delete", "pod", victim, "-n", ns, "--wait=false")
            deleted_at = time.monotonic()
    assert deleted_at is not None and len(acked) > 40
    present = {int(x) for x in kubectl("exec", "-n", ns, names.pod_name(NAME), "-c", "postgres", "--", "psql", "-X",
                                       "-U", "app", "-d", "app", "-qAt", "-c", "SELECT id FROM ledger").stdout.split()}
    assert set(acked) <= present, sorted(set(acked) - present)[:10]
    wait_until(lambda: len(pooler_ips(ns)) == 2, timeout=180, what="the pooler back to two pods")


def _the_pooler_exporters_feed_the_dashboard(ns: str) -> None:
    """A real Prometheus scrapes the pgbouncer_exporter beside each pooler pod (labelled as the PodMonitor labels
    them): every pooler panel of the dashboard returns this database's series, counting the clients just served."""
    pods = kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/pooler={NAME}")["items"]
    targets = {f"{p['status']['podIP']}:{POOLER_EXPORTER_PORT}": {"namespace": ns, "name": NAME,
                                                                "instance": p["metadata"]["name"]}
               for p in pods if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")}
    with PrometheusServer(list(targets), job=POOLER_JOB, labels=targets) as prom:
        wait_until(prom.targets_up, timeout=60, what="Prometheus to scrape the pooler exporters")
        up = wait_until(lambda: (r := prom.query(f'pgbouncer_up{{job="{POOLER_JOB}"}} == 1')) and len(r) == 2 and r,
                        timeout=60, what="pgbouncer_up 1 on both pooler pods")
        assert {r["metric"]["instance"] for r in up} == {t["instance"] for t in targets.values()}
        queries = [(title, as_grafana_would(expr, namespace=ns, database=NAME))
                   for title, expr in dashboard_queries(DASHBOARD, POOLER_JOB)]
        assert len(queries) >= 4
        wait_until(lambda: all(prom.query(q) for _, q in queries), timeout=60,
                   what="every pooler panel query to return series")
        pooled = prom.query(f'sum(pgbouncer_stats_sql_transactions_pooled_total{{job="{POOLER_JOB}",'
                            ' database="app"})')
        assert pooled and pooled[0]["value"] >= CLIENTS  # the 500 clients' queries went through


def _pgbench_side_by_side(ns: str) -> None:
    """pgbench select-only through the pooler and directly (the numbers go to docs/benchmarks.md)."""
    kubectl("exec", "-n", ns, names.pod_name(NAME), "-c", "postgres", "--", "sh", "-c",
            'PGPASSWORD="$SAMPLEDB_APP_PASSWORD" exec pgbench -h 127.0.0.1 -U app -i -s 2 -q app', timeout=300)
    runs = {"pooler_c10": pgbench(ns, f"{POOLER}.{ns}.svc", "-c", "10", "-j", "2", "-T", "20", "-S"),
            "direct_c10": pgbench(ns, "127.0.0.1", "-c", "10", "-j", "2", "-T", "20", "-S"),
            "pooler_c200": pgbench(ns, f"{POOLER}.{ns}.svc", "-c", "200", "-j", "2", "-T", "20", "-S")}
    print(json.dumps({"pgbench_select_only_tps": {k: v["tps"] for k, v in runs.items()}}))
    assert all(r["failed"] == 0 and r["tps"] > 0 for r in runs.values()), runs


def test_the_pooler_answers_500_clients_with_their_own_roles_and_loses_no_commit(
        real_namespace: str, real_operator: OperatorProcess, tmp_path: Path) -> None:
    ns = real_namespace
    apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "reporting-pw", "namespace": ns},
           "stringData": {"password": PASSWORD}})
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
           "spec": {"version": "15.20", "storage": {"size": "512Mi"}, "parameters": {"max_connections": "50"},
                    "roles": [{"name": "reporting", "inRoles": ["pg_read_all_data"],
                               "passwordSecret": {"name": "reporting-pw", "key": "password"}}],
                    "pooler": {"instances": 2, "mode": "transaction", "defaultPoolSize": 8,
                               "parameters": {"query_wait_timeout": "120"}}}})
    wait_ready(NAME, ns, timeout=300)
    wait_until(lambda: status(NAME, ns).get("poolerApplied") and status(NAME, ns).get("rolesApplied"),
               timeout=120, what="the pooler's role and function made")
    wait_until(lambda: len(pooler_ips(ns)) == 2, timeout=180, what="two pooler pods ready")
    secret = kubectl_json("get", "secret", POOLER, "-n", ns)
    assert set(secret["data"]) == {"password", "userlist.txt"}
    userlist = base64.b64decode(secret["data"]["userlist.txt"]).decode()
    assert userlist.startswith('"sampledb_pooler" "') and userlist.count("\n") == 1  # its own line only

    # the operator's user and a declared role log in with their own passwords; TLS to the server, verified
    ips = pooler_ips(ns)
    for user, password in (("app", app_password(ns)), ("reporting", PASSWORD)):
        with psycopg.connect(host=ips[0], port=5432, dbname="app", user=user, password=password,
                             connect_timeout=30) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (user,)
            assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone() == (True,)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host=ips[0], port=5432, dbname="app", user="reporting", password="wrong", connect_timeout=30)
    # the client's side over TLS too, verified with only what the operator published (the CA in <name>-config)
    ca = tmp_path / "ca.crt"
    ca.write_text(kubectl_json("get", "configmap", names.configmap_name(NAME), "-n", ns)["data"]["ca.crt"])
    verified = wait_until(lambda: _verified_login(ns, ips[0], ca), timeout=120,
                          what="a verify-full login through the pooler")
    assert verified == "reporting over TLS"

    # 500 clients at once on a server of max_connections 50: every query answered, the server's side bounded
    errors = asyncio.run(many_clients(ips, "reporting", PASSWORD, CLIENTS))
    assert errors == [], errors[:5]
    by_role = server_connections(ns)
    print(json.dumps({"server_connections_by_role": by_role}))
    assert 0 < by_role.get("reporting", 0) <= 2 * 8  # two pods' pools of defaultPoolSize

    _the_pooler_exporters_feed_the_dashboard(ns)
    _no_commit_lost_when_a_pooler_pod_goes(ns)
    _pgbench_side_by_side(ns)

    # without spec.pooler the pooler goes; its role stays (it owns the lookup function)
    kubectl("patch", "sampledb", NAME, "-n", ns, "--type", "json", "-p", json.dumps(
        [{"op": "remove", "path": "/spec/pooler"}]))
    wait_until(lambda: all(get_or_none(kind, POOLER, ns) is None
                           for kind in ("deployment", "service", "configmap", "poddisruptionbudget")),
               timeout=120, what="the pooler's children gone")
    wait_ready(NAME, ns, timeout=60)
