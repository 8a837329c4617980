"""pg/client.stop_server and refuses on a real PostgreSQL: the fence of a primary whose kubelet does not act.

A running server accepts a TCP connection (refuses: False); stop_server, as the superuser over TCP, says the server
took the order and stops it (a fast shutdown: its postmaster gone, its shutdown checkpoint written); then its
address refuses connections. With a standby streaming from it, asynchronously, the standby has received everything
up to that shutdown checkpoint, so every commit: the fence loses nothing even without synchronous replication. A
standby that does not confirm (its WAL receiver stopped) holds the fast shutdown up, and the immediate one follows
STOP_ESCALATE_SECONDS later: the address still refuses within the operator's STOPPED_WITHIN. A role that is not a
superuser cannot stop it (False, and the server runs on); nor can anyone where nothing listens."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tests.dataplane.pg_harness import PASSWORD, SUPERUSER, PgServer, as_postgres, free_port, private_dir

from sampledb_operator.pg import client as pg
from sampledb_operator.reconcilers.replication import STOPPED_WITHIN


def postmaster_pid(server: PgServer) -> int:
    return int((server.datadir / "postmaster.pid").read_text().splitlines()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


def test_stop_server_stops_a_running_server_and_its_address_then_refuses(
        pg_server_factory: Callable[..., PgServer]) -> None:
    server = pg_server_factory()
    target = pg.Target("127.0.0.1", server.port, SUPERUSER, PASSWORD)
    pid = postmaster_pid(server)
    assert asyncio.run(pg.refuses(target)) is False  # it listens
    assert asyncio.run(pg.stop_server(target)) is True
    assert asyncio.run(pg.refused_within(target, 10.0)) is True
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # poll interval: the loop re-checks the condition
    assert not alive(pid), "the postmaster still runs"
    assert "fast shutdown request" in (server.logfile.read_text() if server.logfile else "")
    assert control(server)["Database cluster state"] == "shut down"


def control(server: PgServer) -> dict[str, str]:
    """pg_controldata's fields."""
    out = subprocess.run([str(server.bindir / "pg_controldata"), "-D", str(server.datadir)], capture_output=True,
                         text=True, check=True, timeout=30, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)}


def lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def streaming_standby(primary: PgServer, pg_root: Path) -> PgServer:
    """A hot standby cloned from `primary` by pg_basebackup -R, started, streaming (asynchronously)."""
    base = private_dir(pg_root, prefix="sb-")
    standby = PgServer(bindir=primary.bindir, datadir=base / "data", sockdir=base)
    as_postgres([str(primary.bindir / "pg_basebackup"), "-D", str(standby.datadir), "-X", "stream", "-c", "fast",
                 "-R", "-d", primary.conninfo()])
    standby.start()
    wait_for(lambda: bool(query(primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")),
             "the standby streaming")
    return standby


def query(server: PgServer, sql: str) -> object:
    with server.connect() as conn:
        row = conn.execute(sql).fetchone()
    return None if row is None else row[0]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # poll interval: the loop re-checks the condition


def test_a_standby_streaming_asynchronously_has_every_commit_once_the_fenced_primary_stopped(
        pg_server_factory: Callable[..., PgServer], pg_root: Path) -> None:
    primary = pg_server_factory()
    standby = streaming_standby(primary, pg_root)
    try:
        with primary.connect() as conn:  # the harness runs synchronous_commit off: nothing waits for the standby
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
            for batch in range(20):
                conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(%s::int, %s::int) g",
                             (batch * 5000 + 1, (batch + 1) * 5000))
            written = conn.execute("SELECT count(*), sum(hashtext(note)) FROM t").fetchone()
        target = pg.Target("127.0.0.1", primary.port, SUPERUSER, PASSWORD)
        assert asyncio.run(pg.stop_server(target)) is True
        assert asyncio.run(pg.refused_within(target, STOPPED_WITHIN)) is True
        fields = control(primary)
        assert fields["Database cluster state"] == "shut down"  # its shutdown checkpoint written
        log = primary.logfile.read_text() if primary.logfile else ""
        assert "immediate shutdown request" not in log  # the fast shutdown ended by itself: not escalated
        shutdown_checkpoint = lsn(fields["Latest checkpoint location"])
        received = str(query(standby, "SELECT pg_last_wal_receive_lsn()"))
        assert lsn(received) > shutdown_checkpoint, "the standby lacks WAL the stopped primary had"
        wait_for(lambda: query(standby, "SELECT pg_last_wal_replay_lsn() = pg_last_wal_receive_lsn()") is True,
                 "the standby replayed what it received")
        with standby.connect() as conn:
            assert conn.execute("SELECT count(*), sum(hashtext(note)) FROM t").fetchone() == written
    finally:
        standby.stop()


def test_a_standby_that_does_not_confirm_holds_the_fast_shutdown_and_the_immediate_one_follows(
        pg_server_factory: Callable[..., PgServer], pg_root: Path) -> None:
    primary = pg_server_factory()
    standby = streaming_standby(primary, pg_root)
    receiver = int(str(query(standby, "SELECT pid FROM pg_stat_wal_receiver")))
    try:
        os.kill(receiver, signal.SIGSTOP)
        with primary.connect() as conn:
            conn.execute("CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g")
        target = pg.Target("127.0.0.1", primary.port, SUPERUSER, PASSWORD)
        started = time.monotonic()
        assert asyncio.run(pg.stop_server(target)) is True
        assert asyncio.run(pg.refused_within(target, STOPPED_WITHIN)) is True
        took = time.monotonic() - started
        log = primary.logfile.read_text() if primary.logfile else ""
        assert re.search("fast shutdown request.*immediate shutdown request", log, re.S), log[-2000:]
        assert pg.STOP_ESCALATE_SECONDS <= took < STOPPED_WITHIN, took
    finally:
        os.kill(receiver, signal.SIGCONT)
        standby.stop()


def test_a_role_that_is_not_a_superuser_cannot_stop_it_and_nothing_is_stopped_where_nothing_listens(
        pg_server: PgServer) -> None:
    with pg_server.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS fence_app")
        conn.execute(f"CREATE ROLE fence_app LOGIN PASSWORD '{PASSWORD}'")
    target = pg.Target("127.0.0.1", pg_server.port, "fence_app", PASSWORD)
    assert asyncio.run(pg.stop_server(target)) is False
    assert asyncio.run(pg.refuses(target)) is False  # it runs on
    nobody = pg.Target("127.0.0.1", free_port(), SUPERUSER, PASSWORD)
    assert asyncio.run(pg.stop_server(nobody)) is False
    assert asyncio.run(pg.refuses(nobody)) is True
