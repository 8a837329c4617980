"""reconcilers/upgrade.py on the fake cluster: the passes of an upgrade and what they create.

One upgrade at a time (issue #11, item 2): a new spec.version or retry annotation while an upgrade
Job runs starts no second Job on the same volume; the new target waits, and says so.
"""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster, condition, running_database

from sampledb_operator.decide import desired as d
from sampledb_operator.decide import upgrade as up

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
    assert sts is not None and sts["metadata"]["annotations"][d.VERSION_ANNOTATION] == "16.4"
