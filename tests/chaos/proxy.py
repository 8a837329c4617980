"""A fault-injecting reverse proxy in front of a Kubernetes API server, for the chaos suite.

The operator under test gets a kubeconfig naming http://127.0.0.1:<port> (plain HTTP on loopback,
no credentials); the proxy forwards every request to the real API server over TLS with the
credentials of the original kubeconfig (client certificate or bearer token), so no certificate is
minted and any cluster whose kubeconfig holds its credentials works. While `active`, it:

- cuts every streaming watch response after a random 2-20 s (the connection is aborted mid-body:
  the client sees a broken stream, not a clean end, and must resume from its last resourceVersion);
- answers a fraction of PATCH/PUT with 409 Conflict (a Status body, as the API server sends);
- answers a fraction of every request with 429 TooManyRequests and `Retry-After: 1`.

The draws use their own random.Random(seed): the proxy's faults fall on whichever requests arrive,
so their exact targets depend on timing; their rates do not. Counts by kind are in `counts`.
An unreachable API server (it is being restarted) is a 503 Status, as a load balancer would answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
import ssl
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host",
        "authorization", "upgrade", "proxy-connection", "te", "trailer"}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class Upstream:
    """The API server and credentials of a kubeconfig's current context."""

    def __init__(self, kubeconfig: str) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        ctx_name = config.get("current-context")
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == ctx["user"])
        self.server = str(cluster["server"]).rstrip("/")
        self._dir = tempfile.TemporaryDirectory(prefix="chaos-proxy-")
        self.ssl = ssl.create_default_context(cafile=self._file(cluster, "certificate-authority"))
        cert, key = self._file(user, "client-certificate"), self._file(user, "client-key")
        if cert and key:
            self.ssl.load_cert_chain(cert, key)
        self.headers = {"Authorization": f"Bearer {user['token']}"} if user.get("token") else {}

    def _file(self, section: dict[str, Any], field: str) -> str | None:
        if section.get(field):
            return str(section[field])
        data = section.get(f"{field}-data")
        if not data:
            return None
        path = Path(self._dir.name) / field
        path.write_bytes(base64.b64decode(data))
        return str(path)

    def close(self) -> None:
        self._dir.cleanup()


class FaultProxy:
    """The proxy; `start()` returns the kubeconfig path for the operator. Use `active` to switch
    the faults on and off (off: a transparent proxy)."""

    def __init__(self, kubeconfig: str, seed: int, *, conflict_rate: float = 0.05, throttle_rate: float = 0.03,
                 watch_cut: tuple[float, float] = (2.0, 20.0)) -> None:
        self.upstream = Upstream(kubeconfig)
        self.rng = random.Random(seed)
        self.conflict_rate, self.throttle_rate, self.watch_cut = conflict_rate, throttle_rate, watch_cut
        self.active = False
        self.counts: Counter[str] = Counter()
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.kubeconfig = ""
        self.port = 0

    async def start(self) -> str:
        connector = aiohttp.TCPConnector(ssl=self.upstream.ssl, limit=400)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True, trust_env=False)
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "chaos-proxy",
                  "clusters": [{"name": "chaos-proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                  "users": [{"name": "chaos-proxy", "user": {}}],
                  "contexts": [{"name": "chaos-proxy", "context": {"cluster": "chaos-proxy", "user": "chaos-proxy"}}]}
        path = Path(self.upstream._dir.name) / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        self.kubeconfig = str(path)
        return self.kubeconfig

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        self.upstream.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.counts["requests"] += 1
        watch = request.query.get("watch", "").lower() in ("true", "1")
        if self.active and self.rng.random() < self.throttle_rate:
            self.counts["429"] += 1
            return web.json_response(_status(429, "TooManyRequests", "chaos proxy: too many requests, retry"),
                                     status=429, headers={"Retry-After": "1"})
        if self.active and request.method in ("PATCH", "PUT") and self.rng.random() < self.conflict_rate:
            self.counts["409"] += 1
            return web.json_response(_status(409, "Conflict", "chaos proxy: the object has been modified; "
                                                             "please apply your changes to the latest version"),
                                     status=409)
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers.update(self.upstream.headers)
        timeout = aiohttp.ClientTimeout(total=None if watch else 120, sock_connect=10,
                                        sock_read=None if watch else 120)
        assert self._session is not None
        try:
            upstream = await self._session.request(request.method, self.upstream.server + request.path_qs,
                                                   data=body or None, headers=headers, timeout=timeout)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.counts["upstream-unavailable"] += 1
            return web.json_response(_status(503, "ServiceUnavailable", f"chaos proxy: upstream: {exc}"), status=503)
        out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        try:
            if not watch or upstream.status != 200:
                data = await upstream.read()
                return web.Response(body=data, status=upstream.status, headers=out_headers)
            return await self._stream(request, upstream, out_headers)
        except (aiohttp.ClientError, TimeoutError, OSError):
            self.counts["upstream-broken"] += 1
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=502)
        finally:
            upstream.release()

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse,
                      headers: dict[str, str]) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        cut_at = loop.time() + self.rng.uniform(*self.watch_cut) if self.active else None
        while True:
            left = None if cut_at is None else cut_at - loop.time()
            try:
                if left is not None and left <= 0:
                    raise TimeoutError
                chunk = await asyncio.wait_for(upstream.content.readany(), timeout=left)
            except TimeoutError:
                self.counts["watch-cut"] += 1
                if request.transport is not None:
                    request.transport.abort()  # mid-body: the client sees a broken stream
                return resp
            if not chunk:
                with contextlib.suppress(ConnectionError):
                    await resp.write_eof()
                return resp
            await resp.write(chunk)

    def summary(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))
