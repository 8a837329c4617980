"""`kubectl sampledb pgbench`: PostgreSQL's pgbench against a database, run in its primary's container.

The plan (pure): `kubectl exec` into the primary's pod (status.primary), container `postgres`, running that image's
own `pgbench` over the server's unix socket as the database's user (the container's own connection: no password
leaves the cluster, none is on any command line), `--initialize --scale N` first when asked, then the user's
arguments after `--` (e.g. `--client 8 --time 60`). pgbench's output and exit code are the command's.

Invariants: only the user's own Kubernetes rights are used (pods/exec in that namespace, as `kubectl exec` needs);
the plugin prints nothing secret (--dry-run prints the command, which holds none).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from sampledb_operator.plugin.session import Target

SOCKET_DIR = "/var/run/postgresql"
CONTAINER = "postgres"


@dataclass(frozen=True)
class PgbenchPlan:
    """The `kubectl exec` commands to run, in order (the initialization, then the run)."""

    commands: tuple[tuple[str, ...], ...]


def exec_in(kubectl: Sequence[str], target: Target, namespace: str, pod: str) -> list[str]:
    """`kubectl exec` into `pod`'s postgres container, with the user's kubeconfig and context; the command follows."""
    base = [*kubectl, "exec", "--namespace", namespace]
    if target.kubeconfig:
        base += ["--kubeconfig", target.kubeconfig]
    if target.context:
        base += ["--context", target.context]
    return [*base, pod, "--container", CONTAINER, "--"]


def plan(kubectl: Sequence[str], target: Target, namespace: str, pod: str, *, user: str, database: str,
         scale: int | None = None, extra: Sequence[str] = ()) -> PgbenchPlan:
    """pgbench in `pod`: `--initialize --scale scale` first when `scale`, then a run with `extra` (none when only
    initializing and no arguments were given)."""
    base = [*exec_in(kubectl, target, namespace, pod), "pgbench", "--host", SOCKET_DIR, "--username", user]
    commands: list[tuple[str, ...]] = []
    if scale is not None:
        commands.append((*base, "--initialize", "--scale", str(scale), database))
    if extra or scale is None:
        commands.append((*base, *extra, database))
    return PgbenchPlan(tuple(commands))


def describe(p: PgbenchPlan) -> str:
    """What would run (for --dry-run)."""
    return "".join(shlex.join(c) + "\n" for c in p.commands)


def run(p: PgbenchPlan) -> int:
    """Run the commands in order (their output to the terminal); the first failure's exit code, else 0."""
    for command in p.commands:
        code = subprocess.run(list(command), check=False).returncode
        if code != 0:
            return code
    return 0
