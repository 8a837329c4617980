"""decide/job_ttl.py: a finished Job may expire once the status holds its outcome, never a failure's record."""

from __future__ import annotations

from typing import Any

import pytest

from sampledb_operator.decide.job_ttl import outcome_recorded
from sampledb_operator.model.sampledb import SampleDB


def db(*conditions: tuple[str, str, str], current: str | None = "16.4", version: str = "16.4") -> SampleDB:
    return SampleDB.model_validate({
        "metadata": {"name": "orders", "namespace": "shop"},
        "spec": {"version": version, "storage": {"size": "1Gi"}},
        "status": {"currentVersion": current,
                   "conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]},
    })


def job(component: str) -> dict[str, Any]:
    return {"metadata": {"name": f"orders-{component}-1", "labels": {"app.kubernetes.io/component": component}}}


@pytest.mark.parametrize(("component", "database", "expires"), [
    ("init", db(("Initialized", "True", "InitSucceeded")), True),
    ("init", db(("Initialized", "False", "InitFailed")), False),  # the record, and deleting it retries
    ("restore", db(("Initialized", "True", "Restored")), True),
    ("restore", db(("Initialized", "False", "RestoreFailed")), False),
    ("upgrade", db(("Upgrading", "False", "UpgradeSucceeded"), current="17.2", version="17.2"), True),
    ("thaw", db(("Upgrading", "False", "UpgradeSucceeded"), current="17.2", version="17.2"), True),
    ("upgrade", db(("Upgrading", "False", "UpgradeFailed"), version="17.2"), False),  # not retried while it exists
    ("thaw", db(("Upgrading", "False", "UpgradeFailed"), version="17.2"), False),
    ("upgrade", db(("Upgrading", "True", "RollingOut"), version="17.2"), False),  # the switch relies on it
    ("migrate", db(("Migrated", "True", "MigrationsApplied")), True),
    ("migrate", db(("Migrated", "False", "MigrationFailed")), False),
    ("migrate", db(("Migrated", "False", "Migrating")), False),
    ("backup", db(("Initialized", "True", "InitSucceeded")), False),  # its SampleDBBackup owns it
])
def test_a_finished_job_expires_only_when_the_status_holds_its_outcome(component: str, database: SampleDB,
                                                                      expires: bool) -> None:
    assert outcome_recorded(database, job(component)) is expires
