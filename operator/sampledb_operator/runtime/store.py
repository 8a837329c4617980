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
- objects are held packed (runtime/packing.py: compressed JSON, ~1/100 of their size as dicts); the
  last RECENT objects read or written are also kept decoded (a pass reads its database's objects
  several times, and the object a watch event just brought is the one the next pass reads), so a read
  decodes only outside that window; objects handed out may be shared and are read-only by convention:
  readers must not mutate them (copy first before building a patch from one); the resourceVersion,
  owner uids and indexed labels of each object are kept beside it, so version checks and the indexes
  never decode; the strings many entries repeat (an indexed label's value, an owner uid; the namespace
  in ObjectRef.of) are interned, so the objects of one database share one copy (interned strings are
  freed when the last holder goes);
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
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TypeVar

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability import metrics
from sampledb_operator.runtime.packing import Packer

Event = tuple[str, Obj]
Transform = Callable[[Obj], Obj]
RECENT = 128  # decoded objects kept per store: more than the objects the workers' passes read at once
K = TypeVar("K")


def _identity(obj: Obj) -> Obj:
    return obj


class _Entry:
    """One cached object: packed, with what the indexes and version checks read."""

    __slots__ = ("data", "indexed", "owners", "version")

    def __init__(self, data: bytes, version: str, owners: tuple[str, ...], indexed: tuple[tuple[str, str], ...]):
        self.data = data
        self.version = version
        self.owners = owners
        self.indexed = indexed


@dataclass(frozen=True, slots=True)
class Packed:
    """An object as a store keeps it, with its ref (Store.pack, Store.replace_packed)."""

    ref: ObjectRef
    entry: _Entry


class Store:
    """In-memory cache of one resource's objects."""

    def __init__(self, resource: str, transform: Transform | None = None, *,
                 index_labels: tuple[str, ...] = ()) -> None:
        self.resource = resource
        self.transform = transform or _identity
        self.synced = asyncio.Event()
        self.resource_version = ""
        self._packer = Packer()
        self._recent: OrderedDict[_Entry, Obj] = OrderedDict()  # entry -> its object, least recent first
        self._objects: dict[ObjectRef, _Entry] = {}
        self._index_labels = index_labels
        self._index = EntryIndex()
        self._gauge = metrics.cache_objects.labels(resource=resource)  # shared: changed by deltas only

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, ref: object) -> bool:
        return ref in self._objects

    def get(self, ref: ObjectRef) -> Obj | None:
        """The cached object (a new copy), or None."""
        entry = self._objects.get(ref)
        return self._unpack(entry) if entry is not None else None

    def version_of(self, ref: ObjectRef) -> str | None:
        """The cached object's resourceVersion ("" when it has none), or None when not cached."""
        entry = self._objects.get(ref)
        return entry.version if entry is not None else None

    def refs(self) -> builtins.list[ObjectRef]:
        """Every cached ref."""
        return builtins.list(self._objects)

    def list(
        self, namespace: str | None = None, label_selector: Mapping[str, str] | None = None
    ) -> builtins.list[Obj]:
        """Objects in `namespace` (all when None) whose labels include every pair of label_selector."""
        selector = dict(label_selector or {})
        indexed = next(((k, v) for k, v in selector.items() if k in self._index_labels), None)
        if indexed is not None:
            refs: Iterable[ObjectRef] = sorted(self._index.labelled(indexed))
            del selector[indexed[0]]  # every ref of the index has it
        else:
            refs = self._objects
        found = []
        for ref in refs:
            if namespace is not None and ref.namespace != namespace:
                continue
            obj = self._unpack(self._objects[ref])
            if selector and not _labels_match(obj, selector):
                continue
            found.append(obj)
        return found

    def each(self, keep: Callable[[ObjectRef], bool] | None = None) -> Iterator[Obj]:
        """Every cached object (those whose ref `keep` accepts), decoded one at a time as the caller goes:
        unlike list(), a walk over everything (a metrics scrape) never holds all of them decoded at once,
        and it only reads the RECENT window (it must not evict what the passes read). The refs are taken
        when the walk starts; one removed since is skipped."""
        for ref in builtins.list(self._objects):
            entry = self._objects.get(ref)
            if entry is None or (keep is not None and not keep(ref)):
                continue
            recent = self._recent.get(entry)
            yield recent if recent is not None else self._packer.unpack(entry.data)

    def by_owner(self, uid: str) -> builtins.list[Obj]:
        """Objects with an ownerReference to `uid` (controller or not), ordered by ref."""
        return [self._unpack(self._objects[ref]) for ref in sorted(self._index.owned(uid))]

    def upsert(self, obj: Obj) -> Obj:
        """Insert or replace one object; the object as the store holds it (after the transform)."""
        obj = self.transform(obj)
        ref = ObjectRef.of(obj)
        previous = self._objects.get(ref)
        if previous is not None:
            self._index.remove(ref, previous)
        else:
            self._gauge.inc()
        entry = self._entry(obj)
        self._objects[ref] = entry
        self._index.add(ref, entry)
        self._keep_recent(entry, obj)
        return obj

    def delete(self, ref: ObjectRef) -> Obj | None:
        """Remove one object; the previous one, or None if it was not cached."""
        previous = self._objects.pop(ref, None)
        if previous is None:
            return None
        self._index.remove(ref, previous)
        self._gauge.dec()
        return self._unpack(previous)

    @property
    def index_labels(self) -> tuple[str, ...]:
        """The label keys the store indexes (a list with one of them in its selector reads only that value's)."""
        return self._index_labels

    def pack(self, obj: Obj, *, decoded: bool = False) -> Packed:
        """An object (after the transform) in the form the store keeps, for replace_packed; `decoded` also keeps
        the transformed object among the recent ones (it is about to be read)."""
        packed, obj = self.pack_with_object(obj)
        if decoded:
            self._keep_recent(packed.entry, obj)
        return packed

    def pack_with_object(self, obj: Obj) -> tuple[Packed, Obj]:
        """pack(obj), and the transformed object it holds (what a handler is given: nothing decodes it again)."""
        obj = self.transform(obj)
        return Packed(ObjectRef.of(obj), self._entry(obj)), obj

    def unpack(self, packed: Packed) -> Obj:
        """The object a Packed holds (a new copy)."""
        return self._unpack(packed.entry)

    def replace(self, objs: Iterable[Obj], resource_version: str | None = None) -> builtins.list[Event]:
        """Swap in a full listing atomically; the events describing the difference (see replace_packed)."""
        changes = self.replace_packed((self.pack(obj) for obj in objs), resource_version)
        return [(type_, self.unpack(packed)) for type_, packed in changes]

    def replace_packed(self, items: Iterable[Packed],
                       resource_version: str | None = None) -> builtins.list[tuple[str, Packed]]:
        """Swap in a full listing (of pack()'s results) atomically; the changes it made, as packed objects.

        Order of the changes: deletions (with the last known object) first, then additions and
        modifications (a changed resourceVersion) in list order.
        """
        objects: dict[ObjectRef, _Entry] = {}
        index = EntryIndex()
        for item in items:
            ref, entry = item.ref, item.entry
            if ref in objects:
                index.remove(ref, objects[ref])
            objects[ref] = entry
            index.add(ref, entry)
        changes: builtins.list[tuple[str, Packed]] = [
            ("DELETED", Packed(ref, old)) for ref, old in self._objects.items() if ref not in objects
        ]
        for ref, entry in objects.items():
            old = self._objects.get(ref)
            if old is None:
                changes.append(("ADDED", Packed(ref, entry)))
            elif old.version != entry.version:
                changes.append(("MODIFIED", Packed(ref, entry)))
        self._gauge.inc(len(objects) - len(self._objects))
        self._objects, self._index = objects, index
        if resource_version is not None:
            self.resource_version = resource_version
        self.synced.set()
        return changes

    def _entry(self, obj: Obj) -> _Entry:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels")
        indexed = tuple((key, sys.intern(str(labels[key]))) for key in self._index_labels
                        if key in labels) if labels else ()
        owners = tuple(sorted(sys.intern(uid) for uid in owner_uids(obj))) if meta.get("ownerReferences") else ()
        return _Entry(self._packer.pack(obj), str(meta.get("resourceVersion") or ""), owners, indexed)

    def _unpack(self, entry: _Entry) -> Obj:
        obj = self._recent.get(entry)
        if obj is not None:
            self._recent.move_to_end(entry)
            return obj
        unpacked: Obj = self._packer.unpack(entry.data)
        self._keep_recent(entry, unpacked)
        return unpacked

    def _keep_recent(self, entry: _Entry, obj: Obj) -> None:
        self._recent[entry] = obj
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)



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


class EntryIndex:
    """Refs by owner uid and by indexed label pair, of the entries added (the Store's indexes, and the
    read-back answers' in runtime/storeset.py); a key's refs go when its last ref does.

    A key with one ref holds the ref itself, a set only from the second ref on: most keys (one database's
    StatefulSet, Secret, Pod) have one, and a set costs at least 216 bytes (N=5,000: 50,000 cached objects
    traced 46.6 -> 37.7 MiB with the interned strings below)."""

    __slots__ = ("_by_label", "_by_owner")

    def __init__(self) -> None:
        self._by_owner: dict[str, Refs] = {}
        self._by_label: dict[tuple[str, str], Refs] = {}

    def add(self, ref: ObjectRef, entry: _Entry) -> None:
        for uid in entry.owners:
            add_ref(self._by_owner, uid, ref)
        for pair in entry.indexed:
            add_ref(self._by_label, pair, ref)

    def remove(self, ref: ObjectRef, entry: _Entry) -> None:
        for uid in entry.owners:
            discard_ref(self._by_owner, uid, ref)
        for pair in entry.indexed:
            discard_ref(self._by_label, pair, ref)

    def owned(self, uid: str) -> AbstractSet[ObjectRef]:
        """The refs with an ownerReference to `uid` (read-only)."""
        return refs_at(self._by_owner, uid)

    def labelled(self, pair: tuple[str, str]) -> AbstractSet[ObjectRef]:
        """The refs whose indexed label pair[0] has the value pair[1] (read-only)."""
        return refs_at(self._by_label, pair)


Refs = ObjectRef | set[ObjectRef]  # one ref, or a set of two or more


def refs_at(index: Mapping[K, Refs], key: K) -> AbstractSet[ObjectRef]:
    """The refs an index (of add_ref) holds at `key`, as a set (read-only; empty when none)."""
    refs = index.get(key)
    if refs is None:
        return frozenset()
    return frozenset((refs,)) if isinstance(refs, ObjectRef) else refs


def add_ref(index: dict[K, Refs], key: K, ref: ObjectRef) -> None:
    refs = index.get(key)
    if refs is None:
        index[key] = ref
    elif isinstance(refs, ObjectRef):
        if refs != ref:
            index[key] = {refs, ref}
    else:
        refs.add(ref)


def discard_ref(index: dict[K, Refs], key: K, ref: ObjectRef) -> None:
    refs = index.get(key)
    if refs is None:
        return
    if isinstance(refs, ObjectRef):
        if refs == ref:
            del index[key]
        return
    refs.discard(ref)
    if len(refs) == 1:
        index[key] = next(iter(refs))
    elif not refs:
        del index[key]
