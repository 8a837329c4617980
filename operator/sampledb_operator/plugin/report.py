"""What `kubectl sampledb status` reads: a SampleDB, its children, its backups and its Events.

Invariants: only reads; children are found by the label every child carries
(`sampledb.io/database=<name>`), so nothing is missed because of a shortened name; the Secret is
read by its name and reduced at once to its metadata and key names (its values never leave this
module); a kind the user may not list is reported as a problem, not an error, so the rest of the
screen still shows.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from sampledb_operator.decide.labels import COMPONENT_LABEL, DATABASE_LABEL
from sampledb_operator.kube.errors import ApiError, NotFound
from sampledb_operator.kube.resources import (
    CONFIGMAP,
    DEPLOYMENT,
    EVENT,
    JOB,
    PDB,
    POD,
    PVC,
    SAMPLEDB,
    SAMPLEDBBACKUP,
    SECRET,
    SERVICE,
    STATEFULSET,
    Resource,
)
from sampledb_operator.model.names import secret_name
from sampledb_operator.model.objects import Obj
from sampledb_operator.plugin.session import Session

CHILD_KINDS: tuple[Resource, ...] = (STATEFULSET, POD, PVC, SERVICE, CONFIGMAP, PDB, DEPLOYMENT, JOB)
MAX_EVENTS = 5


@dataclass(frozen=True)
class SecretInfo:
    """A Secret without its values: its name and the names of its keys."""

    name: str
    keys: tuple[str, ...]
    created: str | None = None


@dataclass(frozen=True)
class StatusReport:
    """Everything one status screen shows, as read from the API server."""

    db: Obj
    children: list[Obj] = field(default_factory=list)
    secret: SecretInfo | None = None
    backups: list[Obj] = field(default_factory=list)  # newest first
    events: list[Obj] = field(default_factory=list)   # newest last
    problems: list[str] = field(default_factory=list)  # what could not be read, and why


def strip_secret(secret: Obj) -> SecretInfo:
    """The name and key names of a Secret read from the API server (its values are dropped)."""
    keys = set(secret.get("data") or {}) | set(secret.get("stringData") or {})
    meta = secret.get("metadata") or {}
    return SecretInfo(str(meta.get("name") or ""), tuple(sorted(keys)), meta.get("creationTimestamp"))


async def gather(session: Session, name: str) -> StatusReport:
    """Read the SampleDB `name` (NotFound propagates) and everything around it."""
    db = await session.get(SAMPLEDB, name)
    problems: list[str] = []
    selector = f"{DATABASE_LABEL}={name}"

    async def children(resource: Resource) -> list[Obj]:
        extra = f",{COMPONENT_LABEL}=database" if resource is POD else ""   # the database pod, not Jobs' pods
        try:
            return await session.list(resource, label_selector=selector + extra)
        except ApiError as err:
            problems.append(f"cannot list {resource.plural}: {err.reason or err.status}")
            return []

    async def secret() -> SecretInfo | None:
        wanted = str((db.get("status") or {}).get("secretName") or secret_name(name))
        try:
            return strip_secret(await session.get(SECRET, wanted))
        except NotFound:
            return None
        except ApiError as err:
            problems.append(f"cannot read Secret {wanted}: {err.reason or err.status}")
            return SecretInfo(wanted, ())

    async def backups() -> list[Obj]:
        try:
            items = await session.list(SAMPLEDBBACKUP)
        except ApiError as err:
            problems.append(f"cannot list sampledbbackups: {err.reason or err.status}")
            return []
        mine = [b for b in items if (b.get("spec") or {}).get("database") == name]
        return sorted(mine, key=_created, reverse=True)

    async def events() -> list[Obj]:
        try:
            items = await session.list(EVENT, field_selector=f"involvedObject.kind=SampleDB,involvedObject.name={name}")
        except ApiError as err:
            problems.append(f"cannot list events: {err.reason or err.status}")
            return []
        return sorted(items, key=event_time)[-MAX_EVENTS:]

    lists = await asyncio.gather(*(children(r) for r in CHILD_KINDS))
    found_secret, found_backups, found_events = await asyncio.gather(secret(), backups(), events())
    return StatusReport(db=db, children=[c for batch in lists for c in batch], secret=found_secret,
                        backups=found_backups, events=found_events, problems=problems)


def event_time(event: Obj) -> str:
    """When an Event last happened (lastTimestamp, eventTime or creation), as an RFC 3339 string."""
    series = event.get("series") or {}
    return str(event.get("lastTimestamp") or series.get("lastObservedTime") or event.get("eventTime")
               or (event.get("metadata") or {}).get("creationTimestamp") or "")


def _created(obj: Obj) -> tuple[str, str]:
    meta: dict[str, Any] = obj.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")
