"""EventRecorder and the Event body it posts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from structlog.testing import capture_logs
from tests.support.apiserver import respond, status_body

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder, build_event

Serve = Callable[..., Awaitable[KubeClient]]

DB = {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
      "metadata": {"name": "db1", "namespace": "ns", "uid": "u-1", "resourceVersion": "42"}}


def test_event_body_describes_the_involved_object_and_occurrence() -> None:
    now = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    body = build_event(DB, "Warning", "BackupFailed", "pg_dump exited 1", action="Backup",
                       component="sampledb-operator", instance="pod-1", now=now, unique=0xABC)
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "db1.abc", "namespace": "ns"},
        "involvedObject": {"kind": "SampleDB", "apiVersion": "sampledb.io/v1alpha1", "name": "db1",
                           "namespace": "ns", "uid": "u-1", "resourceVersion": "42"},
        "reason": "BackupFailed", "message": "pg_dump exited 1", "action": "Backup", "type": "Warning",
        "source": {"component": "sampledb-operator"},
        "firstTimestamp": "2024-05-06T07:08:09Z", "lastTimestamp": "2024-05-06T07:08:09Z",
        "eventTime": "2024-05-06T07:08:09.123456Z",
        "reportingComponent": "sampledb-operator", "reportingInstance": "pod-1", "count": 1,
    }


def test_event_about_a_cluster_scoped_object_goes_to_default_and_long_fields_are_cut() -> None:
    node = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "x" * 300}}
    body = build_event(node, "Normal", "R" * 200, "m" * 5000, action="", component="c", instance="i",
                       now=datetime.now(UTC), unique=1)
    assert body["metadata"]["namespace"] == "default"
    assert "namespace" not in body["involvedObject"]
    assert len(body["metadata"]["name"]) == 253 and body["metadata"]["name"].endswith(".1")
    assert (len(body["reason"]), len(body["action"]), len(body["message"])) == (128, 128, 1024)


async def test_recorder_posts_the_event_to_the_objects_namespace(serve: Serve) -> None:
    posted: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        posted.append(await request.json())
        return web.json_response(posted[-1], status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/events", handler)
    await EventRecorder(await serve(app)).event(DB, "Normal", "Created", "created the StatefulSet")
    assert len(posted) == 1
    assert posted[0]["involvedObject"]["uid"] == "u-1"
    assert (posted[0]["reason"], posted[0]["action"], posted[0]["type"]) == ("Created", "Created", "Normal")
    assert posted[0]["metadata"]["name"].startswith("db1.")


async def test_recorder_never_raises_when_the_server_refuses_or_is_unreachable(serve: Serve) -> None:
    app = web.Application()
    refuse = respond(status_body(403, "Forbidden", "no"), status=403)
    app.router.add_post("/api/v1/namespaces/ns/events", refuse)
    unreachable = KubeClient("http://127.0.0.1:9")
    try:
        with capture_logs() as logs:
            await EventRecorder(await serve(app)).event(DB, "Warning", "X", "y")
            await EventRecorder(unreachable, timeout=2).event(DB, "Warning", "X", "y")
    finally:
        await unreachable.close()
    assert [entry["event"] for entry in logs] == ["event dropped", "event dropped"]


async def test_an_event_refused_by_a_terminating_namespace_is_dropped_quietly(serve: Serve) -> None:
    app = web.Application()
    terminating = status_body(403, "Forbidden", "unable to create new content in namespace ns because it is being"
                              " terminated", details={"kind": "events", "causes": [{"reason": "NamespaceTerminating"}]})
    app.router.add_post("/api/v1/namespaces/ns/events", respond(terminating, status=403))
    with capture_logs() as logs:
        await EventRecorder(await serve(app)).event(DB, "Normal", "X", "y")
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("event dropped: the namespace is being terminated", "debug")]
