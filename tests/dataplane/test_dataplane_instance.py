"""instance.sh on real PostgreSQL 15 servers: the start of a database container for its role.

Each instance is what a pod holds: a data volume (``volume/pgdata``), the run directory (an emptyDir:
the socket, ``.pgpass``, ``sampledb-instance.conf``), the downward-API labels file and the server
configuration the operator mounts (``wal_log_hints``, an hba_file allowing replication, the include
of ``sampledb-instance.conf``). instance.sh runs in the foreground as the postgres user and execs a
stand-in for the image's entrypoint (initdb of an empty $PGDATA, then the command), so the process
it leaves is the postmaster. The "primary Service" is the loopback address and the primary's port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_harness import (
    ScriptRunner,
    as_postgres,
    bindir_for,
    free_port,
    os_user,
    private_dir,
)

pytestmark = pytest.mark.postgres

BINDIR: Path = bindir_for(15) or Path("/nonexistent")
# ':' and '\' must be escaped in .pgpass, the quote in postgresql.conf literals
PASSWORD = "s3cr3t:Pa55\\never'printed"
STUB_ENTRYPOINT = """#!/usr/bin/env bash
# test stand-in for the image's docker-entrypoint.sh: initdb an empty $PGDATA, then exec the command
set -Eeuo pipefail
if [[ ! -s $PGDATA/PG_VERSION ]]; then
    pwfile=$(mktemp)
    printf '%s\\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \\
        --encoding=UTF8 --locale=C.UTF-8 --no-sync -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
fi
exec "$@"
"""
DURATION = re.compile(r"in (\d+\.\d) s")

NEEDS_18 = pytest.mark.skipif(bindir_for(18) is None, reason="PostgreSQL 18 is not installed")

if not BINDIR.exists():  # pragma: no cover - environment problem
    pytest.skip("PostgreSQL 15 is not installed (hack/install-postgres.sh)", allow_module_level=True)


def bins(major: int) -> Path:
    path = bindir_for(major)
    assert path is not None
    return path


def wait_until(check: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except psycopg.Error:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)  # poll interval; the loop re-checks the condition


def chown_postgres(path: Path) -> None:
    user = os_user()
    os.chown(path, user.pw_uid, user.pw_gid)


@dataclass
class Instance:
    """One database pod's worth of files, and the instance.sh process running in it."""

    name: str
    slot: str
    base: Path
    scripts: Path
    stub: Path
    wal_log_hints: bool = True
    bindir: Path = BINDIR
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0

    @property
    def pgdata(self) -> Path:
        return self.base / "volume" / "pgdata"

    @property
    def run_dir(self) -> Path:
        return self.base / "run"

    @property
    def labels(self) -> Path:
        return self.base / "labels"

    @property
    def conf(self) -> Path:
        return self.base / "postgresql.conf"

    @property
    def logfile(self) -> Path:
        return self.base / "instance.log"

    def setup(self) -> None:
        for path in (self.base / "volume", self.run_dir):
            path.mkdir()
            chown_postgres(path)
        (self.base / "pg_hba.conf").write_text(
            "local all all trust\nhost all all all scram-sha-256\nhost replication all all scram-sha-256\n"
        )
        self.write_config()

    def write_config(self) -> None:
        self.conf.write_text(
            f"port = {self.port}\n"
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.run_dir}'\n"
            f"hba_file = '{self.base / 'pg_hba.conf'}'\n"
            "fsync = off\n"
            f"wal_log_hints = {'on' if self.wal_log_hints else 'off'}\n"
            "max_wal_senders = 10\n"
            "wal_keep_size = '256MB'\n"  # a demoted primary keeps the WAL pg_rewind reads back to the fork
            f"include_if_exists = '{self.run_dir / 'sampledb-instance.conf'}'\n"
        )

    def set_role(self, role: str | None) -> None:
        """Write the downward-API labels file (atomically, as the kubelet does); None: no role label."""
        lines = [f'app.kubernetes.io/instance="{self.name}"']
        if role is not None:
            lines.append(f'sampledb.io/role="{role}"')
        tmp = self.base / "labels.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self.labels)

    def env(self, primary_port: int, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bindir}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": "/tmp",
            "TMPDIR": str(self.run_dir),
            "PGDATA": str(self.pgdata),
            "POSTGRES_USER": "postgres",
            "POSTGRES_PASSWORD": PASSWORD,
            "SAMPLEDB_INSTANCE": self.name,
            "SAMPLEDB_SLOT": self.slot,
            "SAMPLEDB_PRIMARY_HOST": "127.0.0.1",
            "SAMPLEDB_PRIMARY_PORT": str(primary_port),
            "SAMPLEDB_PODINFO": str(self.labels),
            "SAMPLEDB_RUN_DIR": str(self.run_dir),
            "SAMPLEDB_ENTRYPOINT": str(self.stub),
            "SAMPLEDB_PRIMARY_TIMEOUT": "30",
            "SAMPLEDB_ROLE_TIMEOUT": "30",
            **extra,
        }

    def command(self) -> list[str]:
        return ["bash", str(self.scripts / "instance.sh"), "postgres", "-c", f"config_file={self.conf}"]

    def launch(self, primary_port: int, **extra: str) -> None:
        """Start instance.sh in the background (the container's start)."""
        assert self.proc is None or self.proc.poll() is not None
        self.log_offset = self.logfile.stat().st_size if self.logfile.exists() else 0
        user = os_user()
        with self.logfile.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(), env=self.env(primary_port, **extra), cwd=self.base, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, user=user.pw_uid, group=user.pw_gid, extra_groups=[],
            )  # fmt: skip

    def start(self, primary_port: int, timeout: float = 90, **extra: str) -> None:
        self.launch(primary_port, **extra)
        self.wait_ready(timeout)

    def run_to_exit(self, primary_port: int, timeout: float = 60, **extra: str) -> int:
        self.launch(primary_port, **extra)
        assert self.proc is not None
        return self.proc.wait(timeout)

    def log(self) -> str:
        """What this start of the container printed (script lines and the server's own log)."""
        return self.logfile.read_bytes()[self.log_offset :].decode(errors="replace")

    def script_lines(self) -> list[str]:
        return [line for line in self.log().splitlines() if line.startswith("sampledb-instance:")]

    def wait_ready(self, timeout: float = 90) -> None:
        cmd = [str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"]
        deadline = time.monotonic() + timeout
        while subprocess.run(cmd, check=False, capture_output=True).returncode != 0:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not ready after {timeout}s:\n{self.log()}")
            time.sleep(0.1)  # poll interval; the loop re-checks the condition

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", password=PASSWORD, dbname="postgres",
            autocommit=True, connect_timeout=10,
        )  # fmt: skip

    def value(self, query: str) -> Any:
        with self.connect() as conn:
            row = conn.execute(query).fetchone()
            assert row is not None
            return row[0]

    def stop(self) -> None:
        """A clean (fast) shutdown, as the kubelet's SIGINT stop signal gives."""
        if (self.pgdata / "postmaster.pid").exists():
            as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "stop"], check=False)
        if self.proc is not None:
            self.proc.wait(30)

    def kill(self) -> None:
        """SIGKILL the postmaster (a crashed container); wait until its children are gone too."""
        assert self.proc is not None
        pid = self.proc.pid
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        wait_until(lambda: not any(alive(int(c)) for c in children.stdout.split()), 30, "the backends to exit")

    def siblings(self) -> list[str]:
        """The names next to $PGDATA on the volume (moved-aside copies, markers)."""
        return sorted(p.name for p in (self.base / "volume").iterdir() if p.name != "pgdata")


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@pytest.fixture
def instances(pg_root: Path, runner: ScriptRunner) -> Iterator[Callable[..., Instance]]:
    """Make instances; every one still running at the end is stopped."""
    made: list[Instance] = []
    stub = runner.work / "entrypoint-stub.sh"
    if not stub.exists():
        stub.write_text(STUB_ENTRYPOINT)
        stub.chmod(0o755)
        chown_postgres(stub)

    def make(name: str, slot: str, wal_log_hints: bool = True, bindir: Path = BINDIR) -> Instance:
        inst = Instance(name, slot, private_dir(pg_root, prefix="inst-"), runner.dir, stub, wal_log_hints, bindir)
        inst.setup()
        made.append(inst)
        return inst

    yield make
    for inst in made:
        if inst.proc is not None and inst.proc.poll() is None:
            inst.stop()
            if inst.proc.poll() is None:
                inst.proc.kill()


def assert_password_never_printed(*insts: Instance) -> None:
    for inst in insts:
        text = inst.logfile.read_text(errors="replace")
        assert PASSWORD not in text
        assert "Pa55" not in text


def new_primary(
    make: Callable[..., Instance], name: str = "db-0", wal_log_hints: bool = True, bindir: Path = BINDIR
) -> Instance:
    """A primary initialized by the entrypoint stand-in (role=primary, empty $PGDATA)."""
    primary = make(name, "sdb_" + name.replace("-", "_"), wal_log_hints, bindir)
    primary.set_role("primary")
    primary.start(primary.port)
    with primary.connect() as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
    return primary


def add_slot(server: Instance, slot: str) -> None:
    with server.connect() as conn:
        conn.execute("SELECT pg_create_physical_replication_slot(%s)", (slot,))


def insert(server: Instance, ident: int, note: str) -> None:
    with server.connect() as conn:
        conn.execute("INSERT INTO items VALUES (%s, %s)", (ident, note))


def notes(server: Instance) -> set[str]:
    with server.connect() as conn:
        return {row[0] for row in conn.execute("SELECT note FROM items")}


def slot_active(server: Instance, slot: str) -> bool:
    return bool(
        server.value(f"SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = '{slot}'")
    )


def new_replica(make: Callable[..., Instance], primary: Instance, name: str = "db-1") -> Instance:
    slot = "sdb_" + name.replace("-", "_")
    add_slot(primary, slot)
    replica = make(name, slot, bindir=primary.bindir)
    replica.set_role("replica")
    return replica


def assert_streams_from(standby: Instance, primary: Instance, ident: int) -> None:
    """A row written on the primary now is read on the standby; it replays in recovery via its slot."""
    insert(primary, ident, f"row-{ident}")
    try:
        wait_until(lambda: f"row-{ident}" in notes(standby), 30, f"row {ident} on {standby.name}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its log:\n{standby.log()}") from None
    assert standby.value("SELECT pg_is_in_recovery()") is True
    wait_until(lambda: slot_active(primary, standby.slot), 30, f"slot {standby.slot} active")
    app = primary.value(f"SELECT application_name FROM pg_stat_replication WHERE application_name = '{standby.name}'")
    assert app == standby.name
    assert (standby.pgdata / "standby.signal").exists()


def report(inst: Instance, what: str) -> None:
    for line in inst.script_lines():
        if DURATION.search(line):
            print(f"\n[{what}] {line}")


@pytest.mark.parametrize("major", [15, pytest.param(18, marks=NEEDS_18)])
def test_a_replica_clones_from_the_primary_and_streams(instances: Callable[..., Instance], major: int) -> None:
    primary = new_primary(instances, bindir=bins(major))
    insert(primary, 1, "before-clone")
    replica = new_replica(instances, primary)

    replica.start(primary.port)

    assert "before-clone" in notes(replica)
    assert_streams_from(replica, primary, 2)
    assert replica.value("SHOW cluster_name") == "db-1"
    assert replica.value("SHOW primary_slot_name") == "sdb_db_1"
    assert "passfile=" in replica.value("SHOW primary_conninfo")
    pgpass = replica.run_dir / ".pgpass"
    assert pgpass.stat().st_mode & 0o777 == 0o600
    assert pgpass.read_text() == "*:*:*:postgres:s3cr3t\\:Pa55\\\\never'printed\n"
    assert (replica.run_dir / "sampledb-instance.conf").stat().st_mode & 0o777 == 0o600
    assert "primary_conninfo" not in (replica.pgdata / "postgresql.auto.conf").read_text()
    assert not (replica.base / "volume" / "pgdata.cloning").exists()
    assert any("cloned from" in line and "through slot sdb_db_1" in line for line in replica.script_lines())
    assert any("role=primary" in line and "initializes" in line for line in primary.script_lines())
    report(replica, f"{major}: clone")

    replica.stop()  # a restart of the standby: started as it is, no second clone
    replica.start(primary.port)
    assert any("standby.signal present; starting as a standby" in line for line in replica.script_lines())
    assert_streams_from(replica, primary, 3)
    assert_password_never_printed(primary, replica)


def test_waits_for_the_role_label_then_proceeds(instances: Callable[..., Instance]) -> None:
    inst = instances("db-0", "sdb_db_0")
    inst.set_role(None)

    inst.launch(inst.port)  # the operator labels the pod a moment after it started: the script waits for it
    wait_until(lambda: any("waiting for the label sampledb.io/role" in line for line in inst.script_lines()),
               timeout=30, what="the script to wait for its role label")
    assert inst.proc is not None and inst.proc.poll() is None
    assert not (inst.pgdata / "PG_VERSION").exists()
    inst.set_role("primary")
    inst.wait_ready()

    lines = inst.script_lines()
    assert any("waiting for the label sampledb.io/role" in line for line in lines)
    assert any("label sampledb.io/role=primary after" in line for line in lines)
    assert inst.value("SELECT pg_is_in_recovery()") is False
    assert_password_never_printed(inst)


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("no-label", 5, "no label sampledb.io/role"),
        ("no-labels-file", 5, "no label sampledb.io/role"),
        ("bad-role", 2, 'invalid label sampledb.io/role="leader"'),
        ("no-password", 2, "missing required setting POSTGRES_PASSWORD"),
        ("bad-slot", 2, "invalid SAMPLEDB_SLOT"),
        ("primary-over-foreign-files", 2, "refusing to initialize a primary"),
    ],
)
def test_refuses_to_start(instances: Callable[..., Instance], case: str, code: int, message: str) -> None:
    inst = instances("db-0", "sdb_db_0")
    extra = {"SAMPLEDB_ROLE_TIMEOUT": "1"}
    if case == "no-label":
        inst.set_role(None)
    elif case == "bad-role":
        inst.set_role("leader")
    elif case != "no-labels-file":
        inst.set_role("primary")
    if case == "no-password":
        extra["POSTGRES_PASSWORD"] = ""
    if case == "bad-slot":
        extra["SAMPLEDB_SLOT"] = "Bad-Slot"
    if case == "primary-over-foreign-files":
        inst.pgdata.mkdir()
        (inst.pgdata / "stray").write_text("x")
        chown_postgres(inst.pgdata)

    start = time.monotonic()
    assert inst.run_to_exit(inst.port, **extra) == code
    assert time.monotonic() - start < 10

    assert any(message in line for line in inst.script_lines()), inst.log()
    assert not (inst.pgdata / "PG_VERSION").exists()
    assert_password_never_printed(inst)


def test_role_primary_does_not_promote_a_standby(instances: Callable[..., Instance]) -> None:
    primary = new_primary(instances)
    replica = new_replica(instances, primary)
    replica.start(primary.port)
    replica.stop()

    replica.set_role("primary")  # e.g. the label changed, but pg_promote() was never called
    replica.start(primary.port)

    assert (replica.pgdata / "standby.signal").exists()
    assert replica.value("SELECT pg_is_in_recovery()") is True
    assert any("role=primary: standby.signal present" in line for line in replica.script_lines())
    assert_streams_from(replica, primary, 10)
    assert_password_never_printed(primary, replica)


def test_role_primary_refuses_data_of_another_major_naming_both(instances: Callable[..., Instance]) -> None:
    """An image that does not run the data's major (e.g. spec.image of another version under a name the
    operator cannot check) is refused before the server starts, in words the operator shows."""
    primary = new_primary(instances)
    insert(primary, 1, "kept")
    primary.stop()
    (primary.pgdata / "PG_VERSION").write_text("14\n")

    assert primary.run_to_exit(free_port()) == 2
    said = [line for line in primary.script_lines() if "holds a PostgreSQL 14 cluster" in line]
    assert said and "this image runs PostgreSQL 15" in said[0], primary.log()
    (primary.pgdata / "PG_VERSION").write_text("15\n")  # nothing was touched: the right image starts it
    primary.start(primary.port)
    assert notes(primary) == {"kept"}


def fail_over(old: Instance, new: Instance, stop: str) -> None:
    """Promote the standby ``new``; the old primary takes one more write (split brain), then stops."""
    insert(old, 100, "both")
    wait_until(lambda: "both" in notes(new), 30, "the last common row")
    assert new.value("SELECT pg_promote()") is True
    insert(old, 101, "only-on-old-primary")
    insert(new, 102, "on-new-primary")
    if stop == "sigkill":
        old.kill()
    else:
        old.stop()
    old.slot = "sdb_old"
    add_slot(new, old.slot)


@pytest.mark.parametrize(
    ("major", "stop"), [(15, "clean"), (15, "sigkill"), pytest.param(18, "sigkill", marks=NEEDS_18)]
)
def test_a_former_primary_rewinds_and_follows_the_new_primary(
    instances: Callable[..., Instance], major: int, stop: str
) -> None:
    old = new_primary(instances, bindir=bins(major))
    new = new_replica(instances, old)
    new.start(old.port)
    fail_over(old, new, stop)
    control = as_postgres([str(old.bindir / "pg_controldata"), "-D", str(old.pgdata)]).stdout
    state = "in production" if stop == "sigkill" else "shut down"
    assert re.search(rf"Database cluster state:\s+{state}\n", control)

    old.set_role("replica")
    old.start(new.port)

    lines = old.script_lines()
    assert any("no standby.signal (a former primary); rewound from" in line for line in lines), old.log()
    assert any(("after crash recovery" in line) == (stop == "sigkill") for line in lines if "rewound" in line)
    assert not old.siblings()  # nothing moved aside
    assert_streams_from(old, new, 103)
    assert notes(old) == {"both", "on-new-primary", "row-103"}  # the split-brain row is gone
    assert old.value("SHOW primary_conninfo").endswith("application_name=db-0")
    report(old, f"{major}: rewind after {stop} stop")
    assert_password_never_printed(old, new)


@pytest.mark.parametrize("cause", ["another-system", "no-wal-log-hints"])
def test_a_failed_rewind_moves_the_data_aside_and_clones(instances: Callable[..., Instance], cause: str) -> None:
    if cause == "another-system":  # a data directory of an unrelated cluster (a different system id)
        primary = new_primary(instances, "db-1")
        old = new_primary(instances, "db-0")
        insert(old, 7, "only-on-old-primary")
        old.stop()
        old.slot = "sdb_old"
        add_slot(primary, old.slot)
    else:  # a real former primary that ran without wal_log_hints (and without data checksums)
        old = new_primary(instances, wal_log_hints=False)
        primary = new_replica(instances, old)
        primary.start(old.port)
        fail_over(old, primary, "clean")

    old.set_role("replica")
    old.start(primary.port)

    lines = old.script_lines()
    reason = "different systems" if cause == "another-system" else "wal_log_hints"
    assert any("pg_rewind from" in line and "failed" in line and reason in line for line in lines), old.log()
    aside = [name for name in old.siblings() if name.startswith("pgdata.diverged-")]
    assert len(aside) == 1 and old.siblings() == aside
    assert (old.base / "volume" / aside[0] / "PG_VERSION").exists()  # kept, whole
    assert any("former primary could not be rewound" in line and "cloned from" in line for line in lines)
    assert_streams_from(old, primary, 200)
    assert "only-on-old-primary" not in notes(old)
    report(old, f"rewind failed ({cause}), clone")
    assert_password_never_printed(old, primary)


@pytest.mark.parametrize(
    ("case", "aside_prefix", "log_words"),
    [
        ("foreign-partial", "pgdata.partial-", "moved a directory without PG_VERSION"),
        ("own-unfinished-clone", None, "removed an unfinished clone of our own"),
        ("other-major", "pgdata.major-14-", "data of major 14, server 15"),
    ],
)
def test_a_directory_in_the_way_of_a_clone(
    instances: Callable[..., Instance], case: str, aside_prefix: str | None, log_words: str
) -> None:
    primary = new_primary(instances)
    replica = new_replica(instances, primary)
    replica.pgdata.mkdir()
    (replica.pgdata / "base").mkdir()
    (replica.pgdata / "base" / "leftover").write_text("half of a file")
    if case != "foreign-partial":
        (replica.pgdata / "PG_VERSION").write_text("14\n" if case == "other-major" else "15\n")
    if case == "own-unfinished-clone":
        (replica.base / "volume" / "pgdata.cloning").write_text("clone started\n")
    for path in [replica.pgdata, *replica.pgdata.rglob("*")]:
        chown_postgres(path)

    replica.start(primary.port)

    assert any(log_words in line for line in replica.script_lines()), replica.log()
    assert not (replica.pgdata / "base" / "leftover").exists()
    if aside_prefix is None:
        assert replica.siblings() == []
    else:
        assert len(replica.siblings()) == 1 and replica.siblings()[0].startswith(aside_prefix)
        assert (replica.base / "volume" / replica.siblings()[0] / "base" / "leftover").read_text() == "half of a file"
    assert_streams_from(replica, primary, 300)
    assert_password_never_printed(primary, replica)


def test_a_clone_removes_the_older_majors_data_directories_and_keeps_what_was_moved_aside(
        instances: Callable[..., Instance]) -> None:
    """After a major upgrade a standby clones into the new major's directory; the older majors' directories on its
    volume (its own copies) go, a directory moved aside and a newer major's stay."""
    primary = new_primary(instances)
    replica = new_replica(instances, primary)
    volume = replica.base / "volume"
    for name, major in (("pgdata-14", "14"), ("pgdata.major-13-20261206T000000Z", "13"), ("pgdata-99", "99")):
        (volume / name / "base").mkdir(parents=True)
        (volume / name / "PG_VERSION").write_text(f"{major}\n")
        (volume / name / "base" / "a-table").write_text("old rows")
        for path in [volume / name, *(volume / name).rglob("*")]:
            chown_postgres(path)

    replica.start(primary.port)

    assert_streams_from(replica, primary, 400)
    assert replica.siblings() == ["pgdata-99", "pgdata.major-13-20261206T000000Z"]
    assert (volume / "pgdata.major-13-20261206T000000Z" / "base" / "a-table").read_text() == "old rows"
    assert any("removed" in line and "pgdata-14" in line and "copy of major 14" in line
               for line in replica.script_lines()), replica.log()


def test_a_replica_waits_for_the_primary(instances: Callable[..., Instance]) -> None:
    primary = instances("db-0", "sdb_db_0")
    primary.set_role("primary")
    replica = instances("db-1", "sdb_db_1")
    replica.set_role("replica")

    replica.launch(primary.port)
    wait_until(lambda: any("waiting for the primary" in line for line in replica.script_lines()), 10, "waiting")
    primary.start(primary.port)
    with primary.connect() as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, note text)")
    replica.wait_ready()

    assert any("accepts connections after" in line for line in replica.script_lines())
    assert any("slot sdb_db_1 is absent" in line for line in replica.script_lines())
    add_slot(primary, "sdb_db_1")  # the operator creates it; the standby's walreceiver retries
    insert(primary, 1, "row-1")
    wait_until(lambda: "row-1" in notes(replica), 30, "row on the standby")
    assert_password_never_printed(primary, replica)


def test_no_primary_in_time_exits_not_ready(instances: Callable[..., Instance]) -> None:
    replica = instances("db-1", "sdb_db_1")
    replica.set_role("replica")

    assert replica.run_to_exit(free_port(), SAMPLEDB_PRIMARY_TIMEOUT="1") == 5
    assert any("did not accept connections within 1s" in line for line in replica.script_lines())
    assert not replica.pgdata.exists() and replica.siblings() == []
