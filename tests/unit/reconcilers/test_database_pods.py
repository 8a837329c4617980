"""Caches.pods with filtered caches: a database's pods are watched through the shards' selector (bucket label,
from the template) and through the selector of pods without it (made from a template older than the label),
merged into one cache (app.STRAYS: a StoreUnion routing by has_bucket_label); what the replication step reads
(`caches.pods.list`) sees both, and a pod the operator writes (its role label) is read back from the watch
that delivers it."""

from __future__ import annotations

from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.context import Caches
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.storeunion import StoreUnion
from sampledb_operator.sharded import has_bucket_label

SELECTOR = {"sampledb.io/database": "orders", "app.kubernetes.io/component": "database"}


def pod(name: str, rv: str, role: str = "", bucket: str | None = None) -> Obj:
    labels = dict(SELECTOR)
    if role:
        labels["sampledb.io/role"] = role
    if bucket is not None:
        labels["sampledb.io/bucket"] = bucket
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "shop", "resourceVersion": rv, "labels": labels}}


def store(objs: list[Obj]) -> Store:
    s = Store("pods", index_labels=("sampledb.io/database",))
    s.replace(objs, resource_version="10")
    return s


def caches(labelled: list[Obj], unlabelled: list[Obj] | None) -> tuple[Caches, Store, Store | None]:
    empty = [StoreSet({None: store([])}) for _ in range(8)]
    mine = store(labelled)
    if unlabelled is None:
        return Caches(*empty, pods=StoreSet({None: mine})), mine, None
    strays = store(unlabelled)
    pods = StoreUnion({None: mine}, StoreSet({None: strays}), routes_here=has_bucket_label)
    return Caches(*empty, pods=pods), mine, strays


def names_and_versions(objs: list[Obj]) -> list[tuple[str, str]]:
    return sorted((o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in objs)


def test_without_filtered_caches_the_pods_cache_alone_answers() -> None:
    c, _, _ = caches([pod("orders-0", "5")], None)
    assert names_and_versions(c.pods.list("shop", SELECTOR)) == [("orders-0", "5")]


def test_labelled_and_unlabelled_pods_are_both_seen() -> None:
    c, _, _ = caches([pod("orders-0", "5", bucket="7")], [pod("orders-1-0", "6")])
    assert names_and_versions(c.pods.list("shop", SELECTOR)) == [("orders-0", "5"), ("orders-1-0", "6")]
    assert c.pods.list("other", SELECTOR) == []
    assert c.pods.get(ObjectRef("shop", "orders-1-0")) is not None


def test_an_own_write_to_an_unlabelled_pod_is_read_back_from_the_watch_that_delivers_it() -> None:
    c, mine, strays = caches([], [pod("orders-0", "6")])
    assert strays is not None
    answer = pod("orders-0", "12", role="primary")
    c.pods.remember(answer)  # the role label patch's answer (RememberingApi)
    [seen] = c.pods.list("shop", SELECTOR)
    assert seen["metadata"]["resourceVersion"] == "12" and seen["metadata"]["labels"]["sampledb.io/role"] == "primary"
    assert c.pods.is_own_write(answer)  # the unlabelled watch's event of that version wakes nobody
    strays.upsert(answer)
    strays.resource_version = "12"
    assert c.pods.is_own_write(answer) and len(mine) == 0
    strays.upsert(pod("orders-0", "15", role="primary"))  # the unlabelled watch delivers a later change
    assert names_and_versions(c.pods.list("shop", SELECTOR)) == [("orders-0", "15")]
    assert not c.pods.is_own_write(pod("orders-0", "15", role="primary"))
    # the answer was kept by the set whose watch caught up with it, so that read dropped it (kept by the other
    # set it would stay an own write until its TTL, as the watch there never delivers it)
    assert not c.pods.is_own_write(answer)


def test_an_own_write_to_a_labelled_pod_stays_with_the_shards_watch() -> None:
    c, mine, _ = caches([pod("orders-0", "5", bucket="7")], [])
    c.pods.remember(pod("orders-0", "12", role="primary", bucket="7"))
    assert names_and_versions(c.pods.list("shop", {**SELECTOR, "sampledb.io/role": "primary"})) == [("orders-0", "12")]
    mine.upsert(pod("orders-0", "12", role="primary", bucket="7"))
    assert names_and_versions(c.pods.list("shop", SELECTOR)) == [("orders-0", "12")]
