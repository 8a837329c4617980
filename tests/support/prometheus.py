"""A throwaway Prometheus server (Debian's /usr/bin/prometheus) for end-to-end tests of /metrics.

`PrometheusServer(targets).start()` writes a scrape config for the given host:port targets into a
temporary directory, starts Prometheus on a free loopback port with its TSDB in that directory,
and returns once /-/ready answers 200 (polled with a deadline, never a fixed sleep). `query()` runs
an instant PromQL query through the HTTP API (/api/v1/query) and returns the result vector;
`stop()` ends the process and removes the directory. hack/bootstrap.sh installs the package.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from tests.support.kube import wait_until

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
JOB = "sampledb-operator"
SERVICE_MONITOR = Path(__file__).resolve().parents[2] / "manifests/components/monitoring/servicemonitor.yaml"


def free_port() -> int:
    """A loopback port that was free a moment ago (the caller retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    """One Prometheus process scraping `targets` ("127.0.0.1:8080") every `scrape_interval`."""

    def __init__(self, targets: list[str], *, scrape_interval: str = "1s", job: str = JOB,
                 labels: dict[str, dict[str, str]] | None = None, rules: dict[str, Any] | None = None,
                 honor_labels: bool = False, extra_jobs: list[dict[str, Any]] | None = None) -> None:
        """`labels`: per target, the labels its series get (as a PodMonitor's or ServiceMonitor's relabelling
        would give them); `honor_labels`: a series' own labels win over those (a monitor's honorLabels);
        `rules`: a rule file's content (its `groups`), evaluated every scrape interval; `extra_jobs`: more
        scrape configs as Prometheus reads them (their targets are counted by targets_up too)."""
        self.targets = targets
        self.scrape_interval = scrape_interval
        self.job = job
        self.labels = labels or {}
        self.rules = rules
        self.honor_labels = honor_labels
        self.extra_jobs = extra_jobs or []
        self.dir = Path(tempfile.mkdtemp(prefix="sampledb-prometheus-"))
        self.log_path = self.dir / "prometheus.log"
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("Prometheus is not started")
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 60.0, attempts: int = 3) -> PrometheusServer:
        """Start and wait until /-/ready is 200; a port taken between choosing and binding is retried."""
        config = self.dir / "prometheus.yml"
        static = ([{"targets": [t], "labels": self.labels[t]} for t in self.targets] if self.labels
                  else [{"targets": self.targets}])
        settings: dict[str, Any] = {
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval,
                       "evaluation_interval": self.scrape_interval},
            "scrape_configs": [{"job_name": self.job, "static_configs": static, "honor_labels": self.honor_labels},
                               *self.extra_jobs],
        }
        if self.rules is not None:
            (self.dir / "rules.yml").write_text(yaml.safe_dump(self.rules))
            settings["rule_files"] = [str(self.dir / "rules.yml")]
        config.write_text(yaml.safe_dump(settings))
        for attempt in range(attempts):
            self.port = free_port()
            argv = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
            try:
                wait_until(self._ready, timeout=timeout, interval=0.1, what="Prometheus /-/ready")
                return self
            except _Exited:
                if attempt == attempts - 1 or "address already in use" not in self.log_text():
                    raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n"
                                         f"{self.log_text()[-4000:]}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise _Exited
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of a successful answer (fails the test otherwise)."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as err:
            raise AssertionError(f"Prometheus {path} {params}: HTTP {err.code}: {err.read()!r}") from None
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query; the result vector as [{"metric": {...labels}, "value": float}]."""
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        return [{"metric": r["metric"], "value": float(r["value"][1])} for r in data["result"]]

    def scalar(self, promql: str) -> float | None:
        """The value of a query that returns one series (None when it returns none)."""
        result = self.query(promql)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"])

    def targets_up(self) -> bool:
        """True once every target has been scraped successfully (health "up")."""
        active = self.api("targets", state="active")["activeTargets"]
        extra = sum(len(c["targets"]) for job in self.extra_jobs for c in job.get("static_configs", []))
        return len(active) == len(self.targets) + extra and all(t["health"] == "up" for t in active)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (SIGKILL after `timeout`), then remove the config, data and log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            if exc[0] is not None:
                print(self.log_text()[-4000:])
        self.stop()


class _Exited(Exception):
    """The Prometheus process ended while we waited for it to be ready."""


def promtool_check_metrics(exposition: str) -> subprocess.CompletedProcess[str]:
    """`promtool check metrics` with the exposition on stdin (exit 0: no problems found)."""
    return subprocess.run([PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, text=True,
                          timeout=60, check=False)


def dashboard_queries(path: Path, job: str) -> list[tuple[str, str]]:
    """(panel title, query) of a Grafana dashboard's panels that select `job`'s series."""
    dash = json.loads(path.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] if p["type"] != "row" for t in p["targets"]
            if f'job="{job}"' in t["expr"]]


def as_grafana_would(expr: str, **variables: str) -> str:
    """The query Grafana sends: $__rate_interval as 1m, each `$name` variable as one selected value."""
    expr = expr.replace("$__rate_interval", "1m")
    for name, value in sorted(variables.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(f"${name}", value)
    return expr


def as_the_service_monitor_scrapes(target: str) -> dict[str, Any]:
    """PrometheusServer's arguments for `target` scraped as the shipped ServiceMonitor has the Prometheus Operator
    scrape it: the target labels it adds (the operator's namespace, Service, pod, endpoint), its honorLabels."""
    [endpoint] = yaml.safe_load(SERVICE_MONITOR.read_text())["spec"]["endpoints"]
    return {"labels": {target: {"namespace": "sampledb-system", "service": "sampledb-operator",
                                "pod": "sampledb-operator-5d8f7c9b4-x2x7q", "endpoint": endpoint["port"]}},
            "honor_labels": bool(endpoint.get("honorLabels", False))}
