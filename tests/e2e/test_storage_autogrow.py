"""spec.storage.autoGrow on the real node: the data volume grows before PostgreSQL refuses a write, stops at its
maximum and says so while the database stays readable, and a full volume comes back once the maximum allows, with
every committed row (the local cluster's StorageClass `sized-local`: tmpfs volumes of the claim's size, grown in
place, local PVs of the real node). Meanwhile a real Prometheus scrapes the real node's kubelet (through the API server,
as kube-prometheus can) and the operator (as the shipped ServiceMonitor has it scraped): the dashboard's "Data
volume used" panel follows the volume, and the shipped SampleDBVolumeFillingUp expression names the full one."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from tests.e2e.conftest import apply, condition, sampledb, wait_ready
from tests.e2e.test_stuck_databases import degraded
from tests.e2e.test_stuck_volumes import volume_path, write_wal
from tests.support.cluster import Cluster
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.prometheus import (
    PrometheusServer,
    as_grafana_would,
    as_the_service_monitor_scrapes,
    dashboard_queries,
)

pytestmark = [pytest.mark.cluster, pytest.mark.local_only]
MI = 1024 * 1024
MONITORING = REPO / "manifests" / "components" / "monitoring"
REAL_NODE = "real-0"


def volume_alert_expr() -> str:
    rules = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())["spec"]["groups"]
    [expr] = [r["expr"] for g in rules for r in g["rules"] if r.get("alert") == "SampleDBVolumeFillingUp"]
    return str(expr)


def volume_panel(ns: str) -> str:
    [query] = [q for title, q in dashboard_queries(MONITORING / "dashboards" / "sampledb-postgres.json",
                                                   "sampledb-operator") if title == "Data volume used"]
    return as_grafana_would(query, namespace=ns, database="grow")


def prometheus(cluster: Cluster, op: OperatorProcess) -> PrometheusServer:
    """Prometheus scraping the operator and the real node's kubelet (through the API server's node proxy)."""
    assert cluster.state_dir is not None
    pki = cluster.state_dir / "pki"
    server = yaml.safe_load(Path(cluster.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    kubelet: dict[str, Any] = {
        "job_name": "kubelet", "scheme": "https", "honor_labels": True, "scrape_interval": "5s",
        "scrape_timeout": "5s", "metrics_path": f"/api/v1/nodes/{REAL_NODE}/proxy/metrics",
        "tls_config": {"ca_file": str(pki / "ca.crt"), "cert_file": str(pki / "admin.crt"),
                       "key_file": str(pki / "admin.key")},
        "static_configs": [{"targets": [urlsplit(server).netloc]}]}
    target = f"127.0.0.1:{op.metrics_port}"
    return PrometheusServer([target], extra_jobs=[kubelet], **as_the_service_monitor_scrapes(target))


def psql(ns: str, statement: str) -> str:
    out = kubectl("exec", "-n", ns, "grow-0", "-c", "postgres", "--", "psql", "-X", "-v", "ON_ERROR_STOP=1",
                  "-U", "postgres", "-d", "app", "-qAt", "-c", statement)
    return str(out.stdout).strip()


def used_percent(path: Path) -> float:
    fields = subprocess.run(["df", "-P", "-B1", str(path)], capture_output=True, text=True, check=True,
                            timeout=10).stdout.splitlines()[-1].split()
    return 100.0 * int(fields[2]) / int(fields[1])


def volume_size(path: Path) -> int:
    return int(subprocess.run(["df", "-P", "-B1", str(path)], capture_output=True, text=True, check=True,
                              timeout=10).stdout.splitlines()[-1].split()[1])


def request(ns: str) -> str:
    return str(kubectl_json("get", "pvc", "data-grow-0", "-n", ns)["spec"]["resources"]["requests"]["storage"])


def capacity(ns: str) -> str:
    return str(((kubectl_json("get", "pvc", "data-grow-0", "-n", ns).get("status") or {}).get("capacity") or {})
               .get("storage"))


def postgres_started(ns: str) -> float | None:
    """When grow-0's server container last started (epoch seconds), once it runs and is ready; None before."""
    got = kubectl("get", "pod", "grow-0", "-n", ns, "-o", "json", "--ignore-not-found", check=False).stdout
    pod = json.loads(got) if got.strip() else {}
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        running = (cs.get("state") or {}).get("running") or {}
        if cs.get("name") == "postgres" and cs.get("ready") and running.get("startedAt"):
            return datetime.fromisoformat(str(running["startedAt"]).replace("Z", "+00:00")).timestamp()
    return None


def write_until(ns: str, path: Path, percent: float, batch: int) -> int:
    """Insert batches of ~1 KB rows until the volume is used past `percent`; returns the batch number reached."""
    while used_percent(path) < percent:
        batch += 1
        psql(ns, f"INSERT INTO filler SELECT g, {batch}, repeat('x', 1000) FROM generate_series(1, 2000) g")
        psql(ns, "CHECKPOINT")
    return batch


def test_the_volume_grows_before_it_fills_stops_at_its_maximum_and_a_full_one_comes_back(
        cluster: Cluster, real_namespace: str, real_operator: OperatorProcess) -> None:
    with prometheus(cluster, real_operator) as prom:
        grows_stops_and_comes_back(real_namespace, prom)


def grows_stops_and_comes_back(ns: str, prom: PrometheusServer) -> None:
    auto = {"thresholdPercent": 60, "stepPercent": 50, "maximum": "192Mi"}
    apply(sampledb("grow", ns, version="15.20",
                   storage={"size": "128Mi", "storageClassName": "sized-local", "autoGrow": auto}))
    wait_ready("grow", ns, timeout=240)
    psql(ns, "CREATE TABLE filler (id int, batch int, pad text)")
    path = volume_path(ns, "grow")
    assert volume_size(path) == 128 * MI

    # past the threshold, nothing written meanwhile: the claim and the file system grow by the step
    batch = write_until(ns, path, 62, 0)
    wait_until(lambda: request(ns) == "192Mi" and volume_size(path) == 192 * MI, timeout=90,
               what="the data volume grown from 128Mi to 192Mi")
    events = kubectl_json("get", "events", "-n", ns, "--field-selector",
                          "involvedObject.name=grow,involvedObject.kind=SampleDB")["items"]
    assert any(e["reason"] == "StorageAutoGrown" and "growing from 128Mi to 192Mi" in e["message"] for e in events)
    rows = int(psql(ns, "SELECT count(*) FROM filler"))
    assert rows == batch * 2000  # no write was refused

    # the kubelet's statistics of the grown volume, joined to the database's instance by the dashboard's panel
    claim = f'namespace="{ns}", persistentvolumeclaim="data-grow-0"'
    wait_until(lambda: prom.scalar(f"kubelet_volume_stats_capacity_bytes{{{claim}}}") == 192 * MI, timeout=90,
               what="the kubelet's statistics of the grown volume in Prometheus")

    def panel_matches_df() -> bool:
        [series] = prom.query(volume_panel(ns)) or [{"metric": {}, "value": -1.0}]
        return (series["metric"] == {"namespace": ns, "instance": "grow-0"}
                and abs(series["value"] - used_percent(path) / 100) < 0.05)
    wait_until(panel_matches_df, timeout=60, what="the panel to show the share df shows")
    assert not prom.query(volume_alert_expr()), "the alert's condition holds at 40% used"

    # at the maximum: said, and the database stays readable
    batch = write_until(ns, path, 62, batch)
    cond = degraded("grow", ns, "StorageAutoGrowLimit", timeout=90)
    assert "autoGrow.maximum (192Mi)" in cond["message"]
    assert int(psql(ns, "SELECT count(*) FROM filler")) == batch * 2000
    assert request(ns) == "192Mi"

    # full: PostgreSQL stops; a higher maximum brings it back with every committed row
    committed = batch * 2000
    subprocess.run(["dd", "if=/dev/zero", f"of={path / 'filler'}", "bs=1M"], capture_output=True, check=False,
                   timeout=120)
    write_wal(ns, "grow")
    degraded("grow", ns, "VolumeFull", timeout=180)
    full = wait_until(lambda: prom.query(volume_alert_expr()), timeout=90,
                      what="the SampleDBVolumeFillingUp condition on the full volume")
    assert [r["metric"] for r in full] == [{"namespace": ns, "name": "grow", "instance": "grow-0"}]
    assert full[0]["value"] < 0.1
    # a backup asked for now waits, saying why (the running one the operator would stop: tests/unit)
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup",
           "metadata": {"name": "while-full", "namespace": ns}, "spec": {"database": "grow"}})
    waiting = wait_until(lambda: (m := str((kubectl_json("get", "sampledbbackup", "while-full", "-n", ns)
                                            .get("status") or {}).get("message", ""))) and "is full" in m and m,
                         timeout=60, what="the backup waiting for the full volume")
    assert "grow-0" in waiting and "spec.storage.size" in waiting, waiting
    kubectl("delete", "sampledbbackup", "while-full", "-n", ns)
    kubectl("patch", "sampledb", "grow", "-n", ns, "--type", "merge", "-p",
            '{"spec": {"storage": {"autoGrow": {"maximum": "512Mi"}}}}')
    # step by step, each measured on the grown volume: 192Mi full -> 288Mi (two thirds used) -> 432Mi (under 60%)
    grown_at = wait_until(lambda: capacity(ns) in ("288Mi", "432Mi") and time.time(), timeout=120,
                          what="the full volume grown by the step")
    # the pod that stopped starts again at once on the grown volume (the operator deletes it: Event
    # RestartedOnGrownVolume), not after the kubelet's crash-loop back-off, over a minute by now (should that back-off
    # end between the growth and the operator's look, the kubelet starts it first: as soon, without the Event)
    started = wait_until(lambda: postgres_started(ns), timeout=120, what="the server started on the grown volume")
    assert started - grown_at < 45, f"started {started - grown_at:.0f} s after the volume grew"
    wait_until(lambda: request(ns) == "432Mi", timeout=240, what="the volume grown a second time, measured")
    wait_ready("grow", ns, timeout=240)
    assert int(psql(ns, "SELECT count(*) FROM filler")) == committed
    assert condition("grow", ns, "Degraded").get("status") == "False"
    events = kubectl_json("get", "events", "-n", ns, "--field-selector",
                          "involvedObject.name=grow,involvedObject.kind=SampleDB")["items"]
    restarted = [e["message"] for e in events if e["reason"] == "RestartedOnGrownVolume"]
    assert all(m.startswith("pod grow-0 ") for m in restarted), restarted
    grown = [e["message"] for e in events if e["reason"] == "StorageAutoGrown"]
    assert any("full: growing from 192Mi to 288Mi" in m for m in grown), grown
    assert request(ns) == "432Mi"  # one growth per crash: never past the measured need
