"""Fixtures: a real local HTTP server (aiohttp, 127.0.0.1) standing in for the API server.

`pki` (module scope) makes a CA, a server certificate for 127.0.0.1 and a client certificate with the
openssl command line; `apiserver` serves HTTPS with them, asks for client certificates, and answers
/whoami with the client certificate's CN and the Authorization header it saw.

`serve(app)` starts the app and returns a KubeClient pointed at it; `release` is set at teardown
so handlers that hold a stream open (silent watches) can finish and the server can close.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
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


_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(cwd: Path, name: str, subject: str, extensions: str) -> None:
    _openssl(cwd, "req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(cwd, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt, server.crt (127.0.0.1), admin.crt (client auth), each with its .key."""
    cwd = tmp_path_factory.mktemp("pki")
    _openssl(cwd, "req", "-x509", *_EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=test-ca")
    _signed(cwd, "server", "/CN=kube-apiserver", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _signed(cwd, "admin", "/O=system:masters/CN=admin", "extendedKeyUsage=clientAuth\n")
    return cwd


@pytest.fixture
async def apiserver(pki: Path) -> AsyncIterator[int]:
    """An HTTPS server asking for client certificates; /whoami tells what it saw. Yields its port."""

    async def whoami(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(pair[0] for pair in peer["subject"]) if peer else {}
        return web.json_response({"cn": subject.get("commonName"),
                                  "authorization": request.headers.get("Authorization")})

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    context.verify_mode = ssl.CERT_OPTIONAL
    app = web.Application()
    app.router.add_get("/whoami", whoami)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=context)
    yield int(server.port or 0)
    await server.close()
