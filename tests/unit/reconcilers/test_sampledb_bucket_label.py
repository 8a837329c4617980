"""The SampleDB's own metadata on the fake cluster (reconcilers/sampledb.py with lifecycle.own_metadata). A sharded
replica: the first pass of a new SampleDB writes the finalizer and its bucket label in one patch; a wrong bucket label
is put right by the next pass, the user's other labels and finalizers kept; a paused SampleDB gets the label only.
One operator (not sharded): the finalizer only, and nothing at all for a SampleDB created with it (manifests/
admission's policy adds it at creation)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.support.fake_cluster import NS, FakeCluster, sampledb

from sampledb_operator.decide.lifecycle.lifecycle import FINALIZER
from sampledb_operator.decide.sharding import BUCKET_LABEL, BUCKETS, bucket_of

DB = "orders"
OWN = str(bucket_of(NS, DB))


class RecordingApi:
    """The fake cluster's SampleDB API, with the body of every metadata patch (not the status's) kept."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.bodies: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    async def patch(self, name: str, patch: Any, **options: Any) -> Any:
        if options.get("subresource") is None:
            self.bodies.append(copy.deepcopy(patch))
        return await self.api.patch(name, patch, **options)


def recording(cluster: FakeCluster) -> RecordingApi:
    api = RecordingApi(cluster.ctx.apis["SampleDB"])
    cluster.ctx.apis["SampleDB"] = api
    return api


def sharded() -> FakeCluster:
    """A fake cluster whose operator is a sharded replica (app.py: label_buckets when --shards > 1)."""
    cluster = FakeCluster()
    cluster.ctx.label_buckets = True
    return cluster


def metadata_writes(cluster: FakeCluster) -> list[tuple[str, str, str]]:
    """The writes to the SampleDB other than its status (create, apply, patch of its metadata)."""
    return [w for w in cluster.written(kind="SampleDB") if w[0] != "patch/status"]


def stored(cluster: FakeCluster) -> dict[str, Any]:
    obj = cluster.get("SampleDB", DB)
    assert obj is not None
    return obj["metadata"]


@pytest.mark.parametrize(("label_buckets", "labels"), [(True, {BUCKET_LABEL: OWN}), (False, {})],
                         ids=["sharded replica", "one operator"])
async def test_the_first_pass_writes_the_finalizer_and_a_sharded_replicas_bucket_label_in_one_patch(
        label_buckets: bool, labels: dict[str, str]) -> None:
    cluster = FakeCluster()
    cluster.ctx.label_buckets = label_buckets
    api = recording(cluster)
    cluster.put("SampleDB", sampledb(DB))
    await cluster.reconcile(DB)
    meta = stored(cluster)
    assert meta["finalizers"] == [FINALIZER]
    assert (meta.get("labels") or {}) == labels
    assert metadata_writes(cluster) == [("patch", "SampleDB", DB)]
    [body] = api.bodies
    assert body["metadata"]["finalizers"] == [FINALIZER]
    assert body["metadata"].get("labels", {}) == labels
    assert body["metadata"]["resourceVersion"]  # written on the copy the pass read, not over a newer one
    assert cluster.of_kind("StatefulSet")  # the pass went on with the labelled object
    await cluster.reconcile(DB)
    assert metadata_writes(cluster) == [("patch", "SampleDB", DB)]  # nothing more to add on the next pass


@pytest.mark.parametrize("wrong", [str((int(OWN) + 1) % BUCKETS), "garbage"])
async def test_a_wrong_bucket_label_is_put_right_on_the_next_pass(wrong: str) -> None:
    cluster = sharded()
    cluster.put("SampleDB", sampledb(DB))
    await cluster.reconcile(DB)
    cluster.patch("SampleDB", DB, {"metadata": {"labels": {BUCKET_LABEL: wrong, "team": "payments"},
                                                "finalizers": ["example.com/hold", FINALIZER]}})
    api = recording(cluster)
    before = len(metadata_writes(cluster))
    await cluster.reconcile(DB)
    meta = stored(cluster)
    assert meta["labels"] == {BUCKET_LABEL: OWN, "team": "payments"}
    assert meta["finalizers"] == ["example.com/hold", FINALIZER]
    assert len(metadata_writes(cluster)) == before + 1
    assert [b["metadata"].get("labels") for b in api.bodies] == [{BUCKET_LABEL: OWN}]
    assert "finalizers" not in api.bodies[0]["metadata"]  # it had the finalizer: only the label is written


async def test_a_sampledb_created_with_the_finalizer_and_a_wrong_label_gets_only_the_label() -> None:
    cluster = sharded()
    wrong = str((int(OWN) + 7) % BUCKETS)
    manifest = sampledb(DB)
    manifest["metadata"].update(finalizers=[FINALIZER], labels={BUCKET_LABEL: wrong})
    cluster.put("SampleDB", manifest)
    await cluster.reconcile(DB)
    meta = stored(cluster)
    assert meta["labels"] == {BUCKET_LABEL: OWN}
    assert meta["finalizers"] == [FINALIZER]
    assert metadata_writes(cluster) == [("patch", "SampleDB", DB)]


async def test_a_paused_sampledb_gets_the_label_but_not_the_finalizer() -> None:
    cluster = sharded()
    api = recording(cluster)
    cluster.put("SampleDB", sampledb(DB, paused=True))
    await cluster.reconcile(DB)
    meta = stored(cluster)
    assert meta["labels"] == {BUCKET_LABEL: OWN}
    assert FINALIZER not in (meta.get("finalizers") or [])
    assert [b["metadata"] for b in api.bodies] == [{"labels": {BUCKET_LABEL: OWN},
                                                    "resourceVersion": api.bodies[0]["metadata"]["resourceVersion"]}]
    assert not cluster.of_kind("StatefulSet")  # paused: nothing made
    await cluster.reconcile(DB)
    assert len(api.bodies) == 1  # labelled already: the next pass writes no metadata


async def test_one_operator_writes_no_metadata_for_a_sampledb_created_with_the_finalizer() -> None:
    # what the admission policy makes: the finalizer is there from the creation on, so the first pass goes
    # straight to the children, and neither it nor a later one writes the SampleDB's metadata
    cluster = FakeCluster()
    manifest = sampledb(DB)
    manifest["metadata"]["finalizers"] = [FINALIZER]
    cluster.put("SampleDB", manifest)
    await cluster.reconcile(DB)
    assert cluster.of_kind("StatefulSet")
    await cluster.reconcile(DB)
    assert metadata_writes(cluster) == []
    assert stored(cluster)["finalizers"] == [FINALIZER]
