"""wait-ready.sh against a real server: ready at once, timeout against a dead port."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from subprocess import PIPE

import pytest
from pg_harness import PASSWORD, PgServer, ScriptRunner, free_port, private_dir

pytestmark = pytest.mark.postgres


def test_ready_server_reports_ready_with_json_result(runner: ScriptRunner, pg_server: PgServer) -> None:
    run = runner.run("wait-ready.sh", {**pg_server.libpq_env(), "WAIT_TIMEOUT": "10"})

    assert run.returncode == 0, run.stderr
    assert run.result["ok"] is True
    assert run.result["script"] == "wait-ready"
    assert run.result["ready"] is True


def test_unreachable_server_times_out_with_not_ready_code(runner: ScriptRunner) -> None:
    env = {"PGHOST": "127.0.0.1", "PGPORT": str(free_port()), "PGUSER": "postgres", "PGPASSWORD": PASSWORD}
    run = runner.run("wait-ready.sh", {**env, "WAIT_TIMEOUT": "1", "WAIT_INTERVAL": "0.2"})

    assert run.returncode == 5
    assert run.result["ok"] is False
    assert run.result["code"] == 5
    assert "not ready after 1s" in run.stderr.strip().splitlines()[-1]
    assert PASSWORD not in run.stdout + run.stderr


def test_result_is_last_stdout_line_without_result_file(runner: ScriptRunner, pg_server: PgServer) -> None:
    run = runner.run("wait-ready.sh", pg_server.libpq_env(), use_result_file=False)

    assert run.returncode == 0
    assert run.result["ready"] is True


def test_invalid_timeout_is_a_config_error(runner: ScriptRunner, pg_server: PgServer) -> None:
    run = runner.run("wait-ready.sh", {**pg_server.libpq_env(), "WAIT_TIMEOUT": "soon"})

    assert run.returncode == 2
    assert "WAIT_TIMEOUT" in run.result["message"]


def test_waits_for_a_server_that_starts_later(runner: ScriptRunner, pg_root: Path, pg_bindir: Path) -> None:
    base = private_dir(pg_root, prefix="late-")
    server = PgServer(bindir=pg_bindir, datadir=base / "data", sockdir=base)
    server.initdb()
    env = runner.environment({**server.libpq_env(), "WAIT_TIMEOUT": "60", "WAIT_INTERVAL": "0.2"})
    proc = subprocess.Popen(runner.command("wait-ready.sh"), env=env, stdout=PIPE, stderr=PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # blocks until the script reports its first failed attempt
        assert "waiting up to 60s for the server" in first
        server.start()
        out, _ = proc.communicate(timeout=90)
    finally:
        proc.kill()
        server.stop()

    assert proc.returncode == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ready"] is True
    assert result["attempts"] >= 2
