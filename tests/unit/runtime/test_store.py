"""Store: lookups, owner index, atomic replace and its diff, metrics."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.observability.metrics import REGISTRY
from sampledb_operator.runtime.packing import Packer
from sampledb_operator.runtime.store import RECENT, Store


def obj(
    name: str, rv: str = "1", ns: str = "ns", owners: tuple[str, ...] = (), **labels: str
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv, "labels": labels}
    if owners:
        meta["ownerReferences"] = [{"uid": uid, "kind": "SampleDB", "name": uid} for uid in owners]
    return {"metadata": meta}


def test_get_list_by_namespace_and_label_selector() -> None:
    store = Store("pods")
    for item in (obj("a", app="db", role="primary"), obj("b", app="db"), obj("c", ns="other", app="db")):
        store.upsert(item)
    assert store.get(ObjectRef("ns", "a")) is not None
    assert store.get(ObjectRef("ns", "zz")) is None
    assert {o["metadata"]["name"] for o in store.list("ns")} == {"a", "b"}
    assert {o["metadata"]["name"] for o in store.list(label_selector={"app": "db"})} == {"a", "b", "c"}
    assert [o["metadata"]["name"] for o in store.list("ns", {"role": "primary"})] == ["a"]
    assert store.list("ns", {"app": "web"}) == []


def test_upsert_returns_what_is_held_delete_the_previous_object_and_both_keep_the_owner_index() -> None:
    store = Store("configmaps")
    assert store.upsert(obj("a", "1", owners=("u1",))) == obj("a", "1", owners=("u1",))
    assert [o["metadata"]["name"] for o in store.by_owner("u1")] == ["a"]
    assert store.version_of(ObjectRef("ns", "a")) == "1"
    store.upsert(obj("a", "2", owners=("u2",)))
    assert store.version_of(ObjectRef("ns", "a")) == "2"
    assert store.version_of(ObjectRef("ns", "zz")) is None
    assert store.by_owner("u1") == []
    assert [o["metadata"]["resourceVersion"] for o in store.by_owner("u2")] == ["2"]
    deleted = store.delete(ObjectRef("ns", "a"))
    assert deleted is not None and deleted["metadata"]["resourceVersion"] == "2"
    assert store.by_owner("u2") == []
    assert store.delete(ObjectRef("ns", "a")) is None


def test_replace_reports_vanished_as_deleted_changed_as_modified_new_as_added() -> None:
    store = Store("statefulsets")
    store.replace([obj("keep", "1"), obj("change", "1"), obj("vanish", "1")], resource_version="10")
    events = store.replace([obj("keep", "1"), obj("change", "2"), obj("new", "3")], resource_version="20")
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("DELETED", "vanish"), ("MODIFIED", "change"),
                                                               ("ADDED", "new")]
    assert events[0][1]["metadata"]["resourceVersion"] == "1"  # the last known state of the deleted object
    assert sorted(str(ref) for ref in store.refs()) == ["ns/change", "ns/keep", "ns/new"]
    assert store.resource_version == "20"


def test_synced_is_set_by_replace_not_by_upserts() -> None:
    store = Store("jobs")
    store.upsert(obj("a"))
    assert not store.synced.is_set()
    assert store.replace([]) == [("DELETED", obj("a"))]
    assert store.synced.is_set()


def test_cache_objects_gauge_follows_the_size() -> None:
    store = Store("secrets-gauge-test")

    def gauge() -> float | None:
        return REGISTRY.get_sample_value("sampledb_cache_objects", {"resource": "secrets-gauge-test"})

    assert gauge() == 0
    store.replace([obj("a"), obj("b")])
    assert gauge() == 2
    store.delete(ObjectRef("ns", "a"))
    assert gauge() == 1 == len(store)
    store.upsert(obj("c"))
    assert gauge() == 2


def test_cache_objects_gauge_sums_the_stores_of_every_watched_namespace() -> None:
    """Issue #11, item 13a: with --namespaces, one store per namespace shares the series; it read the size
    of whichever store changed last (1 with 6 objects cached)."""
    stores = {ns: Store("configmaps-namespaces-test") for ns in ("a", "b", "c")}

    def gauge() -> float | None:
        return REGISTRY.get_sample_value("sampledb_cache_objects", {"resource": "configmaps-namespaces-test"})

    stores["a"].replace([obj("x", ns="a"), obj("y", ns="a"), obj("z", ns="a")])
    stores["b"].replace([obj("x", ns="b"), obj("y", ns="b")])
    stores["c"].replace([obj("x", ns="c")])
    assert gauge() == 6
    stores["c"].delete(ObjectRef("c", "x"))
    stores["b"].upsert(obj("x", ns="b"))  # a modification, not a new object
    assert gauge() == 5
    stores["a"].replace([obj("x", ns="a")])
    assert gauge() == 3 == sum(len(s) for s in stores.values())


names = st.sampled_from("abcdefgh")
owner_sets = st.sets(st.sampled_from(["u1", "u2", "u3"]))
snapshots = st.dictionaries(names, st.tuples(st.sampled_from("123"), owner_sets), max_size=8)


def _objects(snapshot: dict[str, tuple[str, set[str]]]) -> list[dict[str, Any]]:
    return [obj(name, rv, owners=tuple(sorted(owners))) for name, (rv, owners) in snapshot.items()]


@given(before=snapshots, after=snapshots)
def test_replace_diff_equals_the_set_difference_and_index_matches_a_scan(
    before: dict[str, tuple[str, set[str]]], after: dict[str, tuple[str, set[str]]]
) -> None:
    store = Store("property")
    store.replace(_objects(before))
    events = store.replace(_objects(after))
    by_type: dict[str, set[str]] = {"ADDED": set(), "MODIFIED": set(), "DELETED": set()}
    for type_, item in events:
        by_type[type_].add(item["metadata"]["name"])
    assert by_type["DELETED"] == before.keys() - after.keys()
    assert by_type["ADDED"] == after.keys() - before.keys()
    assert by_type["MODIFIED"] == {n for n in before.keys() & after.keys() if before[n][0] != after[n][0]}
    assert len(events) == sum(len(v) for v in by_type.values())
    assert {r.name for r in store.refs()} == set(after)
    for uid in ("u1", "u2", "u3"):
        expected = {n for n, (_, owners) in after.items() if uid in owners}
        assert {o["metadata"]["name"] for o in store.by_owner(uid)} == expected


@given(st.lists(st.tuples(st.booleans(), names, st.sets(st.sampled_from(["u1", "u2"]))), max_size=30))
def test_owner_index_stays_equal_to_a_scan_through_upserts_and_deletes(
    steps: list[tuple[bool, str, set[str]]]
) -> None:
    store = Store("property-steps")
    for is_upsert, name, owners in steps:
        if is_upsert:
            store.upsert(obj(name, owners=tuple(sorted(owners))))
        else:
            store.delete(ObjectRef("ns", name))
    for uid in ("u1", "u2"):
        scanned = {o["metadata"]["name"] for o in store.list()
                   if uid in {r["uid"] for r in o["metadata"].get("ownerReferences", [])}}
        assert {o["metadata"]["name"] for o in store.by_owner(uid)} == scanned


def test_a_transform_applies_to_every_object_held_and_to_the_events_of_replace() -> None:
    def slim(o: dict[str, Any]) -> dict[str, Any]:
        return {**o, "data": None} if "data" in o else o

    store = Store("configmaps", transform=slim)
    store.upsert({**obj("a"), "data": {"big": "x" * 1000}})
    held = store.get(ObjectRef("ns", "a"))
    assert held is not None and held["data"] is None
    events = store.replace([{**obj("a", "2"), "data": {"k": "v"}}, {**obj("b"), "data": {"k": "v"}}])
    assert [(t, o["data"]) for t, o in events] == [("MODIFIED", None), ("ADDED", None)]
    assert all(o["data"] is None for o in store.list())


def test_a_list_by_an_indexed_label_matches_a_full_scan_through_every_change() -> None:
    indexed = Store("pvcs", index_labels=("db",))
    plain = Store("pvcs")

    def obj(name: str, db: str, ns: str = "ns", **extra: str) -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": ns, "labels": {"db": db, **extra}}}

    def same(selector: dict[str, str], namespace: str | None = "ns") -> None:
        got = indexed.list(namespace, selector)
        assert sorted(map(str, map(ObjectRef.of, got))) == sorted(map(str, map(ObjectRef.of, plain.list(namespace,
                                                                                                         selector))))

    for store in (indexed, plain):
        store.replace([obj("a", "one"), obj("b", "two"), obj("c", "one", role="x"), obj("d", "one", ns="other")])
    same({"db": "one"})
    same({"db": "one"}, None)
    same({"db": "one", "role": "x"})
    for store in (indexed, plain):
        store.upsert(obj("a", "two"))  # relabelled: leaves the index entry of "one"
        store.delete(ObjectRef("ns", "c"))
        store.upsert(obj("e", "one"))
    same({"db": "one"})
    same({"db": "two"})
    same({"db": "three"})
    assert [o["metadata"]["name"] for o in indexed.list("ns", {"db": "two"})] == ["a", "b"]


def test_recent_objects_are_read_without_decoding_and_a_change_is_seen_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store("pods", index_labels=("app",))
    decoded: list[bytes] = []
    unpack = Packer.unpack
    monkeypatch.setattr(Packer, "unpack", lambda self, data: decoded.append(data) or unpack(self, data))
    for i in range(RECENT + 10):
        store.upsert(obj(f"p{i}", app="db"))
    assert store.get(ObjectRef("ns", f"p{RECENT + 9}")) == obj(f"p{RECENT + 9}", app="db")
    assert decoded == []  # just written: held decoded
    assert store.get(ObjectRef("ns", "p0")) == obj("p0", app="db")  # fell out of the window: decoded once
    assert store.get(ObjectRef("ns", "p0")) is not None
    assert len(decoded) == 1
    store.upsert(obj("p0", "2", app="db"))
    got = store.get(ObjectRef("ns", "p0"))
    assert got is not None and got["metadata"]["resourceVersion"] == "2"
    assert len(store._recent) == RECENT


@given(st.lists(st.tuples(st.booleans(), names, st.sampled_from(["one", "two"])), max_size=30))
def test_label_index_stays_equal_to_a_scan_through_upserts_and_deletes(steps: list[tuple[bool, str, str]]) -> None:
    store = Store("property-labels", index_labels=("db",))
    for is_upsert, name, db in steps:
        if is_upsert:
            store.upsert(obj(name, db=db))
        else:
            store.delete(ObjectRef("ns", name))
    for db in ("one", "two", "three"):
        scanned = {o["metadata"]["name"] for o in store.list() if o["metadata"]["labels"].get("db") == db}
        assert {o["metadata"]["name"] for o in store.list("ns", {"db": db})} == scanned


def test_the_objects_of_one_database_share_one_copy_of_its_label_value_and_owner_uid() -> None:
    store = Store("pvcs", index_labels=("db",))

    def entry(name: str) -> Any:
        # strings built at run time, as a decoded watch event's are: equal, not identical
        return store.pack(obj(name, owners=("".join(["uid-", "7"]),), db="".join(["db-", "7"]))).entry

    first, second = entry("data-0"), entry("data-1")
    assert first.indexed == second.indexed == (("db", "db-7"),)
    assert first.indexed[0][1] is second.indexed[0][1]
    assert first.owners[0] is second.owners[0]
    assert ObjectRef.of(obj("a", ns="".join(["n", "s"]))).namespace is ObjectRef.of(obj("b", ns="ns")).namespace


def test_each_walks_every_object_decoding_one_at_a_time_without_touching_the_recent_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store("sampledbs")
    for i in range(RECENT + 5):
        store.upsert(obj(f"d{i:03d}"))
    decoded: list[bytes] = []
    unpack = Packer.unpack
    monkeypatch.setattr(Packer, "unpack", lambda self, data: decoded.append(data) or unpack(self, data))
    walk = store.each()
    assert decoded == []  # nothing decoded before the caller asks
    first = next(walk)
    assert first == obj("d000") and len(decoded) == 1  # outside the window: decoded for this step only
    store.delete(ObjectRef("ns", "d001"))  # removed during the walk: skipped
    window, decoded[:] = list(store._recent), []  # (delete decodes the object it returns into the window)
    rest = list(walk)
    assert [o["metadata"]["name"] for o in rest] == [f"d{i:03d}" for i in range(2, RECENT + 5)]
    assert len(decoded) == 4  # d002..d005 had left the window; the rest came from it
    assert list(store._recent) == window  # read, not reordered or refilled
    assert [o["metadata"]["name"] for o in store.each(lambda ref: ref.name.endswith("7"))] == \
        [f"d{i:03d}" for i in range(2, RECENT + 5) if str(i).endswith("7")]
