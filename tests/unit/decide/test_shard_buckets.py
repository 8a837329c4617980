"""The buckets of the shard-filtered caches: a child's bucket label names exactly its database's shard, for
every shard count that divides the buckets; drift ignores a child's missing label, and a StatefulSet whose pod
template was made without it keeps it so (its pods would restart)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs
from tests.unit.decide.test_desired_and_plan import make_db

from sampledb_operator.decide import plan
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.labels import bucket_of_child
from sampledb_operator.decide.sharding import (
    BUCKET_LABEL,
    BUCKETS,
    SHARED_BUCKET,
    bucket_of,
    bucket_selector,
    buckets_of,
    filterable,
    shard_of,
)

DIVISORS = [s for s in range(1, BUCKETS + 1) if BUCKETS % s == 0]
names = hs.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)


@given(namespace=names, name=names, shards=hs.sampled_from(DIVISORS))
def test_a_databases_bucket_lies_in_the_buckets_of_its_shard_and_no_other(namespace: str, name: str,
                                                                            shards: int) -> None:
    bucket = str(bucket_of(namespace, name))
    shard = shard_of(namespace, name, shards)
    assert bucket in buckets_of({shard}, shards)
    assert all(bucket not in buckets_of({s}, shards) for s in range(shards) if s != shard)


def test_the_buckets_of_all_shards_partition_the_buckets_and_each_set_names_the_shared_one() -> None:
    for shards in DIVISORS:
        per_shard = [set(buckets_of({s}, shards)) - {SHARED_BUCKET} for s in range(shards)]
        assert sum(len(b) for b in per_shard) == BUCKETS
        assert set().union(*per_shard) == {str(b) for b in range(BUCKETS)}
        assert all(SHARED_BUCKET in buckets_of({s}, shards) for s in range(shards))


def test_only_shard_counts_dividing_the_buckets_filter() -> None:
    assert [s for s in range(1, 61) if filterable(s)] == DIVISORS
    with pytest.raises(ValueError):
        buckets_of({0}, 7)


def test_the_selector_narrows_the_base_to_the_shards_buckets() -> None:
    assert bucket_selector("m=x", [1], 20) == f"m=x,{BUCKET_LABEL} in (shared,1,21,41)"
    assert bucket_selector("m=x", [], 20) == f"m=x,{BUCKET_LABEL} in (shared)"


def test_every_child_and_the_pod_template_carry_their_databases_bucket() -> None:
    db = make_db("orders", "shop")
    want = str(bucket_of("shop", "orders"))
    for child in (d.secret(db, "pw"), d.configmap(db), d.data_pvc(db), d.backup_pvc(db), d.headless_service(db),
                  d.client_service(db), d.statefulset(db)):
        assert child["metadata"]["labels"][BUCKET_LABEL] == want, child["kind"]
        assert bucket_of_child(child) == want
    assert d.statefulset(db)["spec"]["template"]["metadata"]["labels"][BUCKET_LABEL] == want
    scripts = d.scripts_configmap(d.Inputs(db=db, scripts={"a.sh": "x"}))
    assert scripts["metadata"]["labels"][BUCKET_LABEL] == SHARED_BUCKET == bucket_of_child(scripts)


def test_a_child_without_the_bucket_label_does_not_drift_for_it() -> None:
    db = make_db()
    for child in (d.data_pvc(db), d.client_service(db)):
        live = copy.deepcopy(child)
        del live["metadata"]["labels"][BUCKET_LABEL]
        assert plan.drift(child, live) is None
        live["metadata"]["labels"]["sampledb.io/database"] = "other"
        assert plan.drift(child, live) is not None  # the other labels still count


def _template_labels(sts: dict[str, Any]) -> dict[str, str]:
    return dict(sts["spec"]["template"]["metadata"]["labels"])


def test_a_statefulset_whose_template_lacks_the_label_is_never_given_it() -> None:
    db = make_db("orders", "shop")
    wanted = d.statefulset(db)
    old = copy.deepcopy(wanted)  # made by a version before the label: neither the template nor the object has it
    del old["spec"]["template"]["metadata"]["labels"][BUCKET_LABEL]
    del old["metadata"]["labels"][BUCKET_LABEL]
    key = ("StatefulSet", wanted["metadata"]["name"])
    assert plan.plan([wanted], {key: old}) == []  # no drift for the label (a template change restarts the pods)
    edited = d.statefulset(db, replicas=0)  # another change (fencing): applied, but the template stays as it was
    [action] = plan.plan([edited], {key: old})
    assert action.obj["spec"]["replicas"] == 0
    assert BUCKET_LABEL not in _template_labels(action.obj)
    assert _template_labels(action.obj) == _template_labels(old)
    assert action.obj["metadata"]["labels"][BUCKET_LABEL] == str(bucket_of("shop", "orders"))  # the object's own
    assert BUCKET_LABEL in _template_labels(edited)  # the desired object itself is not changed


def test_a_statefulset_made_with_the_label_keeps_it_in_its_template() -> None:
    db = make_db("orders", "shop")
    have = d.statefulset(db)
    key = ("StatefulSet", have["metadata"]["name"])
    [action] = plan.plan([d.statefulset(db, replicas=0)], {key: have})
    assert _template_labels(action.obj)[BUCKET_LABEL] == str(bucket_of("shop", "orders"))
    [created] = plan.plan([d.statefulset(db)], {})
    assert BUCKET_LABEL in _template_labels(created.obj)
