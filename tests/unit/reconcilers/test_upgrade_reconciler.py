"""reconcilers/upgrade.py on the fake cluster: the passes of an upgrade and what they create.

One upgrade at a time (issue #11, item 2): a new spec.version or retry annotation while an upgrade
Job runs starts no second Job on the same volume; the new target waits, and says so.
"""

from __future__ import annotations

import json

from tests.support.fake_cluster import FakeCluster, condition, running_database

from sampledb_operator.decide import desired as d
from sampledb_operator.decide import upgrade as up
from sampledb_operator.decide.labels import VERSION_ANNOTATION
from sampledb_operator.model import names
from sampledb_operator.observability.metrics import REGISTRY

JOB = "Job"
BACKUP = "SampleDBBackup"


def upgrade_jobs(cluster: FakeCluster) -> list[str]:
    return sorted(j["metadata"]["name"] for j in cluster.of_kind(JOB)
                  if j["metadata"]["labels"].get("app.kubernetes.io/component") == "upgrade")


async def start_major_upgrade(cluster: FakeCluster, version: str = "17.2") -> str:
    """Ask for `version`; let its pre-upgrade backup succeed; the upgrade Job it starts."""
    cluster.patch("SampleDB", "orders", {"spec": {"version": version}})
    await cluster.reconcile("orders")
    [backup] = [b for b in cluster.of_kind(BACKUP) if (b.get("status") or {}).get("phase") != "Succeeded"]
    cluster.set_status(BACKUP, backup["metadata"]["name"], {"phase": "Succeeded"})
    await cluster.reconcile("orders")
    [job] = upgrade_jobs(cluster)
    return job


async def test_a_new_target_waits_for_the_running_upgrade_job() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    first = await start_major_upgrade(cluster)

    backups = len(cluster.of_kind(BACKUP))
    cluster.patch("SampleDB", "orders", {"spec": {"version": "17.4"}})
    for _ in range(2):
        await cluster.reconcile("orders")
    assert upgrade_jobs(cluster) == [first]  # no second Job on the same volume
    assert len(cluster.of_kind(BACKUP)) == backups  # nor a backup for the new target meanwhile
    cond = condition(cluster.get("SampleDB", "orders"), "Upgrading")
    assert (cond["status"], cond["reason"]) == ("True", "WaitingForUpgrade")
    assert first in cond["message"] and "17.4" in cond["message"]
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None and sts["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:16.4"

    # The first Job ends: the new target goes on, with its own backup, then its own Job.
    cluster.finish_job(first, succeeded=False)
    await cluster.reconcile("orders")
    assert len(cluster.of_kind(BACKUP)) == backups + 1
    assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["reason"] == "BackingUp"


async def test_the_retry_annotation_waits_for_the_running_upgrade_job_too() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    first = await start_major_upgrade(cluster)
    cluster.patch("SampleDB", "orders", {"metadata": {"annotations": {up.RETRY_ANNOTATION: "1"}}})
    await cluster.reconcile("orders")
    assert upgrade_jobs(cluster) == [first]
    assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["reason"] == "WaitingForUpgrade"


async def test_a_new_minor_with_a_pinned_image_of_the_old_one_is_refused_not_reported_done() -> None:
    """Issue #11, item 3: the pod would keep running 16.4 while the status said 16.6."""
    cluster = FakeCluster()
    await running_database(cluster, image="postgres:16.4")
    cluster.patch("SampleDB", "orders", {"spec": {"version": "16.6"}})
    for _ in range(2):
        await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    spec_valid = condition(db, "SpecValid")
    assert (spec_valid["status"], spec_valid["reason"]) == ("False", "ImageVersionMismatch")
    assert "16.6" in spec_valid["message"] and "postgres:16.4" in spec_valid["message"]
    assert db is not None and db["status"]["currentVersion"] == "16.4"
    assert condition(db, "Upgrading") == {}
    assert cluster.of_kind(BACKUP) == []
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None and sts["metadata"]["annotations"][VERSION_ANNOTATION] == "16.4"


def upgrade_events(cluster: FakeCluster) -> list[tuple[str, str, str]]:
    return [e for e in cluster.recorder.events
            if e[1] in {"BackupRequested", "UpgradeJobCreated", "ThawJobCreated"}]


def script_result(cluster: FakeCluster, job: str, message: str) -> None:
    """The failed upgrade Job's pod, with upgrade.sh's result line in its termination message."""
    line = json.dumps({"script": "upgrade", "ok": False, "message": message})
    cluster.put("Pod", {"metadata": {"name": f"{job}-x", "labels": {"job-name": job},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 1,
                                                                                   "message": line + "\n"}}}]}})


async def test_a_major_upgrade_makes_its_backup_then_its_job_and_each_once() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.writes.clear()
    cluster.patch("SampleDB", "orders", {"spec": {"version": "17.2"}})
    await cluster.reconcile("orders")
    [backup] = cluster.of_kind(BACKUP)
    name = backup["metadata"]["name"]
    assert cluster.written("create") == [("create", BACKUP, name)]
    assert upgrade_events(cluster) == [("Normal", "BackupRequested", f"pre-upgrade backup {name} requested")]
    assert upgrade_jobs(cluster) == []
    await cluster.reconcile("orders")  # the backup runs: nothing more
    assert cluster.written("create") == [("create", BACKUP, name)]

    cluster.set_status(BACKUP, name, {"phase": "Succeeded"})
    await cluster.reconcile("orders")
    [job] = upgrade_jobs(cluster)
    assert cluster.written("create") == [("create", BACKUP, name), ("create", JOB, job)]
    assert upgrade_events(cluster)[1:] == [("Normal", "UpgradeJobCreated",
                                            f"created upgrade Job {job} (data into pgdata-17)")]
    await cluster.reconcile("orders")
    assert len(cluster.written("create")) == 2
    assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["reason"] == "UpgradeJobRunning"
    assert ("Pod", f"job-name={job}") not in cluster.lists  # no result line read while the Job runs


async def test_a_stale_cache_never_requests_a_second_backup_nor_announces_it_twice() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.patch("SampleDB", "orders", {"spec": {"version": "17.2"}})
    cluster.freeze_cache()  # the backup's creation does not reach the cache before the next pass
    for _ in range(2):
        await cluster.reconcile("orders")
    assert len({w[2] for w in cluster.written("create", BACKUP)}) == 1  # one name
    assert len(cluster.written("create", BACKUP)) == 2  # asked again: AlreadyExists
    assert len(cluster.of_kind(BACKUP)) == 1
    assert [e[1] for e in upgrade_events(cluster)] == ["BackupRequested"]


async def test_a_failed_upgrade_job_reports_the_scripts_reason_and_thaws_the_old_server_once() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    job = await start_major_upgrade(cluster)
    cluster.finish_job(job, succeeded=False)
    script_result(cluster, job, "pg_restore: error: could not execute query")
    await cluster.reconcile("orders")
    thaw = names.fit(job, "-thaw")
    assert [j["metadata"]["name"] for j in cluster.of_kind(JOB)
            if j["metadata"]["labels"]["app.kubernetes.io/component"] == "thaw"] == [thaw]
    assert upgrade_events(cluster)[-1] == (
        "Normal", "ThawJobCreated", f"created Job {thaw}: the old server accepts writes again after the failed upgrade")
    assert ("Pod", f"job-name={job}") in cluster.lists
    cond = condition(cluster.get("SampleDB", "orders"), "Upgrading")
    assert (cond["status"], cond["reason"]) == ("False", "UpgradeFailed")
    assert "pg_restore: error: could not execute query (BackoffLimitExceeded)" in cond["message"]
    assert ("Warning", "UpgradeFailed") in [(e[0], e[1]) for e in cluster.recorder.events]
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None and sts["spec"]["template"]["spec"]["containers"][0]["image"] == "postgres:16.4"

    creates = len(cluster.written("create"))
    cluster.finish_job(thaw)
    await cluster.reconcile("orders")
    assert len(cluster.written("create")) == creates  # one thaw per attempt
    assert [e[1] for e in upgrade_events(cluster)].count("ThawJobCreated") == 1


async def test_a_succeeded_upgrade_switches_the_directory_and_records_its_duration() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    job = await start_major_upgrade(cluster)
    before = REGISTRY.get_sample_value("sampledb_upgrade_duration_seconds_count", {"kind": "major"}) or 0.0
    cluster.clock.advance(120)
    cluster.finish_job(job)
    await cluster.reconcile("orders")
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "postgres:17.2"
    assert {"name": "PGDATA", "value": f"{d.DATA_MOUNT}/pgdata-17"} in container["env"]
    assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["reason"] == "RollingOut"
    cluster.statefulset_ready("orders")
    await cluster.reconcile("orders")
    assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["reason"] == "UpgradeSucceeded"
    after = REGISTRY.get_sample_value("sampledb_upgrade_duration_seconds_count", {"kind": "major"})
    assert after == before + 1
    await cluster.reconcile("orders")  # observed once
    assert REGISTRY.get_sample_value("sampledb_upgrade_duration_seconds_count", {"kind": "major"}) == after
