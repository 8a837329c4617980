"""archive-wal.sh, base-backup.sh and recover.sh on real PostgreSQL and a real S3 server.

The object store is versitygw (an S3 gateway over a directory, built by hack/build-s3.sh) run by
this module on a free loopback port with TLS: a throwaway CA and server certificate made with
openssl, the CA given to every client as AWS_CA_BUNDLE, as users run it. The barman-cloud-*
commands are those of the virtualenv running the tests (barman[cloud] 3.19.1), made runnable by the
``postgres`` OS user (the scripts and the servers run as that user). Servers archive through
``archive_command = 'bash .../archive-wal.sh %p'`` with the store settings in their environment.

Everything is judged by data: per-table row counts and checksums of the recovered server against
those of the source at each point in time, objects listed with boto3, the archiver's statistics and
the files the scripts leave. Waits are on conditions with timeouts (pg_stat_archiver, files).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import psycopg
import pytest
from botocore.config import Config
from pg_harness import (
    PASSWORD,
    SUPERUSER,
    PgServer,
    ScriptRun,
    ScriptRunner,
    as_postgres,
    bindir_for,
    free_port,
    os_user,
    private_dir,
    remove_tree,
)
from test_dataplane_instance import STUB_ENTRYPOINT, Instance

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
NEW_PASSWORD = "n3w:Pa55'w0rd\\never-printed"
BUCKET = "sampledb-wal"
TOOLS = (
    "wal-archive", "wal-restore", "backup", "backup-list", "backup-show", "backup-delete", "backup-keep",
    "restore", "check-wal-archive",
)  # fmt: skip
NEEDS_18 = pytest.mark.skipif(bindir_for(18) is None, reason="PostgreSQL 18 is not installed")
ARCHIVE_TIMEOUT = 60.0


def bins(major: int) -> Path:
    path = bindir_for(major)
    if path is None:
        pytest.skip(f"PostgreSQL {major} is not installed (hack/install-postgres.sh)")
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


# ---- barman-cloud for the postgres OS user


@dataclass(frozen=True)
class BarmanTools:
    """barman-cloud-* commands the postgres user can run, and the interpreter that runs them."""

    folder: Path
    python: list[str]  # runs Python code with barman's packages importable, as the postgres user
    python_env: dict[str, str] = field(default_factory=dict)


def barman_tools(root: Path) -> BarmanTools:
    """A folder under `root` of barman-cloud-* commands the postgres user can run: links to the running
    virtualenv's, or (when its interpreter is private to another user) wrappers running them with the system's
    Python of the same version over the virtualenv's site-packages. RuntimeError says why there can be none."""
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "barman-cloud-wal-archive").exists():
        raise RuntimeError("barman-cloud is not installed in the virtualenv: run hack/bootstrap.sh (make bootstrap)")
    tools = private_dir(root, prefix="barman-")
    tools.chmod(0o755)
    direct = as_postgres([str(venv_bin / "barman-cloud-wal-archive"), "--version"], check=False).returncode == 0
    python = None
    if not direct:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        for candidate in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
            if Path(candidate).exists() and as_postgres([candidate, "-c", "pass"], check=False).returncode == 0:
                python = candidate
                break
        if python is None:
            raise RuntimeError(f"no Python {version} the postgres user can run barman-cloud with")
    site = sysconfig.get_paths()["purelib"]
    for tool in TOOLS:
        name = f"barman-cloud-{tool}"
        path = tools / name
        if direct:
            path.symlink_to(venv_bin / name)
        else:
            path.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {python} {venv_bin / name} "$@"\n')
            path.chmod(0o755)
    check = as_postgres([str(tools / "barman-cloud-wal-archive"), "--version"], check=False)
    if check.returncode != 0:
        raise RuntimeError(f"barman-cloud does not run as the postgres user: {check.stderr.strip()}")
    return BarmanTools(tools, [str(venv_bin / "python")] if direct else [str(python)],
                       {} if direct else {"PYTHONPATH": site})


@pytest.fixture(scope="module")
def barman_bin(pg_root: Path) -> Path:
    """barman_tools' folder for this module's servers."""
    try:
        return barman_tools(pg_root).folder
    except RuntimeError as exc:
        pytest.fail(str(exc))


# ---- the object store: versitygw with TLS on a loopback port


def versitygw_binary() -> Path:
    found = shutil.which("versitygw")
    if found:
        return Path(found)
    script = REPO / "hack" / "build-s3.sh"
    if not script.exists() or not shutil.which("go"):
        pytest.fail("no versitygw: hack/build-s3.sh builds it, and needs Go")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=1200, check=False)
    path = Path(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "/nonexistent") / "versitygw"
    if out.returncode != 0 or not path.exists():
        pytest.fail(f"hack/build-s3.sh failed: {out.stderr[-500:]}")
    return path


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it: (ca, cert, key)."""
    ca_key, ca, key, csr, cert, ext = (folder / n for n in ("ca.key", "ca.crt", "srv.key", "srv.csr", "srv.crt", "ext"))

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
            "-subj", "/CN=sampledb test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


@dataclass
class Store:
    """The S3 server: its endpoint, the CA file clients trust and the root credentials."""

    endpoint: str
    ca_file: Path
    access_key: str
    secret_key: str
    tools: Path

    def client(self, secret_key: str | None = None) -> Any:
        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1", verify=str(self.ca_file),
            aws_access_key_id=self.access_key, aws_secret_access_key=secret_key or self.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )  # fmt: skip

    def env(self, prefix: str, server: str, bindir: Path, **extra: str) -> dict[str, str]:
        """What the operator sets for a database archiving to s3://BUCKET/prefix, server ``server``; and (when
        barman_tools wraps the commands because the postgres user cannot run the virtualenv's interpreter) the
        virtualenv's packages for the system's python3, which the scripts' boto3 programs then run with, as in
        an image."""
        packages = {} if (self.tools / "barman-cloud-backup").is_symlink() else {
            "PYTHONPATH": sysconfig.get_paths()["purelib"]}
        return {
            **packages,
            "PATH": f"{self.tools}:{bindir}:/usr/local/bin:/usr/bin:/bin",
            "SAMPLEDB_S3_DESTINATION": f"s3://{BUCKET}/{prefix}",
            "SAMPLEDB_S3_SERVER": server,
            "SAMPLEDB_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CA_BUNDLE": str(self.ca_file),
            **extra,
        }

    def keys(self, prefix: str) -> list[str]:
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            out.extend(obj["Key"] for obj in page.get("Contents", []))
        return sorted(out)

    def wal_key(self, prefix: str, server: str, wal: str) -> str:
        return f"{prefix}/{server}/wals/{wal[:16]}/{wal}.gz"


@pytest.fixture(scope="module")
def store(pg_root: Path, barman_bin: Path) -> Iterator[Store]:
    binary = versitygw_binary()
    base = private_dir(pg_root, prefix="s3-")
    base.chmod(0o755)  # the CA file is read by the postgres user
    ca, cert, key = make_certificates(base)
    ca.chmod(0o644)
    backend = base / "backend"
    backend.mkdir()
    port = free_port()
    access, secret = "sampledb-" + secrets.token_hex(4), secrets.token_urlsafe(24)
    log = (base / "versitygw.log").open("wb")
    proc = subprocess.Popen(
        [str(binary), "--port", f"127.0.0.1:{port}", "--cert", str(cert), "--key", str(key), "--quiet",
         "posix", str(backend)],
        env={"PATH": "/usr/bin:/bin", "ROOT_ACCESS_KEY_ID": access, "ROOT_SECRET_ACCESS_KEY": secret},
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    s3 = Store(f"https://127.0.0.1:{port}", ca, access, secret, barman_bin)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                s3.client().list_buckets()
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"versitygw did not start: {(base / 'versitygw.log').read_text()}") from None
                time.sleep(0.1)  # poll interval; the loop re-checks the condition
        s3.client().create_bucket(Bucket=BUCKET)
        yield s3
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        remove_tree(base)


# ---- servers that archive


@dataclass
class Archiving:
    """A throwaway server whose archive_command is archive-wal.sh, with the store settings in its
    environment (as the container's), and its run directory (the error file's place)."""

    server: PgServer
    scripts: Path
    env: dict[str, str] = field(default_factory=dict)
    password: str = PASSWORD

    @property
    def run_dir(self) -> Path:
        return self.server.sockdir

    @property
    def error_file(self) -> Path:
        return self.run_dir / "sampledb-archive-error"

    def start(self, env: dict[str, str] | None = None, archive: bool = True) -> None:
        if env is not None:
            self.env = env
        srv = self.server
        srv.logfile = srv.sockdir / "server.log"
        options = (
            f"-c port={srv.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={srv.sockdir}"
            " -c fsync=off -c synchronous_commit=off -c wal_level=replica"  # full_page_writes: standby backups
        )
        if archive:
            options += f' -c archive_mode=on -c "archive_command=bash {self.scripts}/archive-wal.sh %p"'
        full_env = {"SAMPLEDB_RUN_DIR": str(self.run_dir), **self.env}
        as_postgres(
            [str(srv.bindir / "pg_ctl"), "-D", str(srv.datadir), "-l", str(srv.logfile), "-W", "-o", options, "start"],
            env=full_env,
        )
        srv.wait_ready()

    def restart(self, env: dict[str, str] | None = None, archive: bool = True) -> None:
        self.server.stop()
        self.start(env, archive)

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1", port=self.server.port, user=SUPERUSER, password=self.password, dbname="postgres",
            autocommit=True, connect_timeout=10,
        )  # fmt: skip

    def value(self, query: str) -> Any:
        with self.connect() as conn:
            row = conn.execute(query).fetchone()
            assert row is not None
            return row[0]

    def switch(self) -> str:
        """Close the current WAL segment (after writing a record to it); return its name."""
        with self.connect() as conn:
            conn.execute("SELECT pg_logical_emit_message(false, 'sampledb-test', 'switch')")
            row = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()
            assert row is not None
            conn.execute("SELECT pg_switch_wal()")
            return str(row[0])

    def archived(self, wal: str) -> bool:
        last = self.value("SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver")
        return bool(last) and last[:8] == wal[:8] and last >= wal

    def wait_archived(self, wal: str, timeout: float = ARCHIVE_TIMEOUT) -> None:
        try:
            wait_until(lambda: self.archived(wal), timeout, f"{wal} archived")
        except AssertionError as exc:
            error = self.error_file.read_text() if self.error_file.exists() else "(no error file)"
            raise AssertionError(f"{exc}; error file: {error}; log:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        log = self.server.logfile
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log and log.exists() else ""


@pytest.fixture
def archiving(pg_root: Path, runner: ScriptRunner) -> Iterator[Callable[..., Archiving]]:
    """Make initdb'd servers that archive; all are stopped at the end of the test."""
    made: list[Archiving] = []

    def make(env: dict[str, str], bindir: Path, archive: bool = True) -> Archiving:
        base = private_dir(pg_root, prefix="arch-")
        srv = PgServer(bindir=bindir, datadir=base / "data", sockdir=base)
        srv.initdb()
        item = Archiving(srv, runner.dir)
        made.append(item)
        item.start(env, archive)
        return item

    yield make
    for item in made:
        item.server.stop()


def clone_standby(primary: Archiving, pg_root: Path, bindir: Path) -> PgServer:
    """A hot standby of ``primary`` cloned by pg_basebackup (-R: it streams from it), not started yet."""
    base = private_dir(pg_root, prefix="sb-")
    standby = PgServer(bindir=bindir, datadir=base / "data", sockdir=base)
    as_postgres([str(bindir / "pg_basebackup"), "-D", str(standby.datadir), "-X", "stream", "-c", "fast", "-R",
                 "-d", primary.server.conninfo()])  # fmt: skip
    return standby


def recovered_server(pgdata: Path, bindir: Path) -> PgServer:
    """A PgServer over a recovered data directory (its socket beside it)."""
    return PgServer(bindir=bindir, datadir=pgdata, sockdir=pgdata.parent)


# ---- data: tables, batches, fingerprints

SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, batch int NOT NULL, note text,
                    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE events (id bigserial PRIMARY KEY, batch int NOT NULL, payload jsonb);
"""


def write_batch(conn: psycopg.Connection[Any], batch: int, rows: int = 500) -> None:
    """One committed transaction adding ``rows`` items and ``rows // 4`` events."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO items (id, batch, note) SELECT %s * 100000 + g, %s, 'batch ' || %s || ' ✓ ' || md5(g::text)"
            " FROM generate_series(1, %s) AS g",
            (batch, batch, batch, rows),
        )
        conn.execute(
            "INSERT INTO events (batch, payload) SELECT %s, jsonb_build_object('g', g, 'b', %s)"
            " FROM generate_series(1, %s) AS g",
            (batch, batch, rows // 4),
        )


def fingerprint(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, str]]:
    """Per table: row count and the md5 of its rows' text in key order."""
    conn.execute("SET TimeZone = 'UTC'")
    out = {}
    for table in ("items", "events"):
        row = conn.execute(
            f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY id), '')) FROM {table} AS t"
        ).fetchone()
        assert row is not None
        out[table] = (int(row[0]), str(row[1]))
    return out


def now_utc(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("""SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""")
    value = row.fetchone()
    assert value is not None
    return str(value[0])


# ---- running the scripts


def base_backup(runner: ScriptRunner, src: Archiving, name: str, **extra: str) -> ScriptRun:
    env = {**src.env, **src.server.libpq_env(), "SAMPLEDB_BACKUP_NAME": name, **extra}
    run = runner.run("base-backup.sh", env)
    assert_nothing_secret(run)
    return run


def recover(
    runner: ScriptRunner, pg_root: Path, src: Archiving, base: Path | None = None, **settings: str
) -> tuple[ScriptRun, Path]:
    """recover.sh into $PGDATA = ``base``/data (default: a fresh ``base``, so an absent $PGDATA whose
    parent the postgres user owns), as instance.sh calls it."""
    if base is None:
        base = private_dir(pg_root, prefix="rec-")
        run_dir = base / "run"
        run_dir.mkdir()
        user = os_user()
        os.chown(run_dir, user.pw_uid, user.pw_gid)
    run_dir = base / "run"
    pgdata = base / "data"
    env = {
        **src.env,
        "PGDATA": str(pgdata),
        "POSTGRES_USER": SUPERUSER,
        "POSTGRES_PASSWORD": NEW_PASSWORD,
        "SAMPLEDB_RUN_DIR": str(run_dir),
        "SAMPLEDB_RECOVERY_SERVER": src.env["SAMPLEDB_S3_SERVER"],
        "SAMPLEDB_RECOVERY_DESTINATION": src.env["SAMPLEDB_S3_DESTINATION"],
        **settings,
    }
    env.pop("SAMPLEDB_S3_SERVER")  # the new database's own store settings are not needed to recover
    run = runner.run("recover.sh", env)
    assert_nothing_secret(run)
    return run, pgdata


def assert_nothing_secret(run: ScriptRun) -> None:
    text = run.stdout + run.stderr + json.dumps(run.result)
    for secret in (PASSWORD, NEW_PASSWORD, "Pa55"):
        assert secret not in text


def assert_secrets_absent(store: Store, *texts: str) -> None:
    for text in texts:
        assert store.secret_key not in text
        assert store.access_key not in text


def connect_as(server: PgServer, password: str) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=server.port, user=SUPERUSER, password=password, dbname="postgres",
        autocommit=True, connect_timeout=10,
    )  # fmt: skip


def check_recovered(pgdata: Path, bindir: Path, expected: dict[str, tuple[int, str]]) -> int:
    """Start the recovered cluster normally: a primary with the expected data and the new password
    only; nothing of the recovery is left in its configuration. Returns its timeline."""
    assert not (pgdata.parent / "data.recovering").exists()
    assert not (pgdata / "recovery.signal").exists() and not (pgdata / "standby.signal").exists()
    assert not (pgdata / "sampledb-archive-checked").exists()
    for conf in ("postgresql.conf", "postgresql.auto.conf"):
        text = (pgdata / conf).read_text()
        assert "restore_command" not in text.replace("#restore_command", "")
        assert "recovery_target" not in text.replace("#recovery_target", "")
    recovered = (pgdata / "sampledb-recovered").read_text()
    server = recovered_server(pgdata, bindir)
    server.start()
    try:
        with connect_as(server, NEW_PASSWORD) as conn:
            assert fingerprint(conn) == expected
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
            timeline = conn.execute("SELECT timeline_id FROM pg_control_checkpoint()").fetchone()
            assert timeline is not None
            conn.execute("CREATE TABLE written_after_recovery (id int)")  # a writable primary
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            connect_as(server, PASSWORD).close()
    finally:
        server.stop()
    assert timeline[0] > 1
    assert f"timeline={timeline[0]}" in recovered
    return int(timeline[0])


# ---- tests


def test_archive_failure_is_reported_and_recovers(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_bindir: Path
) -> None:
    good = store.env("creds", "db", pg_bindir)
    src = archiving(good, pg_bindir)
    src.wait_archived(src.switch())  # the first archive (and its check) with the right key
    src.restart({**good, "AWS_SECRET_ACCESS_KEY": "not-the-secret-key"})  # then the Secret changes

    wal = src.switch()
    wait_until(src.error_file.exists, ARCHIVE_TIMEOUT, "the archive error file")
    line = src.error_file.read_text()
    assert len(line.splitlines()) == 1
    stamp, name, reason = line.strip().split(" ", 2)
    assert stamp.endswith("Z") and name == wal
    # the server refuses the signature; it may also close the connection before the upload's end
    assert any(word in reason for word in ("SignatureDoesNotMatch", "EOF occurred")), reason
    assert (src.server.datadir / "pg_wal" / "archive_status" / f"{wal}.ready").exists()
    # the command writes its error file before it exits; the archiver counts the failure once it has
    wait_until(lambda: src.value("SELECT failed_count FROM pg_stat_archiver") > 0, ARCHIVE_TIMEOUT,
               "pg_stat_archiver counting the failure")
    assert src.value("SELECT last_failed_wal FROM pg_stat_archiver") == wal
    assert "sampledb-archive-wal: error: archiving" in src.log_tail(200)
    assert_secrets_absent(store, line, src.log_tail(1000))
    assert not any(k.endswith(f"{wal}.gz") for k in store.keys("creds/"))
    # the operator reads the reason with SQL
    assert src.value(f"SELECT pg_read_file('{src.error_file}')") == line

    src.restart(good)  # the Secret fixed, the pod restarted
    src.wait_archived(wal)
    wait_until(lambda: not src.error_file.exists(), ARCHIVE_TIMEOUT, "the error file to go")
    assert store.client().head_object(Bucket=BUCKET, Key=store.wal_key("creds", "db", wal))["ContentLength"] > 0
    assert not (src.server.datadir / "pg_wal" / "archive_status" / f"{wal}.ready").exists()
    assert (src.server.datadir / "sampledb-archive-checked").read_text() == f"s3://{BUCKET}/creds db\n"


def test_a_second_database_is_refused_the_same_destination(
    store: Store, archiving: Callable[..., Archiving], pg_bindir: Path
) -> None:
    env = store.env("shared", "db", pg_bindir)
    first = archiving(env, pg_bindir)
    first.wait_archived(first.switch())
    etags = {k: store.client().head_object(Bucket=BUCKET, Key=k)["ETag"] for k in store.keys("shared/db/wals/")}
    second = archiving(env, pg_bindir)

    wal = second.switch()
    wait_until(second.error_file.exists, ARCHIVE_TIMEOUT, "the second server's error file")
    reason = second.error_file.read_text()
    assert wal in reason and "already holds WAL of server db" in reason
    assert (second.server.datadir / "pg_wal" / "archive_status" / f"{wal}.ready").exists()
    assert not (second.server.datadir / "sampledb-archive-checked").exists()
    assert second.value("SELECT archived_count FROM pg_stat_archiver") == 0
    next_wal = first.switch()
    first.wait_archived(next_wal)  # the first goes on
    assert not first.error_file.exists()
    client = store.client()
    for key, tag in etags.items():  # nothing of the first's was overwritten (both number segments alike)
        assert client.head_object(Bucket=BUCKET, Key=key)["ETag"] == tag
    assert store.wal_key("shared", "db", next_wal) in store.keys("shared/db/wals/"), first.log_tail()

    # another destination for the second one is checked again, and it is empty: it archives
    second.restart(store.env("shared", "db-two", pg_bindir))
    second.wait_archived(wal)
    assert (second.server.datadir / "sampledb-archive-checked").read_text() == f"s3://{BUCKET}/shared db-two\n"


def test_seconds_per_wal_segment(store: Store, archiving: Callable[..., Archiving], pg_bindir: Path) -> None:
    src = archiving(store.env("speed", "db", pg_bindir), pg_bindir)
    src.wait_archived(src.switch())  # the first archive runs the check; measure the steady state
    segments = 10
    start = time.monotonic()
    with src.connect() as conn:
        for _ in range(segments):
            conn.execute("CREATE TABLE IF NOT EXISTS filler (id int, pad text)")
            conn.execute("INSERT INTO filler SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g")
            last = src.switch()
    src.wait_archived(last, timeout=segments * 10)
    per_segment = (time.monotonic() - start) / segments
    print(f"\n[archive] {segments} segments in {per_segment * segments:.1f} s: {per_segment:.2f} s per segment")
    assert per_segment < 5
    assert len([k for k in store.keys("speed/db/wals/") if k.endswith(".gz")]) >= segments


def test_base_backup_of_a_hot_standby(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_root: Path, pg_bindir: Path
) -> None:
    primary = archiving(store.env("standby", "db", pg_bindir), pg_bindir)
    with primary.connect() as conn:
        conn.execute(SCHEMA)
        write_batch(conn, 1)
        expected = fingerprint(conn)
    standby = clone_standby(primary, pg_root, pg_bindir)
    base = standby.sockdir
    replica = Archiving(standby, runner.dir)
    replica.start(primary.env)
    try:
        assert replica.value("SELECT pg_is_in_recovery()") is True
        env = {**primary.env, **standby.libpq_env(), "SAMPLEDB_BACKUP_NAME": "from-standby"}
        proc = subprocess.Popen(
            runner.command("base-backup.sh"), env={**runner.environment(env), "RESULT_FILE": str(base / "result")},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # the backup's end is on the standby; the primary archives that WAL at its next switch
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            primary.wait_archived(primary.switch())
        _, err = proc.communicate(timeout=60)
        result = json.loads((base / "result").read_text())
        assert proc.returncode == 0, err
        assert result["fromStandby"] is True and result["outcome"] == "created", result
        assert result["endWalArchived"] is True  # waited for the primary to archive the backup's end
        assert "of the standby" in err
        primary.wait_archived(primary.switch())
        run, pgdata = recover(runner, pg_root, primary, SAMPLEDB_RECOVERY_BACKUP="from-standby")
        assert run.returncode == 0, run.stderr
        assert run.result["backupName"] == "from-standby"
        check_recovered(pgdata, pg_bindir, expected)
    finally:
        standby.stop()


def test_a_standby_cloned_before_the_first_archive_continues_the_archive_when_promoted(
    store: Store, runner: ScriptRunner, archiving: Callable[..., Archiving], pg_root: Path, pg_bindir: Path
) -> None:
    """Its data directory has no sampledb-archive-checked (the primary had not archived yet when it
    was cloned); after promotion its archive is checked with --timeline: the former primary's WAL of
    timeline 1 is allowed, and it archives on timeline 2 into the same destination."""
    primary = archiving(store.env("failover", "db", pg_bindir), pg_bindir)
    with primary.connect() as conn:
        conn.execute(SCHEMA)
        write_batch(conn, 1)
    standby = clone_standby(primary, pg_root, pg_bindir)
    assert not (standby.datadir / "sampledb-archive-checked").exists()
    replica = Archiving(standby, runner.dir)
    replica.start(primary.env)
    try:
        with primary.connect() as conn:
            write_batch(conn, 2)
            expected = fingerprint(conn)
        primary.wait_archived(primary.switch())  # the primary's own first archive and check
        assert (primary.server.datadir / "sampledb-archive-checked").exists()
        wait_until(lambda: replica.value("SELECT count(*) FROM items") == expected["items"][0], 30, "replay")
        primary.server.stop()
        assert replica.value("SELECT pg_promote()") is True

        wal = replica.switch()
        assert wal.startswith("00000002")
        replica.wait_archived(wal)
        assert not replica.error_file.exists()
        assert "its WAL archive holds no WAL of timeline 2 or later; checked" in replica.log_tail(500)
        names = {k.rsplit("/", 1)[1] for k in store.keys("failover/db/wals/")}
        assert {"00000002.history.gz", f"{wal}.gz"} <= names
        assert any(n.startswith("00000001") for n in names)  # the former primary's, kept
        with replica.connect() as conn:
            assert fingerprint(conn) == expected
    finally:
        standby.stop()


@pytest.fixture(scope="module")
def small_source(store: Store, runner: ScriptRunner, pg_root: Path, pg_bindir: Path) -> Iterator[dict[str, Any]]:
    """A PostgreSQL 15 source with one base backup and three segments of data after it, each in its
    own WAL segment; the last ends with a restore point. Shared by the tests below, in order."""
    base = private_dir(pg_root, prefix="small-")
    srv = PgServer(bindir=pg_bindir, datadir=base / "data", sockdir=base)
    srv.initdb()
    src = Archiving(srv, runner.dir)
    src.start(store.env("small", "src", pg_bindir))
    try:
        with src.connect() as conn:
            conn.execute(SCHEMA)
        made = base_backup(runner, src, "small-base")
        assert made.returncode == 0, made.stderr
        segments = []
        for batch in (1, 2, 3):
            with src.connect() as conn:
                write_batch(conn, batch)
                if batch == 3:
                    conn.execute("SELECT pg_create_restore_point('small-end')")
            segments.append(src.switch())
        src.wait_archived(segments[-1])
        with src.connect() as conn:
            expected = fingerprint(conn)
        yield {"src": src, "segments": segments, "expected": expected}
    finally:
        srv.stop()


def test_a_recovered_copy_archives_to_a_new_server_name_not_into_its_source(
    store: Store, runner: ScriptRunner, pg_root: Path, pg_bindir: Path, small_source: dict[str, Any]
) -> None:
    src: Archiving = small_source["src"]
    run, pgdata = recover(runner, pg_root, src)
    assert run.returncode == 0, run.stderr
    timeline = run.result["timeline"]
    copy = Archiving(recovered_server(pgdata, pg_bindir), runner.dir, password=NEW_PASSWORD)
    copy.start(store.env("small", "copy", pg_bindir))
    try:
        with copy.connect() as conn:
            assert fingerprint(conn) == small_source["expected"]
        wal = copy.switch()
        assert int(wal[:8], 16) == timeline
        copy.wait_archived(wal)
        names = [k.rsplit("/", 1)[1] for k in store.keys("small/copy/wals/")]
        assert f"{wal}.gz" in names and all(int(n[:8], 16) == timeline for n in names)
        assert not copy.error_file.exists()
        assert (pgdata / "sampledb-archive-checked").read_text() == f"s3://{BUCKET}/small copy\n"

        before = store.keys("small/src/")
        copy.restart(store.env("small", "src", pg_bindir))  # pointed at its source's archive
        wal = copy.switch()
        wait_until(copy.error_file.exists, ARCHIVE_TIMEOUT, "the copy's error file")
        reason = copy.error_file.read_text()
        assert wal in reason and "already holds WAL of server src" in reason
        assert store.keys("small/src/") == before  # nothing written into the source's archive
    finally:
        copy.server.stop()


def test_recovery_through_instance_sh(
    store: Store, runner: ScriptRunner, pg_root: Path, pg_bindir: Path, small_source: dict[str, Any]
) -> None:
    """The production path: instance.sh (role=primary, empty $PGDATA, SAMPLEDB_RECOVERY_SERVER) runs
    recover.sh with the server's own configuration file, then execs the entrypoint."""
    src: Archiving = small_source["src"]
    stub = runner.work / "entrypoint-stub.sh"
    if not stub.exists():
        stub.write_text(STUB_ENTRYPOINT)
        stub.chmod(0o755)
        user = os_user()
        os.chown(stub, user.pw_uid, user.pw_gid)
    inst = Instance("db-0", "sdb_db_0", private_dir(pg_root, prefix="inst-"), runner.dir, stub, bindir=pg_bindir)
    inst.setup()
    inst.set_role("primary")
    env = store.env("small", "restored", pg_bindir)
    try:
        inst.start(inst.port, timeout=180, **env, SAMPLEDB_RECOVERY_SERVER="src",
                   SAMPLEDB_RECOVERY_DESTINATION=src.env["SAMPLEDB_S3_DESTINATION"],
                   SAMPLEDB_RECOVERY_TARGET_NAME="small-end")  # fmt: skip
        lines = inst.script_lines()
        assert any("recovering" in line for line in lines), inst.log()
        assert any("recovered; starting the primary" in line for line in lines), inst.log()
        with inst.connect() as conn:  # the instance's own password (instance tests' PASSWORD)
            assert fingerprint(conn) == small_source["expected"]
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
            assert conn.execute("SHOW cluster_name").fetchone() == ("db-0",)
        log = inst.log()
        assert "sampledb-recover: replayed to restore point 'small-end'" in log
        assert_secrets_absent(store, log)
        assert "Pa55" not in log
        assert not (inst.base / "volume" / "pgdata.recovering").exists()
    finally:
        inst.stop()


def test_recovery_fails_on_a_missing_or_damaged_segment_and_names_it(
    store: Store, runner: ScriptRunner, pg_root: Path, small_source: dict[str, Any]
) -> None:
    """Destructive: runs last among the tests of small_source."""
    src: Archiving = small_source["src"]
    missing = small_source["segments"][1]
    key = store.wal_key("small", "src", missing)
    client = store.client()
    original = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    client.delete_object(Bucket=BUCKET, Key=key)
    run, pgdata = recover(runner, pg_root, src, SAMPLEDB_RECOVERY_TARGET_NAME="small-end")
    assert run.returncode == 6, run.stderr
    message = run.result["message"]
    assert "recovery ended before the configured recovery target" in message
    assert f"WAL file {missing} is not in the archive" in message
    assert message in run.stderr
    assert (pgdata.parent / "data.recovering").exists()  # unfinished: instance.sh's next start redoes it
    # to the end of the archive: replay stops at the gap, which is not the end
    gap, _ = recover(runner, pg_root, src)
    assert gap.returncode == 6, gap.stderr
    assert f"has a gap: WAL file {missing} is missing" in gap.result["message"], gap.result

    client.put_object(Bucket=BUCKET, Key=key, Body=b"garbage, not a gzip stream" * 100)
    run, _ = recover(runner, pg_root, src, SAMPLEDB_RECOVERY_TARGET_NAME="small-end")
    assert run.returncode == 6, run.stderr
    assert f"the restore command could not fetch WAL file {missing}" in run.result["message"], run.result

    client.put_object(Bucket=BUCKET, Key=key, Body=original)
    # repaired: run again over the first, unfinished recovery, which is removed and redone
    run, again = recover(runner, pg_root, src, base=pgdata.parent, SAMPLEDB_RECOVERY_TARGET_NAME="small-end")
    assert run.returncode == 0, run.stderr
    assert again == pgdata
    assert "removed an unfinished recovery of our own" in run.stderr
    check_recovered(pgdata, src.server.bindir, small_source["expected"])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"SAMPLEDB_RECOVERY_TARGET_TIME": "2026-12-05 07:30:00"}, "invalid SAMPLEDB_RECOVERY_TARGET_TIME"),
        ({"SAMPLEDB_RECOVERY_TARGET_TIME": "2026-12-05T07:30:00Z", "SAMPLEDB_RECOVERY_TARGET_LSN": "0/1"},
         "set at most one of"),
        ({"SAMPLEDB_RECOVERY_TARGET_LSN": "latest"}, "invalid SAMPLEDB_RECOVERY_TARGET_LSN"),
        ({"SAMPLEDB_RECOVERY_DESTINATION": "s3://Bad_Bucket"}, "invalid SAMPLEDB_RECOVERY_DESTINATION"),
        ({"SAMPLEDB_S3_ENDPOINT": "ftp://127.0.0.1"}, "invalid SAMPLEDB_S3_ENDPOINT"),
        ({"AWS_SECRET_ACCESS_KEY": ""}, "missing required setting AWS_SECRET_ACCESS_KEY"),
        ({"AWS_CA_BUNDLE": "/nonexistent/ca.pem"}, "is not a readable file"),
        ({"SAMPLEDB_RECOVERY_BACKUP": "no-such-backup"}, "no completed backup named or with id 'no-such-backup'"),
        ({"SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN": "end"}, "invalid SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN"),
        ({"SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN": "0/1", "SAMPLEDB_RECOVERY_TARGET_LSN": "0/1"},
         "SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN chooses the backup for a restore point"),
        ({"SAMPLEDB_RECOVERY_BACKUP_BEFORE_LSN": "0/1"}, "no base backup of src ended at or before the LSN 0/1"),
        ({"SAMPLEDB_RECOVERY_SERVER": "nobody"}, "no completed base backup of nobody"),
    ],
)  # fmt: skip
def test_recovery_refuses_bad_settings(
    *, store: Store, runner: ScriptRunner, pg_root: Path, small_source: dict[str, Any], settings: dict[str, str],
    message: str,
) -> None:  # fmt: skip
    src: Archiving = small_source["src"]
    run, pgdata = recover(runner, pg_root, src, **settings)
    assert run.returncode == 2, run.stderr
    assert message in run.result["message"], run.result
    assert not pgdata.exists()
    assert_secrets_absent(store, run.stdout, run.stderr)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SAMPLEDB_S3_DESTINATION": "bucket/path"}, "invalid SAMPLEDB_S3_DESTINATION"),
        ({"SAMPLEDB_S3_SERVER": ""}, "missing required setting SAMPLEDB_S3_SERVER"),
        ({"AWS_ACCESS_KEY_ID": ""}, "missing required setting AWS_ACCESS_KEY_ID"),
        ({"SAMPLEDB_S3_ADDRESSING_STYLE": "sideways"}, "invalid SAMPLEDB_S3_ADDRESSING_STYLE"),
    ],
)
def test_archive_refuses_bad_settings(
    *, store: Store, archiving: Callable[..., Archiving], pg_bindir: Path, env: dict[str, str], message: str
) -> None:
    src = archiving({**store.env("bad", "db", pg_bindir), **env}, pg_bindir)
    wal = src.switch()
    wait_until(src.error_file.exists, ARCHIVE_TIMEOUT, "the error file")
    reason = src.error_file.read_text()
    assert wal in reason and message in reason
    assert (src.server.datadir / "pg_wal" / "archive_status" / f"{wal}.ready").exists()
    assert_secrets_absent(store, reason, src.log_tail(500))
