"""spec.monitoring on the real node: a real Prometheus scrapes the postgres_exporter beside every instance of a
3-instance database, every query of the sampledb-postgres dashboard returns that database's series, the shipped
per-instance alert rules evaluate on them (an inactive replication slot is named, the standbys' active slots are
not), a custom query from a ConfigMap is served, the exporter's role reads statistics but no table, and turned off the
exporter leaves every pod. The exporter's memory and CPU under scraping are printed for docs/benchmarks.md.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import psycopg
import pytest
import yaml
from tests.e2e.conftest import apply, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.prometheus import PrometheusServer, as_grafana_would, dashboard_queries

from sampledb_operator.model import names
from sampledb_operator.model.monitoring import EXPORTER_PORT, MONITOR_ROLE

pytestmark = pytest.mark.cluster
NAME = "watched"
JOB = "sampledb-postgres"
MONITORING = REPO / "manifests" / "components" / "monitoring"
DASHBOARD = MONITORING / "dashboards" / "sampledb-postgres.json"
QUERIES = {"sampledb_waiting": {
    "query": "SELECT count(*) AS sessions FROM pg_catalog.pg_stat_activity WHERE wait_event_type = 'Lock'",
    "metrics": [{"sessions": {"usage": "GAUGE", "description": "Sessions waiting on a lock"}}]}}
MIB = 1024 * 1024


def instance_pods(ns: str) -> list[dict[str, Any]]:
    pods = kubectl_json("get", "pods", "-n", ns, "-l", f"sampledb.io/database={NAME}")["items"]
    return sorted((p for p in pods if not p["metadata"].get("deletionTimestamp")), key=lambda p: p["metadata"]["name"])


def primary_connection(ns: str) -> psycopg.Connection[Any]:
    """The primary, as its superuser (the test makes a replication slot and switches WAL files)."""
    [pod] = [p for p in instance_pods(ns) if p["metadata"]["labels"].get("sampledb.io/role") == "primary"]
    secret = kubectl_json("get", "secret", names.superuser_secret_name(NAME), "-n", ns)["data"]
    user, password = (base64.b64decode(secret[key]).decode() for key in ("username", "password"))
    return psycopg.connect(host=pod["status"]["podIP"], port=5432, dbname="app", user=user, password=password,
                           connect_timeout=10, autocommit=True)


def panel_queries() -> list[tuple[str, str]]:
    return dashboard_queries(DASHBOARD, JOB)


def as_grafana(expr: str, ns: str) -> str:
    return as_grafana_would(expr, namespace=ns, database=NAME)


def postgres_rules(slot_threshold: str) -> dict[str, Any]:
    """The shipped per-instance group, the inactive slot's threshold lowered (a test writes megabytes, not
    256 MiB, of WAL; promtool's test in tests/unit checks the threshold itself)."""
    spec = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())["spec"]
    [group] = [g for g in spec["groups"] if g["name"] == JOB]
    for rule in group["rules"]:
        if rule["alert"] == "SampleDBSlotInactive":
            assert "> 256 * 1024 * 1024" in rule["expr"]
            rule["expr"] = rule["expr"].replace("> 256 * 1024 * 1024", f"> {slot_threshold}")
    return {"groups": [group]}


def exporter_usage(ns: str) -> dict[str, tuple[int, int]]:
    """Per pod: the exporter container's (working set bytes, CPU nanocores) from the kubelet's summary."""
    pods = instance_pods(ns)
    nodes = {p["spec"]["nodeName"] for p in pods}
    out: dict[str, tuple[int, int]] = {}
    for node in nodes:
        summary = json.loads(kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary").stdout)
        for pod in summary.get("pods", []):
            if pod["podRef"]["namespace"] != ns:
                continue
            for c in pod.get("containers", []):
                if c["name"] == "exporter" and "workingSetBytes" in c.get("memory", {}):
                    out[pod["podRef"]["name"]] = (int(c["memory"]["workingSetBytes"]),
                                                  int(c.get("cpu", {}).get("usageNanoCores", 0)))
    return out


def test_prometheus_scrapes_every_instance_and_the_dashboard_and_alerts_work_on_real_series(
        real_namespace: str, real_operator: OperatorProcess) -> None:
    ns = real_namespace
    apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched-metrics", "namespace": ns},
           "data": {"queries.yaml": yaml.safe_dump(QUERIES)}})
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": NAME, "namespace": ns},
           "spec": {"version": "15.20", "storage": {"size": "512Mi"}, "replicas": 3,
                    "monitoring": {"customQueries": {"name": "watched-metrics", "key": "queries.yaml"}}}})
    wait_ready(NAME, ns, timeout=420)
    wait_until(lambda: len([i for i in status(NAME, ns).get("instances") or [] if i.get("ready")]) == 3,
               timeout=300, what="three ready instances")
    wait_until(lambda: status(NAME, ns).get("monitoringApplied"), timeout=120, what="the exporters' role made")
    pods = instance_pods(ns)
    assert len(pods) == 3
    targets = {f"{p['status']['podIP']}:{EXPORTER_PORT}": {"namespace": ns, "name": NAME,
                                                         "instance": p["metadata"]["name"]} for p in pods}

    with primary_connection(ns) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text)")
        conn.execute("INSERT INTO orders SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g")
        rolsuper, can_read = conn.execute(
            "SELECT rolsuper, has_table_privilege(%s, 'orders', 'SELECT') FROM pg_roles WHERE rolname = %s",
            (MONITOR_ROLE, MONITOR_ROLE)).fetchone() or (None, None)
        assert (rolsuper, can_read) == (False, False)  # statistics, not data
        conn.execute("SELECT pg_create_physical_replication_slot('cdc', true)")
        for _ in range(3):  # WAL the inactive slot keeps
            conn.execute("INSERT INTO orders SELECT g, repeat('y', 200) FROM generate_series(20001, 30000) g"
                         " ON CONFLICT (id) DO UPDATE SET note = excluded.note")
            conn.execute("SELECT pg_switch_wal()")

    with PrometheusServer(list(targets), job=JOB, labels=targets, rules=postgres_rules(f"{MIB}")) as prom:
        wait_until(prom.targets_up, timeout=60, what="Prometheus to scrape the three exporters")
        up = wait_until(lambda: (r := prom.query(f'pg_up{{job="{JOB}"}} == 1')) and len(r) == 3 and r, timeout=90,
                        what="pg_up 1 on every instance")
        assert sorted(r["metric"]["instance"] for r in up) == [p["metadata"]["name"] for p in pods]
        replicas = {r["metric"]["instance"]: r["value"]
                    for r in prom.query(f'pg_replication_is_replica{{job="{JOB}"}}')}
        assert sorted(replicas.values()) == [0.0, 1.0, 1.0]  # one primary, two standbys

        def answers() -> list[tuple[str, str, list[dict[str, Any]]]] | None:
            got = [(title, q, prom.query(q)) for title, expr in panel_queries() for q in [as_grafana(expr, ns)]]
            return got if all(result for _, _, result in got) else None

        try:
            results = wait_until(answers, timeout=90, interval=1, what="every dashboard query to return series")
        except AssertionError:
            for title, expr in panel_queries():
                q = as_grafana(expr, ns)
                print(f"{title}: {q} -> {prom.query(q)}")
            raise
        for title, _, result in results:
            assert all(r["metric"].get("namespace") == ns for r in result), title
        tables = [r["metric"]["relname"] for t, _, result in results if t == "Largest tables" for r in result]
        assert "orders" in tables

        def slot_alert() -> list[dict[str, Any]]:
            return prom.query('ALERTS{alertname="SampleDBSlotInactive"}')

        alerts = wait_until(slot_alert, timeout=60, what="the inactive slot's alert to be pending")
        assert {(a["metric"]["slot_name"], a["metric"]["alertstate"]) for a in alerts} == {("cdc", "pending")}
        assert not prom.query('ALERTS{alertname=~"SampleDBPostgresDown|SampleDBExporterQueriesFailing"}')
        custom = wait_until(lambda: prom.query(f'sampledb_waiting_sessions{{job="{JOB}"}}'), timeout=60,
                            what="the custom query's metric")
        assert len(custom) == 3

        samples = wait_until(lambda: (u := exporter_usage(ns)) and len(u) == 3 and u, timeout=60,
                             what="the kubelet's figures of the three exporters")
        for pod, (memory, cpu) in sorted(samples.items()):
            print(f"exporter {pod}: working set {memory / MIB:.1f} MiB, CPU {cpu / 1e6:.1f} millicores"
                  " (scraped every second)")
            assert memory < 64 * MIB, (pod, memory)

    with primary_connection(ns) as conn:  # the exporter logs in over the socket as its role, nothing else
        rows = conn.execute("SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name ="
                            " 'sampledb-exporter'").fetchall()
        assert rows in ([], [(MONITOR_ROLE,)])
    logs = kubectl("logs", "-n", ns, pods[0]["metadata"]["name"], "-c", "exporter").stdout
    assert not re.search(r"password authentication failed|permission denied", logs), logs[-2000:]

    _monitoring_off_leaves_every_pod(ns)


def _monitoring_off_leaves_every_pod(ns: str) -> None:
    """spec.monitoring.enabled false: the exporter leaves every instance's pod template (the server-side apply
    drops the container the operator's field manager had set), and the database is Ready again."""
    kubectl("patch", "sampledb", NAME, "-n", ns, "--type=merge", "-p", '{"spec":{"monitoring":{"enabled":false}}}')

    def one_container_everywhere() -> bool:
        sets = kubectl_json("get", "statefulsets", "-n", ns, "-l", f"sampledb.io/database={NAME}")["items"]
        pods = instance_pods(ns)
        return len(sets) == 3 and len(pods) == 3 and all(
            [c["name"] for c in s["spec"]["template"]["spec"]["containers"]] == ["postgres"] for s in sets) and all(
            [c["name"] for c in p["spec"]["containers"]] == ["postgres"] for p in pods)

    wait_until(one_container_everywhere, timeout=420, interval=2, what="every instance without its exporter")
    wait_ready(NAME, ns, timeout=300)
