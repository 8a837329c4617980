"""The monitoring manifests say what the docs say: the PrometheusRule holds docs/metrics.md's alerts
(promtool accepts them and fires them when it should), the ServiceMonitor finds the metrics Service
and yields the job the rules select, and the Grafana dashboard asks only for exported metrics.

No cluster: the files are read as YAML/JSON (the monitoring.coreos.com CRDs are not on the test
cluster); tests/e2e/test_install.py renders them with kustomize and tests/e2e/test_dashboard.py runs
every panel's query against a real Prometheus.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
MONITORING = REPO / "manifests" / "components" / "monitoring"
DASHBOARD = MONITORING / "dashboards" / "sampledb-operator.json"
JOB = "sampledb-operator"


def docs_alert_groups() -> dict[str, Any]:
    text = (REPO / "docs" / "metrics.md").read_text()
    match = re.search(r"## Alerts\n\n```yaml\n(.*?)```", text, re.S)
    assert match, "docs/metrics.md has no ## Alerts yaml block"
    groups: dict[str, Any] = yaml.safe_load(match.group(1))
    return groups


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((MONITORING / name).read_text())
    return doc


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:   # Debian package `prometheus` (hack/bootstrap.sh installs it)
        pytest.skip("promtool is not installed")
    return path


def test_prometheus_rule_holds_exactly_the_documented_alerts() -> None:
    rule = load("prometheusrule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"] == docs_alert_groups()
    for r in rule["spec"]["groups"][0]["rules"]:
        assert r["labels"]["severity"] in {"critical", "warning"}, r["alert"]
        assert r["annotations"]["summary"], r["alert"]


def test_promtool_accepts_the_alert_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(load("prometheusrule.yaml")["spec"]))
    done = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(len(g["rules"]) for g in load("prometheusrule.yaml")["spec"]["groups"])
    assert count >= 27 and f"SUCCESS: {count} rules found" in done.stdout  # every rule read, none dropped


ARCHIVE_FAILING = ("WAL of a database cannot be archived to its object store; it piles up on the data volume and"
                   " recovery points stop (see the ContinuousArchiving condition).")
ARCHIVE_LAGGING = ("A database's oldest WAL segment waiting to be archived is more than 10 minutes old, so a lost"
                   " cluster would lose that much.")


VOLUME_FULL = ("A database's data volume is full and its server stopped (see the Degraded condition): grow"
               " spec.storage.size, or raise spec.storage.autoGrow.maximum.")
SLOT_RETAINING = ("An inactive replication slot keeps WAL on a primary's volume (a quarter of its size, or 4 GiB);"
                  " the volume fills unless its consumer comes back or the slot is dropped.")
AUTO_GROW_STOPPED = ("A database's data volume cannot grow by itself any more (StorageAutoGrowLimit): it is at"
                     " spec.storage.autoGrow.maximum or its class refuses to expand (see the Degraded condition).")


def promtool_test(tmp_path: Path, series: list[dict[str, str]], expected: list[dict[str, Any]]) -> None:
    """`promtool test rules` of the shipped rules: `series` sampled every minute, the `expected` alerts."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(load("prometheusrule.yaml")["spec"]))
    tests = tmp_path / "tests.yaml"
    tests.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": series, "alert_rule_test": expected}]}))
    done = subprocess.run([promtool(), "test", "rules", str(tests)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_fire_on_the_series_the_operator_exports(tmp_path: Path) -> None:
    """`promtool test rules`: a few alerts against synthetic series named as the operator names them."""
    promtool_test(tmp_path, [
        {"series": f'up{{job="{JOB}", instance="a"}}', "values": "0x20"},
        {"series": f'leader_election_master_status{{job="{JOB}", instance="a", name="sampledb-operator"}}',
         "values": "0x20"},
        {"series": f'sampledb_databases{{job="{JOB}", instance="a", phase="Degraded"}}', "values": "2x20"},
        {"series": f'sampledb_backups_total{{job="{JOB}", instance="a", reason="scheduled", result="failed"}}',
         "values": "0 0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1"},
        {"series": f'sampledb_database_condition{{job="{JOB}", instance="a", namespace="shop", name="orders",'
                   ' type="ContinuousArchiving", status="False", reason="ArchiveFailing"}',
         "values": "_ _ 1x20"},
        {"series": f'sampledb_archive_lag_seconds{{job="{JOB}", instance="a", namespace="shop",'
                   ' name="orders"}',
         "values": "0+60x20"},
        {"series": f'sampledb_database_condition{{job="{JOB}", instance="a", namespace="shop", name="full",'
                   ' type="Degraded", status="True", reason="VolumeFull"}',
         "values": "_ 1x20"},
        {"series": f'sampledb_database_condition{{job="{JOB}", instance="a", namespace="shop", name="big",'
                   ' type="Degraded", status="True", reason="StorageAutoGrowLimit"}',
         "values": "1x20"},
        {"series": f'sampledb_database_condition{{job="{JOB}", instance="a", namespace="shop", name="cdc",'
                   ' type="Degraded", status="True", reason="InactiveSlotRetainingWAL"}',
         "values": "_ _ 1x20"},
        {"series": f'sampledb_inactive_slot_retained_bytes{{job="{JOB}", instance="a", namespace="shop",'
                   ' name="big-wal", slot="cdc"}',
         "values": "0+1073741824x20"},
    ], [
        {"eval_time": "6m", "alertname": "SampleDBOperatorDown",
         "exp_alerts": [{"exp_labels": {"severity": "critical"},
                         "exp_annotations": {"summary": "No sampledb-operator replica is being scraped."}}]},
        {"eval_time": "3m", "alertname": "SampleDBOperatorNoLeader",
         "exp_alerts": [{"exp_labels": {"severity": "critical"},
                         "exp_annotations": {"summary": "No replica holds the leader Lease; nothing is "
                                                        "reconciling."}}]},
        {"eval_time": "10m", "alertname": "SampleDBDatabaseFailed", "exp_alerts": []},
        {"eval_time": "16m", "alertname": "SampleDBDatabaseFailed",
         "exp_alerts": [{"exp_labels": {"severity": "warning", "job": JOB, "instance": "a",
                                        "phase": "Degraded"},
                         "exp_annotations": {"summary": "2 SampleDB objects are Degraded."}}]},
        {"eval_time": "5m", "alertname": "SampleDBBackupFailing",
         "exp_alerts": [{"exp_labels": {"severity": "warning", "job": JOB, "instance": "a",
                                        "reason": "scheduled", "result": "failed"},
                         "exp_annotations": {"summary": "A scheduled backup failed in the last hour."}}]},
        {"eval_time": "6m", "alertname": "SampleDBArchiveFailing", "exp_alerts": []},
        {"eval_time": "8m", "alertname": "SampleDBArchiveFailing",
         "exp_alerts": [{"exp_labels": {"severity": "critical", "namespace": "shop", "name": "orders"},
                         "exp_annotations": {"summary": ARCHIVE_FAILING}}]},
        {"eval_time": "1m", "alertname": "SampleDBVolumeFull", "exp_alerts": []},
        {"eval_time": "3m", "alertname": "SampleDBVolumeFull",
         "exp_alerts": [{"exp_labels": {"severity": "critical", "namespace": "shop", "name": "full"},
                         "exp_annotations": {"summary": VOLUME_FULL}}]},
        {"eval_time": "6m", "alertname": "SampleDBStorageAutoGrowStopped",
         "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "shop", "name": "big",
                                        "reason": "StorageAutoGrowLimit"},
                         "exp_annotations": {"summary": AUTO_GROW_STOPPED}}]},
        {"eval_time": "6m", "alertname": "SampleDBInactiveSlotRetainingWAL", "exp_alerts": []},
        {"eval_time": "8m", "alertname": "SampleDBInactiveSlotRetainingWAL",
         "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "shop", "name": "cdc"},
                         "exp_annotations": {"summary": SLOT_RETAINING}}]},
        {"eval_time": "11m", "alertname": "SampleDBInactiveSlotRetainingWAL",  # over 4 GiB from 5m, for 5m
         "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "shop", "name": "big-wal"},
                         "exp_annotations": {"summary": SLOT_RETAINING}},
                        {"exp_labels": {"severity": "warning", "namespace": "shop", "name": "cdc"},
                         "exp_annotations": {"summary": SLOT_RETAINING}}]},
        {"eval_time": "14m", "alertname": "SampleDBArchiveLagging", "exp_alerts": []},
        {"eval_time": "16m", "alertname": "SampleDBArchiveLagging",
         "exp_alerts": [{"exp_labels": {"severity": "warning", "namespace": "shop", "name": "orders"},
                         "exp_annotations": {"summary": ARCHIVE_LAGGING}}]},
    ])


def test_service_monitor_selects_the_metrics_service_and_names_the_job_the_rules_use() -> None:
    monitor = load("servicemonitor.yaml")
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    docs = list(yaml.safe_load_all((REPO / "manifests" / "operator" / "deployment.yaml").read_text()))
    [service] = [d for d in docs if d["kind"] == "Service"]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]   # no namespaceSelector needed
    assert "namespaceSelector" not in monitor["spec"]
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert labels[monitor["spec"]["jobLabel"]] == JOB          # job="sampledb-operator", as the alerts expect
    [endpoint] = monitor["spec"]["endpoints"]
    [port] = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    assert endpoint["path"] == "/metrics"


def dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def test_dashboard_is_well_formed_and_every_panel_has_a_query() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "sampledb-operator"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
            assert {"x", "y", "w", "h"} <= p["gridPos"].keys()
    names = {v["name"] for v in dash["templating"]["list"]}
    assert names == {"datasource", "job", "namespace"}


def test_dashboard_queries_only_metrics_the_operator_documents() -> None:
    documented = set(re.findall(r"`([a-z_]+)`", (REPO / "docs" / "metrics.md").read_text()))
    for title, expr in dashboard_exprs():
        used = set(re.findall(r"\b((?:controller_runtime|workqueue|leader_election|rest_client|sampledb)_[a-z_]+)",
                              expr))
        assert used, (title, expr)
        for name in used:
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            assert base in documented, f"{title}: {name} is not in docs/metrics.md"
        assert 'job=~"$job"' in expr, (title, expr)


POSTGRES_DASHBOARD = MONITORING / "dashboards" / "sampledb-postgres.json"
POSTGRES_JOB = "sampledb-postgres"
POOLER_JOB = "sampledb-pooler"


def test_the_pod_monitors_select_the_database_and_pooler_pods_on_their_exporters_port() -> None:
    from sampledb_operator.decide.children import exporter
    from sampledb_operator.decide.children import pooler as dp
    from sampledb_operator.decide.children.desired_statefulset import statefulset
    from sampledb_operator.model.sampledb import SampleDB

    monitors = {m["metadata"]["name"]: m for m in yaml.safe_load_all((MONITORING / "podmonitor.yaml").read_text())}
    assert set(monitors) == {POSTGRES_JOB, POOLER_JOB}
    db = SampleDB.model_validate({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                  "metadata": {"name": "orders", "namespace": "shop", "uid": "u"},
                                  "spec": {"version": "16.4", "storage": {"size": "1Gi"}, "replicas": 2,
                                           "pooler": {"instances": 2, "readOnlyInstances": 1}}})
    templates = {POSTGRES_JOB: [statefulset(db, index=i)["spec"]["template"] for i in range(2)],
                 POOLER_JOB: [dp.deployment(db, ca=True, read_only=ro)["spec"]["template"] for ro in (False, True)]}
    for job, monitor in monitors.items():
        assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
        assert monitor["spec"]["namespaceSelector"] == {"any": True}  # databases live in the users' namespaces
        [endpoint] = monitor["spec"]["podMetricsEndpoints"]
        for template in templates[job]:
            assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
            ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
            assert endpoint["port"] == exporter.PORT_NAME and endpoint["port"] in ports
        for other in set(templates) - {job}:  # each selects its own pods only
            for template in templates[other]:
                assert not monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        relabel = {r["targetLabel"]: r for r in endpoint["relabelings"]}
        assert relabel["job"]["replacement"] == job
        assert relabel["name"]["sourceLabels"] == ["__meta_kubernetes_pod_label_sampledb_io_database"]
        assert relabel["instance"]["sourceLabels"] == ["__meta_kubernetes_pod_name"]


def postgres_dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(POSTGRES_DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]]


def test_the_postgres_dashboard_selects_the_exporters_job_and_documented_series() -> None:
    dash = json.loads(POSTGRES_DASHBOARD.read_text())
    assert dash["uid"] == POSTGRES_JOB
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "namespace", "database"}
    documented = set(re.findall(r"`([a-z_]+)`", (REPO / "docs" / "metrics.md").read_text()))
    for title, expr in postgres_dashboard_exprs():
        # the exporters' series, or the kubelets' volume statistics joined to the operator's instances
        assert (f'job="{POSTGRES_JOB}"' in expr or f'job="{POOLER_JOB}"' in expr
                or ("kubelet_volume_stats_" in expr and 'sampledb_instance_info{job="sampledb-operator"' in expr)), \
            (title, expr)
        assert 'name=~"$database"' in expr, (title, expr)
        used = set(re.findall(r"\b((?:pg|pgbouncer|kubelet_volume_stats|sampledb)_[a-z_]+)", expr))
        assert used and used <= documented, (title, used - documented)


ORDERS_0 = {"namespace": "shop", "name": "orders", "instance": "orders-0"}


def fired(at: str, alert: str, severity: str, labels: dict[str, str], summary: str) -> dict[str, Any]:
    """A `promtool test rules` case: `alert` firing once at `at` with these labels and summary."""
    return {"eval_time": at, "alertname": alert,
            "exp_alerts": [{"exp_labels": {"severity": severity, **labels}, "exp_annotations": {"summary": summary}}]}


def test_the_postgres_alerts_fire_on_the_exporters_series(tmp_path: Path) -> None:
    """`promtool test rules`: the per-instance alerts against series named as postgres_exporter names them, with
    the labels the PodMonitor gives."""
    target = f'job="{POSTGRES_JOB}", namespace="shop", name="orders", instance="orders-0"'
    promtool_test(tmp_path, [
        {"series": f"pg_up{{{target}}}", "values": "1 1 0x20"},
        {"series": f"up{{{target}}}", "values": "1x20"},
        {"series": f'pg_stat_activity_count{{{target}, datname="app", state="idle"}}', "values": "50x20"},
        {"series": f'pg_stat_activity_count{{{target}, datname="app", state="active"}}', "values": "45x20"},
        {"series": f"pg_settings_max_connections{{{target}}}", "values": "100x20"},
        {"series": f'pg_replication_slots_pg_wal_lsn_diff{{{target}, slot_name="cdc"}}',
         "values": "0+67108864x20"},
        {"series": f'pg_replication_slots_active{{{target}, slot_name="cdc"}}', "values": "0x20"},
        {"series": f'pg_replication_slots_pg_wal_lsn_diff{{{target}, slot_name="sdb_i1"}}',
         "values": "0+67108864x20"},
        {"series": f'pg_replication_slots_active{{{target}, slot_name="sdb_i1"}}', "values": "1x20"},
        {"series": f'pg_database_wraparound_age_datfrozenxid_seconds{{{target}, datname="app"}}',
         "values": "1100000000x30"},
        {"series": f"pg_long_running_transactions_oldest_timestamp_seconds{{{target}}}",
         "values": "3000+60x20"},
        {"series": f"pg_exporter_last_scrape_error{{{target}}}", "values": "0x20"},
        # the kubelet's statistics of orders-0's data claim (10 GiB, 1 GiB less free every minute), the claim of
        # a pod of another application beside it (never named), and the operator's instance series
        {"series": 'kubelet_volume_stats_capacity_bytes{job="kubelet", instance="10.0.0.7:10250", namespace="shop",'
                   ' persistentvolumeclaim="data-orders-0"}', "values": "10737418240x20"},
        {"series": 'kubelet_volume_stats_available_bytes{job="kubelet", instance="10.0.0.7:10250", namespace="shop",'
                   ' persistentvolumeclaim="data-orders-0"}', "values": "5368709120-1073741824x4 536870912x16"},
        {"series": 'kubelet_volume_stats_capacity_bytes{job="kubelet", instance="10.0.0.7:10250", namespace="shop",'
                   ' persistentvolumeclaim="data-cache-0"}', "values": "100x20"},
        {"series": 'kubelet_volume_stats_available_bytes{job="kubelet", instance="10.0.0.7:10250", namespace="shop",'
                   ' persistentvolumeclaim="data-cache-0"}', "values": "1x20"},
        {"series": 'sampledb_instance_info{job="sampledb-operator", namespace="shop", name="orders",'
                   ' instance="orders-0", role="primary"}', "values": "1x20"},
        {"series": 'sampledb_instance_info{job="sampledb-operator", namespace="shop", name="orders",'
                   ' instance="orders-1", role="replica"}', "values": "1x20"},
        {"series": f'pgbouncer_up{{job="{POOLER_JOB}", namespace="shop", name="orders",'
                   ' instance="orders-pooler-a"}', "values": "1x20"},
        {"series": f'up{{job="{POOLER_JOB}", namespace="shop", name="orders", instance="orders-pooler-a"}}',
         "values": "1 0x20"},
        {"series": f'pgbouncer_pools_client_maxwait_seconds{{job="{POOLER_JOB}", namespace="shop",'
                   ' name="orders", instance="orders-pooler-b", database="app", user="app"}',
         "values": "0 0 30x20"},
    ], [
        {"eval_time": "6m", "alertname": "SampleDBPostgresDown", "exp_alerts": []},
        fired("7m", "SampleDBPostgresDown", "critical", ORDERS_0,
              "The exporter beside shop/orders-0 cannot reach its PostgreSQL server, or is not"
              " answering itself."),
        fired("5m", "SampleDBConnectionsNearMax", "warning", ORDERS_0,
              "shop/orders-0 uses more than 90% of max_connections; new clients will be refused."),
        # over 256 MiB from 5m on (64 MiB a minute), then 5 minutes: the active slot never
        {"eval_time": "9m", "alertname": "SampleDBSlotInactive", "exp_alerts": []},
        fired("10m", "SampleDBSlotInactive", "warning", {**ORDERS_0, "slot_name": "cdc"},
              "The inactive replication slot cdc on shop/orders-0 keeps more than 256 MiB of WAL on its"
              " volume."),
        fired("15m", "SampleDBTransactionIDWraparound", "warning", {**ORDERS_0, "datname": "app"},
              "The database app of shop/orders is past half-way to transaction-ID wraparound; vacuum is"
              " not freezing it."),
        {"eval_time": "8m", "alertname": "SampleDBLongTransaction", "exp_alerts": []},
        fired("16m", "SampleDBLongTransaction", "warning", ORDERS_0,
              "A transaction on shop/orders-0 has been open for more than an hour; it holds back"
              " vacuum."),
        {"eval_time": "20m", "alertname": "SampleDBExporterQueriesFailing", "exp_alerts": []},
        # under 10% free from 5m on (0.5 GiB of 10), then 5 minutes; orders-1 has no statistics, cache-0 is not ours
        {"eval_time": "9m", "alertname": "SampleDBVolumeFillingUp", "exp_alerts": []},
        fired("10m", "SampleDBVolumeFillingUp", "warning", ORDERS_0,
              "The data volume of shop/orders-0 has less than 10% free (the kubelet's volume statistics);"
              " PostgreSQL stops when it is full."),
        {"eval_time": "5m", "alertname": "SampleDBPoolerDown", "exp_alerts": []},
        fired("6m", "SampleDBPoolerDown", "warning", {**ORDERS_0, "instance": "orders-pooler-a"},
              "The exporter beside the pooler pod shop/orders-pooler-a cannot read PgBouncer's"
              " statistics, or is not answering itself."),
        {"eval_time": "6m", "alertname": "SampleDBPoolerClientsWaiting", "exp_alerts": []},
        fired("7m", "SampleDBPoolerClientsWaiting", "warning", {**ORDERS_0, "instance": "orders-pooler-b"},
              "Clients of the pooler pod shop/orders-pooler-b wait more than 10 s for a server"
              " connection: spec.pooler.defaultPoolSize is too small for the load, or the server is"
              " slow."),
    ])
