"""ResourceApi against a real local HTTP server that answers like the API server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from tests.support.apiserver import respond, status_body, stream_lines, watch_line

from sampledb_operator.kube import errors
from sampledb_operator.kube.api import ResourceApi, WatchEvent, decode_watch_line
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.resources import SAMPLEDB, STATEFULSET

Serve = Callable[..., Awaitable[KubeClient]]
STS_PATH = "/apis/apps/v1/namespaces/ns/statefulsets"


def sts(name: str, rv: str, **meta: Any) -> dict[str, Any]:
    """A StatefulSet as a list item (no kind/apiVersion) with managedFields, as the server sends it."""
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
                         "managedFields": [{"manager": "kubectl", "operation": "Apply"}], **meta},
            "spec": {"replicas": 1}}


class Recorder:
    """Records each request's method, path, query, content type and JSON body."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, answer: Any, status: int = 200) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            raw = await request.read()
            self.seen.append({"method": request.method, "path": request.path, "query": dict(request.query),
                              "ctype": request.headers.get("Content-Type"),
                              "body": json.loads(raw) if raw else None})
            return web.json_response(answer, status=status)

        return handler


async def test_list_all_maps_each_page_through_keep_as_it_arrives(serve: Serve) -> None:
    pages = {"": ({"resourceVersion": "100", "continue": "c1"}, [sts("a", "5"), sts("b", "6")]),
             "c1": ({"resourceVersion": "101"}, [sts("c", "7")])}
    kept_before_page: dict[str, int] = {}
    kept: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        token = request.query.get("continue", "")
        kept_before_page[token] = len(kept)
        meta, items = pages[token]
        return web.json_response({"kind": "StatefulSetList", "apiVersion": "apps/v1", "metadata": meta,
                                  "items": items})

    def keep(item: dict[str, Any]) -> str:
        kept.append(item["metadata"]["name"])
        return f"kept {item['metadata']['name']}"

    app = web.Application()
    app.router.add_get(STS_PATH, handler)
    result = await ResourceApi(await serve(app), STATEFULSET).list_all("ns", page_size=2, keep=keep)
    assert result.items == ["kept a", "kept b", "kept c"]
    assert kept_before_page == {"": 0, "c1": 2}  # the first page was kept before the second was asked for


async def test_list_all_follows_continue_tokens_and_keeps_the_first_pages_resource_version(
    serve: Serve,
) -> None:
    pages = {"": ({"resourceVersion": "100", "continue": "c1"}, [sts("a", "5"), sts("b", "6")]),
             "c1": ({"resourceVersion": "101", "continue": "c2"}, [sts("c", "7")]),
             "c2": ({"resourceVersion": "102"}, [sts("d", "8")])}
    queries: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.Response:
        queries.append(dict(request.query))
        meta, items = pages[request.query.get("continue", "")]
        return web.json_response({"kind": "StatefulSetList", "apiVersion": "apps/v1", "metadata": meta,
                                  "items": items})

    app = web.Application()
    app.router.add_get(STS_PATH, handler)
    api = ResourceApi(await serve(app), STATEFULSET)
    result = await api.list_all("ns", label_selector="app=db", page_size=2)
    assert [item["metadata"]["name"] for item in result.items] == ["a", "b", "c", "d"]
    assert (result.resource_version, result.continue_token) == ("100", None)
    assert all(item["kind"] == "StatefulSet" and item["apiVersion"] == "apps/v1" for item in result.items)
    assert all("managedFields" not in item["metadata"] for item in result.items)
    assert queries == [{"limit": "2", "labelSelector": "app=db"},
                       {"limit": "2", "labelSelector": "app=db", "continue": "c1"},
                       {"limit": "2", "labelSelector": "app=db", "continue": "c2"}]


async def test_list_all_restarts_from_the_first_page_when_the_continue_token_expired(serve: Serve) -> None:
    calls: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        token = request.query.get("continue", "")
        calls.append(token)
        if token == "old" and calls.count("old") == 1:
            return web.json_response(status_body(410, "Expired", "continue token too old"), status=410)
        if token:
            return web.json_response({"metadata": {"resourceVersion": "9"}, "items": [sts("b", "2")]})
        first = {"metadata": {"resourceVersion": "9", "continue": "old"}, "items": [sts("a", "1")]}
        return web.json_response(first)

    app = web.Application()
    app.router.add_get(STS_PATH, handler)
    result = await ResourceApi(await serve(app), STATEFULSET).list_all("ns", page_size=1)
    assert calls == ["", "old", "", "old"]
    assert [item["metadata"]["name"] for item in result.items] == ["a", "b"]


async def test_list_sends_resource_version_only_without_continue_token(serve: Serve) -> None:
    record = Recorder()
    app = web.Application()
    empty = {"metadata": {"resourceVersion": "1"}, "items": []}
    app.router.add_get("/apis/apps/v1/statefulsets", record(empty))
    api = ResourceApi(await serve(app), STATEFULSET)
    await api.list(resource_version="0", field_selector="metadata.name=x")
    await api.list(resource_version="0", continue_token="tok")
    assert record.seen[0]["query"] == {"limit": "500", "resourceVersion": "0",
                                       "fieldSelector": "metadata.name=x"}
    assert record.seen[1]["query"] == {"limit": "500", "continue": "tok"}


async def test_watch_asks_for_bookmarks_and_yields_events_without_managed_fields(serve: Serve) -> None:
    lines = [watch_line("ADDED", {**sts("a", "11"), "kind": "StatefulSet", "apiVersion": "apps/v1"}),
             watch_line("MODIFIED", sts("a", "12")),
             watch_line("BOOKMARK", {"kind": "StatefulSet", "apiVersion": "apps/v1",
                                     "metadata": {"resourceVersion": "15"}}),
             watch_line("DELETED", sts("a", "16"))]
    queries: list[dict[str, str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        queries.append(dict(request.query))
        return await stream_lines(request, lines)

    app = web.Application()
    app.router.add_get(STS_PATH, handler)
    api = ResourceApi(await serve(app), STATEFULSET)
    events = [e async for e in api.watch("ns", resource_version="10", timeout_seconds=300, read_timeout=5,
                                         label_selector="app=db")]
    assert queries == [{"watch": "true", "timeoutSeconds": "300", "resourceVersion": "10",
                        "allowWatchBookmarks": "true", "labelSelector": "app=db"}]
    assert [(e.type, e.resource_version) for e in events] == [("ADDED", "11"), ("MODIFIED", "12"),
                                                              ("BOOKMARK", "15"), ("DELETED", "16")]
    assert all("managedFields" not in e.object["metadata"] for e in events)
    assert events[1].object["kind"] == "StatefulSet"


@pytest.mark.parametrize(("code", "cls"),
                         [(410, errors.Gone), (500, errors.ServerError), (403, errors.Forbidden)])
async def test_watch_error_event_raises_gone_for_410_else_the_mapped_error(
    serve: Serve, code: int, cls: type[errors.ApiError]
) -> None:
    lines = [watch_line("ADDED", sts("a", "11")),
             watch_line("ERROR", status_body(code, "Expired" if code == 410 else "X", "too old"))]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, lines)

    app = web.Application()
    app.router.add_get(STS_PATH, handler)
    api = ResourceApi(await serve(app), STATEFULSET)
    received: list[WatchEvent] = []
    with pytest.raises(cls) as caught:
        async for event in api.watch("ns", resource_version="10", timeout_seconds=60, read_timeout=5):
            received.append(event)
    assert [e.type for e in received] == ["ADDED"]
    assert caught.value.status == code


async def test_watch_on_a_silent_connection_raises_read_timeout(serve: Serve, release: asyncio.Event) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, [watch_line("ADDED", sts("a", "11"))], hold=release)

    app = web.Application()
    app.router.add_get(STS_PATH, handler)
    api = ResourceApi(await serve(app), STATEFULSET)
    received = []
    stream = api.watch("ns", resource_version="10", timeout_seconds=600, read_timeout=0.5)
    with pytest.raises(errors.ReadTimeout):
        async with contextlib.aclosing(stream):
            async for event in stream:
                received.append(event.resource_version)
    assert received == ["11"]


async def test_apply_is_a_server_side_apply_patch_with_field_manager_and_force(serve: Serve) -> None:
    record = Recorder()
    path = "/apis/sampledb.io/v1alpha1/namespaces/ns/sampledbs/db1/status"
    app = web.Application()
    app.router.add_patch(path, record({"metadata": {"name": "db1", "managedFields": [{}]}, "status": {}}))
    api = ResourceApi(await serve(app), SAMPLEDB)
    answer = await api.apply({"metadata": {"name": "db1", "namespace": "ns"}, "status": {"phase": "Running"}},
                             field_manager="sampledb-operator", subresource="status")
    assert answer == {"metadata": {"name": "db1"}, "status": {}}
    assert record.seen == [{
        "method": "PATCH", "path": path, "query": {"fieldManager": "sampledb-operator", "force": "true"},
        "ctype": "application/apply-patch+yaml",
        "body": {"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                 "metadata": {"name": "db1", "namespace": "ns"}, "status": {"phase": "Running"}},
    }]


@pytest.mark.parametrize(("patch_type", "ctype"), [("merge", "application/merge-patch+json"),
                                                   ("json", "application/json-patch+json"),
                                                   ("strategic", "application/strategic-merge-patch+json")])
async def test_patch_sends_the_content_type_of_its_patch_type(
    serve: Serve, patch_type: Any, ctype: str
) -> None:
    record = Recorder()
    app = web.Application()
    app.router.add_patch(f"{STS_PATH}/a", record(sts("a", "3")))
    api = ResourceApi(await serve(app), STATEFULSET)
    await api.patch("a", {"spec": {"replicas": 0}}, namespace="ns", patch_type=patch_type)
    assert (record.seen[0]["ctype"], record.seen[0]["body"]) == (ctype, {"spec": {"replicas": 0}})


async def test_replace_puts_to_the_objects_path_and_stale_version_is_conflict(serve: Serve) -> None:
    record = Recorder()
    app = web.Application()
    app.router.add_put(f"{STS_PATH}/a", record(status_body(409, "Conflict", "object has been modified"), 409))
    api = ResourceApi(await serve(app), STATEFULSET)
    with pytest.raises(errors.Conflict):
        await api.replace(sts("a", "3"))
    assert record.seen[0]["method"] == "PUT"
    assert record.seen[0]["body"]["kind"] == "StatefulSet"


async def test_create_posts_to_the_namespace_collection(serve: Serve) -> None:
    record = Recorder()
    app = web.Application()
    app.router.add_post(STS_PATH, record(sts("a", "1"), 201))
    api = ResourceApi(await serve(app), STATEFULSET)
    created = await api.create({"metadata": {"name": "a", "namespace": "ns"}})
    assert created["metadata"]["resourceVersion"] == "1"
    assert "managedFields" not in created["metadata"]
    assert record.seen[0]["body"] == {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                      "metadata": {"name": "a", "namespace": "ns"}}


async def test_create_and_patch_send_a_field_manager_only_when_given(serve: Serve) -> None:
    record = Recorder()
    app = web.Application()
    app.router.add_post(STS_PATH, record(sts("a", "1"), 201))
    app.router.add_patch(f"{STS_PATH}/a", record(sts("a", "2")))
    api = ResourceApi(await serve(app), STATEFULSET)
    await api.create({"metadata": {"name": "a", "namespace": "ns"}}, field_manager="kubectl-sampledb")
    await api.patch("a", {"spec": {}}, namespace="ns", field_manager="kubectl-sampledb")
    await api.create({"metadata": {"name": "a", "namespace": "ns"}})
    assert [r["query"] for r in record.seen] == [{"fieldManager": "kubectl-sampledb"}] * 2 + [{}]


async def test_delete_sends_propagation_and_preconditions_and_raises_not_found(serve: Serve) -> None:
    record = Recorder()
    app = web.Application()
    app.router.add_delete(f"{STS_PATH}/a", record({"kind": "Status", "status": "Success"}))
    app.router.add_delete(f"{STS_PATH}/gone", respond(status_body(404, "NotFound", "not found"), status=404))
    api = ResourceApi(await serve(app), STATEFULSET)
    await api.delete("a", "ns", propagation="Foreground", preconditions={"uid": "u1"})
    assert record.seen[0]["body"] == {"kind": "DeleteOptions", "apiVersion": "v1",
                                      "propagationPolicy": "Foreground", "preconditions": {"uid": "u1"}}
    with pytest.raises(errors.NotFound):
        await api.delete("gone", "ns")


async def test_get_of_a_missing_object_raises_not_found(serve: Serve) -> None:
    app = web.Application()
    app.router.add_get(f"{STS_PATH}/x", respond(status_body(404, "NotFound", 'statefulsets "x" not found'),
                                                status=404))
    with pytest.raises(errors.NotFound) as caught:
        await ResourceApi(await serve(app), STATEFULSET).get("x", "ns")
    assert caught.value.reason == "NotFound"


@pytest.mark.parametrize("line", [b"not json\n", b'{"type": "ADDED"}\n', b'{"type": "WHAT", "object": {}}\n',
                                  b'{"type": "ADDED", "object": []}\n'])
def test_a_line_that_is_not_a_watch_event_is_a_transport_error(line: bytes) -> None:
    with pytest.raises(errors.KubeTransportError):
        decode_watch_line(line)
