"""Schema migrations end to end: the real operator, the real control plane, kwok running the Jobs.

A migrations ConfigMap -> a pre-migration SampleDBBackup -> one migrate Job -> status.appliedMigrations.
Under kwok no script runs (tests/dataplane/ runs migrate.sh against PostgreSQL); here the Jobs
succeed, or fail when the SampleDB carries testing.sampledb.io/fail=migrate.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from tests.e2e.conftest import apply, sampledb, status
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster

INIT = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);"
INDEX = "CREATE INDEX users_name ON users (name);"
EMAIL = "ALTER TABLE users ADD COLUMN email text;"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def migrations_configmap(ns: str, files: dict[str, str], name: str = "app-sql") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": files}




def migrated(name: str, ns: str) -> dict[str, Any]:
    return next((c for c in status(name, ns).get("conditions", []) if c["type"] == "Migrated"), {})


def applied(name: str, ns: str) -> list[tuple[str, str]]:
    return [(a["name"], a.get("checksum", "")) for a in status(name, ns).get("appliedMigrations", [])]


def migrate_jobs(ns: str) -> list[dict[str, Any]]:
    return sorted((j for j in kubectl_json("get", "jobs", "-n", ns)["items"]
                   if j["metadata"]["labels"].get("app.kubernetes.io/component") == "migrate"),
                  key=lambda j: j["metadata"]["creationTimestamp"])


def premigration_backups(ns: str) -> list[dict[str, Any]]:
    return [b for b in kubectl_json("get", "sampledbbackups", "-n", ns)["items"]
            if b["spec"].get("reason") == "pre-migration"]


def snapshots(ns: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kubectl_json("get", "configmaps", "-n", ns, "-l",
                                               "app.kubernetes.io/component=migrations")["items"]
    return found


def job_finished(job: dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in job.get("status", {}).get("conditions", []))


def reconciles(op: OperatorProcess) -> float:
    return op.metric("controller_runtime_reconcile_total", controller="sampledb")


def settled_writes(op: OperatorProcess) -> float | None:
    """The operator's write count, once a whole reconcile went by without a write."""
    before, seen = op.writes(), reconciles(op)
    wait_until(lambda: reconciles(op) > seen, timeout=60, what="one more reconcile")
    return before if op.writes() == before else None


def test_migrations_are_applied_once_in_order_after_a_backup_and_new_files_later(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply([migrations_configmap(ns, {"0002_add_index.sql": INDEX, "0001_init.sql": INIT}),
           sampledb("app", ns, migrations={"configMapName": "app-sql"})])
    wait_until(lambda: migrated("app", ns).get("status") == "True", timeout=180, what="Migrated=True")

    assert applied("app", ns) == [("0001_init.sql", sha(INIT)), ("0002_add_index.sql", sha(INDEX))]
    assert all(a.get("appliedAt") for a in status("app", ns)["appliedMigrations"])
    assert migrated("app", ns)["reason"] == "MigrationsApplied"
    assert status("app", ns)["phase"] == "Running"
    [backup] = premigration_backups(ns)
    assert backup["status"]["phase"] == "Succeeded"
    [job] = migrate_jobs(ns)
    assert job_finished(job, "Complete")
    # The Job started only after the backup completed, and ran on a copy of the files, not on the user's ConfigMap.
    assert backup["status"]["completedAt"] <= job["metadata"]["creationTimestamp"]
    pod = job["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "migrations"]
    assert volume["configMap"]["name"].startswith("app-migrations-")
    assert {"name": "MIGRATIONS_DIR", "value": "/sampledb/migrations"} in pod["containers"][0]["env"]
    # The copy is removed once the Job that mounted it finished.
    wait_until(lambda: snapshots(ns) == [], timeout=60, what="the snapshot ConfigMap removed")

    apply(migrations_configmap(ns, {"0001_init.sql": INIT, "0002_add_index.sql": INDEX, "0003_email.sql": EMAIL}))
    wait_until(lambda: len(applied("app", ns)) == 3, timeout=180, what="the third migration applied")
    assert applied("app", ns) == [("0001_init.sql", sha(INIT)), ("0002_add_index.sql", sha(INDEX)),
                                  ("0003_email.sql", sha(EMAIL))]
    assert [b["status"]["phase"] for b in premigration_backups(ns)] == ["Succeeded", "Succeeded"]
    first, second = migrate_jobs(ns)
    assert first["metadata"]["name"] == job["metadata"]["name"]
    assert job_finished(second, "Complete")
    wait_until(lambda: snapshots(ns) == [], timeout=60, what="the second snapshot ConfigMap removed")

    # Unchanged migrations: an unrelated change of the SampleDB runs nothing and writes nothing.
    baseline = wait_until(lambda: settled_writes(operator), timeout=120, what="writes to settle")
    before = reconciles(operator)
    kubectl("annotate", "sampledb", "app", "-n", ns, "example.com/touched=yes")
    wait_until(lambda: reconciles(operator) >= before + 2, timeout=120, what="reconciles after the annotation")
    assert len(migrate_jobs(ns)) == 2
    assert len(premigration_backups(ns)) == 2
    assert operator.writes() == baseline
    events = kubectl_json("get", "events", "-n", ns, "--field-selector", "reason=MigrationStarted")["items"]
    assert len(events) == 2


def test_a_failed_migration_is_reported_not_retried_and_a_changed_configmap_tries_again(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("bad", ns, migrations={"configMapName": "app-sql"})
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "migrate"}  # kwok fails the migrate pods only
    apply([migrations_configmap(ns, {"0001_init.sql": INIT, "0002_add_index.sql": INDEX}), db])

    wait_until(lambda: migrated("bad", ns).get("reason") == "MigrationFailed", timeout=180,
               what="Migrated=False MigrationFailed")
    cond = migrated("bad", ns)
    assert cond["status"] == "False"
    [job] = migrate_jobs(ns)
    assert job["metadata"]["name"] in cond["message"]
    assert "BackoffLimitExceeded" in cond["message"]
    assert "0001_init.sql" in cond["message"]  # no script ran (kwok): the message names what was pending
    st = status("bad", ns)
    assert st["phase"] == "Degraded"
    assert st.get("appliedMigrations", []) == []
    degraded = next(c for c in st["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "MigrationFailed")
    assert [b["status"]["phase"] for b in premigration_backups(ns)] == ["Succeeded"]

    # The cause goes away, but nothing changed in the migrations: the failed Job is not run again.
    before = reconciles(operator)
    kubectl("annotate", "sampledb", "bad", "-n", ns, "testing.sampledb.io/fail-")
    wait_until(lambda: reconciles(operator) >= before + 2, timeout=120, what="reconciles after the annotation")
    assert [j["metadata"]["name"] for j in migrate_jobs(ns)] == [job["metadata"]["name"]]
    assert migrated("bad", ns)["reason"] == "MigrationFailed"

    # A fixed file is a new set of pending migrations: a new backup and a new Job.
    fixed = INDEX.replace("users_name", "users_by_name")
    apply(migrations_configmap(ns, {"0001_init.sql": INIT, "0002_add_index.sql": fixed}))
    wait_until(lambda: migrated("bad", ns).get("status") == "True", timeout=180, what="Migrated=True")
    assert applied("bad", ns) == [("0001_init.sql", sha(INIT)), ("0002_add_index.sql", sha(fixed))]
    assert len(migrate_jobs(ns)) == 2
    assert len(premigration_backups(ns)) == 2
    wait_until(lambda: status("bad", ns).get("phase") == "Running", timeout=60, what="phase Running")


def test_a_missing_configmap_is_reported_and_applied_once_it_appears(namespace: str,
                                                                    operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("late", ns, migrations={"configMapName": "late-sql"}))
    wait_until(lambda: migrated("late", ns).get("reason") == "MigrationsSourceMissing", timeout=180,
               what="Migrated=False MigrationsSourceMissing")
    assert migrated("late", ns)["status"] == "False"
    assert "late-sql" in migrated("late", ns)["message"]
    assert (next(c for c in status("late", ns)["conditions"] if c["type"] == "Ready"))["status"] == "True"
    assert migrate_jobs(ns) == []
    assert premigration_backups(ns) == []

    apply(migrations_configmap(ns, {"0001_init.sql": INIT}, name="late-sql"))
    wait_until(lambda: migrated("late", ns).get("status") == "True", timeout=180, what="Migrated=True")
    assert applied("late", ns) == [("0001_init.sql", sha(INIT))]
    assert len(migrate_jobs(ns)) == 1


def test_a_changed_applied_file_is_refused_without_a_job(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply([migrations_configmap(ns, {"0001_init.sql": INIT}),
           sampledb("strict", ns, migrations={"configMapName": "app-sql"})])
    wait_until(lambda: migrated("strict", ns).get("status") == "True", timeout=180, what="Migrated=True")
    apply(migrations_configmap(ns, {"0001_init.sql": INIT + " -- edited", "0002_add_index.sql": INDEX}))
    wait_until(lambda: migrated("strict", ns).get("reason") == "MigrationChanged", timeout=180,
               what="Migrated=False MigrationChanged")
    assert "0001_init.sql" in migrated("strict", ns)["message"]
    assert status("strict", ns)["phase"] == "Degraded"
    assert applied("strict", ns) == [("0001_init.sql", sha(INIT))]
    assert len(migrate_jobs(ns)) == 1
    assert len(premigration_backups(ns)) == 1
