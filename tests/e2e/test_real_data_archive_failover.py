"""Real PostgreSQL on the real node, a real S3 server: archiving across a failover, and a database whose whole
namespace is deleted, recovered in another from the store alone (the fixtures and helpers of
tests/e2e/test_real_data_archive.py; apart so that the suite's workers share the long tests)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.e2e.real_data import PG15, condition, sql, status, table_stats, wait_ready
from tests.e2e.test_real_data_archive import (
    apply,
    archived_through,
    archiving,
    database,
    ledger,
    namespaces,
    operator_both,
    store,
    store_objects,
)
from tests.support import kube
from tests.support.cluster import ObjectStore
from tests.support.kube import get_or_none, kubectl, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster
__all__ = ["namespaces", "operator_both", "store"]  # fixtures


def pod_sql(ns: str, pod: str, statement: str) -> str:
    out = kubectl("exec", "-n", ns, pod, "-c", "postgres", "--", "psql", "-X", "-v", "ON_ERROR_STOP=1",
                  "-U", "postgres", "-d", "app", "-qAt", "-c", statement)
    return str(out.stdout).strip()


def test_after_a_failover_the_new_primary_archives_on_its_timeline_and_a_recovery_past_it_has_every_row(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess) -> None:
    src_ns, _ = namespaces
    name = "ha"
    spec = archiving(store, src_ns, name, replicas=2, replication={"synchronous": True, "failoverDelaySeconds": 0})
    wait_until(lambda: status(name, src_ns).get("readyInstances") == "2/2", timeout=300, what="2 ready instances")
    first = status(name, src_ns)["primary"]
    pod_sql(src_ns, first, "CREATE TABLE ledger (id int PRIMARY KEY, batch text NOT NULL, amount numeric);"
                           " INSERT INTO ledger SELECT g, 'timeline-1', g FROM generate_series(1, 1000) g")
    # a base backup read from the hot standby (baseBackupFrom: PreferStandby); the recovery below starts from it
    standby = next(i["name"] for i in status(name, src_ns)["instances"] if i["role"] == "replica")
    kubectl("annotate", "sdb", name, "-n", src_ns, "sampledb.io/base-backup=from-standby")
    wait_until(lambda: ((status(name, src_ns).get("archive") or {}).get("lastBaseBackup") or {}).get("source")
               == standby, timeout=300, what=f"a base backup read from the standby {standby}")
    kubectl("exec", "-n", src_ns, first, "-c", "postgres", "--", "bash", "-c", 'pg_ctl -D "$PGDATA" stop -m immediate',
            check=False)
    new = wait_until(lambda: (p := status(name, src_ns).get("primary")) != first and not status(
        name, src_ns).get("targetPrimary") and p, timeout=180, what="a new primary")
    wait_until(lambda: pod_sql(src_ns, str(new), "SELECT pg_is_in_recovery()") == "f", timeout=60,
               what="the new primary writable")
    # synchronous: a commit waits for a standby, i.e. for the old primary back as one (rewound)
    wait_until(lambda: status(name, src_ns).get("readyInstances") == "2/2", timeout=300,
               what="the old primary back as a standby")
    pod_sql(src_ns, str(new), "INSERT INTO ledger SELECT g, 'timeline-2', g FROM generate_series(1001, 2000) g")
    timeline = int(pod_sql(src_ns, str(new), "SELECT timeline_id FROM pg_control_checkpoint()"))
    assert timeline >= 2
    segment = pod_sql(src_ns, str(new), "SELECT pg_walfile_name(pg_current_wal_lsn())")
    pod_sql(src_ns, str(new), "SELECT pg_switch_wal()")
    wait_until(lambda: (w := (status(name, src_ns).get("archive") or {}).get("lastArchivedWal") or "")
               and int(w[:8], 16) >= timeline and w >= segment, timeout=180,
               what=f"WAL of timeline {timeline} archived (the new primary archives into the same prefix)")
    assert condition(name, "ContinuousArchiving", src_ns)["status"] == "True"
    committed = {"1": "1000", "2": "1000"}
    copy = "ha-after-failover"
    apply(database(copy, src_ns, PG15, recovery={"objectStore": spec, "database": name}))
    wait_ready(copy, timeout=600, ns=src_ns)
    got = dict(line.split("|") for line in sql(copy, "SELECT right(batch, 1), count(*) FROM ledger GROUP BY 1"
                                                     " ORDER BY 1", ns=src_ns, superuser=True).splitlines())
    assert got == committed, {  # what the recovery says it did, and what the source's archive held
        "recovered": condition(copy, "Initialized", src_ns).get("message"),
        "timeline": sql(copy, "SELECT timeline_id FROM pg_control_checkpoint()", ns=src_ns, superuser=True),
        "segment": segment, "archive": status(name, src_ns).get("archive")}


def succeeded_backup(ns: str, backup: str) -> dict[str, Any] | None:
    found = get_or_none("sampledbbackup", backup, ns) or {}
    phase = (found.get("status") or {}).get("phase")
    if phase == "Failed":
        raise AssertionError(f"backup {backup} failed: {found['status']}")
    return found if phase == "Succeeded" else None


def test_a_database_whose_namespace_is_deleted_is_recovered_elsewhere_from_the_store_alone(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess) -> None:
    """Both ways: point-in-time recovery from the WAL archive, and a restore of a pg_dump backup's copy."""
    src_ns, dst_ns = namespaces
    name = "ledger"
    archiving(store, src_ns, name)
    ledger(name, src_ns, "kept", 1, 3000)
    committed = table_stats(name, src_ns)
    apply({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDBBackup", "metadata": {"name": "last-dump",
           "namespace": src_ns}, "spec": {"database": name}})
    dumped = wait_until(lambda: succeeded_backup(src_ns, "last-dump"), timeout=300, what="backup last-dump")
    assert dumped["status"]["storeLocation"] == (f"s3://{store.bucket}/e2e/{src_ns}/{name}/logical/manual"
                                                 "/last-dump.dump")
    # every row committed more than archive_timeout before the deletion is in the store: archive_timeout alone
    # (no pg_switch_wal here) closes the segment holding the last commit and the archiver pushes it
    last_commit = sql(name, "SELECT pg_walfile_name(pg_current_wal_lsn())", ns=src_ns)
    wait_until(lambda: archived_through(name, src_ns, last_commit), timeout=120,
               what=f"{last_commit}, holding the last commit, archived by archive_timeout")
    kube.release_finalizers(src_ns)
    kubectl("delete", "namespace", src_ns, "--wait=false")
    wait_until(lambda: get_or_none("namespace", src_ns) is None, timeout=300, what=f"namespace {src_ns} gone")

    dst_objs, dst_spec = store_objects(store, dst_ns, f"e2e/{src_ns}")
    apply(*dst_objs, database(name, dst_ns, PG15, recovery={"objectStore": dst_spec, "database": name}))
    apply(database("ledger-dump", dst_ns, PG15, restore={"backupName": "last-dump", "objectStore": dst_spec,
                                                         "database": name}))
    wait_ready(name, timeout=600, ns=dst_ns)
    assert table_stats(name, dst_ns) == committed
    assert condition(name, "Initialized", dst_ns)["message"].endswith("to the end of its archive")
    wait_ready("ledger-dump", timeout=300, ns=dst_ns)
    wait_until(lambda: condition("ledger-dump", "Initialized", dst_ns).get("reason") == "Restored", timeout=300,
               what="ledger-dump restored from the store")
    assert table_stats("ledger-dump", dst_ns) == committed
