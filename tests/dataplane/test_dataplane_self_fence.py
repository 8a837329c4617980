"""The primary's self-fence on real PostgreSQL 15 servers: instance.sh, self-fence.sh and pg/client.renew_lease.

A primary started by instance.sh runs self-fence.sh beside it. Until the operator renews its lease nothing happens;
renewed, it runs while renewals come; once the lease has ended with no standby receiving its WAL, the server stops
(an immediate shutdown), the marker is written and the reason is the container's termination message, and a new
start of the container as the primary does not start the server: it waits, until the role label says replica. A
primary whose standby streams from it is left running when its lease ends, and stops once the standby goes; a WAL
client that is not one of its standbys (not through a slot the operator makes) does not keep it running. A renewal
that arrives after its deadline is refused and writes nothing.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_harness import PASSWORD as SERVER_PASSWORD
from pg_harness import SUPERUSER
from test_dataplane_instance import (  # noqa: F401 - instances: the fixture, used by name
    PASSWORD,
    Instance,
    add_slot,
    alive,
    instances,
    new_primary,
    new_replica,
    wait_until,
)

from sampledb_operator.model.instances import LeaseRenewal
from sampledb_operator.pg import client as pg

pytestmark = pytest.mark.postgres

POLL = "0.2"  # self-fence.sh's look at the lease, seconds


@pytest.fixture
def servers(instances: Callable[..., Instance]) -> Callable[..., Instance]:  # noqa: F811 - the fixture above
    return instances


def extra(inst: Instance) -> dict[str, str]:
    return {"SAMPLEDB_FENCE_POLL": POLL, "SAMPLEDB_TERMINATION_LOG": str(inst.base / "termination-log")}


def started_primary(servers: Callable[..., Instance], *, standby_slot: bool = True) -> Instance:
    """A primary started by instance.sh; with `standby_slot`, the slot of a standby (sdb_i1) the operator made for
    one, which is not streaming now."""
    primary = servers("db-0", "sdb_db_0")
    primary.set_role("primary")
    primary.start(primary.port, **extra(primary))
    with primary.connect() as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
    if standby_slot:
        add_slot(primary, "sdb_i1")
    wait_until((primary.run_dir / pg.WATCH_FILE).exists, 10, "the self-fence's first look")
    return primary


def target(inst: Instance) -> pg.Target:
    return pg.Target("127.0.0.1", inst.port, "postgres", PASSWORD)


def renew(inst: Instance, ttl: float) -> bool:
    renewal = asyncio.run(pg.renew_lease(target(inst), ttl, 2.0, lambda: None))
    return renewal is not None and renewal.watched


def uptime_ms() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * 1000)


def writes(inst: Instance, ident: int) -> bool:
    try:
        with inst.connect() as conn:
            conn.execute("INSERT INTO items VALUES (%s, 'w')", (ident,))
        return True
    except psycopg.Error:
        return False


def wait_exited(inst: Instance, timeout: float = 30) -> None:
    assert inst.proc is not None
    try:
        inst.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{inst.name} still runs after {timeout} s:\n{inst.log()}") from None


def test_a_renewed_lease_keeps_the_primary_and_an_ended_one_stops_it(servers: Callable[..., Instance]) -> None:
    primary = started_primary(servers)
    lease = primary.run_dir / pg.LEASE_FILE
    assert not lease.exists()  # not armed before the operator's first renewal

    before = uptime_ms()
    renewal = asyncio.run(pg.renew_lease(target(primary), 3.0, 2.0, lambda: None))
    assert renewal == LeaseRenewal(watched=True, sender_timeout=60.0)  # the self-fence looks; the default timeout
    end = int(lease.read_text().strip())
    assert before + 3000 <= end <= uptime_ms() + 3000
    for ident in range(1, 5):  # renewed every second for 4 s: the 3 s lease never ends
        assert renew(primary, ttl=3.0)
        assert writes(primary, ident)
        time.sleep(1)  # the renewal period under test, not a wait for a state
    assert primary.proc is not None and primary.proc.poll() is None

    stopped_from = time.monotonic()
    wait_exited(primary, timeout=15)  # no more renewals: the server stops by itself
    took = time.monotonic() - stopped_from
    assert took < 3.0 + 2.0, f"stopped {took:.1f} s after the last renewal"
    assert not writes(primary, 100)
    marker = (primary.run_dir / "sampledb-self-fenced").read_text()
    assert "no standby receives WAL" in marker
    assert (primary.base / "termination-log").read_text().startswith("sampledb: self-fenced:")
    assert "immediate shutdown request" in primary.log()
    print(f"\nself-fenced {took:.1f} s after the last renewal (lease 3 s)")

    # the container starts again (the kubelet's restart): role=primary, the marker there: the server stays down
    primary.launch(primary.port, **extra(primary))
    wait_until(lambda: any("stopped itself" in line for line in primary.script_lines()), 20, "the wait logged")
    assert not (primary.pgdata / "postmaster.pid").exists()
    assert primary.proc is not None and primary.proc.poll() is None
    assert (primary.base / "termination-log").read_text().startswith("sampledb: self-fenced:")
    primary.proc.send_signal(signal.SIGKILL)
    primary.proc.wait(10)
    rows = subprocess.run([str(primary.bindir / "pg_controldata"), "-D", str(primary.pgdata)], capture_output=True,
                          text=True, check=False, env={"LC_ALL": "C"}).stdout
    assert "in production" in rows  # stopped by an immediate shutdown: crash recovery at its next start


def test_a_primary_whose_standby_streams_runs_on_past_its_lease_and_stops_once_the_standby_goes(
        servers: Callable[..., Instance]) -> None:
    primary = new_primary(servers)
    primary.stop()
    primary.start(primary.port, **extra(primary))  # with the short poll
    standby = own_standby(servers, primary)
    standby.start(primary.port, **extra(standby))
    wait_until(lambda: primary.value("SELECT count(*) FROM pg_stat_replication") == 1, 30, "the standby streaming")
    (standby.run_dir / pg.LEASE_FILE).write_text("1\n")  # a standby's watch never stops it, lease or not

    assert renew(primary, ttl=1.0)
    wait_until(lambda: any("still receive WAL" in line for line in primary.log().splitlines()), 15,
               "the ended lease held by the streaming standby")
    assert writes(primary, 1) and primary.proc is not None and primary.proc.poll() is None
    # the standby's watch looked at its ended lease every 0.2 s meanwhile (over 1 s)
    assert standby.proc is not None and standby.proc.poll() is None
    assert standby.value("SELECT pg_is_in_recovery()") is True and "self-fence" not in standby.log()

    standby.stop()
    wait_exited(primary, timeout=20)
    assert "no standby receives WAL" in (primary.run_dir / "sampledb-self-fenced").read_text()


def own_standby(make: Callable[..., Instance], primary: Instance) -> Instance:
    """A standby streaming through a slot named as the operator names its standbys' (sdb_i<k>)."""
    add_slot(primary, "sdb_i1")
    standby = make("db-1", "sdb_i1")
    standby.set_role("replica")
    return standby


def test_a_wal_client_that_is_not_one_of_its_standbys_does_not_keep_a_primary_past_its_lease(
        servers: Callable[..., Instance]) -> None:
    primary = new_primary(servers)
    primary.stop()
    primary.start(primary.port, **extra(primary))
    add_slot(primary, "sdb_i2")  # a standby's, not streaming
    foreign = new_replica(servers, primary)  # its slot is not one the operator makes (sdb_db_1)
    foreign.start(primary.port)
    wait_until(lambda: primary.value("SELECT count(*) FROM pg_stat_replication") == 1, 30, "the client streaming")
    assert renew(primary, ttl=1.0)
    wait_exited(primary, timeout=15)
    assert "no standby receives WAL" in (primary.run_dir / "sampledb-self-fenced").read_text()


def test_a_primary_without_a_standby_slot_is_never_stopped(servers: Callable[..., Instance]) -> None:
    primary = started_primary(servers, standby_slot=False)  # a database without standbys (any more)
    renewal = asyncio.run(pg.renew_lease(target(primary), 0.5, 2.0, lambda: None))
    assert renewal is not None and renewal.watched is False  # nothing the operator could count on
    wait_until(lambda: any("no standby slot" in line for line in primary.log().splitlines()), 15,
               "the ended lease looked at")
    assert primary.proc is not None and primary.proc.poll() is None and writes(primary, 1)
    assert not (primary.run_dir / "sampledb-self-fenced").exists()


def test_a_lease_turned_off_arms_nothing(servers: Callable[..., Instance]) -> None:
    primary = started_primary(servers)
    assert renew(primary, ttl=2.0)
    renewed = time.time()
    assert asyncio.run(pg.disarm_lease(target(primary)))  # the database left without standbys
    assert (primary.run_dir / pg.LEASE_FILE).read_text().strip() == "off"
    watch = primary.run_dir / pg.WATCH_FILE
    wait_until(lambda: watch.stat().st_mtime > renewed + 3.0, 15, "the self-fence's looks past the old lease's end")
    assert primary.proc is not None and primary.proc.poll() is None and writes(primary, 1)
    assert not (primary.run_dir / "sampledb-self-fenced").exists()


def test_a_server_without_a_self_fence_is_renewed_unwatched(pg_server_factory: Callable[..., Any]) -> None:
    server = pg_server_factory()  # started by pg_ctl, not instance.sh: nothing watches it
    renewal = asyncio.run(pg.renew_lease(pg.Target("127.0.0.1", server.port, SUPERUSER, SERVER_PASSWORD), 3.0,
                                         2.0, lambda: None))
    assert renewal is not None and renewal.watched is False


def test_a_renewal_arriving_after_its_deadline_is_refused_and_writes_nothing(
        servers: Callable[..., Instance]) -> None:
    primary = started_primary(servers)
    with primary.connect() as conn, pytest.raises(psycopg.errors.RaiseException, match="after its deadline"):
        conn.execute(pg.RENEW_SQL.format(deadline=uptime_ms() - 1000, ttl=60_000))
    assert not (primary.run_dir / pg.LEASE_FILE).exists()
    assert pg.deadline_ms(1_000, answered=10.0, sending=10.5, transit=2.0) == 1_000 + 500 + 2_000
    assert pg.deadline_ms(1_000, answered=10.0, sending=9.0, transit=2.0) == 3_000  # never before the answer


def test_the_fence_of_a_primary_that_stopped_itself_is_lifted_by_the_replica_label(
        servers: Callable[..., Instance]) -> None:
    primary = started_primary(servers)
    (primary.run_dir / "sampledb-self-fenced").write_text("self-fenced at uptime 1 ms: test\n")
    primary.stop()
    primary.launch(primary.port, **extra(primary))
    wait_until(lambda: any("stopped itself" in line for line in primary.script_lines()), 20, "the wait logged")
    primary.set_role("replica")
    # as a replica it goes on (here: no primary to follow, so it waits for one); the marker is gone
    wait_until(lambda: not (primary.run_dir / "sampledb-self-fenced").exists(), 20, "the marker removed")
    assert any("no longer a primary" in line for line in primary.script_lines())
    assert primary.proc is not None
    pid = primary.proc.pid
    primary.proc.send_signal(signal.SIGKILL)
    primary.proc.wait(10)
    wait_until(lambda: not alive(pid), 10, "instance.sh gone")
