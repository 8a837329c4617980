"""The Grafana dashboard's queries against a real Prometheus scraping the real operator.

After a database is made Ready, backed up and upgraded (kwok: its Jobs succeed without running),
every query of every panel of manifests/components/monitoring/dashboards/sampledb-operator.json (scraped as the
shipped ServiceMonitor has it scraped: its target labels, its honorLabels),
with Grafana's variables filled in, returns series; the per-database panels name that database.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, sampledb, status, wait_ready
from tests.support.kube import kubectl, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.prometheus import JOB, PrometheusServer, as_the_service_monitor_scrapes

pytestmark = pytest.mark.cluster

DASHBOARD = REPO / "manifests" / "components" / "monitoring" / "dashboards" / "sampledb-operator.json"


def panel_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def as_grafana_would(expr: str, namespace: str) -> str:
    """The query Grafana sends: its variables replaced ($namespace as one selected value)."""
    return (expr.replace("$__rate_interval", "1m").replace("$namespace", namespace).replace("$job", JOB))


def test_substitution_leaves_no_grafana_variable() -> None:
    for title, expr in panel_queries():
        assert "$" not in as_grafana_would(expr, "shop"), title


def test_every_panel_query_returns_data_from_prometheus_scraping_the_operator(kubeconfig: str,
                                                                              namespace: str) -> None:
    ns = namespace
    op = OperatorProcess(kubeconfig, "--namespaces", ns, "--workers", "2", "--leader-elect", "--lease-namespace", ns,
                         "--identity", "dash", "--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1",
                         "--recheck-period", "2")
    with op, PrometheusServer([target := f"127.0.0.1:{op.metrics_port}"],
                              **as_the_service_monitor_scrapes(target)) as prom:
        wait_until(prom.targets_up, timeout=30, what="Prometheus to scrape the operator")
        apply(sampledb("dash", ns, upgrade={"backupBeforeMinor": True}))
        wait_ready("dash", ns)
        apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
               "metadata": {"name": "dash-manual", "namespace": ns}, "spec": {"database": "dash"}})
        wait_until(lambda: (status("dash", ns).get("lastBackup") or {}).get("name") == "dash-manual", timeout=90,
                   what="status.lastBackup")
        kubectl("patch", "sampledb", "dash", "-n", ns, "--type=merge", "-p", '{"spec":{"version":"16.6"}}')
        wait_until(lambda: condition("dash", ns, "Upgrading").get("reason") == "UpgradeSucceeded", timeout=120,
                   what="the minor upgrade to finish")
        wait_until(lambda: status("dash", ns).get("phase") == "Running", timeout=60, what="phase Running")
        db = {"namespace": ns, "name": "dash"}

        def answers() -> list[tuple[str, str, list[dict[str, Any]]]] | None:
            got = [(title, q, prom.query(q)) for title, expr in panel_queries()
                   for q in [as_grafana_would(expr, ns)]]
            if not all(result for _, _, result in got):
                return None
            phases = [r["metric"] for title, _, result in got if title == "Phase of each database" for r in result]
            return got if phases == [{**db, "phase": "Running"}] else None   # scraped since it became Running

        try:
            results = wait_until(answers, timeout=60, interval=1, what="every panel query to return series")
        except AssertionError:
            for title, expr in panel_queries():
                q = as_grafana_would(expr, ns)
                print(f"{title}: {q} -> {prom.query(q)}")
            raise
        by_title: dict[str, list[dict[str, Any]]] = {}
        for title, _, result in results:
            by_title.setdefault(title, []).extend(result)

        [age] = by_title["Time since the last successful backup"]
        assert age["metric"] == db and 0 <= age["value"] < 300
        upgrade = [r["metric"] for r in by_title["Upgrade state"]]
        assert {**db, "status": "False", "reason": "UpgradeSucceeded"} in upgrade
        assert {**db, "version": "16.6", "current_version": "16.6"} in upgrade
