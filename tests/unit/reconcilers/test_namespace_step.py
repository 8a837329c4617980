"""reconcilers/namespace.py on the fake cluster: a namespace is terminating when it is being deleted, says
phase Terminating, or is gone; an active one is not. Read live every time (namespaces are not cached)."""

from __future__ import annotations

import pytest
from tests.support.fake_cluster import NS, FakeCluster

from sampledb_operator.kube.errors import ServerError
from sampledb_operator.reconcilers.namespace import namespace_terminating


async def test_an_active_namespace_is_not_terminating() -> None:
    cluster = FakeCluster()
    assert not await namespace_terminating(cluster.ctx, NS)


async def test_a_namespace_with_a_deletion_timestamp_or_phase_terminating_is() -> None:
    cluster = FakeCluster()
    cluster.put("Namespace", {"metadata": {"name": "going", "deletionTimestamp": "2026-11-30T09:00:00Z"},
                              "status": {"phase": "Active"}})
    cluster.put("Namespace", {"metadata": {"name": "ending"}, "status": {"phase": "Terminating"}})
    assert await namespace_terminating(cluster.ctx, "going")
    assert await namespace_terminating(cluster.ctx, "ending")


async def test_a_namespace_that_is_gone_counts_as_terminating() -> None:
    cluster = FakeCluster()
    assert await namespace_terminating(cluster.ctx, "nowhere")


async def test_it_is_read_live_each_time() -> None:
    cluster = FakeCluster()
    assert not await namespace_terminating(cluster.ctx, NS)
    cluster.patch("Namespace", NS, {"status": {"phase": "Terminating"}})
    assert await namespace_terminating(cluster.ctx, NS)


async def test_other_errors_are_not_taken_for_an_answer() -> None:
    cluster = FakeCluster()
    cluster.fail("Namespace", "get", ServerError(500, "InternalError", "etcd timeout"))
    with pytest.raises(ServerError):
        await namespace_terminating(cluster.ctx, NS)
