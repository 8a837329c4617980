"""reconcilers/job_result.py: the result line of a Job's newest pod, from its container, else from an init
container that stopped the pod (the link upgrade's copy of the old binaries) and so is the only one that ran."""

from __future__ import annotations

from typing import Any

from tests.support.fake_cluster import NS, FakeCluster

from sampledb_operator.reconcilers.job_result import job_result

JOB = "orders-upgrade-1"


def pod(name: str, created: str, *, init: str | None = None, main: str | None = None) -> dict[str, Any]:
    def terminated(container: str, message: str | None, code: int) -> dict[str, Any]:
        state = {"terminated": {"exitCode": code, "message": message}} if message is not None else \
            {"waiting": {"reason": "PodInitializing"}}
        return {"name": container, "state": state}
    return {"metadata": {"name": name, "labels": {"job-name": JOB}, "creationTimestamp": created},
            "status": {"initContainerStatuses": [terminated("old-binaries", init, 1 if main is None else 0)],
                       "containerStatuses": [terminated("upgrade", main, 2)]}}


async def test_a_failed_init_container_says_why_the_job_failed() -> None:
    cluster = FakeCluster()
    cluster.put("Pod", pod("p1", "2026-12-06T00:00:00Z",
                           init='copying\n{"error":"cannot copy /usr/lib/postgresql/15: No space left on device"}'))
    assert await job_result(cluster.ctx, NS, JOB) == {
        "error": "cannot copy /usr/lib/postgresql/15: No space left on device"}


async def test_the_container_line_wins_over_a_succeeded_init_container_and_the_newest_pod_wins() -> None:
    cluster = FakeCluster()
    cluster.put("Pod", pod("p1", "2026-12-06T00:00:00Z", init='{"copied":true}', main='{"error":"first try"}'))
    cluster.put("Pod", pod("p2", "2026-12-06T00:01:00Z", init='{"copied":true}', main='{"error":"pg_upgrade failed"}'))
    assert await job_result(cluster.ctx, NS, JOB) == {"error": "pg_upgrade failed"}


async def test_no_line_anywhere_is_empty() -> None:
    cluster = FakeCluster()
    cluster.put("Pod", pod("p1", "2026-12-06T00:00:00Z"))
    assert await job_result(cluster.ctx, NS, JOB) == {}
