"""The I/O around decide/volumes.py: what the caches say of the data and backups volumes, and the
accept-empty-volume annotation's consumption.

A volume's verdict is read from the caches only (the PVCs, the SampleDB's status, its
SampleDBBackups); the one write here is the merge patch that drops a role from the annotation once
its volume exists again (with the read resourceVersion: a stale pass gets Conflict and writes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping

from sampledb_operator.decide import volumes as vol
from sampledb_operator.decide.plan import Key
from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.model import names
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context

log = get_logger(__name__)
PVC = "PersistentVolumeClaim"


def _backups_written(ctx: Context, db: SampleDB, claim: str) -> bool:
    """A Succeeded SampleDBBackup of this database (any incarnation) recorded its files on `claim`."""
    for backup in ctx.caches.backups.list(db.metadata.namespace):
        status = backup.get("status") or {}
        if (backup.get("spec") or {}).get("database") == db.metadata.name and status.get("phase") == "Succeeded" \
                and (status.get("location") or {}).get("pvcName") == claim:
            return True
    return False


def states(ctx: Context, db: SampleDB, observed: Mapping[Key, Obj]) -> dict[Key, vol.VolumeState]:
    """The two volumes as the caches show them, by (kind, name)."""
    out: dict[Key, vol.VolumeState] = {}
    for role, name in ((vol.DATA, names.data_pvc_name(db.metadata.name)),
                       (vol.BACKUPS, names.backup_pvc_name(db.metadata.name))):
        pvc = observed.get((PVC, name))
        holds = db.status.current_version is not None if role == vol.DATA else _backups_written(ctx, db, name)
        out[(PVC, name)] = vol.VolumeState(
            role=role, name=name, present=pvc is not None,
            terminating=bool(pvc is not None and pvc.get("metadata", {}).get("deletionTimestamp")),
            holds_data=holds)
    return out


async def release_acceptance(ctx: Context, db: SampleDB, live: frozenset[str], *,
                             resource_version: str | None) -> None:
    """Drop from the accept-empty-volume annotation the roles whose volume exists again (`live`), after
    the pass's status was written (`resource_version`: the object's version then; None: it is gone)."""
    accept = vol.accepted(db.metadata.annotations)
    if not accept & live or resource_version is None:
        return
    value = vol.remaining_acceptance(accept, live)
    patch = {"metadata": {"annotations": {vol.ACCEPT_EMPTY_ANNOTATION: value}, "resourceVersion": resource_version}}
    try:
        await ctx.apis["SampleDB"].patch(db.metadata.name, patch, namespace=db.metadata.namespace)
    except (Conflict, NotFound):
        return  # a newer object: its own pass looks again
    log.info("accept-empty-volume consumed", namespace=db.metadata.namespace, name=db.metadata.name,
             roles=sorted(accept & live))
