"""Real PostgreSQL, operator installed in the cluster: snapshots, restores, deletion policies, backups.

See tests/e2e/real_data.py: data is compared per table (row count and an order-independent checksum)
between the source database and a database restored from the backup.
"""

from __future__ import annotations

import datetime as dt

import pytest
from tests.e2e.real_data import (
    NS,
    apply,
    backups_of,
    delete,
    sampledb,
    seed,
    sql,
    table_stats,
    unique,
    wait_backup,
    wait_ready,
)
from tests.support.kube import get_or_none, kubectl, kubectl_json, wait_until

pytestmark = pytest.mark.cluster


LEDGER_SUMMARY = ("SELECT count(*) FILTER (WHERE phase = 'before-manual') || '|' || "
                  "count(*) FILTER (WHERE phase = 'after-manual') FROM ledger")


def children(name: str) -> list[str]:
    kinds = "statefulsets,services,configmaps,secrets,persistentvolumeclaims,jobs"
    items = kubectl_json("get", kinds, "-n", NS, "-l", f"sampledb.io/database={name}")["items"]
    return sorted(f"{i['kind']}/{i['metadata']['name']}" for i in items)


def test_a_snapshot_taken_on_deletion_restores_into_a_new_database_with_identical_data(installed: str) -> None:
    name = unique("snap")
    apply(sampledb(name, deletionPolicy="Snapshot"))
    wait_ready(name)
    before = seed(name)
    delete(name)
    snapshots = [b for b in backups_of(name) if b["spec"].get("reason") == "pre-delete"]
    assert len(snapshots) == 1
    backup = wait_backup(snapshots[0]["metadata"]["name"])
    assert backup["status"]["sizeBytes"] > 0

    copy = unique("snap-copy")
    apply(sampledb(copy, restore={"backupName": backup["metadata"]["name"]}))
    wait_ready(copy)
    wait_until(lambda: table_stats(copy) == before, timeout=120, what="the restored data")
    assert table_stats(copy) == before
    delete(copy, wait=False)


def test_retain_keeps_the_data_and_a_new_database_of_the_same_name_adopts_it(installed: str) -> None:
    name = unique("keep")
    apply(sampledb(name, deletionPolicy="Retain"))
    wait_ready(name)
    before = seed(name)
    password = kubectl_json("get", "secret", f"{name}-credentials", "-n", NS)["data"]["password"]
    delete(name)
    kept = children(name)
    assert any(k.startswith("PersistentVolumeClaim/") for k in kept), kept
    assert f"Secret/{name}-credentials" in kept
    apply(sampledb(name, deletionPolicy="Delete"))
    wait_ready(name)
    assert table_stats(name) == before
    assert kubectl_json("get", "secret", f"{name}-credentials", "-n", NS)["data"]["password"] == password
    delete(name, wait=False)


def test_deletion_policy_delete_leaves_nothing_but_the_backup_volume(installed: str) -> None:
    name = unique("gone")
    apply(sampledb(name, deletionPolicy="Delete"))
    wait_ready(name)
    seed(name)
    pvcs = kubectl_json("get", "pvc", "-n", NS, "-l", f"sampledb.io/database={name}")["items"]
    data = [p["spec"]["volumeName"] for p in pvcs if p["metadata"]["name"] != f"{name}-backups"]
    assert data
    delete(name)
    # The backup volume outlives every database (docs/user-guide.md, "Deletion"): it is the only
    # child left, and no snapshot was taken.
    wait_until(lambda: children(name) == [f"PersistentVolumeClaim/{name}-backups"], timeout=120,
               what="every child but the backup volume to go")
    assert not backups_of(name)
    wait_until(lambda: all(get_or_none("pv", v) is None for v in data), timeout=120,
               what="the data volume to be deleted")


def test_manual_and_scheduled_backups_contain_the_rows_written_before_them(installed: str) -> None:
    name = unique("bk")
    apply(sampledb(name, backup={"schedule": "* * * * *", "retention": 3}))
    wait_ready(name)
    sql(name, "CREATE TABLE ledger (id int PRIMARY KEY, phase text); "
              "INSERT INTO ledger SELECT g, 'before-manual' FROM generate_series(1, 10) g")
    manual = f"{name}-manual"
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "metadata": {"name": manual},
           "spec": {"database": name, "reason": "manual"}})
    wait_backup(manual)
    sql(name, "INSERT INTO ledger SELECT g, 'after-manual' FROM generate_series(11, 30) g")
    written = dt.datetime.now(dt.UTC)

    def scheduled_after_writes() -> str | None:
        for b in backups_of(name):
            st = b.get("status", {})
            if b["spec"].get("reason") == "scheduled" and st.get("phase") == "Succeeded" and \
                    dt.datetime.fromisoformat(st["startedAt"].replace("Z", "+00:00")) > written:
                return str(b["metadata"]["name"])
        return None

    scheduled = wait_until(scheduled_after_writes, timeout=200, what="a scheduled backup after the writes")
    for backup, rows in ((manual, "10|0"), (scheduled, "10|20")):
        copy = unique("bk-copy")
        apply(sampledb(copy, restore={"backupName": backup}))
        wait_ready(copy)
        wait_until(lambda c=copy, want=rows: sql(c, LEDGER_SUMMARY, check=False) == want, timeout=120,
                   what=f"{copy} to hold the rows of {backup}")
        delete(copy, wait=False)
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", '{"spec": {"backup": {"schedule": null}}}')
    delete(name, wait=False)
