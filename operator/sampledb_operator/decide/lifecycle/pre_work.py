"""The backup taken before some piece of work (an upgrade, a migration): requested once, then waited for.

Pure. The upgrade and migration steps share it; the BackupReconciler (reconcilers/backup.py) runs
the SampleDBBackup requested here. The name comes from decide/backup/backups.pre_work_backup_name (the
database's uid, the reason and the work's token), so a restart finds the same backup instead of
taking a second one; the request is planned only while the cache holds no backup of that name.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampledb_operator.decide.backup import backups as bk
from sampledb_operator.decide.effects import Create
from sampledb_operator.decide.events import EventSpec
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.sampledb import SampleDB


@dataclass(frozen=True, slots=True)
class PreWorkBackup:
    """Where the backup before one piece of work stands: its name, phase and message (None and "" while it
    has no status), and the request to make when it does not exist yet."""

    name: str
    phase: str | None
    message: str = ""
    request: Create | None = None


def request(db: SampleDB, reason: str, name: str) -> Create:
    """Create the SampleDBBackup `name` of `db` for `reason`, announced BackupRequested."""
    return Create(bk.backup_request(db, name, reason),
                  EventSpec("Normal", "BackupRequested", f"{reason} backup {name} requested"))


def pre_work_backup(db: SampleDB, reason: str, name: str, cached: Obj | None, *, may_request: bool) -> PreWorkBackup:
    """The backup `name` as the cache holds it (`cached`); requested when missing and `may_request`."""
    status = (cached or {}).get("status") or {}
    wanted = request(db, reason, name) if cached is None and may_request else None
    return PreWorkBackup(name, status.get("phase"), str(status.get("message") or ""), wanted)
