"""Store: the informer cache of one resource, keyed by ObjectRef, with an owner-UID index.

Invariants:
- one writer (the resource's Watcher), any number of readers, all on the event loop: every
  method is synchronous, so a reader never sees a half-applied change;
- replace() swaps the whole content (and index) at once and returns the synthetic events that
  turn the old content into the new: DELETED for vanished refs (with the last known object),
  ADDED for new refs, MODIFIED for refs whose resourceVersion changed;
- the owner index always equals what a scan of ownerReferences[].uid would give, and the label index
  (for the label keys given, e.g. the database label) what a scan of those labels would give: a list
  with a selector on an indexed key reads only that key's objects (client-go's indexers), not every one;
- objects handed out are shared, read-only by convention: readers must not mutate them (copy
  first, e.g. copy.deepcopy, before building a patch from one);
- every object held (and every event replace() returns) has passed through the store's transform
  (client-go's SetTransform): a pure function that may drop fields nobody reads; the identity when
  none is given;
- cache_objects{resource} is the total size of every store of that resource (one per watched
  namespace): each store adds and removes its own changes, never sets it; `synced` is set by the
  first replace().
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Iterable, Mapping

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability import metrics

Event = tuple[str, Obj]
Transform = Callable[[Obj], Obj]


def _identity(obj: Obj) -> Obj:
    return obj


class Store:
    """In-memory cache of one resource's objects."""

    def __init__(self, resource: str, transform: Transform | None = None, *,
                 index_labels: tuple[str, ...] = ()) -> None:
        self.resource = resource
        self.transform = transform or _identity
        self.synced = asyncio.Event()
        self.resource_version = ""
        self._objects: dict[ObjectRef, Obj] = {}
        self._by_owner: dict[str, set[ObjectRef]] = {}
        self._index_labels = index_labels
        self._by_label: dict[tuple[str, str], set[ObjectRef]] = {}
        self._gauge = metrics.cache_objects.labels(resource=resource)  # shared: changed by deltas only

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, ref: object) -> bool:
        return ref in self._objects

    def get(self, ref: ObjectRef) -> Obj | None:
        """The cached object, or None."""
        return self._objects.get(ref)

    def refs(self) -> builtins.list[ObjectRef]:
        """Every cached ref."""
        return builtins.list(self._objects)

    def list(
        self, namespace: str | None = None, label_selector: Mapping[str, str] | None = None
    ) -> builtins.list[Obj]:
        """Objects in `namespace` (all when None) whose labels include every pair of label_selector."""
        indexed = next(((k, v) for k, v in (label_selector or {}).items() if k in self._index_labels), None)
        if indexed is not None:
            refs: Iterable[ObjectRef] = sorted(self._by_label.get(indexed, ()))
        else:
            refs = self._objects
        found = []
        for ref in refs:
            if namespace is not None and ref.namespace != namespace:
                continue
            obj = self._objects[ref]
            if label_selector and not _labels_match(obj, label_selector):
                continue
            found.append(obj)
        return found

    def by_owner(self, uid: str) -> builtins.list[Obj]:
        """Objects with an ownerReference to `uid` (controller or not), ordered by ref."""
        return [self._objects[ref] for ref in sorted(self._by_owner.get(uid, ()))]

    def upsert(self, obj: Obj) -> Obj | None:
        """Insert or replace one object (after the transform); the previous one, or None."""
        obj = self.transform(obj)
        ref = ObjectRef.of(obj)
        previous = self._objects.get(ref)
        if previous is not None:
            _unindex(self._by_owner, ref, previous)
            _unindex_labels(self._by_label, self._index_labels, ref, previous)
        else:
            self._gauge.inc()
        self._objects[ref] = obj
        _index(self._by_owner, ref, obj)
        _index_labels(self._by_label, self._index_labels, ref, obj)
        return previous

    def delete(self, ref: ObjectRef) -> Obj | None:
        """Remove one object; the previous one, or None if it was not cached."""
        previous = self._objects.pop(ref, None)
        if previous is not None:
            _unindex(self._by_owner, ref, previous)
            _unindex_labels(self._by_label, self._index_labels, ref, previous)
            self._gauge.dec()
        return previous

    def replace(self, objs: Iterable[Obj], resource_version: str | None = None) -> builtins.list[Event]:
        """Swap in a full listing atomically; the events describing the difference.

        Order of the events: deletions first, then additions and modifications in list order.
        """
        objects: dict[ObjectRef, Obj] = {}
        by_owner: dict[str, set[ObjectRef]] = {}
        by_label: dict[tuple[str, str], set[ObjectRef]] = {}
        for raw in objs:
            obj = self.transform(raw)
            ref = ObjectRef.of(obj)
            if ref in objects:
                _unindex(by_owner, ref, objects[ref])
                _unindex_labels(by_label, self._index_labels, ref, objects[ref])
            objects[ref] = obj
            _index(by_owner, ref, obj)
            _index_labels(by_label, self._index_labels, ref, obj)
        events: builtins.list[Event] = [
            ("DELETED", old) for ref, old in self._objects.items() if ref not in objects
        ]
        for ref, obj in objects.items():
            old = self._objects.get(ref)
            if old is None:
                events.append(("ADDED", obj))
            elif resource_version_of(old) != resource_version_of(obj):
                events.append(("MODIFIED", obj))
        self._gauge.inc(len(objects) - len(self._objects))
        self._objects, self._by_owner, self._by_label = objects, by_owner, by_label
        if resource_version is not None:
            self.resource_version = resource_version
        self.synced.set()
        return events


def resource_version_of(obj: Obj) -> str:
    """metadata.resourceVersion, or "" when absent."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def owner_uids(obj: Obj) -> set[str]:
    """The uids of obj's ownerReferences."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and r.get("uid")}


def _labels_match(obj: Obj, selector: Mapping[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _index(index: dict[str, set[ObjectRef]], ref: ObjectRef, obj: Obj) -> None:
    for uid in owner_uids(obj):
        index.setdefault(uid, set()).add(ref)


def _unindex(index: dict[str, set[ObjectRef]], ref: ObjectRef, obj: Obj) -> None:
    for uid in owner_uids(obj):
        refs = index.get(uid)
        if refs is not None:
            refs.discard(ref)
            if not refs:
                del index[uid]


def _index_labels(index: dict[tuple[str, str], set[ObjectRef]], keys: tuple[str, ...], ref: ObjectRef,
                  obj: Obj) -> None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key in keys:
        if key in labels:
            index.setdefault((key, str(labels[key])), set()).add(ref)


def _unindex_labels(index: dict[tuple[str, str], set[ObjectRef]], keys: tuple[str, ...], ref: ObjectRef,
                    obj: Obj) -> None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key in keys:
        if key in labels:
            refs = index.get((key, str(labels[key])))
            if refs is not None:
                refs.discard(ref)
                if not refs:
                    del index[(key, str(labels[key]))]
