"""`kubectl sampledb report`: the reads behind the support archive (I/O; what it holds is plugin/support.py).

Invariants:
- only reads, each with a timeout (the session's verbs, the client's request timeout, podlog.READ_TIMEOUT
  for a log), logs bounded in lines and bytes;
- the SampleDB must exist (NotFound propagates); anything else that cannot be read (forbidden, absent, a
  pod whose log the API server cannot reach) becomes one line of `problems`, and the archive is still made;
- a Secret is reduced to its name and key names (support.reduce_secret) as soon as it is read; its values
  leave this module only as Masks, so that the archive can mask them wherever they appear;
- the children are every object of report.CHILD_KINDS labelled sampledb.io/database=<name> (the Jobs'
  pods too); the instance logs are those of the database pods (app.kubernetes.io/component=database).
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.kube.errors import ApiError, KubeError, NotFound
from sampledb_operator.kube.resources import EVENT, SAMPLEDB, SAMPLEDBBACKUP, SECRET, Resource
from sampledb_operator.model.objects import Obj
from sampledb_operator.plugin import podlog, render
from sampledb_operator.plugin.instances import instances_of
from sampledb_operator.plugin.report import CHILD_KINDS, SecretInfo, gather
from sampledb_operator.plugin.session import Session
from sampledb_operator.plugin.support import (
    InstanceLog,
    Masks,
    SupportData,
    events_about,
    reduce_secret,
    referenced_secrets,
)

MAX_LOG_BYTES = 4 * 2**20   # per log read
WHY_WIDTH = 300


def why(err: KubeError) -> str:
    """An error in one short line: the API server's reason and message, or the transport's words."""
    text = f"{err.reason or err.status}: {err.message}" if isinstance(err, ApiError) else str(err)
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= WHY_WIDTH else one_line[: WHY_WIDTH - 3] + "..."


async def gather_support(session: Session, name: str, *, taken_at: datetime, log_lines: int,
                         plugin_version: str = "") -> tuple[SupportData, Masks]:
    """Read the SampleDB `name` and everything a report holds about it."""
    db = await session.get(SAMPLEDB, name)
    problems: list[str] = []

    async def listed(resource: Resource, selector: str | None = None) -> list[Obj]:
        try:
            return await session.list(resource, label_selector=selector)
        except KubeError as err:
            problems.append(f"cannot list {resource.plural}: {why(err)}")
            return []

    selector = f"{DATABASE_LABEL}={name}"
    batches = await asyncio.gather(*(listed(r, selector) for r in CHILD_KINDS))
    children = [c for batch in batches for c in batch]
    all_backups, events, secrets, screen, version = await asyncio.gather(
        listed(SAMPLEDBBACKUP), listed(EVENT), _secrets(session, db, selector, problems),
        _status_screen(session, name, taken_at, problems), _server_version(session, problems))
    backups = [b for b in all_backups if (b.get("spec") or {}).get("database") == name]
    logs = await _logs(session, db, children, log_lines, problems)
    found, missing, masks = secrets
    data = SupportData(namespace=session.namespace, name=name, taken_at=taken_at, db=db, backups=backups,
                       children=children, secrets=found, missing_secrets=missing,
                       events=events_about(events, [db, *backups, *children]), logs=logs, log_lines=log_lines,
                       status_screen=screen, server_version=version, plugin_version=plugin_version,
                       problems=sorted(problems))
    return data, masks


async def _secrets(session: Session, db: Obj, selector: str,
                   problems: list[str]) -> tuple[list[SecretInfo], dict[str, str], Masks]:
    """The Secrets labelled for the database and those its spec and status name: name and key names, the
    names of the absent ones (-> where they are named), and the Masks of every value read."""
    found: dict[str, SecretInfo] = {}
    masks = Masks()
    try:
        for secret in await session.list(SECRET, label_selector=selector):
            info, more = reduce_secret(secret)
            found[info.name], masks = info, masks | more
    except KubeError as err:
        problems.append(f"cannot list secrets: {why(err)}")
    missing: dict[str, str] = {}
    for secret_name, where in referenced_secrets(db).items():
        if secret_name in found:
            continue
        try:
            info, more = reduce_secret(await session.get(SECRET, secret_name))
        except NotFound:
            missing[secret_name] = where
            continue
        except KubeError as err:
            problems.append(f"cannot read Secret {secret_name} ({where}): {why(err)}")
            continue
        found[info.name], masks = info, masks | more
    return list(found.values()), missing, masks


def _restarted(pod: Obj) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(c.get("name") == podlog.POSTGRES_CONTAINER and int(c.get("restartCount") or 0) > 0 for c in statuses)


async def _logs(session: Session, db: Obj, children: list[Obj], log_lines: int,
                problems: list[str]) -> list[InstanceLog]:
    """The end of each database pod's PostgreSQL log, and of its previous run when the container restarted."""
    pods = {str(p["metadata"]["name"]): p for p in children
            if p.get("kind") == "Pod" and ((p.get("metadata") or {}).get("labels") or {}).get(COMPONENT_LABEL)
            == "database"}
    for instance in instances_of(db):
        if instance["name"] not in pods:
            problems.append(f"no log of instance {instance['name']}: it has no pod")
    wanted = [(pod, False) for pod in sorted(pods)] + [(pod, True) for pod in sorted(pods) if _restarted(pods[pod])]

    async def one(pod: str, previous: bool) -> InstanceLog | None:
        try:
            text = await podlog.read_log(session, pod, previous=previous, tail=log_lines, limit_bytes=MAX_LOG_BYTES)
        except KubeError as err:
            problems.append(f"cannot read the {'previous ' if previous else ''}log of {pod}: {why(err)}")
            return None
        return InstanceLog(pod, text, previous)

    read = await asyncio.gather(*(one(pod, previous) for pod, previous in wanted))
    return [log for log in read if log is not None]


async def _status_screen(session: Session, name: str, now: datetime, problems: list[str]) -> str:
    try:
        return render.render_status(await gather(session, name), now)
    except KubeError as err:
        problems.append(f"cannot make the status screen: {why(err)}")
        return ""


async def _server_version(session: Session, problems: list[str]) -> str | None:
    try:
        answer = await session.client.request("GET", "/version")
    except KubeError as err:
        problems.append(f"cannot read the Kubernetes version: {why(err)}")
        return None
    return str((answer or {}).get("gitVersion") or "") or None
