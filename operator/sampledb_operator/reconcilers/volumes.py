"""The I/O around decide/children/volumes.py: what the caches say of the data and backups volumes, and the
accept-empty-volume annotation's consumption.

A volume's verdict is read from the caches only (the PVCs, the SampleDB's status, its
SampleDBBackups); the one write is decide/children/volumes.plan_release's: the merge patch that drops a role
from the annotation once its volume exists again (with the resourceVersion of the pass's status
write: a stale pass gets Conflict and writes nothing). Nothing is decided here.
"""

from __future__ import annotations

from collections.abc import Mapping

from sampledb_operator.decide.children import volumes as vol
from sampledb_operator.decide.plan import Key
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.observability.logging import get_logger
from sampledb_operator.reconcilers.context import Context
from sampledb_operator.reconcilers.effects import apply_plan, subject_of

log = get_logger(__name__)
PVC = vol.PVC


def states(ctx: Context, db: SampleDB, observed: Mapping[Key, Obj]) -> dict[Key, vol.VolumeState]:
    """The two volumes as the caches show them, by (kind, name)."""
    return vol.volume_states(db, observed, ctx.caches.backups.list(db.metadata.namespace))


async def release_acceptance(ctx: Context, db: SampleDB, live: frozenset[str], *,
                             resource_version: str | None) -> None:
    """Drop from the accept-empty-volume annotation the roles whose volume exists again (`live`), after
    the pass's status was written (`resource_version`: the object's version then; None: it is gone)."""
    planned = vol.plan_release(vol.AcceptanceFacts(db=db, live=live, resource_version=resource_version))
    applied = await apply_plan(ctx, subject_of(db), planned.plan)
    if ("SampleDB", db.metadata.name) in applied.patched:
        log.info("accept-empty-volume consumed", namespace=db.metadata.namespace, name=db.metadata.name,
                 roles=list(planned.released))
