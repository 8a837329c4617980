"""runtime/storeset.py: the operator's own writes are read back until the watch delivers them.

The pass after a write must not decide from a copy older than the write (a second create, a re-apply,
a status from an older self); and a remembered answer must never hide what the watch says later.
"""

from __future__ import annotations

from typing import cast

from sampledb_operator.kube.client import KubeClient
from sampledb_operator.kube.events import EventRecorder
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.reconcilers.context import Caches, Context
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet

REF = ObjectRef("ns", "cm")


def cm(rv: str, value: str = "v", labels: dict[str, str] | None = None, owner: str = "") -> Obj:
    meta: Obj = {"name": "cm", "namespace": "ns", "resourceVersion": rv, "labels": labels or {"app": "x"}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner}]
    return {"kind": "ConfigMap", "metadata": meta, "data": {"k": value}}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def storeset(clock: Clock | None = None) -> tuple[Store, StoreSet]:
    store = Store("configmaps")
    store.replace([], resource_version="10")
    return store, StoreSet({None: store}, ttl=30.0, now=clock or Clock())


def test_a_created_object_is_seen_before_its_watch_event_and_then_the_cache_wins() -> None:
    store, cache = storeset()
    cache.remember(cm("11"))
    assert cache.get(REF) == cm("11")
    assert [o["metadata"]["name"] for o in cache.list("ns", {"app": "x"})] == ["cm"]
    store.upsert(cm("11"))  # the watch delivers the write
    store.resource_version = "11"
    store.upsert(cm("12", "changed by someone"))  # and a later change
    store.resource_version = "12"
    assert cache.get(REF)["data"] == {"k": "changed by someone"}  # type: ignore[index]
    assert len(cache.list("ns")) == 1


def test_an_older_cached_copy_is_hidden_by_the_newer_answer() -> None:
    store, cache = storeset()
    store.upsert(cm("5", "old"))
    cache.remember(cm("11", "new", labels={"app": "y"}))
    assert cache.get(REF)["data"] == {"k": "new"}  # type: ignore[index]
    assert cache.list("ns", {"app": "x"}) == []  # the answer's labels no longer match
    assert [o["data"] for o in cache.list("ns", {"app": "y"})] == [{"k": "new"}]
    assert cache.list(None) == [cm("11", "new", labels={"app": "y"})]


def test_a_deletion_seen_by_the_watch_after_the_write_is_not_hidden() -> None:
    store, cache = storeset()
    cache.remember(cm("11"))
    store.resource_version = "13"  # events up to 13 delivered: the write (11) and its deletion (13)
    assert cache.get(REF) is None
    assert cache.list("ns") == []


def test_an_answer_is_not_kept_past_its_ttl() -> None:
    clock = Clock()
    _store, cache = storeset(clock)
    cache.remember(cm("11"))
    clock.t = 31.0
    assert cache.get(REF) is None


def test_an_answer_the_cache_already_has_or_without_an_integer_version_is_not_kept() -> None:
    store, cache = storeset()
    store.upsert(cm("11"))
    cache.remember(cm("11", "same version"))
    assert cache.get(REF)["data"] == {"k": "v"}  # type: ignore[index]
    _store, other = storeset()
    other.remember(cm("opaque-version"))
    assert other.get(REF) is None


def test_forget_drops_an_answer_and_by_owner_sees_answers() -> None:
    _store, cache = storeset()
    cache.remember(cm("11", owner="u1"))
    assert [o["metadata"]["name"] for o in cache.by_owner("u1")] == ["cm"]
    assert cache.by_owner("u2") == []
    cache.forget(REF)
    assert cache.get(REF) is None


def test_the_stores_transform_applies_to_answers() -> None:
    store = Store("configmaps", transform=lambda o: {**o, "data": {"digest": "d"}})
    store.replace([], resource_version="1")
    cache = StoreSet({None: store})
    cache.remember(cm("2"))
    assert cache.get(REF)["data"] == {"digest": "d"}  # type: ignore[index]


class Server:
    """Stands in for KubeClient: answers every write with the body at resourceVersion 11."""

    async def request(self, method: str, path: str, *, body: object = None, query: object = None,
                      content_type: str = "application/json", timeout: float = 30.0) -> object:  # noqa: ASYNC109
        if method == "DELETE":
            return {}
        assert isinstance(body, dict)
        return {**body, "metadata": {**body.get("metadata", {}), "namespace": "ns", "resourceVersion": "11"}}


async def test_writes_through_the_context_are_read_back_and_a_delete_forgets_them() -> None:
    sets = {k: storeset()[1] for k in ("db", "bk", "sts", "pvc", "job", "svc", "cm", "sec")}
    caches = Caches(*sets.values())
    ctx = Context(client=cast(KubeClient, Server()), caches=caches, recorder=cast(EventRecorder, None),
                  clock=FakeClock())
    await ctx.apis["ConfigMap"].apply({"metadata": {"name": "cm", "namespace": "ns"}, "data": {"k": "v"}},
                                      field_manager="t")
    assert ctx.cached("ConfigMap", "ns", "cm")["data"] == {"k": "v"}  # type: ignore[index]
    await ctx.apis["ConfigMap"].delete("cm", "ns")
    assert ctx.cached("ConfigMap", "ns", "cm") is None
    await ctx.apis["StorageClass"].create({"metadata": {"name": "fast"}})  # not cached: nothing to remember


def test_a_watch_event_of_an_own_write_is_recognised_and_only_that_version() -> None:
    _store, cache = storeset()
    cache.remember(cm("11"))
    assert cache.is_own_write(cm("11"))
    assert not cache.is_own_write(cm("12"))  # someone's later change is news
    assert not cache.is_own_write({**cm("11"), "metadata": {**cm("11")["metadata"], "name": "other"}})


def named(name: str, rv: str, db: str, owner: str = "") -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "resourceVersion": rv, "labels": {"db": db, "app": "x"}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner}]
    return {"kind": "ConfigMap", "metadata": meta, "data": {"k": name}}


def test_expired_answers_are_dropped_by_the_next_write_without_being_read() -> None:
    """A burst of writes must not be held for longer than the ttl: an answer nobody reads goes too."""
    clock = Clock()
    _store, cache = storeset(clock)
    cache.remember(cm("11"))
    clock.t = 31.0
    cache.remember(named("other", "12", "b"))
    assert not cache.is_own_write(cm("11"))  # gone although never read: its late event is news again
    assert cache.is_own_write(named("other", "12", "b"))


def test_answers_are_found_by_their_indexed_label_namespace_and_owner() -> None:
    store = Store("configmaps", index_labels=("db",))
    store.replace([], resource_version="10")
    cache = StoreSet({None: store})
    for i, db in enumerate(("a", "a", "b")):
        cache.remember(named(f"cm-{i}", str(11 + i), db, owner=f"uid-{db}"))
    assert [o["metadata"]["name"] for o in cache.list("ns", {"db": "a"})] == ["cm-0", "cm-1"]
    assert [o["metadata"]["name"] for o in cache.list("ns", {"db": "b", "app": "x"})] == ["cm-2"]
    assert cache.list("ns", {"db": "b", "app": "y"}) == []  # the rest of the selector still applies
    assert [o["metadata"]["name"] for o in cache.list("ns", {"app": "x"})] == ["cm-0", "cm-1", "cm-2"]
    assert cache.list("elsewhere", {"db": "a"}) == [] and cache.list("elsewhere") == []
    assert [o["metadata"]["name"] for o in cache.by_owner("uid-b")] == ["cm-2"]
    cache.forget(ObjectRef("ns", "cm-0"))
    assert [o["metadata"]["name"] for o in cache.list("ns", {"db": "a"})] == ["cm-1"]
    assert [o["metadata"]["name"] for o in cache.by_owner("uid-a")] == ["cm-1"]


def test_an_answer_stays_readable_after_many_other_objects_went_through_the_store() -> None:
    """Answers are held packed, as the store's objects: read back whole after the store's decoded
    window (runtime/store.RECENT) has moved on."""
    store, cache = storeset()
    cache.remember(cm("11", "mine"))
    for i in range(300):
        store.upsert(named(f"x-{i}", "5", "z"))
        store.get(ObjectRef("ns", f"x-{i}"))
    assert cache.get(REF) == cm("11", "mine")


def test_refs_of_a_namespace_or_of_all_hold_the_cached_and_the_remembered_objects_only() -> None:
    store, cache = storeset()
    store.upsert({**cm("5"), "metadata": {**cm("5")["metadata"], "name": "cached"}})
    store.upsert({**cm("6"), "metadata": {**cm("6")["metadata"], "namespace": "other"}})
    cache.remember(cm("11"))  # created by this process, not in the cache yet
    assert cache.refs("ns") == {ObjectRef("ns", "cached"), REF}
    assert cache.refs("other") == {ObjectRef("other", "cm")}
    assert cache.refs("none") == set()
    assert cache.refs() == {ObjectRef("ns", "cached"), REF, ObjectRef("other", "cm")}  # every namespace's


def test_each_is_the_caches_view_of_every_store_without_the_answers_it_has_not_shown_yet() -> None:
    one, two = Store("configmaps"), Store("configmaps")
    one.upsert(cm("11"))
    other = cm("12")
    other["metadata"]["namespace"] = "other"
    two.upsert(other)
    cache = StoreSet({"ns": one, "other": two}, ttl=30.0, now=Clock())
    cache.remember(cm("13", "newer"))  # a read-back answer the watch has not delivered yet
    assert [(o["metadata"]["namespace"], o["data"]["k"]) for o in cache.each()] == [("ns", "v"), ("other", "v")]
    assert cache.get(REF)["data"] == {"k": "newer"}  # type: ignore[index]
    assert [o["metadata"]["namespace"] for o in cache.each(lambda ref: ref.namespace == "other")] == ["other"]
