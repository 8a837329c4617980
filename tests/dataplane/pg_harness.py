"""Throwaway PostgreSQL servers and a runner for the data-plane scripts, for tests.

Servers are initdb'd as the unprivileged ``postgres`` system user (PostgreSQL refuses root) in
private directories, listen on a free loopback port and a private unix socket, run with
fsync=off, use SCRAM password auth over TCP, and are waited for by polling pg_isready.
Scripts run as ``postgres`` too, with a clean environment, from a copy of the packaged scripts.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from sampledb_operator.dataplane import SCRIPT_NAMES, script

OS_USER = "postgres"
SUPERUSER = "postgres"
PASSWORD = "s3cr3t-Pa55-never-printed"
START_TIMEOUT = 30.0
DEBIAN_ROOT = Path("/usr/lib/postgresql")
EXTRA_ROOT = Path("/opt/sampledb-pg")
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


def os_user() -> pwd.struct_passwd:
    """The ``postgres`` system user (created by Debian's postgresql-common)."""
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError as exc:  # pragma: no cover - environment problem
        raise RuntimeError("no 'postgres' system user: run hack/install-postgres.sh") from exc


def bindir_for(major: int) -> Path | None:
    """The binaries of PostgreSQL ``major`` if installed: Debian's layout, else the extra major
    that hack/install-postgres.sh unpacks under EXTRA_ROOT."""
    for root in (DEBIAN_ROOT, EXTRA_ROOT):
        path = root / str(major) / "bin"
        if (path / "postgres").exists():
            return path
    return None


def default_bindir() -> Path:
    """The bindir that ``pg_config --bindir`` reports, else the newest Debian one."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True)
        path = Path(out.stdout.strip())
        if (path / "initdb").exists():
            return path
    except (OSError, subprocess.CalledProcessError):
        pass
    majors = sorted(installed_majors())
    if not majors:
        raise RuntimeError("no PostgreSQL server binaries: run hack/install-postgres.sh")
    found = bindir_for(majors[-1])
    assert found is not None
    return found


def installed_majors() -> list[int]:
    """Majors with server binaries under DEBIAN_ROOT or EXTRA_ROOT."""
    found = {
        int(p.name) for root in (DEBIAN_ROOT, EXTRA_ROOT) if root.is_dir() for p in root.iterdir() if p.name.isdigit()
    }
    return sorted(m for m in found if bindir_for(m))


def as_postgres(
    args: list[str], env: Mapping[str, str] | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` as the postgres system user with exactly ``env`` (plus PATH/LANG defaults)."""
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
    full_env.update(env or {})
    cmd = [RUNUSER, "-u", OS_USER, "--", *args]
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
    return proc


def private_dir(parent: Path | None = None, prefix: str = "sampledb-dp-") -> Path:
    """A new 0700 directory owned by the postgres user."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    user = os_user()
    os.chown(path, user.pw_uid, user.pw_gid)
    path.chmod(0o700)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PgServer:
    """One throwaway server: its data directory, binaries, port and socket directory."""

    bindir: Path
    datadir: Path
    sockdir: Path
    port: int = field(default_factory=free_port)
    logfile: Path | None = None

    @property
    def major(self) -> int:
        return int((self.datadir / "PG_VERSION").read_text().strip())

    def libpq_env(self, dbname: str = "postgres") -> dict[str, str]:
        """The PG* environment a Job would get (TCP with password, like over a Service)."""
        return {
            "PGHOST": "127.0.0.1",
            "PGPORT": str(self.port),
            "PGUSER": SUPERUSER,
            "PGPASSWORD": PASSWORD,
            "PGDATABASE": dbname,
        }

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} password={PASSWORD} dbname={dbname}"

    def connect(self, dbname: str = "postgres", autocommit: bool = True) -> psycopg.Connection[Any]:
        return psycopg.connect(self.conninfo(dbname), autocommit=autocommit, connect_timeout=10)

    def initdb(self) -> None:
        pwfile = self.sockdir / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        user = os_user()
        os.chown(pwfile, user.pw_uid, user.pw_gid)
        as_postgres(
            [
                str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", SUPERUSER,
                f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
            ]
        )  # fmt: skip
        pwfile.unlink()

    def start(self) -> None:
        self.logfile = self.sockdir / "server.log"
        options = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.sockdir}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        as_postgres(
            [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.logfile), "-W",
             "-o", options, "start"]
        )  # fmt: skip
        self.wait_ready()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Poll pg_isready until the server accepts connections or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        cmd = [str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"]
        while True:
            if subprocess.run(cmd, check=False, capture_output=True).returncode == 0:
                return
            if time.monotonic() > deadline:
                log = self.logfile.read_text() if self.logfile and self.logfile.exists() else ""
                raise RuntimeError(f"server on port {self.port} not ready after {timeout}s\n{log}")
            time.sleep(0.05)  # poll interval, not synchronisation: the loop re-checks the condition

    def stop(self) -> None:
        pid_file = self.datadir / "postmaster.pid"
        if pid_file.exists():
            as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"])

    def create_database(self, name: str) -> str:
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name


def new_server(bindir: Path, parent: Path) -> PgServer:
    """initdb and start a server under ``parent`` (a postgres-owned directory)."""
    base = private_dir(parent, prefix="srv-")
    server = PgServer(bindir=bindir, datadir=base / "data", sockdir=base)
    server.initdb()
    server.start()
    return server


@dataclass(frozen=True)
class ScriptRun:
    """The outcome of one data-plane script run."""

    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any]


class ScriptRunner:
    """Runs the packaged scripts, copied into a postgres-owned directory (like a ConfigMap mount)."""

    def __init__(self, parent: Path, bindir: Path) -> None:
        self.dir = private_dir(parent, prefix="scripts-")
        self.bindir = bindir
        user = os_user()
        for name in SCRIPT_NAMES:
            path = self.dir / name
            path.write_text(script(name), encoding="utf-8")
            os.chown(path, user.pw_uid, user.pw_gid)
        self.work = private_dir(parent, prefix="work-")

    def command(self, name: str) -> list[str]:
        return [RUNUSER, "-u", OS_USER, "--", "bash", str(self.dir / name)]

    def environment(self, env: Mapping[str, str], bindir: Path | None = None) -> dict[str, str]:
        path_dirs = f"{bindir or self.bindir}:/usr/local/bin:/usr/bin:/bin"
        return {"PATH": path_dirs, "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": str(self.work), **env}

    def run(
        self, name: str, env: Mapping[str, str], bindir: Path | None = None, use_result_file: bool = True
    ) -> ScriptRun:
        full_env = self.environment(env, bindir)
        result_file = self.work / f"result-{name}-{time.monotonic_ns()}.json"
        if use_result_file:
            full_env["RESULT_FILE"] = str(result_file)
        proc = as_postgres(["bash", str(self.dir / name)], env=full_env, check=False, timeout=300)
        if use_result_file:
            text = result_file.read_text() if result_file.exists() else ""
        else:
            lines = proc.stdout.strip().splitlines()
            text = lines[-1] if lines else ""
        result: dict[str, Any] = json.loads(text) if text.strip() else {}
        return ScriptRun(proc.returncode, proc.stdout, proc.stderr, result)


def safe_name(text: str) -> str:
    """A database name derived from a test name."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())[:50]


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
