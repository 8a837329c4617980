"""An in-memory stand-in for the plugin's Session: the verbs the commands use, over a list of objects.

Kept of the API server's behaviour: get raises NotFound, a list filters by namespace, label selector
(`k=v,...`) and field selector (`a.b=v,...`) and fills in kind; a merge patch carrying
metadata.resourceVersion is refused with Conflict when the object has moved on, and every write
gives a new resourceVersion; pods/log answers come from `logs` (an exception there is raised).
Every call is recorded in `calls`.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from sampledb_operator.kube.errors import Conflict, NotFound
from sampledb_operator.kube.resources import Resource
from sampledb_operator.plugin.session import Target


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _path(obj: dict[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


class FakeClient:
    """KubeClient.request for pods/log and /version; `logs` maps a pod (and "pod:previous") to its text or
    an exception."""

    def __init__(self, logs: dict[str, str | Exception], version: str = "v1.33.1") -> None:
        self.logs, self.version = logs, version
        self.requests: list[tuple[str, dict[str, Any], float]] = []

    async def request(self, method: str, path: str, *, query: dict[str, Any] | None = None,
                      timeout: float = 30.0, text: bool = False, **_: Any) -> Any:  # noqa: ASYNC109 - KubeClient's
        self.requests.append((path, dict(query or {}), timeout))
        if path == "/version":
            return {"gitVersion": self.version}
        pod = path.split("/")[-2]
        answer = self.logs.get(f"{pod}:previous" if (query or {}).get("previous") else pod)
        if answer is None:
            raise NotFound(404, "NotFound", f'pods "{pod}" not found')
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeSession:
    def __init__(self, objects: list[dict[str, Any]], namespace: str = "shop",
                 logs: dict[str, str | Exception] | None = None) -> None:
        self.namespace = namespace
        self.objects = [copy.deepcopy(o) for o in objects]
        self.client = FakeClient(logs or {})
        self.calls: list[tuple[str, str, Any]] = []
        self.on_patch: Callable[[FakeSession], None] | None = None   # runs before each patch (a concurrent writer)
        self._versions = itertools.count(100)
        for obj in self.objects:
            obj.setdefault("metadata", {}).setdefault("namespace", namespace)
            obj["metadata"].setdefault("resourceVersion", str(next(self._versions)))

    def _find(self, resource: Resource, name: str) -> dict[str, Any]:
        for obj in self.objects:
            if obj.get("kind") == resource.kind and obj["metadata"]["name"] == name \
                    and obj["metadata"]["namespace"] == self.namespace:
                return obj
        raise NotFound(404, "NotFound", f'{resource.plural} "{name}" not found')

    async def get(self, resource: Resource, name: str) -> dict[str, Any]:
        self.calls.append(("get", resource.kind, name))
        return copy.deepcopy(self._find(resource, name))

    async def get_or_none(self, resource: Resource, name: str) -> dict[str, Any] | None:
        try:
            return await self.get(resource, name)
        except NotFound:
            return None

    async def list(self, resource: Resource, *, label_selector: str | None = None,
                   field_selector: str | None = None) -> list[dict[str, Any]]:
        self.calls.append(("list", resource.kind, label_selector or field_selector))
        labels = dict(p.split("=", 1) for p in (label_selector or "").split(",") if p)
        fields = dict(p.split("=", 1) for p in (field_selector or "").split(",") if p)
        return [copy.deepcopy(o) for o in self.objects
                if o.get("kind") == resource.kind and o["metadata"]["namespace"] == self.namespace
                and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
                and all(str(_path(o, k)) == v for k, v in fields.items())]

    async def merge_patch(self, resource: Resource, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", resource.kind, copy.deepcopy(patch)))
        if self.on_patch is not None:
            self.on_patch(self)
        obj = self._find(resource, name)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != obj["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        _merge(obj, {**patch, "metadata": {k: v for k, v in (patch.get("metadata") or {}).items()
                                           if k != "resourceVersion"}})
        self.bump(obj)
        return copy.deepcopy(obj)

    def bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def opener(self) -> Callable[[Target], Any]:
        """A stand-in for open_session that yields this session."""
        @asynccontextmanager
        async def open_session(target: Target) -> AsyncIterator[FakeSession]:
            yield self
        return open_session
