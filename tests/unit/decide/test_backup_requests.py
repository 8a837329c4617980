"""decide/backup/backups.py: every SampleDBBackup the operator asks for carries the same labels and spec."""

from __future__ import annotations

import pytest

from sampledb_operator.decide.backup import backups as bk
from sampledb_operator.decide.labels import DATABASE_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from sampledb_operator.decide.sharding import BUCKET_LABEL, bucket_of
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB

DB = SampleDB.model_validate({
    "apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": "db", "namespace": "ns", "uid": "u"},
    "spec": {"version": "16.4", "storage": {"size": "1Gi"}},
})


@pytest.mark.parametrize("reason", ["scheduled", "pre-upgrade", "pre-migration", "pre-delete"])
def test_a_request_is_labelled_for_its_database_its_bucket_incarnation_and_reason(reason: str) -> None:
    body = bk.backup_request(DB, "b", reason)
    assert body["apiVersion"] == "sampledb.io/v1alpha1" and body["kind"] == "SampleDBBackup"
    assert body["metadata"] == {"name": "b", "namespace": "ns", "labels": {
        MANAGED_BY_LABEL: MANAGED_BY, DATABASE_LABEL: "db", bk.DATABASE_UID_LABEL: "u", bk.REASON_LABEL: reason,
        BUCKET_LABEL: str(bucket_of("ns", "db"))}}
    assert body["spec"] == {"database": "db", "reason": reason,
                            "storage": {"claimName": names.backup_pvc_name("db")}}


def test_a_snapshot_carries_its_attempt_and_a_scheduled_backup_its_slot() -> None:
    snapshot = bk.backup_request(DB, "s", "pre-delete", attempt=3)
    assert snapshot["metadata"]["labels"][bk.ATTEMPT_LABEL] == "3"
    scheduled = bk.backup_request(DB, "n", "scheduled", annotations={bk.SCHEDULED_FOR_ANNOTATION: "slot"})
    assert scheduled["metadata"]["annotations"] == {bk.SCHEDULED_FOR_ANNOTATION: "slot"}
    assert bk.ATTEMPT_LABEL not in scheduled["metadata"]["labels"]


def test_a_pre_work_name_is_stable_per_work_and_differs_between_works() -> None:
    first = bk.pre_work_backup_name(DB, "pre-upgrade", "17.2")
    assert first == bk.pre_work_backup_name(DB, "pre-upgrade", "17.2")
    assert first != bk.pre_work_backup_name(DB, "pre-upgrade", "17.4")
    assert first != bk.pre_work_backup_name(DB, "pre-migration", "17.2")
    assert first.startswith("db-pre-upgrade-")
