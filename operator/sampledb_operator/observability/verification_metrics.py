"""The backup-verification counter, on the operator's registry.

Per database (labels namespace, database), so a dashboard shows which database's backups fail to
verify. Label values are not known at start-up: `init_database` exports a database's series at 0
from the first pass that can verify one of its backups, so rate() and increase() behave from then on.
A deleted database's series stay until the operator restarts (counters are not taken back).
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter

from sampledb_operator.observability.metrics import REGISTRY

RESULTS: Final = ("succeeded", "failed")

backup_verifications_total = Counter(
    "sampledb_backup_verifications_total",
    "Backup verifications finished, by database and result (succeeded: the backup restores and matches)",
    ["namespace", "database", "result"],
    registry=REGISTRY,
)


def init_database(namespace: str, database: str) -> None:
    """Export this database's series at 0 (idempotent)."""
    for result in RESULTS:
        backup_verifications_total.labels(namespace=namespace, database=database, result=result)


def observe(namespace: str, database: str, *, succeeded: bool) -> None:
    backup_verifications_total.labels(namespace=namespace, database=database,
                                      result=RESULTS[0] if succeeded else RESULTS[1]).inc()
