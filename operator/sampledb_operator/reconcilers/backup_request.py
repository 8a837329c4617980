"""The backup taken before some piece of work (an upgrade, a migration): requested once, then waited for.

A step the upgrade and migration steps share; the BackupReconciler (reconcilers/backup.py) runs the
SampleDBBackup it creates. The name comes from decide/backups.pre_work_backup_name, so a restart
finds the same backup instead of taking a second one.
"""

from __future__ import annotations

from sampledb_operator.decide import backups as bk
from sampledb_operator.kube.errors import Conflict
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.model.schema import API_VERSION
from sampledb_operator.reconcilers.context import Context


async def ensure_backup(ctx: Context, db: SampleDB, *, reason: str, token: str) -> tuple[str, str | None]:
    """The SampleDBBackup taken before the work `token`, created if missing: (name, phase), phase None
    while the backup has no status yet."""
    name = bk.pre_work_backup_name(db, reason, token)
    existing = ctx.cached("SampleDBBackup", db.metadata.namespace or "", name)
    if existing is not None:
        return name, (existing.get("status") or {}).get("phase")
    try:
        await ctx.apis["SampleDBBackup"].create(bk.backup_request(db, name, reason))
        await ctx.event(db.metadata, API_VERSION, "SampleDB", "Normal", "BackupRequested",
                        f"{reason} backup {name} requested")
    except Conflict:
        pass
    return name, None
