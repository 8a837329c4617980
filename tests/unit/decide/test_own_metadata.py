"""decide/lifecycle/lifecycle.own_metadata: what a live SampleDB's metadata lacks of the operator's own (the finalizer,
not on a paused database, and for sharded replicas its bucket label, put right when wrong); and decide/sharding's bucket
values and selectors for SampleDBs (is_bucket, unbucketed_selector, bucket_selector without a base)."""

from __future__ import annotations

import pytest

from sampledb_operator.decide.lifecycle.lifecycle import FINALIZER, own_metadata
from sampledb_operator.decide.sharding import (
    BUCKET_LABEL,
    BUCKETS,
    bucket_of,
    bucket_selector,
    is_bucket,
    unbucketed_selector,
)

NS, NAME = "shop", "orders"
OWN = str(bucket_of(NS, NAME))
OTHER = str((int(OWN) + 1) % BUCKETS)  # a valid bucket, not this database's
ALL_BUCKETS = ",".join(str(b) for b in range(BUCKETS))


def test_a_new_sampledb_gets_the_finalizer_and_its_bucket_label() -> None:
    assert own_metadata(NS, NAME, [], {}, paused=False, bucket=True) == {"finalizers": [FINALIZER],
                                                                          "labels": {BUCKET_LABEL: OWN}}


def test_the_label_is_the_databases_own_bucket() -> None:
    for namespace, name in (("a", "x"), ("b", "x"), ("a", "y"), ("team-1", "orders-db")):
        labels = own_metadata(namespace, name, [FINALIZER], {}, paused=False, bucket=True)["labels"]
        assert labels == {BUCKET_LABEL: str(bucket_of(namespace, name))}


def test_a_paused_sampledb_gets_the_label_only() -> None:
    assert own_metadata(NS, NAME, [], {}, paused=True, bucket=True) == {"labels": {BUCKET_LABEL: OWN}}
    assert own_metadata(NS, NAME, ["other"], {BUCKET_LABEL: OWN}, paused=True, bucket=True) == {}


def test_a_sampledb_with_both_needs_nothing() -> None:
    assert own_metadata(NS, NAME, [FINALIZER], {BUCKET_LABEL: OWN, "team": "x"}, paused=False, bucket=True) == {}
    assert own_metadata(NS, NAME, ["keep", FINALIZER], {BUCKET_LABEL: OWN}, paused=True, bucket=True) == {}


@pytest.mark.parametrize("wrong", [OTHER, "garbage", "", "shared", f"0{OWN}"])
def test_a_wrong_label_is_replaced_and_nothing_else(wrong: str) -> None:
    assert own_metadata(NS, NAME, [FINALIZER], {BUCKET_LABEL: wrong, "team": "x"}, paused=False, bucket=True) == {
        "labels": {BUCKET_LABEL: OWN}}


def test_one_operator_not_sharded_adds_the_finalizer_only() -> None:
    # the label is for sharded replicas' filtered caches: one operator neither adds nor corrects it
    assert own_metadata(NS, NAME, [], {}, paused=False, bucket=False) == {"finalizers": [FINALIZER]}
    assert own_metadata(NS, NAME, [FINALIZER], {}, paused=False, bucket=False) == {}
    assert own_metadata(NS, NAME, [FINALIZER], {BUCKET_LABEL: OTHER}, paused=False, bucket=False) == {}
    assert own_metadata(NS, NAME, [], {}, paused=True, bucket=False) == {}


def test_the_existing_finalizers_are_kept_before_the_operators() -> None:
    finalizers = ["example.com/hold", "kubernetes.io/other"]
    patch = own_metadata(NS, NAME, finalizers, {BUCKET_LABEL: OWN}, paused=False, bucket=True)
    assert patch == {"finalizers": ["example.com/hold", "kubernetes.io/other", FINALIZER]}
    assert finalizers == ["example.com/hold", "kubernetes.io/other"]  # the argument is not changed


@pytest.mark.parametrize("value", ["0", "7", "59", str(BUCKETS - 1)])
def test_is_bucket_accepts_the_values_bucket_of_gives(value: str) -> None:
    assert is_bucket(value)


@pytest.mark.parametrize("value", ["60", "-1", "07", "00", "x", "", " 1", "1.0", "shared", None])
def test_is_bucket_refuses_every_other_value(value: str | None) -> None:
    assert not is_bucket(value)


def test_every_bucket_of_is_a_bucket() -> None:
    assert all(is_bucket(str(bucket_of("ns", f"db-{i}"))) for i in range(200))


def test_unbucketed_selector_without_a_base_is_the_notin_term_of_every_bucket() -> None:
    assert unbucketed_selector() == f"{BUCKET_LABEL} notin ({ALL_BUCKETS})"
    assert unbucketed_selector(None) == unbucketed_selector("") == unbucketed_selector()
    assert ALL_BUCKETS.split(",") == [str(b) for b in range(60)]


def test_unbucketed_selector_narrows_a_base() -> None:
    assert unbucketed_selector("app=x,tier in (a,b)") == f"app=x,tier in (a,b),{BUCKET_LABEL} notin ({ALL_BUCKETS})"


@pytest.mark.parametrize("base", [None, ""])
def test_bucket_selector_without_a_base_has_no_leading_comma(base: str | None) -> None:
    assert bucket_selector(base, [1], 6) == f"{BUCKET_LABEL} in (shared,1,7,13,19,25,31,37,43,49,55)"
    assert bucket_selector(base, [], 6) == f"{BUCKET_LABEL} in (shared)"


def test_bucket_selector_with_a_base_keeps_it_first() -> None:
    assert bucket_selector("app=x", [0], 30) == f"app=x,{BUCKET_LABEL} in (shared,0,30)"
