"""HTTP endpoints for probes and scraping: /healthz, /readyz and /metrics (aiohttp.web).

Invariants: /healthz is 200 while the event loop is responsive, i.e. the heartbeat task (one beat
per `heartbeat_interval` of the injected clock) beat less than `heartbeat_timeout` ago and is
alive; /readyz is 200 exactly when `ready()` says so (leader or standby alike); /metrics serves
the one registry in the format the scraper asks for, encoded in a worker thread so that a large
answer (50,000 lines at 5,000 databases) does not stall the event loop: what only the loop may read
(the caches) is read on the loop by `take()` first, and every collector must be safe to run off the
loop otherwise (prometheus-client's own metrics are). `take()` may yield a renderer of more families
as text (the per-database ones, observability.database_metrics.taken), which the answer carries after
the registry's (before OpenMetrics' closing `# EOF`). The answer is sent in ANSWER_CHUNK_BYTES chunks,
each joined from its parts as it goes out, with its Content-Length: never the whole text in one
piece. Health and metrics share one listener when their addresses are equal (and the port is not 0),
otherwise each has its own. Every task and listener started by start() is owned and released by
stop(). This module imports nothing else of the package but observability.metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from sampledb_operator.observability import metrics

log = structlog.stdlib.get_logger(__name__)

Address = tuple[str | None, int]   # host None (or "") = every interface
Render = Callable[[bool], list[bytes]]   # openmetrics? -> more families' exposition text, in parts
_EOF = b"# EOF\n"
# /metrics is sent in chunks of this size, each joined as it goes out: at 5,000 databases the answer is ~6 MB, which
# a single join held at once beside the lines it was joined from
ANSWER_CHUNK_BYTES = 256 * 1024


class HealthClock(Protocol):
    """The part of runtime.clock.Clock the heartbeat needs."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class HealthServer:
    """Serves /healthz, /readyz and /metrics; start() and stop() bracket its life."""

    def __init__(
        self,
        *,
        clock: HealthClock,
        ready: Callable[[], bool],
        health_address: Address = (None, 8081),
        metrics_address: Address = (None, 8080),
        registry: CollectorRegistry = metrics.REGISTRY,
        take: Callable[[], AbstractContextManager[Render | None]] = contextlib.nullcontext,
        heartbeat_interval: float = 1.0,
        heartbeat_timeout: float = 10.0,
        shutdown_timeout: float = 5.0,
    ) -> None:
        if heartbeat_timeout <= heartbeat_interval:
            raise ValueError("heartbeat_timeout must exceed heartbeat_interval")
        self._clock = clock
        self._ready = ready
        self._health_address = _normalise(health_address)
        self._metrics_address = _normalise(metrics_address)
        self._registry = registry
        self._take = take
        self._interval = heartbeat_interval
        self._timeout = heartbeat_timeout
        self._shutdown_timeout = shutdown_timeout
        self._runners: dict[str, web.AppRunner] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        self._last_beat = clock.monotonic()
        self.loop_lag = 0.0
        """Seconds the last heartbeat woke later than asked (event-loop lag)."""

    @property
    def shared(self) -> bool:
        """True when health and metrics are served on one listener."""
        return self._health_address == self._metrics_address and self._health_address[1] != 0

    async def start(self) -> None:
        """Bind the listener(s) and start the heartbeat; on a bind failure nothing stays open."""
        if self._runners:
            raise RuntimeError("HealthServer already started")
        health_routes = [web.get("/healthz", self._healthz), web.get("/livez", self._healthz),
                         web.get("/readyz", self._readyz)]
        metrics_routes = [web.get("/metrics", self._metrics)]
        plan: list[tuple[str, Address, list[web.RouteDef]]]
        if self.shared:
            plan = [("health", self._health_address, health_routes + metrics_routes)]
        else:
            plan = [("health", self._health_address, health_routes),
                    ("metrics", self._metrics_address, metrics_routes)]
        try:
            for role, address, routes in plan:
                await self._listen(role, address, routes)
        except BaseException:
            await self._cleanup_runners()
            raise
        self._last_beat = self._clock.monotonic()
        self._heartbeat = asyncio.create_task(self._beat(), name="health-heartbeat")
        log.info("health server listening", health=self._url("health"), metrics=self._url("metrics"))

    async def stop(self) -> None:
        """Stop the heartbeat and close every listener; safe to call twice or before start()."""
        task, self._heartbeat = self._heartbeat, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._cleanup_runners()

    @property
    def health_port(self) -> int:
        """The port /healthz and /readyz listen on (the real one when 0 was asked)."""
        return self._port("health")

    @property
    def metrics_port(self) -> int:
        """The port /metrics listens on (the real one when 0 was asked)."""
        return self._port("health" if self.shared else "metrics")

    def healthy(self) -> tuple[bool, str]:
        """The /healthz verdict and its reason."""
        if self._heartbeat is not None and self._heartbeat.done():
            return False, "event-loop heartbeat task has stopped"
        age = self._clock.monotonic() - self._last_beat
        if age > self._timeout:
            return False, f"event-loop heartbeat is {age:.1f}s old (limit {self._timeout:g}s)"
        return True, "ok"

    async def _listen(self, role: str, address: Address, routes: list[web.RouteDef]) -> None:
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(app, access_log=None, handle_signals=False,
                               shutdown_timeout=self._shutdown_timeout)
        await runner.setup()
        self._runners[role] = runner
        site = web.TCPSite(runner, host=address[0], port=address[1], reuse_address=True)
        await site.start()

    async def _cleanup_runners(self) -> None:
        runners, self._runners = list(self._runners.values()), {}
        for runner in runners:
            await runner.cleanup()

    def _port(self, role: str) -> int:
        runner = self._runners.get(role)
        if runner is None or not runner.addresses:
            raise RuntimeError("HealthServer is not listening")
        return int(runner.addresses[0][1])

    def _url(self, role: str) -> str | None:
        runner = self._runners.get(role if not self.shared else "health")
        if runner is None or not runner.addresses:
            return None
        host, port = runner.addresses[0][:2]
        return f"{host}:{port}"

    async def _beat(self) -> None:
        """Beat until cancelled; a crash ends the task, which /healthz then reports."""
        try:
            while True:
                before = self._clock.monotonic()
                await self._clock.sleep(self._interval)
                now = self._clock.monotonic()
                self.loop_lag = max(0.0, now - before - self._interval)
                self._last_beat = now
                metrics.event_loop_lag_seconds.set(self.loop_lag)
        except Exception:
            log.exception("event-loop heartbeat crashed")

    async def _healthz(self, request: web.Request) -> web.Response:
        ok, reason = self.healthy()
        if not ok:
            log.warning("liveness check failed", reason=reason)
        return web.Response(status=200 if ok else 500, text=reason + "\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        try:
            ready = bool(self._ready())
        except Exception:
            log.exception("readiness check raised")
            ready = False
        if ready:
            return web.Response(status=200, text="ok\n")
        return web.Response(status=503, text="not ready: caches not synced\n")

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        openmetrics = content_type.startswith("application/openmetrics-text")
        with self._take() as render:  # on the loop; the thread's context is a copy of this one
            parts = await asyncio.to_thread(answer_parts, encoder, self._registry, render, openmetrics)
        response = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        response.content_length = sum(map(len, parts))
        await response.prepare(request)
        for chunk in chunks(parts, ANSWER_CHUNK_BYTES):  # each joined as it is sent: never the whole answer at once
            await response.write(chunk)
        await response.write_eof()
        return response


def answer_parts(encoder: Callable[[CollectorRegistry], bytes], registry: CollectorRegistry, render: Render | None,
                 openmetrics: bool) -> list[bytes]:
    """The registry's answer, with `render`'s families at its end (before OpenMetrics' # EOF), in parts: the
    answer is their concatenation."""
    body = encoder(registry)
    if render is None:
        return [body]
    if openmetrics and body.endswith(_EOF):
        return [body[:-len(_EOF)], *render(openmetrics), _EOF]
    return [body, *render(openmetrics)]


def chunks(parts: Iterable[bytes], size: int) -> Iterator[bytes]:
    """`parts` joined into consecutive chunks of at least `size` bytes (the last one may be shorter; a part is never
    split), one at a time."""
    pending: list[bytes] = []
    length = 0
    for part in parts:
        pending.append(part)
        length += len(part)
        if length >= size:
            yield b"".join(pending)
            pending, length = [], 0
    if pending:
        yield b"".join(pending)


def _normalise(address: Address) -> Address:
    host, port = address
    if not 0 <= port <= 65535:
        raise ValueError(f"port out of range: {port}")
    return (host or None), port
