"""`kubectl sampledb psql`: psql on the database, through `kubectl port-forward` to its client Service.

The plan (pure): `kubectl port-forward service/<db> :5432` on 127.0.0.1 (kubectl picks a free local
port and prints it), then `psql --host 127.0.0.1 --port <that port> --username <user> --dbname
<database> [extra args]` with PGPASSWORD, user and database from the database's Secret.

Invariants: the password is put only into psql's environment: never into an argv (visible in
`ps`), the plugin's output (`--dry-run` prints a placeholder) or an error message; the
port-forward runs in its own session, so Ctrl-C reaches psql (which cancels the query) and not the
tunnel; the port-forward is always stopped when psql ends, and psql's exit code is the command's.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sampledb_operator.decide.children.desired_config import SECRET_PASSWORD_KEY, SECRET_USERNAME_KEY
from sampledb_operator.model.names import POSTGRES_PORT
from sampledb_operator.model.objects import Obj
from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.session import Target

SECRET_DATABASE_KEY = "database"
LOCALHOST = "127.0.0.1"
FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")
READY_TIMEOUT = 30.0
STDERR_TAIL = 4000


@dataclass(frozen=True)
class Credentials:
    """The connection user, its password (kept out of repr) and the database name."""

    username: str
    database: str
    password: str = field(repr=False)


def credentials_from_secret(secret: Obj, *, database: str | None = None) -> Credentials:
    """The database's credentials from its Secret's data (base64), or ActionError naming the missing key; `database`:
    the database to connect to, for a Secret without one (the superuser's)."""
    data = secret.get("data") or {}
    name = (secret.get("metadata") or {}).get("name")
    values: dict[str, str] = {} if database is None else {SECRET_DATABASE_KEY: database}
    for key in (SECRET_USERNAME_KEY, SECRET_PASSWORD_KEY, *((SECRET_DATABASE_KEY,) if database is None else ())):
        if not data.get(key):
            raise ActionError(f"Secret {name} has no key {key!r}")
        try:
            values[key] = base64.b64decode(data[key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise ActionError(f"Secret {name}: key {key!r} is not base64-encoded UTF-8") from None
    return Credentials(values[SECRET_USERNAME_KEY], values[SECRET_DATABASE_KEY], values[SECRET_PASSWORD_KEY])


@dataclass(frozen=True)
class PsqlPlan:
    """The two commands `psql` runs; `psql_argv(port)` once the local port is known."""

    port_forward: list[str]
    psql: str
    credentials: Credentials
    extra: tuple[str, ...] = ()

    def psql_argv(self, port: int | str) -> list[str]:
        return [self.psql, "--host", LOCALHOST, "--port", str(port), "--username", self.credentials.username,
                "--dbname", self.credentials.database, *self.extra]

    def psql_env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "PGPASSWORD": self.credentials.password}


def plan(kubectl: Sequence[str], target: Target, namespace: str, service: str, credentials: Credentials, *,
         local_port: int | None = None, psql: str = "psql", extra: Sequence[str] = ()) -> PsqlPlan:
    """The port-forward to `service` (a free local port unless `local_port`) and psql through it."""
    argv = [*kubectl, "port-forward", "--namespace", namespace]
    if target.kubeconfig:
        argv += ["--kubeconfig", target.kubeconfig]
    if target.context:
        argv += ["--context", target.context]
    argv += ["--address", LOCALHOST, f"service/{service}", f"{local_port or ''}:{POSTGRES_PORT}"]
    return PsqlPlan(argv, psql, credentials, tuple(extra))


def describe(p: PsqlPlan, secret: str) -> str:
    """What would run (for --dry-run): the password as a placeholder naming its Secret."""
    return (f"{shlex.join(p.port_forward)}\n"
            f"PGPASSWORD=<password from Secret {secret}> {shlex.join(p.psql_argv('<local port>'))}\n")


def run(p: PsqlPlan, *, timeout: float = READY_TIMEOUT) -> int:
    """Open the port-forward, run psql through it (interactive: inherits the terminal), stop the forward."""
    forward = subprocess.Popen(p.port_forward, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    tunnel = _Tunnel(forward)
    try:
        port = tunnel.wait_ready(timeout)
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)   # psql handles Ctrl-C itself
        try:
            return subprocess.run(p.psql_argv(port), env=p.psql_env(dict(os.environ)), check=False).returncode
        finally:
            signal.signal(signal.SIGINT, previous)
    finally:
        tunnel.stop()


class _Tunnel:
    """A running `kubectl port-forward`: its output drained in threads (a full pipe would block it)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.port: int | None = None
        self.ready = threading.Event()
        self.stderr: list[str] = []
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            match = FORWARDING.search(line)
            if match and self.port is None:
                self.port = int(match.group(1))
                self.ready.set()
        self.ready.set()   # ended without forwarding: wake the waiter

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            del self.stderr[:-50]

    def wait_ready(self, timeout: float) -> int:
        if not self.ready.wait(timeout) or self.port is None:
            self._threads[1].join(timeout=1)   # the error kubectl printed before it exited
            detail = "".join(self.stderr)[-STDERR_TAIL:].strip()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1)   # its output ended: it is exiting
            what = "failed" if self.proc.poll() is not None else f"did not start within {timeout:g}s"
            raise ActionError(f"kubectl port-forward {what}" + (f": {detail}" if detail else ""))
        return self.port

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
