"""A full data volume: the words decide/lifecycle/stuck.py says it with, and whether a database's is full, as the
backups' decisions read it (pure). Here, at decide/'s top, because both concerns read it.

A full data volume is the SampleDB's Degraded=True with reason VolumeFull (decide/lifecycle/stuck.py): its server has
stopped. decide/backup/backup_run.py stops a running backup and holds one not started;
decide/backup/schedule_plan.py says scheduled backups are postponed. Both quote `volume_full`'s words, which stay
the same from one restart of the server to the next (so a message, and its Event, does not change at each).
"""

from __future__ import annotations

from sampledb_operator.model.conditions import ConditionType, get_condition
from sampledb_operator.model.sampledb import SampleDB

VOLUME_FULL = "VolumeFull"  # the problem of a container that stops because a volume is full
FULL_WORDS = "stops because a volume is full"  # VolumeFull's message, after "pod <pod>: container <c> "
FULL_DETAIL_LIMIT = 300  # of the Degraded message quoted in a backup's message or BackupHealthy's
GROW_VOLUME = "grow spec.storage.size or raise spec.storage.autoGrow.maximum"


def volume_full(db: SampleDB) -> str | None:
    """The SampleDB's Degraded message, shortened, when it says the database's data volume is full (Degraded=True
    with reason VolumeFull); None otherwise.

    Shortened to the words that name the pod ("pod <pod>: container <c> stops because a volume is full",
    decide/lifecycle/stuck.py), without the server's last lines after them: those change at each restart, and a message
    that changes is a new Event each time."""
    cond = get_condition(db.status.conditions, ConditionType.DEGRADED.value)
    if cond is None or cond.status != "True" or cond.reason != VOLUME_FULL:
        return None
    text = " ".join(cond.message.split())
    end = text.find(FULL_WORDS)
    if end >= 0:
        text = text[:end + len(FULL_WORDS)]
    text = text or "its data volume is full"
    return text if len(text) <= FULL_DETAIL_LIMIT else text[:FULL_DETAIL_LIMIT - 3] + "..."
