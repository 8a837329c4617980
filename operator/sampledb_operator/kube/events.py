"""EventRecorder: core/v1 Events about an object, for `kubectl describe` and `kubectl get events`.

Invariants: recording never raises (a failure is logged and the event dropped: events are
best-effort and must not fail a reconcile). A new Event (count 1) is named
"<object name>.<hex nanoseconds>", in the object's namespace ("default" for cluster-scoped
objects, as the API server requires). Because eventTime is set, the API server applies the
newer rules: reportingComponent, reportingInstance, action and reason are non-empty, reason,
action and reportingInstance at most 128 characters, message at most 1024; the body keeps them.

Repeats are aggregated as client-go's EventCorrelator does: an event with the same involved object
(kind, apiVersion, namespace, name, uid), type, reason and message as one recorded less than
`window` seconds (10 minutes) before is a merge patch of that Event's count and lastTimestamp, not
a new Event; if that Event is gone (it expired), a new one is created. The recorder remembers the
last `cache_size` (4096) such keys, least recently used first out. Best-effort like the rest: two
records of one key at the same moment may both create an Event.

Off the caller's path (`background=True`, what the operator runs with): event() only queues the
Event (at most `max_pending`; beyond that it is dropped and logged) and returns at once; `senders`
tasks, started with the first event, post the queue in order. A reconcile pass never waits for an
Event round trip. flush() posts what is queued (on shutdown); close() stops the senders.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NamespaceTerminating, NotFound
from sampledb_operator.kube.resources import EVENT
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

MAX_MESSAGE = 1024
AGGREGATION_WINDOW = 600.0  # seconds: client-go's aggregation interval
CACHE_SIZE = 4096  # client-go's maxLruCacheEntries
MAX_PENDING = 1000  # client-go's event broadcaster queue length
SENDERS = 4
_MAX_NAME = 253
_MAX_SHORT = 128  # reason, action, reportingInstance
_MERGE_PATCH = "application/merge-patch+json"

EventKey = tuple[str, ...]


@dataclass
class _Recorded:
    """The Event a key was last recorded as."""

    namespace: str
    name: str
    count: int
    last: datetime


class EventRecorder:
    """Posts Events as `component` (source.component and reportingComponent); repeats patch the first."""

    def __init__(
        self, client: KubeClient, component: str = "sampledb-operator", *, timeout: float = 10.0,
        window: float = AGGREGATION_WINDOW, cache_size: int = CACHE_SIZE,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        background: bool = False, max_pending: int = MAX_PENDING, senders: int = SENDERS,
    ) -> None:
        self._client = client
        self._component = component
        self._instance = (socket.gethostname() or component)[:_MAX_SHORT]
        self._timeout = timeout
        self._window = window
        self._cache_size = cache_size
        self._now = now
        self._recorded: OrderedDict[EventKey, _Recorded] = OrderedDict()
        self._queue: asyncio.Queue[tuple[Any, ...]] | None = asyncio.Queue(max_pending) if background else None
        self._senders = senders
        self._tasks: list[asyncio.Task[None]] = []
        self.dropped = 0  # events not queued because max_pending were waiting

    async def event(
        self,
        obj: dict[str, Any],
        type_: Literal["Normal", "Warning"],
        reason: str,
        message: str,
        *,
        action: str | None = None,
    ) -> None:
        """Record one event about obj (action defaults to reason); never raises except cancellation.
        In the background mode, only queues it."""
        if self._queue is None:
            await self._record(obj, type_, reason, message, action)
            return
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._send(), name=f"event-sender-{i}") for i in range(self._senders)]
        try:
            self._queue.put_nowait((obj, type_, reason, message, action))
        except asyncio.QueueFull:
            self.dropped += 1
            meta = obj.get("metadata") or {}
            log.warning("event dropped: too many events waiting", reason=reason, kind=obj.get("kind"),
                        namespace=meta.get("namespace"), name=meta.get("name"), dropped=self.dropped)

    async def _send(self) -> None:
        assert self._queue is not None
        while True:
            obj, type_, reason, message, action = await self._queue.get()
            try:
                await self._record(obj, type_, reason, message, action)
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every queued event has been posted (or dropped by an error)."""
        if self._queue is not None and self._tasks:
            await self._queue.join()

    async def close(self) -> None:
        """Stop the sender tasks (queued events not yet posted are dropped: flush() first)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _record(self, obj: dict[str, Any], type_: Literal["Normal", "Warning"], reason: str, message: str,
                      action: str | None) -> None:
        meta = obj.get("metadata") or {}
        try:
            now = self._now()
            body = build_event(
                obj, type_, reason, message, action=action or reason, component=self._component,
                instance=self._instance, now=now, unique=time.time_ns(),
            )
            key = event_key(body)
            if not await self._repeat(key, now):
                await self._client.request(
                    "POST", EVENT.path(body["metadata"]["namespace"]), body=body, timeout=self._timeout
                )
                self._remember(key, _Recorded(body["metadata"]["namespace"], body["metadata"]["name"], 1, now))
        except asyncio.CancelledError:
            raise
        except NamespaceTerminating:  # expected while the namespace goes away
            log.debug("event dropped: the namespace is being terminated", reason=reason, kind=obj.get("kind"),
                      namespace=meta.get("namespace"), name=meta.get("name"))
        except Exception as exc:  # best-effort by contract
            log.warning("event dropped", reason=reason, kind=obj.get("kind"), namespace=meta.get("namespace"),
                        name=meta.get("name"), error=str(exc))


    async def _repeat(self, key: EventKey, now: datetime) -> bool:
        """Patch the Event recorded for `key` within the window (count + 1, lastTimestamp); False
        when there is none to patch (never recorded, too old, or gone from the API server)."""
        seen = self._recorded.get(key)
        if seen is None or (now - seen.last).total_seconds() >= self._window:
            return False
        patch = {"count": seen.count + 1, "lastTimestamp": _seconds(now)}
        try:
            await self._client.request("PATCH", EVENT.path(seen.namespace, seen.name), body=patch,
                                       content_type=_MERGE_PATCH, timeout=self._timeout)
        except NotFound:
            del self._recorded[key]
            return False
        seen.count += 1
        seen.last = now
        self._recorded.move_to_end(key)
        return True

    def _remember(self, key: EventKey, recorded: _Recorded) -> None:
        self._recorded[key] = recorded
        self._recorded.move_to_end(key)
        while len(self._recorded) > self._cache_size:
            self._recorded.popitem(last=False)


def event_key(body: dict[str, Any]) -> EventKey:
    """What makes two Event bodies the same event: involved object, type, reason and message (pure)."""
    involved = body.get("involvedObject") or {}
    return (*(str(involved.get(k, "")) for k in ("kind", "apiVersion", "namespace", "name", "uid")),
            str(body.get("type", "")), str(body.get("reason", "")), str(body.get("message", "")))


def _seconds(stamp: datetime) -> str:
    return stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(
    obj: dict[str, Any],
    type_: str,
    reason: str,
    message: str,
    *,
    action: str,
    component: str,
    instance: str,
    now: datetime,
    unique: int,
) -> dict[str, Any]:
    """The core/v1 Event body for one occurrence (pure)."""
    meta = obj.get("metadata") or {}
    obj_name = str(meta.get("name") or "unknown")
    namespace = str(meta.get("namespace") or "")
    suffix = f".{unique:x}"
    involved: dict[str, Any] = {
        "kind": obj.get("kind", ""),
        "apiVersion": obj.get("apiVersion", ""),
        "name": obj_name,
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if namespace:
        involved["namespace"] = namespace
    stamp = now.astimezone(UTC)
    seconds = _seconds(stamp)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": obj_name[: _MAX_NAME - len(suffix)] + suffix,
            "namespace": namespace or "default",
        },
        "involvedObject": involved,
        "reason": (reason or "Unknown")[:_MAX_SHORT],
        "message": message[:MAX_MESSAGE],
        "action": (action or reason or "Unknown")[:_MAX_SHORT],
        "type": type_,
        "source": {"component": component},
        "firstTimestamp": seconds,
        "lastTimestamp": seconds,
        "eventTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingComponent": component,
        "reportingInstance": instance,
        "count": 1,
    }
