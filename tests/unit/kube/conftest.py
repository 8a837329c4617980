"""Fixtures: a real local HTTP server (aiohttp, 127.0.0.1) standing in for the API server.

`serve(app)` starts the app and returns a KubeClient pointed at it; `release` is set at teardown
so handlers that hold a stream open (silent watches) can finish and the server can close.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sampledb_operator.kube.client import KubeClient

Serve = Callable[..., Awaitable[KubeClient]]


@pytest.fixture
async def release() -> AsyncIterator[asyncio.Event]:
    event = asyncio.Event()
    yield event
    event.set()


@pytest.fixture
async def serve(release: asyncio.Event) -> AsyncIterator[Serve]:
    servers: list[TestServer] = []
    clients: list[KubeClient] = []

    async def start(app: web.Application, **client_kwargs: Any) -> KubeClient:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        client = KubeClient(f"http://127.0.0.1:{server.port}", **client_kwargs)
        clients.append(client)
        return client

    yield start
    release.set()
    for client in clients:
        await client.close()
    for server in servers:
        await server.close()
