"""Running the real operator process against the test cluster, as a user would.

`OperatorProcess` starts `python -m sampledb_operator run` with JSON logs to a file, finds the
metrics and health ports it bound (port 0 = any free port) from its startup log line, waits for
/readyz, and stops it with SIGTERM (graceful) or SIGKILL (a crash). Metrics are read from its
/metrics endpoint, parsed with prometheus_client's parser. Logs go to $SAMPLEDB_OPERATOR_LOG_DIR
(LOG_DIR_ENV), which tests/conftest.py points under pytest's base temporary directory, so a failed
test's operator log stays there for the next runs to read while pytest removes those of older runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from tests.support.kube import wait_until

REPO = Path(__file__).resolve().parents[2]
LOG_DIR_ENV = "SAMPLEDB_OPERATOR_LOG_DIR"  # where the logs go; the system's temporary directory when unset


class OperatorProcess:
    """One operator process; use as a context manager or call start()/stop()."""

    def __init__(self, kubeconfig: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.args = args
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        log_dir = Path(os.environ.get(LOG_DIR_ENV) or tempfile.gettempdir())
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = Path(tempfile.mkstemp(prefix="sampledb-operator-", suffix=".log", dir=log_dir)[1])
        self.metrics_port: int | None = None
        self.health_port: int | None = None
        self._started_at = 0

    def start(self, *, wait_ready: bool = True, timeout: float = 60.0) -> OperatorProcess:
        argv = [sys.executable, "-m", "sampledb_operator", "run", "--kubeconfig", self.kubeconfig,
                "--metrics-bind", "127.0.0.1:0", "--health-bind", "127.0.0.1:0", "--log-format", "json",
                *self.args]
        # --test-hooks: the kwok stages fail the Jobs of SampleDBs annotated testing.sampledb.io/fail
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "SAMPLEDB_TEST_HOOKS": "true", **self.env}
        self._started_at = self.log_path.stat().st_size  # a restart's ports are in the lines after this
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        log.close()
        started = wait_until(self._startup_line, timeout=timeout, what="the operator's startup log line")
        self.metrics_port, self.health_port = int(started["metrics_port"]), int(started["health_port"])
        if wait_ready:
            wait_until(lambda: self.http_status("/readyz") == 200, timeout=timeout, what="/readyz 200")
        return self

    def _startup_line(self) -> dict[str, Any] | None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
        for line in self.log_lines(since=self._started_at):
            if line.get("event") == "operator starting":
                return line
        return None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_lines(self, since: int = 0) -> list[dict[str, Any]]:
        """The JSON log lines (from byte offset `since`)."""
        out = []
        with self.log_path.open("rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        for raw in text.splitlines():
            try:
                out.append(json.loads(raw))
            except ValueError:
                continue
        return out

    def http_status(self, path: str, port: int | None = None) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.health_port}{path}", timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
        except OSError:
            return None

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 when absent)."""
        total = 0.0
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def writes(self) -> float:
        """API requests that change something (POST, PUT, PATCH, DELETE), from rest_client_requests_total."""
        return sum(self.metric("rest_client_requests_total", method=m) for m in ("POST", "PUT", "PATCH", "DELETE"))

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL (a crash: no cleanup, the lease is not released)."""
        return self._signal(signal.SIGKILL, 30.0)

    def _signal(self, sig: int, timeout: float) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError(f"operator did not exit within {timeout}s of signal {sig}") from None
        return int(self.proc.returncode)

    def __enter__(self) -> OperatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.running:
            self.kill()


def elapsed_since(start: float) -> float:
    return time.monotonic() - start
