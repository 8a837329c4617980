"""pg/client.stop_server and refuses on a real PostgreSQL: the fence of a primary whose kubelet does not act.

A running server accepts a TCP connection (refuses: False); stop_server, as the superuser over TCP, says the server
took the order and stops it at once (an immediate shutdown: its postmaster gone); then its address refuses
connections. A role that is not a superuser cannot (False, and the server runs on); nor can anyone where nothing
listens."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

from tests.dataplane.pg_harness import PASSWORD, SUPERUSER, PgServer, free_port

from sampledb_operator.pg import client as pg


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
    assert "immediate shutdown request" in (server.logfile.read_text() if server.logfile else "")


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
