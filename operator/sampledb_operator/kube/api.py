"""ResourceApi: typed verbs (get, list, watch, create, apply, patch, replace, delete) on one Resource.

Invariants: objects come back as plain dicts without metadata.managedFields; list items carry
"kind" and "apiVersion" (the API server omits them); a watch yields only ADDED, MODIFIED,
DELETED and BOOKMARK events, ends when the server closes the stream, and turns an ERROR event
into Gone (410) or error_for(code); a line that is not a watch event raises KubeTransportError.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from sampledb_operator.kube import jsoncodec
from sampledb_operator.kube.client import KubeClient, QueryValue
from sampledb_operator.kube.errors import Gone, KubeTransportError, error_for
from sampledb_operator.kube.resources import Resource

WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
_PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"  # a JSON document is valid YAML
_LIST_RESTARTS = 3


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: type ADDED, MODIFIED, DELETED or BOOKMARK, and the object (a dict)."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(slots=True)
class ListResult:
    """One page (or all pages) of a list: items, the list's resourceVersion, the continue token."""

    items: list[Any]  # the objects (dicts), or what list_all's `keep` made of them
    resource_version: str
    continue_token: str | None


class ResourceApi:
    """The REST verbs on one resource through a shared KubeClient."""

    def __init__(self, client: KubeClient, resource: Resource, *, timeout: float = 30.0) -> None:
        self.client = client
        self.resource = resource
        self.timeout = timeout

    async def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object; NotFound if absent."""
        return await self._call("GET", self.resource.path(namespace, name))

    async def log(self, name: str, namespace: str, *, container: str, previous: bool = False, tail_lines: int = 50,
                  limit_bytes: int = 16384) -> str:
        """The end of a pod's container log (the pods/log subresource), bounded in lines and bytes; `previous`: its
        last run's (a restarted container's)."""
        query: dict[str, QueryValue] = {"container": container, "tailLines": tail_lines, "limitBytes": limit_bytes}
        if previous:
            query["previous"] = True
        answer = await self.client.request("GET", self.resource.path(namespace, name, "log"), query=query,
                                           timeout=self.timeout, text=True)
        return str(answer)

    async def list(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> ListResult:
        """One page of the collection (all namespaces when namespace is None)."""
        query: dict[str, QueryValue] = {}
        if limit > 0:
            query["limit"] = limit
        if continue_token:
            query["continue"] = continue_token
        elif resource_version is not None:
            query["resourceVersion"] = resource_version
        _selectors(query, label_selector, field_selector)
        path = self.resource.path(namespace)
        answer = await self.client.request("GET", path, query=query, timeout=self.timeout)
        meta = answer.get("metadata") or {}
        items = [self._fill(strip_managed_fields(item)) for item in answer.get("items") or []]
        return ListResult(items, str(meta.get("resourceVersion") or ""), meta.get("continue") or None)

    async def list_all(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        resource_version: str | None = None,
        keep: Callable[[dict[str, Any]], Any] | None = None,
    ) -> ListResult:
        """Every page, as one consistent snapshot (the first page's resourceVersion).

        `keep` maps each item as its page arrives (the items are then what it returns): a cache keeps its
        own compact form of each object, and only one page is ever held as parsed JSON.
        A continue token that expires mid-way (410) restarts the list from the first page,
        a few times at most, then Gone propagates.
        """
        for attempt in range(_LIST_RESTARTS):
            items: list[Any] = []
            token: str | None = None
            first: ListResult | None = None
            try:
                while True:
                    page = await self.list(
                        namespace, label_selector=label_selector, field_selector=field_selector,
                        limit=page_size, continue_token=token, resource_version=resource_version,
                    )
                    first = first or page
                    items.extend(map(keep, page.items) if keep is not None else page.items)
                    token = page.continue_token
                    if not token:
                        return ListResult(items, first.resource_version, None)
            except Gone:
                if token is None or attempt == _LIST_RESTARTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def watch(
        self,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int,
        read_timeout: float,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        connect_timeout: float = 10.0,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after resource_version until the server ends the stream (timeout_seconds).

        With send_initial_events (a streaming list, Kubernetes' WatchList): first an ADDED event for
        every object (at least as new as resource_version; a consistent read when it is ""), then a
        BOOKMARK for which `initial_events_end` is true, then the changes as usual. A server that does
        not offer it refuses the request (Invalid, 422).
        Close the generator (contextlib.aclosing) when stopping early.
        """
        query: dict[str, QueryValue] = {"watch": True, "timeoutSeconds": timeout_seconds}
        if resource_version:
            query["resourceVersion"] = resource_version
        if allow_bookmarks or send_initial_events:
            query["allowWatchBookmarks"] = True
        if send_initial_events:
            query["sendInitialEvents"] = True
            query["resourceVersionMatch"] = "NotOlderThan"
        _selectors(query, label_selector, field_selector)
        stream = self.client.stream(
            self.resource.path(namespace), query=query, connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        async with stream as lines:
            async for line in lines:
                yield self._fill_event(decode_watch_line(line))

    async def create(
        self, obj: dict[str, Any], namespace: str | None = None, *, field_manager: str | None = None
    ) -> dict[str, Any]:
        """POST a new object (AlreadyExists is Conflict)."""
        namespace = namespace or _namespace_of(obj)
        query: dict[str, QueryValue] | None = {"fieldManager": field_manager} if field_manager else None
        return await self._call("POST", self.resource.path(namespace), query=query, body=self._fill(dict(obj)))

    async def apply(
        self, obj: dict[str, Any], *, field_manager: str, force: bool = True, subresource: str | None = None
    ) -> dict[str, Any]:
        """Server-side apply of `obj` (its apiVersion/kind filled in when missing)."""
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise ValueError("apply needs metadata.name")
        path = self.resource.path(_namespace_of(obj), name, subresource)
        query: dict[str, QueryValue] = {"fieldManager": field_manager, "force": force}
        return await self._call("PATCH", path, query=query, body=self._fill(dict(obj)),
                                content_type=APPLY_CONTENT_TYPE)

    async def patch(
        self,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """A merge, JSON or strategic-merge patch."""
        path = self.resource.path(namespace, name, subresource)
        query: dict[str, QueryValue] | None = {"fieldManager": field_manager} if field_manager else None
        return await self._call("PATCH", path, query=query, body=patch,
                                content_type=_PATCH_CONTENT_TYPES[patch_type])

    async def replace(self, obj: dict[str, Any], *, subresource: str | None = None) -> dict[str, Any]:
        """PUT; metadata.resourceVersion in obj makes it conditional (Conflict when stale)."""
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise ValueError("replace needs metadata.name")
        path = self.resource.path(_namespace_of(obj), name, subresource)
        return await self._call("PUT", path, body=self._fill(dict(obj)))

    async def delete(
        self,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        preconditions: dict[str, Any] | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """DELETE with a propagation policy, optional preconditions (uid, resourceVersion) and grace period."""
        options: dict[str, Any] = {
            "kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation,
        }
        if preconditions:
            options["preconditions"] = preconditions
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        path = self.resource.path(namespace, name)
        await self.client.request("DELETE", path, body=options, timeout=self.timeout)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, QueryValue] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        answer = await self.client.request(
            method, path, query=query, body=body, content_type=content_type, timeout=self.timeout
        )
        if not isinstance(answer, dict):
            raise KubeTransportError(f"{method} {path}: expected an object, got {type(answer).__name__}")
        return strip_managed_fields(answer)

    def _fill(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        return obj

    def _fill_event(self, event: WatchEvent) -> WatchEvent:
        if event.type != "BOOKMARK":
            self._fill(event.object)
        return event


INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"


def initial_events_end(event: WatchEvent) -> bool:
    """The BOOKMARK that ends a streaming list's initial ADDED events."""
    if event.type != "BOOKMARK":
        return False
    annotations = (event.object.get("metadata") or {}).get("annotations") or {}
    return annotations.get(INITIAL_EVENTS_END_ANNOTATION) == "true"


def decode_watch_line(line: bytes) -> WatchEvent:
    """One line of a watch stream as a WatchEvent; ERROR raises Gone (410) or error_for(code)."""
    try:
        decoded = jsoncodec.loads(line)
        kind = decoded["type"]
        obj = decoded["object"]
    except (ValueError, KeyError, TypeError) as exc:
        raise KubeTransportError(f"malformed watch event: {line[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise KubeTransportError(f"malformed watch event: {line[:200]!r}")
    if kind == "ERROR":
        code = int(obj.get("code") or 500)
        reason, message = str(obj.get("reason") or ""), str(obj.get("message") or "")
        if code == 410:
            raise Gone(410, reason or "Expired", message)
        raise error_for(code, reason, message)
    if kind not in WATCH_TYPES:
        raise KubeTransportError(f"unknown watch event type {kind!r}")
    return WatchEvent(kind, strip_managed_fields(obj))


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """Remove metadata.managedFields in place (the operator never reads them); returns obj."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _namespace_of(obj: dict[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("namespace") or None


def _selectors(query: dict[str, QueryValue], label_selector: str | None, field_selector: str | None) -> None:
    if label_selector:
        query["labelSelector"] = label_selector
    if field_selector:
        query["fieldSelector"] = field_selector
