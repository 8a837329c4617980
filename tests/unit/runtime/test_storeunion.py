"""runtime/storeunion.py: StoreUnion, one SampleDB cache over two watches (the shards' buckets and the SampleDBs
without a bucket), and `newest`.

A ref in both sets (its label just changed) is read once, its newest copy; every read merges both sets; an own
write is read back from the set whose watch will deliver it (and only there); forget drops both sets' answers.
"""

from __future__ import annotations

from sampledb_operator.decide.sharding import BUCKET_LABEL
from sampledb_operator.model.objects import Obj
from sampledb_operator.model.refs import ObjectRef
from sampledb_operator.runtime.clock import FakeClock
from sampledb_operator.runtime.store import Store
from sampledb_operator.runtime.storeset import StoreSet
from sampledb_operator.runtime.storeunion import StoreUnion, newest
from sampledb_operator.sharded import bucketed

TTL = 30.0
REF = ObjectRef("ns", "orders")


def db(name: str, rv: str, *, bucket: str | None = None, ns: str = "ns", app: str = "x",
       side: str | None = None) -> Obj:
    labels = {"app": app}
    if bucket is not None:
        labels[BUCKET_LABEL] = bucket
    if side is not None:
        labels["side"] = side
    return {"kind": "SampleDB", "metadata": {"name": name, "namespace": ns, "resourceVersion": rv, "labels": labels}}


def union(clock: FakeClock | None = None, *, by_side: bool = False) -> tuple[Store, Store, StoreUnion]:
    """The bucketed stores' set (`mine`) merged with the unbucketed ones' (`theirs`); routed by the bucket label
    (sharded.bucketed) or, `by_side`, by a plain label."""
    clock = clock or FakeClock()
    mine, theirs = Store("sampledbs"), Store("sampledbs")
    mine.replace([], resource_version="10")
    theirs.replace([], resource_version="10")
    others = StoreSet({None: theirs}, ttl=TTL, now=clock.monotonic)
    routes_here = (lambda o: (o["metadata"].get("labels") or {}).get("side") == "mine") if by_side else bucketed
    return mine, theirs, StoreUnion({None: mine}, others, routes_here=routes_here, ttl=TTL, now=clock.monotonic)


def versions(objs: list[Obj]) -> list[tuple[str, str, str]]:
    return sorted((o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in objs)


def rv(obj: Obj | None) -> str | None:
    return obj["metadata"]["resourceVersion"] if obj is not None else None


def test_newest_keeps_each_ref_once_its_highest_version_in_first_seen_order() -> None:
    found = newest([db("a", "5"), db("b", "9")], [db("c", "1"), db("a", "7"), db("b", "3")])
    assert [(o["metadata"]["name"], rv(o)) for o in found] == [("a", "7"), ("b", "9"), ("c", "1")]
    # a version that is not an integer loses to any integer one
    assert [rv(o) for o in newest([db("a", "opaque")], [db("a", "2")])] == ["2"]
    assert newest([], []) == []


def test_get_shows_the_copy_with_the_higher_resource_version_whichever_set_has_it() -> None:
    mine, theirs, cache = union()
    mine.upsert(db("orders", "12", bucket="7"))
    theirs.upsert(db("orders", "11"))  # the unbucketed watch has not sent its DELETED yet
    assert rv(cache.get(REF)) == "12"
    mine.upsert(db("orders", "12", bucket="7"))
    theirs.upsert(db("orders", "15"))  # the label was removed: the unbucketed watch's copy is newer
    assert rv(cache.get(REF)) == "15"
    assert cache.get(REF)["metadata"]["labels"] == {"app": "x"}  # type: ignore[index]


def test_get_finds_an_object_in_either_set_alone() -> None:
    mine, theirs, cache = union()
    mine.upsert(db("bucketed", "5", bucket="3"))
    theirs.upsert(db("stray", "6"))
    assert rv(cache.get(ObjectRef("ns", "bucketed"))) == "5"
    assert rv(cache.get(ObjectRef("ns", "stray"))) == "6"
    assert cache.get(ObjectRef("ns", "missing")) is None
    assert cache.get(ObjectRef("elsewhere", "bucketed")) is None


def test_list_shows_each_ref_once_its_newest_copy_within_the_namespace_and_selector() -> None:
    mine, theirs, cache = union()
    mine.upsert(db("orders", "12", bucket="7"))
    theirs.upsert(db("orders", "8"))
    mine.upsert(db("bucketed", "5", bucket="3", app="y"))
    theirs.upsert(db("stray", "6"))
    theirs.upsert(db("stray", "9", ns="other"))
    assert versions(cache.list("ns")) == [("ns", "bucketed", "5"), ("ns", "orders", "12"), ("ns", "stray", "6")]
    assert versions(cache.list()) == [("ns", "bucketed", "5"), ("ns", "orders", "12"), ("ns", "stray", "6"),
                                      ("other", "stray", "9")]
    assert versions(cache.list("other")) == [("other", "stray", "9")]
    assert versions(cache.list("ns", {"app": "x"})) == [("ns", "orders", "12"), ("ns", "stray", "6")]
    assert versions(cache.list(None, {"app": "y"})) == [("ns", "bucketed", "5")]
    assert cache.list("ns", {"app": "z"}) == [] and cache.list("none") == []


def test_each_yields_every_ref_once_and_applies_keep() -> None:
    mine, theirs, cache = union()
    mine.upsert(db("orders", "12", bucket="7"))
    theirs.upsert(db("orders", "8"))
    mine.upsert(db("bucketed", "5", bucket="3"))
    theirs.upsert(db("stray", "6"))
    walked = list(cache.each())
    assert sorted(o["metadata"]["name"] for o in walked) == ["bucketed", "orders", "stray"]
    assert rv(next(o for o in walked if o["metadata"]["name"] == "orders")) == "12"  # the first set's copy
    kept = list(cache.each(lambda ref: ref.name != "stray"))
    assert sorted(o["metadata"]["name"] for o in kept) == ["bucketed", "orders"]
    assert [o["metadata"]["name"] for o in cache.each(lambda ref: ref.name == "stray")] == ["stray"]
    assert list(cache.each(lambda ref: False)) == []


def test_refs_are_the_union_of_both_sets_and_their_remembered_answers() -> None:
    mine, theirs, cache = union()
    mine.upsert(db("orders", "12", bucket="7"))
    theirs.upsert(db("orders", "8"))
    theirs.upsert(db("stray", "6"))
    theirs.upsert(db("stray", "9", ns="other"))
    cache.remember(db("new", "20"))  # created, unbucketed: remembered by the other set
    cache.remember(db("new-bucketed", "21", bucket="4"))
    assert cache.refs("ns") == {REF, ObjectRef("ns", "stray"), ObjectRef("ns", "new"), ObjectRef("ns", "new-bucketed")}
    assert cache.refs("other") == {ObjectRef("other", "stray")}
    assert cache.refs("none") == set()
    assert cache.refs() == cache.refs("ns") | cache.refs("other")  # every namespace's


def test_len_counts_each_cached_ref_once() -> None:
    mine, theirs, cache = union()
    assert len(cache) == 0
    mine.upsert(db("orders", "12", bucket="7"))
    theirs.upsert(db("orders", "8"))
    assert len(cache) == 1
    theirs.upsert(db("stray", "6"))
    mine.upsert(db("bucketed", "5", bucket="3"))
    assert len(cache) == 3


def test_a_remembered_answer_is_read_back_before_either_store_has_it() -> None:
    _mine, _theirs, cache = union()
    cache.remember(db("orders", "11"))
    assert rv(cache.get(REF)) == "11"
    assert versions(cache.list("ns")) == [("ns", "orders", "11")]
    cache.remember(db("other", "12", bucket="5"))
    assert rv(cache.get(ObjectRef("ns", "other"))) == "12"
    assert versions(cache.list("ns")) == [("ns", "orders", "11"), ("ns", "other", "12")]


def test_an_answer_is_kept_by_the_set_whose_selector_matches_it() -> None:
    _mine, _theirs, cache = union()
    cache.remember(db("stray", "11"))
    assert rv(cache.others.get(ObjectRef("ns", "stray"))) == "11"
    assert StoreSet.get(cache, ObjectRef("ns", "stray")) is None  # not in the first set
    cache.remember(db("orders", "12", bucket="7"))
    assert rv(StoreSet.get(cache, REF)) == "12"
    assert cache.others.get(REF) is None


def test_routes_here_decides_the_set_with_any_predicate() -> None:
    _mine, _theirs, cache = union(by_side=True)
    cache.remember(db("orders", "11", side="mine"))
    assert rv(StoreSet.get(cache, REF)) == "11" and cache.others.get(REF) is None
    cache.remember(db("orders", "12", side="theirs"))
    assert StoreSet.get(cache, REF) is None and rv(cache.others.get(REF)) == "12"
    assert rv(cache.get(REF)) == "12"


def test_a_newer_labelled_answer_moves_the_remembered_copy_out_of_the_other_set() -> None:
    _mine, theirs, cache = union()
    theirs.upsert(db("orders", "8"))  # cached unbucketed
    cache.remember(db("orders", "11"))  # an own write before the label
    assert cache.is_own_write(db("orders", "11"))
    cache.remember(db("orders", "12", bucket="7"))  # the pass that labels it
    assert rv(cache.get(REF)) == "12"
    assert cache.get(REF)["metadata"]["labels"][BUCKET_LABEL] == "7"  # type: ignore[index]
    assert rv(cache.others.get(REF)) == "8"  # the other set's store only, its answer dropped
    assert not cache.others.is_own_write(db("orders", "11"))
    assert not cache.is_own_write(db("orders", "11"))
    assert cache.is_own_write(db("orders", "12", bucket="7"))


def test_an_unlabelled_answer_moves_the_remembered_copy_out_of_the_first_set() -> None:
    _mine, _theirs, cache = union()
    cache.remember(db("orders", "11", bucket="7"))
    cache.remember(db("orders", "12"))  # its label removed by this process
    assert not StoreSet.is_own_write(cache, db("orders", "11", bucket="7"))
    assert StoreSet.get(cache, REF) is None
    assert rv(cache.get(REF)) == "12"


def test_is_own_write_holds_for_the_remembered_version_in_either_set_only() -> None:
    _mine, _theirs, cache = union()
    cache.remember(db("stray", "11"))
    cache.remember(db("orders", "12", bucket="7"))
    assert cache.is_own_write(db("stray", "11"))
    assert cache.is_own_write(db("orders", "12", bucket="7"))
    assert not cache.is_own_write(db("stray", "13"))  # someone's later change is news
    assert not cache.is_own_write(db("orders", "11", bucket="7"))
    assert not cache.is_own_write(db("unknown", "11"))


def test_forget_drops_the_answers_of_both_sets() -> None:
    _mine, _theirs, cache = union()
    cache.remember(db("orders", "12", bucket="7"))
    cache.others.remember(db("orders", "11"))  # both sets remember the ref (as a label change may leave them)
    assert cache.is_own_write(db("orders", "11")) and cache.is_own_write(db("orders", "12", bucket="7"))
    cache.forget(REF)
    assert cache.get(REF) is None
    assert not cache.is_own_write(db("orders", "11")) and not cache.is_own_write(db("orders", "12", bucket="7"))
    assert cache.refs("ns") == set()


def test_answers_expire_after_the_ttl_in_either_set() -> None:
    clock = FakeClock()
    _mine, _theirs, cache = union(clock)
    cache.remember(db("stray", "11"))
    cache.remember(db("orders", "12", bucket="7"))
    clock.advance(TTL - 1)
    assert rv(cache.get(REF)) == "12" and rv(cache.get(ObjectRef("ns", "stray"))) == "11"
    clock.advance(2)
    assert cache.get(REF) is None and cache.get(ObjectRef("ns", "stray")) is None
    assert cache.list("ns") == []


def test_the_stores_catching_up_hide_the_answers() -> None:
    mine, theirs, cache = union()
    cache.remember(db("orders", "12", bucket="7"))
    mine.upsert(db("orders", "14", bucket="7", app="changed"))  # the watch delivered it and a later change
    theirs.upsert(db("orders", "8"))  # and the unbucketed watch still has the copy from before the label
    assert cache.get(REF)["metadata"]["labels"]["app"] == "changed"  # type: ignore[index]
    assert versions(cache.list("ns")) == [("ns", "orders", "14")]


def test_a_list_by_label_matches_the_newest_copy_not_an_older_one_that_still_matches() -> None:
    _, theirs, cache = union()
    theirs.upsert(db("orders", "5", app="x"))  # the unbucketed watch's copy, before the write below
    cache.remember(db("orders", "12", bucket="7", app="y"))  # the own write: labelled, no longer app=x
    assert rv(cache.get(REF)) == "12"
    assert cache.list("ns", {"app": "x"}) == []
    assert versions(cache.list("ns", {"app": "y"})) == [("ns", "orders", "12")]
