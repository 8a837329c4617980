"""StoreUnion: one cache of a resource watched through two selectors that together select all of it.

A sharded replica with filtered caches watches its shards' SampleDBs (`bucket in (...)`) and, beside them,
every SampleDB whose bucket label is not set yet (`notin`): no label selector can say "mine or unlabelled",
so it takes two watches and two sets of stores. Readers see one StoreSet: this class is the first set
(its own stores and read-your-writes) with the second one (`others`) merged into every read.

Invariants:
- An object may be in both sets for a moment (its label changed: the watch it leaves sends DELETED, the
  watch it enters sends ADDED, in either order): a read shows the copy with the higher resourceVersion,
  each ref once, and a list or by_owner matches that copy (never an older one that still matches).
- remember(answer) keeps the answer in the set whose selector matches it (`routes_here`), and drops any
  answer remembered by the other: the set it will be read back from is the one whose watch delivers it.
- is_own_write is true when either set remembers that very version; forget drops both.
- Read-only, like StoreSet: the stores' one writer is each store's watcher.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.store import Store, owner_uids, resource_version_of
from sampledb_operator.runtime.storeset import WRITTEN_TTL, StoreSet, matches, version_number


def _version(obj: Obj) -> int:
    number = version_number(resource_version_of(obj))
    return -1 if number is None else number


def newest(*found: Iterable[Obj]) -> builtins.list[Obj]:
    """The objects of `found`, each ref once: its copy with the highest resourceVersion, in first-seen order."""
    out: dict[ObjectRef, Obj] = {}
    for objs in found:
        for obj in objs:
            ref = ObjectRef.of(obj)
            have = out.get(ref)
            if have is None or _version(obj) > _version(have):
                out[ref] = obj
    return builtins.list(out.values())


class StoreUnion(StoreSet):
    """The StoreSet of `stores` (one selector's watches) merged with `others` (the other selector's)."""

    def __init__(self, stores: Mapping[str | None, Store], others: StoreSet, *,
                 routes_here: Callable[[Obj], bool], ttl: float = WRITTEN_TTL,
                 now: Callable[[], float] = time.monotonic) -> None:
        super().__init__(stores, ttl=ttl, now=now)
        self.others = others
        self._routes_here = routes_here

    def remember(self, obj: Obj) -> None:
        ref = ObjectRef.of(obj)
        if self._routes_here(obj):
            self.others.forget(ref)
            super().remember(obj)
        else:
            super().forget(ref)
            self.others.remember(obj)

    def is_own_write(self, obj: Obj) -> bool:
        return super().is_own_write(obj) or self.others.is_own_write(obj)

    def moved_in(self, obj: Obj) -> bool:
        """Whether `obj`, a DELETED of the others' watch, is this process's own write that moved it to this set's
        watch: this set remembers that very version (the watch cache's DELETED for an object leaving a selector
        carries its previous content with the write's resourceVersion). A real deletion's DELETED carries the
        delete's own resourceVersion, which answered no write of this process (a PATCH that removes the last
        finalizer is answered with the object before the delete)."""
        return super().is_own_write(obj)

    def forget(self, ref: ObjectRef) -> None:
        super().forget(ref)
        self.others.forget(ref)

    def get(self, ref: ObjectRef) -> Obj | None:
        found = [obj for obj in (super().get(ref), self.others.get(ref)) if obj is not None]
        return newest(found)[0] if found else None

    def list(self, namespace: str | None = None, label_selector: Mapping[str, str] | None = None) -> builtins.list[Obj]:
        found = newest(super().list(namespace, label_selector), self.others.list(namespace, label_selector))
        if not label_selector:
            return found
        # a copy that matches may be older than the other set's, which no longer does: the newest copy decides
        return [obj for obj in (self.get(ObjectRef.of(o)) for o in found)
                if obj is not None and matches(obj, label_selector)]

    def each(self, keep: Callable[[ObjectRef], bool] | None = None) -> Iterator[Obj]:
        """StoreSet.each over both sets, each ref once (the first set's copy: a walk where a moment's lag is
        fine, as StoreSet.each's)."""
        seen: builtins.set[ObjectRef] = set()
        for obj in super().each(keep):
            seen.add(ObjectRef.of(obj))
            yield obj
        yield from self.others.each(lambda ref: ref not in seen and (keep is None or keep(ref)))

    def refs(self, namespace: str | None = None) -> builtins.set[ObjectRef]:
        return super().refs(namespace) | self.others.refs(namespace)

    def by_owner(self, uid: str) -> builtins.list[Obj]:
        found = newest(super().by_owner(uid), self.others.by_owner(uid))
        return [obj for obj in (self.get(ObjectRef.of(o)) for o in found) if obj is not None and uid in owner_uids(obj)]

    def __len__(self) -> int:
        mine = {ref for store in self._stores.values() for ref in store.refs()}
        theirs = {ref for store in self.others._stores.values() for ref in store.refs()}
        return len(mine | theirs)
