"""Caches.database_pods: with filtered caches a database's pods are in the pods cache (bucket label, from the
template) or in the cache of unlabelled pods (made from a template older than the label); the reader sees
both, and a pod in both (the read-back answer of the operator's own write to an unlabelled pod) once, its
newer copy."""

from __future__ import annotations

from sampledb_operator.model.objects import Obj
from sampledb_operator.reconcilers.context import Caches
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

SELECTOR = {"sampledb.io/database": "orders", "app.kubernetes.io/component": "database"}


def pod(name: str, rv: str, role: str = "", bucket: str | None = None) -> Obj:
    labels = dict(SELECTOR)
    if role:
        labels["sampledb.io/role"] = role
    if bucket is not None:
        labels["sampledb.io/bucket"] = bucket
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "shop", "resourceVersion": rv, "labels": labels}}


def caches(labelled: list[Obj], unlabelled: list[Obj] | None) -> tuple[Caches, StoreSet, Store | None]:
    def storeset(objs: list[Obj]) -> tuple[Store, StoreSet]:
        store = Store("pods", index_labels=("sampledb.io/database",))
        store.replace(objs, resource_version="10")
        return store, StoreSet({None: store})

    empty = [storeset([])[1] for _ in range(8)]
    _, pods = storeset(labelled)
    extra = storeset(unlabelled) if unlabelled is not None else None
    return (Caches(*empty, pods=pods, unlabelled_pods=extra[1] if extra else None), pods,
            extra[0] if extra else None)


def names_and_versions(objs: list[Obj]) -> list[tuple[str, str]]:
    return sorted((o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in objs)


def test_without_filtered_caches_the_pods_cache_alone_answers() -> None:
    c, _, _ = caches([pod("orders-0", "5")], None)
    assert names_and_versions(c.database_pods("shop", SELECTOR)) == [("orders-0", "5")]


def test_labelled_and_unlabelled_pods_are_both_seen() -> None:
    c, _, _ = caches([pod("orders-0", "5", bucket="7")], [pod("orders-1-0", "6")])
    assert names_and_versions(c.database_pods("shop", SELECTOR)) == [("orders-0", "5"), ("orders-1-0", "6")]
    assert c.database_pods("other", SELECTOR) == []


def test_an_own_write_to_an_unlabelled_pod_is_read_back_once_then_the_newer_watch_copy_wins() -> None:
    c, pods, unlabelled = caches([], [pod("orders-0", "6")])
    assert unlabelled is not None
    pods.remember(pod("orders-0", "12", role="primary"))  # the role label patch's answer (RememberingApi)
    [seen] = c.database_pods("shop", SELECTOR)
    assert seen["metadata"]["resourceVersion"] == "12" and seen["metadata"]["labels"]["sampledb.io/role"] == "primary"
    unlabelled.upsert(pod("orders-0", "15", role="primary"))  # the unlabelled watch delivers a later change
    assert names_and_versions(c.database_pods("shop", SELECTOR)) == [("orders-0", "15")]
