"""app._sharing: an event of a namespace's shared scripts ConfigMap (deleted or edited by someone else) wakes
every database of that namespace; any other ConfigMap maps to none."""

from __future__ import annotations

from tests.support.fake_cluster import NS, FakeCluster, sampledb

from sampledb_operator import dataplane
from sampledb_operator.app import _sharing
from sampledb_operator.decide.children import desired as d
from sampledb_operator.model.sampledb import SampleDB
from sampledb_operator.runtime.store import ObjectRef


def test_the_shared_scripts_wake_every_database_of_the_namespace_and_nothing_else_does() -> None:
    cluster = FakeCluster()
    db = SampleDB.model_validate(cluster.put("SampleDB", sampledb("orders")))
    cluster.put("SampleDB", sampledb("billing"))
    shared = d.scripts_configmap(d.Inputs(db, dataplane.all_scripts()))
    assert sorted(_sharing(cluster.ctx, shared)) == sorted([ObjectRef(NS, "orders"), ObjectRef(NS, "billing")])
    assert _sharing(cluster.ctx, d.configmap(db, "pgdata")) == []
    impostor = {**shared, "metadata": {**shared["metadata"], "labels": {}}}  # a user's ConfigMap of that name
    assert _sharing(cluster.ctx, impostor) == []
