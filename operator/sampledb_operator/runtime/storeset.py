"""StoreSet: one read view over the stores of several watched namespaces of one resource, with the
operator's own writes read back until the watches deliver them.

When the operator watches a list of namespaces, each namespace has its own watcher and Store
(a relist replaces one namespace's store atomically, never another's). Readers see one cache:
get routes by the ref's namespace; list and by_owner merge. Read-only, like Store: the stores'
one writer is their watcher.

Read-your-writes (client-go's MutationCache with integer resourceVersions): `remember(answer)` keeps
the API server's answer to a write of this process until the store has caught up with it, that is,
until the store's watch has delivered events up to that resourceVersion (or the store holds the object
at that version or later), or `ttl` seconds have passed (a missed event never pins an old answer).
Until then get/list/by_owner show the answer in place of the cached object (or beside the cache, for an
object just created). So the pass after a write does not see the world from before it: no second
create of what it just made, no re-apply of what it just applied, no status written from an older
copy of itself. resourceVersions are compared as integers (etcd's; the API conventions call them
opaque, so an answer whose version is not an integer is simply not remembered). `forget(ref)` drops
an answer (the object was deleted).

The answers are held as the store holds its objects (packed, after its transform) and indexed like it
(by namespace, owner uid and the store's indexed labels), so a burst of writes (N databases created at
once: N times 9 answers while the watches lag) costs what caching them costs, and a read looks only at
the answers of its own namespace, owner or label value, never at every answer. Answers are dropped
when the store catches up with them (on the next read of them) or once expired, oldest first, on every
remember and read.
"""

from __future__ import annotations

import builtins
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.store import (
    EntryIndex,
    Packed,
    Refs,
    Store,
    add_ref,
    discard_ref,
    refs_at,
    resource_version_of,
)

WRITTEN_TTL = 30.0  # seconds an answer is kept at most (the watches normally deliver it within a second)


@dataclass(frozen=True, slots=True)
class _Written:
    packed: Packed  # the answer as its store keeps objects
    version: int
    expires: float


def version_number(text: str) -> int | None:
    """A resourceVersion as the number the API server makes it (None when it is not one: it is opaque)."""
    return int(text) if text.isdigit() else None


class StoreSet:
    """The union of per-namespace stores (namespace None = a store for all namespaces)."""

    def __init__(self, stores: Mapping[str | None, Store], *, ttl: float = WRITTEN_TTL,
                 now: Callable[[], float] = time.monotonic) -> None:
        if not stores:
            raise ValueError("a StoreSet needs at least one store")
        self._stores = dict(stores)
        self._ttl = ttl
        self._now = now
        self._index_labels = frozenset(label for store in self._stores.values() for label in store.index_labels)
        self._written: OrderedDict[ObjectRef, _Written] = OrderedDict()  # oldest (first to expire) first
        self._written_in: dict[str, Refs] = {}  # namespace -> refs
        self._written_index = EntryIndex()  # by owner uid and indexed label, as the stores index

    def _for(self, namespace: str) -> Store | None:
        return self._stores.get(namespace) or self._stores.get(None)

    # ------------------------------------------------------------------ the operator's own writes

    def remember(self, obj: Obj) -> None:
        """Keep the server's answer to a write until the store has caught up with it."""
        ref = ObjectRef.of(obj)
        store = self._for(ref.namespace)
        version = version_number(resource_version_of(obj))
        if store is None or version is None:
            return
        now = self._now()
        self._expire(now)
        self._drop(ref)
        if not self._ahead(store, ref, version):
            return
        written = _Written(store.pack(obj, decoded=True), version, now + self._ttl)
        self._written[ref] = written
        add_ref(self._written_in, ref.namespace, ref)
        self._written_index.add(ref, written.packed.entry)

    def is_own_write(self, obj: Obj) -> bool:
        """Whether `obj` (a watch event's object) is exactly a version this process wrote and has been
        reading back since: the event tells the writer nothing it did not already know."""
        entry = self._written.get(ObjectRef.of(obj))
        return entry is not None and entry.version == version_number(resource_version_of(obj))

    def forget(self, ref: ObjectRef) -> None:
        """Drop a remembered answer (the object was deleted)."""
        self._drop(ref)

    def _drop(self, ref: ObjectRef) -> None:
        written = self._written.pop(ref, None)
        if written is None:
            return
        discard_ref(self._written_in, ref.namespace, ref)
        self._written_index.remove(ref, written.packed.entry)

    def _expire(self, now: float) -> None:
        """Drop the expired answers (the oldest first: all expire after the same ttl)."""
        while self._written:
            ref, written = next(iter(self._written.items()))
            if written.expires >= now:
                return
            self._drop(ref)

    def _ahead(self, store: Store, ref: ObjectRef, version: int) -> bool:
        """Whether the store has not yet seen `version` of `ref`."""
        seen = version_number(store.resource_version)
        if seen is not None and seen >= version:
            return False
        cached = store.version_of(ref)
        have = version_number(cached) if cached is not None else None
        return have is None or have < version

    def _written_for(self, ref: ObjectRef, store: Store) -> Obj | None:
        """The remembered answer for `ref` while it is newer than the store's copy (else None, dropped)."""
        written = self._written.get(ref)
        if written is None:
            return None
        if self._now() > written.expires or not self._ahead(store, ref, written.version):
            self._drop(ref)
            return None
        return store.unpack(written.packed)

    def _pending(self, refs: Iterable[ObjectRef]) -> builtins.list[tuple[ObjectRef, Obj]]:
        """Of `refs` (remembered ones), the answers still ahead of their store, in ref order."""
        self._expire(self._now())
        out = []
        for ref in sorted(refs):
            store = self._for(ref.namespace)
            obj = self._written_for(ref, store) if store is not None else None
            if obj is not None:
                out.append((ref, obj))
        return out

    def _candidates(self, namespace: str | None, label_selector: Mapping[str, str] | None) -> set[ObjectRef]:
        """The remembered refs a list(namespace, label_selector) may show: by an indexed label of the selector
        when it has one, else by namespace (a superset: the caller still matches the labels)."""
        indexed = next(((k, v) for k, v in (label_selector or {}).items() if k in self._index_labels), None)
        if indexed is not None:
            refs = set(self._written_index.labelled(indexed))
            return refs if namespace is None else {r for r in refs if r.namespace == namespace}
        if namespace is not None:
            return set(refs_at(self._written_in, namespace))
        return set(self._written)

    # ------------------------------------------------------------------ reads

    def get(self, ref: ObjectRef) -> Obj | None:
        store = self._for(ref.namespace)
        if store is None:
            return None
        if self._written:
            written = self._written_for(ref, store)
            if written is not None:
                return written
        return store.get(ref)

    def list(self, namespace: str | None = None, label_selector: Mapping[str, str] | None = None) -> builtins.list[Obj]:
        if namespace is not None:
            store = self._for(namespace)
            found = store.list(namespace, label_selector) if store is not None else []
        else:
            found = []
            for store in self._stores.values():
                found += store.list(None, label_selector)
        if not self._written:
            return found
        return self._overlay(found, self._pending(self._candidates(namespace, label_selector)), label_selector)

    def each(self, keep: Callable[[ObjectRef], bool] | None = None) -> Iterator[Obj]:
        """Every cached object of every store (Store.each: decoded one at a time, those `keep` accepts). The
        cache's view only: a read-back answer the cache has not shown yet is not in it (list() overlays
        those); for walks over everything where a few seconds' lag is fine (metrics)."""
        for store in self._stores.values():
            yield from store.each(keep)

    def refs(self, namespace: str | None = None) -> builtins.set[ObjectRef]:
        """The refs of `namespace`'s objects (None: every namespace's; cached, or a read-back answer the cache has
        not shown yet); nothing is decoded, unlike list()."""
        if namespace is None:
            return {r for store in self._stores.values() for r in store.refs()} | builtins.set(self._written)
        store = self._for(namespace)
        found = {r for r in store.refs() if r.namespace == namespace} if store is not None else set()
        return found | set(refs_at(self._written_in, namespace))

    def by_owner(self, uid: str) -> builtins.list[Obj]:
        out: builtins.list[Obj] = []
        for store in self._stores.values():
            out += store.by_owner(uid)
        if not self._written:
            return out
        return self._overlay(out, self._pending(set(self._written_index.owned(uid))), None)

    @staticmethod
    def _overlay(found: builtins.list[Obj], pending: builtins.list[tuple[ObjectRef, Obj]],
                 label_selector: Mapping[str, str] | None) -> builtins.list[Obj]:
        """`found` with each pending answer in place of its cached copy, or added when the cache lacks it
        (dropped where its labels no longer match the selector)."""
        if not pending:
            return found
        newer = dict(pending)
        out = []
        for obj in found:
            ref = ObjectRef.of(obj)
            replacement = newer.pop(ref, None)
            if replacement is None:
                out.append(obj)
            elif matches(replacement, label_selector):
                out.append(replacement)
        out += [obj for obj in newer.values() if matches(obj, label_selector)]
        return out

    def __len__(self) -> int:
        return sum(len(s) for s in self._stores.values())


def matches(obj: Obj, selector: Mapping[str, str] | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return not selector or all(labels.get(k) == v for k, v in selector.items())
