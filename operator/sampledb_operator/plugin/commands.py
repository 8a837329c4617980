"""The plugin's commands against the API server; each returns its exit code and writes its output.

Invariants: each command reads what it needs, then makes at most one write (a create or a merge
patch, both with the field manager `kubectl-sampledb`), except the optional --wait polls, which
only read; --dry-run makes no write and prints what would be sent; output lines about an object
name it as kubectl does (`sampledbbackup.sampledb.io/<name> created`). `switchover` makes its one
write conditional on the resourceVersion its choice was made on, and chooses again (at most
SWITCHOVER_ATTEMPTS times) when the SampleDB changed in between; `logs` and `report` only read, and
`report`'s one write is its archive file (mode 0600: it describes the database's setup).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

import yaml

from sampledb_operator.decide.children.desired_config import DEFAULT_DATABASE
from sampledb_operator.decide.replicas.replication import SWITCHOVER_ANNOTATION
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.kube.resources import SAMPLEDB, SAMPLEDBBACKUP, SECRET, SERVICE
from sampledb_operator.model.names import client_service_name, secret_name, superuser_secret_name
from sampledb_operator.plugin import actions, instances, pgbench, podlog, psql, render, support
from sampledb_operator.plugin.report import gather
from sampledb_operator.plugin.session import Session, Target, open_session
from sampledb_operator.plugin.support_read import gather_support
from sampledb_operator.plugin.version import __version__

DB_REF, BACKUP_REF = "sampledb.sampledb.io", "sampledbbackup.sampledb.io"
POLL_SECONDS = 2.0
SWITCHOVER_ATTEMPTS = 3
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


async def status(target: Target, name: str, out: TextIO = sys.stdout, now: Clock = utcnow) -> int:
    async with open_session(target) as session:
        report = await gather(session, name)
    out.write(render.render_status(report, now()))
    return 0


async def backup(target: Target, db: str, *, name: str | None = None, dry_run: bool = False, wait: bool = False,
                 wait_seconds: float = 600.0, out: TextIO = sys.stdout, now: Clock = utcnow) -> int:
    async with open_session(target) as session:
        await session.get(SAMPLEDB, db)   # NotFound: say so before creating a backup that would wait forever
        obj = actions.backup_object(db, session.namespace, now(), name)
        if dry_run:
            out.write(yaml.safe_dump(obj, sort_keys=False))
            return 0
        created = await session.create(SAMPLEDBBACKUP, obj)
        backup_name = created["metadata"]["name"]
        out.write(f"{BACKUP_REF}/{backup_name} created\n")
        if not wait:
            out.write(f"Follow it with: kubectl get sdbb {backup_name} -n {session.namespace} -w\n")
            return 0
        return await _wait_backup(session, backup_name, wait_seconds, out)


async def _wait_backup(session: Session, name: str, wait_seconds: float, out: TextIO) -> int:
    shown = None
    deadline = time.monotonic() + wait_seconds
    while True:
        st = (await session.get(SAMPLEDBBACKUP, name)).get("status") or {}
        line = f"{st.get('phase') or 'Pending'}" + (f": {st['message']}" if st.get("message") else "")
        if line != shown:
            out.write(f"{BACKUP_REF}/{name} {line}\n")
            out.flush()
            shown = line
        if st.get("phase") in {"Succeeded", "Failed"}:
            return 0 if st["phase"] == "Succeeded" else 1
        if time.monotonic() >= deadline:
            out.write(f"still {st.get('phase') or 'Pending'} after {wait_seconds:g}s; it goes on without waiting\n")
            return 1
        await asyncio.sleep(POLL_SECONDS)


async def restore(target: Target, backup_name: str, new_name: str, *, version: str | None = None,
                  storage_size: str | None = None, dry_run: bool = False, wait: bool = False,
                  wait_seconds: float = 1800.0, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    async with open_session(target) as session:
        backup_obj = await session.get(SAMPLEDBBACKUP, backup_name)
        source_name = str((backup_obj.get("spec") or {}).get("database") or "")
        source = await session.get_or_none(SAMPLEDB, source_name) if source_name else None
        obj = actions.restore_object(backup_obj, source, new_name, session.namespace, version=version,
                                     storage_size=storage_size)
        phase = (backup_obj.get("status") or {}).get("phase") or "Pending"
        if phase != "Succeeded":
            err.write(f"note: SampleDBBackup {backup_name} is {phase}; the restore starts once it has Succeeded\n")
        if dry_run:
            out.write(yaml.safe_dump(obj, sort_keys=False))
            return 0
        await session.create(SAMPLEDB, obj)
        out.write(f"{DB_REF}/{new_name} created, restoring SampleDBBackup {backup_name} (of {source_name},"
                  f" PostgreSQL {obj['spec']['version']})\n")
        if not wait:
            out.write(f"Follow it with: kubectl sampledb status {new_name} -n {session.namespace}\n")
            return 0
        return await _wait_restored(session, new_name, wait_seconds, out)


async def recover(target: Target, source: str, new_name: str, *, store_from: str | None = None,
                  time: str | None = None, restore_point: str | None = None, lsn: str | None = None,
                  version: str | None = None, storage_size: str | None = None, path: str | None = None,
                  dry_run: bool = False, wait: bool = False, wait_seconds: float = 3600.0,
                  out: TextIO = sys.stdout) -> int:
    async with open_session(target) as session:
        store_db = await session.get_or_none(SAMPLEDB, store_from or source)
        if store_db is None:
            raise actions.ActionError(f"SampleDB {store_from or source} does not exist in {session.namespace}: name a"
                              " SampleDB that archives to the same store with --store-from (and the source's"
                              " --path), or write spec.recovery by hand (docs/user-guide.md)")
        obj = actions.recovery_object(source, store_db, new_name, session.namespace, time=time,
                                      restore_point=restore_point, lsn=lsn, version=version,
                                      storage_size=storage_size, path=path)
        if dry_run:
            out.write(yaml.safe_dump(obj, sort_keys=False))
            return 0
        await session.create(SAMPLEDB, obj)
        rec = obj["spec"]["recovery"]
        to = rec.get("targetTime") or rec.get("targetName") or rec.get("targetLSN") or "the end of its archive"
        out.write(f"{DB_REF}/{new_name} created, recovering {source} from"
                  f" s3://{rec['objectStore']['bucket']}/{rec['objectStore']['path']}/{source} to {to}\n")
        if not wait:
            out.write(f"Follow it with: kubectl sampledb status {new_name} -n {session.namespace}\n")
            return 0
        return await _wait_restored(session, new_name, wait_seconds, out, done="Recovered", failed="RecoveryFailed")


async def _wait_restored(session: Session, name: str, wait_seconds: float, out: TextIO, *, done: str = "Restored",
                         failed: str = "RestoreFailed") -> int:
    shown = None
    deadline = time.monotonic() + wait_seconds
    while True:
        db = await session.get(SAMPLEDB, name)
        init, ready = render.condition(db, "Initialized"), render.condition(db, "Ready")
        phase = (db.get("status") or {}).get("phase") or "(no status yet)"
        line = f"{phase}, Initialized: {init.get('reason') or '-'}"
        if line != shown:
            out.write(f"{DB_REF}/{name} {line}\n")
            out.flush()
            shown = line
        if ready.get("status") == "True" and init.get("reason") == done:
            return 0
        if init.get("reason") == failed:
            out.write(f"{'recovery' if done == 'Recovered' else 'restore'} failed: {init.get('message')}\n")
            return 1
        if time.monotonic() >= deadline:
            out.write(f"not restored after {wait_seconds:g}s; it goes on without waiting\n")
            return 1
        await asyncio.sleep(POLL_SECONDS)


async def upgrade(target: Target, db: str, version: str, *, image: str | None = None, default_image: bool = False,
                  dry_run: bool = False, out: TextIO = sys.stdout) -> int:
    async with open_session(target) as session:
        obj = await session.get(SAMPLEDB, db)
        patch = actions.upgrade_patch(obj, version, image=image, default_image=default_image)
        if patch is None:
            out.write(f"{DB_REF}/{db} already asks for version {version}\n")
            return 0
        if dry_run:
            out.write(json.dumps(patch) + "\n")
            return 0
        await session.merge_patch(SAMPLEDB, db, patch)
        namespace = session.namespace
    spec, current = obj.get("spec") or {}, (obj.get("status") or {}).get("currentVersion")
    changes = [f"spec.{key} {spec.get(key) or '(default)'} -> {value if value is not None else '(default)'}"
               for key, value in patch["spec"].items()]
    kind = actions.upgrade_kind(current, version)
    what = {"major": f"major upgrade from the running {current}: a pre-upgrade backup, then an upgrade Job,"
                     " then a rollout",
            "minor": f"minor upgrade from the running {current}: a rollout (after a pre-upgrade backup when"
                     " spec.upgrade.backupBeforeMinor is true)",
            "unknown": "the database has not run yet: it starts on this version"}[kind]
    if current == version:
        what = f"already running {version}: the StatefulSet rolls to the new image"
    out.write(f"{DB_REF}/{db}: {', '.join(changes)}\n{what}\n"
              f"Follow it with: kubectl sampledb status {db} -n {namespace}\n")
    return 0


async def verify_recovery(target: Target, db: str, *, dry_run: bool = False, wait: bool = False,
                          wait_seconds: float = 3600.0, out: TextIO = sys.stdout, now: Clock = utcnow) -> int:
    """Ask for a verification that the object store restores `db` (a new value of sampledb.io/verify-recovery)
    and, with --wait, follow it until status.archive.lastVerification answers that request."""
    async with open_session(target) as session:
        patch, request = actions.verify_recovery_patch(await session.get(SAMPLEDB, db), now())
        if dry_run:
            out.write(json.dumps(patch) + "\n")
            return 0
        await session.merge_patch(SAMPLEDB, db, patch)
        out.write(f"{DB_REF}/{db} annotated: a verification of a recovery from its object store starts\n")
        if not wait:
            out.write(f"Follow it with: kubectl sampledb status {db} -n {session.namespace}\n")
            return 0
        deadline = time.monotonic() + wait_seconds
        while True:
            archive = ((await session.get(SAMPLEDB, db)).get("status") or {}).get("archive") or {}
            last = archive.get("lastVerification") or {}
            if last.get("request") == request:
                word = "verified" if last.get("verified") else f"failed ({last.get('reason')})"
                out.write(f"{word}: {last.get('message')}\n")
                return 0 if last.get("verified") else 1
            if time.monotonic() >= deadline:
                out.write(f"not finished after {wait_seconds:g}s; it goes on without waiting\n")
                return 1
            await asyncio.sleep(POLL_SECONDS)


async def set_paused(target: Target, db: str, paused: bool, *, out: TextIO = sys.stdout) -> int:
    word = "paused" if paused else "resumed"
    async with open_session(target) as session:
        patch = actions.paused_patch(await session.get(SAMPLEDB, db), paused)
        if patch is None:
            out.write(f"{DB_REF}/{db} already {'paused' if paused else 'not paused'}\n")
            return 0
        await session.merge_patch(SAMPLEDB, db, patch)
    out.write(f"{DB_REF}/{db} {word}" + (": the operator changes nothing until `resume`\n" if paused else "\n"))
    return 0


async def psql_plan(target: Target, db: str, *, kubectl: list[str], psql_path: str, local_port: int | None,
                    extra: list[str], superuser: bool = False) -> tuple[psql.PsqlPlan, str]:
    """The psql plan for `db` and the name of the Secret its password comes from: the application's credentials, or
    with `superuser` the superuser's Secret (to its database `app`)."""
    async with open_session(target) as session:
        obj = await session.get(SAMPLEDB, db)
        secret = str((obj.get("status") or {}).get("secretName") or secret_name(db))
        if superuser:
            secret = superuser_secret_name(db)
        service = client_service_name(db)
        await session.get(SERVICE, service)
        try:
            creds = psql.credentials_from_secret(await session.get(SECRET, secret),
                                                 database=DEFAULT_DATABASE if superuser else None)
        except NotFound:
            what = "the superuser" if superuser else "the credentials"
            raise actions.ActionError(f"Secret {secret} ({what} of {db}) does not exist") from None
        namespace = session.namespace
    return psql.plan(kubectl, target, namespace, service, creds, local_port=local_port, psql=psql_path,
                     extra=extra), secret


async def pgbench_plan(target: Target, db: str, *, kubectl: list[str], scale: int | None,
                       extra: list[str]) -> pgbench.PgbenchPlan:
    """The pgbench plan for `db`: in its primary's pod, as its user (from its Secret), on its database."""
    async with open_session(target) as session:
        obj = await session.get(SAMPLEDB, db)
        status = obj.get("status") or {}
        primary = status.get("primary")
        if not primary:
            raise actions.ActionError(f"{db} has no primary yet (phase {status.get('phase') or 'unknown'})")
        secret = str(status.get("secretName") or secret_name(db))
        try:
            creds = psql.credentials_from_secret(await session.get(SECRET, secret))
        except NotFound:
            raise actions.ActionError(f"Secret {secret} (the credentials of {db}) does not exist") from None
        namespace = session.namespace
    return pgbench.plan(kubectl, target, namespace, str(primary), user=creds.username, database=creds.database,
                        scale=scale, extra=extra)


async def switchover(target: Target, db: str, *, to: str | None = None, dry_run: bool = False, wait: bool = False,
                     wait_seconds: float = 300.0, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Ask the operator to promote a standby of `db` (the annotation sampledb.io/switchover): `to`, else the
    ready standby with the least lag; with --wait, follow it until status.primary is that standby."""
    async with open_session(target) as session:
        for attempt in range(SWITCHOVER_ATTEMPTS):
            obj = await session.get(SAMPLEDB, db)
            choice = instances.choose_switchover(obj, to)
            if dry_run:
                err.write(f"{choice.describe()}\n" + (f"note: {choice.note}\n" if choice.note else ""))
                out.write(json.dumps(instances.switchover_patch(choice.target)) + "\n")
                return 0
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "") or None
            try:
                await session.merge_patch(SAMPLEDB, db, instances.switchover_patch(choice.target, version))
                break
            except Conflict:
                if attempt == SWITCHOVER_ATTEMPTS - 1:
                    raise
        out.write(f"{DB_REF}/{db} annotated {SWITCHOVER_ANNOTATION}={choice.target}: {choice.describe()}\n")
        if choice.note:
            out.write(f"note: {choice.note}\n")
        if not wait:
            out.write(f"Follow it with: kubectl sampledb status {db} -n {session.namespace}\n")
            return 0
        return await _wait_switchover(session, db, choice.target, wait_seconds, out)


async def _wait_switchover(session: Session, db: str, to: str, wait_seconds: float, out: TextIO) -> int:
    shown = None
    deadline = time.monotonic() + wait_seconds
    while True:
        progress = instances.switchover_progress(await session.get(SAMPLEDB, db), to)
        if progress.line != shown:
            out.write(f"{DB_REF}/{db} {progress.line}\n")
            out.flush()
            shown = progress.line
        if progress.done:
            out.write(f"{DB_REF}/{db} switched over: {to} is the primary\n")
            return 0
        if progress.withdrawn:
            out.write(f"the request {SWITCHOVER_ANNOTATION}={to} was withdrawn or replaced before {to} became the"
                      " primary\n")
            return 1
        if time.monotonic() >= deadline:
            out.write(f"{to} is not the primary after {wait_seconds:g}s; the switchover goes on without waiting\n")
            return 1
        await asyncio.sleep(POLL_SECONDS)


async def logs(target: Target, db: str, *, instance: str | None = None, previous: bool = False,
               tail: int | None = None, follow: bool = False, out: TextIO = sys.stdout) -> int:
    """The PostgreSQL container's log of `db`'s primary (or of `instance`); with `follow`, until the stream ends
    or the command is interrupted."""
    async with open_session(target) as session:
        pod = instances.log_pod(await session.get(SAMPLEDB, db), instance)
        if follow:
            await podlog.follow_log(session, pod, out, previous=previous, tail=tail)
            return 0
        text = await podlog.read_log(session, pod, previous=previous, tail=tail)
    out.write(text)
    out.flush()
    return 0


async def support_report(target: Target, db: str, *, output: str | None = None, log_lines: int = 500,
                         out: TextIO = sys.stdout, now: Clock = utcnow) -> int:
    """Write a support archive (.tar.gz) about `db` and print what is in it."""
    taken_at = now()
    async with open_session(target) as session:
        data, masks = await gather_support(session, db, taken_at=taken_at, log_lines=log_lines,
                                           plugin_version=__version__)
    root = support.archive_root(data.namespace, db, taken_at)
    files = support.members(data, masks)
    blob = support.archive_bytes(root, files, taken_at)
    path = output or f"{root}.tar.gz"
    write_private(path, blob)
    out.write(support.summary(path, root, files, len(blob), problems=data.problems, masks=masks))
    return 0


def write_private(path: str, data: bytes) -> None:
    """Write `data` to `path`, readable by its owner only (an existing file is replaced)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise actions.ActionError(f"cannot write {path}: {exc.strerror or exc}") from None
