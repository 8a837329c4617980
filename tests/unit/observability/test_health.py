"""Health server: real listeners on 127.0.0.1, heartbeat driven by a fake clock."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from sampledb_operator.observability import metrics
from sampledb_operator.observability.health import ANSWER_CHUNK_BYTES, HealthServer, chunks
from sampledb_operator.runtime.clock import FakeClock

LOCAL = "127.0.0.1"


class StuckClock:
    """A clock whose sleeps never end: a heartbeat that cannot run, as on a blocked loop."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


class BrokenClock(StuckClock):
    async def sleep(self, seconds: float) -> None:
        raise RuntimeError("heartbeat crashed")


async def eventually(condition: Callable[[], bool], turns: int = 1000) -> None:
    """Let the event loop run until `condition` holds (the tasks involved need no real time)."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        yield session


async def get(http: aiohttp.ClientSession, port: int, path: str, **kw: str) -> tuple[int, str, str]:
    async with http.get(f"http://{LOCAL}:{port}{path}", headers=kw or None) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


Started = Callable[..., Awaitable[HealthServer]]


@pytest.fixture
async def start() -> AsyncIterator[Started]:
    servers: list[HealthServer] = []

    async def _start(**kw: object) -> HealthServer:
        kw.setdefault("clock", FakeClock())
        kw.setdefault("ready", lambda: True)
        kw.setdefault("health_address", (LOCAL, 0))
        kw.setdefault("metrics_address", (LOCAL, 0))
        server = HealthServer(**kw)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield _start
    for server in servers:
        await server.stop()


async def test_separate_ports_serve_their_own_paths_only(
    start: Started, http: aiohttp.ClientSession
) -> None:
    server = await start()
    assert not server.shared and server.health_port != server.metrics_port
    assert (await get(http, server.health_port, "/healthz"))[0] == 200
    assert (await get(http, server.health_port, "/readyz"))[0] == 200
    assert (await get(http, server.metrics_port, "/metrics"))[0] == 200
    assert (await get(http, server.health_port, "/metrics"))[0] == 404
    assert (await get(http, server.metrics_port, "/healthz"))[0] == 404


async def test_equal_addresses_share_one_listener(
    start: Started, http: aiohttp.ClientSession
) -> None:
    port = free_port()
    server = await start(health_address=(LOCAL, port), metrics_address=(LOCAL, port))
    assert server.shared and server.health_port == server.metrics_port == port
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await get(http, port, path))[0] == 200


async def test_metrics_serves_the_registry_in_prometheus_text_format(
    start: Started, http: aiohttp.ClientSession
) -> None:
    metrics.init_controller("health-test", 2)
    server = await start()
    status, content_type, body = await get(http, server.metrics_port, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain") and "version=0.0.4" in content_type
    assert 'controller_runtime_max_concurrent_reconciles{controller="health-test"} 2.0' in body


async def test_metrics_negotiates_openmetrics(
    start: Started, http: aiohttp.ClientSession
) -> None:
    server = await start()
    status, content_type, body = await get(http, server.metrics_port, "/metrics",
                                           Accept="application/openmetrics-text; version=1.0.0")
    assert status == 200
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")


async def test_metrics_are_encoded_off_the_loop_after_take_ran_on_it(
    start: Started, http: aiohttp.ClientSession
) -> None:
    """The encoder runs in a worker thread while the loop keeps serving: the collector below waits for the
    loop to answer a /healthz made during the scrape, which a scrape encoding on the loop would never let
    happen. take() is entered on the loop's thread and left after the encoding."""
    loop_thread = threading.get_ident()
    answered, collecting = threading.Event(), threading.Event()
    seen: list[str] = []

    class WaitsForTheLoop:
        def collect(self) -> Iterator[GaugeMetricFamily]:
            seen.append(f"collect on loop thread: {threading.get_ident() == loop_thread}")
            collecting.set()
            family = GaugeMetricFamily("loop_answered", "1 when the loop answered during the scrape")
            family.add_metric([], 1.0 if answered.wait(5) else 0.0)
            yield family

    @contextlib.contextmanager
    def take() -> Iterator[None]:
        seen.append(f"take on loop thread: {threading.get_ident() == loop_thread}")
        yield
        seen.append("take left")

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WaitsForTheLoop())  # type: ignore[arg-type]
    server = await start(registry=registry, take=take)
    scrape = asyncio.create_task(get(http, server.metrics_port, "/metrics"))
    assert await asyncio.to_thread(collecting.wait, 5)
    assert (await get(http, server.health_port, "/healthz"))[0] == 200
    answered.set()
    status, _, body = await scrape
    assert status == 200 and "loop_answered 1.0" in body
    assert seen == ["take on loop thread: True", "collect on loop thread: False", "take left"]


@pytest.mark.parametrize("accept", ["", "application/openmetrics-text; version=1.0.0"])
async def test_families_rendered_by_take_follow_the_registry_s_in_the_scraper_s_format(
    start: Started, http: aiohttp.ClientSession, accept: str
) -> None:
    """take() may yield a renderer of more families as text: the answer carries them after the registry's,
    before OpenMetrics' closing # EOF, written for the format the scraper asked for."""
    asked: list[bool] = []

    def render(openmetrics: bool) -> list[bytes]:
        asked.append(openmetrics)
        return [b"# HELP rendered_total_dbs Rendered.\n# TYPE rendered_total_dbs gauge\n", b"rendered_total_dbs 7.0\n"]

    @contextlib.contextmanager
    def take() -> Iterator[Callable[[bool], list[bytes]]]:
        yield render

    registry = CollectorRegistry(auto_describe=False)
    family = GaugeMetricFamily("from_registry", "A family of the registry")
    family.add_metric([], 1.0)
    registry.register(type("One", (), {"collect": lambda self: iter([family])})())  # type: ignore[arg-type]
    server = await start(registry=registry, take=take)
    status, _, body = await get(http, server.metrics_port, "/metrics", **({"Accept": accept} if accept else {}))
    assert status == 200 and asked == [bool(accept)]
    assert body.index("from_registry 1.0") < body.index("rendered_total_dbs 7.0")
    assert body.endswith("rendered_total_dbs 7.0\n# EOF\n" if accept else "rendered_total_dbs 7.0\n")


async def test_a_large_answer_goes_out_whole_in_chunks_with_its_length(start: Started,
                                                                         http: aiohttp.ClientSession) -> None:
    """An answer of many rendered parts, several chunks long, arrives whole and in order, its Content-Length
    its size."""
    lines = [f"many_lines{{i=\"{i}\"}} {i}.0\n".encode() for i in range(40_000)]  # ~1 MB: 4 chunks or more

    @contextlib.contextmanager
    def take() -> Iterator[Callable[[bool], list[bytes]]]:
        yield lambda openmetrics: [b"# HELP many_lines Many.\n# TYPE many_lines gauge\n", *lines]

    registry = CollectorRegistry(auto_describe=False)
    server = await start(registry=registry, take=take)
    async with http.get(f"http://{LOCAL}:{server.metrics_port}/metrics") as resp:
        body = await resp.read()
        assert resp.status == 200 and resp.content_length == len(body)
    assert len(body) > 4 * ANSWER_CHUNK_BYTES
    assert body == b"# HELP many_lines Many.\n# TYPE many_lines gauge\n" + b"".join(lines)


def test_chunks_join_whole_parts_up_to_the_size_and_lose_nothing() -> None:
    parts = [b"a" * n for n in (3, 4, 1, 9, 2, 2)]
    assert list(chunks(parts, 5)) == [b"a" * 7, b"a" * 10, b"a" * 4]  # a part is never split
    assert b"".join(chunks(parts, 1)) == b"".join(parts) and len(list(chunks(parts, 1))) == len(parts)
    assert list(chunks([], 5)) == [] and list(chunks([b"xy"], 100)) == [b"xy"]


async def test_readyz_follows_the_ready_callable(
    start: Started, http: aiohttp.ClientSession
) -> None:
    state = {"ready": False}
    server = await start(ready=lambda: state["ready"])
    status, _, body = await get(http, server.health_port, "/readyz")
    assert status == 503 and "not ready" in body
    state["ready"] = True
    assert (await get(http, server.health_port, "/readyz"))[0] == 200


async def test_readyz_is_not_ready_when_the_callable_raises(
    start: Started, http: aiohttp.ClientSession
) -> None:
    def boom() -> bool:
        raise RuntimeError("no")

    server = await start(ready=boom)
    assert (await get(http, server.health_port, "/readyz"))[0] == 503


async def test_healthz_fails_when_the_heartbeat_is_older_than_the_timeout(
    start: Started, http: aiohttp.ClientSession
) -> None:
    clock = StuckClock()
    server = await start(clock=clock, heartbeat_timeout=10.0)
    clock.now += 9.5
    assert (await get(http, server.health_port, "/healthz"))[0] == 200
    clock.now += 1.0
    status, _, body = await get(http, server.health_port, "/healthz")
    assert status == 500
    assert "heartbeat is 10.5s old" in body


async def test_healthz_fails_when_the_heartbeat_task_died(
    start: Started, http: aiohttp.ClientSession
) -> None:
    server = await start(clock=BrokenClock())
    await eventually(lambda: not server.healthy()[0])
    status, _, body = await get(http, server.health_port, "/healthz")
    assert status == 500 and "stopped" in body


async def test_heartbeat_records_loop_lag_and_keeps_healthz_green(
    start: Started, http: aiohttp.ClientSession
) -> None:
    clock = FakeClock()
    server = await start(clock=clock, heartbeat_interval=1.0, heartbeat_timeout=10.0)
    await eventually(lambda: clock.pending_sleepers() == 1)
    clock.advance(5.0)                      # the 1 s beat wakes 4 s late
    await eventually(lambda: server.loop_lag == pytest.approx(4.0))
    assert metrics.REGISTRY.get_sample_value("sampledb_event_loop_lag_seconds") == pytest.approx(4.0)
    clock.advance(30.0)                     # long after the timeout, but the beat runs again
    await eventually(lambda: server.healthy()[0] and clock.pending_sleepers() == 1)
    assert (await get(http, server.health_port, "/healthz"))[0] == 200


async def test_stop_closes_the_listeners_and_can_be_repeated(
    start: Started, http: aiohttp.ClientSession
) -> None:
    server = await start()
    port = server.health_port
    await server.stop()
    await server.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await get(http, port, "/healthz")


async def test_failed_bind_leaves_nothing_listening() -> None:
    health_port = free_port()
    with socket.socket() as busy:
        busy.bind((LOCAL, 0))
        busy.listen()
        server = HealthServer(clock=FakeClock(), ready=lambda: True, health_address=(LOCAL, health_port),
                              metrics_address=(LOCAL, busy.getsockname()[1]))
        with pytest.raises(OSError):
            await server.start()
    with socket.socket() as probe:          # the health listener was closed again
        probe.bind((LOCAL, health_port))


def test_heartbeat_timeout_must_exceed_interval() -> None:
    with pytest.raises(ValueError, match="heartbeat_timeout"):
        HealthServer(clock=FakeClock(), ready=lambda: True, heartbeat_interval=5, heartbeat_timeout=5)
