"""KubeClient: authenticated HTTP to the API server, JSON in and out, errors mapped.

The configuration (kubeconfig with client certificates, tokens and exec plugins; in-cluster
service account) is read by kube.kubeconfig and kube.credentials without kubernetes_asyncio, whose
import costs ~33 MiB (issue #18); only a kubeconfig user with a legacy auth-provider still goes
through kubernetes_asyncio's loader. Requests go through aiohttp.ClientSessions, not through
kubernetes_asyncio's ApiClient.call_api: call_api with
_preload_content=False neither raises on non-2xx (in 36.1.0) nor lets a streaming read time out
per line, and its model layer is unused anyway, so owning the session is simpler and makes
every timeout, header and status explicit here.

Invariants:
- every request has a timeout (connect and total; a stream has connect and per-read timeouts);
- callers see only kube.errors (mapped by kube.responses): an HTTP answer outside 2xx is error_for(status,
  Status.reason, Status.message, Retry-After, Status.details.causes); no answer (connect error, reset,
  timeout) is KubeTransportError, a stream that goes quiet for read_timeout is ReadTimeout (a
  KubeTransportError); an opened stream that breaks while it is read is StreamInterrupted (StreamWentQuiet
  when it went quiet), so a watcher can tell a dropped connection from one that could not be made;
- rest_client_requests_total{code,method} is counted once per request ("<error>" without an
  HTTP answer) and rest_client_request_duration_seconds{verb} observed (to the headers, for
  streams); sampledb_api_requests_total{verb,group,resource,subresource,code} counts the same
  request by what it asks of RBAC (kube.requestinfo);
- credentials come from kube.credentials (kubeconfig or in-cluster, tokens refreshed there);
- two connection pools: requests share at most `connections` connections (HTTP/1.1 carries one request
  at a time per connection; a request waits for a free one, within its timeout), and every stream (a
  watch, held open for minutes) has a connection of its own in a second, unbounded pool, so no number of
  watches can take the connections requests need. Each TLS connection holds a 256 KiB read buffer in
  asyncio's SSL transport: the pool's size is memory (100 connections: 25 MiB).
- a sibling (`sibling()`) is the same endpoint and credentials with a requests' pool of its own, for
  requests that must never wait behind the others for a connection (the Lease renewals of leader
  election and sharding: behind a full pool of slow writes a renewal can miss its renew deadline); the
  client that made it closes it.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from sampledb_operator.kube import jsoncodec
from sampledb_operator.kube.credentials import (
    EXEC_PLUGIN_TIMEOUT_SECONDS,
    Authorization,
    in_cluster_endpoint,
    kubeconfig_endpoint,
)
from sampledb_operator.kube.errors import KubeError, KubeTransportError
from sampledb_operator.kube.requestinfo import request_info
from sampledb_operator.kube.responses import TRANSPORT_ERRORS, Lines, api_error, transport_error
from sampledb_operator.observability import metrics
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

QueryValue = str | int | bool
_ERROR_BODY_BYTES = 64 * 1024
DEFAULT_CONNECTIONS = 32  # requests' connections at once (streams apart); measured: docs/benchmarks.md


def env_proxy(host: str) -> str | None:
    """The proxy the environment names for `host` (HTTPS_PROXY/HTTP_PROXY, unless NO_PROXY covers
    it), read once when the client is made. Requests then run with aiohttp's trust_env off, which
    would otherwise look up the proxy variables and ~/.netrc again on every request (a measured 3-4x
    client CPU per request)."""
    parts = urlsplit(host)
    proxies = urllib.request.getproxies_environment()
    hostname = parts.hostname or ""
    if not proxies or urllib.request.proxy_bypass(hostname):  # Linux: proxy_bypass reads NO_PROXY
        return None
    return proxies.get(parts.scheme or "https")


class KubeClient:
    """One API server endpoint with its credentials; share one instance per process."""

    def __init__(
        self,
        host: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        authorization: Authorization | None = None,
        server_hostname: str | None = None,
        proxy: str | None = None,
        trust_env: bool = False,
        connect_timeout: float = 10.0,
        connections: int = DEFAULT_CONNECTIONS,
    ) -> None:
        if connections < 1:
            raise ValueError("connections must be >= 1")
        self.host = host.rstrip("/")
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._authorization = authorization
        self._server_hostname = server_hostname
        self._proxy = proxy
        self._trust_env = trust_env
        self._connect_timeout = connect_timeout
        self._connections = connections
        self._sessions: dict[bool, aiohttp.ClientSession] = {}  # streaming? -> its session
        self._siblings: list[KubeClient] = []

    @classmethod
    async def connect(
        cls, kubeconfig: str | None = None, *, context: str | None = None, in_cluster: bool | None = None,
        exec_plugin_timeout: float = EXEC_PLUGIN_TIMEOUT_SECONDS, connections: int = DEFAULT_CONNECTIONS,
    ) -> KubeClient:
        """A client from the in-cluster service account or a kubeconfig (`connections`: the requests' pool).

        in_cluster=None means: in-cluster when KUBERNETES_SERVICE_HOST is set and no kubeconfig
        is given, else `kubeconfig`, $KUBECONFIG or ~/.kube/config (current or given context).
        A kubeconfig's credential exec plugin gets `exec_plugin_timeout` seconds per run.
        """
        if in_cluster is None:
            in_cluster = kubeconfig is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        try:
            if in_cluster:
                endpoint = await in_cluster_endpoint()
            else:
                endpoint = await kubeconfig_endpoint(kubeconfig, context, exec_plugin_timeout)
        except Exception as exc:  # config loading raises many kinds; none is actionable by type
            raise KubeError(f"cannot load Kubernetes client configuration: {exc}") from exc
        log.info("kube client configured", host=endpoint.host, in_cluster=in_cluster)
        return cls(
            endpoint.host,
            ssl_context=endpoint.ssl_context,
            authorization=endpoint.authorization,
            server_hostname=endpoint.server_hostname,
            proxy=endpoint.proxy or env_proxy(endpoint.host),
            trust_env=False,
            connections=connections,
        )

    @property
    def proxy(self) -> str | None:
        """The HTTP proxy every request goes through, or None."""
        return self._proxy

    def sibling(self, *, connections: int) -> KubeClient:
        """A client of the same endpoint and credentials with its own pool of `connections` for requests
        (and its own for streams), so its requests never wait for a connection behind this client's;
        closed with this client."""
        sibling = KubeClient(self.host, ssl_context=self._ssl if isinstance(self._ssl, ssl.SSLContext) else None,
                             authorization=self._authorization, server_hostname=self._server_hostname,
                             proxy=self._proxy, trust_env=self._trust_env, connect_timeout=self._connect_timeout,
                             connections=connections)
        self._siblings.append(sibling)
        return sibling

    async def close(self) -> None:
        """Close the connection pools (and the siblings'); the client must not be used afterwards."""
        siblings, self._siblings = self._siblings, []
        for sibling in siblings:
            await sibling.close()
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,  # noqa: ASYNC109 - passed to aiohttp as the request's total timeout
        text: bool = False,
    ) -> Any:
        """One request; the JSON-decoded answer, or None for an empty body; with `text`, the body as text (a pod's
        log), undecodable bytes replaced."""
        method = method.upper()
        data = _encode_body(body)
        counted = _Counted(method, path, query, time.monotonic())
        headers = await self._headers(content_type if data is not None else None, counted)
        # connect=None: a wait for a free connection of the pool is bounded by `total`, not by the
        # connect timeout (which bounds making a new connection: sock_connect)
        client_timeout = aiohttp.ClientTimeout(total=timeout, connect=None, sock_connect=self._connect_timeout)
        try:
            async with self._session(streaming=False).request(
                method, self._url(path), params=_query(query), data=data, headers=headers,
                timeout=client_timeout, proxy=self._proxy, server_hostname=self._server_hostname,
            ) as resp:
                payload = await resp.read()
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
        except TRANSPORT_ERRORS as exc:
            counted.count("<error>")
            raise KubeTransportError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        counted.count(str(status))
        if not 200 <= status < 300:
            raise api_error(status, payload, retry_after)
        return payload.decode("utf-8", "replace") if text else _decode(payload, method, path)

    def stream(
        self,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """A streaming GET; the context yields the response's non-empty lines, raw.

        The iterator ends when the server closes the stream; nothing received for
        read_timeout seconds raises ReadTimeout.
        """
        return self._stream(path, query, connect_timeout, read_timeout)

    @contextlib.asynccontextmanager
    async def _stream(
        self, path: str, query: Mapping[str, QueryValue] | None, connect_timeout: float, read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        counted = _Counted("GET", path, query, time.monotonic(), stream=True)
        headers = await self._headers(None, counted)
        client_timeout = aiohttp.ClientTimeout(
            total=None, connect=connect_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        try:
            resp = await self._session(streaming=True).request(
                "GET", self._url(path), params=_query(query), headers=headers, timeout=client_timeout,
                proxy=self._proxy, server_hostname=self._server_hostname,
            )
        except TRANSPORT_ERRORS as exc:
            counted.count("<error>")
            raise transport_error("GET", path, exc) from exc
        async with resp:
            counted.count(str(resp.status))
            if not 200 <= resp.status < 300:
                try:
                    payload = await resp.content.read(_ERROR_BODY_BYTES)
                except TRANSPORT_ERRORS:
                    payload = b""
                raise api_error(resp.status, payload, resp.headers.get("Retry-After"))
            yield Lines(resp.content, path)

    async def _headers(self, content_type: str | None, counted: _Counted) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "sampledb-operator"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if self._authorization is not None:
            try:
                value = await self._authorization()
            except KubeTransportError:  # no credential, no request: counted like a failed connect
                counted.count("<error>")
                raise
            if value:
                headers["Authorization"] = value
        return headers

    def _url(self, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"path must be absolute: {path!r}")
        return self.host + path

    def _session(self, *, streaming: bool) -> aiohttp.ClientSession:
        """The streams' session (no connection limit) or the requests' (at most `connections`)."""
        session = self._sessions.get(streaming)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=0 if streaming else self._connections, ssl=self._ssl)
            session = aiohttp.ClientSession(connector=connector, trust_env=self._trust_env, read_bufsize=2**21)
            self._sessions[streaming] = session
        return session


class _Counted:
    """One request's metrics, counted once its outcome is known."""

    __slots__ = ("info", "method", "started")

    def __init__(self, method: str, path: str, query: Mapping[str, QueryValue] | None, started: float, *,
                 stream: bool = False) -> None:
        self.method, self.started = method, started
        self.info = request_info(method, path, query, stream=stream)

    def count(self, code: str) -> None:
        metrics.rest_client_requests_total.labels(code=code, method=self.method).inc()
        metrics.rest_client_request_duration_seconds.labels(verb=self.method).observe(time.monotonic() - self.started)
        i = self.info
        metrics.api_requests_total.labels(verb=i.verb, group=i.group, resource=i.resource,
                                          subresource=i.subresource, code=code).inc()


def _encode_body(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return jsoncodec.dumps(body)


def _decode(payload: bytes, method: str, path: str) -> Any:
    if not payload.strip():
        return None
    try:
        return jsoncodec.loads(payload)
    except ValueError as exc:
        raise KubeTransportError(f"{method} {path}: answer is not JSON: {exc}") from exc


def _query(query: Mapping[str, QueryValue] | None) -> dict[str, str] | None:
    if not query:
        return None
    return {k: ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in query.items()}
