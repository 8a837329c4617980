"""Triggers: event handlers that map a watched object to the work-queue keys to reconcile.

Invariants: handlers are synchronous and cheap (they only enqueue), never raise for a
malformed object (it is ignored), and ignore the event type: every change, deletion included,
is a reason to look at the mapped keys again (level-based reconciling).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sampledb_operator.kube.resources import api_group
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.watcher import EventHandler

Enqueue = Callable[[ObjectRef], None]


def enqueue_self(enqueue: Enqueue) -> EventHandler:
    """Enqueue the object's own ref."""

    def handle(_type: str, obj: dict[str, Any]) -> None:
        ref = _ref(obj)
        if ref is not None:
            enqueue(ref)

    return handle


def enqueue_controller_owner(enqueue: Enqueue, *, owner_kind: str, owner_api_version: str) -> EventHandler:
    """Enqueue the controlling owner (ownerReference with controller=true) of the given kind.

    The owner's apiVersion group must match owner_api_version's; its version may differ.
    Owners live in the object's namespace (cross-namespace ownership does not exist).
    """
    group = api_group(owner_api_version)

    def handle(_type: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        for owner in meta.get("ownerReferences") or ():
            if (
                isinstance(owner, dict)
                and owner.get("controller") is True
                and owner.get("kind") == owner_kind
                and api_group(str(owner.get("apiVersion") or "")) == group
                and owner.get("name")
            ):
                enqueue(ObjectRef(meta.get("namespace") or "", str(owner["name"])))
                return

    return handle


def enqueue_mapped(enqueue: Enqueue, mapper: Callable[[dict[str, Any]], Iterable[ObjectRef]]) -> EventHandler:
    """Enqueue every ref that mapper returns for the object."""

    def handle(_type: str, obj: dict[str, Any]) -> None:
        for ref in mapper(obj):
            enqueue(ref)

    return handle


def unless_own_write(handler: EventHandler, own_write: Callable[[dict[str, Any]], bool]) -> EventHandler:
    """`handler`, except for the watch event that only delivers a version of the object this process
    wrote itself (`own_write`, e.g. StoreSet.is_own_write): the writer's pass already saw that version
    (its cache reads its writes back), so waking it again would only repeat the same decision. Give
    this only to the handlers of the controller that makes those writes: another controller, for which
    the object is news, must still get the event."""

    def handle(type_: str, obj: dict[str, Any]) -> None:
        if type_ != "DELETED" and own_write(obj):
            return
        handler(type_, obj)

    return handle


def unless_handed_over(handler: EventHandler, handed_over: Callable[[dict[str, Any]], bool]) -> EventHandler:
    """`handler`, except for a DELETED that `handed_over` says is no deletion: the object left this watch's
    selector for another watch feeding the same cache (StoreUnion.moved_in: by this process's own write, whose
    answer the other side remembers), so the cache still holds it and the writer read its write back. Every
    other event, and every DELETED of an object that went away, still reaches `handler`."""

    def handle(type_: str, obj: dict[str, Any]) -> None:
        if type_ == "DELETED" and handed_over(obj):
            return
        handler(type_, obj)

    return handle


def _ref(obj: dict[str, Any]) -> ObjectRef | None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    return ObjectRef(meta.get("namespace") or "", str(name)) if name else None

