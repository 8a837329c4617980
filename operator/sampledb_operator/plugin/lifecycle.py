"""`kubectl sampledb restart | reload | hibernate | wake`: a database's instances restarted, its configuration
reloaded, every instance stopped with its volumes kept, and started again.

restart, hibernate and wake ask the operator through annotations on the SampleDB (decide/labels.RESTART_ANNOTATION: a
new value rolls every instance's pod; decide/replicas/hibernation.HIBERNATION_ANNOTATION: on / removed) and, with
--wait, follow the status until it is done. reload needs no operator: `kubectl exec` into each running instance's
container runs psql over the server's unix socket as the database's user (as `pgbench` does: no password leaves the
cluster) with SELECT pg_reload_conf(), and says which settings still wait for a restart.

The patches, the readiness checks and the reload commands are pure functions (tested without a cluster); the
coroutines at the end do the I/O. Invariant: only the user's own Kubernetes rights are used; nothing secret is
printed (the commands hold none).
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO

from sampledb_operator.decide.labels import (
    COMPONENT_LABEL,
    DATABASE_LABEL,
    RESTART_ANNOTATION,
    RESTARTED_FOR_ANNOTATION,
)
from sampledb_operator.decide.replicas.hibernation import HIBERNATION_ANNOTATION, ON
from sampledb_operator.kube.errors import NotFound
from sampledb_operator.kube.resources import POD, SAMPLEDB, SECRET
from sampledb_operator.model.names import secret_name, superuser_secret_name
from sampledb_operator.model.objects import Obj, condition_true
from sampledb_operator.plugin import pgbench, psql
from sampledb_operator.plugin.actions import ActionError
from sampledb_operator.plugin.commands import DB_REF
from sampledb_operator.plugin.session import Session, Target, open_session

POLL_SECONDS = 2.0
RELOAD_SQL = ("SELECT pg_reload_conf(), coalesce((SELECT string_agg(name, ',' ORDER BY name) FROM pg_settings"
              " WHERE pending_restart), '')")


def _ready(obj: Obj) -> bool:
    return condition_true(obj, "Ready")


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def restart_patch(now: datetime) -> Obj:
    """The annotation whose new value restarts every instance (the time asked, RFC 3339)."""
    return {"metadata": {"annotations": {RESTART_ANNOTATION: now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}}}


def restarted(obj: Obj, pods: Sequence[Obj], token: str) -> bool:
    """Every instance runs a pod made for the restart `token` and is ready, and the database is Ready."""
    ready = _ready(obj)
    wanted = int((obj.get("spec") or {}).get("replicas") or 1)
    fresh = [p for p in pods if ((p.get("metadata") or {}).get("annotations") or {}).get(RESTARTED_FOR_ANNOTATION)
             == token and _ready(p) and not _terminating(p)]
    return ready and len(fresh) >= wanted and len(fresh) == len(pods)


def hibernation_patch(on: bool) -> Obj:
    """On: the annotation that stops every instance; off: its removal."""
    return {"metadata": {"annotations": {HIBERNATION_ANNOTATION: ON if on else None}}}


def hibernated(obj: Obj, pods: Sequence[Obj]) -> bool:
    """The status says Hibernated and no pod of the database is left."""
    return (obj.get("status") or {}).get("phase") == "Hibernated" and not pods


def awake(obj: Obj) -> bool:
    """Ready again (every instance need not be: the database answers)."""
    return _ready(obj)


@dataclass(frozen=True)
class ReloadPlan:
    """One `kubectl exec` per running instance, by pod name."""

    commands: tuple[tuple[str, tuple[str, ...]], ...]


def reload_plan(kubectl: Sequence[str], target: Target, namespace: str, pods: Sequence[str], *, user: str,
                database: str) -> ReloadPlan:
    """psql in each pod's postgres container over the unix socket: reload, and the settings pending a restart."""
    return ReloadPlan(tuple((pod, (*pgbench.exec_in(kubectl, target, namespace, pod), "psql", "-X", "-qAt", "-v",
                                   "ON_ERROR_STOP=1", "--host", pgbench.SOCKET_DIR, "--username", user, "--dbname",
                                   database, "-F", "|", "-c", RELOAD_SQL)) for pod in sorted(pods)))


def describe(plan: ReloadPlan) -> str:
    """What would run (for --dry-run)."""
    return "".join(shlex.join(c) + "\n" for _pod, c in plan.commands)


def reload_line(pod: str, answer: str) -> str:
    """What psql's answer ("t|pending,names") means, for one instance."""
    ok, _, pending = answer.strip().partition("|")
    if ok != "t":
        return f"{pod}: the server did not take the signal ({answer.strip() or 'no answer'})"
    return f"{pod}: reloaded" + (f"; waiting for a restart: {pending.replace(',', ', ')}" if pending else "")


def run_reload(plan: ReloadPlan, out: TextIO = sys.stdout, err: TextIO = sys.stderr, timeout: float = 60.0) -> int:
    """Run each instance's reload; the first failure's exit code, else 0."""
    code = 0
    for pod, command in plan.commands:
        try:
            done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            err.write(f"{pod}: no answer within {timeout:.0f}s\n")
            code = code or 1
            continue
        if done.returncode != 0:
            err.write(f"{pod}: {done.stderr.strip() or f'exit {done.returncode}'}\n")
            code = code or done.returncode
            continue
        out.write(reload_line(pod, done.stdout) + "\n")
    return code


# ---------------------------------------------------------------------------------------------------------- I/O

async def _pods(session: Session, db: str) -> list[Obj]:
    return await session.list(POD, label_selector=f"{DATABASE_LABEL}={db},{COMPONENT_LABEL}=database")


async def _follow(session: Session, db: str, done: Callable[[Obj, list[Obj]], bool], what: str, *,
                  wait_seconds: float, out: TextIO) -> int:
    deadline = time.monotonic() + wait_seconds
    while True:
        obj = await session.get(SAMPLEDB, db)
        pods = await _pods(session, db)
        if done(obj, pods):
            out.write(f"{DB_REF}/{db} {what}\n")
            return 0
        if time.monotonic() >= deadline:
            status = obj.get("status") or {}
            out.write(f"{DB_REF}/{db}: not {what} after {wait_seconds:.0f}s (phase {status.get('phase')},"
                      f" {len(pods)} pod(s))\n")
            return 1
        await asyncio.sleep(POLL_SECONDS)


async def restart(target: Target, db: str, *, wait: bool = False, wait_seconds: float = 600.0,
                  now: datetime | None = None, out: TextIO = sys.stdout) -> int:
    """Ask the operator to restart every instance of `db`; with `wait`, until each runs a new pod and is ready."""
    patch = restart_patch(now or datetime.now(UTC))
    token = patch["metadata"]["annotations"][RESTART_ANNOTATION]
    async with open_session(target) as session:
        obj = await session.get(SAMPLEDB, db)
        if (obj.get("status") or {}).get("phase") == "Hibernated":
            raise ActionError(f"{db} is hibernated: nothing runs to restart (kubectl sampledb wake {db})")
        await session.merge_patch(SAMPLEDB, db, patch)
        out.write(f"{DB_REF}/{db} annotated {RESTART_ANNOTATION}={token}: every instance restarts\n")
        if not wait:
            return 0
        return await _follow(session, db, lambda o, p: restarted(o, p, token), "restarted", wait_seconds=wait_seconds,
                             out=out)


async def hibernate(target: Target, db: str, on: bool, *, wait: bool = False, wait_seconds: float = 600.0,
                    out: TextIO = sys.stdout) -> int:
    """Ask the operator to stop every instance of `db` (volumes kept), or to start them again."""
    async with open_session(target) as session:
        await session.get(SAMPLEDB, db)
        await session.merge_patch(SAMPLEDB, db, hibernation_patch(on))
        if on:
            out.write(f"{DB_REF}/{db} annotated {HIBERNATION_ANNOTATION}={ON}: every instance stops, the volumes"
                      " stay (kubectl sampledb wake to start them)\n")
        else:
            out.write(f"{DB_REF}/{db}: {HIBERNATION_ANNOTATION} removed: the instances start\n")
        if not wait:
            return 0
        if on:
            return await _follow(session, db, hibernated, "hibernated", wait_seconds=wait_seconds, out=out)
        return await _follow(session, db, lambda o, _p: awake(o), "ready", wait_seconds=wait_seconds, out=out)


async def reload_plan_for(target: Target, db: str, *, kubectl: list[str]) -> ReloadPlan:
    """The reload of every running instance of `db`, as its superuser (pg_reload_conf is the superuser's; the user of
    the superuser Secret, else of the credentials Secret, as before that Secret existed), on its database."""
    async with open_session(target) as session:
        obj = await session.get(SAMPLEDB, db)
        running = [str(p["metadata"]["name"]) for p in await _pods(session, db) if _ready(p) and not _terminating(p)]
        if not running:
            phase = (obj.get("status") or {}).get("phase") or "unknown"
            raise ActionError(f"{db} has no running instance to reload (phase {phase})")
        secret = str((obj.get("status") or {}).get("secretName") or secret_name(db))
        creds = psql.credentials_from_secret(await session.get(SECRET, secret))
        try:
            superuser = psql.credentials_from_secret(await session.get(SECRET, superuser_secret_name(db)),
                                                     database=creds.database)
        except NotFound:
            superuser = creds
        return reload_plan(kubectl, target, session.namespace, running, user=superuser.username,
                           database=creds.database)
