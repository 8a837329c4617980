"""The reload step in the SampleDB reconciler, against the in-memory cluster: which Jobs, which status,
which Events; the Job's result line is read (a Pod list) only once it has finished."""

from __future__ import annotations

import json

from tests.support.fake_cluster import FakeCluster, condition, running_database

from sampledb_operator.decide.children import pgconfig
from sampledb_operator.model import names
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.reconcilers.reload import ReloadOutcome, reconcile_reload


def reload_jobs(cluster: FakeCluster) -> list[str]:
    return sorted(j["metadata"]["name"] for j in cluster.of_kind("Job")
                  if j["metadata"]["labels"]["app.kubernetes.io/component"] == "reload")


def template(cluster: FakeCluster) -> object:
    sts = cluster.get("StatefulSet", "orders")
    assert sts is not None
    return sts["spec"]["template"]


def edit(cluster: FakeCluster, parameters: dict[str, str]) -> None:
    cluster.patch("SampleDB", "orders", {"spec": {"parameters": parameters}})


def applied(cluster: FakeCluster) -> str | None:
    db = cluster.get("SampleDB", "orders")
    assert db is not None
    value = db.get("status", {}).get("appliedParameters")
    return str(value) if value is not None else None


def job_name(cluster: FakeCluster, parameters: dict[str, str]) -> str:
    db = cluster.get("SampleDB", "orders")
    assert db is not None
    return names.reload_job_name("orders", db["metadata"]["uid"], pgconfig.parameters_hash(parameters))


async def test_a_new_database_needs_no_reload_job() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "4MB"})
    await cluster.reconcile("orders")
    assert reload_jobs(cluster) == []


async def test_an_edit_is_reloaded_by_a_job_and_recorded_without_touching_the_pod_template() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    before = template(cluster)
    edit(cluster, {"work_mem": "64MB"})
    await cluster.reconcile("orders")
    cm = cluster.get("ConfigMap", names.configmap_name("orders"))
    assert cm is not None and "work_mem = '64MB'" in cm["data"]["postgresql.conf"]
    assert template(cluster) == before
    job = job_name(cluster, {"work_mem": "64MB"})
    assert reload_jobs(cluster) == [job]
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "4MB"})

    assert cluster.recorder.events[-1] == ("Normal", "ReloadingParameters",
                                           f"reloading spec.parameters with Job {job}")
    await cluster.reconcile("orders")  # the Job runs: its result line is not read
    assert ("Pod", f"job-name={job}") not in cluster.lists

    cluster.finish_job(job)
    cluster.put("Pod", {"metadata": {"name": f"{job}-x", "labels": {"job-name": job},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 0, "message": json.dumps(
                            {"script": "reload", "ok": True, "code": 0, "pending_restart": ["shared_buffers"]})}}}]}})
    await cluster.reconcile("orders")
    assert ("Pod", f"job-name={job}") in cluster.lists
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "64MB"})
    assert ("Normal", "ParametersReloaded",
            "spec.parameters reloaded; shared_buffers take effect when the pod restarts") in cluster.recorder.events
    await cluster.reconcile("orders")
    assert reload_jobs(cluster) == [job]


async def test_a_postmaster_setting_changes_the_pod_template() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB", "max_connections": "100"})
    before = template(cluster)
    edit(cluster, {"work_mem": "4MB", "max_connections": "200"})
    await cluster.reconcile("orders")
    assert template(cluster) != before


async def test_a_failed_reload_job_is_reported_as_degraded_and_not_run_again() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    edit(cluster, {"work_mem": "lots"})
    await cluster.reconcile("orders")
    [job] = reload_jobs(cluster)
    cluster.finish_job(job, succeeded=False, message="failed")
    await cluster.reconcile("orders")
    degraded = condition(cluster.get("SampleDB", "orders"), "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "ParametersNotApplied"
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "4MB"})
    await cluster.reconcile("orders")
    assert reload_jobs(cluster) == [job]


async def test_a_pass_on_a_stale_cache_neither_creates_nor_announces_a_second_job() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    edit(cluster, {"work_mem": "64MB"})
    db = SampleDB.model_validate(cluster.get("SampleDB", "orders"))
    cluster.recorder.events.clear()
    cluster.freeze_cache()  # the Job's watch event is late
    for _ in range(2):
        outcome = await reconcile_reload(cluster.ctx, db, db_ready=True, busy=False, statefulset_existed=True)
        assert outcome == ReloadOutcome()
    job = job_name(cluster, {"work_mem": "64MB"})
    assert cluster.written("create", "Job") == [("create", "Job", job)] * 2 and reload_jobs(cluster) == [job]
    assert cluster.recorder.reasons() == ["ReloadingParameters"]


async def test_no_job_while_an_upgrade_runs_or_the_database_is_not_ready() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    edit(cluster, {"work_mem": "64MB"})
    db = SampleDB.model_validate(cluster.get("SampleDB", "orders"))
    writes = len(cluster.writes)
    for ready, busy in ((True, True), (False, False)):
        outcome = await reconcile_reload(cluster.ctx, db, db_ready=ready, busy=busy, statefulset_existed=True)
        assert outcome == ReloadOutcome()
    assert cluster.writes[writes:] == [] and reload_jobs(cluster) == []


async def finish_reload(cluster: FakeCluster, job: str) -> None:
    cluster.clock.advance(60)
    cluster.finish_job(job)
    cluster.put("Pod", {"metadata": {"name": f"{job}-x", "labels": {"job-name": job},
                                     "creationTimestamp": "2026-11-30T09:01:00Z"},
                        "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 0, "message": json.dumps(
                            {"script": "reload", "ok": True, "code": 0, "pending_restart": []})}}}]}})
    await cluster.reconcile("orders")


async def test_an_edit_back_to_earlier_parameters_reloads_them_again() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    edit(cluster, {"work_mem": "64MB"})
    await cluster.reconcile("orders")
    first = job_name(cluster, {"work_mem": "64MB"})
    await finish_reload(cluster, first)
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "64MB"})
    job = cluster.get("Job", first)
    assert job is not None and "ttlSecondsAfterFinished" in job["spec"]  # recorded: it may expire

    edit(cluster, {"work_mem": "8MB"})
    await cluster.reconcile("orders")
    await finish_reload(cluster, job_name(cluster, {"work_mem": "8MB"}))
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "8MB"})

    # back to 64MB while its first Job is still there: that Job is an earlier edit's, not this one's reload
    edit(cluster, {"work_mem": "64MB"})
    await cluster.reconcile("orders")
    assert cluster.get("Job", first) is None
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "8MB"})
    await cluster.reconcile("orders")
    job = cluster.get("Job", first)
    assert job is not None and "ttlSecondsAfterFinished" not in job["spec"]  # made again, and running
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "8MB"})
    await finish_reload(cluster, first)
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "64MB"})


async def test_an_edit_back_before_the_edit_in_between_was_recorded_reloads_the_server_again() -> None:
    cluster = FakeCluster()
    await running_database(cluster, parameters={"work_mem": "4MB"})
    edit(cluster, {"work_mem": "64MB"})
    await cluster.reconcile("orders")
    between = job_name(cluster, {"work_mem": "64MB"})
    edit(cluster, {"work_mem": "4MB"})  # back, while the 64MB Job runs: it reloads the server all the same
    cluster.clock.advance(60)
    cluster.finish_job(between)
    await cluster.reconcile("orders")
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "64MB"})  # what the server runs now
    await cluster.reconcile("orders")
    back = job_name(cluster, {"work_mem": "4MB"})
    assert back in reload_jobs(cluster)  # so the 4MB file is reloaded again
    await finish_reload(cluster, back)
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "4MB"})
    await cluster.reconcile("orders")
    assert applied(cluster) == pgconfig.parameters_hash({"work_mem": "4MB"})
