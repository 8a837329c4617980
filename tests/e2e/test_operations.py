"""Running the operator: a real Prometheus scrapes /metrics, promtool accepts the exposition,
/healthz and /readyz answer, logs are structured (JSON off a terminal, console on one) and carry the
reconcile keys but never a Secret's value, and SIGTERM during reconciles exits 0 within the deadline.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, wait_ready
from tests.support.kube import kubectl_json, wait_until
from tests.support.operator import REPO, OperatorProcess
from tests.support.prometheus import PrometheusServer, promtool_check_metrics

pytestmark = pytest.mark.cluster

LEASE_TIMINGS = ("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1")




def init_configmap(ns: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "db-init", "namespace": ns},
            "data": {"init.sql": "CREATE TABLE notes (id serial PRIMARY KEY, body text);"}}


def reconciles(op: OperatorProcess) -> float:
    return op.metric("controller_runtime_reconcile_total", controller="sampledb")


@contextlib.contextmanager
def running(op: OperatorProcess) -> Iterator[OperatorProcess]:
    """Start `op`; on the way out kill it if still running and print its log when the test failed."""
    op.start()
    try:
        yield op
    except BaseException:
        print(op.log_text()[-6000:])
        raise
    finally:
        if op.running:
            op.kill()


# -- metrics -----------------------------------------------------------------------------------


def test_prometheus_scrapes_controller_runtime_and_operator_metrics(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    op = OperatorProcess(kubeconfig, "--namespaces", ns, "--workers", "2", "--leader-elect", "--lease-namespace", ns,
                         "--lease-name", "metrics-lease", "--identity", "solo", *LEASE_TIMINGS)
    with running(op), PrometheusServer([f"127.0.0.1:{op.metrics_port}"]) as prom:
        wait_until(prom.targets_up, timeout=30, what="Prometheus to scrape the operator")
        apply(sampledb("metered", ns))
        wait_until(lambda: reconciles(op) >= 1, timeout=60, what="a reconcile of the SampleDB")

        total = 'sum(controller_runtime_reconcile_total{job="sampledb-operator",controller="sampledb"})'
        wait_until(lambda: (prom.scalar(total) or 0) >= 1, timeout=30, what=f"PromQL {total} >= 1")
        series = prom.query('controller_runtime_reconcile_total{controller="sampledb"}')
        by_result = {r["metric"]["result"] for r in series}
        assert by_result == {"success", "error", "requeue", "requeue_after"}   # pre-initialised series

        assert prom.scalar('leader_election_master_status{name="metrics-lease"}') == 1
        assert (prom.scalar('workqueue_adds_total{name="sampledb",controller="sampledb"}') or 0) >= 1
        assert prom.scalar('controller_runtime_max_concurrent_reconciles{controller="sampledb"}') == 2
        assert (prom.scalar('controller_runtime_reconcile_time_seconds_count{controller="sampledb"}') or 0) >= 1
        assert prom.query('workqueue_depth{name="sampledb"}')
        assert prom.scalar('sampledb_cache_objects{resource="sampledbs"}') == 1
        phases = {r["metric"]["phase"] for r in prom.query("sampledb_databases")}
        assert {"Pending", "Running", "Failed"} <= phases

        requests = prom.query("sum by (code, method) (rest_client_requests_total)")
        pairs = {(r["metric"].get("code"), r["metric"].get("method")) for r in requests}
        assert ("200", "GET") in pairs, pairs            # lists, the lease read
        assert any(method in ("POST", "PATCH") and code in ("200", "201") for code, method in pairs), pairs
        assert prom.scalar('up{job="sampledb-operator"}') == 1


def test_promtool_accepts_the_metrics_exposition(namespace: str, operator: OperatorProcess) -> None:
    apply(sampledb("linted", namespace))
    wait_until(lambda: reconciles(operator) >= 1, timeout=60, what="a reconcile")
    exposition = operator.metrics_text()
    for family in ("controller_runtime_reconcile_total", "workqueue_adds_total", "rest_client_requests_total",
                   "sampledb_cache_objects", "process_resident_memory_bytes"):
        assert f"# TYPE {family.removesuffix('_total')}" in exposition, family
    checked = promtool_check_metrics(exposition)
    assert checked.returncode == 0, f"promtool check metrics:\n{checked.stdout}{checked.stderr}"


# -- health and logs ---------------------------------------------------------------------------


def test_logs_are_json_off_a_terminal_with_reconcile_keys_and_no_secret_value(kubeconfig: str,
                                                                              namespace: str) -> None:
    ns = namespace
    # "auto" is the default: stdout is a file here, as in a pod, so the lines must be JSON.
    op = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--log-format", "auto")
    with running(op):
        assert op.http_status("/healthz") == 200
        assert op.http_status("/readyz") == 200
        apply([init_configmap(ns), sampledb("shop", ns, init={"configMapKeyRef": {"name": "db-init",
                                                                                   "key": "init.sql"}})])
        wait_ready("shop", ns)
        assert op.http_status("/healthz") == 200
        assert op.http_status("/readyz") == 200
        assert op.stop() == 0
        text = op.log_text()

    lines = [json.loads(raw) for raw in text.splitlines() if raw.strip()]   # every line is JSON
    for line in lines:
        assert {"timestamp", "level", "logger", "event"} <= line.keys(), line
        assert line["timestamp"].endswith("Z"), line
    reconcile_lines = [ln for ln in lines if ln["logger"].startswith("sampledb_operator.reconcilers")]
    assert any(ln["event"] == "applied child" for ln in reconcile_lines), reconcile_lines
    for line in reconcile_lines:
        assert line["controller"] == "sampledb", line
        assert (line["namespace"], line["name"]) == (ns, "shop"), line
        uuid.UUID(line["reconcile_id"])
        assert line["level"] in ("debug", "info", "warning", "error"), line
    assert lines[-1]["event"] == "operator stopped" and lines[-1]["exit_code"] == 0

    secret = kubectl_json("get", "secret", "shop-credentials", "-n", ns)
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert len(password) >= 16
    assert password not in text
    assert secret["data"]["password"] not in text
    assert base64.b64decode(secret["data"]["uri"]).decode() not in text


def test_logs_are_console_lines_on_a_terminal(kubeconfig: str, namespace: str) -> None:
    argv = [sys.executable, "-m", "sampledb_operator", "run", "--kubeconfig", kubeconfig, "--namespaces", namespace,
            "--no-leader-elect", "--metrics-bind", "127.0.0.1:0", "--health-bind", "127.0.0.1:0"]
    primary, secondary = os.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    os.close(secondary)
    seen = bytearray()
    try:
        def started() -> bool:
            if select.select([primary], [], [], 0.2)[0]:
                with contextlib.suppress(OSError):
                    seen.extend(os.read(primary, 65536))
            assert proc.poll() is None, seen.decode(errors="replace")
            return b"operator starting" in seen

        wait_until(started, timeout=60, interval=0, what="the startup line on the terminal")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(primary)
    line = next(ln for ln in seen.decode(errors="replace").splitlines() if "operator starting" in ln)
    assert not line.lstrip().startswith("{"), line
    assert "[info" in line and "identity=" in line, line


# -- graceful shutdown -------------------------------------------------------------------------


def test_sigterm_during_reconciles_stops_intake_lets_them_finish_and_exits_zero(kubeconfig: str,
                                                                                  namespace: str) -> None:
    ns = namespace
    names = [f"db{i}" for i in range(12)]
    apply([sampledb(name, ns) for name in names])   # a backlog: 2 workers are busy when SIGTERM lands
    op = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect", "--workers", "2",
                         "--shutdown-timeout", "10", "--log-level", "debug")
    with running(op):
        wait_until(lambda: any(ln.get("event") == "applied child" for ln in op.log_lines()), timeout=60,
                   what="reconciles writing children")
        sent = time.monotonic()
        rc = op.stop(timeout=20)
        took = time.monotonic() - sent
    assert rc == 0
    assert took < 10, f"exit took {took:.1f}s, more than the shutdown timeout"

    lines = op.log_lines()
    events = [ln["event"] for ln in lines]
    assert events[-1] == "operator stopped" and lines[-1]["exit_code"] == 0
    assert not [e for e in events if "cancelled" in e or "deadline" in e], events
    # every reconcile that started ended with an outcome (none was cut off) ...
    started = {ln["reconcile_id"] for ln in lines if "reconcile_id" in ln}
    ended = {ln["reconcile_id"] for ln in lines if str(ln["event"]).startswith(("reconcile done", "reconcile failed"))}
    assert started and started == ended, started - ended
    # ... including those in flight when the signal arrived, which finished after shutdown began ...
    stop_at = events.index("shutting down controllers")
    assert any(str(e).startswith("reconcile done") for e in events[stop_at:]), events[stop_at:]
    # ... while the keys still waiting were left to the next run (intake stopped at once)
    reconciled = {ln["name"] for ln in lines if "reconcile_id" in ln}
    assert reconciled < set(names), reconciled
