"""Real PostgreSQL on the real node, a real S3 server: verifications that the store restores a database (a restore
point recorded on the primary while a client writes, recovered into a throw-away server, every table compared), and
a WAL segment deleted from the store found and named (the fixtures and helpers of
tests/e2e/test_real_data_archive.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
import pytest
from botocore.config import Config
from tests.e2e.real_data import PG15, PG18, condition, sql, status, table_stats
from tests.e2e.test_real_data_archive import (
    ARCHIVE_TIMEOUT,
    archiving,
    events_of,
    ledger,
    metric,
    namespaces,
    operator_both,
    store,
    switch_and_wait,
    wait_condition,
)
from tests.support.cluster import ObjectStore
from tests.support.kube import kubectl, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster
__all__ = ["namespaces", "operator_both", "store"]  # fixtures


def ask(name: str, ns: str, value: str) -> None:
    kubectl("annotate", "sdb", name, "-n", ns, "--overwrite", f"sampledb.io/verify-recovery={value}")


def answered(name: str, ns: str, value: str, timeout: float = 420) -> dict[str, Any]:
    """The verification answering the annotation value `value`, once it has finished."""
    def seen() -> dict[str, Any] | None:
        last = (status(name, ns).get("archive") or {}).get("lastVerification") or {}
        return last if last.get("request") == f"manual:{value}" else None
    return wait_until(seen, timeout=timeout,
                      what=f"{ns}/{name}'s verification {value} (now {condition(name, 'RecoveryVerified', ns)})")


def s3(store: ObjectStore) -> Any:
    return boto3.client("s3", endpoint_url=store.endpoint, aws_access_key_id=store.access_key,
                        aws_secret_access_key=store.secret_key, region_name="us-east-1", verify=store.ca_file,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2},
                                      connect_timeout=10, read_timeout=30, tcp_keepalive=False))


@pytest.mark.parametrize("version", [PG18])
def test_a_verification_under_writes_recovers_the_point_and_matches_every_table(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess, version: str) -> None:
    src_ns, _ = namespaces
    name = "proven"
    archiving(store, src_ns, name, version)
    ledger(name, src_ns, "base", 1, 5000)
    sql(name, "CREATE TABLE accounts (id int PRIMARY KEY, balance numeric NOT NULL);"
              " INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 200) g", ns=src_ns)
    stop = threading.Event()
    writes = [0]

    def writer() -> None:  # transfers and inserts until the verification has finished
        i = 0
        while not stop.is_set():
            i += 1
            sql(name, f"BEGIN; UPDATE accounts SET balance = balance - 1 WHERE id = {i % 200 + 1};"
                      f" UPDATE accounts SET balance = balance + 1 WHERE id = {(i * 7) % 200 + 1};"
                      f" INSERT INTO ledger VALUES ({5000 + i}, 'live', {i}); COMMIT", ns=src_ns)
            writes[0] = i

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        asked = time.monotonic()
        ask(name, src_ns, "under-writes")
        last = answered(name, src_ns, "under-writes")
        took = time.monotonic() - asked
    finally:
        stop.set()
        thread.join(timeout=60)
    assert writes[0] > 0, "the writer wrote nothing while the verification ran"
    assert last["verified"] is True, last
    assert last["reason"] == "Verified"
    assert last["tables"] == 2
    # the point lies between the rows written before it and the writer's last one
    assert 5200 <= last["rows"] <= 5200 + writes[0], last
    # the RTO is part of the verification's own time (how long depends on the machine's load, not the product)
    assert 0 < last["rtoSeconds"] < took, (took, last)
    assert f"in {float(last['rtoSeconds'])} s" in last["message"], last  # 152.0 comes back from the API as 152
    assert 0 <= last["rpoSeconds"] <= ARCHIVE_TIMEOUT + 30, last  # archive_timeout closes the point's segment
    cond = wait_condition(name, src_ns, "RecoveryVerified")
    assert cond["reason"] == "Verified" and last["point"] in cond["message"]
    assert (status(name, src_ns).get("archive") or {}).get("lastVerifiedAt")
    wait_until(lambda: events_of(name, src_ns, "RecoveryVerificationStarted"), timeout=60, what="the started Event")
    wait_until(lambda: events_of(name, src_ns, "Verified"), timeout=60, what="a Normal Verified Event")
    wait_until(lambda: metric(operator_both, "sampledb_archive_recovery_rto_seconds", src_ns, name) is not None,
               timeout=60, what="the RTO metric")
    assert metric(operator_both, "sampledb_archive_recovery_rpo_seconds", src_ns, name) == last["rpoSeconds"]
    # the primary took every write: the point's locks held nobody back for good
    assert int(sql(name, "SELECT sum(balance) FROM accounts", ns=src_ns)) == 200 * 100


def test_a_wal_segment_deleted_from_the_store_fails_the_verification_by_name_until_a_new_base_backup(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess) -> None:
    src_ns, _ = namespaces
    name = "holed"
    spec = archiving(store, src_ns, name, PG15)
    ledger(name, src_ns, "lost-in-the-hole", 1, 2000)  # after the first base backup: only in the WAL
    segment = sql(name, "SELECT pg_walfile_name(pg_current_wal_lsn())", ns=src_ns)
    switch_and_wait(name, src_ns)
    client = s3(store)
    prefix = f"{spec['path']}/{name}/wals/"
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=prefix)
            for o in page.get("Contents", [])]
    [key] = [k for k in keys if k.rsplit("/", 1)[-1].startswith(segment)]
    client.delete_object(Bucket=store.bucket, Key=key)

    ask(name, src_ns, "with-a-hole")
    last = answered(name, src_ns, "with-a-hole")
    assert last["verified"] is False and last["reason"] == "RestoreFailed", last
    assert segment in last["message"], last
    cond = condition(name, "RecoveryVerified", src_ns)
    assert (cond["status"], cond["reason"]) == ("False", "RestoreFailed") and segment in cond["message"]
    wait_until(lambda: [e for e in events_of(name, src_ns, "RestoreFailed") if e["type"] == "Warning"], timeout=60,
               what="a Warning RestoreFailed Event")
    assert condition(name, "Ready", src_ns)["status"] == "True"  # the database itself is fine

    # the runbook's remedy: a base backup after the hole, then points after it verify again
    before = (status(name, src_ns).get("archive") or {}).get("lastBaseBackup") or {}
    kubectl("annotate", "sdb", name, "-n", src_ns, "--overwrite", f"sampledb.io/base-backup={int(time.time())}")
    wait_until(lambda: ((status(name, src_ns).get("archive") or {}).get("lastBaseBackup") or {}).get("name")
               not in (None, before.get("name")), timeout=300, what="a new base backup")
    ask(name, src_ns, "after-a-new-base-backup")
    again = answered(name, src_ns, "after-a-new-base-backup")
    assert again["verified"] is True, again
    assert again["rows"] == sum(count for count, _ in table_stats(name, src_ns).values()) == 2000  # nothing writes
    assert wait_condition(name, src_ns, "RecoveryVerified")["reason"] == "Verified"
