"""EventRecorder and the Event body it posts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from aiohttp import web
from structlog.testing import capture_logs
from tests.support.apiserver import respond, status_body

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NotFound
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


class FakeApi:
    """Stands in for KubeClient: records each request and answers like the API server."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.gone: set[str] = set()  # Event names that no longer exist (expired)

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json",
                      timeout: float = 30.0) -> Any:  # noqa: ASYNC109 - KubeClient.request's signature
        self.calls.append((method, path, body))
        if method == "PATCH":
            assert content_type == "application/merge-patch+json"
            if path.rsplit("/", 1)[1] in self.gone:
                raise NotFound(404, "NotFound", "events not found")
        return body


class Now:
    def __init__(self) -> None:
        self.at = datetime(2026, 5, 6, 7, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def _recorder(api: FakeApi, now: Now, **options: Any) -> EventRecorder:
    return EventRecorder(cast(KubeClient, api), now=now, **options)


def _db(name: str) -> dict[str, Any]:
    return {**DB, "metadata": {**DB["metadata"], "name": name, "uid": f"uid-{name}"}}


async def test_a_repeated_event_patches_count_and_last_timestamp_of_the_first_one() -> None:
    api, now = FakeApi(), Now()
    recorder = _recorder(api, now)
    await recorder.event(DB, "Warning", "BackupFailed", "pg_dump exited 1")
    now.advance(30)
    await recorder.event(DB, "Warning", "BackupFailed", "pg_dump exited 1")
    now.advance(30)
    await recorder.event(DB, "Warning", "BackupFailed", "pg_dump exited 1")
    [(post, path, created), *patches] = api.calls
    assert (post, path) == ("POST", "/api/v1/namespaces/ns/events")
    assert created["count"] == 1 and created["firstTimestamp"] == "2026-05-06T07:00:00Z"
    name = created["metadata"]["name"]
    assert patches == [
        ("PATCH", f"/api/v1/namespaces/ns/events/{name}", {"count": 2, "lastTimestamp": "2026-05-06T07:00:30Z"}),
        ("PATCH", f"/api/v1/namespaces/ns/events/{name}", {"count": 3, "lastTimestamp": "2026-05-06T07:01:00Z"}),
    ]


async def test_events_differing_in_object_type_reason_or_message_are_not_merged() -> None:
    api, now = FakeApi(), Now()
    recorder = _recorder(api, now)
    await recorder.event(DB, "Warning", "BackupFailed", "pg_dump exited 1")
    await recorder.event(_db("db2"), "Warning", "BackupFailed", "pg_dump exited 1")
    await recorder.event(DB, "Normal", "BackupFailed", "pg_dump exited 1")
    await recorder.event(DB, "Warning", "RestoreFailed", "pg_dump exited 1")
    await recorder.event(DB, "Warning", "BackupFailed", "pg_dump exited 2")
    assert [method for method, _path, _body in api.calls] == ["POST"] * 5


async def test_the_same_event_after_the_window_is_a_new_event() -> None:
    api, now = FakeApi(), Now()
    recorder = _recorder(api, now)
    await recorder.event(DB, "Normal", "Paused", "paused")
    now.advance(601)  # client-go's 10 minutes
    await recorder.event(DB, "Normal", "Paused", "paused")
    now.advance(60)
    await recorder.event(DB, "Normal", "Paused", "paused")
    assert [method for method, _path, _body in api.calls] == ["POST", "POST", "PATCH"]
    assert api.calls[2][1].endswith("/" + api.calls[1][2]["metadata"]["name"])
    assert api.calls[2][2]["count"] == 2


async def test_an_event_that_is_gone_is_created_again() -> None:
    api, now = FakeApi(), Now()
    recorder = _recorder(api, now)
    await recorder.event(DB, "Normal", "Paused", "paused")
    api.gone.add(api.calls[0][2]["metadata"]["name"])  # expired (the API server keeps Events an hour)
    await recorder.event(DB, "Normal", "Paused", "paused")
    await recorder.event(DB, "Normal", "Paused", "paused")
    assert [method for method, _path, _body in api.calls] == ["POST", "PATCH", "POST", "PATCH"]
    assert api.calls[2][2]["count"] == 1
    assert api.calls[3][1].endswith("/" + api.calls[2][2]["metadata"]["name"])
    assert api.calls[3][2]["count"] == 2


async def test_only_the_most_recently_used_events_are_remembered() -> None:
    api, now = FakeApi(), Now()
    recorder = _recorder(api, now, cache_size=2)
    for name in ("a", "b", "a", "c", "a", "b"):  # c pushes b out (a was used after b): b is new again
        await recorder.event(_db(name), "Normal", "Paused", "paused")
    assert [(method, (body.get("involvedObject") or {}).get("name")) for method, _path, body in api.calls] == [
        ("POST", "a"), ("POST", "b"), ("PATCH", None), ("POST", "c"), ("PATCH", None), ("POST", "b")]


class GatedApi(FakeApi):
    """A FakeApi whose requests wait until `gate` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json",
                      timeout: float = 30.0) -> Any:  # noqa: ASYNC109 - KubeClient.request's signature
        await self.gate.wait()
        return await super().request(method, path, body=body, content_type=content_type, timeout=timeout)


async def test_in_the_background_mode_an_event_is_queued_and_posted_by_a_sender_not_by_the_caller() -> None:
    api, now = GatedApi(), Now()
    recorder = _recorder(api, now, background=True, senders=1)
    await recorder.event(DB, "Normal", "CreatedSecret", "created Secret s")  # returns while the server waits
    await recorder.event(_db("db2"), "Normal", "DatabaseReady", "ready")
    assert api.calls == []
    api.gate.set()
    await recorder.flush()
    assert [(m, b["reason"], b["involvedObject"]["name"]) for m, _, b in api.calls] == [
        ("POST", "CreatedSecret", "db1"), ("POST", "DatabaseReady", "db2")]
    await recorder.close()


async def test_in_the_background_mode_events_beyond_max_pending_are_dropped_and_counted() -> None:
    api, now = GatedApi(), Now()
    recorder = _recorder(api, now, background=True, senders=1, max_pending=2)
    for i in range(5):
        await recorder.event(_db(f"db{i}"), "Normal", "X", "y")
    assert recorder.dropped == 3  # nothing was taken off the queue yet: the caller never yielded
    api.gate.set()
    await recorder.flush()
    assert [b["involvedObject"]["name"] for _, _, b in api.calls] == ["db0", "db1"]
    await recorder.close()
