"""KubeClient against a real local HTTP server: decoding, status mapping, timeouts, streams, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from tests.support.aio import eventually
from tests.support.apiserver import json_line, respond, status_body, stream_lines

from sampledb_operator.kube import client as client_module
from sampledb_operator.kube import errors, responses
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.credentials import TokenFile
from sampledb_operator.kube.errors import StreamWentQuiet
from sampledb_operator.kube.responses import api_error, parse_retry_after
from sampledb_operator.observability.metrics import REGISTRY

Serve = Callable[..., Awaitable[KubeClient]]


def _requests_total(code: str, method: str) -> float:
    return REGISTRY.get_sample_value("rest_client_requests_total", {"code": code, "method": method}) or 0.0


def _duration_count(verb: str) -> float:
    return REGISTRY.get_sample_value("rest_client_request_duration_seconds_count", {"verb": verb}) or 0.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_request_sends_query_body_and_authorization_and_decodes_json(serve: Serve) -> None:
    seen: dict[str, Any] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(query=dict(request.query), auth=request.headers.get("Authorization"),
                    ctype=request.headers.get("Content-Type"), body=await request.json())
        return web.json_response({"kind": "Thing", "ok": True})

    app = web.Application()
    app.router.add_post("/api/v1/things", handler)

    async def token() -> str:
        return "Bearer s3cr3t"

    client = await serve(app, authorization=token)
    answer = await client.request("POST", "/api/v1/things", query={"limit": 5, "watch": True, "x": "y"},
                                  body={"a": 1}, content_type="application/merge-patch+json")
    assert answer == {"kind": "Thing", "ok": True}
    assert seen == {"query": {"limit": "5", "watch": "true", "x": "y"}, "auth": "Bearer s3cr3t",
                    "ctype": "application/merge-patch+json", "body": {"a": 1}}


async def test_empty_answer_body_returns_none(serve: Serve) -> None:
    app = web.Application()
    app.router.add_delete("/x", respond())
    client = await serve(app)
    assert await client.request("DELETE", "/x") is None


@pytest.mark.parametrize(
    ("status", "cls"),
    [(400, errors.BadRequest), (401, errors.Unauthorized), (403, errors.Forbidden), (404, errors.NotFound),
     (409, errors.Conflict), (410, errors.Gone), (422, errors.Invalid), (429, errors.TooManyRequests),
     (500, errors.ServerError), (503, errors.ServerError), (418, errors.ApiError)],
)
async def test_non_2xx_raises_the_error_class_with_status_reason_and_message(
    serve: Serve, status: int, cls: type[errors.ApiError]
) -> None:
    app = web.Application()
    app.router.add_get("/thing", respond(status_body(status, "SomeReason", "it broke"), status=status))
    client = await serve(app)
    with pytest.raises(errors.ApiError) as caught:
        await client.request("GET", "/thing")
    assert type(caught.value) is cls
    got = (caught.value.status, caught.value.reason, caught.value.message)
    assert got == (status, "SomeReason", "it broke")


async def test_retry_after_header_is_parsed_into_too_many_requests(serve: Serve) -> None:
    app = web.Application()
    app.router.add_get("/busy", respond(status_body(429, "TooManyRequests", "slow down"), status=429,
                                       headers={"Retry-After": "7"}))
    client = await serve(app)
    with pytest.raises(errors.TooManyRequests) as caught:
        await client.request("GET", "/busy")
    assert caught.value.retry_after == 7.0


async def test_retry_after_falls_back_to_status_details(serve: Serve) -> None:
    body = status_body(500, "InternalError", "etcd slow", details={"retryAfterSeconds": 3})
    app = web.Application()
    app.router.add_get("/slow", respond(body, status=500))
    client = await serve(app)
    with pytest.raises(errors.ServerError) as caught:
        await client.request("GET", "/slow")
    assert caught.value.retry_after == 3.0


async def test_error_without_status_body_keeps_http_status_and_text(serve: Serve) -> None:
    app = web.Application()
    app.router.add_get("/gw", respond(status=502, text="bad gateway from proxy"))
    client = await serve(app)
    with pytest.raises(errors.ServerError) as caught:
        await client.request("GET", "/gw")
    assert caught.value.status == 502
    assert caught.value.reason == "BadGateway"
    assert "bad gateway from proxy" in caught.value.message


async def test_every_answer_is_counted_by_code_and_method(serve: Serve) -> None:
    app = web.Application()
    app.router.add_get("/ok", respond({}))
    app.router.add_get("/missing", respond(status_body(404, "NotFound", "no"), status=404))
    client = await serve(app)
    ok, missing = _requests_total("200", "GET"), _requests_total("404", "GET")
    durations = _duration_count("GET")
    await client.request("GET", "/ok")
    with pytest.raises(errors.NotFound):
        await client.request("GET", "/missing")
    assert _requests_total("200", "GET") == ok + 1
    assert _requests_total("404", "GET") == missing + 1
    assert _duration_count("GET") == durations + 2


async def test_connection_refused_is_a_transport_error_counted_as_error() -> None:
    client = KubeClient(f"http://127.0.0.1:{_free_port()}")
    before = _requests_total("<error>", "PUT")
    try:
        with pytest.raises(errors.KubeTransportError):
            await client.request("PUT", "/x", body={}, timeout=5.0)
    finally:
        await client.close()
    assert _requests_total("<error>", "PUT") == before + 1


async def test_request_that_gets_no_answer_in_time_is_a_transport_error(
    serve: Serve, release: asyncio.Event
) -> None:
    async def hang(_: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/hang", hang)
    client = await serve(app)
    with pytest.raises(errors.KubeTransportError):
        await client.request("GET", "/hang", timeout=0.2)


async def test_answer_that_is_not_json_is_a_transport_error(serve: Serve) -> None:
    app = web.Application()
    app.router.add_get("/html", respond(text="<html>login</html>"))
    client = await serve(app)
    with pytest.raises(errors.KubeTransportError):
        await client.request("GET", "/html")


async def test_stream_yields_non_empty_lines_until_the_server_ends_it(serve: Serve) -> None:
    lines = [json_line({"n": 1}), b"\n", json_line({"n": 2})]

    async def watch(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "true"
        return await stream_lines(request, lines)

    app = web.Application()
    app.router.add_get("/w", watch)
    client = await serve(app)
    async with client.stream("/w", query={"watch": True}, connect_timeout=2, read_timeout=2) as got:
        received = [line async for line in got]
    assert received == [lines[0], lines[2]]


async def test_stream_that_goes_silent_raises_read_timeout(serve: Serve, release: asyncio.Event) -> None:
    app = web.Application()

    async def silent(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, [json_line({"n": 1})], hold=release)

    app.router.add_get("/w", silent)
    client = await serve(app)
    received = []
    with pytest.raises(StreamWentQuiet):  # a ReadTimeout of a stream that had opened: the watcher resumes it
        async with client.stream("/w", connect_timeout=2, read_timeout=0.5) as got:
            async for line in got:
                received.append(line)
    assert received == [json_line({"n": 1})]


async def _old_readline(self: aiohttp.StreamReader) -> bytes:
    """StreamReader.readline as aiohttp before 3.13.4 has it: no max_line_length keyword."""
    return await self.readuntil()


@pytest.mark.parametrize("readline", ["installed", "before-3.13.4"])
async def test_stream_reads_long_lines_sent_in_pieces_on_every_aiohttp(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, readline: str
) -> None:
    if readline == "before-3.13.4":
        monkeypatch.setattr(aiohttp.StreamReader, "readline", _old_readline)
    long = json_line({"data": "x" * (5 * 2**20)})  # longer than aiohttp's own line limit (2 x read_bufsize)
    lines = [json_line({"n": 1}), long, json_line({"n": 2}) + json_line({"n": 3}), b'{"n": 4}']
    data = b"".join(lines)

    async def watch(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, [data[i:i + 65_536] for i in range(0, len(data), 65_536)])

    app = web.Application()
    app.router.add_get("/w", watch)
    client = await serve(app)
    async with client.stream("/w", connect_timeout=2, read_timeout=5) as got:
        received = [line async for line in got]
    assert received == [json_line({"n": 1}), long, json_line({"n": 2}), json_line({"n": 3}), b'{"n": 4}']


async def test_stream_line_longer_than_the_limit_is_a_transport_error(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(responses, "MAX_LINE_BYTES", 2**20)

    async def watch(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, [json_line({"n": 1}), b"x" * 2**19] + [b"x" * 2**19] * 3 + [b"\n"])

    app = web.Application()
    app.router.add_get("/w", watch)
    client = await serve(app)
    received = []
    with pytest.raises(errors.KubeTransportError, match="1048576"):
        async with client.stream("/w", connect_timeout=2, read_timeout=5) as got:
            async for line in got:
                received.append(line)
    assert received == [json_line({"n": 1})]


async def test_stream_with_non_2xx_answer_raises_the_mapped_error(serve: Serve) -> None:
    app = web.Application()
    app.router.add_get("/w", respond(status_body(403, "Forbidden", "no watch for you"), status=403))
    client = await serve(app)
    before = _requests_total("403", "GET")
    with pytest.raises(errors.Forbidden) as caught:
        async with client.stream("/w", connect_timeout=2, read_timeout=2):
            pass
    assert caught.value.message == "no watch for you"
    assert _requests_total("403", "GET") == before + 1


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert 80 <= (parse_retry_after(later) or 0) <= 90


def test_api_error_reads_reason_and_message_from_status() -> None:
    err = api_error(409, b'{"kind":"Status","reason":"AlreadyExists","message":"exists","code":409}', None)
    assert isinstance(err, errors.Conflict)
    assert (err.reason, err.message, err.retry_after) == ("AlreadyExists", "exists", None)


TERMINATING = ('jobs.batch "db-init" is forbidden: unable to create new content in namespace shop because it is'
               " being terminated")


@pytest.mark.parametrize("details", [
    {"name": "db-init", "group": "batch", "kind": "jobs", "causes": [
        {"reason": "NamespaceTerminating", "message": "namespace shop is being terminated",
         "field": "metadata.namespace"}]},
    {"name": "shop", "kind": "namespaces"},  # no cause: the message tells
])
def test_a_write_refused_because_the_namespace_is_being_terminated_is_namespace_terminating(
    details: dict[str, Any]
) -> None:
    body = status_body(403, "Forbidden", TERMINATING, details=details)
    err = api_error(403, json.dumps(body).encode(), None)
    assert isinstance(err, errors.NamespaceTerminating) and isinstance(err, errors.Forbidden)
    assert (err.status, err.reason, err.message) == (403, "Forbidden", TERMINATING)
    other = api_error(403, json.dumps(status_body(403, "Forbidden", "RBAC: no create")).encode(), None)
    assert type(other) is errors.Forbidden


async def test_token_file_is_reread_after_its_period_and_kept_if_the_file_vanishes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    rereading, caching = TokenFile(str(path), period=0.0), TokenFile(str(path), period=3600.0)
    assert await rereading() == "Bearer one"
    assert await caching() == "Bearer one"
    path.write_text("two")
    assert await rereading() == "Bearer two"
    assert await caching() == "Bearer one"
    path.unlink()
    assert await rereading() == "Bearer two"


async def test_token_file_missing_at_start_is_a_transport_error(tmp_path: Path) -> None:
    with pytest.raises(errors.KubeTransportError):
        await TokenFile(str(tmp_path / "absent"))()


def _api_requests(verb: str, resource: str, code: str, subresource: str = "") -> float:
    labels = {"verb": verb, "group": "batch", "resource": resource, "subresource": subresource, "code": code}
    return REGISTRY.get_sample_value("sampledb_api_requests_total", labels) or 0.0


async def test_each_request_is_counted_by_its_rbac_verb_resource_and_code(serve: Serve) -> None:
    app = web.Application()

    async def watch(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, [json_line({"type": "ADDED"})])

    app.router.add_post("/apis/batch/v1/namespaces/ns/jobs", respond(status_body(403, "Forbidden", "no"), status=403))
    app.router.add_patch("/apis/batch/v1/namespaces/ns/jobs/j/status", respond({}))
    app.router.add_get("/apis/batch/v1/namespaces/ns/jobs", watch)
    client = await serve(app)
    before = (_api_requests("create", "jobs", "403"), _api_requests("patch", "jobs", "200", "status"),
              _api_requests("watch", "jobs", "200"))
    with pytest.raises(errors.Forbidden):
        await client.request("POST", "/apis/batch/v1/namespaces/ns/jobs", body={})
    await client.request("PATCH", "/apis/batch/v1/namespaces/ns/jobs/j/status", body={})
    async with client.stream("/apis/batch/v1/namespaces/ns/jobs", query={"watch": True}) as lines:
        async for _ in lines:
            pass
    after = (_api_requests("create", "jobs", "403"), _api_requests("patch", "jobs", "200", "status"),
             _api_requests("watch", "jobs", "200"))
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]


async def test_open_streams_never_take_the_connections_requests_need(serve: Serve, release: asyncio.Event) -> None:
    app = web.Application()

    async def held(request: web.Request) -> web.StreamResponse:
        return await stream_lines(request, [json_line({"n": 1})], hold=release)

    async def get(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app.router.add_get("/w", held)
    app.router.add_get("/r", get)
    client = await serve(app, connections=2)
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):  # more watches than the requests' pool has connections
            lines = await stack.enter_async_context(client.stream("/w", connect_timeout=2, read_timeout=10))
            assert await anext(lines) == json_line({"n": 1})
        assert await client.request("GET", "/r", timeout=3) == {"ok": True}
        release.set()


async def test_requests_beyond_the_pool_wait_for_a_free_connection_and_all_succeed(serve: Serve) -> None:
    open_now = 0
    most = 0
    peers: set[object] = set()

    async def slow(request: web.Request) -> web.Response:
        nonlocal open_now, most
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        open_now += 1
        most = max(most, open_now)
        try:
            await asyncio.sleep(0.05)  # the server's work: keeps the connection busy while others wait
            return web.json_response({"ok": True})
        finally:
            open_now -= 1

    app = web.Application()
    app.router.add_get("/r", slow)
    client = await serve(app, connections=2)
    answers = await asyncio.gather(*(client.request("GET", "/r", timeout=10) for _ in range(8)))
    assert answers == [{"ok": True}] * 8
    assert most == 2
    assert len(peers) == 2  # two connections, reused


def test_the_settings_default_is_the_clients() -> None:
    from sampledb_operator.config import Settings

    assert Settings.model_fields["api_connections"].default == client_module.DEFAULT_CONNECTIONS
    with pytest.raises(ValueError, match="connections"):
        KubeClient("http://127.0.0.1:1", connections=0)


async def test_a_siblings_requests_never_wait_behind_a_full_pool(serve: Serve, release: asyncio.Event) -> None:
    """The Lease renewals' case: every connection of the pool is held by a slow request, and the sibling's
    request is answered at once on a connection of its own, with the same credentials."""
    held = 0
    authorizations: list[str | None] = []

    async def slow(request: web.Request) -> web.Response:
        nonlocal held
        held += 1
        await release.wait()  # the server's work: keeps the connection busy until the test releases it
        return web.json_response({"ok": True})

    async def lease(request: web.Request) -> web.Response:
        authorizations.append(request.headers.get("Authorization"))
        return web.json_response({"kind": "Lease"})

    async def token() -> str:
        return "Bearer t0ken"

    app = web.Application()
    app.router.add_get("/slow", slow)
    app.router.add_get("/lease", lease)
    client = await serve(app, connections=2, authorization=token)
    locks = client.sibling(connections=1)
    slow_requests = [asyncio.create_task(client.request("GET", "/slow", timeout=30)) for _ in range(3)]
    await eventually(lambda: held == 2, limit=5)  # the pool is full; the third request waits for a connection
    with pytest.raises(errors.KubeTransportError):
        await client.request("GET", "/lease", timeout=0.5)  # through the full pool: no connection in time
    assert await locks.request("GET", "/lease", timeout=5) == {"kind": "Lease"}
    assert authorizations == ["Bearer t0ken"]
    release.set()
    assert await asyncio.gather(*slow_requests) == [{"ok": True}] * 3


async def test_closing_a_client_closes_its_siblings_connections(serve: Serve) -> None:
    transports: list[asyncio.BaseTransport] = []
    app = web.Application()

    async def get(request: web.Request) -> web.Response:
        if request.transport is not None:
            transports.append(request.transport)
        return web.json_response({"ok": True})

    app.router.add_get("/r", get)
    client = await serve(app)
    sibling = client.sibling(connections=1)
    assert await sibling.request("GET", "/r") == {"ok": True}
    assert len(transports) == 1 and not transports[0].is_closing()  # kept alive in the sibling's pool
    await client.close()
    await eventually(transports[0].is_closing, limit=5)
