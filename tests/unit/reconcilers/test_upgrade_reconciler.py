"""reconcilers/upgrade.py on the fake cluster: the passes of an upgrade and what they create.

One upgrade at a time (issue #11, item 2): a new spec.version or retry annotation while an upgrade
Job runs starts no second Job on the same volume; the new target waits, and says so.
"""

from __future__ import annotations

import json

from tests.support.fake_cluster import FakeCluster, condition, running_database

from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import VERSION_ANNOTATION
from sampledb_operator.decide.upgrades import upgrade as up
from sampledb_operator.model import names
from sampledb_operator.observability.metrics import REGISTRY

JOB = "Job"
BACKUP = "SampleDBBackup"
DUMP = {"upgrade": {"method": "Dump"}}  # the tests below before the Link ones: the Dump method


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
    await running_database(cluster, **DUMP)
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
    await running_database(cluster, **DUMP)
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
    await running_database(cluster, **DUMP)
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
    await running_database(cluster, **DUMP)
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
    await running_database(cluster, **DUMP)
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
    await running_database(cluster, **DUMP)
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


async def test_a_link_upgrade_stops_the_server_then_runs_pg_upgrade_then_switches_and_analyzes() -> None:
    cluster = FakeCluster()
    await running_database(cluster)  # the default method: Link
    cluster.patch("SampleDB", "orders", {"spec": {"version": "18.1"}})
    await cluster.reconcile("orders")
    [backup] = cluster.of_kind(BACKUP)
    assert cluster.get("StatefulSet", "orders")["spec"]["replicas"] == 1  # type: ignore[index]  # backup first
    cluster.set_status(BACKUP, backup["metadata"]["name"], {"phase": "Succeeded"})
    await cluster.reconcile("orders")
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None and sts["spec"]["replicas"] == 0  # stopped, as a fence does
    assert upgrade_jobs(cluster) == []  # not while the StatefulSet has not seen it
    assert condition(cluster.get("SampleDB", "orders"), "Upgrading")["reason"] == "StoppingServer"

    cluster.set_status("StatefulSet", "orders", {"observedGeneration": sts["metadata"].get("generation", 1),
                                                 "replicas": 0, "readyReplicas": 0})
    await cluster.reconcile("orders")
    [link] = upgrade_jobs(cluster)
    job = cluster.get(JOB, link)
    assert job is not None
    pod = job["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]] == ["postgres:16.4"]  # the old binaries
    assert pod["containers"][0]["image"] == "postgres:18.1"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert (env["UPGRADE_METHOD"], env["OLD_PGDATA"], env["NEW_PGDATA"]) == (
        "link", f"{d.DATA_MOUNT}/pgdata", f"{d.DATA_MOUNT}/pgdata-18")
    assert "PGPASSWORD" not in env and "affinity" not in pod
    await cluster.reconcile("orders")
    assert cluster.get("StatefulSet", "orders")["spec"]["replicas"] == 0  # type: ignore[index]

    cluster.finish_job(link)
    await cluster.reconcile("orders")
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None and sts["spec"]["replicas"] == 1
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "postgres:18.1"
    assert {"name": "PGDATA", "value": f"{d.DATA_MOUNT}/pgdata-18"} in container["env"]
    cluster.statefulset_ready("orders")
    await cluster.reconcile("orders")
    db = cluster.get("SampleDB", "orders")
    assert condition(db, "Upgrading")["reason"] == "UpgradeSucceeded"
    assert db is not None and db["status"]["currentVersion"] == "18.1"
    analyze = [n for n in upgrade_jobs(cluster) if n.endswith("-analyze")]
    assert len(analyze) == 1 and "analyze" in str(cluster.get(JOB, analyze[0]))


async def test_a_link_refused_by_its_check_falls_back_to_dump_once_the_old_server_runs_again() -> None:
    cluster = FakeCluster()
    await running_database(cluster)
    cluster.patch("SampleDB", "orders", {"spec": {"version": "18.1"}})
    await cluster.reconcile("orders")
    [backup] = cluster.of_kind(BACKUP)
    cluster.set_status(BACKUP, backup["metadata"]["name"], {"phase": "Succeeded"})
    await cluster.reconcile("orders")
    cluster.set_status("StatefulSet", "orders", {"observedGeneration": 99, "replicas": 0})
    await cluster.reconcile("orders")
    [link] = upgrade_jobs(cluster)
    cluster.finish_job(link, succeeded=False)
    line = json.dumps({"script": "upgrade", "ok": False, "check_failed": True, "old_usable": True,
                       "message": "pg_upgrade --check refused the upgrade: loadable_libraries.txt: pgcrypto"})
    cluster.put("Pod", {"metadata": {"name": f"{link}-x", "labels": {"job-name": link},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 6,
                                                                                   "message": line + "\n"}}}]}})
    await cluster.reconcile("orders")
    assert cluster.get("StatefulSet", "orders")["spec"]["replicas"] == 1  # type: ignore[index]  # started again
    cond = condition(cluster.get("SampleDB", "orders"), "Upgrading")
    assert cond["reason"] == "FallingBackToDump" and "pgcrypto" in cond["message"]
    assert upgrade_jobs(cluster) == [link]  # no Dump Job before the old server is ready
    cluster.statefulset_ready("orders")
    await cluster.reconcile("orders")
    dump = [n for n in upgrade_jobs(cluster) if n != link]
    assert len(dump) == 1
    assert [e for e in cluster.recorder.events if e[:2] == ("Warning", "UpgradeFallbackToDump") and "pgcrypto" in e[2]]
    await cluster.reconcile("orders")
    assert len(upgrade_jobs(cluster)) == 2  # once
