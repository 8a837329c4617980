"""EventRecorder: core/v1 Events about an object, for `kubectl describe` and `kubectl get events`.

Invariants: recording never raises (a failure is logged and the event dropped: events are
best-effort and must not fail a reconcile); each call creates one new Event (count 1) named
"<object name>.<hex nanoseconds>", in the object's namespace ("default" for cluster-scoped
objects, as the API server requires). Because eventTime is set, the API server applies the
newer rules: reportingComponent, reportingInstance, action and reason are non-empty, reason,
action and reportingInstance at most 128 characters, message at most 1024; the body keeps them.
"""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime
from typing import Any, Literal

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.errors import NamespaceTerminating
from sampledb_operator.kube.resources import EVENT
from sampledb_operator.observability.logging import get_logger

log = get_logger(__name__)

MAX_MESSAGE = 1024
_MAX_NAME = 253
_MAX_SHORT = 128  # reason, action, reportingInstance


class EventRecorder:
    """Posts Events as `component` (source.component and reportingComponent)."""

    def __init__(
        self, client: KubeClient, component: str = "sampledb-operator", *, timeout: float = 10.0
    ) -> None:
        self._client = client
        self._component = component
        self._instance = (socket.gethostname() or component)[:_MAX_SHORT]
        self._timeout = timeout

    async def event(
        self,
        obj: dict[str, Any],
        type_: Literal["Normal", "Warning"],
        reason: str,
        message: str,
        *,
        action: str | None = None,
    ) -> None:
        """Record one event about obj (action defaults to reason); never raises except cancellation."""
        meta = obj.get("metadata") or {}
        try:
            body = build_event(
                obj, type_, reason, message, action=action or reason, component=self._component,
                instance=self._instance, now=datetime.now(UTC), unique=time.time_ns(),
            )
            await self._client.request(
                "POST", EVENT.path(body["metadata"]["namespace"]), body=body, timeout=self._timeout
            )
        except asyncio.CancelledError:
            raise
        except NamespaceTerminating:  # expected while the namespace goes away
            log.debug("event dropped: the namespace is being terminated", reason=reason, kind=obj.get("kind"),
                      namespace=meta.get("namespace"), name=meta.get("name"))
        except Exception as exc:  # best-effort by contract
            log.warning("event dropped", reason=reason, kind=obj.get("kind"), namespace=meta.get("namespace"),
                        name=meta.get("name"), error=str(exc))


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
    seconds = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
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
