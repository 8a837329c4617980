"""StoreSet: one read view over the stores of several watched namespaces of one resource.

When the operator watches a list of namespaces, each namespace has its own watcher and Store
(a relist replaces one namespace's store atomically, never another's). Readers see one cache:
get routes by the ref's namespace; list and by_owner merge. Read-only, like Store.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.store import Store


class StoreSet:
    """The union of per-namespace stores (namespace None = a store for all namespaces)."""

    def __init__(self, stores: Mapping[str | None, Store]) -> None:
        if not stores:
            raise ValueError("a StoreSet needs at least one store")
        self._stores = dict(stores)

    def _for(self, namespace: str) -> Store | None:
        return self._stores.get(namespace) or self._stores.get(None)

    def get(self, ref: ObjectRef) -> Obj | None:
        store = self._for(ref.namespace)
        return store.get(ref) if store is not None else None

    def list(self, namespace: str | None = None, label_selector: Mapping[str, str] | None = None) -> builtins.list[Obj]:
        if namespace is not None:
            store = self._for(namespace)
            return store.list(namespace, label_selector) if store is not None else []
        out: builtins.list[Obj] = []
        for store in self._stores.values():
            out += store.list(None, label_selector)
        return out

    def by_owner(self, uid: str) -> builtins.list[Obj]:
        out: builtins.list[Obj] = []
        for store in self._stores.values():
            out += store.by_owner(uid)
        return out

    def __len__(self) -> int:
        return sum(len(s) for s in self._stores.values())
