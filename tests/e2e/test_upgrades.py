"""Version upgrades end to end: minor and major flows (Link, the default, and Dump), failure and rollback,
a crash mid-upgrade.

Real operator and control plane; kwok runs no PostgreSQL, so these tests assert the operator's
orchestration (backups, Jobs, which image and data directory the StatefulSet runs, conditions).
The upgrade script itself is tested against real PostgreSQL servers in tests/dataplane/.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.e2e.conftest import apply, condition, jobs_of, sampledb, status, wait_ready
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.operator import OperatorProcess

pytestmark = pytest.mark.cluster


def container(name: str, ns: str) -> dict[str, Any]:
    sts = kubectl_json("get", "statefulset", name, "-n", ns)
    return sts["spec"]["template"]["spec"]["containers"][0]


def pgdata(name: str, ns: str) -> str:
    return next(e["value"] for e in container(name, ns)["env"] if e["name"] == "PGDATA")


def pre_upgrade_backups(ns: str) -> list[dict[str, Any]]:
    return [b for b in kubectl_json("get", "sampledbbackups", "-n", ns)["items"]
            if b["spec"]["reason"] == "pre-upgrade"]


def set_version(name: str, ns: str, version: str) -> None:
    kubectl("patch", "sampledb", name, "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"version": version}}))


def test_minor_upgrade_takes_a_backup_then_rolls_the_statefulset(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("minor", ns))
    wait_ready("minor", ns)
    set_version("minor", ns, "16.6")
    wait_until(lambda: status("minor", ns).get("currentVersion") == "16.6", timeout=120, what="currentVersion 16.6")
    [backup] = pre_upgrade_backups(ns)
    assert backup["status"]["phase"] == "Succeeded"
    wait_until(lambda: status("minor", ns).get("lastSnapshot", {}).get("name") == backup["metadata"]["name"],
               timeout=60, what="status.lastSnapshot naming the pre-upgrade backup")
    assert container("minor", ns)["image"] == "postgres:16.6"
    assert pgdata("minor", ns).endswith("/pgdata")  # same data directory for a minor upgrade
    assert jobs_of(ns, "upgrade") == []
    up = condition("minor", ns, "Upgrading")
    assert (up["status"], up["reason"]) == ("False", "UpgradeSucceeded")
    wait_ready("minor", ns)
    assert status("minor", ns)["phase"] == "Running"


def link_jobs(ns: str) -> list[dict[str, Any]]:
    return [j for j in jobs_of(ns, "upgrade") if j["metadata"]["name"].endswith("-link")]


def events_of(name: str, ns: str) -> set[str]:
    return {e["reason"] for e in kubectl_json("get", "events", "-n", ns,
                                              "--field-selector", f"involvedObject.name={name}")["items"]}


def test_major_upgrade_with_link_stops_the_server_links_with_the_old_binaries_and_switches(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("major", ns))  # spec.upgrade.method: Link, the default
    wait_ready("major", ns)
    set_version("major", ns, "17.2")
    wait_until(lambda: status("major", ns).get("currentVersion") == "17.2", timeout=180, what="currentVersion 17.2")
    [backup] = pre_upgrade_backups(ns)
    assert backup["status"]["phase"] == "Succeeded"
    [job] = link_jobs(ns)
    spec = job["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert c["image"] == "postgres:17.2"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["UPGRADE_METHOD"] == "link"
    assert env["NEW_PGDATA"] == "/var/lib/postgresql/data/pgdata-17"
    assert env["OLD_PGDATA"] == "/var/lib/postgresql/data/pgdata"
    [init] = spec["initContainers"]
    assert init["image"] == "postgres:16.4"  # the old image lends its binaries
    assert "copy-binaries" in init["command"]
    assert "podAffinity" not in (spec.get("affinity") or {})  # the database pod is gone while it runs
    assert container("major", ns)["image"] == "postgres:17.2"
    assert pgdata("major", ns) == "/var/lib/postgresql/data/pgdata-17"
    wait_ready("major", ns)
    assert kubectl_json("get", "statefulset", "major", "-n", ns)["spec"]["replicas"] == 1
    # after Ready: the analyze Job (pg_upgrade carries no optimizer statistics)
    wait_until(lambda: [j for j in jobs_of(ns, "upgrade") if j["metadata"]["name"].endswith("-analyze")],
               timeout=60, what="the analyze Job")
    assert {"BackupRequested", "StoppingServer", "UpgradeJobCreated", "UpgradeSucceeded",
            "AnalyzeJobCreated"} <= events_of("major", ns)
    assert "UpgradeFallbackToDump" not in events_of("major", ns)


def test_major_upgrade_with_dump_moves_the_data_with_a_job_and_switches_directory(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("dump", ns, upgrade={"method": "Dump"}))
    wait_ready("dump", ns)
    set_version("dump", ns, "17.2")
    wait_until(lambda: status("dump", ns).get("currentVersion") == "17.2", timeout=180, what="currentVersion 17.2")
    [backup] = pre_upgrade_backups(ns)
    assert backup["status"]["phase"] == "Succeeded"
    [job] = jobs_of(ns, "upgrade")
    spec = job["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert c["image"] == "postgres:17.2"
    assert {"name": "NEW_PGDATA", "value": "/var/lib/postgresql/data/pgdata-17"} in c["env"]
    assert spec["affinity"]["podAffinity"]  # next to the database pod: the volume is ReadWriteOnce
    assert container("dump", ns)["image"] == "postgres:17.2"
    assert pgdata("dump", ns) == "/var/lib/postgresql/data/pgdata-17"
    wait_ready("dump", ns)
    events = events_of("dump", ns)
    assert {"BackupRequested", "UpgradeJobCreated", "UpgradeSucceeded"} <= events
    assert not {"StoppingServer", "AnalyzeJobCreated"} & events


def test_failed_link_upgrade_starts_the_old_version_again_until_retried(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("fragile", ns)
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "upgrade"}  # only the upgrade Jobs fail
    apply(db)
    wait_ready("fragile", ns)
    set_version("fragile", ns, "17.2")
    wait_until(lambda: condition("fragile", ns, "Upgrading").get("reason") == "UpgradeFailed", timeout=180,
               what="Upgrading=False UpgradeFailed")
    # the Job ended without a result line (exit 1): not a refused check, so no fallback to Dump
    message = condition("fragile", ns, "Upgrading")["message"]
    assert "BackoffLimitExceeded" in message and "rolled back" in message, message
    assert status("fragile", ns)["currentVersion"] == "16.4"
    assert status("fragile", ns)["phase"] == "Degraded"
    assert container("fragile", ns)["image"] == "postgres:16.4"
    assert pgdata("fragile", ns).endswith("/pgdata")
    # the old server, stopped for pg_upgrade, runs again
    wait_until(lambda: kubectl_json("get", "statefulset", "fragile", "-n", ns)["spec"]["replicas"] == 1,
               timeout=60, what="the StatefulSet back at 1 replica")
    wait_ready("fragile", ns)
    assert len(link_jobs(ns)) == 1 and len(jobs_of(ns, "upgrade")) == 1  # no retry loop, no Dump Job
    assert jobs_of(ns, "thaw") == []  # nothing was frozen: the server was stopped, not made read-only
    assert "UpgradeFallbackToDump" not in events_of("fragile", ns)
    # Fix the cause and ask for a retry: a new attempt (new backup and Job) succeeds.
    kubectl("annotate", "sampledb", "fragile", "-n", ns, "testing.sampledb.io/fail-",
            "sampledb.io/retry-upgrade=1")
    wait_until(lambda: status("fragile", ns).get("currentVersion") == "17.2", timeout=180, what="upgrade on retry")
    assert len(link_jobs(ns)) == 2
    assert len(pre_upgrade_backups(ns)) == 2


def test_failed_dump_upgrade_keeps_the_old_version_and_thaws_it_until_retried(
        namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    db = sampledb("fragile", ns, upgrade={"method": "Dump"})
    db["metadata"]["annotations"] = {"testing.sampledb.io/fail": "upgrade"}  # only the upgrade Job fails
    apply(db)
    wait_ready("fragile", ns)
    set_version("fragile", ns, "17.2")
    wait_until(lambda: condition("fragile", ns, "Upgrading").get("reason") == "UpgradeFailed", timeout=180,
               what="Upgrading=False UpgradeFailed")
    assert "BackoffLimitExceeded" in condition("fragile", ns, "Upgrading")["message"]
    assert status("fragile", ns)["currentVersion"] == "16.4"
    assert status("fragile", ns)["phase"] == "Degraded"
    assert container("fragile", ns)["image"] == "postgres:16.4"
    assert pgdata("fragile", ns).endswith("/pgdata")
    assert len(jobs_of(ns, "upgrade")) == 1  # no retry loop
    # the old server is made writable again (the Job may have been killed while it was frozen)
    wait_until(lambda: len(jobs_of(ns, "thaw")) == 1, timeout=60, what="one thaw Job")
    # Fix the cause and ask for a retry: a new attempt (new backup and Job) succeeds.
    kubectl("annotate", "sampledb", "fragile", "-n", ns, "testing.sampledb.io/fail-",
            "sampledb.io/retry-upgrade=1")
    wait_until(lambda: status("fragile", ns).get("currentVersion") == "17.2", timeout=180, what="upgrade on retry")
    assert len(jobs_of(ns, "upgrade")) == 2
    assert len(pre_upgrade_backups(ns)) == 2


def test_operator_killed_mid_upgrade_resumes_without_a_second_upgrade_job(kubeconfig: str, namespace: str) -> None:
    ns = namespace
    apply(sampledb("resume", ns))
    first = OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect").start()
    wait_ready("resume", ns)
    set_version("resume", ns, "17.2")
    wait_until(lambda: len(link_jobs(ns)) == 1, timeout=120, what="the link Job")
    first.kill()
    with OperatorProcess(kubeconfig, "--namespaces", ns, "--no-leader-elect"):
        wait_until(lambda: status("resume", ns).get("currentVersion") == "17.2", timeout=180,
                   what="the upgrade to finish")
        wait_ready("resume", ns)
    assert len(link_jobs(ns)) == 1
    assert [j for j in jobs_of(ns, "upgrade") if not j["metadata"]["name"].endswith(("-link", "-analyze"))] == []
    assert len(pre_upgrade_backups(ns)) == 1


def test_major_downgrade_is_rejected_at_admission(namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    apply(sampledb("down", ns, version="17.2"))
    wait_ready("down", ns)
    out = kubectl("patch", "sampledb", "down", "-n", ns, "--type=merge", "-p", '{"spec":{"version":"16.4"}}',
                  check=False)
    assert out.returncode != 0
    assert "downgrade" in out.stderr
    assert status("down", ns)["currentVersion"] == "17.2"
