"""The server's postgresql.conf outside PGDATA (decide/children/pgconfig.py), and reload.sh, on real 15 and 18.

The database container runs `postgres -c config_file=/etc/sampledb/postgresql.conf` with PGDATA as
the configuration directory: data_directory, hba_file and ident_file must stay in PGDATA, PGDATA's
own postgresql.conf must be read first and the parameters after it. reload.sh must wait until the
server's copy of the file is the Job's, then apply it without a restart.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pg_harness import PASSWORD, PgServer, ScriptRunner, as_postgres, bindir_for, installed_majors, os_user, private_dir

from sampledb_operator.decide.children import pgconfig
from sampledb_operator.model import hba
from sampledb_operator.model.hba import HbaRule

pytestmark = pytest.mark.postgres
MAJORS = [m for m in (15, 18) if m in installed_majors()]


class ConfServer(PgServer):
    """A server started the way the StatefulSet starts it: config_file outside PGDATA."""

    conf: Path

    def start(self) -> None:
        self.logfile = self.sockdir / "server.log"
        options = (f"-c config_file={self.conf} -c port={self.port} -c listen_addresses=127.0.0.1"
                   f" -c unix_socket_directories={self.sockdir} -c fsync=off")
        as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.logfile), "-W",
                     "-o", options, "start"])
        self.wait_ready()


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    user = os_user()
    os.chown(path, user.pw_uid, user.pw_gid)


@pytest.fixture(params=MAJORS, ids=lambda m: f"pg{m}")
def conf_server(request: pytest.FixtureRequest, pg_root: Path) -> Iterator[ConfServer]:
    bindir = bindir_for(request.param)
    assert bindir is not None
    base = private_dir(pg_root, prefix="conf-")
    server = ConfServer(bindir=bindir, datadir=base / "data", sockdir=base)
    server.initdb()
    config_dir = private_dir(base, prefix="etc-")
    server.conf = config_dir / pgconfig.CONFIG_KEY
    with (server.datadir / "postgresql.conf").open("a") as own:  # PGDATA's file: read, and overridden
        own.write("statement_timeout = 1234\nwork_mem = '1MB'\n")
    write(config_dir / pgconfig.HBA_KEY, pgconfig.HBA)
    write(server.conf, pgconfig.render({"work_mem": "5MB", "application_name": "it's a \\ test"},
                                       str(server.datadir), hba_file=str(config_dir / pgconfig.HBA_KEY)))
    server.start()
    yield server
    server.stop()


def show(server: PgServer, name: str) -> str:
    with server.connect() as conn:
        row = conn.execute(f"SHOW {name}").fetchone()
        assert row is not None
        return str(row[0])


def test_a_config_file_outside_pgdata_reads_the_operators_hba_file_and_pgdatas_ident_file(
        conf_server: ConfServer) -> None:
    data = str(conf_server.datadir)
    assert show(conf_server, "config_file") == str(conf_server.conf)
    assert show(conf_server, "data_directory") == data
    assert show(conf_server, "hba_file") == str(conf_server.conf.parent / pgconfig.HBA_KEY)  # replication allowed
    assert show(conf_server, "ident_file") == f"{data}/pg_ident.conf"
    assert show(conf_server, "statement_timeout") == "1234ms"  # PGDATA's own file is included
    assert show(conf_server, "work_mem") == "5MB"  # and the parameters come after it
    assert show(conf_server, "application_name") != ""  # a client's setting wins; the file's default:
    with conf_server.connect() as conn:
        row = conn.execute("SELECT reset_val FROM pg_settings WHERE name = 'application_name'").fetchone()
    assert row is not None and row[0] == "it's a \\ test"  # quotes and backslashes kept exactly



def test_reload_waits_for_the_servers_copy_then_applies_it_without_a_restart(
        runner: ScriptRunner, conf_server: ConfServer, work_dir: Path) -> None:
    new = pgconfig.render({"work_mem": "16MB", "application_name": "x"}, str(conf_server.datadir),
                          hba_file=str(conf_server.conf.parent / pgconfig.HBA_KEY))
    job_copy = work_dir / "job-postgresql.conf"
    write(job_copy, new)
    with conf_server.connect() as conn:
        started = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    timer = threading.Timer(3.0, write, (conf_server.conf, new))  # the kubelet updates the mount later
    timer.start()
    try:
        run = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_copy),
                                       "RELOAD_INTERVAL": "1"}, bindir=conf_server.bindir)
    finally:
        timer.join()
    assert run.returncode == 0, run.stderr
    assert run.result["ok"] is True and run.result["reloaded"] is True
    assert run.result["waited_seconds"] >= 2
    assert run.result["pending_restart"] == []
    assert show(conf_server, "work_mem") == "16MB"
    with conf_server.connect() as conn:
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone() == started  # no restart
    assert PASSWORD not in run.stdout + run.stderr

    again = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_copy)},
                       bindir=conf_server.bindir)
    # already the server's copy: no wait for an interval (RELOAD_INTERVAL defaults to 2 s); waited_seconds is
    # bash's whole-second SECONDS, so a first check that crosses a second boundary under load reads 1
    assert again.returncode == 0 and again.result["waited_seconds"] < 2


def test_a_postmaster_setting_is_reported_as_pending_restart(
        runner: ScriptRunner, conf_server: ConfServer, work_dir: Path) -> None:
    new = pgconfig.render({"work_mem": "8MB", "max_connections": "57"}, str(conf_server.datadir),
                          hba_file=str(conf_server.conf.parent / pgconfig.HBA_KEY))
    job_copy = work_dir / "job-postgresql.conf"
    write(job_copy, new)
    write(conf_server.conf, new)
    run = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_copy)},
                     bindir=conf_server.bindir)
    assert run.returncode == 0, run.stderr
    assert run.result["pending_restart"] == ["max_connections"]
    assert show(conf_server, "work_mem") == "8MB"
    assert show(conf_server, "max_connections") != "57"


def test_an_invalid_value_is_refused_and_nothing_is_reloaded(
        runner: ScriptRunner, conf_server: ConfServer, work_dir: Path) -> None:
    new = pgconfig.render({"work_mem": "lots"}, str(conf_server.datadir),
                          hba_file=str(conf_server.conf.parent / pgconfig.HBA_KEY))
    job_copy = work_dir / "job-postgresql.conf"
    write(job_copy, new)
    write(conf_server.conf, new)
    run = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_copy)},
                     bindir=conf_server.bindir)
    assert run.returncode == 2, run.stderr
    assert "work_mem" in run.result["message"] and run.result["reloaded"] is False
    assert show(conf_server, "work_mem") == "5MB"


def test_a_file_that_never_arrives_times_out(runner: ScriptRunner, conf_server: ConfServer, work_dir: Path) -> None:
    job_copy = work_dir / "job-postgresql.conf"
    write(job_copy, pgconfig.render({"work_mem": "9MB"}, str(conf_server.datadir),
                          hba_file=str(conf_server.conf.parent / pgconfig.HBA_KEY)))
    run = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_copy), "RELOAD_TIMEOUT": "2",
                                   "RELOAD_INTERVAL": "1"}, bindir=conf_server.bindir)
    assert run.returncode == 5, run.stderr
    assert run.result["reloaded"] is False
    assert show(conf_server, "work_mem") == "5MB"


def _hba_with(rules: list[HbaRule]) -> str:
    return pgconfig.hba(rules=[hba.line(r) for r in rules])


def _connects_as(server: ConfServer, user: str, password: str) -> str | None:
    """None when `user` logs in over TCP, else the server's refusal."""
    try:
        with psycopg.connect(host="127.0.0.1", port=server.port, user=user, password=password, dbname="postgres",
                             connect_timeout=10):
            return None
    except psycopg.OperationalError as exc:
        return str(exc)


def test_access_rules_wait_for_the_servers_copy_then_apply_without_a_restart(
        runner: ScriptRunner, conf_server: ConfServer, work_dir: Path) -> None:
    with conf_server.connect() as conn:
        conn.execute("CREATE ROLE reporting LOGIN PASSWORD 'r3port'")
        started = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert _connects_as(conf_server, "reporting", "r3port") is None
    hba_file = conf_server.conf.parent / pgconfig.HBA_KEY
    new = _hba_with([HbaRule(type="host", users=["reporting"], address="127.0.0.0/8", method="reject")])
    job_conf, job_hba = work_dir / "job-postgresql.conf", work_dir / "job-pg_hba.conf"
    write(job_conf, conf_server.conf.read_text())  # postgresql.conf unchanged: only the rules differ
    write(job_hba, new)
    timer = threading.Timer(3.0, write, (hba_file, new))  # the kubelet updates the mount later
    timer.start()
    try:
        run = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_conf),
                                       "HBA_FILE": str(job_hba), "RELOAD_INTERVAL": "1"}, bindir=conf_server.bindir)
    finally:
        timer.join()
    assert run.returncode == 0, run.stderr
    assert run.result["reloaded"] is True and run.result["waited_seconds"] >= 2
    refusal = _connects_as(conf_server, "reporting", "r3port")
    assert refusal is not None and "pg_hba.conf rejects connection" in refusal
    assert _connects_as(conf_server, "postgres", PASSWORD) is None  # the other roles: the default rule
    with conf_server.connect() as conn:
        assert conn.execute("SELECT pg_postmaster_start_time()").fetchone() == started  # no restart


def test_access_rules_the_server_cannot_parse_are_refused_and_nothing_is_reloaded(
        runner: ScriptRunner, conf_server: ConfServer, work_dir: Path) -> None:
    with conf_server.connect() as conn:
        loaded = conn.execute("SELECT pg_conf_load_time()").fetchone()
    hba_file = conf_server.conf.parent / pgconfig.HBA_KEY
    bad = pgconfig.hba(rules=["host all reporting 10.0.0.0/8 no-such-method"])  # what the CRD would refuse
    job_conf, job_hba = work_dir / "job-postgresql.conf", work_dir / "job-pg_hba.conf"
    write(job_conf, conf_server.conf.read_text())
    write(job_hba, bad)
    write(hba_file, bad)
    run = runner.run("reload.sh", {**conf_server.libpq_env(), "CONFIG_FILE": str(job_conf),
                                   "HBA_FILE": str(job_hba)}, bindir=conf_server.bindir)
    assert run.returncode == 2, run.stderr
    assert run.result["reloaded"] is False and "pg_hba.conf line" in run.result["message"], run.result
    with conf_server.connect() as conn:
        assert conn.execute("SELECT pg_conf_load_time()").fetchone() == loaded
