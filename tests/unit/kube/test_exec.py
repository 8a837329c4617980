"""pods/exec over a WebSocket (v4.channel.k8s.io) against a real local aiohttp server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from sampledb_operator.kube import errors
from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.exec import PROTOCOL, exec_in_pod, exit_code_of

Serve = Callable[..., Awaitable[KubeClient]]
PATH = "/api/v1/namespaces/shop/pods/orders-0/exec"


def _exec_app(frames: list[bytes], seen: list[Any], *, hold: asyncio.Event | None = None) -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(protocols=(PROTOCOL,))
        await ws.prepare(request)
        seen.append((list(request.query.items()), ws.ws_protocol, request.headers.get("Authorization")))
        for frame in frames:
            await ws.send_bytes(frame)
        if hold is not None:
            await hold.wait()
        await ws.close()
        return ws

    app = web.Application()
    app.router.add_get(PATH, handler)
    return app


async def _token() -> str:
    return "Bearer t0ken"


async def test_the_command_runs_with_its_output_and_exit_code(serve: Serve) -> None:
    seen: list[Any] = []
    status = {"status": "Failure", "reason": "NonZeroExitCode",
              "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    client = await serve(_exec_app([b"\x01hello ", b"\x01world", b"\x02oops", b"\x03" + json.dumps(status).encode()],
                                   seen), authorization=_token)
    result = await exec_in_pod(client, "shop", "orders-0", "postgres", ["sh", "-c", "exit 3"], timeout=10)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "hello world", "oops")
    [(query, protocol, auth)] = seen
    assert query == [("container", "postgres"), ("stdout", "true"), ("stderr", "true"), ("command", "sh"),
                     ("command", "-c"), ("command", "exit 3")]
    assert protocol == PROTOCOL and auth == "Bearer t0ken"


async def test_success_and_a_stream_that_ends_without_a_status(serve: Serve) -> None:
    client = await serve(_exec_app([b'\x03{"status":"Success"}'], []))
    assert (await exec_in_pod(client, "shop", "orders-0", "postgres", ["true"], timeout=10)).exit_code == 0
    client = await serve(_exec_app([b"\x01bye"], []))
    result = await exec_in_pod(client, "shop", "orders-0", "postgres", ["kill", "1"], timeout=10)
    assert result.exit_code is None and result.stdout == "bye"


async def test_a_refused_upgrade_is_the_api_error(serve: Serve) -> None:
    app = web.Application()

    async def forbidden(_request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "code": 403}, status=403)

    app.router.add_get(PATH, forbidden)
    client = await serve(app)
    with pytest.raises(errors.Forbidden):
        await exec_in_pod(client, "shop", "orders-0", "postgres", ["true"], timeout=10)


async def test_an_exec_that_does_not_end_hits_its_deadline(serve: Serve, release: asyncio.Event) -> None:
    client = await serve(_exec_app([b"\x01still running"], [], hold=release))
    with pytest.raises(errors.KubeTransportError, match=r"no end within 0\.3 s"):
        await exec_in_pod(client, "shop", "orders-0", "postgres", ["sleep", "1000"], timeout=0.3)


def test_exit_codes_from_the_status() -> None:
    assert exit_code_of({"status": "Success"}) == 0
    assert exit_code_of({"status": "Failure", "details": {"causes": [{"reason": "ExitCode", "message": "137"}]}}) == 137
    assert exit_code_of({"status": "Failure", "reason": "InternalError"}) is None
