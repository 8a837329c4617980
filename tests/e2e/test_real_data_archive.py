"""Real PostgreSQL on the real node, a real S3 server (hack/cluster's versitygw): continuous WAL archiving, base
backups, and point-in-time recovery into new SampleDBs, judged on the data (row counts and checksums per table).

The operator runs on the host watching two namespaces of its own (`source` and `target`), so a test can delete a
database's whole namespace and recover it in the other one from the store alone.
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.e2e.real_data import PG15, PG18, condition, sql, status, table_stats, wait_ready
from tests.support import kube
from tests.support.cluster import (
    Cluster,
    ObjectStore,
    current_object_store,
    start_local_component,
    stop_local_component,
)
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}
ARCHIVE_TIMEOUT = 5  # seconds: every test below waits for WAL to reach the store


@pytest.fixture
def store(cluster: Cluster) -> ObjectStore:
    found = current_object_store(cluster)
    assert found is not None, "hack/cluster env names no object store (SAMPLEDB_S3_*)"
    return found


@pytest.fixture
def namespaces(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """Two fresh namespaces whose pods run for real."""
    base = f"t-arch-{secrets.token_hex(3)}"
    made = [f"{base}-src", f"{base}-dst"]
    for ns in made:
        kube.create_namespace(ns, kwok=False, labels=RESTRICTED)
    try:
        yield made[0], made[1]
    finally:
        for ns in made:
            kube.release_finalizers(ns)
            kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def operator_both(kubeconfig: str, namespaces: tuple[str, str]) -> Iterator[OperatorProcess]:
    op = OperatorProcess(kubeconfig, "--namespaces", ",".join(namespaces), "--no-leader-elect",
                         "--recheck-period", "5")
    op.start()
    try:
        yield op
    finally:
        if op.running:
            op.stop()


def store_objects(store: ObjectStore, ns: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The credentials Secret and CA ConfigMap in `ns`, and the objectStore spec naming them."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-keys", "namespace": ns, "labels": {
                  "sampledb.io/object-store-credentials": "true"}},
              "stringData": {"accessKeyId": store.access_key, "secretAccessKey": store.secret_key}}
    ca = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s3-ca", "namespace": ns},
          "data": {"ca.crt": Path(store.ca_file).read_text()}}
    spec = {"endpoint": store.endpoint, "bucket": store.bucket, "path": path,
            "credentials": {"secretName": "s3-keys"}, "ca": {"name": "s3-ca", "key": "ca.crt"}}
    return [secret, ca], spec


def database(name: str, ns: str, version: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB", "metadata": {"name": name, "namespace": ns},
            "spec": {"version": version, "storage": {"size": "512Mi"}, "deletionPolicy": "Delete", **spec}}


def apply(*objs: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objs))


def archiving(store: ObjectStore, ns: str, name: str, version: str = PG15, **spec: Any) -> dict[str, Any]:
    """Create `name` in `ns` archiving to the store under e2e/<ns>; wait until it is ready and its first base
    backup has ended; the objectStore spec a recovery of it names."""
    objs, store_spec = store_objects(store, ns, f"e2e/{ns}")
    apply(*objs, database(name, ns, version, backup={"objectStore": {**store_spec,
                                                                    "archiveTimeoutSeconds": ARCHIVE_TIMEOUT}},
                          **spec))
    wait_ready(name, ns=ns)
    wait_condition(name, ns, "BaseBackupHealthy")
    return store_spec


def wait_condition(name: str, ns: str, type_: str, want: str = "True", timeout: float = 300) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        cond = condition(name, type_, ns)
        return cond if cond.get("status") == want else None
    return wait_until(seen, timeout=timeout, what=f"{ns}/{name} {type_}={want} (now {condition(name, type_, ns)})")


def archived_through(name: str, ns: str, segment: str) -> bool:
    """The primary has archived `segment` or a later one (same timeline or later)."""
    last = (status(name, ns).get("archive") or {}).get("lastArchivedWal") or ""
    return bool(re.fullmatch(r"[0-9A-F]{24}", last)) and last >= segment


def switch_and_wait(name: str, ns: str) -> None:
    """Close the current WAL segment and wait until the store has it."""
    segment = sql(name, "SELECT pg_walfile_name(pg_current_wal_lsn())", ns=ns)
    sql(name, "SELECT pg_switch_wal()", ns=ns, superuser=True)
    wait_until(lambda: archived_through(name, ns, segment), timeout=120, what=f"{segment} archived")


def ledger(name: str, ns: str, batch: str, first: int, last: int) -> None:
    sql(name, "CREATE TABLE IF NOT EXISTS ledger (id int PRIMARY KEY, batch text NOT NULL, amount numeric);"
              f" INSERT INTO ledger SELECT g, '{batch}', g * 1.25 FROM generate_series({first}, {last}) g", ns=ns)


@pytest.mark.parametrize("version", [PG18])  # both majors: tests/dataplane/test_dataplane_archive.py
def test_recovery_to_a_time_has_every_row_committed_before_it_and_none_after(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess, version: str) -> None:
    src_ns, _ = namespaces
    name = "orders"
    spec = archiving(store, src_ns, name, version)
    assert "completed" in condition(name, "BaseBackupHealthy", src_ns)["message"]
    archive = status(name, src_ns)["archive"]  # the store's catalog, as the base backup Job listed it
    assert [b["backupId"] for b in archive["baseBackups"]] == [archive["lastBaseBackup"]["backupId"]]
    assert archive["baseBackupsCount"] == 1 and archive["firstRecoverabilityPoint"]
    ledger(name, src_ns, "before", 1, 2000)  # after the base backup: replayed from WAL
    wait_condition(name, src_ns, "ContinuousArchiving")
    before = table_stats(name, src_ns)
    target = sql(name, "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
                 ns=src_ns)
    ledger(name, src_ns, "after", 2001, 2500)
    assert table_stats(name, src_ns) != before
    switch_and_wait(name, src_ns)

    copy = "orders-at-t"
    apply(database(copy, src_ns, version, recovery={"objectStore": spec, "database": name, "targetTime": target}))
    wait_ready(copy, timeout=600, ns=src_ns)
    assert condition(copy, "Initialized", src_ns)["reason"] == "Recovered"
    assert table_stats(copy, src_ns) == before
    assert sql(copy, "SELECT count(*) FROM ledger WHERE batch = 'after'", ns=src_ns) == "0"
    # a new primary on a new timeline, reachable with its own credentials
    assert int(sql(copy, "SELECT timeline_id FROM pg_control_checkpoint()", ns=src_ns, superuser=True)) >= 2
    assert sql(copy, "SELECT pg_is_in_recovery()", ns=src_ns) == "f"




def events_of(name: str, ns: str, reason: str) -> list[dict[str, Any]]:
    items = kubectl_json("get", "events", "-n", ns, "--field-selector",
                         f"involvedObject.name={name},involvedObject.kind=SampleDB")["items"]
    return [e for e in items if e.get("reason") == reason]


def metric(op: OperatorProcess, family: str, ns: str, name: str) -> float | None:
    for line in op.metrics_text().splitlines():
        if line.startswith(f"{family}{{") and f'namespace="{ns}"' in line and f'name="{name}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.disruptive  # the store goes away for a while: other archiving tests would see it too
@pytest.mark.local_only
def test_while_the_store_is_down_wal_waits_and_says_so_and_catches_up_by_itself_when_it_is_back(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess) -> None:
    src_ns, _ = namespaces
    name = "outage"
    spec = archiving(store, src_ns, name)
    stop_local_component("s3")
    try:
        for batch in range(3):  # three segments completed while the store is away
            ledger(name, src_ns, f"outage-{batch}", batch * 1000 + 1, batch * 1000 + 1000)
            sql(name, "SELECT pg_switch_wal()", ns=src_ns, superuser=True)
        failing = wait_condition(name, src_ns, "ContinuousArchiving", want="False", timeout=180)
        assert failing["reason"] == "ArchiveFailing", failing
        wait_until(lambda: (status(name, src_ns).get("archive") or {}).get("pendingSegments", 0) >= 3, timeout=120,
                   what="the segments waiting on the volume counted")
        wait_until(lambda: events_of(name, src_ns, "ArchiveFailing"), timeout=60, what="a Warning ArchiveFailing")
        wait_until(lambda: (metric(operator_both, "sampledb_archive_pending_segments", src_ns, name) or 0) >= 3,
                   timeout=60, what="the pending segments metric")
        assert condition(name, "Ready", src_ns)["status"] == "True"  # nothing else breaks
        ledger(name, src_ns, "still-writable", 5001, 5010)
    finally:
        start_local_component("s3")
    wait_condition(name, src_ns, "ContinuousArchiving", timeout=300)
    wait_until(lambda: (status(name, src_ns).get("archive") or {}).get("pendingSegments") == 0, timeout=180,
               what="the backlog archived")
    wait_until(lambda: events_of(name, src_ns, "ArchiveRecovered"), timeout=60, what="a Normal ArchiveRecovered")
    committed = table_stats(name, src_ns)
    switch_and_wait(name, src_ns)
    copy = "outage-copy"
    apply(database(copy, src_ns, PG15, recovery={"objectStore": spec, "database": name}))
    wait_ready(copy, timeout=600, ns=src_ns)
    assert table_stats(copy, src_ns) == committed


def test_a_recovery_from_a_store_path_with_nothing_in_it_fails_and_says_why(
        store: ObjectStore, namespaces: tuple[str, str], operator_both: OperatorProcess) -> None:
    _, dst_ns = namespaces
    objs, spec = store_objects(store, dst_ns, f"e2e/nothing-{secrets.token_hex(3)}")
    apply(*objs, database("ghost", dst_ns, PG15, recovery={"objectStore": spec, "database": "ghost"}))
    failed = wait_condition("ghost", dst_ns, "Initialized", want="False", timeout=300)
    wait_until(lambda: condition("ghost", "Initialized", dst_ns).get("reason") == "RecoveryFailed", timeout=300,
               what="RecoveryFailed")
    message = condition("ghost", "Initialized", dst_ns)["message"]
    assert "ghost" in message and failed
    assert condition("ghost", "Degraded", dst_ns)["status"] == "True"
    assert base64.b64encode(store.secret_key.encode()).decode() not in message and store.secret_key not in message
